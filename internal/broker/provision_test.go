package broker_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// provisionRules runs rules of PUT /v2/service_instances/:instance_id.
func provisionRules(t *testing.T, rules []rule[broker.ProvisionDetails, broker.ProvisionResult]) {
	t.Helper()
	runRules(t, func(h *harness, d broker.ProvisionDetails) (broker.ProvisionResult, error) {
		return h.b.Provision(ctx, d)
	},
		func(r broker.ProvisionResult) broker.Result { return r.Result }, rules)
}

func TestProvision(t *testing.T) {
	provisionRules(t, []rule[broker.ProvisionDetails, broker.ProvisionResult]{
		{
			name: "a synchronous provision that succeeds answers 201 and leaves the instance ready and its operation succeeded",
			req:  provisionOf("i-1", planSync, false, `{"size":1}`),
			want: broker.ResultCreated,
			then: func(t *testing.T, h *harness, res broker.ProvisionResult) {
				inst := h.instance("i-1")
				if inst.State != broker.InstanceReady || inst.Op != "" || string(inst.Parameters) != `{"size":1}` {
					t.Fatalf("instance %+v, want ready, idle, with the request's parameters", inst)
				}
				if res.DashboardURL != "https://dashboard.example/i-1" || inst.DashboardURL != res.DashboardURL {
					t.Fatalf("dashboard %q, stored %q: want the driver's", res.DashboardURL, inst.DashboardURL)
				}
				op := h.op("i-1", inst.LastOp)
				wantState(t, op, broker.OperationSucceeded, "provisioned")
				if op.Async || op.Kind != broker.KindProvision {
					t.Fatalf("operation %+v, want a synchronous provision", op)
				}
				wantNames(t, "records", h.recordNames("i-1"), []string{instanceRecord})
				if s := h.engine.Started(); len(s) != 0 {
					t.Fatalf("a synchronous provision started %v", s)
				}
			},
		},
		{
			name: "an asynchronous provision answers 202 with its operation, leaves the instance provisioning and starts its workflow",
			req:  provisionOf("i-1", planAsync, true, ""),
			want: broker.ResultAccepted,
			then: func(t *testing.T, h *harness, res broker.ProvisionResult) {
				inst := h.instance("i-1")
				if inst.State != broker.InstanceProvisioning || inst.Op != res.Operation {
					t.Fatalf("instance %+v, want provisioning, held by %s", inst, res.Operation)
				}
				op := h.op("i-1", res.Operation)
				if op.State != broker.OperationInProgress || !op.Async {
					t.Fatalf("operation %+v, want asynchronous, in progress", op)
				}
				want := []started{{Workflow: broker.WorkflowOperation, Name: res.Operation, Input: `{"instance_id":"i-1","kind":"provision"}`}}
				if got := h.engine.Started(); !slices.Equal(got, want) {
					t.Fatalf("started %+v, want %+v: the execution is named after the operation", got, want)
				}
				if calls := h.driver.Calls(); len(calls) != 0 {
					t.Fatalf("the request called the driver: %v; the workflow does", calls)
				}
			},
		},
		{
			name:  "a synchronous provision that fails answers 422 with the driver's description and leaves no instance",
			given: func(h *harness) { h.driver.on("begin", broker.KindProvision, fails("The quota is exhausted.")) },
			req:   provisionOf("i-1", planSync, false, ""),
			code:  broker.CodeUnprocessable,
			then: func(t *testing.T, h *harness, _ broker.ProvisionResult) {
				if inst := h.instance("i-1"); inst != nil {
					t.Fatalf("instance %+v left behind", inst)
				}
				wantState(t, h.lastOp("i-1"), broker.OperationFailed, "The quota is exhausted.")
				if d := h.detachedNames(); len(d) != 0 {
					t.Fatalf("detached %v, though the driver made nothing", d)
				}
			},
		},
		{
			name: "a synchronous provision that fails after making something detaches it for cleanup and leaves no instance",
			given: func(h *harness) {
				h.driver.on("begin", broker.KindProvision, running("Creating.", 0))
				h.driver.on("check", broker.KindProvision, fails("The quota is exhausted."))
			},
			req:  provisionOf("i-1", planSync, false, ""),
			code: broker.CodeUnprocessable,
			then: func(t *testing.T, h *harness, _ broker.ProvisionResult) {
				if inst := h.instance("i-1"); inst != nil {
					t.Fatalf("instance %+v left behind", inst)
				}
				wantNames(t, "detached", h.detachedNames(), []string{"i-1/" + instanceRecord})
				wantNames(t, "records", h.recordNames("i-1"), nil)
				ds, _ := h.store.ListDetached(ctx)
				if d := ds[0]; d.State != broker.DetachedCleaning || d.Attempts != 1 || d.PlanID != planSync {
					t.Fatalf("detached %+v, want its first cleanup under way", d)
				}
				wantNames(t, "cleanups started", h.engine.startsOf(broker.WorkflowCleanup), []string{ds[0].CleanupName(1)})
			},
		},
		{
			name: "a synchronous provision whose change is not done at once is followed within the request until it is",
			given: func(h *harness) {
				h.driver.on("begin", broker.KindProvision, running("Creating: 1 of 3.", 0))
				h.driver.on("check", broker.KindProvision, running("Creating: 2 of 3.", 0), done())
			},
			req:  provisionOf("i-1", planSync, false, ""),
			want: broker.ResultCreated,
			then: func(t *testing.T, h *harness, _ broker.ProvisionResult) {
				want := []string{"begin provision", "check provision", "check provision"}
				if got := h.driver.Calls(); !slices.Equal(got, want) {
					t.Fatalf("calls %v, want %v", got, want)
				}
				wantState(t, h.lastOp("i-1"), broker.OperationSucceeded, "")
			},
		},
		{
			name: "a synchronous provision not done within SyncWait answers 503 without waiting, and what it made goes to cleanup",
			given: func(h *harness) {
				h.driver.on("begin", broker.KindProvision, running("Creating.", broker.SyncWait+time.Second))
			},
			req:  provisionOf("i-1", planSync, false, ""),
			code: broker.CodeUnavailable,
			then: func(t *testing.T, h *harness, _ broker.ProvisionResult) {
				if calls := h.driver.Calls(); !slices.Equal(calls, []string{"begin provision"}) {
					t.Fatalf("calls %v, want the begin only: its next check would be past SyncWait", calls)
				}
				if inst := h.instance("i-1"); inst != nil {
					t.Fatalf("instance %+v left behind", inst)
				}
				wantState(t, h.lastOp("i-1"), broker.OperationFailed, "This service's backend did not complete the provision within 10s, the time a synchronous request may wait")
				wantNames(t, "detached", h.detachedNames(), []string{"i-1/" + instanceRecord})
			},
		},
		{
			name:  "a transient driver error within a synchronous provision is tried again",
			given: func(h *harness) { h.driver.on("begin", broker.KindProvision, transient(), done()) },
			req:   provisionOf("i-1", planSync, false, ""),
			want:  broker.ResultCreated,
			then: func(t *testing.T, h *harness, _ broker.ProvisionResult) {
				if n := h.driver.count("begin", broker.KindProvision); n != 2 {
					t.Fatalf("%d begins, want 2", n)
				}
			},
		},
		{
			name:  "a synchronous provision whose driver keeps failing transiently is unavailable (503), recorded as failed, with no instance left",
			given: func(h *harness) { h.driver.on("begin", broker.KindProvision, transient()) },
			req:   provisionOf("i-1", planSync, false, ""),
			code:  broker.CodeUnavailable,
			then: func(t *testing.T, h *harness, _ broker.ProvisionResult) {
				if n := h.driver.count("begin", broker.KindProvision); n != 4 {
					t.Fatalf("%d begins, want 4 (the tries of one call within a request)", n)
				}
				if inst := h.instance("i-1"); inst != nil {
					t.Fatalf("instance %+v left behind", inst)
				}
				op := h.lastOp("i-1")
				wantState(t, op, broker.OperationFailed, "This service's backend is unavailable (it did not answer as the broker needs), so the provision did not complete; try again later.")
				if strings.Contains(op.Description, errTransient.Error()) {
					t.Fatalf("description %q shows the driver's internal error", op.Description)
				}
			},
		},
		{
			name: "an async-only plan without accepts_incomplete is 422 AsyncRequired and changes nothing",
			req:  provisionOf("i-1", planAsyncOnly, false, ""),
			code: broker.CodeAsyncRequired,
			then: func(t *testing.T, h *harness, _ broker.ProvisionResult) {
				if inst, ops := h.instance("i-1"), h.ops("i-1"); inst != nil || len(ops) != 0 {
					t.Fatalf("instance %+v, operations %v: want nothing stored", inst, ops)
				}
			},
		},
		{
			name: "an async plan without accepts_incomplete runs synchronously and answers 201",
			req:  provisionOf("i-1", planAsync, false, ""),
			want: broker.ResultCreated,
			then: func(t *testing.T, h *harness, _ broker.ProvisionResult) {
				if op := h.lastOp("i-1"); op.Async || op.State != broker.OperationSucceeded {
					t.Fatalf("operation %+v, want synchronous and succeeded", op)
				}
			},
		},
		{
			name: "a sync plan with accepts_incomplete still answers synchronously (201)",
			req:  provisionOf("i-1", planSync, true, ""),
			want: broker.ResultCreated,
		},
		{
			name: "a plan the catalog does not have is 400 BadRequest",
			req:  provisionOf("i-1", "no-such-plan", false, ""),
			code: broker.CodeBadRequest,
		},
		{
			name: "a plan of another offering is 400 BadRequest",
			req:  provisionOf("i-1", planOther, false, ""),
			code: broker.CodeBadRequest,
		},
		{
			name: "parameters the plan's schema refuses are 400 BadRequest and change nothing",
			req:  provisionOf("i-1", planSync, false, `{"colour":"red"}`),
			code: broker.CodeBadRequest,
			then: func(t *testing.T, h *harness, _ broker.ProvisionResult) {
				if inst := h.instance("i-1"); inst != nil {
					t.Fatalf("instance %+v stored", inst)
				}
			},
		},
		{
			name: "a maintenance_info version other than the plan's is 422 MaintenanceInfoConflict",
			req: func() broker.ProvisionDetails {
				d := provisionOf("i-1", planSync, false, "")
				d.MaintenanceInfo = &broker.MaintenanceInfo{Version: "0.9.0"}
				return d
			}(),
			code: broker.CodeMaintenanceInfoConflict,
		},
		{
			name: "maintenance_info for a plan that has none is 422 MaintenanceInfoConflict",
			req: func() broker.ProvisionDetails {
				d := provisionOf("i-1", planAsync, false, "")
				d.MaintenanceInfo = &broker.MaintenanceInfo{Version: "1.0.0"}
				return d
			}(),
			code: broker.CodeMaintenanceInfoConflict,
		},
		{
			name: "a provision without maintenance_info records the plan's",
			req:  provisionOf("i-1", planSync, false, ""),
			want: broker.ResultCreated,
			then: func(t *testing.T, h *harness, _ broker.ProvisionResult) {
				if mi := h.instance("i-1").MaintenanceInfo; mi == nil || mi.Version != "1.0.0" {
					t.Fatalf("maintenance_info %+v, want the plan's 1.0.0", mi)
				}
			},
		},
	})
}

// TestProvisionAgain: a provision of an id that is taken. The same request
// again gets 200 once done, 202 with the same operation while it runs; a
// different one gets 409 (OSB: "already exists or is being provisioned but
// with different attributes").
func TestProvisionAgain(t *testing.T) {
	provisionRules(t, []rule[broker.ProvisionDetails, broker.ProvisionResult]{
		{
			name:  "the same provision again after it succeeded answers 200 with the instance's dashboard",
			given: func(h *harness) { h.ready("i-1", planSync) },
			req:   provisionOf("i-1", planSync, false, ""),
			want:  broker.ResultOK,
			then: func(t *testing.T, h *harness, res broker.ProvisionResult) {
				if res.DashboardURL != "https://dashboard.example/i-1" {
					t.Fatalf("dashboard %q, want the instance's", res.DashboardURL)
				}
				if n := len(h.ops("i-1")); n != 1 {
					t.Fatalf("%d operations, want the first one only", n)
				}
			},
		},
		{
			name:  "the same provision again while it runs answers 202 with the same operation",
			given: func(h *harness) { h.provisioning("i-1", planAsync, "") },
			req:   provisionOf("i-1", planAsync, true, ""),
			want:  broker.ResultAccepted,
			then: func(t *testing.T, h *harness, res broker.ProvisionResult) {
				ops := h.ops("i-1")
				if len(ops) != 1 || res.Operation != ops[0].ID {
					t.Fatalf("operation %q, stored %v: want the first one's", res.Operation, ops)
				}
			},
		},
		{
			name:  "the same provision again while it runs, without accepts_incomplete, is 422 ConcurrencyError",
			given: func(h *harness) { h.provisioning("i-1", planAsync, "") },
			req:   provisionOf("i-1", planAsync, false, ""),
			code:  broker.CodeConcurrencyError,
		},
		{
			name:  "a different provision of the same id is 409 Conflict and changes nothing",
			given: func(h *harness) { h.ready("i-1", planSync) },
			req:   provisionOf("i-1", planSync, false, `{"size":2}`),
			code:  broker.CodeConflict,
			then: func(t *testing.T, h *harness, _ broker.ProvisionResult) {
				if inst := h.instance("i-1"); inst.Parameters != nil || len(h.ops("i-1")) != 1 {
					t.Fatalf("instance %+v changed", inst)
				}
			},
		},
		{
			name:  "a different provision of an id being provisioned is 409 Conflict",
			given: func(h *harness) { h.givenOp = h.provisioning("i-1", planAsync, "") },
			req:   provisionOf("i-1", planAsync, true, `{"size":2}`),
			code:  broker.CodeConflict,
			then: func(t *testing.T, h *harness, _ broker.ProvisionResult) {
				if op := h.op("i-1", h.givenOp); op.State != broker.OperationInProgress {
					t.Fatalf("the provision in progress is %s", op.State)
				}
			},
		},
		{
			name:  "a provision of another plan under a taken id is 409 Conflict",
			given: func(h *harness) { h.ready("i-1", planSync) },
			req:   provisionOf("i-1", planLarge, false, ""),
			code:  broker.CodeConflict,
		},
		{
			name:  "the same provision again after it failed is 409 Conflict: the platform deprovisions first",
			given: func(h *harness) { h.failedInstance("i-1", planAsync) },
			req:   provisionOf("i-1", planAsync, true, ""),
			code:  broker.CodeConflict,
		},
		{
			name: "the same provision again while the instance is deprovisioned is 422 ConcurrencyError",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				if _, err := h.b.Deprovision(ctx, deprovisionOf("i-1", planAsync, true)); err != nil {
					h.t.Fatal(err)
				}
			},
			req:  provisionOf("i-1", planAsync, true, ""),
			code: broker.CodeConcurrencyError,
		},
		{
			name: "the first provision again after an update changed the parameters is 409 Conflict",
			given: func(h *harness) {
				h.ready("i-1", planSync)
				if _, err := h.b.Update(ctx, updateOf("i-1", "", false, `{"size":3}`)); err != nil {
					h.t.Fatal(err)
				}
			},
			req:  provisionOf("i-1", planSync, false, ""),
			code: broker.CodeConflict,
		},
		{
			name: "a provision stating the attributes an update gave the instance answers 200",
			given: func(h *harness) {
				h.ready("i-1", planSync)
				if _, err := h.b.Update(ctx, updateOf("i-1", "", false, `{"size":3}`)); err != nil {
					h.t.Fatal(err)
				}
			},
			req:  provisionOf("i-1", planSync, false, `{ "size": 3 }`),
			want: broker.ResultOK,
		},
	})
}

// TestProvisionSettledInMemory: a driver whose changes live in its records
// (broker.InMemory) lets a synchronous provision run before any hold, so
// that it is one write; any other driver acts on the world, so its change
// is on record (the hold) before it begins.
func TestProvisionSettledInMemory(t *testing.T) {
	inMemory := func(h *harness) { h.driver.inMemory = true }
	provisionRules(t, []rule[broker.ProvisionDetails, broker.ProvisionResult]{
		{
			name:  "a synchronous provision of an in-memory driver is one write, which stores the instance ready with its records",
			given: inMemory,
			req:   provisionOf("i-1", planSync, false, ""),
			want:  broker.ResultCreated,
			then: func(t *testing.T, h *harness, res broker.ProvisionResult) {
				if w := h.writes.since(); !slices.Equal(w, []string{"CreateInstance"}) {
					t.Fatalf("writes %v, want one CreateInstance", w)
				}
				inst := h.instance("i-1")
				if inst.State != broker.InstanceReady || inst.Op != "" || inst.DashboardURL != res.DashboardURL {
					t.Fatalf("instance %+v, want ready with the driver's dashboard", inst)
				}
				wantState(t, h.op("i-1", inst.LastOp), broker.OperationSucceeded, "")
				wantNames(t, "records", h.recordNames("i-1"), []string{instanceRecord})
			},
		},
		{
			name: "a synchronous provision of an in-memory driver that fails writes nothing",
			given: func(h *harness) {
				inMemory(h)
				h.driver.on("begin", broker.KindProvision, fails("The quota is exhausted."))
			},
			req:  provisionOf("i-1", planSync, false, ""),
			code: broker.CodeUnprocessable,
			then: func(t *testing.T, h *harness, _ broker.ProvisionResult) {
				if w := h.writes.since(); len(w) != 0 {
					t.Fatalf("writes %v, want none", w)
				}
				if inst, ops := h.instance("i-1"), h.ops("i-1"); inst != nil || len(ops) != 0 {
					t.Fatalf("instance %+v, operations %v: want nothing stored", inst, ops)
				}
			},
		},
		{
			name: "an in-memory change that is not done at once takes the hold, then records its progress and its outcome",
			given: func(h *harness) {
				inMemory(h)
				h.driver.on("begin", broker.KindProvision, running("", 0))
			},
			req:  provisionOf("i-1", planSync, false, ""),
			want: broker.ResultCreated,
			then: func(t *testing.T, h *harness, _ broker.ProvisionResult) {
				want := []string{"CreateInstance", "UpdateOperation", "FinishOperation"}
				if w := h.writes.since(); !slices.Equal(w, want) {
					t.Fatalf("writes %v, want %v", w, want)
				}
				wantNames(t, "records", h.recordNames("i-1"), []string{instanceRecord})
			},
		},
		{
			name: "a synchronous provision of a driver that acts on the world takes its hold before the driver begins",
			given: func(h *harness) {
				h.driver.hook = func(step string, c broker.Change) {
					if inst := h.instance(c.Instance.ID); step == "begin" && (inst == nil || inst.State != broker.InstanceProvisioning) {
						h.t.Errorf("the driver began with the instance stored as %+v, want provisioning", inst)
					}
				}
			},
			req:  provisionOf("i-1", planSync, false, ""),
			want: broker.ResultCreated,
			then: func(t *testing.T, h *harness, _ broker.ProvisionResult) {
				if w := h.writes.since(); !slices.Equal(w, []string{"CreateInstance", "FinishOperation"}) {
					t.Fatalf("writes %v, want the hold and the outcome", w)
				}
			},
		},
		{
			name:  "an asynchronous provision of an in-memory driver is not settled in the request: it answers 202",
			given: inMemory,
			req:   provisionOf("i-1", planAsync, true, ""),
			want:  broker.ResultAccepted,
			then: func(t *testing.T, h *harness, _ broker.ProvisionResult) {
				if calls := h.driver.Calls(); len(calls) != 0 {
					t.Fatalf("the request called the driver: %v", calls)
				}
			},
		},
		{
			name: "an in-memory provision racing a provision of the same id that won answers as a re-sent request does",
			given: func(h *harness) {
				inMemory(h)
				raced := false
				h.driver.hook = func(step string, c broker.Change) {
					if step == "begin" && !raced {
						// Another request provisions the same id while this
						// one's change runs in memory.
						raced = true
						if _, err := h.b.Provision(ctx, provisionOf("i-1", planSync, false, "")); err != nil {
							h.t.Errorf("the racing provision: %v", err)
						}
					}
				}
			},
			req:  provisionOf("i-1", planSync, false, ""),
			want: broker.ResultOK,
			then: func(t *testing.T, h *harness, _ broker.ProvisionResult) {
				if n := len(h.ops("i-1")); n != 1 {
					t.Fatalf("%d operations stored, want the winner's only", n)
				}
			},
		},
	})
}

// TestProvisionHaltedWhileItRuns: a deprovision that arrives while a
// synchronous provision's driver works takes the instance over; the
// provision's outcome is then refused, and its request says so.
func TestProvisionHaltedWhileItRuns(t *testing.T) {
	h := newHarness(t)
	var deprovisioned error
	h.driver.hook = func(step string, c broker.Change) {
		if step == "begin" && c.Operation.Kind == broker.KindProvision {
			_, deprovisioned = h.b.Deprovision(ctx, deprovisionOf("i-1", planSync, false))
		}
	}
	_, err := h.b.Provision(ctx, provisionOf("i-1", planSync, false, ""))
	wantCode(t, err, broker.CodeConcurrencyError)
	if deprovisioned != nil {
		t.Fatalf("the deprovision during the provision: %v", deprovisioned)
	}
	if inst := h.instance("i-1"); inst != nil {
		t.Fatalf("instance %+v left behind", inst)
	}
	ops := h.ops("i-1")
	if len(ops) != 2 {
		t.Fatalf("operations %+v, want the provision and the deprovision", ops)
	}
	wantState(t, ops[0], broker.OperationFailed, "halted")
	wantState(t, ops[1], broker.OperationSucceeded, "deprovisioned")
	// The halted provision ran in a request, with no execution; Stop is
	// asked all the same (stopping a missing execution is not an error).
	if got := h.engine.Stopped(); !slices.Equal(got, []string{ops[0].ID}) {
		t.Fatalf("stopped %v, want the provision's execution %s", got, ops[0].ID)
	}
}
