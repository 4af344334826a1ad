package cloudformation

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/serverless-osb/broker/internal/broker"
)

func resourceChange(action types.ChangeAction, id, typ string, replacement types.Replacement, property string) types.Change {
	rc := &types.ResourceChange{Action: action, LogicalResourceId: aws.String(id), ResourceType: aws.String(typ), Replacement: replacement}
	if property != "" {
		rc.Details = []types.ResourceChangeDetail{{Target: &types.ResourceTargetDefinition{
			Attribute: types.ResourceAttributeProperties, Name: aws.String(property), RequiresRecreation: types.RequiresRecreationAlways}}}
	}
	return types.Change{Type: types.ChangeTypeResource, ResourceChange: rc}
}

// moto's change sets say nothing about replacements, so the refusals run
// on the fake, each with the change set CloudFormation would describe.
func TestUpdateRefusesToLoseData(t *testing.T) {
	upgrade := func(h *harness) broker.Change {
		c := h.change(broker.KindUpdate, "op-upgrade")
		c.Operation.Target = &broker.Target{MaintenanceInfo: &broker.MaintenanceInfo{Version: "2.0.0"}}
		return c
	}
	cases := []struct {
		name   string
		change types.Change
		want   []string
	}{
		{"a table replaced for its key schema", resourceChange(types.ChangeActionModify, "Table", "AWS::DynamoDB::Table", types.ReplacementTrue, "KeySchema"),
			[]string{"would replace the resource Table (AWS::DynamoDB::Table), which holds data", "its property KeySchema cannot change without a new resource"}},
		{"a bucket replaced, the property found from the registry's create-only properties", resourceChange(types.ChangeActionModify, "Bucket", "AWS::S3::Bucket", types.ReplacementTrue, ""),
			[]string{"would replace the resource Bucket (AWS::S3::Bucket), which holds data"}},
		{"a conditional replacement of a database", resourceChange(types.ChangeActionModify, "Db", "AWS::RDS::DBInstance", types.ReplacementConditional, "DBInstanceClass"),
			[]string{"may replace the resource Db (AWS::RDS::DBInstance)", "its property DBInstanceClass"}},
		{"a queue removed from the template", resourceChange(types.ChangeActionRemove, "Queue", "AWS::SQS::Queue", "", ""),
			[]string{"would delete the resource Queue (AWS::SQS::Queue), which holds data", "no longer declares it"}},
	}
	for _, tc := range cases {
		t.Run("the update fails before anything changes: "+tc.name, func(t *testing.T) {
			h := newHarness(t, false)
			h.provisioned()
			h.cfn.changes = []types.Change{tc.change}
			_, err := h.driver.Begin(h.ctx, h.fresh(upgrade(h)))
			f := failureOf(t, err)
			for _, w := range tc.want {
				if !strings.Contains(f.Description, w) {
					t.Errorf("description %q lacks %q", f.Description, w)
				}
			}
			if !strings.Contains(f.Description, "allow_replacement") {
				t.Errorf("description %q does not say how to allow it", f.Description)
			}
			if f.InstanceUsable == nil || !*f.InstanceUsable {
				t.Error("the instance is not reported usable, though nothing changed")
			}
			if n := h.cfn.count("ExecuteChangeSet"); n != 0 {
				t.Errorf("%d ExecuteChangeSet calls", n)
			}
			if n := len(h.cfn.changeSets); n != 0 {
				t.Errorf("%d change sets left behind", n)
			}
		})
	}

	t.Run("a replacement of what holds no data runs", func(t *testing.T) {
		h := newHarness(t, false)
		h.provisioned()
		h.cfn.changes = []types.Change{resourceChange(types.ChangeActionModify, "BucketPolicy", "AWS::S3::BucketPolicy", types.ReplacementTrue, "Bucket")}
		if _, err := h.driver.Begin(h.ctx, h.fresh(upgrade(h))); err != nil || h.cfn.count("ExecuteChangeSet") != 1 {
			t.Fatalf("begin: %v, %d ExecuteChangeSet calls", err, h.cfn.count("ExecuteChangeSet"))
		}
	})

	t.Run("a replacement the plan allows runs, under a policy that allows it", func(t *testing.T) {
		h := newHarness(t, false)
		h.settings.AllowReplacement = []string{"Bucket"}
		h.provisioned()
		h.cfn.changes = []types.Change{resourceChange(types.ChangeActionModify, "Bucket", "AWS::S3::Bucket", types.ReplacementTrue, "BucketName")}
		if _, err := h.driver.Begin(h.ctx, h.fresh(upgrade(h))); err != nil || h.cfn.count("ExecuteChangeSet") != 1 {
			t.Fatalf("begin: %v, %d ExecuteChangeSet calls", err, h.cfn.count("ExecuteChangeSet"))
		}
		if p := h.cfn.get(h.instanceStack()).policy; p == "" || strings.Contains(p, "LogicalResourceId/Bucket") {
			t.Errorf("stack policy before the execution %s", p)
		}
	})
}

func TestStackPolicy(t *testing.T) {
	t.Run("a new stack denies replacing or deleting what holds data, and allows every other update", func(t *testing.T) {
		h := newHarness(t, true)
		h.provisioned()
		var policy struct {
			Statement []struct {
				Effect   string
				Action   any
				Resource any
			}
		}
		body := aws.ToString(h.cfn.get(h.instanceStack()).create.StackPolicyBody)
		if err := json.Unmarshal([]byte(body), &policy); err != nil {
			t.Fatalf("policy %q: %v", body, err)
		}
		if len(policy.Statement) != 2 || policy.Statement[0].Effect != "Allow" || policy.Statement[0].Action != "Update:*" ||
			policy.Statement[1].Effect != "Deny" || !strings.Contains(body, `"LogicalResourceId/Bucket"`) ||
			strings.Contains(body, "BucketPolicy") || !strings.Contains(body, `"Update:Replace","Update:Delete"`) {
			t.Errorf("policy %s", body)
		}
	})
}

func TestParameterUpdateKeepsTheTemplate(t *testing.T) {
	h := newHarness(t, false)
	h.provisioned()
	c := h.change(broker.KindUpdate, "op-params")
	c.Operation.Target = &broker.Target{Parameters: json.RawMessage(`{"Size":7}`)}
	if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil {
		t.Fatal(err)
	}
	in := h.cfn.get(h.instanceStack()).updates[0]
	if !aws.ToBool(in.UsePreviousTemplate) || in.TemplateBody != nil {
		t.Errorf("UsePreviousTemplate %v, TemplateBody %v", aws.ToBool(in.UsePreviousTemplate), in.TemplateBody)
	}
	got := params(in.Parameters)
	want := map[string]string{"Size": "7", "Owner": "(previous)", "Versioning": "(previous)"}
	if len(got) != len(want) || got["Size"] != "7" || got["Owner"] != "(previous)" || got["Versioning"] != "(previous)" {
		t.Errorf("parameters %v, want %v", got, want)
	}

	t.Run("a parameter the running template lacks is refused, telling to upgrade first", func(t *testing.T) {
		h := newHarness(t, false)
		h.provisioned()
		c := h.change(broker.KindUpdate, "op-params")
		c.Operation.Target = &broker.Target{Parameters: json.RawMessage(`{"Subnets":["a"]}`)}
		_, err := h.driver.Begin(h.ctx, h.fresh(c))
		if f := failureOf(t, err); !strings.Contains(f.Description, "Subnets is not one of the template the service instance runs") {
			t.Errorf("description %q", f.Description)
		}
	})
}

// A macro would rewrite a template after the start-up check (Configure
// refuses templates that run one): no stack or change set the driver asks
// for acknowledges CAPABILITY_AUTO_EXPAND, a fleet upgrade's preview's
// included.
func TestNoStackOrChangeSetAcknowledgesMacros(t *testing.T) {
	h := newHarness(t, true)
	h.provisioned()
	bind := h.change(broker.KindBind, "op-bind")
	if _, err := h.driver.Begin(h.ctx, h.fresh(bind)); err != nil {
		t.Fatal(err)
	}
	upgrade := h.change(broker.KindUpdate, "op-upgrade")
	upgrade.Operation.Target = &broker.Target{MaintenanceInfo: &broker.MaintenanceInfo{Version: "2.0.0"}}
	if _, err := h.driver.Preview(h.ctx, h.fresh(upgrade)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.driver.Begin(h.ctx, h.fresh(upgrade)); err != nil {
		t.Fatal(err)
	}
	asked := map[string][]types.Capability{
		"CreateStack " + h.instanceStack(): h.cfn.get(h.instanceStack()).create.Capabilities,
		"CreateStack " + h.bindingStack():  h.cfn.get(h.bindingStack()).create.Capabilities,
	}
	for _, in := range h.cfn.changeSetInputs {
		asked["CreateChangeSet "+aws.ToString(in.ChangeSetName)] = in.Capabilities
	}
	if len(asked) != 4 {
		t.Fatalf("calls %v, want two stacks, the preview's change set and the upgrade's", asked)
	}
	for call, capabilities := range asked {
		if len(capabilities) != 2 || slices.Contains(capabilities, types.CapabilityCapabilityAutoExpand) {
			t.Errorf("%s: capabilities %v, want CAPABILITY_IAM and CAPABILITY_NAMED_IAM only", call, capabilities)
		}
	}
}

// An upgrade that gives a parameter no one set its new default reads the
// template the stack runs for the new defaults and for the guard: once a
// step, not once for each (it was read three times: the change set's input,
// that input made again at its check, and the guard).
func TestAnUpgradeReadsTheRunningTemplateOnce(t *testing.T) {
	h := newHarness(t, false)
	h.provisioned()
	stack := h.cfn.get(h.instanceStack())
	// The stack runs an older template whose Settings default was another,
	// at that default.
	stack.template = strings.Replace(instanceTemplate, `Default: "{}"`, `Default: "{\"v\":1}"`, 1)
	stack.stack.Parameters = append(stack.stack.Parameters, types.Parameter{ParameterKey: aws.String("Settings"), ParameterValue: aws.String(`{"v":1}`)})
	c := h.change(broker.KindUpdate, "op-upgrade")
	c.Operation.Target = &broker.Target{MaintenanceInfo: &broker.MaintenanceInfo{Version: "2.0.0"}}
	if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil {
		t.Fatal(err)
	}
	if n := h.cfn.count("ExecuteChangeSet"); n != 1 {
		t.Fatalf("%d ExecuteChangeSet calls, want the upgrade executed", n)
	}
	if got := params(h.cfn.changeSetInputs[0].Parameters)["Settings"]; got != "{}" {
		t.Errorf("Settings %q, want the new default {}", got)
	}
	if n := h.cfn.count("GetTemplate"); n != 1 {
		t.Errorf("%d GetTemplate calls in one step, want 1", n)
	}
}
