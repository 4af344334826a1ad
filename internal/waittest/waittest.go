// Package waittest lets tests wait for conditions instead of durations. A
// wait ends as soon as its condition holds, however slow the machine; its
// only deadline is a safety net taken from the test binary's own (go test
// -timeout), so that a correct run on a busy machine is slower, never
// failed, and a hung one still fails with the reason it waited.
package waittest

import (
	"context"
	"testing"
	"time"
)

// withoutDeadline is the safety net of a test binary run with -timeout 0,
// or of a benchmark.
const withoutDeadline = 10 * time.Minute

// Poll intervals: short at first, for conditions met almost at once; then
// no more often than maxPoll, so that waits on moto do not load it.
const (
	firstPoll = time.Millisecond
	maxPoll   = 50 * time.Millisecond
)

// Deadline returns when a wait of tb gives up: a little before the test
// binary's deadline, so that the failure says what it waited for instead of
// the binary panicking.
func Deadline(tb testing.TB) time.Time {
	now := time.Now()
	t, ok := tb.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return now.Add(withoutDeadline)
	}
	d, ok := t.Deadline()
	if !ok {
		return now.Add(withoutDeadline)
	}
	// Leave a tenth of what remains, at most 30 s, to report the failure
	// and run the cleanups.
	return d.Add(-min((d.Sub(now))/10, 30*time.Second))
}

// Context returns a context that ends at Deadline(tb), for calls that must
// not hang a test: unlike tb.Context(), it still runs in cleanups.
func Context(tb testing.TB) (context.Context, context.CancelFunc) {
	return context.WithDeadline(context.Background(), Deadline(tb))
}

// Until calls check until it returns nil. If the deadline passes first, it
// fails tb with check's last error, which should say what is still awaited
// and what was seen instead.
func Until(tb testing.TB, check func() error) {
	tb.Helper()
	start, deadline := time.Now(), Deadline(tb)
	for poll := firstPoll; ; poll = min(2*poll, maxPoll) {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%v (gave up waiting after %s)", err, time.Since(start).Round(time.Millisecond))
		}
		time.Sleep(poll)
	}
}

// Recv returns the next value from ch. If the deadline passes first, it
// fails tb saying that what did not happen.
func Recv[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	start := time.Now()
	timer := time.NewTimer(time.Until(Deadline(tb)))
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		tb.Fatalf("%s did not happen (gave up waiting after %s)", what, time.Since(start).Round(time.Millisecond))
	}
	var zero T // not reached: Fatalf ends the test's goroutine
	return zero
}
