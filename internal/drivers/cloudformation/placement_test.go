package cloudformation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	cfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	ststypes "github.com/aws/aws-sdk-go-v2/service/sts/types"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/deploy"
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

// refusingSTS is a named fake of STS for what moto cannot do: moto grants
// every AssumeRole, checking neither trust policies nor external ids.
// It refuses every AssumeRole as STS refuses one its trust policy does not
// allow, and counts the calls.
type refusingSTS struct{ calls int }

func (f *refusingSTS) AssumeRole(context.Context, *sts.AssumeRoleInput, ...func(*sts.Options)) (*sts.AssumeRoleOutput, error) {
	f.calls++
	return nil, apiErr("AccessDenied", "User: arn:aws:sts::123456789012:assumed-role/worker/x is not authorized to perform: sts:AssumeRole on resource: "+paymentsRole)
}

// countingSTS is a named fake of STS that grants every AssumeRole with
// credentials that last `lifetime`, and records the calls.
type countingSTS struct {
	mu       sync.Mutex
	lifetime time.Duration
	inputs   []sts.AssumeRoleInput
}

func (f *countingSTS) AssumeRole(_ context.Context, in *sts.AssumeRoleInput, _ ...func(*sts.Options)) (*sts.AssumeRoleOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inputs = append(f.inputs, *in)
	return &sts.AssumeRoleOutput{Credentials: &ststypes.Credentials{AccessKeyId: aws.String(fmt.Sprintf("ASIA%d", len(f.inputs))),
		SecretAccessKey: aws.String("s"), SessionToken: aws.String("t"), Expiration: aws.Time(time.Now().Add(f.lifetime))}}, nil
}

func (f *countingSTS) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.inputs)
}

// placedHarness is the driver harness with a plan placed in the payments
// account, whose clients use sts and give the fake CloudFormation.
func placedHarness(t *testing.T, sts interface {
	AssumeRole(context.Context, *sts.AssumeRoleInput, ...func(*sts.Options)) (*sts.AssumeRoleOutput, error)
}) *harness {
	h := newHarness(t, false)
	s, err := configurePlaced(t, map[string]any{"region": "eu-west-1", "role_arn": paymentsRole, "external_id": paymentsExternalID})
	if err != nil {
		t.Fatal(err)
	}
	h.settings = s
	h.driver.Clients = &Clients{Base: aws.Config{Region: "us-east-1"}, STS: sts, NewAPI: func(aws.Config) API { return h.cfn }}
	h.driver.Roles, err = RolesOf([]*Settings{s})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestRefusedAssumeRole(t *testing.T) {
	fake := &refusingSTS{}
	h := placedHarness(t, fake)
	_, err := h.driver.Begin(h.ctx, h.fresh(h.change(broker.KindProvision, "op-1")))
	f := failureOf(t, err)
	t.Run("the provision fails naming the role and the likely causes", func(t *testing.T) {
		for _, want := range []string{"could not assume the role " + paymentsRole, "account 222222222222", "AccessDenied", "trust policy", "external id"} {
			if !strings.Contains(f.Description, want) {
				t.Errorf("description %q lacks %q", f.Description, want)
			}
		}
		if fake.calls == 0 {
			t.Error("STS was not asked")
		}
	})
	t.Run("the description and the logs never hold the external id", func(t *testing.T) {
		if strings.Contains(f.Description, paymentsExternalID) || strings.Contains(h.logs.String(), paymentsExternalID) {
			t.Errorf("description %q, logs %s", f.Description, h.logs)
		}
	})
	t.Run("nothing was made and nothing is left on record to clean up", func(t *testing.T) {
		if n := h.cfn.count("CreateStack"); n != 0 {
			t.Errorf("%d CreateStack calls", n)
		}
		if _, found := h.record(instanceRecord); found {
			t.Error("a stack record was written")
		}
	})
}

func TestPlacedCredentials(t *testing.T) {
	t.Run("one AssumeRole per role, with the external id, for the credentials' lifetime", func(t *testing.T) {
		fake := &countingSTS{lifetime: time.Hour}
		h := placedHarness(t, fake)
		h.provisioned()
		if _, err := h.driver.Begin(h.ctx, h.fresh(h.change(broker.KindDeprovision, "op-deprovision"))); err != nil {
			t.Fatal(err)
		}
		if fake.count() != 1 {
			t.Fatalf("%d AssumeRole calls, want 1", fake.count())
		}
		in := fake.inputs[0]
		if aws.ToString(in.RoleArn) != paymentsRole || aws.ToString(in.ExternalId) != paymentsExternalID {
			t.Errorf("AssumeRole of %s with the external id given: %v", aws.ToString(in.RoleArn), aws.ToString(in.ExternalId) == paymentsExternalID)
		}
		rec, _ := h.record(instanceRecord)
		if rec.Place == nil || *rec.Place != (Place{Region: "eu-west-1", RoleARN: paymentsRole, Account: "222222222222"}) {
			t.Errorf("the record's place is %+v", rec.Place)
		}
	})
	t.Run("credentials about to expire are refreshed before a call", func(t *testing.T) {
		// Credentials that end within the refresh window are refreshed at
		// every use: each step asks STS again.
		fake := &countingSTS{lifetime: credentialsWindow / 2}
		h := placedHarness(t, fake)
		h.provisioned()
		if fake.count() < 2 {
			t.Fatalf("%d AssumeRole calls, want one per step", fake.count())
		}
	})
	t.Run("the stack is created under the target account's service role", func(t *testing.T) {
		fake := &countingSTS{lifetime: time.Hour}
		h := placedHarness(t, fake)
		s, err := configurePlaced(t, map[string]any{"region": "eu-west-1", "role_arn": paymentsRole, "external_id": paymentsExternalID,
			"service_role_arn": "arn:aws:iam::222222222222:role/osb-cfn"})
		if err != nil {
			t.Fatal(err)
		}
		h.settings = s
		h.driver.Roles, _ = RolesOf([]*Settings{s})
		h.provisioned()
		if got := aws.ToString(h.cfn.get(h.instanceStack()).create.RoleARN); got != "arn:aws:iam::222222222222:role/osb-cfn" {
			t.Errorf("created under %q", got)
		}
	})
}

// TestAnInstanceKeepsItsPlace: the record's place, not the catalog's
// placement as it is now, says where later operations go.
func TestAnInstanceKeepsItsPlace(t *testing.T) {
	t.Run("a role the catalog no longer names fails the operation saying so", func(t *testing.T) {
		h := placedHarness(t, &countingSTS{lifetime: time.Hour})
		h.provisioned()
		h.driver.Roles = Roles{}
		_, err := h.driver.Begin(h.ctx, h.fresh(h.change(broker.KindDeprovision, "op-deprovision")))
		f := failureOf(t, err)
		if !strings.Contains(f.Description, "reached through the role "+paymentsRole+", which the catalog no longer names") {
			t.Errorf("description %q", f.Description)
		}
	})
	t.Run("a retired place's role is still assumed for the instances that live there", func(t *testing.T) {
		fake := &countingSTS{lifetime: time.Hour}
		h := placedHarness(t, fake)
		h.provisioned()
		s, err := configurePlaced(t, map[string]any{"region": "eu-central-1", "role_arn": ledgerRole, "external_id": "ledger-id",
			"retired": []any{map[string]any{"role_arn": paymentsRole, "external_id": paymentsExternalID}}})
		if err != nil {
			t.Fatal(err)
		}
		if h.driver.Roles, err = RolesOf([]*Settings{s}); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Placement.Resolve(broker.InstanceRequest{}); got.RoleARN != ledgerRole {
			t.Errorf("a new instance goes to %s, want %s", got.RoleARN, ledgerRole)
		}
		c := h.change(broker.KindDeprovision, "op-deprovision")
		c.Settings = s
		if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil {
			t.Fatal(err)
		}
		// The provision's credentials of the role, still valid, serve.
		for _, in := range fake.inputs {
			if aws.ToString(in.RoleArn) != paymentsRole {
				t.Errorf("AssumeRole of %s, want only %s", aws.ToString(in.RoleArn), paymentsRole)
			}
		}
		if len(h.cfn.get(h.instanceStack()).deletes) != 1 {
			t.Error("the stack was not deleted where it is")
		}
	})
	t.Run("a record made before placement is the broker's own account", func(t *testing.T) {
		fake := &countingSTS{lifetime: time.Hour}
		h := placedHarness(t, fake)
		h.settings = newHarness(t, false).settings // the plan as it was, unplaced
		h.provisioned()
		rec, _ := h.record(instanceRecord)
		if rec.Place == nil || rec.Place.RoleARN != "" || rec.Place.Region != "us-east-1" {
			t.Fatalf("the record's place is %+v", rec.Place)
		}
		if fake.count() != 0 {
			t.Errorf("%d AssumeRole calls for the broker's own account", fake.count())
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

// listingStacks is the fake CloudFormation with ListStacks, which a pool
// counts its accounts' stacks with.
type listingStacks struct{ *fakeStacks }

func (f listingStacks) ListStacks(_ context.Context, in *cfn.ListStacksInput, _ ...func(*cfn.Options)) (*cfn.ListStacksOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &cfn.ListStacksOutput{}
	for _, s := range f.stacks {
		if slices.Contains(in.StackStatusFilter, s.stack.StackStatus) {
			out.StackSummaries = append(out.StackSummaries, types.StackSummary{StackName: s.stack.StackName, StackStatus: s.stack.StackStatus})
		}
	}
	return out, nil
}

// pooledHarness is the driver harness with a plan placed in a pool of the
// payments and ledger accounts, each with its own fake CloudFormation.
func pooledHarness(t *testing.T, quota int) (h *harness, payments, ledger *fakeStacks) {
	h = newHarness(t, false)
	s, err := configurePlaced(t, map[string]any{"region": "eu-west-1", "stack_quota": quota, "max_share": 1,
		"pool": []any{map[string]any{"role_arn": paymentsRole, "external_id": paymentsExternalID}, map[string]any{"role_arn": ledgerRole, "external_id": "ledger-id"}}})
	if err != nil {
		t.Fatal(err)
	}
	h.settings = s
	payments, ledger = newFakeStacks(), newFakeStacks()
	sts := &countingSTS{lifetime: time.Hour}
	made := 0
	h.driver.Clients = &Clients{Base: aws.Config{Region: "us-east-1"}, STS: sts, NewAPI: func(cfg aws.Config) API {
		// One client per account, made in the pool's order: payments,
		// then ledger.
		made++
		if made == 1 {
			return listingStacks{payments}
		}
		return listingStacks{ledger}
	}}
	if h.driver.Roles, err = RolesOf([]*Settings{s}); err != nil {
		t.Fatal(err)
	}
	return h, payments, ledger
}

func TestAPoolPlacesWhereThereIsRoom(t *testing.T) {
	t.Run("the instance goes to the account with the most room, and its record says so", func(t *testing.T) {
		h, payments, ledger := pooledHarness(t, 3)
		payments.add("osb-a", types.StackStatusCreateComplete)
		payments.add("osb-b", types.StackStatusUpdateComplete)
		payments.add("other-c", types.StackStatusCreateComplete) // not the broker's
		ledger.add("osb-d", types.StackStatusCreateComplete)
		ledger.add("osb-e", types.StackStatusDeleteComplete) // gone
		if _, err := h.driver.Begin(h.ctx, h.fresh(h.change(broker.KindProvision, "op-1"))); err != nil {
			t.Fatal(err)
		}
		if ledger.get(h.instanceStack()) == nil || payments.get(h.instanceStack()) != nil {
			t.Error("the stack was not made in the ledger account, which has the most room")
		}
		if rec, _ := h.record(instanceRecord); rec.Place == nil || rec.Place.RoleARN != ledgerRole || rec.Place.Region != "eu-west-1" {
			t.Errorf("the record's place is %+v", rec.Place)
		}
		if strings.Contains(h.logs.String(), PoolNearlyFull) {
			t.Errorf("a pool with room is said to be nearly full:\n%s", h.logs)
		}
	})
	t.Run("with every account at its share, the provision fails naming the counts, and the request is refused with 422", func(t *testing.T) {
		h, payments, ledger := pooledHarness(t, 1)
		payments.add("osb-a", types.StackStatusCreateComplete)
		ledger.add("osb-b", types.StackStatusCreateComplete)
		c := h.change(broker.KindProvision, "op-1")
		_, err := h.driver.Begin(h.ctx, h.fresh(c))
		f := failureOf(t, err)
		if !strings.Contains(f.Description, "Every account of the plan's pool in eu-west-1 holds 100% or more of its quota of 1 stacks (1, 1 stacks)") {
			t.Errorf("description %q", f.Description)
		}
		if _, found := h.record(instanceRecord); found {
			t.Error("a record was written")
		}
		if !strings.Contains(h.logs.String(), `"msg":"`+PoolNearlyFull+`"`) {
			t.Errorf("no log line %q, which the stack alarms on:\n%s", PoolNearlyFull, h.logs)
		}
		var be *broker.Error
		if err := h.driver.CheckRoom(h.ctx, c.Instance.InstanceRequest, h.settings); !errors.As(err, &be) || be.Code != broker.CodeUnprocessable {
			t.Errorf("CheckRoom: %v, want 422", err)
		}
	})
	t.Run("the api function's driver refuses the request alike, names the same leftovers, and changes no stack", func(t *testing.T) {
		h, payments, ledger := pooledHarness(t, 1)
		payments.add("osb-a", types.StackStatusCreateComplete)
		ledger.add("osb-b", types.StackStatusCreateComplete)
		a := Admit(h.driver)
		c := h.change(broker.KindProvision, "op-1")
		var be *broker.Error
		if err := a.CheckRoom(h.ctx, c.Instance.InstanceRequest, h.settings); !errors.As(err, &be) || be.Code != broker.CodeUnprocessable ||
			!strings.Contains(be.Description, "(1, 1 stacks)") {
			t.Errorf("CheckRoom: %v, want 422 naming the counts", err)
		}
		want, _ := h.driver.Leftovers(h.ctx, c)
		if got, err := a.Leftovers(h.ctx, c); err != nil || !slices.Equal(got, want) {
			t.Errorf("Leftovers = %v, %v; want %v", got, err, want)
		}
		if _, err := a.Begin(h.ctx, h.fresh(c)); err == nil || errors.As(err, new(*broker.Failure)) {
			t.Errorf("Begin: %v, want a transient refusal", err)
		}
		if payments.get(h.instanceStack()) != nil || ledger.get(h.instanceStack()) != nil {
			t.Error("the api's driver made a stack")
		}
	})
}

// TestPlacedPlansCallTheBrokersFunctionsWhereTheyArePlaced: every shipped
// plan whose templates declare a custom resource the broker's functions
// answer (a database, search or cache user) may be placed in an account
// with the target stack, which deploys those functions there; its
// database users wait for a network there. Placed in the broker's own
// account in another Region, where no function is, it is refused, naming
// the type.
func TestPlacedPlansCallTheBrokersFunctionsWhereTheyArePlaced(t *testing.T) {
	cat, err := catalog.Load("../../../services/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	placed := map[string]bool{}
	for _, svc := range cat.Services() {
		for _, plan := range svc.Plans {
			config := maps.Clone(plan.Settings.Config)
			if config[KeyTemplate] == nil {
				continue // another driver's plan
			}
			home, err := Configure(plan, config, "../../../services")
			if err != nil {
				t.Fatalf("%s/%s: %v", svc.Name, plan.Name, err)
			}
			handled := ""
			for _, typ := range CustomResources([]*Settings{home}) {
				if slices.Contains(deploy.BrokerHandled, typ) {
					handled = typ
				}
			}
			config[KeyPlacement] = map[string]any{"region": "eu-west-1"}
			_, err = Configure(plan, config, "../../../services")
			switch {
			case handled == "" && err != nil:
				t.Errorf("%s/%s declares no broker-handled resource, but its placement is refused: %v", svc.Name, plan.Name, err)
			case handled != "" && (err == nil || !strings.Contains(err.Error(), "declares "+handled) || !strings.Contains(err.Error(), "role_arn")):
				t.Errorf("%s/%s declares %s; placed in the broker's account, another Region, Configure = %v, want it refused naming the type", svc.Name, plan.Name, handled, err)
			}
			config[KeyPlacement] = map[string]any{"region": "eu-west-1", "role_arn": "arn:aws:iam::111111111111:role/serverless-osb-target-osb", "external_id": "x-12345"}
			s, err := Configure(plan, config, "../../../services")
			switch {
			case err != nil:
				t.Errorf("%s/%s placed in an account with the target stack: %v", svc.Name, plan.Name, err)
			case handled == deploy.DatabaseUser && (!s.UsersWithoutNetwork || !strings.Contains(s.Warning(), "it is placed in")):
				t.Errorf("%s/%s placed without a network: warning %q, want binds refused until it has a network where it is placed", svc.Name, plan.Name, s.Warning())
			case handled != "":
				placed[svc.Name] = true
			}
		}
	}
	for _, svc := range []string{"aws-rds-postgresql", "aws-rds-mysql", "aws-aurora-postgresql", "aws-aurora-mysql", "aws-opensearch", "aws-elasticache-valkey"} {
		if !placed[svc] {
			t.Errorf("no plan of %s was placed", svc)
		}
	}
}
