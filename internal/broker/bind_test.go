package broker_test

import (
	"slices"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// bindRules runs rules of
// PUT /v2/service_instances/:instance_id/service_bindings/:binding_id.
func bindRules(t *testing.T, rules []rule[broker.BindDetails, broker.BindResult]) {
	t.Helper()
	runRules(t, func(h *harness, d broker.BindDetails) (broker.BindResult, error) { return h.b.Bind(ctx, d) },
		func(r broker.BindResult) broker.Result { return r.Result }, rules)
}

func TestBind(t *testing.T) {
	bindRules(t, []rule[broker.BindDetails, broker.BindResult]{
		{
			name: "a synchronous bind answers 201 with the driver's credentials and leaves the binding ready and the instance free",
			given: func(h *harness) {
				h.ready("i-1", planSync)
				h.givenOp = h.instance("i-1").LastOp
			},
			req:  bindOf("i-1", "b-1", planSync, false, ""),
			want: broker.ResultCreated,
			then: func(t *testing.T, h *harness, res broker.BindResult) {
				if res.Credentials["username"] != "u-b-1" {
					t.Fatalf("credentials %v, want the driver's", res.Credentials)
				}
				bd := h.binding("i-1", "b-1")
				if bd.State != broker.BindingReady || bd.Op != "" || bd.Credentials["username"] != "u-b-1" {
					t.Fatalf("binding %+v, want ready and idle with its credentials", bd)
				}
				wantState(t, h.op("i-1", bd.LastOp), broker.OperationSucceeded, "created")
				inst := h.instance("i-1")
				if inst.BindingOps != 0 || inst.Op != "" || inst.LastOp != h.givenOp {
					t.Fatalf("instance %+v, want free, its last operation still the provision", inst)
				}
				wantNames(t, "records", h.recordNames("i-1"), []string{instanceRecord, broker.BindingRecord("b-1")})
			},
		},
		{
			name:  "a bind's credentials expire after the plan's credential_lifetime and are to be renewed a fifth of it earlier",
			given: func(h *harness) { h.ready("i-1", planSync) },
			req:   bindOf("i-1", "b-1", planSync, false, ""),
			want:  broker.ResultCreated,
			then: func(t *testing.T, h *harness, res broker.BindResult) {
				expires, renew := epoch.Add(lifetime), epoch.Add(lifetime-renewal)
				if !res.ExpiresAt.Equal(expires) || !res.RenewBefore.Equal(renew) {
					t.Fatalf("expires %s, renew before %s; want %s and %s", res.ExpiresAt, res.RenewBefore, expires, renew)
				}
				if bd := h.binding("i-1", "b-1"); !bd.ExpiresAt.Equal(expires) || !bd.RenewBefore.Equal(renew) {
					t.Fatalf("stored expiry %s, renewal %s", bd.ExpiresAt, bd.RenewBefore)
				}
			},
		},
		{
			name:  "a bind on a plan without a credential lifetime has credentials that do not expire",
			given: func(h *harness) { h.ready("i-1", planLarge) },
			req:   bindOf("i-1", "b-1", planLarge, false, ""),
			want:  broker.ResultCreated,
			then: func(t *testing.T, h *harness, res broker.BindResult) {
				if !res.ExpiresAt.IsZero() || !res.RenewBefore.IsZero() {
					t.Fatalf("expires %s, renew before %s; want neither", res.ExpiresAt, res.RenewBefore)
				}
			},
		},
		{
			name: "a synchronous bind that fails answers 422 with the driver's description and leaves no binding",
			given: func(h *harness) {
				h.ready("i-1", planSync)
				h.driver.on("begin", broker.KindBind, fails("The user could not be created."))
			},
			req:  bindOf("i-1", "b-1", planSync, false, ""),
			code: broker.CodeUnprocessable,
			then: func(t *testing.T, h *harness, _ broker.BindResult) {
				if bd := h.binding("i-1", "b-1"); bd != nil {
					t.Fatalf("binding %+v left behind", bd)
				}
				if inst := h.instance("i-1"); inst.BindingOps != 0 {
					t.Fatalf("instance counts %d binding operations, want 0", inst.BindingOps)
				}
			},
		},
		{
			name: "a synchronous bind that fails after making something leaves no binding and detaches its leftovers",
			given: func(h *harness) {
				h.ready("i-1", planSync)
				h.driver.on("begin", broker.KindBind, running("", 0))
				h.driver.on("check", broker.KindBind, fails("The user could not be created."))
			},
			req:  bindOf("i-1", "b-1", planSync, false, ""),
			code: broker.CodeUnprocessable,
			then: func(t *testing.T, h *harness, _ broker.BindResult) {
				if bd := h.binding("i-1", "b-1"); bd != nil {
					t.Fatalf("binding %+v left behind", bd)
				}
				wantNames(t, "records", h.recordNames("i-1"), []string{instanceRecord})
				wantNames(t, "detached", h.detachedNames(), []string{"i-1/" + broker.BindingRecord("b-1")})
				if inst := h.instance("i-1"); inst.BindingOps != 0 || inst.State != broker.InstanceReady {
					t.Fatalf("instance %+v, want ready and free", inst)
				}
			},
		},
		{
			name:  "an asynchronous bind answers 202 without credentials and counts a binding operation on the instance",
			given: func(h *harness) { h.ready("i-1", planAsync) },
			req:   bindOf("i-1", "b-1", planAsync, true, ""),
			want:  broker.ResultAccepted,
			then: func(t *testing.T, h *harness, res broker.BindResult) {
				if res.Credentials != nil {
					t.Fatalf("a 202 carries credentials %v", res.Credentials)
				}
				if bd := h.binding("i-1", "b-1"); bd.State != broker.BindingCreating || bd.Op != res.Operation {
					t.Fatalf("binding %+v, want creating, held by %s", bd, res.Operation)
				}
				if inst := h.instance("i-1"); inst.BindingOps != 1 || inst.Op != "" {
					t.Fatalf("instance %+v, want one binding operation and no hold", inst)
				}
				wantNames(t, "executions", h.engine.startsOf(broker.WorkflowOperation), []string{res.Operation})
				h.task("i-1", res.Operation)
				if bd := h.binding("i-1", "b-1"); bd.State != broker.BindingReady || bd.Credentials["username"] != "u-b-1" {
					t.Fatalf("binding %+v, want ready with credentials", bd)
				}
				if inst := h.instance("i-1"); inst.BindingOps != 0 {
					t.Fatalf("instance counts %d binding operations once the bind is done", inst.BindingOps)
				}
			},
		},
		{
			name: "binds of other bindings run side by side",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				h.bindingAsync("i-1", "b-1", planAsync)
			},
			req:  bindOf("i-1", "b-2", planAsync, true, ""),
			want: broker.ResultAccepted,
			then: func(t *testing.T, h *harness, _ broker.BindResult) {
				if inst := h.instance("i-1"); inst.BindingOps != 2 {
					t.Fatalf("instance counts %d binding operations, want 2", inst.BindingOps)
				}
			},
		},
		{
			name: "an asynchronous bind that fails leaves a failed binding, its leftovers detached",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				h.driver.on("begin", broker.KindBind, running("", time.Second))
				h.driver.on("check", broker.KindBind, fails("The user could not be created."))
			},
			req:  bindOf("i-1", "b-1", planAsync, true, ""),
			want: broker.ResultAccepted,
			then: func(t *testing.T, h *harness, res broker.BindResult) {
				h.mustBegin("i-1", res.Operation)
				h.failTask("i-1", res.Operation, "check")
				if bd := h.binding("i-1", "b-1"); bd.State != broker.BindingFailed || bd.Op != "" {
					t.Fatalf("binding %+v, want failed and idle", bd)
				}
				wantState(t, h.op("i-1", res.Operation), broker.OperationFailed, "The user could not be created.")
				wantNames(t, "detached", h.detachedNames(), []string{"i-1/" + broker.BindingRecord("b-1")})
				if inst := h.instance("i-1"); inst.BindingOps != 0 {
					t.Fatalf("instance counts %d binding operations, want 0", inst.BindingOps)
				}
			},
		},
		{
			name: "the same bind again after it succeeded answers 200 with the same credentials",
			given: func(h *harness) {
				h.ready("i-1", planSync)
				h.bound("i-1", "b-1", planSync)
			},
			req:  bindOf("i-1", "b-1", planSync, false, ""),
			want: broker.ResultOK,
			then: func(t *testing.T, h *harness, res broker.BindResult) {
				if want := h.binding("i-1", "b-1").Credentials; res.Credentials["password"] != want["password"] {
					t.Fatalf("credentials %v, want the binding's", res.Credentials)
				}
			},
		},
		{
			name: "the same bind again while it runs answers 202 with the same operation",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				h.givenOp = h.bindingAsync("i-1", "b-1", planAsync)
			},
			req:  bindOf("i-1", "b-1", planAsync, true, ""),
			want: broker.ResultAccepted,
			then: func(t *testing.T, h *harness, res broker.BindResult) {
				if res.Operation != h.givenOp {
					t.Fatalf("operation %q, want the first one's %q", res.Operation, h.givenOp)
				}
			},
		},
		{
			name: "the same bind again while it runs, without accepts_incomplete, is 422 ConcurrencyError",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				h.bindingAsync("i-1", "b-1", planAsync)
			},
			req:  bindOf("i-1", "b-1", planAsync, false, ""),
			code: broker.CodeConcurrencyError,
		},
		{
			name: "a different bind of the same id is 409 Conflict",
			given: func(h *harness) {
				h.ready("i-1", planSync)
				h.bound("i-1", "b-1", planSync)
			},
			req:  bindOf("i-1", "b-1", planSync, false, `{"role":"admin"}`),
			code: broker.CodeConflict,
		},
		{
			name: "the same bind again after it failed is 409 Conflict: the platform unbinds first",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				h.failedBinding("i-1", "b-1", planAsync)
			},
			req:  bindOf("i-1", "b-1", planAsync, true, ""),
			code: broker.CodeConflict,
		},
		{
			name: "a bind to an instance that does not exist is 404 NotFound",
			req:  bindOf("i-1", "b-1", planSync, false, ""),
			code: broker.CodeNotFound,
		},
		{
			name: "a bind while the instance is being updated is 422 ConcurrencyError",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				h.updating("i-1", `{"size":2}`)
			},
			req:  bindOf("i-1", "b-1", planAsync, true, ""),
			code: broker.CodeConcurrencyError,
			then: func(t *testing.T, h *harness, _ broker.BindResult) {
				if bd := h.binding("i-1", "b-1"); bd != nil {
					t.Fatalf("binding %+v stored", bd)
				}
			},
		},
		{
			name:  "a bind while the instance is being provisioned is 422 ConcurrencyError",
			given: func(h *harness) { h.provisioning("i-1", planAsync, "") },
			req:   bindOf("i-1", "b-1", planAsync, true, ""),
			code:  broker.CodeConcurrencyError,
		},
		{
			name:  "a bind to a failed instance is 422: only a deprovision may follow",
			given: func(h *harness) { h.failedInstance("i-1", planAsync) },
			req:   bindOf("i-1", "b-1", planAsync, true, ""),
			code:  broker.CodeUnprocessable,
		},
		{
			name:  "a bind on a plan that is not bindable is 400 BadRequest",
			given: func(h *harness) { h.ready("i-1", planUnbindable) },
			req:   bindOf("i-1", "b-1", planUnbindable, false, ""),
			code:  broker.CodeBadRequest,
		},
		{
			name:  "a bind on an async-only plan without accepts_incomplete is 422 AsyncRequired",
			given: func(h *harness) { h.ready("i-1", planAsyncOnly) },
			req:   bindOf("i-1", "b-1", planAsyncOnly, false, ""),
			code:  broker.CodeAsyncRequired,
		},
	})
}

// TestBindSettledInMemory: a synchronous bind of a driver whose changes
// live in its records is settled before any hold, in one write
// conditional on the instance being as read; any other driver's takes the
// hold first.
func TestBindSettledInMemory(t *testing.T) {
	bindRules(t, []rule[broker.BindDetails, broker.BindResult]{
		{
			name: "a synchronous bind of an in-memory driver is one write, which stores the binding ready with its record",
			given: func(h *harness) {
				h.ready("i-1", planSync)
				h.driver.inMemory = true
			},
			req:  bindOf("i-1", "b-1", planSync, false, ""),
			want: broker.ResultCreated,
			then: func(t *testing.T, h *harness, res broker.BindResult) {
				if w := h.writes.since(); !slices.Equal(w, []string{"CreateBinding"}) {
					t.Fatalf("writes %v, want one CreateBinding", w)
				}
				bd := h.binding("i-1", "b-1")
				if bd.State != broker.BindingReady || bd.Credentials["password"] != res.Credentials["password"] {
					t.Fatalf("binding %+v, want ready with the answered credentials", bd)
				}
				if inst := h.instance("i-1"); inst.BindingOps != 0 {
					t.Fatalf("instance counts %d binding operations", inst.BindingOps)
				}
				wantNames(t, "records", h.recordNames("i-1"), []string{instanceRecord, broker.BindingRecord("b-1")})
			},
		},
		{
			name: "a synchronous bind of an in-memory driver that fails writes nothing",
			given: func(h *harness) {
				h.ready("i-1", planSync)
				h.driver.inMemory = true
				h.driver.on("begin", broker.KindBind, fails("The user could not be created."))
			},
			req:  bindOf("i-1", "b-1", planSync, false, ""),
			code: broker.CodeUnprocessable,
			then: func(t *testing.T, h *harness, _ broker.BindResult) {
				if w := h.writes.since(); len(w) != 0 {
					t.Fatalf("writes %v, want none", w)
				}
				if bd := h.binding("i-1", "b-1"); bd != nil {
					t.Fatalf("binding %+v stored", bd)
				}
			},
		},
		{
			name: "an in-memory bind whose instance moved while the driver ran takes the hold and binds all the same",
			given: func(h *harness) {
				h.ready("i-1", planSync)
				h.driver.inMemory = true
				raced := false
				h.driver.hook = func(step string, c broker.Change) {
					if step == "begin" && c.Operation.Kind == broker.KindBind && !raced {
						raced = true // another binding is made meanwhile: the instance's version moves
						if _, err := h.b.Bind(ctx, bindOf("i-1", "b-2", planSync, false, "")); err != nil {
							h.t.Errorf("the racing bind: %v", err)
						}
					}
				}
			},
			req:  bindOf("i-1", "b-1", planSync, false, ""),
			want: broker.ResultCreated,
			then: func(t *testing.T, h *harness, _ broker.BindResult) {
				for _, id := range []string{"b-1", "b-2"} {
					if bd := h.binding("i-1", id); bd == nil || bd.State != broker.BindingReady {
						t.Fatalf("binding %s is %+v, want ready", id, bd)
					}
				}
				if inst := h.instance("i-1"); inst.BindingOps != 0 {
					t.Fatalf("instance counts %d binding operations", inst.BindingOps)
				}
				// b-2 settled; b-1's settled write refused (the version
				// moved); b-1's hold and outcome.
				want := []string{"CreateBinding", "CreateBinding", "CreateBinding", "FinishOperation"}
				if w := h.writes.since(); !slices.Equal(w, want) {
					t.Fatalf("writes %v, want %v", w, want)
				}
			},
		},
		{
			name:  "a synchronous bind of a driver that acts on the world is two writes: the hold, then the outcome",
			given: func(h *harness) { h.ready("i-1", planSync) },
			req:   bindOf("i-1", "b-1", planSync, false, ""),
			want:  broker.ResultCreated,
			then: func(t *testing.T, h *harness, _ broker.BindResult) {
				if w := h.writes.since(); !slices.Equal(w, []string{"CreateBinding", "FinishOperation"}) {
					t.Fatalf("writes %v, want the hold and the outcome", w)
				}
			},
		},
	})
}

// TestBindRotation: a bind with predecessor_binding_id (OSB 2.17) makes a
// successor of a ready, unexpired binding on a binding_rotatable plan.
func TestBindRotation(t *testing.T) {
	rotate := func(plan, predecessor string) broker.BindDetails {
		d := bindOf("i-1", "b-2", plan, false, "")
		d.AppGUID, d.PredecessorID = "", predecessor
		return d
	}
	withPredecessor := func(plan string) func(h *harness) {
		return func(h *harness) {
			h.ready("i-1", plan)
			if _, err := h.b.Bind(ctx, bindOf("i-1", "b-1", plan, false, `{"role":"reader"}`)); err != nil {
				h.t.Fatal(err)
			}
		}
	}
	bindRules(t, []rule[broker.BindDetails, broker.BindResult]{
		{
			name:  "a rotation makes a successor with credentials of its own, taking the predecessor's parameters and app_guid where the request gives none",
			given: withPredecessor(planSync),
			req:   rotate(planSync, "b-1"),
			want:  broker.ResultCreated,
			then: func(t *testing.T, h *harness, res broker.BindResult) {
				pred, succ := h.binding("i-1", "b-1"), h.binding("i-1", "b-2")
				if string(succ.Parameters) != `{"role":"reader"}` || succ.AppGUID != "app-1" || succ.PredecessorID != "b-1" {
					t.Fatalf("successor %+v, want the predecessor's parameters and app_guid", succ)
				}
				if pred.State != broker.BindingReady || res.Credentials["username"] == pred.Credentials["username"] {
					t.Fatalf("predecessor %+v, successor's credentials %v: want both valid, each its own", pred, res.Credentials)
				}
			},
		},
		{
			name:  "a rotation on a plan that is not binding_rotatable is 400 BadRequest",
			given: withPredecessor(planLarge),
			req:   rotate(planLarge, "b-1"),
			code:  broker.CodeBadRequest,
		},
		{
			name:  "a rotation of a binding the instance does not have is 400 BadRequest",
			given: withPredecessor(planSync),
			req:   rotate(planSync, "b-9"),
			code:  broker.CodeBadRequest,
		},
		{
			name:  "a binding cannot succeed itself (400 BadRequest)",
			given: withPredecessor(planSync),
			req:   rotate(planSync, "b-2"),
			code:  broker.CodeBadRequest,
		},
		{
			name: "a rotation of a binding whose credentials expired is 400 BadRequest",
			given: func(h *harness) {
				withPredecessor(planSync)(h)
				h.clock.advance(lifetime)
			},
			req:  rotate(planSync, "b-1"),
			code: broker.CodeBadRequest,
		},
	})
}
