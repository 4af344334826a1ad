package cloudformation

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
)

const (
	paymentsRole = "arn:aws:iam::222222222222:role/osb-target"
	ledgerRole   = "arn:aws:iam::333333333333:role/osb-target"
	// paymentsExternalID must never reach an error or a log line.
	paymentsExternalID = "payments-7f3a-secret"
)

// placementConfig is the broker block of a plan with placement p.
func placementConfig(p map[string]any) map[string]any {
	return map[string]any{"template": "instance.yaml", "parameters": map[string]any{"Owner": "team-a"}, KeyPlacement: p}
}

func configurePlaced(t *testing.T, p map[string]any, createProps ...string) (*Settings, error) {
	t.Helper()
	dir := templateDir(t, map[string]string{"instance.yaml": instanceTemplate})
	plan := schemaPlan(t, map[catalog.SchemaKind][]string{
		catalog.InstanceCreate: append([]string{"Size", "Subnets", "Versioning"}, createProps...), catalog.InstanceUpdate: {"Size"}})
	return Configure(plan, placementConfig(p), dir)
}

func TestPlacementSettings(t *testing.T) {
	payments := map[string]any{"region": "eu-west-1", "role_arn": paymentsRole, "external_id": paymentsExternalID}
	for _, tc := range []struct {
		name      string
		placement map[string]any
		props     []string // more create schema properties
		want      string   // "" when the placement is valid
	}{
		{name: "one place for every instance is valid", placement: payments},
		{name: "a Region of the broker's own account is valid", placement: map[string]any{"region": "us-gov-west-1"}},
		{name: "the external id may be in a variable", placement: map[string]any{"role_arn": paymentsRole, "external_id_env": "PAYMENTS_EXTERNAL_ID"}},
		{name: "the external id may be in a secret, by name", placement: map[string]any{"role_arn": paymentsRole, "external_id_secret": "osb/payments-external-id"}},
		{name: "the external id may be in a secret, by ARN", placement: map[string]any{"role_arn": paymentsRole,
			"external_id_secret": "arn:aws:secretsmanager:eu-west-1:111111111111:secret:osb/payments-AbC123"}},
		{name: "an external id in a secret and in a variable is refused", placement: map[string]any{"role_arn": paymentsRole,
			"external_id_env": "X", "external_id_secret": "osb/payments"},
			want: "placement.external_id_env: is set with external_id_secret: give the external id one way"},
		{name: "a secret that is neither an ARN nor a name is refused", placement: map[string]any{"role_arn": paymentsRole,
			"external_id_secret": "arn:aws:s3:::bucket/key"},
			want: "placement.external_id_secret: \"arn:aws:s3:::bucket/key\" is neither a secret's ARN"},
		{name: "a secret's name may be 512 characters long", placement: map[string]any{"role_arn": paymentsRole,
			"external_id_secret": strings.Repeat("n", 512)}},
		{name: "a secret's name of 513 characters is refused", placement: map[string]any{"role_arn": paymentsRole,
			"external_id_secret": strings.Repeat("n", 513)},
			want: "placement.external_id_secret: \"nnn"},
		{name: "a secret's ARN may name 512 characters", placement: map[string]any{"role_arn": paymentsRole,
			"external_id_secret": "arn:aws:secretsmanager:eu-west-1:111111111111:secret:" + strings.Repeat("n", 512)}},
		{name: "a secret's ARN naming 513 characters is refused", placement: map[string]any{"role_arn": paymentsRole,
			"external_id_secret": "arn:aws:secretsmanager:eu-west-1:111111111111:secret:" + strings.Repeat("n", 513)},
			want: "is neither a secret's ARN"},
		{name: "a secret without a role is refused", placement: map[string]any{"external_id_secret": "osb/payments"},
			want: "placement.role_arn: is missing: an external id goes with the role"},
		{name: "a map by space with a default is valid", placement: map[string]any{"by": "space",
			"map": map[string]any{"space-payments": payments}, "default": map[string]any{"region": "us-east-1"}}},
		{name: "users may choose among the allowed Regions", props: []string{"region"},
			placement: map[string]any{"role_arn": paymentsRole, "external_id": paymentsExternalID, "region": "eu-west-1",
				"regions": []any{"eu-west-1", "eu-central-1"}, "region_parameter": "region"}},

		{name: "a pool of accounts in one Region is valid", placement: map[string]any{"region": "eu-west-1", "stack_quota": 1500, "max_share": 0.8,
			"pool": []any{map[string]any{"role_arn": paymentsRole, "external_id": paymentsExternalID}, map[string]any{"role_arn": ledgerRole, "external_id": "ledger-id"}}}},
		{name: "a pool names no role of its own", placement: map[string]any{"role_arn": paymentsRole, "external_id": paymentsExternalID,
			"pool": []any{map[string]any{"role_arn": ledgerRole, "external_id": "ledger-id"}}},
			want: "placement.role_arn: is set beside pool"},
		{name: "a pool's account has no Region of its own", placement: map[string]any{"region": "eu-west-1",
			"pool": []any{map[string]any{"role_arn": ledgerRole, "external_id": "ledger-id", "region": "us-east-1"}}},
			want: "placement.pool[0].region: is the pool's, not an account's"},
		{name: "a pool names each account once", placement: map[string]any{
			"pool": []any{map[string]any{"role_arn": ledgerRole, "external_id": "ledger-id"}, map[string]any{"role_arn": "arn:aws:iam::333333333333:role/other", "external_id": "ledger-id"}}},
			want: "placement.pool[1].role_arn: is in account 333333333333, which the pool names already"},
		{name: "a share above the whole quota is refused", placement: map[string]any{"max_share": 1.5,
			"pool": []any{map[string]any{"role_arn": ledgerRole, "external_id": "ledger-id"}}},
			want: "placement.max_share: must be a share of the quota above 0 and at most 1"},
		{name: "a quota goes with a pool", placement: map[string]any{"stack_quota": 10, "region": "eu-west-1"},
			want: "placement.stack_quota: goes with pool"},
		{name: "an unknown key is named", placement: map[string]any{"regoin": "eu-west-1"},
			want: "placement.regoin: unknown key"},
		{name: "a Region that is no Region name is refused", placement: map[string]any{"region": "Ireland"},
			want: `placement.region: "Ireland" is not a Region name`},
		{name: "a role that is no role ARN is refused", placement: map[string]any{"role_arn": "arn:aws:iam::222222222222:user/x", "external_id": paymentsExternalID},
			want: "placement.role_arn: \"arn:aws:iam::222222222222:user/x\" is not an IAM role ARN"},
		{name: "a role without an external id is refused", placement: map[string]any{"role_arn": paymentsRole},
			want: "placement.external_id: is missing"},
		{name: "an external id without a role is refused", placement: map[string]any{"external_id": paymentsExternalID},
			want: "placement.role_arn: is missing: an external id goes with the role"},
		{name: "an external id given two ways is refused", placement: map[string]any{"role_arn": paymentsRole, "external_id": paymentsExternalID, "external_id_env": "X"},
			want: "placement.external_id: is set with external_id_env"},
		{name: "an external id STS would refuse is refused without quoting it",
			placement: map[string]any{"role_arn": paymentsRole, "external_id": paymentsExternalID + " with spaces"},
			want:      "placement.external_id: must be 2 to 1224"},
		{name: "a service role of another account is refused",
			placement: map[string]any{"role_arn": paymentsRole, "external_id": paymentsExternalID, "service_role_arn": "arn:aws:iam::444444444444:role/cfn"},
			want:      "placement.service_role_arn: is in account 444444444444, but role_arn is in account 222222222222"},
		{name: "by must be something the context says", placement: map[string]any{"by": "team", "map": map[string]any{"a": payments}},
			want: "placement.by: must be one of organization, space, namespace, subaccount"},
		{name: "a map needs by", placement: map[string]any{"map": map[string]any{"a": payments}},
			want: "placement.map: needs by"},
		{name: "with by, a place goes under map or default", placement: map[string]any{"by": "space", "map": map[string]any{"a": payments}, "region": "eu-west-1"},
			want: "placement.region: is set beside by: space"},
		{name: "a mapped place is checked as any other", placement: map[string]any{"by": "organization", "map": map[string]any{"org-1": map[string]any{"role_arn": paymentsRole}}},
			want: "placement.map.org-1.external_id: is missing"},
		{name: "a place outside the allowed Regions is refused",
			placement: map[string]any{"regions": []any{"eu-west-1"}, "by": "space", "map": map[string]any{"a": map[string]any{"region": "us-east-1"}}},
			want:      "placement.map.a.region: us-east-1 is not one of the Regions the placement allows (eu-west-1)"},
		{name: "with allowed Regions, every place names one", placement: map[string]any{"regions": []any{"eu-west-1"}},
			want: "placement.region: is missing; the placement allows the Regions eu-west-1"},
		{name: "one role with two external ids is refused",
			placement: map[string]any{"by": "space", "map": map[string]any{"a": payments, "b": map[string]any{"role_arn": paymentsRole, "external_id": "other-id"}}},
			want:      "names the role " + paymentsRole + " twice"},
		{name: "a region parameter needs allowed Regions", props: []string{"region"},
			placement: map[string]any{"region_parameter": "region"},
			want:      "placement.region_parameter: is set without placement.regions"},
		{name: "a region parameter the create schema does not name is refused",
			placement: map[string]any{"region": "eu-west-1", "regions": []any{"eu-west-1"}, "region_parameter": "region"},
			want:      "placement.region_parameter: names region, which the plan's schemas.service_instance.create.parameters does not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := configurePlaced(t, tc.placement, tc.props...)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Configure: %v", err)
			case tc.want == "" && s.Placement == nil:
				t.Fatal("no placement")
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Configure: %v, want an error with %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), paymentsExternalID) {
				t.Errorf("the error quotes the external id: %v", err)
			}
		})
	}
	t.Run("the external id prints redacted", func(t *testing.T) {
		s, err := configurePlaced(t, payments)
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range []string{fmt.Sprint(s.Placement.Target), fmt.Sprintf("%+v", s.Placement.Target), fmt.Sprintf("%#v", s.Placement.Target)} {
			if strings.Contains(text, paymentsExternalID) {
				t.Errorf("printed: %s", text)
			}
		}
	})
}

func TestPlacementResolve(t *testing.T) {
	s, err := configurePlaced(t, map[string]any{
		"by":      "space",
		"regions": []any{"eu-west-1", "eu-central-1", "us-east-1"},
		"map": map[string]any{
			"space-payments": map[string]any{"region": "eu-west-1", "role_arn": paymentsRole, "external_id": paymentsExternalID},
			"space-ledger":   map[string]any{"region": "eu-central-1", "role_arn": ledgerRole, "external_id_env": "LEDGER_EXTERNAL_ID"},
		},
		"region_parameter": "region",
	}, "region")
	if err != nil {
		t.Fatal(err)
	}
	cf := func(space string) broker.InstanceRequest {
		return broker.InstanceRequest{OrganizationGUID: "org-1", SpaceGUID: space,
			Context: json.RawMessage(`{"platform":"cloudfoundry","organization_guid":"org-1","space_guid":"` + space + `"}`)}
	}
	t.Run("a mapped space gets its place", func(t *testing.T) {
		got, err := s.Placement.Resolve(cf("space-ledger"))
		if err != nil || got.RoleARN != ledgerRole || got.Region != "eu-central-1" || got.Account() != "333333333333" {
			t.Fatalf("got %+v, %v", got, err)
		}
	})
	t.Run("the space may come from the context alone", func(t *testing.T) {
		got, err := s.Placement.Resolve(broker.InstanceRequest{Context: json.RawMessage(`{"space_guid":"space-payments"}`)})
		if err != nil || got.RoleARN != paymentsRole {
			t.Fatalf("got %+v, %v", got, err)
		}
	})
	t.Run("a space the map does not name, with no default, is refused naming it", func(t *testing.T) {
		err := s.CheckProvision(cf("space-other"))
		if err == nil || !strings.Contains(err.Error(), "space space-other has no place (the plan has no default)") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a request with no space is refused saying so", func(t *testing.T) {
		err := s.CheckProvision(broker.InstanceRequest{})
		if err == nil || !strings.Contains(err.Error(), "the request names none (space_guid)") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("users choose an allowed Region by the parameter", func(t *testing.T) {
		req := cf("space-payments")
		req.Parameters = json.RawMessage(`{"Size":2,"region":"us-east-1"}`)
		got, err := s.Placement.Resolve(req)
		if err != nil || got.Region != "us-east-1" || got.RoleARN != paymentsRole {
			t.Fatalf("got %+v, %v", got, err)
		}
		if tp := string(s.Placement.templateParameters(req.Parameters)); tp != `{"Size":2}` {
			t.Errorf("the template gets %s, want the parameters without the Region", tp)
		}
	})
	t.Run("a Region the plan does not allow is refused, listing those it does", func(t *testing.T) {
		req := cf("space-payments")
		req.Parameters = json.RawMessage(`{"region":"ap-south-1"}`)
		err := s.CheckProvision(req)
		if err == nil || !strings.Contains(err.Error(), "parameters.region: is not a Region the plan allows; choose one of eu-west-1, eu-central-1 and us-east-1") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("the region parameter is accepted on provision only", func(t *testing.T) {
		if got := strings.Join(s.AcceptedParameters(catalog.InstanceCreate), ","); got != "Size,Subnets,Versioning,region" {
			t.Errorf("create accepts %s", got)
		}
		if got := strings.Join(s.AcceptedParameters(catalog.InstanceUpdate), ","); got != "Size" {
			t.Errorf("update accepts %s", got)
		}
	})
	t.Run("by subaccount reads SAP BTP's context", func(t *testing.T) {
		s, err := configurePlaced(t, map[string]any{"by": "subaccount",
			"map":     map[string]any{"sub-1": map[string]any{"region": "eu-central-1"}},
			"default": map[string]any{"region": "eu-west-1"}})
		if err != nil {
			t.Fatal(err)
		}
		for ctx, want := range map[string]string{`{"platform":"sapcp","subaccount_id":"sub-1"}`: "eu-central-1", `{"platform":"sapcp","subaccount_id":"sub-2"}`: "eu-west-1"} {
			got, err := s.Placement.Resolve(broker.InstanceRequest{Context: json.RawMessage(ctx)})
			if err != nil || got.Region != want {
				t.Errorf("%s: got %+v, %v, want %s", ctx, got, err, want)
			}
		}
	})
}

// TestStacksCarryTheCostAllocationTags: every stack (and through it every
// resource CloudFormation tags) carries what a bill is split by: the
// organization, space or subaccount, instance, plan and service.
func TestStacksCarryTheCostAllocationTags(t *testing.T) {
	h := newHarness(t, true)
	c := h.change(broker.KindProvision, "op-1")
	c.Instance.OrganizationGUID, c.Instance.SpaceGUID = "", ""
	c.Instance.Context = json.RawMessage(`{"platform":"sapcp","subaccount_id":"sub-7","globalaccount_id":"ga-1","instance_name":"ledger"}`)
	c.Service = &catalog.Service{ID: "svc-1", Name: "aws-s3-bucket"}
	if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil {
		t.Fatal(err)
	}
	tags := tagMap(h.cfn.get(h.instanceStack()).create.Tags)
	for k, want := range map[string]string{TagSubaccountID: "sub-7", TagInstanceID: instanceID, TagPlanID: "plan-1", TagPlanName: "private",
		TagServiceID: "svc-1", TagServiceName: "aws-s3-bucket"} {
		if tags[k] != want {
			t.Errorf("tag %s = %q, want %q (tags %v)", k, tags[k], want, tags)
		}
	}
}
