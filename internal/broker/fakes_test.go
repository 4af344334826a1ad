package broker_test

// The harness of the domain's tests: a Broker on the real bbolt store (in
// t.TempDir), a catalog written for the tests, a fake driver the test
// scripts, a fake engine (the workflow engine is an outside port), and a
// clock that moves only when the test moves it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/steps"
	"github.com/serverless-osb/broker/internal/store/bolt"
	"github.com/serverless-osb/broker/internal/store/storetest"
)

// The test catalog: one offering whose plans cover the broker's settings.
const (
	serviceID      = "svc-test"
	planSync       = "plan-sync"       // mode sync, maintenance_info 1.0.0, a parameters schema, rotatable bindings with a 720h lifetime
	planLarge      = "plan-large"      // mode sync, maintenance_info 2.0.0: the target of plan changes
	planFixed      = "plan-fixed"      // mode sync, plan_updateable false
	planAsync      = "plan-async"      // mode async, maximum_polling_duration 3600
	planAsyncOnly  = "plan-async-only" // mode async-only
	planDetach     = "plan-detach"     // mode async, deprovision detach
	planUnbindable = "plan-unbindable" // mode sync, bindable false
	otherService   = "svc-other"       // a second offering, for a service_id that does not match
	planOther      = "plan-other"      // its plan
	lifetime       = 720 * time.Hour   // plan-sync's credential_lifetime
	renewal        = lifetime / 5      // its default credential_renewal
)

const testCatalog = `
services:
  - id: svc-test
    name: test-service
    description: A service whose plans the broker's tests drive with a fake driver.
    bindable: true
    plan_updateable: true
    instances_retrievable: true
    bindings_retrievable: true
    plans:
      - id: plan-sync
        name: sync
        description: Every change completes within the request.
        maintenance_info: {version: "1.0.0"}
        binding_rotatable: true
        schemas:
          service_instance:
            create:
              parameters: &params
                $schema: "http://json-schema.org/draft-04/schema#"
                type: object
                additionalProperties: false
                properties:
                  size: {type: integer}
            update:
              parameters: *params
        broker: {mode: sync, credential_lifetime: 720h}
      - id: plan-large
        name: large
        description: The plan that updates move instances to.
        maintenance_info: {version: "2.0.0"}
        broker: {mode: sync}
      - id: plan-fixed
        name: fixed
        description: A plan whose instances cannot change plan.
        plan_updateable: false
        broker: {mode: sync}
      - id: plan-async
        name: async
        description: Asynchronous when the platform accepts it.
        maximum_polling_duration: 3600
        broker: {mode: async}
      - id: plan-async-only
        name: async-only
        description: Always asynchronous.
        broker: {mode: async-only}
      - id: plan-detach
        name: detach
        description: Deprovisioning hands the resource to the cleanup.
        broker: {mode: async, deprovision: detach}
      - id: plan-unbindable
        name: unbindable
        description: Its instances cannot be bound.
        bindable: false
        broker: {mode: sync}
  - id: svc-other
    name: other-service
    description: Another offering.
    bindable: true
    plans:
      - id: plan-other
        name: other
        description: Its only plan.
`

// epoch is when every test starts.
var epoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// ctx is the context of every call; the tests cancel nothing.
var ctx = context.Background()

// harness is a Broker and the fakes around it.
type harness struct {
	t      *testing.T
	b      *broker.Broker
	store  *bolt.Store // read directly: the assertions' reads are not counted
	writes *countingStore
	engine *fakeEngine
	driver *fakeDriver
	clock  *fakeClock
	// givenOp is the operation a case's given made, for its then.
	givenOp string
	// err is what the rule's request returned; calls and starts are how
	// many driver calls and workflow starts there were before it, and
	// before everything stored about instance i-1 (mark).
	err           error
	calls, starts int
	before        string
}

// mark notes that the request starts here: writes, driver calls and
// workflow starts are counted from now, and what is stored of i-1 kept.
func (h *harness) mark() {
	h.writes.reset()
	h.calls, h.starts = len(h.driver.Calls()), len(h.engine.Started())
	h.before = h.snapshotJSON("i-1")
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	cat, err := catalog.Parse("test-catalog.yaml", []byte(testCatalog))
	if err != nil {
		t.Fatal(err)
	}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "broker.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	h := &harness{t: t, store: store, writes: &countingStore{Store: store},
		engine: newFakeEngine(), driver: newFakeDriver(), clock: &fakeClock{now: epoch}}
	h.b = broker.New(cat, h.writes, h.engine, driversOf{h.driver}, slog.New(slog.DiscardHandler))
	h.b.Now = h.clock.Now
	var ids int
	var mu sync.Mutex
	h.b.NewID = func() string {
		mu.Lock()
		defer mu.Unlock()
		ids++
		return fmt.Sprintf("op-%03d", ids)
	}
	h.b.Backoff = 0 // retries within a request do not wait
	return h
}

// driversOf drives every plan with one driver.
type driversOf struct{ d broker.Driver }

func (s driversOf) For(*catalog.Plan) (broker.Driver, any, bool) { return s.d, nil, true }

// fakeClock is the broker's clock; it moves only when a test advances it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// answer is what a fake driver's Begin or Check answers.
type answer struct {
	progress broker.Progress
	err      error
}

// done: the change is done.
func done() answer { return answer{progress: broker.Progress{Done: true}} }

// running: the change goes on; look again after retryAfter.
func running(description string, retryAfter time.Duration) answer {
	return answer{progress: broker.Progress{RetryAfter: retryAfter, Description: description}}
}

// fails: the change failed for good, as description says.
func fails(description string) answer {
	return answer{err: &broker.Failure{Description: description}}
}

// errTransient is a fake driver's transient error.
var errTransient = errors.New("the service did not answer")

// transient: the call failed, and may work if tried again.
func transient() answer { return answer{err: errTransient} }

// Record names of the fake driver: an instance's resource, an update's
// pending change, and each binding's broker.BindingRecord.
const (
	instanceRecord = "instance"
	updateRecord   = "instance-update"
)

// fakeDriver is a Driver whose answers the test scripts, per step (begin,
// check) and kind of operation: each call takes the next answer, the last
// one repeats, and with none the change is done. Like a real driver it
// makes records: a provision's Begin saves the instance's record, a bind's
// the binding's, an update's Begin saves its pending change, which the
// update's completion folds into the instance's record; a finished
// deprovision removes every record, a finished unbind the binding's. Its
// Leftovers name what a failed provision, bind or update made.
type fakeDriver struct {
	mu       sync.Mutex
	inMemory bool
	answers  map[string][]answer
	calls    []string
	cleanups []string
	// hook, when set, runs at the start of every Begin and Check: a test
	// makes another request there, while the change is under way.
	hook func(step string, c broker.Change)
	// allLeftovers makes Leftovers name every record of the change,
	// whatever its kind, so that a test sees which ends ask for them.
	allLeftovers bool
}

var (
	_ broker.Driver   = (*fakeDriver)(nil)
	_ broker.InMemory = (*fakeDriver)(nil)
)

func newFakeDriver() *fakeDriver { return &fakeDriver{answers: map[string][]answer{}} }

// on scripts the answers of step ("begin" or "check") for kind.
func (d *fakeDriver) on(step string, kind broker.OperationKind, answers ...answer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.answers[step+" "+string(kind)] = answers
}

// InMemory says whether the fake's changes live only in its records; a
// test sets inMemory.
func (d *fakeDriver) InMemory() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inMemory
}

// Calls returns the calls made so far, as "begin provision", "check bind", ….
func (d *fakeDriver) Calls() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// count is how many calls were made of step for kind.
func (d *fakeDriver) count(step string, kind broker.OperationKind) int {
	n := 0
	for _, c := range d.Calls() {
		if c == step+" "+string(kind) {
			n++
		}
	}
	return n
}

func (d *fakeDriver) Begin(_ context.Context, c broker.Change) (broker.Progress, error) {
	return d.call("begin", c)
}

func (d *fakeDriver) Check(_ context.Context, c broker.Change) (broker.Progress, error) {
	return d.call("check", c)
}

func (d *fakeDriver) call(step string, c broker.Change) (broker.Progress, error) {
	kind := c.Operation.Kind
	key := step + " " + string(kind)
	d.mu.Lock()
	d.calls = append(d.calls, key)
	a := d.next(key)
	hook := d.hook
	d.mu.Unlock()
	if hook != nil {
		hook(step, c)
	}
	if a.err != nil {
		return broker.Progress{}, a.err
	}
	p := a.progress
	p.Records = records(step, c, p.Done)
	if p.Done {
		switch kind {
		case broker.KindProvision, broker.KindUpdate:
			p.DashboardURL = "https://dashboard.example/" + c.Instance.ID
		case broker.KindBind:
			p.Credentials = broker.Credentials{"username": "u-" + c.Binding.ID, "password": "p-" + c.Operation.ID}
		}
	}
	return p, nil
}

// records are the fake driver's record changes for a successful call.
func records(step string, c broker.Change, finished bool) broker.RecordChanges {
	save := func(name string) broker.Resource {
		return broker.Resource{InstanceID: c.Instance.ID, Name: name, Data: json.RawMessage(fmt.Sprintf(`{"op":%q}`, c.Operation.ID))}
	}
	var out broker.RecordChanges
	switch c.Operation.Kind {
	case broker.KindProvision:
		if step == "begin" {
			out.Save = []broker.Resource{save(instanceRecord)}
		}
	case broker.KindBind:
		if step == "begin" {
			out.Save = []broker.Resource{save(broker.BindingRecord(c.Binding.ID))}
		}
	case broker.KindUpdate:
		switch {
		case finished:
			out.Save = []broker.Resource{save(instanceRecord)}
			if _, ok := c.Record(updateRecord); ok {
				out.Remove = []string{updateRecord}
			}
		case step == "begin":
			out.Save = []broker.Resource{save(updateRecord)}
		}
	case broker.KindDeprovision:
		if finished {
			for _, r := range c.Records {
				out.Remove = append(out.Remove, r.Name)
			}
		}
	case broker.KindUnbind:
		if _, ok := c.Record(broker.BindingRecord(c.BindingID())); ok && finished {
			out.Remove = []string{broker.BindingRecord(c.BindingID())}
		}
	}
	return out
}

func (d *fakeDriver) Leftovers(_ context.Context, c broker.Change) ([]string, error) {
	d.mu.Lock()
	all := d.allLeftovers
	d.mu.Unlock()
	if all {
		var names []string
		for _, r := range c.Records {
			names = append(names, r.Name)
		}
		return names, nil
	}
	switch c.Operation.Kind {
	case broker.KindProvision:
		return []string{instanceRecord}, nil
	case broker.KindUpdate:
		return []string{updateRecord}, nil
	case broker.KindBind:
		return []string{broker.BindingRecord(c.BindingID())}, nil
	}
	return nil, nil
}

// Cleanup takes the next answer scripted for step "cleanup" (any kind:
// d.on("cleanup", "", …)); with none, the resource is deleted.
func (d *fakeDriver) Cleanup(_ context.Context, det broker.Detached) (broker.Progress, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cleanups = append(d.cleanups, det.Name)
	a := d.next("cleanup ")
	return a.progress, a.err
}

// next takes the next answer scripted under key; the last one repeats,
// and with none the change is done. d.mu is held.
func (d *fakeDriver) next(key string) answer {
	a := done()
	if queue := d.answers[key]; len(queue) > 0 {
		a = queue[0]
		if len(queue) > 1 {
			d.answers[key] = queue[1:]
		}
	}
	return a
}

// started is one Start call of the fake engine.
type started struct {
	Workflow broker.Workflow
	Name     string
	Input    string
}

// fakeEngine is the workflow engine, an outside port: it records Start and
// Stop, and Describe answers what the test says (a started execution runs
// until the test says otherwise; any other is not found).
type fakeEngine struct {
	mu      sync.Mutex
	started []started
	stopped []string
	status  map[string]broker.ExecutionStatus
	errName map[string]string
	// down makes every Start fail (and start nothing), as an engine that
	// cannot be reached.
	down bool
}

var errEngineDown = errors.New("the engine cannot be reached")

func newFakeEngine() *fakeEngine {
	return &fakeEngine{status: map[string]broker.ExecutionStatus{}, errName: map[string]string{}}
}

func (e *fakeEngine) Start(_ context.Context, workflow broker.Workflow, name string, input json.RawMessage) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.down {
		return errEngineDown
	}
	e.started = append(e.started, started{Workflow: workflow, Name: name, Input: string(input)})
	if _, ok := e.status[name]; !ok {
		e.status[name] = broker.ExecutionRunning
	}
	return nil
}

func (e *fakeEngine) Describe(_ context.Context, name string) (broker.Execution, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.status[name]
	if !ok {
		return broker.Execution{}, broker.ErrExecutionNotFound
	}
	return broker.Execution{Name: name, Status: s, Error: e.errName[name]}, nil
}

func (e *fakeEngine) Stop(_ context.Context, name, _ string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopped = append(e.stopped, name)
	if _, ok := e.status[name]; ok {
		e.status[name] = broker.ExecutionAborted
	}
	return nil
}

// end says that execution name ended with status (and error name).
func (e *fakeEngine) end(name string, status broker.ExecutionStatus, errName string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status[name], e.errName[name] = status, errName
}

// lose forgets execution name, as if its start had been lost.
func (e *fakeEngine) lose(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.status, name)
}

// Started returns the starts so far.
func (e *fakeEngine) Started() []started {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.started)
}

// Stopped returns the names stopped so far.
func (e *fakeEngine) Stopped() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.stopped)
}

// startsOf returns the names started of workflow w.
func (e *fakeEngine) startsOf(w broker.Workflow) []string {
	var names []string
	for _, s := range e.Started() {
		if s.Workflow == w {
			names = append(names, s.Name)
		}
	}
	return names
}

// countingStore is the broker's Store, counting the writes the broker
// makes (each is one conditional write or one transaction).
type countingStore struct {
	broker.Store
	mu   sync.Mutex
	list []string
	// before, when set, runs before each write: a test makes another
	// request there, between a request's read and its write.
	before func(write string)
}

func (s *countingStore) note(name string) {
	s.mu.Lock()
	s.list = append(s.list, name)
	before := s.before
	s.mu.Unlock()
	if before != nil {
		before(name)
	}
}

// reset forgets the writes so far.
func (s *countingStore) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = nil
}

// since returns the writes made since the last reset, in order.
func (s *countingStore) since() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.list)
}

func (s *countingStore) CreateInstance(ctx context.Context, inst broker.Instance, op broker.Operation, settled *broker.Settled) error {
	s.note("CreateInstance")
	return s.Store.CreateInstance(ctx, inst, op, settled)
}

func (s *countingStore) LockInstance(ctx context.Context, l broker.LockInstance) error {
	s.note("LockInstance")
	return s.Store.LockInstance(ctx, l)
}

func (s *countingStore) CreateBinding(ctx context.Context, b broker.Binding, op broker.Operation, settled *broker.Settled) error {
	s.note("CreateBinding")
	return s.Store.CreateBinding(ctx, b, op, settled)
}

func (s *countingStore) LockBinding(ctx context.Context, l broker.LockBinding) error {
	s.note("LockBinding")
	return s.Store.LockBinding(ctx, l)
}

func (s *countingStore) UpdateOperation(ctx context.Context, op broker.Operation, records broker.RecordChanges) error {
	s.note("UpdateOperation")
	return s.Store.UpdateOperation(ctx, op, records)
}

func (s *countingStore) FinishOperation(ctx context.Context, f broker.Finish) error {
	s.note("FinishOperation")
	return s.Store.FinishOperation(ctx, f)
}

func (s *countingStore) PutResource(ctx context.Context, r broker.Resource) error {
	s.note("PutResource")
	return s.Store.PutResource(ctx, r)
}

func (s *countingStore) DeleteResource(ctx context.Context, instanceID, name string) error {
	s.note("DeleteResource")
	return s.Store.DeleteResource(ctx, instanceID, name)
}

func (s *countingStore) UpdateDetached(ctx context.Context, d broker.Detached, attempts int) error {
	s.note("UpdateDetached")
	return s.Store.UpdateDetached(ctx, d, attempts)
}

func (s *countingStore) DeleteDetached(ctx context.Context, id string) error {
	s.note("DeleteDetached")
	return s.Store.DeleteDetached(ctx, id)
}

// rule is one rule of an endpoint, as a test case: given a state, the
// request (D) answers a result (R) or an error code, and leaves what then
// checks. The writes the request made are h.writes.since().
type rule[D, R any] struct {
	name  string
	given func(h *harness)
	req   D
	want  broker.Result
	code  broker.Code // the error's code; empty when the request succeeds
	then  func(t *testing.T, h *harness, res R)
}

// runRules runs each rule on a harness of its own: call makes the request,
// result says which success it answered.
func runRules[D, R any](t *testing.T, call func(*harness, D) (R, error), result func(R) broker.Result, rules []rule[D, R]) {
	t.Helper()
	for _, tt := range rules {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			if tt.given != nil {
				tt.given(h)
			}
			h.mark()
			res, err := call(h, tt.req)
			h.err = err
			switch {
			case tt.code != "":
				wantCode(t, err, tt.code)
			case err != nil || result(res) != tt.want:
				t.Fatalf("answer %+v %v, want result %d", res, err, tt.want)
			}
			if tt.then != nil {
				tt.then(t, h, res)
			}
		})
	}
}

// The requests the tests make. params is the request's parameters (nil:
// none).

func provisionOf(id, plan string, acceptsIncomplete bool, params string) broker.ProvisionDetails {
	d := broker.ProvisionDetails{InstanceID: id, AcceptsIncomplete: acceptsIncomplete,
		InstanceRequest: broker.InstanceRequest{ServiceID: serviceID, PlanID: plan, OrganizationGUID: "org-1", SpaceGUID: "space-1"}}
	if params != "" {
		d.Parameters = json.RawMessage(params)
	}
	return d
}

func updateOf(id, plan string, acceptsIncomplete bool, params string) broker.UpdateDetails {
	d := broker.UpdateDetails{InstanceID: id, ServiceID: serviceID, PlanID: plan, AcceptsIncomplete: acceptsIncomplete}
	if params != "" {
		d.Parameters = json.RawMessage(params)
	}
	return d
}

func deprovisionOf(id, plan string, acceptsIncomplete bool) broker.DeprovisionDetails {
	return broker.DeprovisionDetails{InstanceID: id, ServiceID: serviceID, PlanID: plan, AcceptsIncomplete: acceptsIncomplete}
}

func bindOf(id, bindingID, plan string, acceptsIncomplete bool, params string) broker.BindDetails {
	d := broker.BindDetails{InstanceID: id, BindingID: bindingID, BindingRequest: broker.BindingRequest{ServiceID: serviceID, PlanID: plan,
		AppGUID: "app-1"}, AcceptsIncomplete: acceptsIncomplete}
	if params != "" {
		d.Parameters = json.RawMessage(params)
	}
	return d
}

func unbindOf(id, bindingID, plan string, acceptsIncomplete bool) broker.UnbindDetails {
	return broker.UnbindDetails{InstanceID: id, BindingID: bindingID, ServiceID: serviceID, PlanID: plan, AcceptsIncomplete: acceptsIncomplete}
}

// Givens: states reached through the broker's own endpoints and Tasks.

// ready provisions instance id on plan, synchronously when the plan
// allows, else asynchronously with its Tasks run, and returns it ready.
func (h *harness) ready(id, plan string) broker.Instance {
	h.t.Helper()
	return h.readyWith(id, plan, "")
}

// readyWith is ready with the provision's parameters.
func (h *harness) readyWith(id, plan, params string) broker.Instance {
	h.t.Helper()
	async := plan == planAsyncOnly
	res, err := h.b.Provision(ctx, provisionOf(id, plan, async, params))
	if err != nil {
		h.t.Fatalf("given a ready instance %s: %v", id, err)
	}
	if async {
		h.task(id, res.Operation)
	}
	inst := h.instance(id)
	if inst == nil || inst.State != broker.InstanceReady {
		h.t.Fatalf("given a ready instance %s: it is %+v", id, inst)
	}
	return *inst
}

// provisioning starts an asynchronous provision of id on plan and returns
// its operation; its Tasks have not run.
func (h *harness) provisioning(id, plan, params string) string {
	h.t.Helper()
	res, err := h.b.Provision(ctx, provisionOf(id, plan, true, params))
	if err != nil || res.Result != broker.ResultAccepted {
		h.t.Fatalf("given a provision of %s in progress: %+v %v", id, res, err)
	}
	return res.Operation
}

// failedInstance leaves instance id of plan (async) failed: its
// asynchronous provision began, made its record, then failed.
func (h *harness) failedInstance(id, plan string) string {
	h.t.Helper()
	h.driver.on("begin", broker.KindProvision, running("", time.Second))
	h.driver.on("check", broker.KindProvision, fails("The quota is exhausted."))
	op := h.provisioning(id, plan, "")
	h.mustBegin(id, op)
	h.failTask(id, op, "check")
	h.driver.on("begin", broker.KindProvision)
	h.driver.on("check", broker.KindProvision)
	return op
}

// updating starts an asynchronous update of ready instance id with params
// and returns its operation.
func (h *harness) updating(id, params string) string {
	h.t.Helper()
	res, err := h.b.Update(ctx, updateOf(id, "", true, params))
	if err != nil || res.Result != broker.ResultAccepted {
		h.t.Fatalf("given an update of %s in progress: %+v %v", id, res, err)
	}
	return res.Operation
}

// bound binds bindingID to ready instance id synchronously (plan-sync or
// another sync plan) and returns the binding.
func (h *harness) bound(id, bindingID, plan string) broker.Binding {
	h.t.Helper()
	res, err := h.b.Bind(ctx, bindOf(id, bindingID, plan, false, ""))
	if err != nil || res.Result != broker.ResultCreated {
		h.t.Fatalf("given binding %s: %+v %v", bindingID, res, err)
	}
	return *h.binding(id, bindingID)
}

// binding returns the stored binding, nil when there is none.
func (h *harness) binding(id, bindingID string) *broker.Binding {
	h.t.Helper()
	snap := h.load(id, "", bindingID)
	return snap.Binding
}

// bindingAsync starts an asynchronous bind of bindingID to instance id
// (an async plan) and returns its operation.
func (h *harness) bindingAsync(id, bindingID, plan string) string {
	h.t.Helper()
	res, err := h.b.Bind(ctx, bindOf(id, bindingID, plan, true, ""))
	if err != nil || res.Result != broker.ResultAccepted {
		h.t.Fatalf("given a bind of %s in progress: %+v %v", bindingID, res, err)
	}
	return res.Operation
}

// task runs an operation's workflow as the engine would when every step
// succeeds: Begin, then Check until done, then Finish.
func (h *harness) task(id, op string) {
	h.t.Helper()
	p, err := h.b.BeginTask(ctx, broker.OperationTask{InstanceID: id, OperationID: op})
	for range 10 {
		if err != nil {
			h.t.Fatalf("task of %s: %v", op, err)
		}
		if p.Done {
			if err := h.b.FinishTask(ctx, broker.OperationTask{InstanceID: id, OperationID: op}); err != nil {
				h.t.Fatalf("finish %s: %v", op, err)
			}
			return
		}
		p, err = h.b.CheckTask(ctx, broker.OperationTask{InstanceID: id, OperationID: op})
	}
	h.t.Fatalf("task of %s: not done after 10 checks", op)
}

// mustBegin runs the Begin Task and fails the test on an error.
func (h *harness) mustBegin(id, op string) broker.TaskProgress {
	h.t.Helper()
	p, err := h.b.BeginTask(ctx, broker.OperationTask{InstanceID: id, OperationID: op})
	if err != nil {
		h.t.Fatalf("begin %s: %v", op, err)
	}
	return p
}

// failTask runs step (begin or check), which must fail for good, and then
// the workflow's Catch, both as package steps runs them: the failure
// travels as the error's name and cause to record_failure.
func (h *harness) failTask(id, op, step string) {
	h.t.Helper()
	s := steps.New(h.b)
	_, err := s.Run(ctx, steps.Payload{Step: step, InstanceID: id, OperationID: op})
	var perm *steps.PermanentError
	if !errors.As(err, &perm) {
		h.t.Fatalf("%s %s: %v, want a permanent failure", step, op, err)
	}
	if _, err := s.Run(ctx, steps.Payload{Step: steps.StepRecordFailure, InstanceID: id, OperationID: op,
		Error: perm.ErrorName(), Cause: perm.Error()}); err != nil {
		h.t.Fatalf("record failure of %s: %v", op, err)
	}
}

// Reads, straight from the store.

func (h *harness) load(id, op, bindingID string) broker.Snapshot {
	h.t.Helper()
	snap, err := h.store.Load(ctx, id, op, bindingID)
	if err != nil {
		h.t.Fatal(err)
	}
	return snap
}

// loadWhole reads everything stored under instance id: its bindings' ids
// and every record.
func (h *harness) loadWhole(id string) broker.Snapshot {
	h.t.Helper()
	snap, err := h.store.LoadWhole(ctx, id, "")
	if err != nil {
		h.t.Fatal(err)
	}
	return snap
}

// instance returns the stored instance, nil when there is none.
func (h *harness) instance(id string) *broker.Instance {
	h.t.Helper()
	return h.load(id, "", "").Instance
}

func (h *harness) op(id, op string) broker.Operation {
	h.t.Helper()
	o, err := h.store.GetOperation(ctx, id, op)
	if err != nil {
		h.t.Fatalf("operation %s: %v", op, err)
	}
	return o
}

// ops returns the instance's operations, oldest first.
func (h *harness) ops(id string) []broker.Operation {
	h.t.Helper()
	ops, err := h.store.ListOperations(ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return ops
}

// lastOp returns the instance's newest operation.
func (h *harness) lastOp(id string) broker.Operation {
	h.t.Helper()
	ops := h.ops(id)
	if len(ops) == 0 {
		h.t.Fatalf("instance %s has no operation", id)
	}
	return ops[len(ops)-1]
}

// recordNames returns the names of the instance's resource records.
func (h *harness) recordNames(id string) []string {
	h.t.Helper()
	rs, err := storetest.Records(ctx, h.store, id)
	if err != nil {
		h.t.Fatal(err)
	}
	var names []string
	for _, r := range rs {
		names = append(names, r.Name)
	}
	return names
}

// detachedNames returns the names of the detached records, as
// "instance/name".
func (h *harness) detachedNames() []string {
	h.t.Helper()
	ds, err := h.store.ListDetached(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	var names []string
	for _, d := range ds {
		names = append(names, d.InstanceID+"/"+d.Name)
	}
	return names
}

// Assertions.

// wantCode fails unless err has code (CodeInternal: an error with none).
func wantCode(t *testing.T, err error, code broker.Code) {
	t.Helper()
	if err == nil || broker.ErrorCode(err) != code {
		t.Fatalf("error %v, want code %s", err, code)
	}
}

// wantState fails unless the operation is in state with a description
// that contains part.
func wantState(t *testing.T, op broker.Operation, state broker.OperationState, part string) {
	t.Helper()
	if op.State != state || !strings.Contains(op.Description, part) {
		t.Fatalf("%s %s is %q (%q), want %q with %q", op.Kind, op.ID, op.State, op.Description, state, part)
	}
}

// wantNames fails unless got equals want (both sorted first).
func wantNames(t *testing.T, what string, got, want []string) {
	t.Helper()
	got, want = slices.Clone(got), slices.Clone(want)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %q, want %q", what, got, want)
	}
}

// snapshotJSON is everything stored about an instance, as JSON, to show
// that a call changed nothing.
func (h *harness) snapshotJSON(id string) string {
	h.t.Helper()
	snap := h.loadWhole(id)
	ds, err := h.store.ListDetached(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	var bindings []*broker.Binding
	for _, b := range snap.BindingIDs {
		bindings = append(bindings, h.binding(id, b))
	}
	out, err := json.Marshal(map[string]any{"snapshot": snap, "bindings": bindings, "ops": h.ops(id), "detached": ds})
	if err != nil {
		h.t.Fatal(err)
	}
	return string(out)
}

// failedBinding leaves binding bindingID of ready instance id (an async
// plan) failed: its asynchronous bind began, made its record, then failed.
func (h *harness) failedBinding(id, bindingID, plan string) string {
	h.t.Helper()
	h.driver.on("begin", broker.KindBind, running("", time.Second))
	h.driver.on("check", broker.KindBind, fails("The user could not be created."))
	op := h.bindingAsync(id, bindingID, plan)
	h.mustBegin(id, op)
	h.failTask(id, op, "check")
	h.driver.on("begin", broker.KindBind)
	h.driver.on("check", broker.KindBind)
	return op
}

// crashedSyncProvision stores instance id held by a synchronous provision
// in progress, as a broker that died during the provision's request leaves
// it (nothing else makes that state), and returns the operation.
func (h *harness) crashedSyncProvision(id, plan string) string {
	h.t.Helper()
	now := h.clock.Now()
	op := broker.Operation{ID: "op-crashed", InstanceID: id, Kind: broker.KindProvision, State: broker.OperationInProgress,
		PlanID: plan, CreatedAt: now, UpdatedAt: now, NextCheckAt: now.Add(2 * time.Second)}
	inst := broker.Instance{ID: id, InstanceRequest: broker.InstanceRequest{ServiceID: serviceID, PlanID: plan}, State: broker.InstanceProvisioning,
		Op: op.ID, LastOp: op.ID, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := h.store.CreateInstance(ctx, inst, op, nil); err != nil {
		h.t.Fatal(err)
	}
	return op.ID
}
