package osbtest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/osbtest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// fakeT records a helper's Fatalf, and ends the goroutine as testing.T's
// does.
type fakeT struct {
	testing.TB
	mu    sync.Mutex
	fatal string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatal = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// run calls helper with a fakeT on a goroutine of its own (Fatalf ends it)
// and returns what it failed with ("" when it did not).
func run(t *testing.T, helper func(tb testing.TB)) string {
	t.Helper()
	f := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		helper(f)
	}()
	waittest.Recv(t, done, "the helper's return")
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fatal
}

// broker answers last_operation (of instances and bindings alike) in
// progress for the first inProgress polls, with retryAfter ("" for none),
// and then with status and body.
func broker(t *testing.T, inProgress int, retryAfter string, status int, body string) (osb.Client, *atomic.Int32) {
	t.Helper()
	var polls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/last_operation") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if int(polls.Add(1)) <= inProgress {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			fmt.Fprint(w, `{"state":"in progress"}`)
			return
		}
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return osbtest.Client(t, srv.URL, "user", "password"), &polls
}

func TestPoll(t *testing.T) {
	op := osb.OperationKey("op-1")
	t.Run("it polls until the operation ends and returns its state and description", func(t *testing.T) {
		c, polls := broker(t, 3, "1", http.StatusOK, `{"state":"failed","description":"the quota is spent"}`)
		var state osb.LastOperationState
		var description string
		fatal := run(t, func(tb testing.TB) { state, description = osbtest.Poll(tb, c, "i-1", "s-1", &op) })
		if fatal != "" || state != osb.StateFailed || description != "the quota is spent" || polls.Load() != 4 {
			t.Fatalf("Poll: %s %q after %d polls, failed with %q; want failed, its description, after 4", state, description, polls.Load(), fatal)
		}
	})
	t.Run("a 410 is reported as gone", func(t *testing.T) {
		c, _ := broker(t, 1, "", http.StatusGone, `{}`)
		var state osb.LastOperationState
		fatal := run(t, func(tb testing.TB) { state, _ = osbtest.PollBinding(tb, c, "i-1", "b-1", &op) })
		if fatal != "" || state != osbtest.Gone {
			t.Fatalf("PollBinding after a 410: %q, failed with %q; want gone", state, fatal)
		}
	})
	t.Run("any other error fails the test", func(t *testing.T) {
		c, _ := broker(t, 0, "", http.StatusInternalServerError, `{"description":"boom"}`)
		fatal := run(t, func(tb testing.TB) { osbtest.Poll(tb, c, "i-1", "s-1", &op) })
		if !strings.Contains(fatal, "poll the operation on i-1") {
			t.Fatalf("Poll on a 500 failed with %q, want the poll's error", fatal)
		}
	})
	t.Run("RetryAfter fails the test on an answer in progress without one long enough", func(t *testing.T) {
		for _, header := range []string{"", "1"} {
			c, _ := broker(t, 1, header, http.StatusOK, `{"state":"succeeded"}`)
			fatal := run(t, func(tb testing.TB) { osbtest.Poll(tb, c, "i-1", "s-1", &op, osbtest.RetryAfter(2*time.Second)) })
			if !strings.Contains(fatal, "without a Retry-After of at least 2s") {
				t.Fatalf("Retry-After %q, want at least 2 s: failed with %q", header, fatal)
			}
		}
		c, _ := broker(t, 1, "2", http.StatusOK, `{"state":"succeeded"}`)
		if fatal := run(t, func(tb testing.TB) { osbtest.Poll(tb, c, "i-1", "s-1", &op, osbtest.RetryAfter(2*time.Second)) }); fatal != "" {
			t.Fatalf("Retry-After 2, want at least 2 s: failed with %q", fatal)
		}
	})
}

func TestIsStatusAndIsOSBError(t *testing.T) {
	msg := "AsyncRequired"
	h := osb.HTTPStatusCodeError{StatusCode: http.StatusUnprocessableEntity, ErrorMessage: &msg}
	for name, err := range map[string]error{
		"the client's error":         h,
		"a pointer to it":            &h,
		"the client's error wrapped": fmt.Errorf("provision: %w", h),
	} {
		t.Run(name+" is found", func(t *testing.T) {
			if !osbtest.IsStatus(err, http.StatusUnprocessableEntity) || osbtest.IsStatus(err, http.StatusBadRequest) {
				t.Errorf("IsStatus(%v) does not tell 422 from 400", err)
			}
			if !osbtest.IsOSBError(err, http.StatusUnprocessableEntity, "AsyncRequired") || osbtest.IsOSBError(err, http.StatusUnprocessableEntity, "ConcurrencyError") {
				t.Errorf("IsOSBError(%v) does not tell AsyncRequired from ConcurrencyError", err)
			}
		})
	}
	t.Run("another error is no status", func(t *testing.T) {
		if osbtest.IsStatus(fmt.Errorf("dial: refused"), 0) || osbtest.IsStatus(nil, 0) {
			t.Error("IsStatus found a status in an error that has none")
		}
	})
}
