package sandbox_test

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/osbtest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// pollUntilDone polls an instance's last_operation until it ends, and
// fails the test at once when the operation is waiting out an outage
// ("unreachable … retrying"): on moto, nothing is unreachable, so such a
// wait is a bug that would last the plan's outage budget (30 minutes).
func pollUntilDone(t *testing.T, c osb.Client, instance, service string, op *osb.OperationKey) (osb.LastOperationState, string) {
	t.Helper()
	var state osb.LastOperationState
	var desc string
	waittest.Until(t, func() error {
		r, err := c.PollLastOperation(&osb.LastOperationRequest{InstanceID: instance, ServiceID: &service, OperationKey: op})
		if osb.IsGoneError(err) {
			state = osbtest.Gone
			return nil
		}
		if err != nil {
			t.Fatalf("poll %s: %v", instance, err)
		}
		desc = aws.ToString(r.Description)
		if r.State == osb.StateInProgress {
			if strings.Contains(desc, "unreachable") {
				t.Fatalf("%s waits out an outage on moto: %s", instance, desc)
			}
			return fmt.Errorf("%s still in progress: %s", instance, desc)
		}
		state = r.State
		return nil
	})
	return state, desc
}

// TestTheFIFOPlanRunsOnMoto: the SQS example's fifo plan provisions, binds
// and deprovisions in the sandbox, its queue named with the .fifo suffix
// CloudFormation gives a FIFO queue (moto did not: the fixes' tenth), and
// moto's CloudFormation still answers every stack listing afterwards (a
// stack whose creation failed broke them all: the fixes' eleventh).
func TestTheFIFOPlanRunsOnMoto(t *testing.T) {
	ctx, cancel := waittest.Context(t)
	defer cancel()
	c := client(t, shared)
	e := &e2e{t: t, c: c}
	service, plan := planIDs(t, c, "aws-sqs-queue", "fifo")
	instance, binding := "fifo-1", "fifo-1-b"
	r, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: instance, ServiceID: service, PlanID: plan,
		OrganizationGUID: "org", SpaceGUID: "space", AcceptsIncomplete: true, Parameters: map[string]any{"ContentBasedDeduplication": true}})
	if err != nil || !r.Async {
		t.Fatalf("provision: %+v %v", r, err)
	}
	if state, desc := pollUntilDone(t, c, instance, service, r.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("provision ended %s: %s", state, desc)
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
		t.Fatal(err)
	}
	url := fmt.Sprint(got.Credentials["queue_url"])
	if !strings.HasSuffix(url, ".fifo") {
		t.Errorf("the FIFO queue's URL %s does not end in .fifo", url)
	}
	attrs, err := sqs.NewFromConfig(shared.Admin).GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameFifoQueue, sqstypes.QueueAttributeNameContentBasedDeduplication}})
	if err != nil {
		t.Fatalf("the binding's queue: %v", err)
	}
	if attrs.Attributes["FifoQueue"] != "true" || attrs.Attributes["ContentBasedDeduplication"] != "true" {
		t.Errorf("the queue's attributes are %v, want a FIFO queue deduplicating by content", attrs.Attributes)
	}
	if _, err := cloudformation.NewFromConfig(shared.Admin).DescribeStacks(ctx, &cloudformation.DescribeStacksInput{}); err != nil {
		t.Fatalf("moto's CloudFormation no longer lists its stacks: %v", err)
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
	if state, desc := pollUntilDone(t, c, instance, service, dr.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
		t.Fatalf("deprovision ended %s: %s", state, desc)
	}
	if stacks := liveStacks(ctx, t, instance); len(stacks) != 0 {
		t.Fatalf("stacks %v outlived the deprovision", stacks)
	}
}

// TestPlansMotoCannotRunAreRefusedAtOnce: the sandbox finds at start that
// ElastiCache, and answers 500), the example Valkey plans (ElastiCache
// again), the Aurora plans (no AWS::RDS::DBCluster) and the example
// OpenSearch plans (no OpenSearch Service either), and only those, and a
// provision of the cache plan gets a
// 422 at once naming the plan and moto's reason, with nothing made; a
// caller without the broker's credentials still gets the broker's 401.
func TestPlansMotoCannotRunAreRefusedAtOnce(t *testing.T) {
	ctx, cancel := waittest.Context(t)
	defer cancel()
	c := client(t, shared)
	// What each plan moto cannot run has that moto lacks, by service.
	lacks := map[string]string{"moto-cannot-run": "AWS::ElastiCache::ServerlessCache",
		"aws-aurora-postgresql": "AWS::RDS::DBCluster", "aws-aurora-mysql": "AWS::RDS::DBCluster",
		"aws-opensearch": "AWS::OpenSearchService::Domain", "aws-elasticache-valkey": "AWS::ElastiCache::ServerlessCache",
		"placed-valkey": "AWS::ElastiCache::ServerlessCache"}
	var names []string
	for _, p := range shared.Unrunnable() {
		names = append(names, p.Service+"/"+p.Plan)
		if !strings.Contains(p.Reason, lacks[p.Service]) || lacks[p.Service] == "" {
			t.Errorf("%s of %s: the reason does not name what moto lacks (%s): %s", p.Plan, p.Service, lacks[p.Service], p.Reason)
		}
	}
	slices.Sort(names)
	// Every other example service runs on moto with the project's fixes
	// (the RDS ones since fix 15); the suite's catalog adds one that cannot,
	// and a placed copy of the Valkey service (placement_test.go).
	if want := []string{"aws-aurora-mysql/serverless-dev", "aws-aurora-mysql/serverless-standard",
		"aws-aurora-postgresql/serverless-dev", "aws-aurora-postgresql/serverless-standard",
		"aws-elasticache-valkey/small", "aws-elasticache-valkey/standard",
		"aws-opensearch/medium-ha", "aws-opensearch/small", "moto-cannot-run/cache", "placed-valkey/placed"}; !slices.Equal(names, want) {
		t.Errorf("the sandbox cannot run %v, want %v", names, want)
	}

	service, plan := planIDs(t, c, "moto-cannot-run", "cache")
	_, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "rds-1", ServiceID: service, PlanID: plan,
		OrganizationGUID: "org", SpaceGUID: "space", AcceptsIncomplete: true})
	var h osb.HTTPStatusCodeError
	if !errors.As(err, &h) || h.StatusCode != http.StatusUnprocessableEntity || h.Description == nil ||
		!strings.Contains(*h.Description, "cache") || !strings.Contains(*h.Description, "AWS::ElastiCache::ServerlessCache") {
		t.Fatalf("provision of a plan moto cannot make answered %v, want 422 naming the plan and moto's reason", err)
	}
	if stacks := liveStacks(ctx, t, "rds-1"); len(stacks) != 0 {
		t.Errorf("the refused provision made stacks %v", stacks)
	}
	if _, err := c.GetInstance(&osb.GetInstanceRequest{InstanceID: "rds-1"}); !osbtest.IsStatus(err, http.StatusNotFound) {
		t.Errorf("the refused instance: %v, want 404", err)
	}

	stranger := osbtest.Client(t, shared.URL, shared.Username, "not-the-password")
	if _, err := stranger.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "rds-2", ServiceID: service, PlanID: plan,
		OrganizationGUID: "org", SpaceGUID: "space", AcceptsIncomplete: true}); !osbtest.IsStatus(err, http.StatusUnauthorized) {
		t.Errorf("a provision with the wrong password answered %v, want the broker's 401", err)
	}
}
