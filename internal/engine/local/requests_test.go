package local_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/engine/local"
	"github.com/serverless-osb/broker/internal/waittest"
)

// waitWaiting waits until n Tasks wait for the requests in flight.
func waitWaiting(t *testing.T, q *local.Requests, n int) {
	t.Helper()
	waittest.Until(t, func() error {
		if got := q.Waiting(); got != n {
			return fmt.Errorf("%d Tasks wait for the requests in flight, want %d", got, n)
		}
		return nil
	})
}

func TestTasksGiveWayToRequestsInFlight(t *testing.T) {
	t.Parallel()
	defs := map[broker.Workflow]string{"w": taskOnly}

	t.Run("a request in flight defers a Task until it ends", func(t *testing.T) {
		t.Parallel()
		q := &local.Requests{}
		var calls countingInvoker
		// A bound longer than any test: only the request's end lets the
		// Task go.
		e := newEngine(t, local.Options{Definitions: definitions(t, defs), Invoke: calls.Invoke, Requests: q, YieldAtMost: time.Hour})
		q.Begin()
		start(t, e, "w", "deferred", `{}`)
		waitWaiting(t, q, 1)
		if n := calls.n.Load(); n != 0 {
			t.Fatalf("the worker was called %d times while a request was in flight, want 0", n)
		}
		q.End()
		if x := waitEnded(t, e, "deferred"); x.Status != broker.ExecutionSucceeded {
			t.Errorf("deferred: %s %s %s, want SUCCEEDED once the request ended", x.Status, x.Error, x.Cause)
		}
		if n := calls.n.Load(); n != 1 {
			t.Errorf("the worker was called %d times, want once", n)
		}
	})

	t.Run("a Task runs without waiting when no request is in flight", func(t *testing.T) {
		t.Parallel()
		q := &local.Requests{}
		q.Begin()
		q.End()
		var calls countingInvoker
		e := newEngine(t, local.Options{Definitions: definitions(t, defs), Invoke: calls.Invoke, Requests: q, YieldAtMost: time.Hour})
		start(t, e, "w", "at-once", `{}`)
		if x := waitEnded(t, e, "at-once"); x.Status != broker.ExecutionSucceeded {
			t.Errorf("at-once: %s %s %s, want SUCCEEDED", x.Status, x.Error, x.Cause)
		}
	})

	t.Run("a steady stream of requests delays a Task by YieldAtMost at most, and starves none", func(t *testing.T) {
		t.Parallel()
		q := &local.Requests{}
		// Requests overlap without end: one always in flight, others begin
		// and end beside it, as under a steady load.
		q.Begin()
		stop := make(chan struct{})
		streamed := make(chan struct{})
		go func() {
			defer close(streamed)
			for {
				select {
				case <-stop:
					return
				default:
					q.Begin()
					q.End()
				}
			}
		}()
		t.Cleanup(func() { close(stop); <-streamed; q.End() })
		var calls countingInvoker
		e := newEngine(t, local.Options{Definitions: definitions(t, defs), Invoke: calls.Invoke, Requests: q, YieldAtMost: time.Millisecond})
		for i := range 3 {
			start(t, e, "w", fmt.Sprint("streamed-", i), `{}`)
		}
		for i := range 3 {
			if x := waitEnded(t, e, fmt.Sprint("streamed-", i)); x.Status != broker.ExecutionSucceeded {
				t.Errorf("streamed-%d: %s %s %s, want SUCCEEDED with requests always in flight", i, x.Status, x.Error, x.Cause)
			}
		}
	})

	t.Run("Close ends a Task's wait, and the execution stays RUNNING for Resume", func(t *testing.T) {
		t.Parallel()
		q := &local.Requests{}
		q.Begin()
		t.Cleanup(q.End)
		var calls countingInvoker
		e := newEngine(t, local.Options{Definitions: definitions(t, defs), Invoke: calls.Invoke, Requests: q, YieldAtMost: time.Hour})
		start(t, e, "w", "closing", `{}`)
		waitWaiting(t, q, 1)
		if err := e.Close(); err != nil {
			t.Fatalf("Close = %v", err)
		}
		if n := q.Waiting(); n != 0 {
			t.Errorf("%d Tasks still wait after Close, want 0", n)
		}
		if n := calls.n.Load(); n != 0 {
			t.Errorf("the worker was called %d times, want 0 (the engine closed first)", n)
		}
		x, err := e.Describe(context.Background(), "closing")
		if err != nil || x.Status != broker.ExecutionRunning {
			t.Errorf("Describe(closing) = %s, %v; want RUNNING, for the next process to resume", x.Status, err)
		}
	})
}
