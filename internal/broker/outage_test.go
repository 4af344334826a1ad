package broker_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// unreachable: the backend did not answer (HTTP 503).
func unreachable() answer {
	return answer{err: &broker.Unreachable{Reason: "HTTP 503", Err: errTransient}}
}

// TestOutages: a transient driver error does not fail a Task; the
// operation waits it out, visibly, with backoff, until the plan's outage
// budget (30 minutes, the default) runs out.
func TestOutages(t *testing.T) {
	t.Run("a transient error in Begin is recorded in the Task's one write, and the workflow waits", func(t *testing.T) {
		h := newHarness(t)
		h.driver.on("begin", broker.KindProvision, unreachable(), done())
		op := h.provisioning("i-1", planAsync, "")
		h.writes.reset()
		p := h.mustBegin("i-1", op)
		if p.Done || p.RetryAfter != 15 {
			t.Fatalf("progress %+v, want not done, again in 15 s", p)
		}
		if w := h.writes.since(); !slices.Equal(w, []string{"UpdateOperation"}) {
			t.Fatalf("writes %v, want the progress only", w)
		}
		o := h.op("i-1", op)
		want := "The service's backend is unreachable (HTTP 503); retrying, attempt 1, next in 15 seconds."
		if o.State != broker.OperationInProgress || o.Description != want || !o.OutageSince.Equal(epoch) ||
			o.OutageAttempts != 1 || !o.OutageInBegin || !o.NextCheckAt.Equal(epoch.Add(15*time.Second)) {
			t.Fatalf("operation %+v, want in progress, %q, the outage recorded", o, want)
		}
		lo, err := h.b.LastOperation(ctx, broker.LastOperationDetails{InstanceID: "i-1"})
		if err != nil || lo.Description != want || lo.RetryAfter != 15*time.Second {
			t.Fatalf("last_operation %+v %v, want %q, Retry-After 15 s", lo, err, want)
		}
	})

	t.Run("the Check after an outage in Begin begins again, then the operation goes on as if none had been", func(t *testing.T) {
		h := newHarness(t)
		h.driver.on("begin", broker.KindProvision, unreachable(), running("Creating.", 5*time.Second))
		op := h.provisioning("i-1", planAsync, "")
		h.mustBegin("i-1", op)
		h.clock.advance(15 * time.Second)
		p, err := h.b.CheckTask(ctx, broker.OperationTask{InstanceID: "i-1", OperationID: op})
		if err != nil || p.Done || p.RetryAfter != 5 {
			t.Fatalf("check: %+v %v, want not done, again in 5 s", p, err)
		}
		if calls := h.driver.Calls(); !slices.Equal(calls, []string{"begin provision", "begin provision"}) {
			t.Fatalf("driver calls %v, want Begin twice", calls)
		}
		o := h.op("i-1", op)
		if o.Description != "Creating." || o.InOutage() || o.OutageAttempts != 0 || o.OutageInBegin {
			t.Fatalf("operation %+v, want the driver's description and no outage", o)
		}
		if p, err := h.b.CheckTask(ctx, broker.OperationTask{InstanceID: "i-1", OperationID: op}); err != nil || !p.Done {
			t.Fatalf("check: %+v %v, want done", p, err)
		}
		if calls := h.driver.Calls(); calls[len(calls)-1] != "check provision" {
			t.Fatalf("driver calls %v, want Check last", calls)
		}
	})

	t.Run("the waits double up to 5 minutes, and Retry-After is the time left to the next try", func(t *testing.T) {
		h := newHarness(t)
		h.driver.on("begin", broker.KindProvision, running("", time.Second))
		h.driver.on("check", broker.KindProvision, unreachable())
		op := h.provisioning("i-1", planAsync, "")
		h.mustBegin("i-1", op)
		var waits []int
		for range 7 {
			p, err := h.b.CheckTask(ctx, broker.OperationTask{InstanceID: "i-1", OperationID: op})
			if err != nil {
				t.Fatalf("check: %v", err)
			}
			waits = append(waits, p.RetryAfter)
			if len(waits) == 4 {
				want := "The service's backend is unreachable (HTTP 503); retrying, attempt 4, next in 2 minutes."
				if o := h.op("i-1", op); o.Description != want || o.OutageInBegin {
					t.Fatalf("operation %q (in begin: %v), want %q", o.Description, o.OutageInBegin, want)
				}
				h.clock.advance(50 * time.Second)
				if lo, _ := h.b.LastOperation(ctx, broker.LastOperationDetails{InstanceID: "i-1"}); lo.RetryAfter != 70*time.Second {
					t.Fatalf("Retry-After %s 50 s into a wait of 2 minutes, want 70 s", lo.RetryAfter)
				}
				h.clock.advance(70 * time.Second)
				continue
			}
			h.clock.advance(time.Duration(p.RetryAfter) * time.Second)
		}
		if want := []int{15, 30, 60, 120, 240, 300, 300}; !slices.Equal(waits, want) {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	})

	t.Run("an outage past the plan's budget fails the operation, saying since when", func(t *testing.T) {
		h := newHarness(t)
		h.driver.on("begin", broker.KindProvision, running("", time.Second))
		h.driver.on("check", broker.KindProvision, unreachable())
		op := h.provisioning("i-1", planAsync, "")
		h.mustBegin("i-1", op)
		h.clock.advance(time.Minute)
		since := h.clock.Now()
		var err error
		for tries := 0; err == nil; tries++ {
			if tries > 20 {
				t.Fatal("still waiting after 20 tries")
			}
			var p broker.TaskProgress
			if p, err = h.b.CheckTask(ctx, broker.OperationTask{InstanceID: "i-1", OperationID: op}); err == nil {
				if at := h.clock.Now().Add(time.Duration(p.RetryAfter) * time.Second); at.After(since.Add(30*time.Minute + time.Second)) {
					t.Fatalf("the next try at %s, after the budget's end", at)
				}
				h.clock.advance(time.Duration(p.RetryAfter) * time.Second)
			}
		}
		var f *broker.Failure
		if !errors.As(err, &f) {
			t.Fatalf("check: %v, want the failure", err)
		}
		if elapsed := h.clock.Now().Sub(since); elapsed < 30*time.Minute || elapsed > 30*time.Minute+2*time.Second {
			t.Fatalf("failed %s into the outage, want at its budget's end, 30 minutes", elapsed)
		}
		want := "The provision failed: the service's backend has been unreachable (HTTP 503) since 2025-03-01 12:01:00 UTC (11 attempts"
		if !strings.HasPrefix(f.Description, want) || !strings.Contains(f.Description, "over 30 minutes, the plan's limit); try again later.") {
			t.Fatalf("description %q, want it to start %q and name the budget", f.Description, want)
		}
		if f.Detail != errTransient.Error() {
			t.Fatalf("detail %q, want the driver's error", f.Detail)
		}
	})

	t.Run("a transient error without a reason is an outage too, and a permanent one fails at once", func(t *testing.T) {
		h := newHarness(t)
		h.driver.on("begin", broker.KindProvision, transient())
		op := h.provisioning("i-1", planAsync, "")
		if p := h.mustBegin("i-1", op); p.Done || p.RetryAfter != 15 {
			t.Fatalf("progress %+v, want a wait of 15 s", p)
		}
		wantState(t, h.op("i-1", op), broker.OperationInProgress, "The service's backend is unreachable; retrying, attempt 1, next in 15 seconds.")
		h.driver.on("begin", broker.KindProvision, fails("The quota is exhausted."))
		var f *broker.Failure
		if _, err := h.b.CheckTask(ctx, broker.OperationTask{InstanceID: "i-1", OperationID: op}); !errors.As(err, &f) || f.Description != "The quota is exhausted." {
			t.Fatalf("check: %v, want the driver's failure", err)
		}
	})
}

// TestCleanupOutages: a transient error of the driver that deletes a
// detached resource does not fail the cleanup's Task: the cleanup waits it
// out, on its workflow's Wait state, with the outage on the detached
// record, until CleanupOutageBudget runs out; then it gives up saying
// since when, and the reaper starts it again later.
func TestCleanupOutages(t *testing.T) {
	t.Run("an outage is recorded on the detached record in one write, with backoff; the first answer clears it", func(t *testing.T) {
		h := newHarness(t)
		d := h.detachedOfFailedProvision()
		h.clock.advance(time.Minute)
		since := h.clock.Now()
		h.driver.on("cleanup", "", unreachable(), unreachable(), running("Deleting.", 10*time.Second), done())
		for attempt, wait := range []time.Duration{time.Minute, 2 * time.Minute} {
			h.writes.reset()
			p, err := h.b.CleanupDeleteTask(ctx, d.ID)
			if err != nil || p != (broker.TaskProgress{RetryAfter: int(wait.Seconds())}) {
				t.Fatalf("try %d: %+v %v, want a wait of %s", attempt+1, p, err, wait)
			}
			if w := h.writes.since(); !slices.Equal(w, []string{"UpdateDetached"}) {
				t.Fatalf("try %d: writes %v, want the outage only", attempt+1, w)
			}
			got := h.detached(d.ID)
			if !got.InOutage() || !got.OutageSince.Equal(since) || got.OutageAttempts != attempt+1 || got.OutageReason != "HTTP 503" ||
				!got.NextTryAt.Equal(h.clock.Now().Add(wait)) || got.State != broker.DetachedCleaning || got.Attempts != 1 {
				t.Fatalf("try %d: detached %+v, want cleaning, in an outage since %s, attempt %d, next try in %s",
					attempt+1, got, since, attempt+1, wait)
			}
			h.clock.advance(wait)
		}
		h.writes.reset()
		if p, err := h.b.CleanupDeleteTask(ctx, d.ID); err != nil || p != (broker.TaskProgress{RetryAfter: 10}) {
			t.Fatalf("the try after the outage: %+v %v, want the driver's wait", p, err)
		}
		if got := h.detached(d.ID); got.InOutage() || got.OutageAttempts != 0 || got.OutageReason != "" || !got.NextTryAt.IsZero() {
			t.Fatalf("detached %+v, want no outage once the backend answered", got)
		}
		h.writes.reset()
		if p, err := h.b.CleanupDeleteTask(ctx, d.ID); err != nil || !p.Done {
			t.Fatalf("the last try: %+v %v, want done", p, err)
		}
		if w := h.writes.since(); len(w) != 0 {
			t.Fatalf("writes %v after a try that met no outage, want none", w)
		}
	})

	t.Run("an outage past the budget gives up saying since when; the reaper starts the cleanup again with a fresh budget", func(t *testing.T) {
		h := newHarness(t)
		d := h.detachedOfFailedProvision()
		h.driver.on("cleanup", "", unreachable())
		since := h.clock.Now()
		var err error
		var tries int
		for ; err == nil; tries++ {
			if tries > 20 {
				t.Fatal("still waiting after 20 tries")
			}
			var p broker.TaskProgress
			if p, err = h.b.CleanupDeleteTask(ctx, d.ID); err == nil {
				h.clock.advance(time.Duration(p.RetryAfter) * time.Second)
			}
		}
		var f *broker.Failure
		if !errors.As(err, &f) {
			t.Fatalf("delete: %v, want the failure", err)
		}
		// Waits of 1, 2, 4, 8, 16, then 30 minutes, the last one cut to
		// end with the budget.
		if elapsed := h.clock.Now().Sub(since); tries != 13 || elapsed != broker.CleanupOutageBudget+time.Second {
			t.Fatalf("gave up at try %d, %s into the outage, want at try 13, at the budget's end (4 hours)", tries, elapsed)
		}
		want := "The cleanup gave up: the service's backend has been unreachable (HTTP 503) since 2025-03-01 12:00:00 UTC " +
			"(13 attempts over 4 hours, the cleanup's limit); the broker tries again 6 hours later."
		if f.Description != want || f.Detail != errTransient.Error() {
			t.Fatalf("failure %q (detail %q), want %q, the driver's error as the detail", f.Description, f.Detail, want)
		}
		if err := h.b.CleanupGaveUpTask(ctx, d.ID, f.Description, f.Detail); err != nil {
			t.Fatal(err)
		}
		if got := h.detached(d.ID); got.State != broker.DetachedFailed || got.Failure != want || got.InOutage() || got.OutageAttempts != 0 {
			t.Fatalf("detached %+v, want failed, saying since when, with the outage over", got)
		}
		h.engine.end(d.CleanupName(1), broker.ExecutionFailed, "CleanupGaveUp")
		h.clock.advance(broker.CleanupRetryAfter)
		if rep, err := h.b.Reap(ctx); err != nil || rep.CleanupsStarted != 1 {
			t.Fatalf("reap: %+v %v, want the cleanup started again", rep, err)
		}
		if got := h.detached(d.ID); got.State != broker.DetachedCleaning || got.Attempts != 2 || got.Failure != "" || got.InOutage() {
			t.Fatalf("detached %+v, want its second cleanup under way", got)
		}
		h.clock.advance(time.Minute)
		if _, err := h.b.CleanupDeleteTask(ctx, d.ID); err != nil {
			t.Fatal(err)
		}
		if got := h.detached(d.ID); !got.OutageSince.Equal(h.clock.Now()) || got.OutageAttempts != 1 {
			t.Fatalf("detached %+v, want an outage of its own, attempt 1", got)
		}
	})

	t.Run("the last cleanup the reaper starts gives up leaving the resource to an operator", func(t *testing.T) {
		h := newHarness(t)
		d := h.detachedOfFailedProvision()
		last := d
		last.Attempts = broker.CleanupMaxAttempts
		if err := h.store.UpdateDetached(ctx, last, d.Attempts); err != nil {
			t.Fatal(err)
		}
		h.driver.on("cleanup", "", unreachable())
		var err error
		for tries := 0; err == nil && tries < 20; tries++ {
			var p broker.TaskProgress
			if p, err = h.b.CleanupDeleteTask(ctx, d.ID); err == nil {
				h.clock.advance(time.Duration(p.RetryAfter) * time.Second)
			}
		}
		var f *broker.Failure
		if !errors.As(err, &f) || !strings.HasSuffix(f.Description, "; it stays listed for an operator, who may retry it (ops cleanup).") {
			t.Fatalf("delete: %v, want a failure that leaves the resource to an operator", err)
		}
	})
}
