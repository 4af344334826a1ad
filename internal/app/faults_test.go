package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/store/storetest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// errCrash is what every call returns once the "process" has crashed.
var errCrash = errors.New("injected crash")

// crasher decides which calls through the ports fail: counting from when
// it is armed, the k-th call and every one after it fail, as if the
// process died there. In "after" mode the k-th call takes effect before it
// fails (the crash comes after the write); in "before" mode it does not.
type crasher struct {
	mu    sync.Mutex
	armed bool
	n, k  int
	after bool
}

func (c *crasher) arm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed, c.n = true, 0
}

func (c *crasher) calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// enter is called before each call: it says whether to run the call and
// what to return instead of (or after) it.
func (c *crasher) enter() (run bool, fail bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.armed {
		return true, false
	}
	c.n++
	switch {
	case c.k == 0 || c.n < c.k:
		return true, false
	case c.n == c.k && c.after:
		return true, true
	}
	return false, true
}

// do runs f through the crasher.
func do[T any](c *crasher, f func() (T, error)) (T, error) {
	run, fail := c.enter()
	var zero T
	if !run {
		return zero, errCrash
	}
	v, err := f()
	if fail {
		return zero, errCrash
	}
	return v, err
}

func do0(c *crasher, f func() error) error {
	_, err := do(c, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

// faultyStore, faultyEngine and faultyDriver are fakes that wrap the real
// ports and fail through a crasher.
type faultyStore struct {
	s broker.Store
	c *crasher
}

func (f faultyStore) GetInstance(ctx context.Context, id string) (broker.Instance, error) {
	return do(f.c, func() (broker.Instance, error) { return f.s.GetInstance(ctx, id) })
}
func (f faultyStore) GetBinding(ctx context.Context, iid, bid string) (broker.Binding, error) {
	return do(f.c, func() (broker.Binding, error) { return f.s.GetBinding(ctx, iid, bid) })
}
func (f faultyStore) GetOperation(ctx context.Context, iid, oid string) (broker.Operation, error) {
	return do(f.c, func() (broker.Operation, error) { return f.s.GetOperation(ctx, iid, oid) })
}
func (f faultyStore) ListOperations(ctx context.Context, iid string) ([]broker.Operation, error) {
	return do(f.c, func() ([]broker.Operation, error) { return f.s.ListOperations(ctx, iid) })
}
func (f faultyStore) ListInProgress(ctx context.Context) ([]broker.Operation, error) {
	return do(f.c, func() ([]broker.Operation, error) { return f.s.ListInProgress(ctx) })
}
func (f faultyStore) ListInstances(ctx context.Context, filter broker.InstanceFilter, page string) ([]broker.Instance, string, error) {
	var next string
	list, err := do(f.c, func() (l []broker.Instance, err error) {
		l, next, err = f.s.ListInstances(ctx, filter, page)
		return l, err
	})
	return list, next, err
}
func (f faultyStore) CreateInstance(ctx context.Context, i broker.Instance, op broker.Operation, settled *broker.Settled) error {
	return do0(f.c, func() error { return f.s.CreateInstance(ctx, i, op, settled) })
}
func (f faultyStore) LockInstance(ctx context.Context, l broker.LockInstance) error {
	return do0(f.c, func() error { return f.s.LockInstance(ctx, l) })
}
func (f faultyStore) CreateBinding(ctx context.Context, b broker.Binding, op broker.Operation, settled *broker.Settled) error {
	return do0(f.c, func() error { return f.s.CreateBinding(ctx, b, op, settled) })
}
func (f faultyStore) LockBinding(ctx context.Context, l broker.LockBinding) error {
	return do0(f.c, func() error { return f.s.LockBinding(ctx, l) })
}
func (f faultyStore) Load(ctx context.Context, iid, oid, bid string) (broker.Snapshot, error) {
	return do(f.c, func() (broker.Snapshot, error) { return f.s.Load(ctx, iid, oid, bid) })
}
func (f faultyStore) LoadWhole(ctx context.Context, iid, oid string) (broker.Snapshot, error) {
	return do(f.c, func() (broker.Snapshot, error) { return f.s.LoadWhole(ctx, iid, oid) })
}
func (f faultyStore) UpdateOperation(ctx context.Context, op broker.Operation, r broker.RecordChanges) error {
	return do0(f.c, func() error { return f.s.UpdateOperation(ctx, op, r) })
}
func (f faultyStore) FinishOperation(ctx context.Context, fin broker.Finish) error {
	return do0(f.c, func() error { return f.s.FinishOperation(ctx, fin) })
}
func (f faultyStore) PutResource(ctx context.Context, r broker.Resource) error {
	return do0(f.c, func() error { return f.s.PutResource(ctx, r) })
}
func (f faultyStore) DeleteResource(ctx context.Context, iid, name string) error {
	return do0(f.c, func() error { return f.s.DeleteResource(ctx, iid, name) })
}
func (f faultyStore) GetDetached(ctx context.Context, id string) (broker.Detached, error) {
	return do(f.c, func() (broker.Detached, error) { return f.s.GetDetached(ctx, id) })
}
func (f faultyStore) ListDetached(ctx context.Context) ([]broker.Detached, error) {
	return do(f.c, func() ([]broker.Detached, error) { return f.s.ListDetached(ctx) })
}
func (f faultyStore) UpdateDetached(ctx context.Context, d broker.Detached, attempts int) error {
	return do0(f.c, func() error { return f.s.UpdateDetached(ctx, d, attempts) })
}
func (f faultyStore) DeleteDetached(ctx context.Context, id string) error {
	return do0(f.c, func() error { return f.s.DeleteDetached(ctx, id) })
}
func (f faultyStore) DeleteExpiredOperations(ctx context.Context, now time.Time) (int, error) {
	return do(f.c, func() (int, error) { return f.s.DeleteExpiredOperations(ctx, now) })
}
func (f faultyStore) StoredSecrets(ctx context.Context, fn func(broker.StoredSecret) error) error {
	return do0(f.c, func() error { return f.s.StoredSecrets(ctx, fn) })
}
func (f faultyStore) ReplaceSecret(ctx context.Context, s broker.StoredSecret, sealed json.RawMessage) error {
	return do0(f.c, func() error { return f.s.ReplaceSecret(ctx, s, sealed) })
}
func (f faultyStore) SealingMode(ctx context.Context) (broker.SealingMode, error) {
	return do(f.c, func() (broker.SealingMode, error) { return f.s.SealingMode(ctx) })
}
func (f faultyStore) SetSealingMode(ctx context.Context, m broker.SealingMode) error {
	return do0(f.c, func() error { return f.s.SetSealingMode(ctx, m) })
}
func (f faultyStore) CreateCampaign(ctx context.Context, c broker.Campaign, items []broker.CampaignItem) error {
	return do0(f.c, func() error { return f.s.CreateCampaign(ctx, c, items) })
}
func (f faultyStore) LoadCampaign(ctx context.Context, id string) (broker.Campaign, []broker.CampaignItem, error) {
	var items []broker.CampaignItem
	c, err := do(f.c, func() (c broker.Campaign, err error) { c, items, err = f.s.LoadCampaign(ctx, id); return c, err })
	return c, items, err
}
func (f faultyStore) GetCampaignItem(ctx context.Context, campaignID, instanceID string) (broker.CampaignItem, error) {
	return do(f.c, func() (broker.CampaignItem, error) { return f.s.GetCampaignItem(ctx, campaignID, instanceID) })
}
func (f faultyStore) UpdateCampaignItem(ctx context.Context, it, read broker.CampaignItem) error {
	return do0(f.c, func() error { return f.s.UpdateCampaignItem(ctx, it, read) })
}
func (f faultyStore) EndCampaign(ctx context.Context, c broker.Campaign) error {
	return do0(f.c, func() error { return f.s.EndCampaign(ctx, c) })
}
func (f faultyStore) ListCampaigns(ctx context.Context) ([]broker.Campaign, error) {
	return do(f.c, func() ([]broker.Campaign, error) { return f.s.ListCampaigns(ctx) })
}
func (f faultyStore) SetCampaignExpiry(ctx context.Context, id string, at time.Time) error {
	return do0(f.c, func() error { return f.s.SetCampaignExpiry(ctx, id, at) })
}

type faultyEngine struct {
	e broker.Engine
	c *crasher
}

func (f faultyEngine) Start(ctx context.Context, w broker.Workflow, name string, input json.RawMessage) error {
	return do0(f.c, func() error { return f.e.Start(ctx, w, name, input) })
}
func (f faultyEngine) Describe(ctx context.Context, name string) (broker.Execution, error) {
	return do(f.c, func() (broker.Execution, error) { return f.e.Describe(ctx, name) })
}
func (f faultyEngine) Stop(ctx context.Context, name, cause string) error {
	return do0(f.c, func() error { return f.e.Stop(ctx, name, cause) })
}

type faultyDriver struct {
	d broker.Driver
	c *crasher
}

func (f faultyDriver) Begin(ctx context.Context, ch broker.Change) (broker.Progress, error) {
	return do(f.c, func() (broker.Progress, error) { return f.d.Begin(ctx, ch) })
}
func (f faultyDriver) Check(ctx context.Context, ch broker.Change) (broker.Progress, error) {
	return do(f.c, func() (broker.Progress, error) { return f.d.Check(ctx, ch) })
}
func (f faultyDriver) Leftovers(ctx context.Context, ch broker.Change) ([]string, error) {
	return do(f.c, func() ([]string, error) { return f.d.Leftovers(ctx, ch) })
}
func (f faultyDriver) Cleanup(ctx context.Context, d broker.Detached) (broker.Progress, error) {
	return do(f.c, func() (broker.Progress, error) { return f.d.Cleanup(ctx, d) })
}

// InMemory is the wrapped driver's: a synchronous change it settles in
// memory crashes where it would.
func (f faultyDriver) InMemory() bool {
	im, ok := f.d.(broker.InMemory)
	return ok && im.InMemory()
}

var (
	_ broker.Store  = faultyStore{}
	_ broker.Engine = faultyEngine{}
	_ broker.Driver = faultyDriver{}
)

// noSleep compresses the engine's waits (hours of cleanup retries) to nothing.
func noSleep(ctx context.Context, d time.Duration) {
	if d > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(time.Millisecond):
		}
	}
}

// lifecycle is one OSB operation to crash, with what must exist before it.
type lifecycle struct {
	name  string
	async bool
	// plan is the plan's name (default: fake-async-plan, which runs
	// synchronously without accepts_incomplete).
	plan string
	// setup prepares the instance (and binding) the operation works on.
	setup func(t *testing.T, b *apptest.Broker, f *faultFixture)
	// request is the operation itself.
	request func(f *faultFixture) apptest.Request
}

type faultFixture struct {
	service, plan string
	instance      string
	binding       string
}

func (f *faultFixture) q(accepts bool) string {
	q := "?service_id=" + f.service + "&plan_id=" + f.plan
	if accepts {
		q += "&accepts_incomplete=true"
	}
	return q
}

func lifecycles() []lifecycle {
	provisionReq := func(async bool) func(f *faultFixture) apptest.Request {
		return func(f *faultFixture) apptest.Request {
			p := "/v2/service_instances/" + f.instance
			if async {
				p += "?accepts_incomplete=true"
			}
			return apptest.Request{Method: http.MethodPut, Path: p, Body: provisionBody(f.service, f.plan, map[string]any{"duration_seconds": 0})}
		}
	}
	provisioned := func(t *testing.T, b *apptest.Broker, f *faultFixture) {
		t.Helper()
		if r := b.Do(provisionReq(false)(f)); r.Status != http.StatusCreated {
			t.Fatalf("setup provision: %d %s", r.Status, r.Raw)
		}
	}
	bound := func(t *testing.T, b *apptest.Broker, f *faultFixture) {
		t.Helper()
		provisioned(t, b, f)
		if r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/" + f.instance + "/service_bindings/" + f.binding,
			Body: map[string]any{"service_id": f.service, "plan_id": f.plan}}); r.Status != http.StatusCreated {
			t.Fatalf("setup bind: %d %s", r.Status, r.Raw)
		}
	}
	var out []lifecycle
	for _, async := range []bool{false, true} {
		out = append(out,
			lifecycle{name: "provision", async: async, request: provisionReq(async)},
			lifecycle{name: "update", async: async, setup: provisioned, request: func(f *faultFixture) apptest.Request {
				p := "/v2/service_instances/" + f.instance
				if async {
					p += "?accepts_incomplete=true"
				}
				return apptest.Request{Method: http.MethodPatch, Path: p,
					Body: map[string]any{"service_id": f.service, "parameters": map[string]any{"duration_seconds": 0, "fail_description": "updated"}}}
			}},
			lifecycle{name: "deprovision", async: async, setup: provisioned, request: func(f *faultFixture) apptest.Request {
				return apptest.Request{Method: http.MethodDelete, Path: "/v2/service_instances/" + f.instance + f.q(async)}
			}},
			lifecycle{name: "bind", async: async, setup: provisioned, request: func(f *faultFixture) apptest.Request {
				p := "/v2/service_instances/" + f.instance + "/service_bindings/" + f.binding
				if async {
					p += "?accepts_incomplete=true"
				}
				return apptest.Request{Method: http.MethodPut, Path: p, Body: map[string]any{"service_id": f.service, "plan_id": f.plan, "parameters": map[string]any{"duration_seconds": 0}}}
			}},
			lifecycle{name: "unbind", async: async, setup: bound, request: func(f *faultFixture) apptest.Request {
				return apptest.Request{Method: http.MethodDelete, Path: "/v2/service_instances/" + f.instance + "/service_bindings/" + f.binding + f.q(async)}
			}},
		)
	}
	// A deprovision in detach mode: answered at once, deleted by cleanup.
	out = append(out, lifecycle{name: "deprovision (detach)", plan: "fake-async-only-plan",
		setup: func(t *testing.T, b *apptest.Broker, f *faultFixture) {
			t.Helper()
			r := b.Do(provisionReq(true)(f))
			if r.Status != http.StatusAccepted {
				t.Fatalf("setup provision: %d %s", r.Status, r.Raw)
			}
			if lo := b.WaitLastOperation("/v2/service_instances/" + f.instance + "/last_operation"); lo.Str("state") != "succeeded" {
				t.Fatalf("setup provision: %s", lo.Raw)
			}
		},
		request: func(f *faultFixture) apptest.Request {
			return apptest.Request{Method: http.MethodDelete, Path: "/v2/service_instances/" + f.instance + f.q(true)}
		}})
	return out
}

// faultRun is one run of a lifecycle with a crash at call k (0: none).
type faultRun struct {
	lc       lifecycle
	store    func(t *testing.T) broker.Store // nil: bolt
	k        int
	after    bool
	instance string
	// base is what both brokers start with (the catalog, the drivers'
	// environment); the run sets the data, store, wrappers and waits.
	base apptest.Options
	// check, when set, asserts more once the restarted broker is quiet.
	check func(t *testing.T, b *apptest.Broker, f *faultFixture)
}

// run returns how many calls the operation made through the ports.
func (r faultRun) run(t *testing.T) int {
	dir := t.TempDir()
	var store broker.Store
	if r.store != nil {
		store = r.store(t)
	}
	c := &crasher{k: r.k, after: r.after}
	wrap := &app.Wrappers{
		Store:  func(s broker.Store) broker.Store { return faultyStore{s, c} },
		Engine: func(e broker.Engine) broker.Engine { return faultyEngine{e, c} },
		Driver: func(d broker.Driver) broker.Driver { return faultyDriver{d, c} },
	}
	// Until it dies, the crashing broker waits in real time: its failing
	// executions sit in their first retry when it stops, as they would in a
	// process that crashed, instead of burning hours of retries at once.
	sleep := noSleep
	if r.k > 0 {
		sleep = nil
	}
	o := r.base
	o.Dir, o.Store, o.Wrap, o.ReapInterval, o.Sleep = dir, store, wrap, -1, sleep
	a := apptest.StartWith(t, o)
	a.Local.Broker.Backoff = time.Millisecond // in-request retries of a crashed call: no need to wait
	plan := r.lc.plan
	if plan == "" {
		plan = "fake-async-plan"
	}
	f := &faultFixture{instance: r.instance, binding: "b-" + r.instance}
	f.service, f.plan = a.Plan(plan)
	if r.lc.setup != nil {
		r.lc.setup(t, a, f)
	}
	c.arm()
	resp := a.Do(r.lc.request(f))
	if r.k == 0 {
		if resp.Status >= 400 {
			t.Fatalf("the fault-free %s answered %d %s", r.lc.name, resp.Status, resp.Raw)
		}
		waitExecutions(t, a)
		return c.calls()
	}
	if resp.Status >= 500 && resp.Str("description") == "" {
		t.Fatalf("a 5xx without a description: %s", resp.Raw)
	}
	// The process dies: a new broker starts on the same data, without faults.
	a.Stop()
	o = r.base
	o.Dir, o.Store, o.ReapInterval, o.Sleep = dir, store, -1, noSleep
	b := apptest.StartWith(t, o)
	b.Local.Broker.RepairAfter = -time.Hour // everything in progress is overdue: the reaper looks at it
	quiesce(t, b, f)
	checkNothingStuckOrOrphaned(t, b, f)
	if r.check != nil {
		r.check(t, b, f)
	}
	return c.calls()
}

// waitExecutions waits until no execution of the broker's engine runs.
func waitExecutions(t *testing.T, b *apptest.Broker) {
	t.Helper()
	waittest.Until(t, func() error {
		ops, err := b.Local.Store.ListInProgress(context.Background())
		if err != nil || len(ops) != 0 {
			return fmt.Errorf("operations still in progress: %+v (%v)", ops, err)
		}
		return nil
	})
}

// quiesce runs the reaper until nothing of the instance is in progress and
// nothing is detached.
func quiesce(t *testing.T, b *apptest.Broker, f *faultFixture) {
	t.Helper()
	ctx := context.Background()
	waittest.Until(t, func() error {
		var busy []string
		ops, _ := b.Local.Store.ListInProgress(ctx)
		for _, op := range ops {
			if op.InstanceID == f.instance {
				busy = append(busy, fmt.Sprintf("in progress: %+v", op))
			}
		}
		ds, _ := b.Local.Store.ListDetached(ctx)
		for _, d := range ds {
			if d.InstanceID == f.instance {
				exec, err := b.Local.Engine.Describe(ctx, d.CleanupName(d.Attempts))
				busy = append(busy, fmt.Sprintf("detached: %s state %s attempts %d failure %q; execution %s: %s %s %v",
					d.ID, d.State, d.Attempts, d.Failure, d.CleanupName(d.Attempts), exec.Status, exec.Error, err))
			}
		}
		if len(busy) == 0 {
			return nil
		}
		if _, err := b.Local.Broker.Reap(ctx); err != nil {
			t.Logf("reap: %v", err)
		}
		return fmt.Errorf("still busy: %d operations in progress or resources detached:\n%s", len(busy), strings.Join(busy, "\n"))
	})
}

// checkNothingStuck asserts that every operation of the instance ended and
// that nothing holds the instance or the binding; it says which exist.
func checkNothingStuck(t *testing.T, s broker.Store, f *faultFixture) (instanceExists, bindingExists bool) {
	t.Helper()
	ctx := context.Background()
	ops, err := s.ListOperations(ctx, f.instance)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if !op.Finished() {
			t.Errorf("operation %s (%s) is still in progress", op.ID, op.Kind)
		}
	}
	inst, err := s.GetInstance(ctx, f.instance)
	instanceExists = err == nil
	if instanceExists && (inst.Op != "" || inst.BindingOps != 0) {
		t.Errorf("instance %s still held: op %q, binding ops %d", inst.ID, inst.Op, inst.BindingOps)
	}
	binding, err := s.GetBinding(ctx, f.instance, f.binding)
	bindingExists = err == nil
	if bindingExists && binding.Op != "" {
		t.Errorf("binding %s still held by %q", binding.ID, binding.Op)
	}
	return instanceExists, bindingExists
}

// checkNothingStuckOrOrphaned asserts the three promises: every operation
// ended; no lock is held; every resource record the demo driver made is
// attached to an instance or binding that exists, or was deleted.
func checkNothingStuckOrOrphaned(t *testing.T, b *apptest.Broker, f *faultFixture) {
	t.Helper()
	ctx := context.Background()
	s := b.Local.Store
	instanceExists, bindingExists := checkNothingStuck(t, s, f)
	records, err := storetest.Records(ctx, s, f.instance)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		switch {
		case r.Name == "instance" && instanceExists:
		case r.Name == "binding-"+f.binding && bindingExists:
		default:
			t.Errorf("resource %q of instance %s is orphaned (instance exists: %v, binding exists: %v)", r.Name, f.instance, instanceExists, bindingExists)
		}
	}
	ds, err := s.ListDetached(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.InstanceID == f.instance {
			t.Errorf("detached resource %s (%s) was not cleaned up: %s %s", d.ID, d.Name, d.State, d.Failure)
		}
	}
}

// runFaultSuite crashes every lifecycle at every call, in the given modes.
// newStore, when set, gives the store of each run (nil: bolt). The crash
// points run in parallel: each has its brokers, its data and its store, so
// that no reaper repairs another run's operations.
func runFaultSuite(t *testing.T, newStore func(t *testing.T) broker.Store, modes []bool) {
	runFaultSuiteWith(t, faultRun{store: newStore}, modes)
}

// runFaultSuiteWith is runFaultSuite with each run made from proto (its
// store, base options and check).
func runFaultSuiteWith(t *testing.T, proto faultRun, modes []bool) {
	tried := 0
	for i, lc := range lifecycles() {
		name := lc.name
		if lc.async {
			name += " (async)"
		} else if lc.plan == "" {
			name += " (sync)"
		}
		count := proto
		count.lc, count.instance = lc, fmt.Sprintf("count-%d", i)
		total := count.run(t)
		for _, after := range modes {
			when := "before"
			if after {
				when = "after"
			}
			for k := 1; k <= total; k++ {
				tried++
				t.Run(fmt.Sprintf("%s crashes %s call %d of %d", name, when, k, total), func(t *testing.T) {
					t.Parallel()
					r := proto
					r.lc, r.k, r.after, r.instance = lc, k, after, fmt.Sprintf("f-%d-%s-%d", i, when, k)
					r.run(t)
				})
			}
		}
	}
	t.Logf("crash points tried: %d", tried)
}

func TestNothingStuckNothingOrphanedOnBolt(t *testing.T) {
	t.Parallel()
	runFaultSuite(t, nil, []bool{false, true})
}

func TestNothingStuckNothingOrphanedOnDynamoDB(t *testing.T) {
	t.Parallel()
	runFaultSuite(t, dynamoStore, []bool{false, true})
}
