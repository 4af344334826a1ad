package cloudformation

import (
	"slices"
	"strings"

	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/deploy"
)

// The template parameters a plan's network fixes (services/README.md,
// "Network placement"): every template of a service in a VPC takes them,
// under these names.
const (
	VpcIDParameter                 = "VpcId"
	SubnetIDsParameter             = "SubnetIds"
	ClientCIDRParameter            = "ClientCidr"
	ClientSecurityGroupIDParameter = "ClientSecurityGroupId"
	// DatabaseUserFunctionParameter names the broker's Custom::DatabaseUser
	// function in the network's VPC, which a binding template that makes a
	// database user per binding calls; the driver passes it at bind.
	DatabaseUserFunctionParameter = "DatabaseUserFunction"
)

var networkParameters = []string{VpcIDParameter, SubnetIDsParameter, ClientCIDRParameter, ClientSecurityGroupIDParameter}

// values are the template parameters n fixes.
func networkValues(n *catalog.Network) map[string]string {
	return map[string]string{
		VpcIDParameter:                 n.VpcID,
		SubnetIDsParameter:             strings.Join(n.SubnetIDs, ","),
		ClientCIDRParameter:            n.ClientCIDR,
		ClientSecurityGroupIDParameter: n.ClientSecurityGroupID,
	}
}

// takesNetwork says whether t declares any network parameter.
func takesNetwork(t *Template) bool {
	if t == nil {
		return false
	}
	for _, name := range networkParameters {
		if _, ok := t.Parameters[name]; ok {
			return true
		}
	}
	return false
}

// configureNetwork fixes the templates' network parameters from the plan's
// network (broker.network, or the catalog's default): the plan may not fix
// them itself, nor a schema name them (checkSchemas, as for any fixed
// parameter). A plan that names a network its templates do not take is
// refused; the default network passes by a plan whose templates take none,
// and by a placed plan (the default is the broker's own). A placed plan
// names a network in the account and Region it is placed in, and only a
// placed plan names a network in another account and Region
// (placedNetwork). A binding template that declares DatabaseUserFunction
// needs a network (the function runs in its VPC): without one, every bind
// is refused (CheckBind) and the broker warns at start.
func configureNetwork(plan *catalog.Plan, s *Settings) error {
	var n *catalog.Network
	named := false
	if plan != nil {
		n, named = plan.Settings.Network, plan.Settings.NetworkNamed
	}
	_, usersFunction := bindingParameter(s, DatabaseUserFunctionParameter)
	takes := takesNetwork(s.Template) || takesNetwork(s.BindingTemplate)
	switch {
	case n != nil && named && !takes && !usersFunction:
		return catalog.Settingf("network", "names the network %s, but the plan's templates declare none of %s nor %s; remove network, or use templates that take it",
			n.Name, list(networkParameters), DatabaseUserFunctionParameter)
	case n != nil && named:
		if err := placedNetwork(n, s.Placement); err != nil {
			return err
		}
	case n != nil && (s.Placement != nil || (!takes && !usersFunction)):
		n = nil // the default network is for plans beside the broker that take one
	}
	if usersFunction && n == nil {
		// As a role plan without its trust anchor: the broker starts,
		// warns, and refuses every bind (CheckBind) until the operator
		// gives the plan a network.
		s.UsersWithoutNetwork = true
	}
	if n == nil {
		return nil
	}
	if s.Parameters == nil {
		s.Parameters = map[string]string{}
	}
	values := networkValues(n)
	for _, pair := range []struct {
		t     *Template
		fixed map[string]string
		key   string
	}{{s.Template, s.Parameters, KeyParameters}, {s.BindingTemplate, s.BindingParameters, KeyBindingParameters}} {
		if pair.t == nil {
			continue
		}
		for _, name := range networkParameters {
			if _, ok := pair.t.Parameters[name]; !ok {
				continue
			}
			if _, ok := pair.fixed[name]; ok {
				return catalog.Settingf(pair.key+"."+name, "the plan's network %s fixes %s; remove it here (or change the network in the catalog's networks)", n.Name, name)
			}
		}
	}
	for _, name := range networkParameters {
		if _, ok := s.Template.Parameters[name]; ok {
			s.Parameters[name] = values[name]
		}
		if s.BindingTemplate != nil {
			if _, ok := s.BindingTemplate.Parameters[name]; ok {
				if s.BindingParameters == nil {
					s.BindingParameters = map[string]string{}
				}
				s.BindingParameters[name] = values[name]
			}
		}
	}
	s.Network = n
	return nil
}

// placedNetwork refuses a network that is not where the plan's stacks are
// made: one in another account and Region (Network.Placed) for a plan that
// is not placed there, and one beside the broker for a placed plan. A
// placed plan's network is in the account and Region of every place its
// placement may choose (the retired ones too, whose instances still bind),
// since the plan has one network: a placement over several accounts or
// Regions cannot take one.
func placedNetwork(n *catalog.Network, p *Placement) error {
	if p == nil {
		if n.Placed() {
			return catalog.Settingf("network", "names the network %s, which is in account %s, %s, but the plan is not placed there: its stacks are made beside the broker. Place the plan there (%s with the role of account %s and region %s), or name a network beside the broker (one without account and region)",
				n.Name, n.Account, n.Region, KeyPlacement, n.Account, n.Region)
		}
		return nil
	}
	if !n.Placed() {
		return catalog.Settingf("network", "names the network %s, which is beside the broker, but the plan is placed (%s) in another account or Region: name a network of the account and Region it is placed in (a network with account and region), or remove network",
			n.Name, KeyPlacement)
	}
	for _, r := range p.Regions {
		if r != n.Region {
			return catalog.Settingf(KeyPlacement+"."+keyRegions, "lets users choose %s, but the plan's network %s is in %s: a plan with a network is placed in that network's Region only", r, n.Name, n.Region)
		}
	}
	for _, t := range p.Targets() {
		switch {
		case t.Account() == "":
			return catalog.Settingf(KeyPlacement, "has a place in the broker's own account (no role_arn), but the plan's network %s is in account %s: a plan with a network is placed in that network's account only", n.Name, n.Account)
		case t.Account() != n.Account:
			return catalog.Settingf(KeyPlacement, "has a place in account %s (%s), but the plan's network %s is in account %s: a plan with a network is placed in that network's account only", t.Account(), t.RoleARN, n.Name, n.Account)
		case t.Region != n.Region:
			region := t.Region
			if region == "" {
				region = "the broker's own Region (it names none)"
			}
			return catalog.Settingf(KeyPlacement, "has a place in %s, but the plan's network %s is in %s: name region %s in the placement", region, n.Name, n.Region, n.Region)
		}
	}
	return nil
}

// bindingParameter says whether the binding template declares name.
func bindingParameter(s *Settings, name string) (Parameter, bool) {
	if s.BindingTemplate == nil {
		return Parameter{}, false
	}
	p, ok := s.BindingTemplate.Parameters[name]
	return p, ok
}

// isNetworkParameter says whether name is one a network fixes.
func isNetworkParameter(name string) bool { return slices.Contains(networkParameters, name) }

// databaseUserFunction is the DatabaseUserFunction value for template t
// of a plan with settings s under the deployment's stack prefix: the
// function infra deploys in the network's VPC. None when t does not
// declare the parameter.
func databaseUserFunction(prefix string, s *Settings, t *Template) map[string]string {
	if _, ok := t.Parameters[DatabaseUserFunctionParameter]; !ok || s == nil || s.Network == nil {
		return nil
	}
	return map[string]string{DatabaseUserFunctionParameter: deploy.DatabaseUserFunctionName(prefix, s.Network.VpcID)}
}
