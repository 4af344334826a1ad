package cloudformation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/store/bolt"
	"github.com/serverless-osb/broker/internal/store/storetest"
)

const (
	instanceID = "7f1c2a5e-8d3b-4c6f-9e0a-1b2c3d4e5f60"
	bindingID  = "b-0001"
	secret     = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
)

// flakyResources is the bolt store with a switch that fails one
// PutResource: a crash between a CloudFormation call and the record of it.
type flakyResources struct {
	broker.Resources
	// failPut, when above zero, fails the failPut-th PutResource from now.
	failPut int
}

func (f *flakyResources) PutResource(ctx context.Context, r broker.Resource) error {
	if f.failPut > 0 {
		f.failPut--
		if f.failPut == 0 {
			return errors.New("store unavailable")
		}
	}
	return f.Resources.PutResource(ctx, r)
}

type harness struct {
	t        *testing.T
	cfn      *fakeStacks
	store    *flakyResources
	repo     broker.Repository // the same bolt store, to read the records back
	driver   *Driver
	settings *Settings
	logs     *bytes.Buffer
	ctx      context.Context
}

func newHarness(t *testing.T, withBinding bool) *harness {
	t.Helper()
	dir := templateDir(t, map[string]string{"instance.yaml": instanceTemplate, "binding.json": bindingTemplate})
	config := map[string]any{"template": "instance.yaml", "parameters": map[string]any{"Owner": "team-a"}, "retry_after": 5}
	if withBinding {
		config["binding_template"] = "binding.json"
		config["binding_parameters"] = map[string]any{"Access": "ReadOnly"}
	}
	// Users may set Versioning, Size and Subnets at create, Size and Subnets
	// on update; the plan fixes Owner (and, for bindings, Access), and
	// Settings keeps its Default.
	plan := schemaPlan(t, map[catalog.SchemaKind][]string{
		catalog.InstanceCreate: {"Size", "Subnets", "Versioning"}, catalog.InstanceUpdate: {"Size", "Subnets"}})
	s, err := Configure(plan, config, dir)
	if err != nil {
		t.Fatal(err)
	}
	return harnessOf(t, s, Deployment{StackPrefix: "osb", RoleARN: "arn:aws:iam::123456789012:role/cfn"})
}

// harnessOf is the driver of deployment dep over a named fake of
// CloudFormation (fakeStacks) and a bolt store, with settings s.
func harnessOf(t *testing.T, s *Settings, dep Deployment) *harness {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logs := &bytes.Buffer{}
	fake := newFakeStacks()
	store := &flakyResources{Resources: st}
	d := New(fake, store, dep, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	return &harness{t: t, cfn: fake, store: store, repo: st, driver: d, settings: s, logs: logs, ctx: context.Background()}
}

func (h *harness) change(kind broker.OperationKind, opID string) broker.Change {
	c := broker.Change{
		Operation: broker.Operation{ID: opID, InstanceID: instanceID, Kind: kind, Async: true},
		Instance: broker.Instance{ID: instanceID, InstanceRequest: broker.InstanceRequest{
			ServiceID: "svc-1", PlanID: "plan-1", OrganizationGUID: "org-1",
			Parameters: json.RawMessage(`{"Versioning":"Enabled","Size":3}`),
			Context:    json.RawMessage(`{"platform":"cloudfoundry","space_guid":"space-1","instance_name":"my bucket #1"}`)}},
		Plan:     &catalog.Plan{ID: "plan-1", Name: "private"},
		Settings: h.settings,
	}
	if kind.IsBinding() {
		c.Operation.BindingID = bindingID
		c.Binding = &broker.Binding{InstanceID: instanceID, ID: bindingID, BindingRequest: broker.BindingRequest{AppGUID: "app-1"}}
	}
	return c
}

func (h *harness) instanceStack() string { return InstanceStackName("osb", instanceID) }
func (h *harness) bindingStack() string  { return BindingStackName("osb", instanceID, bindingID) }

// provisioned runs a provision to its end.
func (h *harness) provisioned() broker.Change {
	h.t.Helper()
	c := h.change(broker.KindProvision, "op-provision")
	if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil {
		h.t.Fatal(err)
	}
	h.cfn.outputs(h.instanceStack(), "BucketName", "bucket-1", "BucketArn", "arn:aws:s3:::bucket-1", "DashboardUrl", "https://console.example/bucket-1")
	h.cfn.set(h.instanceStack(), types.StackStatusCreateComplete, "")
	if p, err := h.driver.Check(h.ctx, h.fresh(c)); err != nil || !p.Done {
		h.t.Fatalf("provision check: %+v %v", p, err)
	}
	return c
}

func (h *harness) record(name string) (record, bool) {
	h.t.Helper()
	rec, found, err := h.driver.get(h.fresh(h.change(broker.KindProvision, "")), name)
	if err != nil {
		h.t.Fatal(err)
	}
	return rec, found
}

// fresh is c with the instance's records as they are stored, as the broker
// hands a change to its driver.
func (h *harness) fresh(c broker.Change) broker.Change {
	h.t.Helper()
	records, err := storetest.Records(h.ctx, h.repo, c.Instance.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	c.Records = records
	return c
}

func failureOf(t *testing.T, err error) *broker.Failure {
	t.Helper()
	var f *broker.Failure
	if !errors.As(err, &f) {
		t.Fatalf("error %v (%T), want a *broker.Failure", err, err)
	}
	return f
}

func params(ps []types.Parameter) map[string]string {
	out := map[string]string{}
	for _, p := range ps {
		if aws.ToBool(p.UsePreviousValue) {
			out[aws.ToString(p.ParameterKey)] = "(previous)"
			continue
		}
		out[aws.ToString(p.ParameterKey)] = aws.ToString(p.ParameterValue)
	}
	return out
}

func tagMap(ts []types.Tag) map[string]string {
	out := map[string]string{}
	for _, t := range ts {
		out[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return out
}

// TestCreatingSaysHowFarInWordsThatReadRight: the progress of a creation
// reads right at no resource created yet and with one resource ("0 of 1
// resources done" did not).
func TestCreatingSaysHowFarInWordsThatReadRight(t *testing.T) {
	for _, tt := range []struct {
		done, total int
		want        string
	}{
		{0, 1, "Creating 1 resource."},
		{0, 3, "Creating 3 resources."},
		{1, 1, "Creating: 1 of 1 resource created."},
		{1, 3, "Creating: 1 of 3 resources created."},
	} {
		if got := creatingText(tt.done, tt.total); got != tt.want {
			t.Errorf("%d of %d: %q, want %q", tt.done, tt.total, got, tt.want)
		}
	}
}

func TestProvision(t *testing.T) {
	t.Run("the record is written first, then the stack is asked for with the plan's and the user's parameters", func(t *testing.T) {
		h := newHarness(t, false)
		h.cfn.failNext("CreateStack", apiErr("Throttling", "Rate exceeded"))
		c := h.change(broker.KindProvision, "op-1")
		if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err == nil {
			t.Fatal("a throttled CreateStack must fail the Begin")
		}
		rec, found := h.record(instanceRecord)
		if !found || rec.StackName != h.instanceStack() || rec.Started || rec.CreatedBy != "op-1" {
			t.Fatalf("record before the stack: %+v %v", rec, found)
		}
		p, err := h.driver.Begin(h.ctx, h.fresh(c))
		if err != nil || p.Done || p.RetryAfter != 5*time.Second || p.Description != "Creating 5 resources." {
			t.Fatalf("begin: %+v %v", p, err)
		}
		in := h.cfn.get(h.instanceStack()).create
		want := map[string]string{"Versioning": "Enabled", "Size": "3", "Owner": "team-a"}
		if got := params(in.Parameters); len(got) != len(want) || got["Versioning"] != "Enabled" || got["Size"] != "3" || got["Owner"] != "team-a" {
			t.Errorf("parameters %v, want %v (the user's and the plan's; Settings and Subnets keep their Default)", got, want)
		}
		if aws.ToString(in.TemplateBody) != instanceTemplate || aws.ToString(in.RoleARN) != "arn:aws:iam::123456789012:role/cfn" ||
			len(in.Capabilities) != 2 || aws.ToString(in.ClientRequestToken) != token("create", "op-1") {
			t.Errorf("input: role %q, capabilities %v, token %q", aws.ToString(in.RoleARN), in.Capabilities, aws.ToString(in.ClientRequestToken))
		}
		tags := tagMap(in.Tags)
		for k, v := range map[string]string{TagInstanceID: instanceID, TagServiceID: "svc-1", TagPlanID: "plan-1", TagPlanName: "private",
			TagOrganizationGUID: "org-1", TagSpaceGUID: "space-1", TagInstanceName: "my bucket _1", TagOperationID: "op-1"} {
			if tags[k] != v {
				t.Errorf("tag %s = %q, want %q", k, tags[k], v)
			}
		}
	})

	t.Run("while CloudFormation works, Check says how many resources are done", func(t *testing.T) {
		h := newHarness(t, false)
		c := h.change(broker.KindProvision, "op-1")
		if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil {
			t.Fatal(err)
		}
		for _, r := range []string{"Bucket", "BucketPolicy", "Queue"} {
			h.cfn.resource(h.instanceStack(), r, "AWS::S3::Bucket", types.ResourceStatusCreateComplete, "")
		}
		h.cfn.resource(h.instanceStack(), "Topic", "AWS::SNS::Topic", types.ResourceStatusCreateInProgress, "")
		p, err := h.driver.Check(h.ctx, h.fresh(c))
		if err != nil || p.Done || p.Description != "Creating: 3 of 5 resources created." || p.RetryAfter != 5*time.Second {
			t.Fatalf("check: %+v %v", p, err)
		}
	})

	t.Run("once created, the dashboard URL is reported and the outputs are kept for the bindings", func(t *testing.T) {
		h := newHarness(t, false)
		c := h.provisioned()
		p, err := h.driver.Check(h.ctx, h.fresh(c))
		if err != nil || !p.Done || p.DashboardURL != "https://console.example/bucket-1" {
			t.Fatalf("check again: %+v %v", p, err)
		}
		rec, _ := h.record(instanceRecord)
		if rec.Outputs["BucketArn"] != "arn:aws:s3:::bucket-1" || rec.StackID == "" || !rec.Complete {
			t.Errorf("record %+v", rec)
		}
	})

	t.Run("a Begin retried after a crash makes no second stack", func(t *testing.T) {
		h := newHarness(t, false)
		c := h.change(broker.KindProvision, "op-1")
		h.store.failPut = 2 // the record goes in, CreateStack goes through, the record of it does not
		if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err == nil {
			t.Fatal("Begin did not fail with the store")
		}
		if rec, _ := h.record(instanceRecord); rec.Started || h.cfn.live() != 1 {
			t.Fatalf("the test needs a stack made and not recorded: %+v", rec)
		}
		p, err := h.driver.Begin(h.ctx, h.fresh(c))
		if err != nil || p.Done {
			t.Fatalf("retried begin: %+v %v", p, err)
		}
		if h.cfn.count("CreateStack") != 2 || h.cfn.live() != 1 {
			t.Errorf("CreateStack calls %d, stacks %d: want two calls and one stack", h.cfn.count("CreateStack"), h.cfn.live())
		}
		if rec, _ := h.record(instanceRecord); !rec.Started || rec.StackID == "" {
			t.Errorf("the retried Begin did not find its stack: %+v", rec)
		}
	})

	t.Run("a stack of the same name that another operation made is not taken over", func(t *testing.T) {
		h := newHarness(t, false)
		h.cfn.add(h.instanceStack(), types.StackStatusDeleteFailed,
			types.Tag{Key: aws.String(TagOperationID), Value: aws.String("op-of-an-earlier-instance")})
		_, err := h.driver.Begin(h.ctx, h.fresh(h.change(broker.KindProvision, "op-1")))
		f := failureOf(t, err)
		if !strings.Contains(f.Description, "was not made by this operation") || !strings.Contains(f.Description, h.instanceStack()) {
			t.Errorf("description %q", f.Description)
		}
	})

	t.Run("a failed creation reports the first resource's reason, not the cancellations after it", func(t *testing.T) {
		h := newHarness(t, false)
		c := h.change(broker.KindProvision, "op-1")
		if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil {
			t.Fatal(err)
		}
		s := h.instanceStack()
		h.cfn.resource(s, "Bucket", "AWS::S3::Bucket", types.ResourceStatusCreateInProgress, "")
		h.cfn.resource(s, "Queue", "AWS::SQS::Queue", types.ResourceStatusCreateInProgress, "")
		h.cfn.resource(s, "Bucket", "AWS::S3::Bucket", types.ResourceStatusCreateFailed, "my-bucket already exists")
		h.cfn.resource(s, "Queue", "AWS::SQS::Queue", types.ResourceStatusCreateFailed, "Resource creation cancelled")
		h.cfn.set(s, types.StackStatusRollbackInProgress, "The following resource(s) failed to create: [Bucket, Queue]. Rollback requested by user.")
		h.cfn.resource(s, "Queue", "AWS::SQS::Queue", types.ResourceStatusDeleteComplete, "")
		h.cfn.set(s, types.StackStatusRollbackComplete, "")
		_, err := h.driver.Check(h.ctx, h.fresh(c))
		f := failureOf(t, err)
		if want := `The S3 Bucket "Bucket" could not be created: it conflicts with a resource that already exists or is in use` + fullReasonLogged; f.Description != want {
			t.Errorf("description %q, want %q", f.Description, want)
		}
		if left, _ := h.driver.Leftovers(h.ctx, h.fresh(c)); len(left) != 1 || left[0] != instanceRecord {
			t.Errorf("leftovers %v", left)
		}
	})

	t.Run("a rollback in progress already fails the provision", func(t *testing.T) {
		h := newHarness(t, false)
		c := h.change(broker.KindProvision, "op-1")
		h.driver.Begin(h.ctx, h.fresh(c))
		h.cfn.set(h.instanceStack(), types.StackStatusRollbackInProgress, "The following resource(s) failed to create: [Bucket].")
		f := failureOf(t, func() error { _, err := h.driver.Check(h.ctx, h.fresh(c)); return err }())
		if !strings.Contains(f.Description, "failed to create: [Bucket]") {
			t.Errorf("description %q", f.Description)
		}
	})

	t.Run("parameter values CloudFormation refuses fail the provision with its message", func(t *testing.T) {
		h := newHarness(t, false)
		h.cfn.failNext("CreateStack", apiErr("ValidationError", "Parameter 'Versioning' must be one of AllowedValues"))
		_, err := h.driver.Begin(h.ctx, h.fresh(h.change(broker.KindProvision, "op-1")))
		if f := failureOf(t, err); f.Description != "CloudFormation refused to create the stack: Parameter 'Versioning' must be one of AllowedValues." {
			t.Errorf("description %q", f.Description)
		}
	})

	t.Run("a refusal that names a role or an account shows neither", func(t *testing.T) {
		h := newHarness(t, false)
		h.cfn.failNext("CreateStack", apiErr("ValidationError", "Role arn:aws:iam::123456789012:role/osb-cfn is invalid or cannot be assumed by account 123456789012"))
		_, err := h.driver.Begin(h.ctx, h.fresh(h.change(broker.KindProvision, "op-1")))
		if f := failureOf(t, err); f.Description != "CloudFormation refused to create the stack: Role (an ARN) is invalid or cannot be assumed by account (an account)." {
			t.Errorf("description %q", f.Description)
		}
	})

	t.Run("a template that needs a capability fails the provision, for the platform team to fix", func(t *testing.T) {
		h := newHarness(t, false)
		h.cfn.failNext("CreateStack", apiErr("InsufficientCapabilitiesException", "Requires capabilities : [CAPABILITY_FOO]"))
		_, err := h.driver.Begin(h.ctx, h.fresh(h.change(broker.KindProvision, "op-1")))
		if f := failureOf(t, err); !strings.Contains(f.Description, "platform team must change the template") {
			t.Errorf("description %q", f.Description)
		}
	})

	t.Run("access denied fails the provision, for the operator to fix, without AWS's message", func(t *testing.T) {
		h := newHarness(t, false)
		h.cfn.failNext("CreateStack", apiErr("AccessDenied", "User: arn:aws:sts::123456789012:assumed-role/worker is not authorized"))
		_, err := h.driver.Begin(h.ctx, h.fresh(h.change(broker.KindProvision, "op-1")))
		f := failureOf(t, err)
		if !strings.Contains(f.Description, "platform operator") || strings.Contains(f.Description, "123456789012") {
			t.Errorf("description %q", f.Description)
		}
	})

	t.Run("a parameter the plan's schema does not name fails the provision, naming it, and no stack is asked for", func(t *testing.T) {
		for _, given := range []string{`{"Versioning":"Enabled","Owner":"mallory"}`, `{"Settings":"{}"}`, `{"Unknown":"x"}`} {
			h := newHarness(t, false)
			c := h.change(broker.KindProvision, "op-1")
			c.Instance.Parameters = json.RawMessage(given)
			_, err := h.driver.Begin(h.ctx, h.fresh(c))
			f := failureOf(t, err)
			if !strings.Contains(f.Description, "is not one the plan accepts (it accepts: Size, Subnets and Versioning)") ||
				strings.Contains(f.Description, "mallory") {
				t.Errorf("%s: description %q", given, f.Description)
			}
			if h.cfn.count("CreateStack") != 0 {
				t.Errorf("%s: a stack was asked for", given)
			}
		}
	})

	t.Run("a parameter the template cannot take fails the provision without quoting its value", func(t *testing.T) {
		h := newHarness(t, false)
		c := h.change(broker.KindProvision, "op-1")
		c.Instance.Parameters = json.RawMessage(`{"Subnets":["subnet-1,subnet-2"]}`)
		_, err := h.driver.Begin(h.ctx, h.fresh(c))
		f := failureOf(t, err)
		if !strings.Contains(f.Description, "Subnets") || strings.Contains(f.Description, "subnet-1") {
			t.Errorf("description %q", f.Description)
		}
		if h.cfn.count("CreateStack") != 0 {
			t.Error("a stack was asked for")
		}
	})
}

// TestTransientErrors: an error of CloudFormation, or of STS for the
// credentials, that retrying may fix is an outage (broker.Unreachable),
// whose reason names the service and AWS's code for last_operation, and
// never AWS's message (it may name the account).
func TestTransientErrors(t *testing.T) {
	op := func(service string, err error) error {
		return &smithy.OperationError{ServiceID: service, OperationName: "Call", Err: err}
	}
	cases := []struct {
		name   string
		err    error
		reason string
	}{
		{"throttling is transient", apiErr("Throttling", "Rate exceeded"), "CloudFormation answered Throttling"},
		{"a 5xx is transient", &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 503}}, Err: errors.New("service unavailable")},
			"CloudFormation did not answer"},
		{"a network error is transient", errors.New("dial tcp: connection refused"), "CloudFormation did not answer"},
		{"an internal failure is transient", op("CloudFormation", apiErr("InternalFailure", "")), "CloudFormation answered InternalFailure"},
		{"STS throttling the credentials is transient, and named",
			op("CloudFormation", fmt.Errorf("failed to retrieve credentials: %w", op("STS", apiErr("Throttling", "Rate exceeded for 123456789012")))),
			"STS answered Throttling"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, false)
			c := h.change(broker.KindProvision, "op-1")
			if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil {
				t.Fatal(err)
			}
			h.cfn.failNext("DescribeStacks", tc.err)
			_, err := h.driver.Check(h.ctx, h.fresh(c))
			var u *broker.Unreachable
			if !errors.As(err, &u) || u.Reason != tc.reason {
				t.Fatalf("check: %v, want an outage with the reason %q", err, tc.reason)
			}
			if p, err := h.driver.Check(h.ctx, h.fresh(c)); err != nil || p.Done {
				t.Fatalf("the next check: %+v %v", p, err)
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	// An upgrade: the plan's maintenance_info version moved, so the
	// stack moves to the plan's current template.
	update := func(h *harness) broker.Change {
		c := h.change(broker.KindUpdate, "op-update")
		c.Operation.Target = &broker.Target{Parameters: json.RawMessage(`{"Size":7,"Subnets":["a","b"]}`),
			MaintenanceInfo: &broker.MaintenanceInfo{Version: "2.0.0"}}
		return c
	}

	t.Run("parameters the upgrade does not set keep their previous values", func(t *testing.T) {
		h := newHarness(t, false)
		h.provisioned()
		c := update(h)
		p, err := h.driver.Begin(h.ctx, h.fresh(c))
		if err != nil || p.Done {
			t.Fatalf("begin: %+v %v", p, err)
		}
		in := h.cfn.get(h.instanceStack()).updates[0]
		got := params(in.Parameters)
		// Versioning, Size and Owner were given at create; Subnets and
		// Settings were not, so the stack has no previous value of theirs.
		want := map[string]string{"Size": "7", "Subnets": "a,b", "Owner": "team-a", "Versioning": "(previous)"}
		if len(got) != len(want) {
			t.Errorf("parameters %v, want %v", got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("parameter %s = %q, want %q", k, got[k], v)
			}
		}
		if aws.ToString(in.ClientToken) != token("update", "op-update") || aws.ToString(in.TemplateBody) != instanceTemplate {
			t.Errorf("token %q", aws.ToString(in.ClientToken))
		}
	})

	t.Run("an update completes with the new outputs", func(t *testing.T) {
		h := newHarness(t, false)
		h.provisioned()
		c := update(h)
		h.driver.Begin(h.ctx, h.fresh(c))
		h.cfn.resource(h.instanceStack(), "Bucket", "AWS::S3::Bucket", types.ResourceStatusUpdateInProgress, "")
		if p, err := h.driver.Check(h.ctx, h.fresh(c)); err != nil || p.Done || p.Description != "Updating: changing Bucket." {
			t.Fatalf("check: %+v %v", p, err)
		}
		h.cfn.outputs(h.instanceStack(), "BucketName", "bucket-1", "DashboardUrl", "https://console.example/new")
		h.cfn.set(h.instanceStack(), types.StackStatusUpdateComplete, "")
		if p, err := h.driver.Check(h.ctx, h.fresh(c)); err != nil || !p.Done || p.DashboardURL != "https://console.example/new" {
			t.Fatalf("check: %+v %v", p, err)
		}
	})

	t.Run("no updates to perform is success", func(t *testing.T) {
		h := newHarness(t, false)
		h.provisioned()
		h.cfn.noUpdates = true
		c := update(h)
		p, err := h.driver.Begin(h.ctx, h.fresh(c))
		if err != nil || !p.Done || p.DashboardURL != "https://console.example/bucket-1" {
			t.Fatalf("begin: %+v %v", p, err)
		}
		if p, err := h.driver.Check(h.ctx, h.fresh(c)); err != nil || !p.Done {
			t.Fatalf("check: %+v %v", p, err)
		}
	})

	t.Run("an update that is rolled back leaves the instance usable and the update repeatable", func(t *testing.T) {
		h := newHarness(t, false)
		h.provisioned()
		s := h.instanceStack()
		// An earlier failure, before this update began, is not this update's.
		h.cfn.resource(s, "Queue", "AWS::SQS::Queue", types.ResourceStatusUpdateFailed, "an old failure")
		c := update(h)
		h.driver.Begin(h.ctx, h.fresh(c))
		h.cfn.resource(s, "Bucket", "AWS::S3::Bucket", types.ResourceStatusUpdateFailed, "Versioning cannot be suspended on this bucket")
		h.cfn.set(s, types.StackStatusUpdateRollbackInProgress, "The following resource(s) failed to update: [Bucket].")
		if p, err := h.driver.Check(h.ctx, h.fresh(c)); err != nil || p.Done || !strings.Contains(p.Description, "rolling the stack back") {
			t.Fatalf("check while rolling back: %+v %v", p, err)
		}
		h.cfn.set(s, types.StackStatusUpdateRollbackComplete, "")
		_, err := h.driver.Check(h.ctx, h.fresh(c))
		f := failureOf(t, err)
		if f.InstanceUsable == nil || !*f.InstanceUsable || f.UpdateRepeatable == nil || !*f.UpdateRepeatable {
			t.Errorf("flags usable %v repeatable %v", f.InstanceUsable, f.UpdateRepeatable)
		}
		want := `The update was rolled back; the service instance is as it was before. The S3 Bucket "Bucket" could not be updated: CloudFormation reported a failure` + fullReasonLogged
		if f.Description != want {
			t.Errorf("description %q, want %q", f.Description, want)
		}
		if left, _ := h.driver.Leftovers(h.ctx, h.fresh(c)); len(left) != 0 {
			t.Errorf("an update leaves %v", left)
		}
	})

	t.Run("an update waits while the stack is busy with another change", func(t *testing.T) {
		h := newHarness(t, false)
		h.provisioned()
		h.cfn.set(h.instanceStack(), types.StackStatusUpdateCompleteCleanupInProgress, "")
		c := update(h)
		p, err := h.driver.Begin(h.ctx, h.fresh(c))
		if err != nil || p.Done || h.cfn.count("ExecuteChangeSet") != 0 {
			t.Fatalf("begin: %+v %v, %d ExecuteChangeSet calls", p, err, h.cfn.count("ExecuteChangeSet"))
		}
		h.cfn.set(h.instanceStack(), types.StackStatusUpdateComplete, "")
		if p, err := h.driver.Check(h.ctx, h.fresh(c)); err != nil || p.Done || h.cfn.count("ExecuteChangeSet") != 1 {
			t.Fatalf("check: %+v %v", p, err)
		}
	})

	t.Run("a retried update that CloudFormation says is in progress is recognised by its token", func(t *testing.T) {
		h := newHarness(t, false)
		h.provisioned()
		c := update(h)
		h.store.failPut = 2 // the update's record goes in, UpdateStack goes through, the record of it does not
		if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err == nil {
			t.Fatal("Begin did not fail with the store")
		}
		// The stack is UPDATE_IN_PROGRESS, with this token on its event.
		p, err := h.driver.Check(h.ctx, h.fresh(c))
		if err != nil || p.Done || h.cfn.count("ExecuteChangeSet") != 1 {
			t.Fatalf("check: %+v %v, %d ExecuteChangeSet calls", p, err, h.cfn.count("ExecuteChangeSet"))
		}
		if rec, _ := h.record(instanceRecord); !rec.Started {
			t.Errorf("record %+v", rec)
		}
	})

	t.Run("an update refused because another change is in progress waits", func(t *testing.T) {
		h := newHarness(t, false)
		h.provisioned()
		c := update(h)
		h.cfn.failNext("ExecuteChangeSet", apiErr("ValidationError", "Stack:x is in UPDATE_IN_PROGRESS state and can not be updated."))
		p, err := h.driver.Begin(h.ctx, h.fresh(c))
		if err != nil || p.Done || !strings.Contains(p.Description, "Waiting") {
			t.Fatalf("begin: %+v %v", p, err)
		}
		if p, err := h.driver.Check(h.ctx, h.fresh(c)); err != nil || p.Done || h.cfn.count("ExecuteChangeSet") != 2 {
			t.Fatalf("check: %+v %v", p, err)
		}
	})
}

func TestBind(t *testing.T) {
	t.Run("a binding stack takes the instance's outputs and the plan's fixed values", func(t *testing.T) {
		h := newHarness(t, true)
		h.provisioned()
		c := h.change(broker.KindBind, "op-bind")
		p, err := h.driver.Begin(h.ctx, h.fresh(c))
		if err != nil || p.Done || p.Description != "Creating 2 resources." {
			t.Fatalf("begin: %+v %v", p, err)
		}
		in := h.cfn.get(h.bindingStack()).create
		got := params(in.Parameters)
		want := map[string]string{"BucketName": "bucket-1", "BucketArn": "arn:aws:s3:::bucket-1", "Access": "ReadOnly"}
		if len(got) != len(want) || got["BucketArn"] != want["BucketArn"] || got["Access"] != "ReadOnly" || got["BucketName"] != "bucket-1" {
			t.Errorf("parameters %v, want %v", got, want)
		}
		tags := tagMap(in.Tags)
		if tags[TagBindingID] != bindingID || tags[TagAppGUID] != "app-1" || tags[TagInstanceID] != instanceID || tags[TagOperationID] != "op-bind" {
			t.Errorf("tags %v", tags)
		}
	})

	t.Run("a bind parameter the plan does not accept fails the bind: no user points a binding at another instance's resources", func(t *testing.T) {
		h := newHarness(t, true)
		h.provisioned()
		c := h.change(broker.KindBind, "op-bind")
		c.Binding.Parameters = json.RawMessage(`{"BucketArn":"arn:aws:s3:::someone-elses"}`)
		_, err := h.driver.Begin(h.ctx, h.fresh(c))
		if f := failureOf(t, err); !strings.Contains(f.Description, "The parameter BucketArn is not one the plan accepts (it accepts: none)") {
			t.Errorf("description %q", f.Description)
		}
		if h.cfn.get(h.bindingStack()) != nil {
			t.Error("a binding stack was asked for")
		}
	})

	t.Run("a binding stack gets the deployment's permissions boundary", func(t *testing.T) {
		const boundary = "arn:aws:iam::123456789012:policy/osb-boundary"
		h := newHarness(t, true)
		h.driver.Deployment.BoundaryARN = boundary
		h.provisioned()
		c := h.change(broker.KindBind, "op-bind")
		if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil {
			t.Fatal(err)
		}
		if got := params(h.cfn.get(h.bindingStack()).create.Parameters)[BoundaryParameter]; got != boundary {
			t.Errorf("%s = %q, want %q", BoundaryParameter, got, boundary)
		}
	})

	t.Run("no user sets the permissions boundary: a bind that sends one fails, and no stack is asked for", func(t *testing.T) {
		h := newHarness(t, true)
		h.driver.Deployment.BoundaryARN = "arn:aws:iam::123456789012:policy/osb-boundary"
		h.provisioned()
		c := h.change(broker.KindBind, "op-bind")
		c.Binding.Parameters = json.RawMessage(`{"PermissionsBoundaryArn":"arn:aws:iam::123456789012:policy/mine"}`)
		_, err := h.driver.Begin(h.ctx, h.fresh(c))
		if f := failureOf(t, err); !strings.Contains(f.Description, "The parameter PermissionsBoundaryArn is not one the plan accepts") {
			t.Errorf("description %q", f.Description)
		}
		if h.cfn.get(h.bindingStack()) != nil {
			t.Error("a binding stack was asked for")
		}
	})

	t.Run("without a boundary (locally) the parameter is left to its default", func(t *testing.T) {
		h := newHarness(t, true)
		h.provisioned()
		c := h.change(broker.KindBind, "op-bind")
		if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil {
			t.Fatal(err)
		}
		if got, ok := params(h.cfn.get(h.bindingStack()).create.Parameters)[BoundaryParameter]; ok {
			t.Errorf("%s = %q, want it left out", BoundaryParameter, got)
		}
	})

	t.Run("credentials are the instance's outputs and the binding's, in snake_case, and reach no log", func(t *testing.T) {
		h := newHarness(t, true)
		h.provisioned()
		c := h.change(broker.KindBind, "op-bind")
		h.driver.Begin(h.ctx, h.fresh(c))
		h.cfn.outputs(h.bindingStack(), "AccessKeyId", "AKIAEXAMPLE", "SecretAccessKey", secret, "BucketName", "from-the-binding")
		h.cfn.set(h.bindingStack(), types.StackStatusCreateComplete, "")
		p, err := h.driver.Check(h.ctx, h.fresh(c))
		if err != nil || !p.Done {
			t.Fatalf("check: %+v %v", p, err)
		}
		want := broker.Credentials{"access_key_id": "AKIAEXAMPLE", "secret_access_key": secret, "bucket_name": "from-the-binding", "bucket_arn": "arn:aws:s3:::bucket-1"}
		if len(p.Credentials) != len(want) {
			t.Errorf("credentials have %d keys, want %d", len(p.Credentials), len(want))
		}
		for k, v := range want {
			if p.Credentials[k] != v {
				t.Errorf("credential %s is not as expected", k)
			}
		}
		if strings.Contains(h.logs.String(), secret) {
			t.Error("the secret access key reached the log")
		}
		if rec, _ := h.record(bindingRecord(bindingID)); strings.Contains(rec.StackName+strings.Join(mapValues(rec.Outputs), ""), secret) {
			t.Error("the binding's record keeps the secret")
		}
	})

	t.Run("without a binding template the instance's outputs are the credentials, at once", func(t *testing.T) {
		h := newHarness(t, false)
		h.provisioned()
		c := h.change(broker.KindBind, "op-bind")
		p, err := h.driver.Begin(h.ctx, h.fresh(c))
		if err != nil || !p.Done || p.Credentials["bucket_name"] != "bucket-1" || p.Credentials["bucket_arn"] != "arn:aws:s3:::bucket-1" || len(p.Credentials) != 2 {
			t.Fatalf("begin: %+v %v", p, err)
		}
		if h.cfn.count("CreateStack") != 1 {
			t.Error("a binding stack was made")
		}
		if _, found := h.record(bindingRecord(bindingID)); found {
			t.Error("a binding record was written")
		}
	})

	t.Run("a failed bind leaves its stack's record", func(t *testing.T) {
		h := newHarness(t, true)
		c := h.change(broker.KindBind, "op-bind")
		if left, _ := h.driver.Leftovers(h.ctx, h.fresh(c)); len(left) != 1 || left[0] != bindingRecord(bindingID) {
			t.Errorf("leftovers %v", left)
		}
	})

	t.Run("an instance whose update was rolled back can still be bound", func(t *testing.T) {
		h := newHarness(t, true)
		h.provisioned()
		update := h.change(broker.KindUpdate, "op-update")
		h.driver.Begin(h.ctx, h.fresh(update))
		h.cfn.set(h.instanceStack(), types.StackStatusUpdateRollbackComplete, "")
		failureOf(t, func() error { _, err := h.driver.Check(h.ctx, h.fresh(update)); return err }())
		if _, err := h.driver.Begin(h.ctx, h.fresh(h.change(broker.KindBind, "op-bind"))); err != nil {
			t.Fatal(err)
		}
		if got := params(h.cfn.get(h.bindingStack()).create.Parameters); got["BucketName"] != "bucket-1" {
			t.Errorf("parameters %v", got)
		}
	})

	t.Run("an instance whose creation never completed cannot be bound", func(t *testing.T) {
		h := newHarness(t, true)
		h.driver.Begin(h.ctx, h.fresh(h.change(broker.KindProvision, "op-provision")))
		_, err := h.driver.Begin(h.ctx, h.fresh(h.change(broker.KindBind, "op-bind")))
		failureOf(t, err)
	})

	t.Run("unbind deletes the binding's stack and record", func(t *testing.T) {
		h := newHarness(t, true)
		h.provisioned()
		bind := h.change(broker.KindBind, "op-bind")
		h.driver.Begin(h.ctx, h.fresh(bind))
		h.cfn.set(h.bindingStack(), types.StackStatusCreateComplete, "")
		unbind := h.change(broker.KindUnbind, "op-unbind")
		p, err := h.driver.Begin(h.ctx, h.fresh(unbind))
		if err != nil || p.Done {
			t.Fatalf("begin: %+v %v", p, err)
		}
		h.cfn.set(h.bindingStack(), types.StackStatusDeleteComplete, "")
		if p, err := h.driver.Check(h.ctx, h.fresh(unbind)); err != nil || !p.Done {
			t.Fatalf("check: %+v %v", p, err)
		}
		if _, found := h.record(bindingRecord(bindingID)); found {
			t.Error("the binding's record is still there")
		}
		if _, found := h.record(instanceRecord); !found {
			t.Error("the instance's record went too")
		}
		if p, err := h.driver.Check(h.ctx, h.fresh(unbind)); err != nil || !p.Done {
			t.Fatalf("check again: %+v %v", p, err)
		}
	})
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func TestDeprovision(t *testing.T) {
	t.Run("the stack is deleted by its id, then its record", func(t *testing.T) {
		h := newHarness(t, false)
		h.provisioned()
		c := h.change(broker.KindDeprovision, "op-deprovision")
		p, err := h.driver.Begin(h.ctx, h.fresh(c))
		if err != nil || p.Done {
			t.Fatalf("begin: %+v %v", p, err)
		}
		st := h.cfn.get(h.instanceStack())
		if len(st.deletes) != 1 || aws.ToString(st.deletes[0].StackName) != aws.ToString(st.stack.StackId) {
			t.Fatalf("DeleteStack calls %d", len(st.deletes))
		}
		h.cfn.resource(h.instanceStack(), "Bucket", "AWS::S3::Bucket", types.ResourceStatusDeleteInProgress, "")
		if p, err := h.driver.Check(h.ctx, h.fresh(c)); err != nil || p.Done || p.Description != "Deleting: 1 resource left." {
			t.Fatalf("check: %+v %v", p, err)
		}
		h.cfn.set(h.instanceStack(), types.StackStatusDeleteComplete, "")
		if p, err := h.driver.Check(h.ctx, h.fresh(c)); err != nil || !p.Done {
			t.Fatalf("check: %+v %v", p, err)
		}
		if _, found := h.record(instanceRecord); found {
			t.Error("the record is still there")
		}
	})

	t.Run("a deletion that keeps failing is tried three times, then names what would not go", func(t *testing.T) {
		h := newHarness(t, false)
		h.provisioned()
		s := h.instanceStack()
		c := h.change(broker.KindDeprovision, "op-deprovision")
		if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil {
			t.Fatal(err)
		}
		for try := 1; try <= 3; try++ {
			h.cfn.resource(s, "Bucket", "AWS::S3::Bucket", types.ResourceStatusDeleteFailed, "The bucket you tried to delete is not empty")
			h.cfn.set(s, types.StackStatusDeleteFailed, "The following resource(s) failed to delete: [Bucket].")
			p, err := h.driver.Check(h.ctx, h.fresh(c))
			if try < 3 {
				if err != nil || p.Done {
					t.Fatalf("check after failure %d: %+v %v", try, p, err)
				}
				continue
			}
			f := failureOf(t, err)
			want := "CloudFormation could not delete Bucket (AWS::S3::Bucket): it still holds data; empty it, then try again" + fullReasonLogged
			if !strings.Contains(f.Description, want) || !strings.Contains(f.Description, "tried 3 times") {
				t.Errorf("description %q, want it to say %q", f.Description, want)
			}
		}
		st := h.cfn.get(s)
		if len(st.deletes) != 3 {
			t.Fatalf("DeleteStack calls %d, want 3", len(st.deletes))
		}
		tokens := map[string]bool{}
		for _, in := range st.deletes {
			tokens[aws.ToString(in.ClientRequestToken)] = true
		}
		if len(tokens) != 3 {
			t.Errorf("%d distinct tokens: a repeated token would make CloudFormation ignore the retry", len(tokens))
		}
		if _, found := h.record(instanceRecord); !found {
			t.Error("a failed deprovision must keep the record")
		}
	})

	t.Run("binding stacks a platform left are deleted too", func(t *testing.T) {
		h := newHarness(t, true)
		h.provisioned()
		h.driver.Begin(h.ctx, h.fresh(h.change(broker.KindBind, "op-bind")))
		h.cfn.set(h.bindingStack(), types.StackStatusCreateComplete, "")
		c := h.change(broker.KindDeprovision, "op-deprovision")
		h.driver.Begin(h.ctx, h.fresh(c))
		if len(h.cfn.get(h.bindingStack()).deletes) != 1 || len(h.cfn.get(h.instanceStack()).deletes) != 1 {
			t.Fatal("both stacks must be deleted")
		}
		h.cfn.set(h.instanceStack(), types.StackStatusDeleteComplete, "")
		if p, _ := h.driver.Check(h.ctx, h.fresh(c)); p.Done {
			t.Fatal("done while the binding's stack is still there")
		}
		h.cfn.set(h.bindingStack(), types.StackStatusDeleteComplete, "")
		if p, err := h.driver.Check(h.ctx, h.fresh(c)); err != nil || !p.Done {
			t.Fatalf("check: %+v %v", p, err)
		}
	})

	t.Run("a deprovision waits for a creation in progress before deleting", func(t *testing.T) {
		h := newHarness(t, false)
		h.driver.Begin(h.ctx, h.fresh(h.change(broker.KindProvision, "op-provision")))
		c := h.change(broker.KindDeprovision, "op-deprovision")
		p, err := h.driver.Begin(h.ctx, h.fresh(c))
		if err != nil || p.Done || h.cfn.count("DeleteStack") != 0 || !strings.Contains(p.Description, "Waiting") {
			t.Fatalf("begin: %+v %v", p, err)
		}
		h.cfn.set(h.instanceStack(), types.StackStatusCreateComplete, "")
		if _, err := h.driver.Check(h.ctx, h.fresh(c)); err != nil || h.cfn.count("DeleteStack") != 1 {
			t.Fatalf("check: %v, %d DeleteStack calls", err, h.cfn.count("DeleteStack"))
		}
	})

	t.Run("with nothing on record a deprovision is done at once", func(t *testing.T) {
		h := newHarness(t, false)
		if p, err := h.driver.Begin(h.ctx, h.fresh(h.change(broker.KindDeprovision, "op-deprovision"))); err != nil || !p.Done {
			t.Fatalf("begin: %+v %v", p, err)
		}
	})

	t.Run("a stack already gone is done, and only its record is deleted", func(t *testing.T) {
		h := newHarness(t, false)
		h.provisioned()
		h.cfn.set(h.instanceStack(), types.StackStatusDeleteComplete, "")
		if p, err := h.driver.Begin(h.ctx, h.fresh(h.change(broker.KindDeprovision, "op-deprovision"))); err != nil || !p.Done || h.cfn.count("DeleteStack") != 0 {
			t.Fatalf("begin: %+v %v", p, err)
		}
	})
}

func TestCleanup(t *testing.T) {
	detached := func(h *harness) broker.Detached {
		r, err := storetest.Record(h.ctx, h.repo, instanceID, instanceRecord)
		if err != nil {
			h.t.Fatal(err)
		}
		return broker.Detached{ID: "d1", InstanceID: instanceID, Name: instanceRecord, Data: r.Data}
	}

	t.Run("a detached stack is deleted until it is gone", func(t *testing.T) {
		h := newHarness(t, false)
		h.provisioned()
		d := detached(h)
		p, err := h.driver.Cleanup(h.ctx, d)
		if err != nil || p.Done || p.RetryAfter == 0 || h.cfn.count("DeleteStack") != 1 {
			t.Fatalf("cleanup: %+v %v", p, err)
		}
		if p, err := h.driver.Cleanup(h.ctx, d); err != nil || p.Done || h.cfn.count("DeleteStack") != 1 {
			t.Fatalf("cleanup while deleting: %+v %v", p, err)
		}
		h.cfn.set(h.instanceStack(), types.StackStatusDeleteComplete, "")
		if p, err := h.driver.Cleanup(h.ctx, d); err != nil || !p.Done {
			t.Fatalf("cleanup when gone: %+v %v", p, err)
		}
	})

	t.Run("a failed deletion is tried again, and after three a failure names the resources", func(t *testing.T) {
		h := newHarness(t, false)
		h.provisioned()
		d := detached(h)
		for try := 1; try <= 3; try++ {
			if _, err := h.driver.Cleanup(h.ctx, d); err != nil {
				t.Fatalf("cleanup %d: %v", try, err)
			}
			h.cfn.resource(h.instanceStack(), "Table", "AWS::DynamoDB::Table", types.ResourceStatusDeleteFailed, "Table is being used")
			h.cfn.set(h.instanceStack(), types.StackStatusDeleteFailed, "")
		}
		_, err := h.driver.Cleanup(h.ctx, d)
		if f := failureOf(t, err); !strings.Contains(f.Description, "Table (AWS::DynamoDB::Table): it conflicts with a resource that already exists or is in use") ||
			!strings.Contains(f.Detail, "Table (AWS::DynamoDB::Table) DELETE_FAILED: Table is being used") {
			t.Errorf("description %q, detail %q", f.Description, f.Detail)
		}
		if h.cfn.count("DeleteStack") != 3 {
			t.Errorf("DeleteStack calls %d, want 3", h.cfn.count("DeleteStack"))
		}
	})

	t.Run("a stack never created is done at once", func(t *testing.T) {
		h := newHarness(t, false)
		h.cfn.failNext("CreateStack", apiErr("ValidationError", "Template format error"))
		h.driver.Begin(h.ctx, h.fresh(h.change(broker.KindProvision, "op-provision")))
		if p, err := h.driver.Cleanup(h.ctx, detached(h)); err != nil || !p.Done {
			t.Fatalf("cleanup: %+v %v", p, err)
		}
	})

	t.Run("another stack of the same name is left alone", func(t *testing.T) {
		h := newHarness(t, false)
		data, _ := json.Marshal(record{StackName: h.instanceStack(), CreatedBy: "op-old"})
		h.cfn.add(h.instanceStack(), types.StackStatusCreateComplete, types.Tag{Key: aws.String(TagOperationID), Value: aws.String("op-new")})
		if p, err := h.driver.Cleanup(h.ctx, broker.Detached{ID: "d1", Name: instanceRecord, Data: data}); err != nil || !p.Done || h.cfn.count("DeleteStack") != 0 {
			t.Fatalf("cleanup: %+v %v", p, err)
		}
	})

	t.Run("throttling during cleanup is transient", func(t *testing.T) {
		h := newHarness(t, false)
		h.provisioned()
		h.cfn.failNext("DescribeStacks", apiErr("ThrottlingException", "Rate exceeded"))
		_, err := h.driver.Cleanup(h.ctx, detached(h))
		var f *broker.Failure
		if err == nil || errors.As(err, &f) {
			t.Fatalf("cleanup: %v, want a transient error", err)
		}
	})
}

func TestParameterValues(t *testing.T) {
	str, list := Parameter{Type: "String"}, Parameter{Type: "CommaDelimitedList"}
	cases := []struct {
		name string
		raw  string
		decl Parameter
		want string
		err  string
	}{
		{"a string is passed as it is", `"Enabled"`, str, "Enabled", ""},
		{"a number is passed as its JSON text", `120`, Parameter{Type: "Number"}, "120", ""},
		{"a decimal keeps its JSON text", `1.50`, Parameter{Type: "Number"}, "1.50", ""},
		{"a boolean is passed as its JSON text", `true`, str, "true", ""},
		{"an array of scalars is comma-joined for a CommaDelimitedList", `["a", 2, false]`, list, "a,2,false", ""},
		{"an array is comma-joined for a List<> type", `["subnet-1","subnet-2"]`, Parameter{Type: "List<AWS::EC2::Subnet::Id>"}, "subnet-1,subnet-2", ""},
		{"an array is JSON text for a String", `["a", "b"]`, str, `["a","b"]`, ""},
		{"an object is compact JSON text", `{ "a": [1, 2] }`, str, `{"a":[1,2]}`, ""},
		{"an element with a comma is refused", `["a,b"]`, list, "", "must not contain a comma"},
		{"a nested array is refused in a list", `[["a"]]`, list, "", "element 0 must be a string, number or boolean"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parameterValue(json.RawMessage(tc.raw), tc.decl)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("%q %v, want %q", got, err, tc.want)
			}
		})
	}
	t.Run("null leaves the parameter out", func(t *testing.T) {
		got, err := requestParameters(json.RawMessage(`{"Versioning":null,"Size":2}`), &Template{Parameters: map[string]Parameter{"Versioning": str, "Size": str}},
			[]string{"Size", "Versioning"})
		if err != nil || len(got) != 1 || got["Size"] != "2" {
			t.Fatalf("%v %v", got, err)
		}
	})
	t.Run("parameters that are not an object fail", func(t *testing.T) {
		_, err := requestParameters(json.RawMessage(`[1]`), &Template{}, nil)
		failureOf(t, err)
	})
	t.Run("a parameter the plan does not accept fails the change, naming it and those it accepts, never dropped", func(t *testing.T) {
		decls := &Template{Parameters: map[string]Parameter{"Versioning": str, "ClientCidr": str}}
		_, err := requestParameters(json.RawMessage(`{"Versioning":"Enabled","ClientCidr":"0.0.0.0/0"}`), decls, []string{"Versioning"})
		f := failureOf(t, err)
		if !strings.Contains(f.Description, "The parameter ClientCidr is not one the plan accepts (it accepts: Versioning)") ||
			strings.Contains(f.Description, "0.0.0.0") {
			t.Errorf("description %q", f.Description)
		}
	})
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"AccessKeyId": "access_key_id", "BucketName": "bucket_name", "SQSQueueUrl": "sqs_queue_url",
		"DeadLetterQueueUrl": "dead_letter_queue_url", "S3Bucket": "s3_bucket", "Ipv6Cidr": "ipv6_cidr",
		"Host": "host", "DBInstanceClass": "db_instance_class", "already_snake": "already_snake", "URL": "url",
	} {
		t.Run(in+" becomes "+want, func(t *testing.T) {
			if got := snakeCase(in); got != want {
				t.Errorf("snakeCase(%q) = %q", in, got)
			}
		})
	}
}

func TestFailureReasonsAreClassifiedForUsers(t *testing.T) {
	const denied = `Resource handler returned message: "User: arn:aws:sts::123456789012:assumed-role/osb-cfn-service-role/AWSCloudFormation is not authorized to perform: s3:CreateBucket on resource: "arn:aws:s3:::osb-x" because no identity-based policy allows the s3:CreateBucket action (Service: S3, Status Code: 403, Request ID: ABC)"`
	t.Run("a permission failure shows the resource's logical id and the class; the failure's detail and the log have CloudFormation's full reason", func(t *testing.T) {
		h := newHarness(t, false)
		c := h.change(broker.KindProvision, "op-1")
		if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil {
			t.Fatal(err)
		}
		s := h.instanceStack()
		h.cfn.resource(s, "Bucket", "AWS::S3::Bucket", types.ResourceStatusCreateFailed, denied)
		h.cfn.set(s, types.StackStatusRollbackComplete, "The following resource(s) failed to create: [Bucket]. Rollback requested by user.")
		_, err := h.driver.Check(h.ctx, h.fresh(c))
		f := failureOf(t, err)
		want := "The S3 Bucket \"Bucket\" could not be created: the broker's service role lacks a permission (the platform operator finds CloudFormation's full reason with the broker's ops operation command, and in its log)."
		if f.Description != want {
			t.Errorf("description %q, want %q", f.Description, want)
		}
		if wantDetail := "stack " + s + ": Bucket (AWS::S3::Bucket) CREATE_FAILED: " + denied; f.Detail != wantDetail {
			t.Errorf("detail %q, want %q", f.Detail, wantDetail)
		}
		for _, secret := range []string{"123456789012", "arn:", "s3:CreateBucket", "osb-cfn-service-role"} {
			if strings.Contains(f.Description, secret) {
				t.Errorf("description %q shows %q", f.Description, secret)
			}
		}
		var line map[string]any
		for _, l := range strings.Split(strings.TrimSpace(h.logs.String()), "\n") {
			if strings.Contains(l, `"stack change failed"`) {
				if err := json.Unmarshal([]byte(l), &line); err != nil {
					t.Fatal(err)
				}
			}
		}
		if line["reason"] != denied || line["operation_id"] != "op-1" || line["instance_id"] != instanceID ||
			line["resource"] != "Bucket" || line["stack"] != s || line["level"] != "WARN" {
			t.Errorf("log line %v, want the full reason with the stack, resource and operation's ids", line)
		}
	})
	t.Run("a stack's own reason shows only the logical ids it lists", func(t *testing.T) {
		h := newHarness(t, false)
		c := h.change(broker.KindProvision, "op-1")
		h.driver.Begin(h.ctx, h.fresh(c))
		h.cfn.set(h.instanceStack(), types.StackStatusRollbackInProgress, "The following resource(s) failed to create: [Bucket, Queue]. Role arn:aws:iam::123456789012:role/x is invalid.")
		f := failureOf(t, func() error { _, err := h.driver.Check(h.ctx, h.fresh(c)); return err }())
		if want := "The stack could not be created: The following resource(s) failed to create: [Bucket, Queue]."; f.Description != want {
			t.Errorf("description %q, want %q", f.Description, want)
		}
		if !strings.Contains(f.Detail, "Role arn:aws:iam::123456789012:role/x is invalid.") {
			t.Errorf("detail %q, want the stack's full reason", f.Detail)
		}
	})
	t.Run("a reason that repeats a request parameter stays out of the log", func(t *testing.T) {
		h := newHarness(t, false)
		c := h.change(broker.KindProvision, "op-1")
		c.Instance.Parameters = json.RawMessage(`{"Versioning":"Enabled-by-mallory"}`)
		h.driver.Begin(h.ctx, h.fresh(c))
		h.cfn.resource(h.instanceStack(), "Bucket", "AWS::S3::Bucket", types.ResourceStatusCreateFailed, "Invalid value Enabled-by-mallory for Status")
		h.cfn.set(h.instanceStack(), types.StackStatusRollbackComplete, "")
		f := failureOf(t, func() error { _, err := h.driver.Check(h.ctx, h.fresh(c)); return err }())
		if !strings.Contains(f.Description, "a parameter value or the template is not valid") {
			t.Errorf("description %q", f.Description)
		}
		if strings.Contains(h.logs.String(), "mallory") || !strings.Contains(h.logs.String(), "repeats a request parameter") {
			t.Errorf("log %s", h.logs.String())
		}
		if strings.Contains(f.Detail, "mallory") || !strings.Contains(f.Detail, "repeats a request parameter") {
			t.Errorf("detail %q, want the reason left out", f.Detail)
		}
	})
}

func TestReasonClass(t *testing.T) {
	cases := []struct{ reason, class string }{
		{"API: s3:CreateBucket Access Denied", "the broker's service role lacks a permission"},
		{"User: arn:aws:sts::123456789012:assumed-role/r is not authorized to perform: iam:CreateUser", "the broker's service role lacks a permission"},
		{"Resource handler returned message: \"AccessDenied\" (must be allowed)", "the broker's service role lacks a permission"},
		{"LimitExceededException: The maximum number of buckets has been reached", "an account limit or quota was reached"},
		{"DB instance quota exceeded (Service: Rds, Status Code: 400)", "an account limit or quota was reached"},
		{"Template format error: Unresolved resource dependencies [X] in the Resources block", "a parameter value or the template is not valid"},
		{"Parameter validation failed: parameter value abc for parameter name VpcId does not exist", "a parameter value or the template is not valid"},
		{"Invalid request provided: AWS::SQS::Queue", "a parameter value or the template is not valid"},
		{"Properties validation failed for resource Table with message: #/TableName: expected maxLength: 255", "a parameter value or the template is not valid"},
		{"osb-x-bucket already exists", "it conflicts with a resource that already exists or is in use"},
		{"The security group is in use by another resource", "it conflicts with a resource that already exists or is in use"},
		{"The bucket you tried to delete is not empty", "it still holds data; empty it, then try again"},
		{"Internal Failure", "CloudFormation reported a failure"},
	}
	for _, tc := range cases {
		t.Run(tc.reason+" is "+tc.class, func(t *testing.T) {
			if got := reasonClass(tc.reason); got != tc.class {
				t.Errorf("reasonClass = %q, want %q", got, tc.class)
			}
		})
	}
}
