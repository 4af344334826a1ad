package cloudformation

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	cfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/store/bolt"
	"github.com/serverless-osb/broker/internal/store/storetest"
)

// The example services through moto's CloudFormation, with the real SDK
// client: provision, update, bind, unbind, deprovision. moto completes a
// stack within the call, so every change is done at its first Check; the
// in-progress and failure paths are driver_test.go's.
func TestServicesInMoto(t *testing.T) {
	servicesInMoto(t, cfn.NewFromConfig(mototest.Config(t, "us-east-1")))
}

// The same lives when the first answer of every call that changes a stack
// is lost after moto carried it out, and the SDK tries the call again, as
// it does against AWS after a 500 or a reset connection: the driver's
// ClientRequestTokens and its reading of what it finds by name make each
// retry find its own change (TestServicesInMoto's checks, unchanged).
func TestServicesInMotoWhenEveryChangeLosesItsFirstAnswer(t *testing.T) {
	lost := &mototest.LostAnswers{}
	lost.LoseEvery("CreateStack", "UpdateStack", "DeleteStack", "CreateChangeSet", "ExecuteChangeSet", "ContinueUpdateRollback")
	servicesInMoto(t, cfn.NewFromConfig(mototest.Config(t, "us-east-1"), func(o *cfn.Options) {
		o.APIOptions = append(o.APIOptions, lost.Register)
		o.Retryer = mototest.RetryAtOnce()
	}))
	got := map[string]int{}
	for _, op := range lost.Lost() {
		got[op]++
	}
	if got["CreateStack"] < 6 || got["DeleteStack"] < 6 || got["UpdateStack"]+got["ExecuteChangeSet"] < 1 {
		t.Errorf("answers lost %v: want those of each service's instance and binding stacks' creates and deletes, and of its update", got)
	}
}

func servicesInMoto(t *testing.T, client *cfn.Client) {
	services := []struct {
		name            string
		instanceParams  string
		updateParams    string
		bindParams      string
		wantCredentials []string
	}{
		// moto 5.2.1 answers 500 (a KeyError) to UsePreviousValue for a
		// parameter that took its Default at create, which AWS accepts; so
		// the one service updated here is given every parameter at create.
		{name: "s3-bucket", instanceParams: `{"Versioning":"Enabled","NoncurrentVersionExpirationDays":30,"Encryption":"SSE-S3"}`,
			updateParams: `{"Encryption":"SSE-KMS"}`, bindParams: `{"Access":"ReadOnly"}`,
			wantCredentials: []string{"access_key_id", "bucket_arn", "bucket_name", "region", "secret_access_key"}},
		{name: "sqs-queue", instanceParams: `{"VisibilityTimeout":120,"DeadLetterQueue":"false"}`, bindParams: `{"Access":"SendOnly"}`,
			wantCredentials: []string{"access_key_id", "queue_arn", "queue_name", "queue_url", "region", "secret_access_key"}},
		{name: "dynamodb-table", instanceParams: `{"HashKeyName":"pk","SortKeyName":"sk","SortKeyType":"N"}`, bindParams: `{}`,
			wantCredentials: []string{"access_key_id", "region", "secret_access_key", "table_arn", "table_name"}},
	}
	for _, svc := range services {
		t.Run(svc.name+" goes through its whole life", func(t *testing.T) {
			ctx := context.Background()
			plan, dir := shippedPlan(t, svc.name)
			settings, err := Configure(plan, plan.Settings.Config, dir)
			if err != nil {
				t.Fatal(err)
			}
			store, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { store.Close() })
			d := New(client, store, Deployment{StackPrefix: "osbtest"}, nil)

			inst := broker.Instance{ID: mototest.Name(svc.name), InstanceRequest: broker.InstanceRequest{
				ServiceID: "svc-" + svc.name, PlanID: "plan-" + svc.name, Parameters: json.RawMessage(svc.instanceParams),
				Context: json.RawMessage(`{"platform":"cloudfoundry","organization_guid":"org-1"}`)}}
			change := func(kind broker.OperationKind, opID string) broker.Change {
				c := broker.Change{Operation: broker.Operation{ID: opID, InstanceID: inst.ID, Kind: kind, Async: true},
					Instance: inst, Plan: &catalog.Plan{ID: inst.PlanID, Name: "standard"}, Settings: settings}
				if kind.IsBinding() {
					c.Operation.BindingID = "binding-1"
					c.Binding = &broker.Binding{InstanceID: inst.ID, ID: "binding-1", BindingRequest: broker.BindingRequest{AppGUID: "app-1", Parameters: json.RawMessage(svc.bindParams)}}
				}
				return c
			}
			instanceStack := InstanceStackName("osbtest", inst.ID)
			bindingStack := BindingStackName("osbtest", inst.ID, "binding-1")

			p := run(t, d, change(broker.KindProvision, "op-provision"))
			if p.DashboardURL == "" {
				t.Error("no dashboard URL")
			}
			stack := describeInMoto(t, client, instanceStack)
			if stack == nil || stack.StackStatus != types.StackStatusCreateComplete {
				t.Fatalf("instance stack: %+v", stack)
			}
			if tag(stack, TagInstanceID) != inst.ID || tag(stack, TagOrganizationGUID) != "org-1" || tag(stack, TagOperationID) != "op-provision" {
				t.Errorf("instance stack tags %v", stack.Tags)
			}
			physicalIDs(t, client, instanceStack)

			if svc.updateParams != "" {
				update := change(broker.KindUpdate, "op-update")
				update.Operation.Target = &broker.Target{Parameters: json.RawMessage(svc.updateParams)}
				run(t, d, update)
				stack := describeInMoto(t, client, instanceStack)
				if stack == nil || stack.StackStatus != types.StackStatusUpdateComplete {
					t.Fatalf("instance stack after update: %+v", stack)
				}
				got := map[string]string{}
				for _, p := range stack.Parameters {
					got[aws.ToString(p.ParameterKey)] = aws.ToString(p.ParameterValue)
				}
				if got["Encryption"] != "SSE-KMS" || got["Versioning"] != "Enabled" || got["NoncurrentVersionExpirationDays"] != "30" {
					t.Errorf("parameters after update %v: the update's changed, the others kept", got)
				}
			}

			p = run(t, d, change(broker.KindBind, "op-bind"))
			var keys []string
			for k, v := range p.Credentials {
				if s, ok := v.(string); !ok || s == "" {
					t.Errorf("credential %s is empty", k)
				}
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if !slices.Equal(keys, svc.wantCredentials) {
				t.Errorf("credentials %v, want %v", keys, svc.wantCredentials)
			}
			if stack := describeInMoto(t, client, bindingStack); stack == nil || stack.StackStatus != types.StackStatusCreateComplete ||
				tag(stack, TagBindingID) != "binding-1" {
				t.Fatalf("binding stack: %+v", stack)
			}
			physicalIDs(t, client, bindingStack)

			run(t, d, change(broker.KindUnbind, "op-unbind"))
			if stack := describeInMoto(t, client, bindingStack); stack != nil {
				t.Fatalf("binding stack after unbind: %s", stack.StackStatus)
			}
			if describeInMoto(t, client, instanceStack) == nil {
				t.Fatal("unbind deleted the instance stack")
			}

			run(t, d, change(broker.KindDeprovision, "op-deprovision"))
			if stack := describeInMoto(t, client, instanceStack); stack != nil {
				t.Fatalf("instance stack after deprovision: %s", stack.StackStatus)
			}
			if records, err := storetest.Records(ctx, store, inst.ID); err != nil || len(records) != 0 {
				t.Errorf("records left: %v %v", records, err)
			}
		})
	}

	t.Run("a detached stack is cleaned up", func(t *testing.T) {
		plan, dir := shippedPlan(t, "s3-bucket")
		settings, err := Configure(plan, plan.Settings.Config, dir)
		if err != nil {
			t.Fatal(err)
		}
		store, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		d := New(client, store, Deployment{StackPrefix: "osbtest"}, nil)
		inst := broker.Instance{ID: mototest.Name("cleanup")}
		run(t, d, broker.Change{Operation: broker.Operation{ID: "op-provision", InstanceID: inst.ID, Kind: broker.KindProvision},
			Instance: inst, Settings: settings})
		r, err := storetest.Record(context.Background(), store, inst.ID, instanceRecord)
		if err != nil {
			t.Fatal(err)
		}
		det := broker.Detached{ID: "d1", InstanceID: inst.ID, Name: r.Name, Data: r.Data}
		for i := 0; ; i++ {
			p, err := d.Cleanup(context.Background(), det)
			if err != nil {
				t.Fatal(err)
			}
			if p.Done {
				break
			}
			if i == 10 {
				t.Fatal("the cleanup never ends")
			}
		}
		if stack := describeInMoto(t, client, InstanceStackName("osbtest", inst.ID)); stack != nil {
			t.Fatalf("stack after cleanup: %s", stack.StackStatus)
		}
	})
}

// run drives a change to its end as the workflow does, without the waits,
// handing the driver its records as stored at each step, as the broker does.
func run(t *testing.T, d *Driver, c broker.Change) broker.Progress {
	t.Helper()
	ctx := context.Background()
	fresh := func() broker.Change {
		records, err := storetest.Records(ctx, d.Resources.(broker.Repository), c.Instance.ID) // the bolt store
		if err != nil {
			t.Fatal(err)
		}
		c.Records = records
		return c
	}
	p, err := d.Begin(ctx, fresh())
	for i := 0; err == nil && !p.Done; i++ {
		if i == 20 {
			t.Fatalf("%s: not done after %d checks: %s", c.Operation.Kind, i, p.Description)
		}
		time.Sleep(10 * time.Millisecond)
		p, err = d.Check(ctx, fresh())
	}
	if err != nil {
		t.Fatalf("%s: %v", c.Operation.Kind, err)
	}
	// Once done, Check says so again (the broker's Finish step asks).
	if again, err := d.Check(ctx, fresh()); err != nil || !again.Done {
		t.Fatalf("%s: check after done: %+v %v", c.Operation.Kind, again, err)
	}
	return p
}

// describeInMoto returns the live stack of that name, or nil.
func describeInMoto(t *testing.T, client *cfn.Client, name string) *types.Stack {
	t.Helper()
	out, err := client.DescribeStacks(context.Background(), &cfn.DescribeStacksInput{StackName: aws.String(name)})
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if s := out.Stacks[0]; s.StackStatus != types.StackStatusDeleteComplete {
		return &s
	}
	return nil
}

// physicalIDs checks that every resource of the stack exists.
func physicalIDs(t *testing.T, client *cfn.Client, name string) {
	t.Helper()
	out, err := client.DescribeStackResources(context.Background(), &cfn.DescribeStackResourcesInput{StackName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	made := 0
	for _, r := range out.StackResources {
		if aws.ToString(r.LogicalResourceId) == "" {
			continue // moto lists a type it does not support (bucket and queue policies) without names
		}
		if aws.ToString(r.PhysicalResourceId) == "" {
			t.Errorf("stack %s: %s has no physical id", name, aws.ToString(r.LogicalResourceId))
		}
		made++
	}
	if made == 0 {
		t.Fatalf("stack %s has no resources", name)
	}
}

// On moto: every stack the driver makes has the stack policy; an upgrade
// moves the stack to the plan's changed template (GetTemplate), a
// parameter-only update keeps the one it runs.
func TestVersionsInMoto(t *testing.T) {
	ctx := context.Background()
	client := cfn.NewFromConfig(mototest.Config(t, "us-east-1"))
	plan, dir := shippedPlan(t, "s3-bucket")
	v1, err := Configure(plan, plan.Settings.Config, dir)
	if err != nil {
		t.Fatal(err)
	}
	v2 := *v1
	changed := *v1.Template
	changed.Body = v1.Template.Body + "\n# v2: a comment is a new template\n"
	v2.Template = &changed
	store, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	d := New(client, store, Deployment{StackPrefix: "osbtest"}, nil)

	instance := func(name string) broker.Instance {
		return broker.Instance{ID: mototest.Name(name), InstanceRequest: broker.InstanceRequest{ServiceID: "svc", PlanID: "plan",
			Parameters:      json.RawMessage(`{"Versioning":"Enabled","NoncurrentVersionExpirationDays":30,"Encryption":"SSE-S3"}`),
			MaintenanceInfo: &broker.MaintenanceInfo{Version: "1.0.0"}}}
	}
	change := func(inst broker.Instance, s *Settings, kind broker.OperationKind, opID string, target *broker.Target) broker.Change {
		return broker.Change{Operation: broker.Operation{ID: opID, InstanceID: inst.ID, Kind: kind, Async: true, Target: target},
			Instance: inst, Plan: &catalog.Plan{ID: inst.PlanID, Name: "standard"}, Settings: s}
	}
	template := func(inst broker.Instance) string {
		out, err := client.GetTemplate(ctx, &cfn.GetTemplateInput{StackName: aws.String(InstanceStackName("osbtest", inst.ID))})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.TemplateBody)
	}

	upgraded, kept := instance("upgraded"), instance("kept")
	for _, inst := range []broker.Instance{upgraded, kept} {
		run(t, d, change(inst, v1, broker.KindProvision, "op-provision", nil))
		out, err := client.GetStackPolicy(ctx, &cfn.GetStackPolicyInput{StackName: aws.String(InstanceStackName("osbtest", inst.ID))})
		if err != nil {
			t.Fatal(err)
		}
		if p := aws.ToString(out.StackPolicyBody); !strings.Contains(p, `"LogicalResourceId/Bucket"`) || !strings.Contains(p, `"Update:Replace","Update:Delete"`) {
			t.Errorf("stack policy of %s: %q", inst.ID, p)
		}
	}

	run(t, d, change(upgraded, &v2, broker.KindUpdate, "op-upgrade", &broker.Target{MaintenanceInfo: &broker.MaintenanceInfo{Version: "2.0.0"}}))
	if got := template(upgraded); got != changed.Body {
		t.Errorf("the upgraded stack's template is not the plan's new one:\n%s", got)
	}
	run(t, d, change(kept, &v2, broker.KindUpdate, "op-params", &broker.Target{Parameters: json.RawMessage(`{"Encryption":"SSE-KMS"}`)}))
	if got := template(kept); got != v1.Template.Body {
		t.Errorf("a parameter-only update moved the stack to another template:\n%s", got)
	}
	stack := describeInMoto(t, client, InstanceStackName("osbtest", kept.ID))
	for _, p := range stack.Parameters {
		if aws.ToString(p.ParameterKey) == "Encryption" && aws.ToString(p.ParameterValue) != "SSE-KMS" {
			t.Errorf("Encryption = %q after the update", aws.ToString(p.ParameterValue))
		}
	}
}
