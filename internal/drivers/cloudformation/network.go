package cloudformation

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/serverless-osb/broker/internal/broker"
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
	var nets []*catalog.Network
	named := false
	if plan != nil {
		n, nets, named = plan.Settings.Network, plan.Settings.Networks, plan.Settings.NetworkNamed
	}
	_, usersFunction := bindingParameter(s, DatabaseUserFunctionParameter)
	takes := takesNetwork(s.Template) || takesNetwork(s.BindingTemplate)
	switch {
	case len(nets) > 0 && !takes && !usersFunction:
		return catalog.Settingf("network", "names the networks %s, but the plan's templates declare none of %s nor %s; remove network, or use templates that take it",
			names(nets), list(networkParameters), DatabaseUserFunctionParameter)
	case len(nets) > 0:
		byPlace, err := placedNetworks(nets, s.Placement)
		if err != nil {
			return err
		}
		// The first fixes the parameters as a network does (so that the
		// checks of what users and the plan may set are the same); each
		// instance's stacks take its place's (networkAt).
		n, s.PlaceNetworks = nets[0], byPlace
	case n != nil && named && !takes && !usersFunction:
		return catalog.Settingf("network", "names the network %s, but the plan's templates declare none of %s nor %s; remove network, or use templates that take it",
			n.Name, list(networkParameters), DatabaseUserFunctionParameter)
	case n != nil && named:
		if err := placedNetwork(n, s.Placement); err != nil {
			return err
		}
		if s.Placement != nil {
			s.PlaceNetworks = map[string]*catalog.Network{placeKey(n.Account, n.Region): n}
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
	maps.Copy(s.Parameters, networkAtPlace(s.Template, n))
	if fixed := networkAtPlace(s.BindingTemplate, n); len(fixed) > 0 {
		if s.BindingParameters == nil {
			s.BindingParameters = map[string]string{}
		}
		maps.Copy(s.BindingParameters, fixed)
	}
	s.Network = n
	return nil
}

// placedNetwork refuses a network that is not where the plan's stacks are
// made: one in another account and Region (Network.Placed) for a plan that
// is not placed there, and one beside the broker for a placed plan. A
// placed plan's one network is in the account and Region of every place its
// placement may choose (placesOf); a placement over several takes a list,
// a network per place (placedNetworks).
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
	places, err := placesOf(p)
	if err != nil {
		return err
	}
	for _, pl := range places {
		if pl.account != n.Account || pl.region != n.Region {
			return catalog.Settingf(pl.key, "places instances in account %s, %s, but the plan's network %s is in account %s, %s: name a network per place (network: a list of them), or place the plan in its network's account and Region only",
				pl.account, pl.region, n.Name, n.Account, n.Region)
		}
	}
	return nil
}

// placedNetworks checks a placed plan's list of networks, one per place:
// every place its placement may choose has one (its account and Region),
// and every network is a place's. It returns them by place (placeKey).
func placedNetworks(list []*catalog.Network, p *Placement) (map[string]*catalog.Network, error) {
	if p == nil {
		return nil, catalog.Settingf("network", "names a list of networks (%s), one per place of a placed plan, but the plan is not placed: name one network beside the broker", names(list))
	}
	byPlace := map[string]*catalog.Network{}
	for _, n := range list {
		byPlace[placeKey(n.Account, n.Region)] = n // the catalog checked each is placed, one per place
	}
	places, err := placesOf(p)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, pl := range places {
		k := placeKey(pl.account, pl.region)
		if byPlace[k] == nil {
			return nil, catalog.Settingf(pl.key, "places instances in account %s, %s, where none of the plan's networks (%s) is: add one there to the catalog's networks and to the plan's network list",
				pl.account, pl.region, names(list))
		}
		used[k] = true
	}
	for _, n := range list {
		if !used[placeKey(n.Account, n.Region)] {
			return nil, catalog.Settingf("network", "names the network %s, in account %s, %s, where the placement puts no instance: remove it from the list, or place instances there",
				n.Name, n.Account, n.Region)
		}
	}
	return byPlace, nil
}

// place is an account and Region a placement may put instances in, and
// the key of the catalog that says so.
type place struct{ key, account, region string }

// placesOf lists every account and Region p may put an instance in: each
// target's (the retired ones too, whose instances still bind), in each
// Region users may choose. Each is an account of its own with a Region
// named (its database user function is the target stack's there): a
// place in the broker's own account, or in the broker's own Region, is
// refused.
func placesOf(p *Placement) ([]place, error) {
	var out []place
	for _, m := range p.keyedTargets() {
		t := m.t
		if t.Account() == "" {
			return nil, catalog.Settingf(m.key, "is in the broker's own account (no role_arn), where the plan's networks cannot be: a plan with a network is placed in the accounts of its networks")
		}
		if t.Region == "" {
			return nil, catalog.Settingf(m.key, "is in account %s in the broker's own Region (it names none): name the region of the plan's network there", t.Account())
		}
		for _, r := range append([]string{t.Region}, p.Regions...) {
			key := m.key
			if r != t.Region {
				key = KeyPlacement + "." + keyRegions
			}
			if !slices.ContainsFunc(out, func(x place) bool { return x.account == t.Account() && x.region == r }) {
				out = append(out, place{key: key, account: t.Account(), region: r})
			}
		}
	}
	return out, nil
}

// placeKey is the key of PlaceNetworks.
func placeKey(account, region string) string { return account + " " + region }

// networkAt is the network of the stacks of an instance in place p: the
// plan's place network there, or its one network.
func (s *Settings) networkAt(p *Place) (*catalog.Network, error) {
	if len(s.PlaceNetworks) == 0 {
		return s.Network, nil
	}
	if p != nil {
		if n := s.PlaceNetworks[placeKey(p.Account, p.Region)]; n != nil {
			return n, nil
		}
	}
	where := "the broker's own account"
	if p != nil {
		where = fmt.Sprintf("account %s, %s", p.Account, p.Region)
	}
	return nil, &broker.Failure{Description: fmt.Sprintf(
		"The plan names no network in %s, where the service instance is, so its stacks there cannot be made. Ask the platform operator to add one to the plan's networks.", where),
		InstanceUsable: broker.Bool(true)}
}

// networkAtPlace are the values network n (the plan's, or an instance's:
// networkAt) fixes among t's parameters.
func networkAtPlace(t *Template, n *catalog.Network) map[string]string {
	if n == nil || t == nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range networkValues(n) {
		if _, ok := t.Parameters[k]; ok {
			out[k] = v
		}
	}
	return out
}

func names(list []*catalog.Network) string {
	var out []string
	for _, n := range list {
		out = append(out, n.Name)
	}
	return strings.Join(out, ", ")
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
// of a plan whose instance's network is n, under the deployment's stack
// prefix: the function infra deploys in the network's VPC. None when t
// does not declare the parameter.
func databaseUserFunction(prefix string, n *catalog.Network, t *Template) map[string]string {
	if _, ok := t.Parameters[DatabaseUserFunctionParameter]; !ok || n == nil {
		return nil
	}
	return map[string]string{DatabaseUserFunctionParameter: deploy.DatabaseUserFunctionName(prefix, n.VpcID)}
}
