package app_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awscfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"github.com/google/uuid"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	cfndriver "github.com/serverless-osb/broker/internal/drivers/cloudformation"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// fleetFake is a named fake on the broker's CloudFormation client (AWS SDK
// middleware in front of moto): it counts ExecuteChangeSet per stack,
// fails it for the stack of failInstance (as CloudFormation refuses a
// change set), keeps each executed stack UPDATE_IN_PROGRESS for its next
// two DescribeStacks (moto updates a stack before it answers, so that no
// two upgrades would ever overlap), records the most stacks updating at
// once, says the change set of replaceInstance's stack replaces its bucket
// (moto never says a change replaces anything), and, once dead, fails
// every call as a process that died would never make it.
type fleetFake struct {
	prefix                        string
	failInstance, replaceInstance string

	mu       sync.Mutex
	executes map[string]int // by stack name
	held     map[string]int // DescribeStacks still to answer in progress
	inFlight int
	most     int
	// killAfter: once this many ExecuteChangeSet calls went through, the
	// process dies (killed is closed).
	killAfter int
	killed    chan struct{}
	dead      bool
}

var errDead = errors.New("the process is dead")

func newFleetFake(prefix string) *fleetFake {
	return &fleetFake{prefix: prefix, executes: map[string]int{}, held: map[string]int{}, killed: make(chan struct{})}
}

// stackOf is the stack name in a StackName (a name or a stack's ARN).
func stackOf(s string) string {
	if strings.HasPrefix(s, "arn:") {
		if parts := strings.Split(s, "/"); len(parts) >= 2 {
			return parts[1]
		}
	}
	return s
}

func (f *fleetFake) middleware(s *middleware.Stack) error {
	return s.Initialize.Add(middleware.InitializeMiddlewareFunc("FleetFake",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			f.mu.Lock()
			dead := f.dead
			f.mu.Unlock()
			if dead {
				return middleware.InitializeOutput{}, middleware.Metadata{}, errDead
			}
			switch p := in.Parameters.(type) {
			case *awscfn.ExecuteChangeSetInput:
				stack := stackOf(aws.ToString(p.StackName))
				if stack == cfndriver.InstanceStackName(f.prefix, f.failInstance) {
					f.mu.Lock()
					f.executes[stack]++
					f.mu.Unlock()
					return middleware.InitializeOutput{}, middleware.Metadata{}, &smithy.GenericAPIError{Code: "ValidationError",
						Message: "The fleet fake refuses this stack's change set."}
				}
				out, md, err := next.HandleInitialize(ctx, in)
				f.mu.Lock()
				defer f.mu.Unlock()
				if err == nil {
					f.executes[stack]++
					f.held[stack] = 2
					f.inFlight++
					f.most = max(f.most, f.inFlight)
					if total := f.total(); f.killAfter > 0 && total == f.killAfter {
						f.dead = true
						close(f.killed)
					}
				}
				return out, md, err
			case *awscfn.DescribeStacksInput:
				stack := stackOf(aws.ToString(p.StackName))
				out, md, err := next.HandleInitialize(ctx, in)
				if err != nil {
					return out, md, err
				}
				f.mu.Lock()
				defer f.mu.Unlock()
				if n, ok := f.held[stack]; ok {
					if n > 0 {
						f.held[stack] = n - 1
						if r, ok := out.Result.(*awscfn.DescribeStacksOutput); ok && len(r.Stacks) == 1 {
							r.Stacks[0].StackStatus = cfntypes.StackStatusUpdateInProgress
						}
					} else {
						delete(f.held, stack)
						f.inFlight--
					}
				}
				return out, md, err
			case *awscfn.DescribeChangeSetInput:
				out, md, err := next.HandleInitialize(ctx, in)
				f.mu.Lock()
				replace := f.replaceInstance
				f.mu.Unlock()
				if err != nil || replace == "" || stackOf(aws.ToString(p.StackName)) != cfndriver.InstanceStackName(f.prefix, replace) {
					return out, md, err
				}
				if r, ok := out.Result.(*awscfn.DescribeChangeSetOutput); ok {
					r.Changes = append(r.Changes, cfntypes.Change{Type: cfntypes.ChangeTypeResource, ResourceChange: &cfntypes.ResourceChange{
						Action: cfntypes.ChangeActionModify, LogicalResourceId: aws.String("Bucket"), ResourceType: aws.String("AWS::S3::Bucket"),
						Replacement: cfntypes.ReplacementTrue, Scope: []cfntypes.ResourceAttribute{cfntypes.ResourceAttributeProperties},
						Details: []cfntypes.ResourceChangeDetail{{Target: &cfntypes.ResourceTargetDefinition{Attribute: cfntypes.ResourceAttributeProperties,
							Name: aws.String("BucketName"), RequiresRecreation: cfntypes.RequiresRecreationAlways}}},
					}})
				}
				return out, md, err
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
}

func (f *fleetFake) total() int {
	n := 0
	for _, c := range f.executes {
		n += c
	}
	return n
}

// TestAFleetUpgradeOnMoto: 20 instances of the S3 example on template v1;
// the operator changes the template and raises the version, restarts the
// broker. A dry run executes no change set, changes no instance, and says
// which would change and which would be refused (a change set that
// replaces a bucket). The campaign, canaries 2, max in flight 3, max
// failures 1, with one instance after the canaries failing: the broker is
// killed in the middle and started again on its data; the campaign then
// stops at the failure, lists every instance's result, ops upgrade status
// exits non-zero; no stack got ExecuteChangeSet twice, and never were
// more than 3 stacks updating at once.
func TestAFleetUpgradeOnMoto(t *testing.T) {
	cfg := mototest.Config(t, "us-east-1")
	cfn := awscfn.NewFromConfig(cfg)
	prefix := "osbfl" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	fake := newFleetFake(prefix)
	faked := cfg.Copy()
	faked.APIOptions = append(faked.APIOptions, fake.middleware)
	catalogPath, raise := shippedServices(t)
	dir := t.TempDir()
	opts := apptest.Options{Dir: dir, Catalog: catalogPath, ReapInterval: -1,
		AWS: func(context.Context) (aws.Config, error) { return faked, nil },
		Getenv: func(k string) string {
			if k == "BROKER_STACK_PREFIX" {
				return prefix
			}
			return ""
		},
		// Until the kill, the engine's waits pass at once; once dead,
		// its executions stall where a dead process leaves them.
		Sleep: func(ctx context.Context, d time.Duration) {
			fake.mu.Lock()
			dead := fake.dead
			fake.mu.Unlock()
			if dead {
				<-ctx.Done()
			}
		},
	}
	b := apptest.StartWith(t, opts)
	service, plan := planOf(t, b, "aws-s3-bucket", "standard")
	e := &e2e{t: t, c: client(t, b.URL), service: service}
	var ids []string
	for i := range 20 {
		ids = append(ids, fmt.Sprintf("fleet-%02d-%s", i, uuid.NewString()[:8]))
	}
	// The canaries are the two oldest; the one that fails comes after.
	fake.failInstance, fake.replaceInstance = ids[6], ids[4]
	for _, id := range ids {
		r := e.provision(id, plan, true, map[string]any{})
		if state, desc := e.poll(id, r.OperationKey); state != osb.StateSucceeded {
			t.Fatalf("provision %s ended %s: %s", id, state, desc)
		}
	}

	b.Stop()
	raise()
	b = apptest.StartWith(t, opts)

	// The dry run.
	dry, err := startCampaignOps(t, b.Local.Broker, true, "--plan", plan, "--dry-run")
	if err == nil {
		t.Error("ops upgrade start --dry-run exited 0 with a change that would be refused")
	}
	status, failed := campaignStatusJSON(t, b.Local.Broker, dry)
	if failed == nil {
		t.Error("ops upgrade status of the dry run exited 0 with a change that would be refused")
	}
	for _, it := range status["items"].([]any) {
		it := it.(map[string]any)
		id, state, desc := it["instance_id"].(string), it["state"], fmt.Sprint(it["description"])
		switch {
		case id == fake.replaceInstance && (state != "would_refuse" || !strings.Contains(desc, "Bucket")):
			t.Errorf("dry run: %s %s %q, want would_refuse naming the bucket", id, state, desc)
		case id != fake.replaceInstance && (state != "would_change" || it["changes"] == nil):
			t.Errorf("dry run: %s %s %q %v, want would_change, listing the changes", id, state, desc, it["changes"])
		}
	}
	if n := fake.total(); n != 0 {
		t.Fatalf("the dry run executed %d change sets", n)
	}
	for _, id := range ids {
		if v := instanceVersion(t, b, id); v != upgradeFrom {
			t.Errorf("after the dry run %s runs %q, want %s", id, v, upgradeFrom)
		}
		if got := stackTemplate(t, cfn, prefix, id); !strings.Contains(got, templateV1) {
			t.Errorf("after the dry run the stack of %s left template v1", id)
		}
	}

	// The campaign, killed after its 5th change set; no change set
	// replaces anything now.
	fake.mu.Lock()
	fake.killAfter, fake.replaceInstance = 5, ""
	fake.mu.Unlock()
	id, err := startCampaignOps(t, b.Local.Broker, false, "--plan", plan, "--canaries", "2", "--max-in-flight", "3", "--max-failures", "1")
	if err != nil {
		t.Fatalf("ops upgrade start: %v", err)
	}
	fake.mu.Lock()
	killed := fake.killed
	fake.mu.Unlock()
	waittest.Until(t, func() error {
		select {
		case <-killed:
			return nil
		default:
		}
		if c, _, err := b.Local.Broker.Campaigns.LoadCampaign(t.Context(), id); err == nil && c.State != broker.CampaignRunning {
			st, _ := campaignStatusJSON(t, b.Local.Broker, id)
			var lines []string
			for _, l := range strings.Split(b.Logs.String(), "\n") {
				if strings.Contains(l, "upgrade") {
					lines = append(lines, l)
				}
			}
			t.Fatalf("the campaign ended before its 5th change set: %v\n%s", st, strings.Join(lines, "\n"))
		}
		return errors.New("the campaign has not executed 5 change sets yet")
	})
	b.Stop()
	fake.mu.Lock()
	fake.dead, fake.killAfter = false, 0
	fake.mu.Unlock()
	b = apptest.StartWith(t, opts)
	waittest.Until(t, func() error {
		c, _, err := b.Local.Broker.Campaigns.LoadCampaign(t.Context(), id)
		if err != nil || c.State == broker.CampaignRunning {
			return fmt.Errorf("the campaign is %s (%v)", c.State, err)
		}
		return nil
	})

	status, failed = campaignStatusJSON(t, b.Local.Broker, id)
	if failed == nil || status["state"] != "stopped" {
		t.Errorf("the campaign is %v and ops upgrade status exits %v, want stopped and non-zero", status["state"], failed)
	}
	items := status["items"].([]any)
	if len(items) != len(ids) {
		t.Errorf("ops upgrade status lists %d instances, want %d", len(items), len(ids))
	}
	count := map[string]int{}
	for i, it := range items {
		it := it.(map[string]any)
		inst, state := it["instance_id"].(string), it["state"].(string)
		count[state]++
		switch {
		case i < 2 && (it["canary"] != true || state != "upgraded"):
			t.Errorf("canary %s: %s (canary %v), want an upgraded canary", inst, state, it["canary"])
		case inst == fake.failInstance && (state != "failed" || !strings.Contains(fmt.Sprint(it["description"]), "refuses this stack's change set")):
			t.Errorf("%s: %s %q, want failed with CloudFormation's refusal", inst, state, it["description"])
		case inst != fake.failInstance && state != "upgraded" && state != "not_attempted":
			t.Errorf("%s: %s %v, want upgraded or not attempted", inst, state, it["description"])
		}
	}
	if count["failed"] != 1 || count["not_attempted"] == 0 || count["upgraded"] < 2 {
		t.Errorf("results %v, want 1 failed, the canaries and some more upgraded, the rest not attempted", count)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	for stack, n := range fake.executes {
		if n > 1 {
			t.Errorf("stack %s got ExecuteChangeSet %d times, want at most once", stack, n)
		}
	}
	if fake.most > 3 {
		t.Errorf("%d stacks were updating at once, want at most 3 (max in flight)", fake.most)
	}
	t.Logf("results %v; at most %d stacks updating at once; %d change sets executed", count, fake.most, fake.total())
	for _, it := range items {
		it := it.(map[string]any)
		want := templateV1
		if it["state"] == "upgraded" {
			want = templateV2
		}
		if got := stackTemplate(t, cfn, prefix, it["instance_id"].(string)); !strings.Contains(got, want) {
			t.Errorf("%s (%s) does not run the template with %q", it["instance_id"], it["state"], want)
		}
	}
}
