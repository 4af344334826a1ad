package broker_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/store/storetest"
)

// detachedOfFailedProvision leaves instance i-1 failed with its record
// detached, its first cleanup started, and returns the detached record.
func (h *harness) detachedOfFailedProvision() broker.Detached {
	h.t.Helper()
	h.failedInstance("i-1", planAsync)
	ds, err := h.store.ListDetached(ctx)
	if err != nil || len(ds) != 1 {
		h.t.Fatalf("detached %+v %v, want one", ds, err)
	}
	return ds[0]
}

// detached returns the stored detached record id, or fails.
func (h *harness) detached(id string) broker.Detached {
	h.t.Helper()
	d, err := h.store.GetDetached(ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

// TestReap: the scheduled reaper repairs what crashes and timeouts leave:
// no operation stays in progress forever, no detached resource waits for a
// cleanup that is not running.
func TestReap(t *testing.T) {
	tests := []struct {
		name string
		test func(t *testing.T, h *harness)
	}{
		{
			name: "an operation older than its plan's maximum_polling_duration is stopped and failed",
			test: func(t *testing.T, h *harness) {
				op := h.provisioning("i-1", planAsync, "")
				h.clock.advance(time.Hour + time.Second)
				rep, err := h.b.Reap(ctx)
				if err != nil || rep.InProgress != 1 || rep.TimedOut != 1 {
					t.Fatalf("report %+v %v, want one timed out", rep, err)
				}
				wantState(t, h.op("i-1", op), broker.OperationFailed, "did not complete within 1h0m0s")
				if got := h.engine.Stopped(); !slices.Equal(got, []string{op}) {
					t.Fatalf("stopped %v, want the operation's execution", got)
				}
				if inst := h.instance("i-1"); inst.State != broker.InstanceFailed || inst.Op != "" {
					t.Fatalf("instance %+v, want failed and released", inst)
				}
			},
		},
		{
			name: "an operation of a plan without maximum_polling_duration may run a day",
			test: func(t *testing.T, h *harness) {
				op := h.provisioning("i-1", planAsyncOnly, "")
				h.clock.advance(23 * time.Hour)
				if rep, err := h.b.Reap(ctx); err != nil || rep.TimedOut != 0 {
					t.Fatalf("after 23 h: %+v %v, want none timed out", rep, err)
				}
				h.clock.advance(2 * time.Hour)
				if rep, err := h.b.Reap(ctx); err != nil || rep.TimedOut != 1 {
					t.Fatalf("after 25 h: %+v %v, want one timed out", rep, err)
				}
				wantState(t, h.op("i-1", op), broker.OperationFailed, "did not complete within 24h0m0s")
			},
		},
		{
			name: "an overdue operation whose execution is missing is started again",
			test: func(t *testing.T, h *harness) {
				op := h.provisioning("i-1", planAsync, "")
				h.engine.lose(op)
				h.clock.advance(time.Minute)
				if rep, err := h.b.Reap(ctx); err != nil || rep.Restarted != 1 {
					t.Fatalf("report %+v %v, want one restarted", rep, err)
				}
				if got := h.engine.startsOf(broker.WorkflowOperation); !slices.Equal(got, []string{op, op}) {
					t.Fatalf("started %v, want the same execution twice", got)
				}
			},
		},
		{
			name: "an overdue operation whose execution ended without a result is failed",
			test: func(t *testing.T, h *harness) {
				op := h.provisioning("i-1", planAsync, "")
				h.engine.end(op, broker.ExecutionAborted, "")
				h.clock.advance(time.Minute)
				if rep, err := h.b.Reap(ctx); err != nil || rep.Failed != 1 {
					t.Fatalf("report %+v %v, want one failed", rep, err)
				}
				wantState(t, h.op("i-1", op), broker.OperationFailed, "The provision was stopped.")
			},
		},
		{
			name: "an operation that is not overdue is left alone",
			test: func(t *testing.T, h *harness) {
				op := h.provisioning("i-1", planAsync, "")
				h.engine.end(op, broker.ExecutionFailed, "States.Runtime")
				before := h.snapshotJSON("i-1")
				rep, err := h.b.Reap(ctx)
				if err != nil || rep != (broker.ReapReport{InProgress: 1}) {
					t.Fatalf("report %+v %v, want one looked at, nothing done", rep, err)
				}
				if after := h.snapshotJSON("i-1"); after != before {
					t.Fatalf("the reaper changed\n%s\nto\n%s", before, after)
				}
			},
		},
		{
			name: "a detached resource whose cleanup never started gets one",
			test: func(t *testing.T, h *harness) {
				h.ready("i-1", planSync)
				d := broker.Detached{ID: "d-1", InstanceID: "i-1", Name: instanceRecord, PlanID: planSync,
					State: broker.DetachedPending, CreatedAt: epoch, UpdatedAt: epoch}
				storetest.Detach(t, h.store, broker.Resource{InstanceID: "i-1", Name: instanceRecord}, d)
				if rep, err := h.b.Reap(ctx); err != nil || rep.Detached != 1 || rep.CleanupsStarted != 1 {
					t.Fatalf("report %+v %v, want one cleanup started", rep, err)
				}
				if got := h.detached("d-1"); got.State != broker.DetachedCleaning || got.Attempts != 1 {
					t.Fatalf("detached %+v, want its first cleanup under way", got)
				}
				if got := h.engine.startsOf(broker.WorkflowCleanup); !slices.Equal(got, []string{d.CleanupName(1)}) {
					t.Fatalf("cleanups started %v", got)
				}
			},
		},
		{
			name: "a cleanup whose execution is missing is started again under the same name",
			test: func(t *testing.T, h *harness) {
				d := h.detachedOfFailedProvision()
				h.engine.lose(d.CleanupName(1))
				if rep, err := h.b.Reap(ctx); err != nil || rep.CleanupsStarted != 1 {
					t.Fatalf("report %+v %v, want one cleanup started", rep, err)
				}
				want := []string{d.CleanupName(1), d.CleanupName(1)}
				if got := h.engine.startsOf(broker.WorkflowCleanup); !slices.Equal(got, want) {
					t.Fatalf("cleanups started %v, want %v", got, want)
				}
			},
		},
		{
			name: "a cleanup whose execution ended without deleting the resource is marked failed for an operator",
			test: func(t *testing.T, h *harness) {
				d := h.detachedOfFailedProvision()
				h.engine.end(d.CleanupName(1), broker.ExecutionFailed, "States.Runtime")
				if rep, err := h.b.Reap(ctx); err != nil || rep.CleanupsFailed != 1 {
					t.Fatalf("report %+v %v, want one cleanup failed", rep, err)
				}
				if got := h.detached(d.ID); got.State != broker.DetachedFailed || !strings.Contains(got.Failure, "FAILED") {
					t.Fatalf("detached %+v, want failed, saying how its cleanup ended", got)
				}
			},
		},
		{
			name: "a cleanup that gave up is started again after 6 hours, up to 4 executions in all, then left for an operator",
			test: func(t *testing.T, h *harness) {
				d := h.detachedOfFailedProvision()
				for attempt := 1; attempt <= broker.CleanupMaxAttempts; attempt++ {
					if err := h.b.CleanupGaveUpTask(ctx, d.ID, "The backend was unreachable.", ""); err != nil {
						t.Fatal(err)
					}
					h.engine.end(d.CleanupName(attempt), broker.ExecutionFailed, "CleanupGaveUp")
					h.clock.advance(broker.CleanupRetryAfter - time.Minute)
					if rep, err := h.b.Reap(ctx); err != nil || rep.CleanupsStarted != 0 {
						t.Fatalf("attempt %d, before 6 hours: %+v %v, want none started", attempt, rep, err)
					}
					h.clock.advance(time.Minute)
					rep, err := h.b.Reap(ctx)
					if attempt == broker.CleanupMaxAttempts {
						if err != nil || rep.CleanupsStarted != 0 {
							t.Fatalf("after %d executions: %+v %v, want none started", attempt, rep, err)
						}
						break
					}
					if err != nil || rep.CleanupsStarted != 1 {
						t.Fatalf("attempt %d, after 6 hours: %+v %v, want one started", attempt, rep, err)
					}
					if got := h.detached(d.ID); got.State != broker.DetachedCleaning || got.Attempts != attempt+1 {
						t.Fatalf("detached %+v, want cleaning, attempt %d", got, attempt+1)
					}
				}
				if got := h.detached(d.ID); got.State != broker.DetachedFailed {
					t.Fatalf("detached %+v, want failed, for an operator", got)
				}
			},
		},
		{
			name: "finished operation records are removed once their retention is over",
			test: func(t *testing.T, h *harness) {
				h.ready("i-1", planSync)
				h.clock.advance(broker.Retention - time.Hour)
				if rep, err := h.b.Reap(ctx); err != nil || rep.Expired != 0 {
					t.Fatalf("within retention: %+v %v, want none expired", rep, err)
				}
				h.clock.advance(2 * time.Hour)
				if rep, err := h.b.Reap(ctx); err != nil || rep.Expired != 1 {
					t.Fatalf("after retention: %+v %v, want one expired", rep, err)
				}
				if ops := h.ops("i-1"); len(ops) != 0 {
					t.Fatalf("operations %v left", ops)
				}
				if inst := h.instance("i-1"); inst == nil {
					t.Fatal("the instance went with its operation")
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

// TestCleanup: the cleanup workflow's Tasks and the operator's retry.
func TestCleanup(t *testing.T) {
	tests := []struct {
		name string
		test func(t *testing.T, h *harness)
	}{
		{
			name: "the Delete Task asks the plan's driver to delete the resource; Deleted then removes its record",
			test: func(t *testing.T, h *harness) {
				d := h.detachedOfFailedProvision()
				if p, err := h.b.CleanupDeleteTask(ctx, d.ID); err != nil || !p.Done {
					t.Fatalf("delete: %+v %v", p, err)
				}
				if !slices.Equal(h.driver.cleanups, []string{instanceRecord}) {
					t.Fatalf("the driver deleted %v", h.driver.cleanups)
				}
				if err := h.b.CleanupDeletedTask(ctx, d.ID); err != nil {
					t.Fatal(err)
				}
				if _, err := h.store.GetDetached(ctx, d.ID); !errors.Is(err, broker.ErrNotFound) {
					t.Fatalf("detached record: %v, want gone", err)
				}
			},
		},
		{
			name: "a Delete Task whose plan's slots are all taken asks nothing, writes nothing, and waits its turn",
			test: func(t *testing.T, h *harness) {
				d := h.detachedOfFailedProvision()
				slots := broker.NewMemorySlots(1)
				h.b.Slots = slots
				held, _, _ := slots.Take(ctx, d.PlanID)
				h.writes.reset()
				if p, err := h.b.CleanupDeleteTask(ctx, d.ID); err != nil || p.Done || p.RetryAfter != int(broker.SlotWait.Seconds()) {
					t.Fatalf("delete: %+v %v, want not done, again in SlotWait", p, err)
				}
				if len(h.driver.cleanups) != 0 || len(h.writes.since()) != 0 {
					t.Fatalf("the driver deleted %v, writes %v: want nothing while the plan's slots are taken", h.driver.cleanups, h.writes.since())
				}
				held()
				if p, err := h.b.CleanupDeleteTask(ctx, d.ID); err != nil || !p.Done || !slices.Equal(h.driver.cleanups, []string{instanceRecord}) {
					t.Fatalf("delete: %+v %v, deleted %v: want it deleted once a slot is free", p, err, h.driver.cleanups)
				}
			},
		},
		{
			name: "the Delete Task of a resource already deleted is done",
			test: func(t *testing.T, h *harness) {
				if p, err := h.b.CleanupDeleteTask(ctx, "d-gone"); err != nil || !p.Done {
					t.Fatalf("delete: %+v %v, want done", p, err)
				}
				if len(h.driver.cleanups) != 0 {
					t.Fatalf("the driver was asked to delete %v", h.driver.cleanups)
				}
			},
		},
		{
			name: "a cleanup that gives up leaves the record failed, listed for an operator, who may start it again",
			test: func(t *testing.T, h *harness) {
				d := h.detachedOfFailedProvision()
				if err := h.b.CleanupGaveUpTask(ctx, d.ID, "The stack could not be deleted.", ""); err != nil {
					t.Fatal(err)
				}
				if got := h.detached(d.ID); got.State != broker.DetachedFailed || got.Failure != "The stack could not be deleted." {
					t.Fatalf("detached %+v, want failed with why", got)
				}
				h.engine.end(d.CleanupName(1), broker.ExecutionSucceeded, "")
				next, err := h.b.RetryCleanup(ctx, d.ID)
				if err != nil || next.State != broker.DetachedCleaning || next.Attempts != 2 {
					t.Fatalf("retry: %+v %v, want a second cleanup under way", next, err)
				}
				want := []string{d.CleanupName(1), d.CleanupName(2)}
				if got := h.engine.startsOf(broker.WorkflowCleanup); !slices.Equal(got, want) {
					t.Fatalf("cleanups started %v, want %v", got, want)
				}
				var input broker.CleanupInput
				s := h.engine.Started()
				if err := json.Unmarshal([]byte(s[len(s)-1].Input), &input); err != nil || input.DetachedID != d.ID {
					t.Fatalf("cleanup input %s, want the detached id", s[len(s)-1].Input)
				}
			},
		},
		{
			name: "an operator's retry is refused while a cleanup runs",
			test: func(t *testing.T, h *harness) {
				d := h.detachedOfFailedProvision()
				if _, err := h.b.RetryCleanup(ctx, d.ID); err == nil {
					t.Fatal("retry while the cleanup runs: no error")
				}
				if got := h.detached(d.ID); got.Attempts != 1 {
					t.Fatalf("detached %+v, want unchanged", got)
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

// TestRecover: a broker starting up repairs every operation in progress,
// whatever its age.
func TestRecover(t *testing.T) {
	h := newHarness(t)
	crashed := h.crashedSyncProvision("i-1", planSync)
	lost := h.provisioning("i-2", planAsync, "")
	h.engine.lose(lost)
	running := h.provisioning("i-3", planAsync, "")
	n, err := h.b.Recover(ctx)
	if err != nil || n != 3 {
		t.Fatalf("recover: %d %v, want 3 looked at", n, err)
	}
	wantState(t, h.op("i-1", crashed), broker.OperationFailed, "interrupted")
	if inst := h.instance("i-1"); inst != nil {
		t.Fatalf("instance %+v: a synchronous provision that failed leaves none", inst)
	}
	if got := h.engine.startsOf(broker.WorkflowOperation); !slices.Equal(got, []string{lost, running, lost}) {
		t.Fatalf("started %v, want the lost execution started again", got)
	}
	if o := h.op("i-3", running); o.State != broker.OperationInProgress {
		t.Fatalf("the running operation is %s", o.State)
	}
}
