package sandbox_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/osbtest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// exampleService is one of services/catalog.yaml's, with how to tell that
// what its credentials name exists.
type exampleService struct {
	service, plan, id string
	params            map[string]any
	exists            func(ctx context.Context, creds map[string]any) (bool, error)
	// update, when set, is an update's parameters (the worker's
	// UpdateStack), and updated tells that the resource took them.
	update  map[string]any
	updated func(ctx context.Context, creds map[string]any) error
}

func examples() []exampleService {
	cfg := shared.Admin
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	sqsc, ddb := sqs.NewFromConfig(cfg), dynamodb.NewFromConfig(cfg)
	return []exampleService{
		{service: "319021a7-ff81-4506-bf4c-07545d1bfc47", plan: "66facbde-e025-420b-99d7-41ac8c6f0db8", id: "s3",
			params: map[string]any{"Versioning": "Enabled"},
			exists: func(ctx context.Context, creds map[string]any) (bool, error) {
				_, err := s3c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(fmt.Sprint(creds["bucket_name"]))})
				return notFound(err)
			}},
		{service: "aws-sqs-queue", plan: "standard", id: "sqs",
			exists: func(ctx context.Context, creds map[string]any) (bool, error) {
				_, err := sqsc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(fmt.Sprint(creds["queue_url"]))})
				return notFound(err)
			},
			update: map[string]any{"VisibilityTimeout": 61},
			updated: func(ctx context.Context, creds map[string]any) error {
				out, err := sqsc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(fmt.Sprint(creds["queue_url"])),
					AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameVisibilityTimeout}})
				if err != nil {
					return err
				}
				if got := out.Attributes[string(sqstypes.QueueAttributeNameVisibilityTimeout)]; got != "61" {
					return fmt.Errorf("the queue's VisibilityTimeout is %s, want the update's 61", got)
				}
				return nil
			}},
		{service: "aws-dynamodb-table", plan: "on-demand", id: "dynamodb",
			params: map[string]any{"HashKeyName": "pk"},
			exists: func(ctx context.Context, creds map[string]any) (bool, error) {
				_, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(fmt.Sprint(creds["table_name"]))})
				return notFound(err)
			}},
	}
}

func notFound(err error) (bool, error) {
	if err == nil {
		return true, nil
	}
	for _, s := range []string{"NotFound", "404", "ResourceNotFoundException", "NonExistentQueue", "does not exist"} {
		if strings.Contains(err.Error(), s) {
			return false, nil
		}
	}
	return false, err
}

// planIDs finds a service's plan in the catalog by names (or ids).
func planIDs(t *testing.T, c osb.Client, service, plan string) (string, string) {
	t.Helper()
	cat, err := c.GetCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cat.Services {
		if s.Name != service && s.ID != service {
			continue
		}
		for _, p := range s.Plans {
			if p.Name == plan || p.ID == plan {
				return s.ID, p.ID
			}
		}
	}
	t.Fatalf("no plan %s of %s", plan, service)
	return "", ""
}

// liveStacks names the stacks moto holds that are not deleted.
func liveStacks(ctx context.Context, t *testing.T, instance string) []string {
	t.Helper()
	var names []string
	p := cloudformation.NewDescribeStacksPaginator(cloudformation.NewFromConfig(shared.Admin), &cloudformation.DescribeStacksInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Stacks {
			if s.StackStatus == cfntypes.StackStatusDeleteComplete {
				continue
			}
			if slices.ContainsFunc(s.Tags, func(tag cfntypes.Tag) bool { return aws.ToString(tag.Value) == instance }) {
				names = append(names, aws.ToString(s.StackName))
			}
		}
	}
	return names
}

// TestTheExampleServicesOnMotosCloudFormation: the worker, with its role's
// permissions, makes each example service's instance and binding stacks
// under the stack's CloudFormation service role, updates the queue's
// instance stack, and deletes them.
func TestTheExampleServicesOnMotosCloudFormation(t *testing.T) {
	c := client(t, shared)
	users := iam.NewFromConfig(shared.Admin)
	for _, ex := range examples() {
		t.Run(ex.id+" instance and binding stacks are made and gone", func(t *testing.T) {
			t.Parallel()
			ctx, cancel := waittest.Context(t)
			defer cancel()
			service, plan := planIDs(t, c, ex.service, ex.plan)
			e := &e2e{t: t, c: c}
			instance, binding := "ex-"+ex.id, "exb-"+ex.id
			r, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: instance, ServiceID: service, PlanID: plan,
				OrganizationGUID: "org", SpaceGUID: "space", AcceptsIncomplete: true, Parameters: ex.params})
			if err != nil || !r.Async {
				t.Fatalf("provision: %+v %v", r, err)
			}
			if state, desc := e.pollService(instance, service, r.OperationKey); state != osb.StateSucceeded {
				t.Fatalf("provision ended %s: %s", state, desc)
			}
			if stacks := liveStacks(ctx, t, instance); len(stacks) != 1 {
				t.Fatalf("stacks %v, want the instance's one", stacks)
			}
			br, err := c.Bind(&osb.BindRequest{InstanceID: instance, BindingID: binding, ServiceID: service, PlanID: plan,
				AcceptsIncomplete: true, BindResource: &osb.BindResource{AppGUID: ptr("app-1")}})
			if err != nil || !br.Async {
				t.Fatalf("bind: %+v %v", br, err)
			}
			if state := e.pollBinding(instance, binding, br.OperationKey); state != osb.StateSucceeded {
				t.Fatalf("bind ended %s", state)
			}
			got, err := c.GetBinding(&osb.GetBindingRequest{InstanceID: instance, BindingID: binding})
			if err != nil {
				t.Fatalf("fetch binding: %v", err)
			}
			creds := got.Credentials
			if ok, err := ex.exists(ctx, creds); err != nil || !ok {
				t.Fatalf("what the credentials %v name does not exist (%v)", creds, err)
			}
			if _, err := users.GetAccessKeyLastUsed(ctx, &iam.GetAccessKeyLastUsedInput{AccessKeyId: aws.String(fmt.Sprint(creds["access_key_id"]))}); err != nil {
				t.Fatalf("the binding's access key: %v", err)
			}
			if stacks := liveStacks(ctx, t, instance); len(stacks) != 2 {
				t.Fatalf("stacks %v after bind, want the instance's and the binding's", stacks)
			}
			if ex.update != nil {
				up, err := c.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: instance, ServiceID: service, AcceptsIncomplete: true, Parameters: ex.update})
				if err != nil || !up.Async {
					t.Fatalf("update: %+v %v", up, err)
				}
				if state, desc := e.pollService(instance, service, up.OperationKey); state != osb.StateSucceeded {
					t.Fatalf("update ended %s: %s", state, desc)
				}
				if err := ex.updated(ctx, creds); err != nil {
					t.Fatalf("after the update: %v", err)
				}
			}
			ur, err := c.Unbind(&osb.UnbindRequest{InstanceID: instance, BindingID: binding, ServiceID: service, PlanID: plan, AcceptsIncomplete: true})
			if err != nil {
				t.Fatalf("unbind: %v", err)
			}
			if state := e.pollBinding(instance, binding, ur.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
				t.Fatalf("unbind ended %s", state)
			}
			dr, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: instance, ServiceID: service, PlanID: plan, AcceptsIncomplete: true})
			if err != nil {
				t.Fatalf("deprovision: %v", err)
			}
			if state, desc := e.pollService(instance, service, dr.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
				t.Fatalf("deprovision ended %s: %s", state, desc)
			}
			if ok, err := ex.exists(ctx, creds); err != nil || ok {
				t.Fatalf("the resource outlived the deprovision (%v)", err)
			}
			if stacks := liveStacks(ctx, t, instance); len(stacks) != 0 {
				t.Fatalf("stacks %v outlived the deprovision", stacks)
			}
		})
	}
}
