package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awscfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/google/uuid"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/mototest"
)

// deniedReason is what CloudFormation says of a resource its service role
// may not create: the account id, the role's ARN and the IAM action, which
// users must not read and the operator needs.
const deniedReason = `Resource handler returned message: "User: arn:aws:sts::123456789012:assumed-role/osb-cfn-service-role/AWSCloudFormation is not authorized to perform: s3:CreateBucket on resource: "arn:aws:s3:::osb-x" because no identity-based policy allows the s3:CreateBucket action (Service: S3, Status Code: 403)"`

// deniedBucket is CloudFormation as it answers for a stack whose Bucket the
// service role may not create. Moto creates every stack, so this fake
// turns a created stack into a rolled-back one (DescribeStacks) and tells
// why in the stack's events (DescribeStackEvents). A stack being deleted
// is left as moto has it, so that the cleanup of the failed stack runs.
func deniedBucket(s *middleware.Stack) error {
	return s.Initialize.Add(middleware.InitializeMiddlewareFunc("DeniedBucket",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			if err != nil {
				return out, md, err
			}
			switch res := out.Result.(type) {
			case *awscfn.DescribeStacksOutput:
				for i := range res.Stacks {
					if res.Stacks[i].StackStatus == types.StackStatusCreateComplete {
						res.Stacks[i].StackStatus = types.StackStatusRollbackComplete
						res.Stacks[i].StackStatusReason = aws.String("The following resource(s) failed to create: [Bucket]. Rollback requested by user.")
					}
				}
			case *awscfn.DescribeStackEventsOutput:
				if awsmiddleware.GetOperationName(ctx) != "DescribeStackEvents" {
					break
				}
				name := aws.ToString(in.Parameters.(*awscfn.DescribeStackEventsInput).StackName)
				stackName := name
				for _, e := range res.StackEvents {
					if aws.ToString(e.ResourceType) == "AWS::CloudFormation::Stack" {
						stackName = aws.ToString(e.LogicalResourceId)
					}
				}
				event := func(logical, typ string, status types.ResourceStatus, reason string) types.StackEvent {
					return types.StackEvent{StackId: aws.String(name), StackName: aws.String(stackName), EventId: aws.String(uuid.NewString()),
						LogicalResourceId: aws.String(logical), ResourceType: aws.String(typ), ResourceStatus: status,
						ResourceStatusReason: aws.String(reason), Timestamp: aws.Time(time.Now())}
				}
				// Newest first, back to the start of the creation.
				res.StackEvents = []types.StackEvent{
					event(stackName, "AWS::CloudFormation::Stack", types.ResourceStatusRollbackComplete, ""),
					event("Bucket", "AWS::S3::Bucket", types.ResourceStatusCreateFailed, deniedReason),
					event(stackName, "AWS::CloudFormation::Stack", types.ResourceStatusCreateInProgress, "User Initiated"),
				}
			}
			return out, md, nil
		}), middleware.After)
}

// TestOpsOperationShowsAFailuresFullReason: a stack that CloudFormation
// could not create fails the provision; last_operation tells users the
// resource and the class of the reason, never the account, role or action;
// `ops operation` shows the operator CloudFormation's full reason, on
// either store.
func TestOpsOperationShowsAFailuresFullReason(t *testing.T) {
	cfg := mototest.Config(t, "us-east-1")
	cfg.APIOptions = append(cfg.APIOptions, deniedBucket)
	prefix := "osbd" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	for _, store := range []string{"bolt", "dynamodb"} {
		t.Run(store, func(t *testing.T) { failAndShowTheReason(t, store, cfg, prefix) })
	}
}

// failAndShowTheReason runs TestOpsOperationShowsAFailuresFullReason on
// one store.
func failAndShowTheReason(t *testing.T, store string, cfg aws.Config, prefix string) {
	opts := apptest.Options{Catalog: "services/catalog.yaml", ReapInterval: -1, Sleep: noSleep,
		AWS: func(context.Context) (aws.Config, error) { return cfg, nil },
		Getenv: func(k string) string {
			if k == "BROKER_STACK_PREFIX" {
				return prefix
			}
			return ""
		}}
	if store == "dynamodb" {
		opts.Store = dynamoStore(t)
	}
	b := apptest.StartWith(t, opts)
	service, plan := planOf(t, b, "aws-s3-bucket", "standard")
	instance := uuid.NewString()
	path := "/v2/service_instances/" + instance
	resp := b.Do(apptest.Request{Method: http.MethodPut, Path: path + "?accepts_incomplete=true", Body: provisionBody(service, plan, map[string]any{})})
	if resp.Status != http.StatusAccepted {
		t.Fatalf("provision: %d %s", resp.Status, resp.Raw)
	}
	op := resp.Str("operation")
	lo := b.WaitLastOperation(path + "/last_operation?operation=" + op)
	if lo.Str("state") != "failed" || !strings.Contains(lo.Str("description"), `"Bucket"`) ||
		!strings.Contains(lo.Str("description"), "lacks a permission") {
		t.Fatalf("last_operation %s, want the provision failed, naming the bucket and the class of the reason", lo.Raw)
	}
	for _, secret := range []string{"123456789012", "arn:", "s3:CreateBucket", "osb-cfn-service-role"} {
		if bytes.Contains(lo.Raw, []byte(secret)) {
			t.Errorf("last_operation shows %q to users: %s", secret, lo.Raw)
		}
	}

	var text bytes.Buffer
	if err := app.Ops(t.Context(), b.Local.Broker, []string{"operation", instance}, &text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), op) || !strings.Contains(text.String(), deniedReason) || !strings.Contains(text.String(), lo.Str("description")) {
		t.Errorf("ops operation %s:\n%s\nwant the operation, its description and CloudFormation's full reason", instance, text.String())
	}
	var answer struct {
		InstanceID string `json:"instance_id"`
		Operations []struct {
			ID          string `json:"operation_id"`
			State       string `json:"state"`
			Description string `json:"description"`
			Detail      string `json:"detail"`
		} `json:"operations"`
	}
	var js bytes.Buffer
	if err := app.OpsJSON(t.Context(), b.Local.Broker, []string{"operation", instance, op}, &js); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js.Bytes(), &answer); err != nil {
		t.Fatalf("%v: %s", err, js.String())
	}
	if len(answer.Operations) != 1 || answer.InstanceID != instance || answer.Operations[0].ID != op || answer.Operations[0].State != "failed" ||
		!strings.HasSuffix(answer.Operations[0].Detail, "Bucket (AWS::S3::Bucket) CREATE_FAILED: "+deniedReason) {
		t.Errorf("ops --json operation %s %s: %s, want the failed operation with CloudFormation's full reason", instance, op, js.String())
	}
}

// TestOpsOperationNamesWhatIsMissing: ops operation without an instance is
// a usage error; of an instance with no operation, an error naming it.
func TestOpsOperationNamesWhatIsMissing(t *testing.T) {
	var out bytes.Buffer
	for _, args := range [][]string{{"operation"}, {"operation", "a", "b", "c"}} {
		if err := app.RunOps(t.Context(), args, &out, nil); !errors.Is(err, app.ErrUsage) {
			t.Errorf("ops %v: %v, want a usage error", args, err)
		}
	}
	b := apptest.Start(t, "")
	for _, args := range [][]string{{"operation", "no-such-instance"}, {"operation", "no-such-instance", "no-such-op"}} {
		if err := app.Ops(t.Context(), b.Local.Broker, args, &out); err == nil || !strings.Contains(err.Error(), "no-such-instance has no operation") {
			t.Errorf("ops %v: %v, want an error naming the instance", args, err)
		}
	}
}
