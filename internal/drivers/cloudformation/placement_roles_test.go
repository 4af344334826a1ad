//go:build !osb_without_roles

// The tests of plans placed through a role, which a build without roles
// (osb_without_roles) refuses at start: roles_without_test.go is its.

package cloudformation

import (
	"context"
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
	h.driver.Clients = &Clients{Base: aws.Config{Region: "us-east-1"}, Roles: AssumeWith(sts), NewAPI: func(aws.Config) API { return h.cfn }}
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
	h.driver.Clients = &Clients{Base: aws.Config{Region: "us-east-1"}, Roles: AssumeWith(sts), NewAPI: func(cfg aws.Config) API {
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
