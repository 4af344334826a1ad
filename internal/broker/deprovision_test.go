package broker_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// deprovisionRules runs rules of DELETE /v2/service_instances/:instance_id.
func deprovisionRules(t *testing.T, rules []rule[broker.DeprovisionDetails, broker.DeprovisionResult]) {
	t.Helper()
	runRules(t, func(h *harness, d broker.DeprovisionDetails) (broker.DeprovisionResult, error) {
		return h.b.Deprovision(ctx, d)
	},
		func(r broker.DeprovisionResult) broker.Result { return r.Result }, rules)
}

func TestDeprovision(t *testing.T) {
	deprovisionRules(t, []rule[broker.DeprovisionDetails, broker.DeprovisionResult]{
		{
			name: "a synchronous deprovision answers 200 and deletes the instance, its bindings and its records in two writes; its operation succeeded",
			given: func(h *harness) {
				h.ready("i-1", planSync)
				h.bound("i-1", "b-1", planSync)
			},
			req:  deprovisionOf("i-1", planSync, false),
			want: broker.ResultOK,
			then: func(t *testing.T, h *harness, _ broker.DeprovisionResult) {
				snap := h.loadWhole("i-1")
				if snap.Instance != nil || h.binding("i-1", "b-1") != nil || len(snap.BindingIDs) != 0 || len(snap.Records) != 0 {
					t.Fatalf("left behind: %+v", snap)
				}
				op := h.lastOp("i-1")
				wantState(t, op, broker.OperationSucceeded, "deprovisioned")
				if op.Kind != broker.KindDeprovision {
					t.Fatalf("newest operation %+v, want the deprovision", op)
				}
				if w := h.writes.since(); !slices.Equal(w, []string{"LockInstance", "FinishOperation"}) {
					t.Fatalf("writes %v, want the hold and the outcome", w)
				}
			},
		},
		{
			name: "a deprovision of an instance the broker never had is 410 Gone and changes nothing",
			req:  deprovisionOf("i-1", planSync, false),
			code: broker.CodeGone,
			then: func(t *testing.T, h *harness, _ broker.DeprovisionResult) {
				if w, ops := h.writes.since(), h.ops("i-1"); len(w) != 0 || len(ops) != 0 {
					t.Fatalf("writes %v, operations %v: want none", w, ops)
				}
			},
		},
		{
			name:  "an asynchronous deprovision answers 202 and its Tasks delete the instance",
			given: func(h *harness) { h.ready("i-1", planAsync) },
			req:   deprovisionOf("i-1", planAsync, true),
			want:  broker.ResultAccepted,
			then: func(t *testing.T, h *harness, res broker.DeprovisionResult) {
				if inst := h.instance("i-1"); inst.State != broker.InstanceDeprovisioning || inst.Op != res.Operation {
					t.Fatalf("instance %+v, want deprovisioning, held by %s", inst, res.Operation)
				}
				wantNames(t, "executions", h.engine.startsOf(broker.WorkflowOperation), []string{res.Operation})
				h.task("i-1", res.Operation)
				if inst := h.instance("i-1"); inst != nil {
					t.Fatalf("instance %+v left behind", inst)
				}
				wantNames(t, "records", h.recordNames("i-1"), nil)
			},
		},
		{
			name: "a deprovision during an asynchronous provision halts the provision (its operation failed, its execution stopped) and deletes the instance",
			given: func(h *harness) {
				h.driver.on("begin", broker.KindProvision, running("Creating.", time.Minute))
				h.givenOp = h.provisioning("i-1", planAsync, "")
				h.mustBegin("i-1", h.givenOp)
			},
			req:  deprovisionOf("i-1", planAsync, true),
			want: broker.ResultAccepted,
			then: func(t *testing.T, h *harness, res broker.DeprovisionResult) {
				provision := h.op("i-1", h.givenOp)
				wantState(t, provision, broker.OperationFailed, "halted")
				if got := h.engine.Stopped(); !slices.Equal(got, []string{h.givenOp}) {
					t.Fatalf("stopped %v, want the provision's execution", got)
				}
				if inst := h.instance("i-1"); inst.State != broker.InstanceDeprovisioning || inst.Op != res.Operation {
					t.Fatalf("instance %+v, want deprovisioning, held by %s", inst, res.Operation)
				}
				// The halted provision's Check, had its execution gone on,
				// finds nothing to do.
				before := h.snapshotJSON("i-1")
				if p, err := h.b.CheckTask(ctx, broker.OperationTask{InstanceID: "i-1", OperationID: h.givenOp}); err != nil || !p.Done {
					t.Fatalf("check of the halted provision: %+v %v, want done", p, err)
				}
				if after := h.snapshotJSON("i-1"); after != before {
					t.Fatalf("the halted provision's check changed\n%s\nto\n%s", before, after)
				}
				h.task("i-1", res.Operation)
				if inst := h.instance("i-1"); inst != nil {
					t.Fatalf("instance %+v left behind", inst)
				}
				wantNames(t, "records (what the provision made)", h.recordNames("i-1"), nil)
			},
		},
		{
			name: "a synchronous deprovision during an asynchronous provision deletes the instance at once",
			given: func(h *harness) {
				h.givenOp = h.provisioning("i-1", planAsync, "")
			},
			req:  deprovisionOf("i-1", planAsync, false),
			want: broker.ResultOK,
			then: func(t *testing.T, h *harness, _ broker.DeprovisionResult) {
				wantState(t, h.op("i-1", h.givenOp), broker.OperationFailed, "halted")
				if inst := h.instance("i-1"); inst != nil {
					t.Fatalf("instance %+v left behind", inst)
				}
			},
		},
		{
			name: "a deprovision that fails answers 422 and leaves the instance in place, failed and not usable, its resource still attached",
			given: func(h *harness) {
				h.ready("i-1", planSync)
				h.driver.on("begin", broker.KindDeprovision, fails("The database refuses to be deleted."))
			},
			req:  deprovisionOf("i-1", planSync, false),
			code: broker.CodeUnprocessable,
			then: func(t *testing.T, h *harness, _ broker.DeprovisionResult) {
				inst := h.instance("i-1")
				if inst == nil || inst.State != broker.InstanceFailed || inst.Op != "" {
					t.Fatalf("instance %+v, want failed and idle", inst)
				}
				op := h.op("i-1", inst.LastOp)
				wantState(t, op, broker.OperationFailed, "refuses to be deleted")
				if op.InstanceUsable == nil || *op.InstanceUsable || op.UpdateRepeatable != nil {
					t.Fatalf("instance_usable %v, update_repeatable %v: want false and unset", op.InstanceUsable, op.UpdateRepeatable)
				}
				wantNames(t, "records", h.recordNames("i-1"), []string{instanceRecord})
				if d := h.detachedNames(); len(d) != 0 {
					t.Fatalf("detached %v: a deprovision's resource stays attached", d)
				}
			},
		},
		{
			name: "a failed deprovision may be tried again, and the retry deletes the instance",
			given: func(h *harness) {
				h.ready("i-1", planSync)
				h.driver.on("begin", broker.KindDeprovision, fails("The database refuses to be deleted."), done())
				if _, err := h.b.Deprovision(ctx, deprovisionOf("i-1", planSync, false)); broker.ErrorCode(err) != broker.CodeUnprocessable {
					h.t.Fatalf("the first deprovision: %v", err)
				}
			},
			req:  deprovisionOf("i-1", planSync, false),
			want: broker.ResultOK,
			then: func(t *testing.T, h *harness, _ broker.DeprovisionResult) {
				if inst := h.instance("i-1"); inst != nil {
					t.Fatalf("instance %+v left behind", inst)
				}
			},
		},
		{
			name: "a deprovision retried after a failed deprovision runs as its plan says (202): the resource is still there to delete",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				h.driver.on("begin", broker.KindDeprovision, fails("The database refuses to be deleted."), running("Deleting.", time.Minute))
				res, err := h.b.Deprovision(ctx, deprovisionOf("i-1", planAsync, true))
				if err != nil {
					h.t.Fatal(err)
				}
				h.failTask("i-1", res.Operation, "begin")
			},
			req:  deprovisionOf("i-1", planAsync, true),
			want: broker.ResultAccepted,
			then: func(t *testing.T, h *harness, res broker.DeprovisionResult) {
				if n := h.driver.count("begin", broker.KindDeprovision); n != 1 {
					t.Fatalf("the request called the driver's Begin: %d begins, want the first deprovision's only", n)
				}
				h.task("i-1", res.Operation)
				if inst := h.instance("i-1"); inst != nil {
					t.Fatalf("instance %+v left behind", inst)
				}
			},
		},
		{
			name: "a deprovision retried after a failed deprovision on an async-only plan, without accepts_incomplete, is 422 AsyncRequired",
			given: func(h *harness) {
				h.ready("i-1", planAsyncOnly)
				h.driver.on("begin", broker.KindDeprovision, fails("The database refuses to be deleted."))
				res, err := h.b.Deprovision(ctx, deprovisionOf("i-1", planAsyncOnly, true))
				if err != nil {
					h.t.Fatal(err)
				}
				h.failTask("i-1", res.Operation, "begin")
			},
			req:  deprovisionOf("i-1", planAsyncOnly, false),
			code: broker.CodeAsyncRequired,
		},
		{
			name:  "a deprovision of an instance whose provision failed deletes it at once, even when the platform accepts incomplete",
			given: func(h *harness) { h.failedInstance("i-1", planAsync) },
			req:   deprovisionOf("i-1", planAsync, true),
			want:  broker.ResultOK,
			then: func(t *testing.T, h *harness, _ broker.DeprovisionResult) {
				if inst := h.instance("i-1"); inst != nil {
					t.Fatalf("instance %+v left behind", inst)
				}
			},
		},
		{
			name: "the same deprovision again while it runs answers 202 with the same operation",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				res, err := h.b.Deprovision(ctx, deprovisionOf("i-1", planAsync, true))
				if err != nil {
					h.t.Fatal(err)
				}
				h.givenOp = res.Operation
			},
			req:  deprovisionOf("i-1", planAsync, true),
			want: broker.ResultAccepted,
			then: func(t *testing.T, h *harness, res broker.DeprovisionResult) {
				if res.Operation != h.givenOp {
					t.Fatalf("operation %q, want the first one's %q", res.Operation, h.givenOp)
				}
			},
		},
		{
			name: "a deprovision while one runs, without accepts_incomplete, is 422 ConcurrencyError",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				if _, err := h.b.Deprovision(ctx, deprovisionOf("i-1", planAsync, true)); err != nil {
					h.t.Fatal(err)
				}
			},
			req:  deprovisionOf("i-1", planAsync, false),
			code: broker.CodeConcurrencyError,
		},
		{
			name: "a deprovision while an update holds the instance is 422 ConcurrencyError",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				h.updating("i-1", `{"size":2}`)
			},
			req:  deprovisionOf("i-1", planAsync, true),
			code: broker.CodeConcurrencyError,
		},
		{
			name: "a deprovision while a binding operation is in progress is 422 ConcurrencyError",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				h.bindingAsync("i-1", "b-1", planAsync)
			},
			req:  deprovisionOf("i-1", planAsync, true),
			code: broker.CodeConcurrencyError,
			then: func(t *testing.T, h *harness, _ broker.DeprovisionResult) {
				if inst := h.instance("i-1"); inst.State != broker.InstanceReady || inst.BindingOps != 1 {
					t.Fatalf("instance %+v changed", inst)
				}
			},
		},
		{
			name:  "a deprovision on a detach plan answers 200 at once, hands the instance's records to the cleanup and asks the driver nothing",
			given: func(h *harness) { h.ready("i-1", planDetach) },
			req:   deprovisionOf("i-1", planDetach, true),
			want:  broker.ResultOK,
			then: func(t *testing.T, h *harness, _ broker.DeprovisionResult) {
				if inst := h.instance("i-1"); inst != nil {
					t.Fatalf("instance %+v left behind", inst)
				}
				if n := h.driver.count("begin", broker.KindDeprovision); n != 0 {
					t.Fatalf("the driver was asked to deprovision %d times", n)
				}
				wantNames(t, "detached", h.detachedNames(), []string{"i-1/" + instanceRecord})
				ds, _ := h.store.ListDetached(ctx)
				if !strings.Contains(ds[0].Reason, "deprovisioned") || ds[0].PlanID != planDetach {
					t.Fatalf("detached %+v, want the deprovision's reason and the plan's driver", ds[0])
				}
				wantNames(t, "cleanups", h.engine.startsOf(broker.WorkflowCleanup), []string{ds[0].CleanupName(1)})
			},
		},
		{
			name:  "a deprovision on an async-only plan without accepts_incomplete is 422 AsyncRequired",
			given: func(h *harness) { h.ready("i-1", planAsyncOnly) },
			req:   deprovisionOf("i-1", planAsyncOnly, false),
			code:  broker.CodeAsyncRequired,
		},
		{
			name:  "a deprovision naming a plan the catalog does not have is 400 BadRequest",
			given: func(h *harness) { h.ready("i-1", planSync) },
			req:   deprovisionOf("i-1", "no-such-plan", false),
			code:  broker.CodeBadRequest,
		},
	})
}
