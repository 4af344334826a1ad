package app_test

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awscfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/smithy-go/middleware"
	"github.com/google/uuid"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	cfndriver "github.com/serverless-osb/broker/internal/drivers/cloudformation"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/store/storetest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// The fault-injection suite with the CloudFormation driver on moto: the
// process "dies" at every call through the ports AND at every call to
// CloudFormation (before the call reaches it, or after it took effect but
// before its answer was read); a new broker then starts on the same data.
// Afterwards no stack may be left that is not attached to a live instance
// or binding, or being cleaned up (the suite waits for cleanups to end).

// crashMiddleware makes every AWS call go through the crasher.
func crashMiddleware(c *crasher) func(*middleware.Stack) error {
	return func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("InjectCrash",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				run, fail := c.enter()
				if !run {
					return middleware.InitializeOutput{}, middleware.Metadata{}, errCrash
				}
				out, md, err := next.HandleInitialize(ctx, in)
				if fail {
					return middleware.InitializeOutput{}, md, errCrash
				}
				return out, md, err
			}), middleware.Before)
	}
}

// cfnLifecycles are the S3 example service's operations (async-only).
func cfnLifecycles() []lifecycle {
	inst := func(f *faultFixture) string { return "/v2/service_instances/" + f.instance }
	bind := func(f *faultFixture) string { return inst(f) + "/service_bindings/" + f.binding }
	wait := func(t *testing.T, b *apptest.Broker, path string, r apptest.Response) {
		t.Helper()
		if r.Status != http.StatusAccepted {
			t.Fatalf("setup: %d %s", r.Status, r.Raw)
		}
		if lo := b.WaitLastOperation(path + "/last_operation?operation=" + r.Str("operation")); lo.Str("state") != "succeeded" {
			t.Fatalf("setup: %s", lo.Raw)
		}
	}
	provision := func(f *faultFixture) apptest.Request {
		return apptest.Request{Method: http.MethodPut, Path: inst(f) + "?accepts_incomplete=true", Body: provisionBody(f.service, f.plan, map[string]any{})}
	}
	bindReq := func(f *faultFixture) apptest.Request {
		return apptest.Request{Method: http.MethodPut, Path: bind(f) + "?accepts_incomplete=true",
			Body: map[string]any{"service_id": f.service, "plan_id": f.plan, "bind_resource": map[string]any{"app_guid": "app-1"}}}
	}
	provisioned := func(t *testing.T, b *apptest.Broker, f *faultFixture) {
		t.Helper()
		wait(t, b, inst(f), b.Do(provision(f)))
	}
	bound := func(t *testing.T, b *apptest.Broker, f *faultFixture) {
		t.Helper()
		provisioned(t, b, f)
		wait(t, b, bind(f), b.Do(bindReq(f)))
	}
	return []lifecycle{
		{name: "provision", async: true, request: provision},
		{name: "update", async: true, setup: provisioned, request: func(f *faultFixture) apptest.Request {
			return apptest.Request{Method: http.MethodPatch, Path: inst(f) + "?accepts_incomplete=true",
				Body: map[string]any{"service_id": f.service, "parameters": map[string]any{"Versioning": "Enabled"}}}
		}},
		{name: "deprovision", async: true, setup: provisioned, request: func(f *faultFixture) apptest.Request {
			return apptest.Request{Method: http.MethodDelete, Path: inst(f) + f.q(true)}
		}},
		{name: "bind", async: true, setup: provisioned, request: bindReq},
		{name: "unbind", async: true, setup: bound, request: func(f *faultFixture) apptest.Request {
			return apptest.Request{Method: http.MethodDelete, Path: bind(f) + f.q(true)}
		}},
	}
}

// cfnFaultRun is one run of a lifecycle with a crash at call k (0: none).
type cfnFaultRun struct {
	lc     lifecycle
	k      int
	after  bool
	prefix string
	cfg    aws.Config
	// catalog is the catalog served (default services/catalog.yaml).
	catalog string
	// stacksIn reaches the account and Region the catalog puts the
	// stacks in (default: cfg's).
	stacksIn *awscfn.Client
}

func (r cfnFaultRun) start(t *testing.T, dir string, c *crasher) *apptest.Broker {
	cfg := r.cfg.Copy()
	var wrap *app.Wrappers
	sleep := noSleep
	if c != nil {
		cfg.APIOptions = append(cfg.APIOptions, crashMiddleware(c))
		wrap = &app.Wrappers{
			Store:  func(s broker.Store) broker.Store { return faultyStore{s, c} },
			Engine: func(e broker.Engine) broker.Engine { return faultyEngine{e, c} },
			Driver: func(d broker.Driver) broker.Driver { return faultyDriver{d, c} },
		}
		// Until the crash, the broker runs at full speed; once crashed,
		// its executions stall in their next wait, where a dead process
		// would have left them, instead of burning their retries.
		sleep = func(ctx context.Context, d time.Duration) {
			if c.crashed() {
				<-ctx.Done()
				return
			}
			noSleep(ctx, d)
		}
	}
	return apptest.StartWith(t, apptest.Options{Dir: dir, Catalog: cmp.Or(r.catalog, "services/catalog.yaml"), Wrap: wrap, ReapInterval: -1, Sleep: sleep,
		AWS: func(context.Context) (aws.Config, error) { return cfg, nil },
		Getenv: func(k string) string {
			if k == "BROKER_STACK_PREFIX" {
				return r.prefix
			}
			return ""
		}})
}

// crashed says whether the crash has come.
func (c *crasher) crashed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.armed && c.k > 0 && c.n >= c.k
}

// run returns how many calls the operation made through the ports and to
// CloudFormation.
func (r cfnFaultRun) run(t *testing.T) int {
	dir := t.TempDir()
	c := &crasher{k: r.k, after: r.after}
	a := r.start(t, dir, c)
	a.Local.Broker.Backoff = time.Millisecond
	f := &faultFixture{instance: uuid.NewString(), binding: uuid.NewString()}
	f.service, f.plan = planOf(t, a, "aws-s3-bucket", "standard")
	if r.lc.setup != nil {
		r.lc.setup(t, a, f)
	}
	c.arm()
	resp := a.Do(r.lc.request(f))
	if op := resp.Str("operation"); op != "" {
		// Let the workflow run until it ends or the crash comes. The
		// engine is asked directly: its calls are not counted.
		waittest.Until(t, func() error {
			exec, err := a.Local.Engine.Describe(context.Background(), op)
			if c.crashed() || err == nil && exec.Status != broker.ExecutionRunning {
				return nil
			}
			return fmt.Errorf("execution %s: %s %v; %d calls so far", op, exec.Status, err, c.calls())
		})
	}
	if r.k == 0 {
		if resp.Status >= 400 {
			t.Fatalf("the fault-free %s answered %d %s", r.lc.name, resp.Status, resp.Raw)
		}
		return c.calls()
	}
	if resp.Status >= 500 && resp.Str("description") == "" {
		t.Fatalf("a 5xx without a description: %s", resp.Raw)
	}
	a.Stop()
	b := r.start(t, dir, nil)
	b.Local.Broker.RepairAfter = -time.Hour
	quiesce(t, b, f)
	stacks := r.stacksIn
	if stacks == nil {
		stacks = awscfn.NewFromConfig(r.cfg)
	}
	checkNoStrayStack(t, b, f, stacks, r.prefix)
	return c.calls()
}

// checkNoStrayStack asserts that every operation ended, nothing is held,
// and every live stack of the instance belongs to the instance or binding
// that exists, through the driver's record of it.
func checkNoStrayStack(t *testing.T, b *apptest.Broker, f *faultFixture, cfn *awscfn.Client, prefix string) {
	t.Helper()
	ctx := context.Background()
	s := b.Local.Store
	instanceExists, bindingExists := checkNothingStuck(t, s, f)
	records := map[string]bool{}
	rs, err := storetest.Records(ctx, s, f.instance)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		records[r.Name] = true
	}
	instanceStacks := 0
	for _, st := range liveStacks(ctx, t, cfn, prefix) {
		tags := map[string]string{}
		for _, tag := range st.Tags {
			tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
		}
		if tags[cfndriver.TagInstanceID] != f.instance {
			continue
		}
		switch b := tags[cfndriver.TagBindingID]; {
		case b == "" && instanceExists && records["stack"]:
			instanceStacks++
		case b == f.binding && bindingExists && records["binding-"+b]:
		default:
			t.Errorf("stack %s (%s) is stray: instance exists %v, binding exists %v, records %v",
				aws.ToString(st.StackName), st.StackStatus, instanceExists, bindingExists, records)
		}
	}
	// The other way round: an instance that exists and is ready has its
	// stack (a failed one may have had its stack detached and deleted).
	if inst, err := s.GetInstance(ctx, f.instance); err == nil && inst.State == broker.InstanceReady && instanceStacks != 1 {
		t.Errorf("instance %s is ready with %d live stacks, want 1", f.instance, instanceStacks)
	}
}

func TestNoStackLeftBehindByACrashWithTheCloudFormationDriver(t *testing.T) {
	cfg := mototest.Config(t, "us-east-1")
	prefix := "osbf" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	tried := 0
	for _, lc := range cfnLifecycles() {
		total := cfnFaultRun{lc: lc, prefix: prefix, cfg: cfg}.run(t)
		for _, after := range []bool{false, true} {
			when := "before"
			if after {
				when = "after"
			}
			for k := 1; k <= total; k++ {
				tried++
				t.Run(fmt.Sprintf("%s crashes %s call %d of %d", lc.name, when, k, total), func(t *testing.T) {
					// Each run has its own broker, data and instance; the
					// stacks it checks are its instance's.
					t.Parallel()
					cfnFaultRun{lc: lc, k: k, after: after, prefix: prefix, cfg: cfg}.run(t)
				})
			}
		}
	}
	t.Logf("crash points tried: %d", tried)
}
