package broker_test

import (
	"slices"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// unbindRules runs rules of
// DELETE /v2/service_instances/:instance_id/service_bindings/:binding_id.
func unbindRules(t *testing.T, rules []rule[broker.UnbindDetails, broker.UnbindResult]) {
	t.Helper()
	runRules(t, func(h *harness, d broker.UnbindDetails) (broker.UnbindResult, error) { return h.b.Unbind(ctx, d) },
		func(r broker.UnbindResult) broker.Result { return r.Result }, rules)
}

func TestUnbind(t *testing.T) {
	boundSync := func(h *harness) {
		h.ready("i-1", planSync)
		h.bound("i-1", "b-1", planSync)
	}
	boundAsync := func(h *harness) {
		h.ready("i-1", planAsync)
		h.task("i-1", h.bindingAsync("i-1", "b-1", planAsync))
	}
	unbindRules(t, []rule[broker.UnbindDetails, broker.UnbindResult]{
		{
			name:  "a synchronous unbind answers 200 and deletes the binding and its record in two writes; its operation succeeded",
			given: boundSync,
			req:   unbindOf("i-1", "b-1", planSync, false),
			want:  broker.ResultOK,
			then: func(t *testing.T, h *harness, _ broker.UnbindResult) {
				if bd := h.binding("i-1", "b-1"); bd != nil {
					t.Fatalf("binding %+v left behind", bd)
				}
				wantNames(t, "records", h.recordNames("i-1"), []string{instanceRecord})
				op := h.lastOp("i-1")
				wantState(t, op, broker.OperationSucceeded, "deleted")
				if op.Kind != broker.KindUnbind || op.BindingID != "b-1" {
					t.Fatalf("newest operation %+v, want the unbind of b-1", op)
				}
				if inst := h.instance("i-1"); inst.BindingOps != 0 || inst.State != broker.InstanceReady {
					t.Fatalf("instance %+v, want ready and free", inst)
				}
				if w := h.writes.since(); !slices.Equal(w, []string{"LockBinding", "FinishOperation"}) {
					t.Fatalf("writes %v, want the hold and the outcome", w)
				}
			},
		},
		{
			name:  "an unbind of a binding the broker never had is 410 Gone and changes nothing",
			given: func(h *harness) { h.ready("i-1", planSync) },
			req:   unbindOf("i-1", "b-1", planSync, false),
			code:  broker.CodeGone,
			then: func(t *testing.T, h *harness, _ broker.UnbindResult) {
				if w := h.writes.since(); len(w) != 0 {
					t.Fatalf("writes %v, want none", w)
				}
			},
		},
		{
			name: "an unbind of a binding of an instance the broker never had is 410 Gone",
			req:  unbindOf("i-1", "b-1", planSync, false),
			code: broker.CodeGone,
		},
		{
			name:  "an asynchronous unbind answers 202 and its Tasks delete the binding",
			given: boundAsync,
			req:   unbindOf("i-1", "b-1", planAsync, true),
			want:  broker.ResultAccepted,
			then: func(t *testing.T, h *harness, res broker.UnbindResult) {
				if bd := h.binding("i-1", "b-1"); bd.State != broker.BindingDeleting || bd.Op != res.Operation {
					t.Fatalf("binding %+v, want deleting, held by %s", bd, res.Operation)
				}
				if inst := h.instance("i-1"); inst.BindingOps != 1 {
					t.Fatalf("instance counts %d binding operations, want 1", inst.BindingOps)
				}
				h.task("i-1", res.Operation)
				if bd := h.binding("i-1", "b-1"); bd != nil {
					t.Fatalf("binding %+v left behind", bd)
				}
				if inst := h.instance("i-1"); inst.BindingOps != 0 {
					t.Fatalf("instance counts %d binding operations, want 0", inst.BindingOps)
				}
			},
		},
		{
			name: "an unbind during a bind halts the bind (its operation failed, its execution stopped) and deletes the binding",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				h.driver.on("begin", broker.KindBind, running("", time.Minute))
				h.givenOp = h.bindingAsync("i-1", "b-1", planAsync)
				h.mustBegin("i-1", h.givenOp)
			},
			req:  unbindOf("i-1", "b-1", planAsync, true),
			want: broker.ResultAccepted,
			then: func(t *testing.T, h *harness, res broker.UnbindResult) {
				wantState(t, h.op("i-1", h.givenOp), broker.OperationFailed, "halted")
				if got := h.engine.Stopped(); !slices.Equal(got, []string{h.givenOp}) {
					t.Fatalf("stopped %v, want the bind's execution", got)
				}
				// The unbind took the bind's place: still one binding
				// operation counted.
				if inst := h.instance("i-1"); inst.BindingOps != 1 {
					t.Fatalf("instance counts %d binding operations, want 1", inst.BindingOps)
				}
				h.task("i-1", res.Operation)
				if bd := h.binding("i-1", "b-1"); bd != nil {
					t.Fatalf("binding %+v left behind", bd)
				}
				wantNames(t, "records (what the bind made)", h.recordNames("i-1"), []string{instanceRecord})
				if inst := h.instance("i-1"); inst.BindingOps != 0 {
					t.Fatalf("instance counts %d binding operations, want 0", inst.BindingOps)
				}
			},
		},
		{
			name: "an unbind that fails answers 422 and leaves the binding ready with its credentials",
			given: func(h *harness) {
				boundSync(h)
				h.driver.on("begin", broker.KindUnbind, fails("The user could not be dropped."))
			},
			req:  unbindOf("i-1", "b-1", planSync, false),
			code: broker.CodeUnprocessable,
			then: func(t *testing.T, h *harness, _ broker.UnbindResult) {
				bd := h.binding("i-1", "b-1")
				if bd == nil || bd.State != broker.BindingReady || bd.Op != "" || bd.Credentials == nil {
					t.Fatalf("binding %+v, want ready and idle with its credentials", bd)
				}
				wantState(t, h.op("i-1", bd.LastOp), broker.OperationFailed, "could not be dropped")
				wantNames(t, "records", h.recordNames("i-1"), []string{instanceRecord, broker.BindingRecord("b-1")})
				if inst := h.instance("i-1"); inst.BindingOps != 0 {
					t.Fatalf("instance counts %d binding operations, want 0", inst.BindingOps)
				}
			},
		},
		{
			name: "an asynchronous unbind that fails leaves the binding ready",
			given: func(h *harness) {
				boundAsync(h)
				h.driver.on("begin", broker.KindUnbind, fails("The user could not be dropped."))
			},
			req:  unbindOf("i-1", "b-1", planAsync, true),
			want: broker.ResultAccepted,
			then: func(t *testing.T, h *harness, res broker.UnbindResult) {
				h.failTask("i-1", res.Operation, "begin")
				if bd := h.binding("i-1", "b-1"); bd.State != broker.BindingReady || bd.Op != "" {
					t.Fatalf("binding %+v, want ready and idle", bd)
				}
				if d := h.detachedNames(); len(d) != 0 {
					t.Fatalf("detached %v: an unbind's resource stays attached", d)
				}
			},
		},
		{
			name: "the same unbind again while it runs answers 202 with the same operation",
			given: func(h *harness) {
				boundAsync(h)
				res, err := h.b.Unbind(ctx, unbindOf("i-1", "b-1", planAsync, true))
				if err != nil {
					h.t.Fatal(err)
				}
				h.givenOp = res.Operation
			},
			req:  unbindOf("i-1", "b-1", planAsync, true),
			want: broker.ResultAccepted,
			then: func(t *testing.T, h *harness, res broker.UnbindResult) {
				if res.Operation != h.givenOp {
					t.Fatalf("operation %q, want the first one's %q", res.Operation, h.givenOp)
				}
			},
		},
		{
			name: "an unbind while one runs, without accepts_incomplete, is 422 ConcurrencyError",
			given: func(h *harness) {
				boundAsync(h)
				if _, err := h.b.Unbind(ctx, unbindOf("i-1", "b-1", planAsync, true)); err != nil {
					h.t.Fatal(err)
				}
			},
			req:  unbindOf("i-1", "b-1", planAsync, false),
			code: broker.CodeConcurrencyError,
		},
		{
			name: "an unbind while the instance is being updated is 422 ConcurrencyError",
			given: func(h *harness) {
				boundAsync(h)
				h.updating("i-1", `{"size":2}`)
			},
			req:  unbindOf("i-1", "b-1", planAsync, true),
			code: broker.CodeConcurrencyError,
			then: func(t *testing.T, h *harness, _ broker.UnbindResult) {
				if bd := h.binding("i-1", "b-1"); bd.State != broker.BindingReady {
					t.Fatalf("binding %+v changed", bd)
				}
			},
		},
		{
			name: "an unbind of a failed binding is done at once, even when the platform accepts incomplete",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				h.failedBinding("i-1", "b-1", planAsync)
			},
			req:  unbindOf("i-1", "b-1", planAsync, true),
			want: broker.ResultOK,
			then: func(t *testing.T, h *harness, _ broker.UnbindResult) {
				if bd := h.binding("i-1", "b-1"); bd != nil {
					t.Fatalf("binding %+v left behind", bd)
				}
			},
		},
		{
			name: "an unbind on an async-only plan without accepts_incomplete is 422 AsyncRequired",
			given: func(h *harness) {
				h.ready("i-1", planAsyncOnly)
				h.task("i-1", h.bindingAsync("i-1", "b-1", planAsyncOnly))
			},
			req:  unbindOf("i-1", "b-1", planAsyncOnly, false),
			code: broker.CodeAsyncRequired,
		},
	})
}
