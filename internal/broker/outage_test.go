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
		p, err := h.b.CheckTask(ctx, "i-1", op)
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
		if p, err := h.b.CheckTask(ctx, "i-1", op); err != nil || !p.Done {
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
			p, err := h.b.CheckTask(ctx, "i-1", op)
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
			if p, err = h.b.CheckTask(ctx, "i-1", op); err == nil {
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
		if _, err := h.b.CheckTask(ctx, "i-1", op); !errors.As(err, &f) || f.Description != "The quota is exhausted." {
			t.Fatalf("check: %v, want the driver's failure", err)
		}
	})
}
