package broker_test

import (
	"slices"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// updateRules runs rules of PATCH /v2/service_instances/:instance_id.
func updateRules(t *testing.T, rules []rule[broker.UpdateDetails, broker.UpdateResult]) {
	t.Helper()
	runRules(t, func(h *harness, d broker.UpdateDetails) (broker.UpdateResult, error) { return h.b.Update(ctx, d) },
		func(r broker.UpdateResult) broker.Result { return r.Result }, rules)
}

func TestUpdate(t *testing.T) {
	updateRules(t, []rule[broker.UpdateDetails, broker.UpdateResult]{
		{
			name:  "a synchronous update that succeeds answers 200 and leaves the instance ready with the new parameters and its operation succeeded",
			given: func(h *harness) { h.readyWith("i-1", planSync, `{"size":1}`) },
			req:   updateOf("i-1", "", false, `{"size":2}`),
			want:  broker.ResultOK,
			then: func(t *testing.T, h *harness, _ broker.UpdateResult) {
				inst := h.instance("i-1")
				if inst.State != broker.InstanceReady || inst.Op != "" || string(inst.Parameters) != `{"size":2}` {
					t.Fatalf("instance %+v, want ready, idle, with the new parameters", inst)
				}
				op := h.op("i-1", inst.LastOp)
				wantState(t, op, broker.OperationSucceeded, "updated")
				if op.Kind != broker.KindUpdate || op.Async {
					t.Fatalf("operation %+v, want a synchronous update", op)
				}
			},
		},
		{
			name: "a synchronous update is two writes: the hold, taken before the driver begins, and the outcome",
			given: func(h *harness) {
				h.ready("i-1", planSync)
				h.driver.hook = func(step string, c broker.Change) {
					if inst := h.instance("i-1"); step == "begin" && inst.State != broker.InstanceUpdating {
						h.t.Errorf("the driver began with the instance %s, want updating", inst.State)
					}
				}
			},
			req:  updateOf("i-1", "", false, `{"size":2}`),
			want: broker.ResultOK,
			then: func(t *testing.T, h *harness, _ broker.UpdateResult) {
				if w := h.writes.since(); !slices.Equal(w, []string{"LockInstance", "FinishOperation"}) {
					t.Fatalf("writes %v, want the hold and the outcome", w)
				}
			},
		},
		{
			name:  "an update to another plan moves the instance and its maintenance_info to the plan's; its operation keeps the plan it started on",
			given: func(h *harness) { h.ready("i-1", planSync) },
			req:   updateOf("i-1", planLarge, false, ""),
			want:  broker.ResultOK,
			then: func(t *testing.T, h *harness, _ broker.UpdateResult) {
				inst := h.instance("i-1")
				if inst.PlanID != planLarge || inst.MaintenanceInfo == nil || inst.MaintenanceInfo.Version != "2.0.0" {
					t.Fatalf("instance on %s with %+v, want %s with its maintenance_info 2.0.0", inst.PlanID, inst.MaintenanceInfo, planLarge)
				}
				// last_operation after a plan change is polled with the
				// plan before the update (OSB).
				if op := h.op("i-1", inst.LastOp); op.PlanID != planSync {
					t.Fatalf("operation's plan %s, want the one it started on, %s", op.PlanID, planSync)
				}
			},
		},
		{
			name: "an update that fails answers 422 and leaves the instance ready on its old plan and parameters, usable and the update repeatable",
			given: func(h *harness) {
				h.readyWith("i-1", planSync, `{"size":1}`)
				h.driver.on("begin", broker.KindUpdate, fails("The larger size is not available."))
			},
			req:  updateOf("i-1", planLarge, false, `{"size":2}`),
			code: broker.CodeUnprocessable,
			then: func(t *testing.T, h *harness, _ broker.UpdateResult) {
				inst := h.instance("i-1")
				if inst.State != broker.InstanceReady || inst.Op != "" || inst.PlanID != planSync || string(inst.Parameters) != `{"size":1}` {
					t.Fatalf("instance %+v, want ready and idle on %s with its old parameters", inst, planSync)
				}
				op := h.op("i-1", inst.LastOp)
				wantState(t, op, broker.OperationFailed, "The larger size is not available.")
				if op.InstanceUsable == nil || !*op.InstanceUsable || op.UpdateRepeatable == nil || !*op.UpdateRepeatable {
					t.Fatalf("instance_usable %v, update_repeatable %v: want both true", op.InstanceUsable, op.UpdateRepeatable)
				}
				wantNames(t, "records", h.recordNames("i-1"), []string{instanceRecord})
			},
		},
		{
			name: "an asynchronous update that fails detaches its partial change and keeps the instance's own resource",
			given: func(h *harness) {
				h.readyWith("i-1", planAsync, `{"size":1}`)
				h.driver.on("begin", broker.KindUpdate, running("Resizing.", time.Second))
				h.driver.on("check", broker.KindUpdate, fails("The resize failed."))
			},
			req:  updateOf("i-1", "", true, `{"size":2}`),
			want: broker.ResultAccepted,
			then: func(t *testing.T, h *harness, res broker.UpdateResult) {
				h.mustBegin("i-1", res.Operation)
				wantNames(t, "records while the update runs", h.recordNames("i-1"), []string{instanceRecord, updateRecord})
				h.failTask("i-1", res.Operation, "check")
				inst := h.instance("i-1")
				if inst.State != broker.InstanceReady || inst.Op != "" || string(inst.Parameters) != `{"size":1}` {
					t.Fatalf("instance %+v, want ready and idle with its old parameters", inst)
				}
				wantState(t, h.op("i-1", res.Operation), broker.OperationFailed, "The resize failed.")
				wantNames(t, "records", h.recordNames("i-1"), []string{instanceRecord})
				wantNames(t, "detached", h.detachedNames(), []string{"i-1/" + updateRecord})
			},
		},
		{
			name:  "an asynchronous update answers 202, holds the instance, and its Tasks apply the new parameters",
			given: func(h *harness) { h.readyWith("i-1", planAsync, `{"size":1}`) },
			req:   updateOf("i-1", "", true, `{"size":2}`),
			want:  broker.ResultAccepted,
			then: func(t *testing.T, h *harness, res broker.UpdateResult) {
				if inst := h.instance("i-1"); inst.State != broker.InstanceUpdating || inst.Op != res.Operation || string(inst.Parameters) != `{"size":1}` {
					t.Fatalf("instance %+v, want updating with its old parameters, held by %s", inst, res.Operation)
				}
				wantNames(t, "executions", h.engine.startsOf(broker.WorkflowOperation), []string{res.Operation})
				h.task("i-1", res.Operation)
				if inst := h.instance("i-1"); inst.State != broker.InstanceReady || string(inst.Parameters) != `{"size":2}` {
					t.Fatalf("instance %+v, want ready with the new parameters", inst)
				}
			},
		},
		{
			name:  "an update runs as the plan it asks for says: to a sync plan, within the request",
			given: func(h *harness) { h.ready("i-1", planAsync) },
			req:   updateOf("i-1", planLarge, true, ""),
			want:  broker.ResultOK,
			then: func(t *testing.T, h *harness, _ broker.UpdateResult) {
				if inst := h.instance("i-1"); inst.State != broker.InstanceReady || inst.PlanID != planLarge {
					t.Fatalf("instance %+v, want ready on %s", inst, planLarge)
				}
			},
		},
		{
			name:  "an update that changes nothing answers 200 without an operation or a write",
			given: func(h *harness) { h.readyWith("i-1", planSync, `{"size":1}`) },
			req:   updateOf("i-1", planSync, false, `{ "size": 1 }`),
			want:  broker.ResultOK,
			then: func(t *testing.T, h *harness, _ broker.UpdateResult) {
				if w, ops := h.writes.since(), h.ops("i-1"); len(w) != 0 || len(ops) != 1 {
					t.Fatalf("writes %v, operations %d: want none, and the provision's only", w, len(ops))
				}
			},
		},
		{
			name: "an update while another operation holds the instance is 422 ConcurrencyError",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				h.givenOp = h.updating("i-1", `{"size":1}`)
			},
			req:  updateOf("i-1", "", true, `{"size":2}`),
			code: broker.CodeConcurrencyError,
			then: func(t *testing.T, h *harness, _ broker.UpdateResult) {
				if inst := h.instance("i-1"); inst.Op != h.givenOp {
					t.Fatalf("instance held by %q, want still %q", inst.Op, h.givenOp)
				}
			},
		},
		{
			name: "the same update re-sent while it runs answers 202 with the same operation",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				h.givenOp = h.updating("i-1", `{"size":1}`)
			},
			req:  updateOf("i-1", "", true, `{"size":1}`),
			want: broker.ResultAccepted,
			then: func(t *testing.T, h *harness, res broker.UpdateResult) {
				if res.Operation != h.givenOp {
					t.Fatalf("operation %q, want the first one's %q", res.Operation, h.givenOp)
				}
			},
		},
		{
			name: "the same update re-sent while it runs, without accepts_incomplete, is 422 ConcurrencyError",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				h.updating("i-1", `{"size":1}`)
			},
			req:  updateOf("i-1", "", false, `{"size":1}`),
			code: broker.CodeConcurrencyError,
		},
		{
			name: "an update while a binding operation is in progress is 422 ConcurrencyError",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				h.bindingAsync("i-1", "b-1", planAsync)
			},
			req:  updateOf("i-1", "", true, `{"size":2}`),
			code: broker.CodeConcurrencyError,
		},
		{
			name:  "an update while the instance is being provisioned is 422 ConcurrencyError",
			given: func(h *harness) { h.provisioning("i-1", planAsync, "") },
			req:   updateOf("i-1", "", true, `{"size":2}`),
			code:  broker.CodeConcurrencyError,
		},
		{
			name: "an update while the instance is being deprovisioned is 422 ConcurrencyError",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				if _, err := h.b.Deprovision(ctx, deprovisionOf("i-1", planAsync, true)); err != nil {
					h.t.Fatal(err)
				}
			},
			req:  updateOf("i-1", "", true, `{"size":2}`),
			code: broker.CodeConcurrencyError,
		},
		{
			name:  "an update of a failed instance is 422: only a deprovision may follow",
			given: func(h *harness) { h.failedInstance("i-1", planAsync) },
			req:   updateOf("i-1", "", true, `{"size":2}`),
			code:  broker.CodeUnprocessable,
			then: func(t *testing.T, h *harness, _ broker.UpdateResult) {
				if inst := h.instance("i-1"); inst.State != broker.InstanceFailed || len(h.ops("i-1")) != 1 {
					t.Fatalf("instance %+v changed", inst)
				}
			},
		},
		{
			name: "an update of an instance that does not exist is 404 NotFound",
			req:  updateOf("i-1", "", false, `{"size":2}`),
			code: broker.CodeNotFound,
		},
		{
			name:  "an update naming another offering than the instance's is 400 BadRequest",
			given: func(h *harness) { h.ready("i-1", planSync) },
			req: func() broker.UpdateDetails {
				d := updateOf("i-1", "", false, `{"size":2}`)
				d.ServiceID = otherService
				return d
			}(),
			code: broker.CodeBadRequest,
		},
		{
			name:  "a plan change from a plan that is not plan_updateable is 422",
			given: func(h *harness) { h.ready("i-1", planFixed) },
			req:   updateOf("i-1", planSync, false, ""),
			code:  broker.CodeUnprocessable,
			then: func(t *testing.T, h *harness, _ broker.UpdateResult) {
				if inst := h.instance("i-1"); inst.PlanID != planFixed {
					t.Fatalf("instance moved to %s", inst.PlanID)
				}
			},
		},
		{
			name:  "the parameters of an instance whose plan is not plan_updateable may still change",
			given: func(h *harness) { h.ready("i-1", planFixed) },
			req:   updateOf("i-1", "", false, `{"tier":"gold"}`),
			want:  broker.ResultOK,
		},
		{
			name:  "an update to a plan the catalog does not have is 400 BadRequest",
			given: func(h *harness) { h.ready("i-1", planSync) },
			req:   updateOf("i-1", "no-such-plan", false, ""),
			code:  broker.CodeBadRequest,
		},
		{
			name:  "an update on an async-only plan without accepts_incomplete is 422 AsyncRequired",
			given: func(h *harness) { h.ready("i-1", planAsyncOnly) },
			req:   updateOf("i-1", "", false, `{"size":2}`),
			code:  broker.CodeAsyncRequired,
		},
		{
			name:  "an update with a maintenance_info version other than the plan's is 422 MaintenanceInfoConflict",
			given: func(h *harness) { h.ready("i-1", planSync) },
			req: func() broker.UpdateDetails {
				d := updateOf("i-1", "", false, "")
				d.MaintenanceInfo = &broker.MaintenanceInfo{Version: "3.0.0"}
				return d
			}(),
			code: broker.CodeMaintenanceInfoConflict,
		},
		{
			name:  "parameters the plan's update schema refuses are 400 BadRequest",
			given: func(h *harness) { h.ready("i-1", planSync) },
			req:   updateOf("i-1", "", false, `{"size":"large"}`),
			code:  broker.CodeBadRequest,
		},
	})
}
