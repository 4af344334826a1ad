package broker_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// TestTasks: the operation workflow's Tasks (Begin, Check, Finish,
// RecordFailure), as package steps calls them. Every Task is idempotent:
// the workflow may run one again after a crash or a lost answer.
func TestTasks(t *testing.T) {
	tests := []struct {
		name string
		test func(t *testing.T, h *harness)
	}{
		{
			name: "Begin that finds the change done at once finishes the operation in one write",
			test: func(t *testing.T, h *harness) {
				op := h.provisioning("i-1", planAsync, "")
				h.writes.reset()
				if p := h.mustBegin("i-1", op); !p.Done {
					t.Fatalf("progress %+v, want done", p)
				}
				if w := h.writes.since(); !slices.Equal(w, []string{"FinishOperation"}) {
					t.Fatalf("writes %v, want the outcome only", w)
				}
				wantState(t, h.op("i-1", op), broker.OperationSucceeded, "provisioned")
				if inst := h.instance("i-1"); inst.State != broker.InstanceReady || inst.Op != "" || inst.DashboardURL == "" {
					t.Fatalf("instance %+v, want ready, released, with the driver's dashboard", inst)
				}
				wantNames(t, "records", h.recordNames("i-1"), []string{instanceRecord})
			},
		},
		{
			name: "Begin that is not done writes the driver's progress and records, and says when to look again",
			test: func(t *testing.T, h *harness) {
				h.driver.on("begin", broker.KindProvision, running("Creating.", 5*time.Second))
				op := h.provisioning("i-1", planAsync, "")
				h.writes.reset()
				if p := h.mustBegin("i-1", op); p.Done || p.RetryAfter != 5 {
					t.Fatalf("progress %+v, want not done, again in 5 s", p)
				}
				if w := h.writes.since(); !slices.Equal(w, []string{"UpdateOperation"}) {
					t.Fatalf("writes %v, want the progress only", w)
				}
				o := h.op("i-1", op)
				if o.State != broker.OperationInProgress || o.Description != "Creating." || o.RetryAfter != 5*time.Second ||
					!o.NextCheckAt.Equal(epoch.Add(5*time.Second)) {
					t.Fatalf("operation %+v, want in progress with the driver's description and promised check", o)
				}
				wantNames(t, "records", h.recordNames("i-1"), []string{instanceRecord})
			},
		},
		{
			name: "the time to look again is in whole seconds, rounded up, and at least one",
			test: func(t *testing.T, h *harness) {
				h.driver.on("begin", broker.KindProvision, running("", 1500*time.Millisecond))
				h.driver.on("check", broker.KindProvision, running("", 0))
				op := h.provisioning("i-1", planAsync, "")
				if p := h.mustBegin("i-1", op); p.RetryAfter != 2 {
					t.Fatalf("after 1.5 s: %+v, want 2", p)
				}
				if p, err := h.b.CheckTask(ctx, broker.OperationTask{InstanceID: "i-1", OperationID: op}); err != nil || p.RetryAfter != 1 {
					t.Fatalf("after 0 s: %+v %v, want 1", p, err)
				}
			},
		},
		{
			name: "a Task whose plan's slots are all taken calls nothing, says it waits for a turn, and the next one to get a slot begins the change",
			test: func(t *testing.T, h *harness) {
				slots := broker.NewMemorySlots(1)
				h.b.Slots = slots
				held, ok, _ := slots.Take(ctx, planAsync)
				if !ok {
					t.Fatal("no slot for the first taker")
				}
				h.driver.on("begin", broker.KindProvision, running("Creating.", 5*time.Second))
				op := h.provisioning("i-1", planAsync, "")
				h.writes.reset()
				if p := h.mustBegin("i-1", op); p.Done || p.RetryAfter != int(broker.SlotWait.Seconds()) {
					t.Fatalf("progress %+v, want not done, again in SlotWait", p)
				}
				if calls := h.driver.Calls(); len(calls) != 0 {
					t.Fatalf("driver calls %v, want none while the plan's slots are taken", calls)
				}
				if w := h.writes.since(); !slices.Equal(w, []string{"UpdateOperation"}) {
					t.Fatalf("writes %v, want the progress only", w)
				}
				if o := h.op("i-1", op); !strings.HasPrefix(o.Description, "Waiting for a turn") || o.InOutage() {
					t.Fatalf("operation %+v, want waiting for a turn, no outage", o)
				}
				held()
				if p, err := h.b.CheckTask(ctx, broker.OperationTask{InstanceID: "i-1", OperationID: op}); err != nil || p.Done {
					t.Fatalf("check: %+v %v", p, err)
				}
				if calls := h.driver.Calls(); !slices.Equal(calls, []string{"begin provision"}) {
					t.Fatalf("driver calls %v, want the begin the first Task did not make", calls)
				}
				h.driver.on("check", broker.KindProvision, done())
				if p, err := h.b.CheckTask(ctx, broker.OperationTask{InstanceID: "i-1", OperationID: op}); err != nil || !p.Done {
					t.Fatalf("check: %+v %v", p, err)
				}
				if calls := h.driver.Calls(); !slices.Equal(calls, []string{"begin provision", "check provision"}) {
					t.Fatalf("driver calls %v, want a check once the change began", calls)
				}
				if _, ok, _ := slots.Take(ctx, planAsync); !ok {
					t.Fatal("the Tasks kept the plan's slot")
				}
			},
		},
		{
			name: "a driver whose changes live in its records takes no slot",
			test: func(t *testing.T, h *harness) {
				slots := broker.NewMemorySlots(1)
				h.b.Slots = slots
				if _, ok, _ := slots.Take(ctx, planAsync); !ok {
					t.Fatal("no slot for the first taker")
				}
				h.driver.inMemory = true
				op := h.provisioning("i-1", planAsync, "")
				if p := h.mustBegin("i-1", op); !p.Done {
					t.Fatalf("progress %+v, want done", p)
				}
			},
		},
		{
			name: "Check finishes the operation once the change is done",
			test: func(t *testing.T, h *harness) {
				h.driver.on("begin", broker.KindProvision, running("", time.Second))
				h.driver.on("check", broker.KindProvision, running("", time.Second), done())
				op := h.provisioning("i-1", planAsync, "")
				h.mustBegin("i-1", op)
				for i, want := range []bool{false, true} {
					if p, err := h.b.CheckTask(ctx, broker.OperationTask{InstanceID: "i-1", OperationID: op}); err != nil || p.Done != want {
						t.Fatalf("check %d: %+v %v, want done=%v", i+1, p, err, want)
					}
				}
				wantState(t, h.op("i-1", op), broker.OperationSucceeded, "")
				if err := h.b.FinishTask(ctx, broker.OperationTask{InstanceID: "i-1", OperationID: op}); err != nil {
					t.Fatalf("finish after the check finished it: %v", err)
				}
			},
		},
		{
			name: "a Task run twice (idempotent) changes nothing the second time",
			test: func(t *testing.T, h *harness) {
				op := h.provisioning("i-1", planAsync, "")
				h.mustBegin("i-1", op)
				before := h.snapshotJSON("i-1")
				h.writes.reset()
				if p := h.mustBegin("i-1", op); !p.Done {
					t.Fatalf("the second begin: %+v, want done", p)
				}
				if after := h.snapshotJSON("i-1"); after != before {
					t.Fatalf("the second begin changed\n%s\nto\n%s", before, after)
				}
				if w, n := h.writes.since(), h.driver.count("begin", broker.KindProvision); len(w) != 0 || n != 1 {
					t.Fatalf("the second begin wrote %v and called the driver (%d begins)", w, n)
				}
			},
		},
		{
			name: "a Task of an operation that does not exist has nothing to do",
			test: func(t *testing.T, h *harness) {
				if p, err := h.b.BeginTask(ctx, broker.OperationTask{InstanceID: "i-1", OperationID: "op-999"}); err != nil || !p.Done {
					t.Fatalf("%+v %v, want done", p, err)
				}
				if calls := h.driver.Calls(); len(calls) != 0 {
					t.Fatalf("the driver was called: %v", calls)
				}
			},
		},
		{
			name: "Finish of a change that is not done yet is an error, and changes nothing",
			test: func(t *testing.T, h *harness) {
				h.driver.on("begin", broker.KindProvision, running("", time.Second))
				h.driver.on("check", broker.KindProvision, running("", time.Second))
				op := h.provisioning("i-1", planAsync, "")
				h.mustBegin("i-1", op)
				if err := h.b.FinishTask(ctx, broker.OperationTask{InstanceID: "i-1", OperationID: op}); err == nil {
					t.Fatal("finish of a change not done: no error")
				}
				if o := h.op("i-1", op); o.State != broker.OperationInProgress {
					t.Fatalf("operation %s, want still in progress", o.State)
				}
			},
		},
		{
			name: "a driver's permanent failure is returned for the workflow's Catch, and nothing is recorded before RecordFailure",
			test: func(t *testing.T, h *harness) {
				h.driver.on("begin", broker.KindProvision, fails("The quota is exhausted."))
				op := h.provisioning("i-1", planAsync, "")
				_, err := h.b.BeginTask(ctx, broker.OperationTask{InstanceID: "i-1", OperationID: op})
				var f *broker.Failure
				if !errors.As(err, &f) || f.Description != "The quota is exhausted." {
					t.Fatalf("begin: %v, want the driver's failure", err)
				}
				if o := h.op("i-1", op); o.State != broker.OperationInProgress {
					t.Fatalf("operation %s before RecordFailure", o.State)
				}
			},
		},
		{
			name: "RecordFailure of an asynchronous provision leaves the instance failed, what it made detached, and its cleanup started at once",
			test: func(t *testing.T, h *harness) {
				h.driver.on("begin", broker.KindProvision, running("", time.Second))
				op := h.provisioning("i-1", planAsync, "")
				h.mustBegin("i-1", op)
				h.writes.reset()
				if err := h.b.RecordFailure(ctx, broker.OperationTask{InstanceID: "i-1", OperationID: op}, "The quota is exhausted."); err != nil {
					t.Fatal(err)
				}
				if w := h.writes.since(); !slices.Equal(w, []string{"FinishOperation"}) {
					t.Fatalf("writes %v, want one: the failure with the detachment", w)
				}
				if inst := h.instance("i-1"); inst.State != broker.InstanceFailed || inst.Op != "" {
					t.Fatalf("instance %+v, want failed and released", inst)
				}
				wantState(t, h.op("i-1", op), broker.OperationFailed, "The quota is exhausted.")
				wantNames(t, "records", h.recordNames("i-1"), nil)
				ds, _ := h.store.ListDetached(ctx)
				if len(ds) != 1 || ds[0].Name != instanceRecord || ds[0].OperationID != op || ds[0].State != broker.DetachedCleaning {
					t.Fatalf("detached %+v, want the instance's record, its cleanup under way", ds)
				}
				want := started{Workflow: broker.WorkflowCleanup, Name: ds[0].CleanupName(1), Input: `{"detached_id":"` + ds[0].ID + `"}`}
				if s := h.engine.Started(); !slices.Contains(s, want) {
					t.Fatalf("started %+v, want %+v", s, want)
				}
			},
		},
		{
			name: "RecordFailure of a finished operation changes nothing",
			test: func(t *testing.T, h *harness) {
				op := h.provisioning("i-1", planAsync, "")
				h.task("i-1", op)
				before := h.snapshotJSON("i-1")
				h.writes.reset()
				if err := h.b.RecordFailure(ctx, broker.OperationTask{InstanceID: "i-1", OperationID: op}, "late"); err != nil {
					t.Fatal(err)
				}
				if after := h.snapshotJSON("i-1"); after != before {
					t.Fatalf("RecordFailure changed\n%s\nto\n%s", before, after)
				}
				if w := h.writes.since(); len(w) != 0 {
					t.Fatalf("writes %v, want none", w)
				}
			},
		},
		{
			name: "RecordFailure run twice records the failure once and starts one cleanup",
			test: func(t *testing.T, h *harness) {
				h.driver.on("begin", broker.KindProvision, running("", time.Second))
				op := h.provisioning("i-1", planAsync, "")
				h.mustBegin("i-1", op)
				for range 2 {
					if err := h.b.RecordFailure(ctx, broker.OperationTask{InstanceID: "i-1", OperationID: op}, "The quota is exhausted."); err != nil {
						t.Fatal(err)
					}
				}
				if d := h.detachedNames(); len(d) != 1 {
					t.Fatalf("detached %v, want one", d)
				}
				if c := h.engine.startsOf(broker.WorkflowCleanup); len(c) != 1 {
					t.Fatalf("cleanups started %v, want one", c)
				}
			},
		},
		{
			name: "RecordFailure of an operation that does not exist changes nothing",
			test: func(t *testing.T, h *harness) {
				if err := h.b.RecordFailure(ctx, broker.OperationTask{InstanceID: "i-1", OperationID: "op-999"}, "late"); err != nil {
					t.Fatal(err)
				}
				if inst, ops := h.instance("i-1"), h.ops("i-1"); inst != nil || len(ops) != 0 {
					t.Fatalf("instance %+v, operations %v", inst, ops)
				}
			},
		},
		{
			name: "RecordFailure without a description says which kind of operation failed",
			test: func(t *testing.T, h *harness) {
				op := h.provisioning("i-1", planAsync, "")
				if err := h.b.RecordFailure(ctx, broker.OperationTask{InstanceID: "i-1", OperationID: op}, ""); err != nil {
					t.Fatal(err)
				}
				wantState(t, h.op("i-1", op), broker.OperationFailed, "The provision failed.")
			},
		},
		{
			name: "a Task of a provision that a deprovision halts while the driver works reports done and leaves the deprovision's outcome",
			test: func(t *testing.T, h *harness) {
				op := h.provisioning("i-1", planAsync, "")
				h.driver.hook = func(step string, c broker.Change) {
					if c.Operation.Kind == broker.KindProvision {
						if _, err := h.b.Deprovision(ctx, deprovisionOf("i-1", planAsync, false)); err != nil {
							t.Errorf("the deprovision: %v", err)
						}
					}
				}
				if p, err := h.b.BeginTask(ctx, broker.OperationTask{InstanceID: "i-1", OperationID: op}); err != nil || !p.Done {
					t.Fatalf("begin: %+v %v, want done: the operation is over", p, err)
				}
				if inst := h.instance("i-1"); inst != nil {
					t.Fatalf("instance %+v, want deleted by the deprovision", inst)
				}
				wantState(t, h.op("i-1", op), broker.OperationFailed, "halted")
				wantNames(t, "records", h.recordNames("i-1"), nil)
			},
		},
		{
			name: "a Task whose execution's input names another binding or kind than its operation's works on its operation's binding",
			test: func(t *testing.T, h *harness) {
				h.ready("i-1", planAsync)
				h.bound("i-1", "b-2", planAsync)
				h.driver.on("begin", broker.KindBind, running("Binding.", 5*time.Second))
				op := h.bindingAsync("i-1", "b-1", planAsync)
				for _, wrong := range []broker.OperationTask{
					{InstanceID: "i-1", OperationID: op, BindingID: "b-2", Kind: broker.KindBind},
					{InstanceID: "i-1", OperationID: op, Kind: broker.KindDeprovision},
				} {
					var bound []string
					h.driver.hook = func(step string, c broker.Change) { bound = append(bound, c.BindingID()) }
					if _, err := h.b.BeginTask(ctx, wrong); err != nil {
						t.Fatalf("begin with %+v: %v", wrong, err)
					}
					if !slices.Equal(bound, []string{"b-1"}) {
						t.Fatalf("with %+v the driver changed %v, want b-1", wrong, bound)
					}
				}
				if bd := h.binding("i-1", "b-2"); bd.State != broker.BindingReady || bd.Op != "" {
					t.Fatalf("binding b-2 %+v, want untouched", bd)
				}
			},
		},
		{
			name: "an update that changes plan runs under the plan it moves to, while the instance stays on its plan until the update is done",
			test: func(t *testing.T, h *harness) {
				h.ready("i-1", planAsyncOnly)
				var plans []string
				h.driver.hook = func(step string, c broker.Change) {
					plans = append(plans, c.Plan.ID, c.Instance.PlanID)
				}
				res, err := h.b.Update(ctx, updateOf("i-1", planAsync, true, ""))
				if err != nil || res.Result != broker.ResultAccepted {
					t.Fatalf("update: %+v %v", res, err)
				}
				h.task("i-1", res.Operation)
				if want := []string{planAsync, planAsyncOnly}; !slices.Equal(plans, want) {
					t.Fatalf("change's plan and instance's plan %v, want %v", plans, want)
				}
				if inst := h.instance("i-1"); inst.PlanID != planAsync {
					t.Fatalf("instance on %s once done, want %s", inst.PlanID, planAsync)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.test(t, newHarness(t))
		})
	}
}
