package cloudformation

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	cfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/store/bolt"
)

// TestATemplateOverTheBodyLimitGoesThroughS3OnMoto: a template over
// CloudFormation's 51,200-byte TemplateBody limit (the SQS queue's, grown
// with comments), which the driver refused at start before (issue 31, 5),
// is put in the driver's own bucket under its digest and handed over as
// TemplateURL, for the stack's creation and for an upgrade's change set,
// on moto's CloudFormation and S3.
func TestATemplateOverTheBodyLimitGoesThroughS3OnMoto(t *testing.T) {
	ctx := context.Background()
	cfg := mototest.Config(t, "us-east-1")
	client := cfn.NewFromConfig(cfg)
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })

	// The plan, with its template grown past the limit as a file beside
	// the catalog, so Configure reads it as it reads any.
	plan, dir := shippedPlan(t, "sqs-queue")
	body := mustRead(t, filepath.Join(dir, "sqs-queue/instance.yaml"))
	padding := "\n# " + strings.Repeat("Comments count towards CloudFormation's template size. ", MaxTemplateBody/50) + "\n"
	big := body + padding
	if len(big) <= MaxTemplateBody {
		t.Fatalf("the test's template is %d bytes, not over %d", len(big), MaxTemplateBody)
	}
	bigDir := templateDir(t, map[string]string{"sqs-queue/instance.yaml": big, "sqs-queue/binding.yaml": mustRead(t, filepath.Join(dir, "sqs-queue/binding.yaml"))})
	settings, err := Configure(plan, plan.Settings.Config, bigDir)
	if err != nil {
		t.Fatalf("a template of %d bytes is refused: %v", len(big), err)
	}

	store, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	d := New(client, store, Deployment{StackPrefix: "osbtest"}, nil)
	d.Templates = &Templates{S3: NewS3(cfg), Account: NewAccount(cfg), Region: "us-east-1"}

	inst := broker.Instance{ID: mototest.Name("big"), InstanceRequest: broker.InstanceRequest{ServiceID: "svc", PlanID: plan.ID,
		Parameters: json.RawMessage(`{"VisibilityTimeout":60}`), MaintenanceInfo: &broker.MaintenanceInfo{Version: "0.9.0"}}}
	change := func(kind broker.OperationKind, opID string) broker.Change {
		return broker.Change{Operation: broker.Operation{ID: opID, InstanceID: inst.ID, Kind: kind, Async: true},
			Instance: inst, Plan: &catalog.Plan{ID: plan.ID, Name: plan.Name}, Settings: settings}
	}
	name := InstanceStackName("osbtest", inst.ID)

	run(t, d, change(broker.KindProvision, "op-provision"))
	stack := describeInMoto(t, client, name)
	if stack == nil || stack.StackStatus != types.StackStatusCreateComplete {
		t.Fatalf("instance stack: %+v", stack)
	}

	bucket := "serverless-osb-templates-123456789012-us-east-1"
	objects, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("templates/sha256-")})
	if err != nil {
		t.Fatalf("the driver's bucket %s: %v", bucket, err)
	}
	var found bool
	for _, o := range objects.Contents {
		got, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: o.Key})
		if err != nil {
			t.Fatal(err)
		}
		text, _ := io.ReadAll(got.Body)
		got.Body.Close()
		if string(text) == big && strings.HasSuffix(aws.ToString(o.Key), ".yaml") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no object of %s holds the template (%d objects)", bucket, len(objects.Contents))
	}
	if got := stackTemplate(t, client, name); got != big {
		t.Errorf("the stack runs a template of %d bytes, not the %d-byte one", len(got), len(big))
	}

	t.Run("an upgrade's change set takes it from S3 too", func(t *testing.T) {
		update := change(broker.KindUpdate, "op-upgrade")
		update.Operation.Target = &broker.Target{MaintenanceInfo: &broker.MaintenanceInfo{Version: "1.0.0"}}
		run(t, d, update)
		if stack := describeInMoto(t, client, name); stack == nil || stack.StackStatus != types.StackStatusUpdateComplete {
			t.Fatalf("instance stack after the upgrade: %+v", stack)
		}
	})

	t.Run("without a bucket, the operation fails saying why", func(t *testing.T) {
		bare := New(client, store, Deployment{StackPrefix: "osbtest"}, nil)
		other := broker.Instance{ID: mototest.Name("big-bare"), InstanceRequest: inst.InstanceRequest}
		c := broker.Change{Operation: broker.Operation{ID: "op-bare", InstanceID: other.ID, Kind: broker.KindProvision, Async: true},
			Instance: other, Plan: &catalog.Plan{ID: plan.ID, Name: plan.Name}, Settings: settings}
		_, err := bare.Begin(ctx, c)
		var f *broker.Failure
		if !errors.As(err, &f) || !strings.Contains(f.Description, "no bucket for templates") {
			t.Fatalf("begin: %v, want a failure naming the missing bucket", err)
		}
	})

	run(t, d, change(broker.KindDeprovision, "op-deprovision"))
	if stack := describeInMoto(t, client, name); stack != nil {
		t.Fatalf("instance stack after deprovision: %s", stack.StackStatus)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// stackTemplate is the template the stack runs, as CloudFormation keeps it.
func stackTemplate(t *testing.T, client *cfn.Client, name string) string {
	t.Helper()
	out, err := client.GetTemplate(context.Background(), &cfn.GetTemplateInput{StackName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.TemplateBody)
}
