package cloudformation

import (
	"fmt"
	"slices"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
)

// Bindings without long-lived keys. A plan with binding_credentials: role
// has a binding template that makes an IAM role which only the bound app's
// Cloud Foundry instance identity certificates can assume, through IAM
// Roles Anywhere, rather than an IAM user with an access key (the default,
// access_key). The driver passes the template two parameters of its own:
// the app's GUID, from the bind request, and the plan's trust anchor, the
// operator's registration of the platform's instance identity CA
// (docs/app-identity.md).
const (
	KeyBindingCredentials = "binding_credentials"
	KeyTrustAnchorARN     = "trust_anchor_arn"

	// CredentialsAccessKey and CredentialsRole are binding_credentials'
	// values.
	CredentialsAccessKey = "access_key"
	CredentialsRole      = "role"

	// AppGUIDParameter and TrustAnchorParameter are the binding template
	// parameters the driver sets on a role plan; neither users nor the
	// plan's binding_parameters may.
	AppGUIDParameter     = "AppGuid"
	TrustAnchorParameter = "TrustAnchorArn"
)

var (
	// appGUIDPattern is a Cloud Foundry GUID as Cloud Controller writes it
	// and Diego copies it into the certificate: a lower-case UUID. Nothing
	// else may reach the trust policy, where * and ? would be wildcards.
	appGUIDPattern     = lazyPattern(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	trustAnchorPattern = lazyPattern(`^arn:aws[a-z-]*:rolesanywhere:[a-z0-9-]+:[0-9]{12}:trust-anchor/[0-9a-f-]{36}$`)
)

// roleParameters are the binding template parameters only a role plan's
// driver sets.
var roleParameters = []string{AppGUIDParameter, TrustAnchorParameter}

// driverSupplied says whether the driver itself passes the template
// parameter name (the boundary, and on a role plan the app's GUID and the
// trust anchor): no plan fixes it, no schema names it, no user sets it.
// Configure refuses a template that declares a role parameter on a plan
// that is not a role plan.
func driverSupplied(name string) bool {
	return name == BoundaryParameter || slices.Contains(roleParameters, name) || name == DatabaseUserFunctionParameter
}

// configureCredentials reads binding_credentials and trust_anchor_arn, and
// checks the templates against them: a role plan's binding template
// declares the role parameters, and no other plan's template declares
// either (a template whose AppGuid kept a default would admit any app).
func configureCredentials(config map[string]any, s *Settings) error {
	s.BindingCredentials = CredentialsAccessKey
	if v, ok := config[KeyBindingCredentials]; ok {
		text, _ := v.(string)
		if text != CredentialsAccessKey && text != CredentialsRole {
			return catalog.Settingf(KeyBindingCredentials, "must be %s (an IAM user with an access key, the default) or %s (an IAM role that only the bound app's instance identity certificates can assume, through IAM Roles Anywhere), got %s",
				CredentialsAccessKey, CredentialsRole, catalog.Describe(v))
		}
		s.BindingCredentials = text
	}
	if v, ok := config[KeyTrustAnchorARN]; ok {
		text, _ := v.(string)
		if !trustAnchorPattern().MatchString(text) {
			return catalog.Settingf(KeyTrustAnchorARN, "must be the ARN of an IAM Roles Anywhere trust anchor in the broker's account and Region (arn:aws:rolesanywhere:REGION:ACCOUNT:trust-anchor/ID), the platform's instance identity CA registered once by the operator; got %s",
				catalog.Describe(v))
		}
		if s.BindingCredentials != CredentialsRole {
			return catalog.Settingf(KeyTrustAnchorARN, "is set, but the plan's bindings are access keys; set %s: %s to hand out roles that trust it, or remove it",
				KeyBindingCredentials, CredentialsRole)
		}
		s.TrustAnchorARN = text
	}

	templates := []struct {
		key string
		t   *Template
	}{{KeyTemplate, s.Template}, {KeyBindingTemplate, s.BindingTemplate}}
	for _, tt := range templates {
		if tt.t == nil || (tt.key == KeyBindingTemplate && s.BindingCredentials == CredentialsRole) {
			continue
		}
		for _, name := range roleParameters {
			if _, ok := tt.t.Parameters[name]; ok {
				return catalog.Settingf(tt.key, "%s declares the parameter %s, which the driver passes only to the binding template of a plan with %s: %s; set that, or remove the parameter",
					tt.t.Path, name, KeyBindingCredentials, CredentialsRole)
			}
		}
	}
	if s.BindingCredentials != CredentialsRole {
		return nil
	}
	if s.BindingTemplate == nil {
		return catalog.Settingf(KeyBindingCredentials, "is %s, but the plan has no %s to make the role; name one (services/s3-bucket/binding-role.yaml is an example)",
			CredentialsRole, KeyBindingTemplate)
	}
	for _, name := range roleParameters {
		if p, ok := s.BindingTemplate.Parameters[name]; !ok || p.Type != "String" {
			return catalog.Settingf(KeyBindingTemplate, "%s must declare the parameter %s (Type: String), through which the driver hands a role plan's binding %s; see services/s3-bucket/binding-role.yaml",
				s.BindingTemplate.Path, name, roleParameterMeaning[name])
		}
	}
	return nil
}

var roleParameterMeaning = map[string]string{
	AppGUIDParameter:              "the bound app's GUID (the bind request's app_guid)",
	TrustAnchorParameter:          "the plan's " + KeyTrustAnchorARN,
	DatabaseUserFunctionParameter: "the broker's Custom::DatabaseUser function in the plan's network's VPC",
}

// Warning is what the operator should know of the plan at start
// (drivers.Kind.Warning), empty when nothing: a role plan without its
// trust anchor refuses every bind until the operator names one.
func (s *Settings) Warning() string {
	if s.UsersWithoutNetwork {
		return fmt.Sprintf("the plan's bindings are users its broker's database user function makes (%s declares %s), but the plan has no network, in whose VPC the function runs: every bind is refused until the platform operator gives it one (the catalog's networks:, the plan's broker.network; for a placed plan, a network with the account and region it is placed in)",
			s.BindingTemplate.Path, DatabaseUserFunctionParameter)
	}
	if s.BindingCredentials != CredentialsRole || s.TrustAnchorARN != "" {
		return ""
	}
	return fmt.Sprintf("the plan hands out IAM roles (%s: %s) but names no %s: every bind is refused until the platform operator registers the platform's instance identity CA with IAM Roles Anywhere and names the trust anchor in the plan",
		KeyBindingCredentials, CredentialsRole, KeyTrustAnchorARN)
}

var _ broker.BindChecker = (*Settings)(nil)

// CheckBind refuses, before anything is written, a bind that a role plan
// cannot make: one without the app it binds (a service key: OSB's
// RequiresApp), one whose app GUID is not a Cloud Foundry GUID, and any
// while the plan names no trust anchor; and any bind of a plan whose
// bindings need the database user function but which has no network.
func (s *Settings) CheckBind(r broker.BindingRequest) error {
	if e := s.bindRefusal(r); e != nil {
		return e
	}
	return nil
}

func (s *Settings) bindRefusal(r broker.BindingRequest) *broker.Error {
	if s.UsersWithoutNetwork {
		return broker.Errorf(broker.CodeUnprocessable,
			"The plan's bindings are users of their own that the broker makes inside the service's network, but the platform operator has not given the plan a network yet, so no binding can be made. Ask the platform operator to set the plan's network (the catalog's networks; for a plan placed in another account, a network there).")
	}
	if s.BindingCredentials != CredentialsRole {
		return nil
	}
	if s.TrustAnchorARN == "" {
		return broker.Errorf(broker.CodeUnprocessable,
			"The plan's bindings are IAM roles that trust the platform's app instance identity certificates, but the platform operator has not registered the platform's instance identity CA with IAM Roles Anywhere for this broker yet, so no binding can be made. Ask the platform operator to set the plan's %s.",
			KeyTrustAnchorARN)
	}
	if r.AppGUID == "" {
		return broker.Errorf(broker.CodeRequiresApp,
			"The plan's bindings are IAM roles that only the bound app's instance identity certificates can assume, so a binding needs an app: bind the service instance to an app (cf bind-service) rather than create a service key.")
	}
	if !appGUIDPattern().MatchString(r.AppGUID) {
		return broker.Errorf(broker.CodeBadRequest,
			"app_guid: must be a Cloud Foundry app GUID in lower case (8-4-4-4-12 hexadecimal digits), as the app's instance identity certificates carry it: the plan's bindings are IAM roles that admit only that app's certificates.")
	}
	return nil
}

// bindingRoleParameters are the role parameters of a role plan's binding
// stack. The broker checked the request (CheckBind), but a bind accepted
// under an earlier catalog, or by another broker, is checked again here:
// nothing else may reach the trust policy.
func (s *Settings) bindingRoleParameters(c broker.Change) (map[string]string, error) {
	if s.BindingCredentials != CredentialsRole {
		return nil, nil
	}
	var r broker.BindingRequest
	if c.Binding != nil {
		r = c.Binding.BindingRequest
	}
	if e := s.bindRefusal(r); e != nil {
		return nil, &broker.Failure{Description: e.Description}
	}
	return map[string]string{AppGUIDParameter: r.AppGUID, TrustAnchorParameter: s.TrustAnchorARN}, nil
}
