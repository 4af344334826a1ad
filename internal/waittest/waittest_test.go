package waittest_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/waittest"
)

// fakeT is a test whose binary's deadline is chosen, and whose Fatalf is
// recorded (and ends the goroutine, as testing.T's does).
type fakeT struct {
	testing.TB
	deadline time.Time
	mu       sync.Mutex
	fatal    string
}

func (f *fakeT) Helper()                           {}
func (f *fakeT) Deadline() (time.Time, bool)       { return f.deadline, !f.deadline.IsZero() }
func (f *fakeT) Fatalf(format string, args ...any) { f.record(fmt.Sprintf(format, args...)) }

func (f *fakeT) record(msg string) {
	f.mu.Lock()
	f.fatal = msg
	f.mu.Unlock()
	runtime.Goexit()
}

// run runs body as a test of f and returns what it failed with ("" if it
// did not).
func (f *fakeT) run(body func()) string {
	done := make(chan struct{})
	go func() { defer close(done); body() }()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fatal
}

func TestUntil(t *testing.T) {
	t.Run("it returns once the condition holds", func(t *testing.T) {
		calls := 0
		waittest.Until(t, func() error {
			if calls++; calls < 5 {
				return errors.New("not yet")
			}
			return nil
		})
		if calls != 5 {
			t.Errorf("check called %d times, want 5", calls)
		}
	})
	t.Run("past the deadline it fails with the check's last error", func(t *testing.T) {
		f := &fakeT{TB: t, deadline: time.Now().Add(-time.Minute)}
		msg := f.run(func() {
			waittest.Until(f, func() error { return errors.New("execution x still RUNNING") })
		})
		if !strings.HasPrefix(msg, "execution x still RUNNING (gave up waiting after") {
			t.Errorf("failed with %q, want the check's error and how long it waited", msg)
		}
	})
}

func TestRecv(t *testing.T) {
	t.Run("it returns the value received", func(t *testing.T) {
		ch := make(chan int, 1)
		go func() { ch <- 7 }()
		if got := waittest.Recv(t, ch, "the send"); got != 7 {
			t.Errorf("Recv = %d, want 7", got)
		}
	})
	t.Run("past the deadline it fails naming what did not happen", func(t *testing.T) {
		f := &fakeT{TB: t, deadline: time.Now().Add(-time.Minute)}
		msg := f.run(func() { waittest.Recv(f, make(chan struct{}), "the call") })
		if !strings.HasPrefix(msg, "the call did not happen") {
			t.Errorf("failed with %q, want it to name the call", msg)
		}
	})
}

func TestDeadline(t *testing.T) {
	// Each case gives the binary's deadline and the wait's, as a function
	// of the moment Deadline reads the clock.
	cases := []struct {
		name   string
		binary func(now time.Time) time.Time
		want   func(binary, now time.Time) time.Time
	}{
		{"30 s are left before a distant deadline of the binary",
			func(now time.Time) time.Time { return now.Add(time.Hour) },
			func(binary, _ time.Time) time.Time { return binary.Add(-30 * time.Second) }},
		{"a tenth of the time left is left before a near deadline of the binary",
			func(now time.Time) time.Time { return now.Add(time.Minute) },
			func(binary, now time.Time) time.Time { return binary.Add(-binary.Sub(now) / 10) }},
		{"without a deadline of the binary, waits give up after 10 minutes",
			func(time.Time) time.Time { return time.Time{} },
			func(_, now time.Time) time.Time { return now.Add(10 * time.Minute) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := time.Now()
			binary := c.binary(before)
			got := waittest.Deadline(&fakeT{TB: t, deadline: binary})
			after := time.Now()
			// Deadline read the clock between before and after, and the
			// wanted deadline grows with that reading.
			if lo, hi := c.want(binary, before), c.want(binary, after); got.Before(lo) || got.After(hi) {
				t.Errorf("Deadline = %s, want between %s and %s", got, lo, hi)
			}
		})
	}
}
