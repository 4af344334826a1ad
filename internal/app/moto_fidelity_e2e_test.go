package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app/apptest"
	cfndriver "github.com/serverless-osb/broker/internal/drivers/cloudformation"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/osbtest"
)

// TestADeprovisionNeverSucceedsWhileItsBucketStaysOnMoto: an S3 example
// instance whose bucket holds an object. CloudFormation cannot delete a
// bucket that is not empty (the repository's moto fixes make moto fail it
// as CloudFormation does): the deprovision fails naming the bucket, the
// instance stays (OSB: a failed deprovision leaves the instance), as do the
// bucket and its object. Emptied, the bucket goes with the next deprovision.
func TestADeprovisionNeverSucceedsWhileItsBucketStaysOnMoto(t *testing.T) {
	cfg := mototest.Config(t, "us-east-1")
	cfn := cloudformation.NewFromConfig(cfg)
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	prefix := "osbdp" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	b := shippedOnMoto(t, cfg, prefix)
	service, plan := planOf(t, b, "aws-s3-bucket", "standard")
	e := &e2e{t: t, c: client(t, b.URL), service: service}
	id := uuid.NewString()
	r := e.provision(id, plan, true, map[string]any{})
	if state, desc := e.poll(id, r.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("provision ended %s: %s", state, desc)
	}
	bucket := stackOutputs(t, cfn, prefix, id)["BucketName"]
	if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("kept"),
		Body: strings.NewReader("data")}); err != nil {
		t.Fatal(err)
	}

	deprovision := func() (osb.LastOperationState, string) {
		t.Helper()
		dr, err := e.c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: id, ServiceID: service, PlanID: plan, AcceptsIncomplete: true})
		if err != nil {
			t.Fatalf("deprovision: %v", err)
		}
		return e.poll(id, dr.OperationKey)
	}
	state, desc := deprovision()
	if state != osb.StateFailed || !strings.Contains(desc, "Bucket (AWS::S3::Bucket)") {
		t.Errorf("the deprovision of an instance whose bucket holds an object ended %s: %q, want failed naming the bucket", state, desc)
	}
	if _, err := s3c.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("kept")}); err != nil {
		t.Errorf("the bucket's object is gone after the failed deprovision: %v", err)
	}
	if got := b.Do(apptest.Request{Method: http.MethodGet, Path: "/v2/service_instances/" + id}); got.Status != http.StatusOK {
		t.Errorf("GET instance after the failed deprovision: %d %s, want 200: the instance stays", got.Status, got.Raw)
	}

	if _, err := s3c.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("kept")}); err != nil {
		t.Fatal(err)
	}
	if state, desc := deprovision(); state != osb.StateSucceeded && state != osbtest.Gone {
		t.Fatalf("the deprovision of the emptied bucket ended %s: %s", state, desc)
	}
	if _, err := s3c.HeadBucket(t.Context(), &s3.HeadBucketInput{Bucket: aws.String(bucket)}); err == nil {
		t.Error("the emptied bucket is still there after the deprovision succeeded")
	}
}

// TestAnUpdatesTagsReachTheQueueOnMoto: CloudFormation gives a stack's
// resources the stack's tags, and an update's new tags (the repository's
// moto fixes make moto do the same). An SQS example instance provisioned
// in a Cloud Foundry space under one name carries the broker's tags; an
// update that renames it (the platform's context) moves the name's tag on
// the queue.
func TestAnUpdatesTagsReachTheQueueOnMoto(t *testing.T) {
	cfg := mototest.Config(t, "us-east-1")
	cfn := cloudformation.NewFromConfig(cfg)
	q := sqs.NewFromConfig(cfg)
	prefix := "osbtg" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	b := shippedOnMoto(t, cfg, prefix)
	service, plan := planOf(t, b, "aws-sqs-queue", "standard")
	e := &e2e{t: t, c: client(t, b.URL), service: service}
	id := uuid.NewString()
	cfContext := func(name string) map[string]any {
		return map[string]any{"platform": "cloudfoundry", "organization_guid": "org-1", "space_guid": "space-1", "instance_name": name}
	}
	r, err := e.c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: id, ServiceID: service, PlanID: plan, AcceptsIncomplete: true,
		OrganizationGUID: "org-1", SpaceGUID: "space-1", Context: cfContext("orders")})
	if err != nil {
		t.Fatalf("provision: %v", err)
	}
	if state, desc := e.poll(id, r.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("provision ended %s: %s", state, desc)
	}
	queueTags := func() map[string]string {
		t.Helper()
		url := stackOutputs(t, cfn, prefix, id)["QueueUrl"]
		out, err := q.ListQueueTags(t.Context(), &sqs.ListQueueTagsInput{QueueUrl: aws.String(url)})
		if err != nil {
			t.Fatalf("the queue's tags (%s): %v", url, err)
		}
		return out.Tags
	}
	if got := queueTags(); got[cfndriver.TagInstanceID] != id || got[cfndriver.TagInstanceName] != "orders" {
		t.Errorf("the provisioned queue's tags are %v, want the instance's (%s %s, %s orders)", got,
			cfndriver.TagInstanceID, id, cfndriver.TagInstanceName)
	}

	ur, err := e.c.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: id, ServiceID: service, AcceptsIncomplete: true,
		Parameters: map[string]any{"VisibilityTimeout": 90}, Context: cfContext("orders-eu")})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if state, desc := e.poll(id, ur.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("the update ended %s: %s", state, desc)
	}
	if got := queueTags(); got[cfndriver.TagInstanceName] != "orders-eu" || got[cfndriver.TagInstanceID] != id {
		t.Errorf("after the update the queue's tags are %v, want %s orders-eu", got, cfndriver.TagInstanceName)
	}
}

// shippedOnMoto is a local broker of the shipped example services on
// moto (cfg), its stacks named with prefix, whose waits take no time.
func shippedOnMoto(t *testing.T, cfg aws.Config, prefix string) *apptest.Broker {
	t.Helper()
	catalogPath, _ := shippedServices(t)
	return apptest.StartWith(t, apptest.Options{Dir: t.TempDir(), Catalog: catalogPath, ReapInterval: -1,
		AWS: func(context.Context) (aws.Config, error) { return cfg, nil },
		Getenv: func(k string) string {
			if k == "BROKER_STACK_PREFIX" {
				return prefix
			}
			return ""
		},
		Sleep: func(ctx context.Context, _ time.Duration) {},
	})
}
