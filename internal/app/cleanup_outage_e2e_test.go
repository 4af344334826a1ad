package app_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/drivers/function"
	"github.com/serverless-osb/broker/internal/waittest"
)

// A cleanup whose target does not answer waits the outage out, as an
// operation does, and says so on its detached record, which `ops detached`
// and `ops operation` show; one past its budget gives up saying since
// when. No test sleeps: the broker's and the engine's clock is outageClock.

// startCleanupDownTarget starts a target that refuses every provision for
// good, so that the broker detaches what it made; the first `down`
// cleanups it gets answer HTTP 503, the next one "not done, again in 7 s",
// the rest done.
func startCleanupDownTarget(t *testing.T, down int) *downTarget {
	return startTarget(t, func(req function.Request, n int) (function.Answer, bool) {
		if req.Call != function.CallCleanup {
			return function.Answer{Version: req.Version,
				Error: &function.AnswerError{Kind: function.ErrorPermanent, Description: "The quota is exhausted."}}, true
		}
		seven := 7.0
		return function.Answer{Version: req.Version, Done: n > down+1, RetryAfter: &seven, Description: "Deleting."}, n > down
	})
}

// failedProvisionOnDownTarget starts a broker whose plans delegate to dt,
// on clock, with store (nil: bolt); provisions instance id, which the
// target refuses; and returns the broker once the provision failed: its
// cleanup is under way.
func failedProvisionOnDownTarget(t *testing.T, dt *downTarget, clock *outageClock, store broker.Store, id string) *apptest.Broker {
	t.Helper()
	b, e := startOutageBroker(t, dt, clock, store)
	r := e.provision(id, e.asyncOnly, true, nil)
	if state, description := e.poll(id, r.OperationKey); state != osb.StateFailed {
		t.Fatalf("provision %s: %q, want failed, leaving its resource to the cleanup", state, description)
	}
	return b
}

// detachedAnswer is one detached resource of `ops --json detached`.
type detachedAnswer struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	Failure string `json:"failure"`
	Outage  *struct {
		Since     time.Time `json:"since"`
		Attempts  int       `json:"attempts"`
		Reason    string    `json:"reason"`
		NextTryAt time.Time `json:"next_try_at"`
	} `json:"outage"`
}

// opsDetached runs `ops detached` in JSON and in text: the one detached
// resource, and the text.
func opsDetached(t *testing.T, b *apptest.Broker) (detachedAnswer, string) {
	t.Helper()
	var js, text bytes.Buffer
	if err := app.OpsJSON(t.Context(), b.Local.Broker, []string{"detached"}, &js); err != nil {
		t.Fatal(err)
	}
	var ds []detachedAnswer
	if err := json.Unmarshal(js.Bytes(), &ds); err != nil || len(ds) != 1 {
		t.Fatalf("ops --json detached: %v\n%s\nwant one detached resource", err, js.String())
	}
	if err := app.Ops(t.Context(), b.Local.Broker, []string{"detached"}, &text); err != nil {
		t.Fatal(err)
	}
	return ds[0], text.String()
}

func TestACleanupShowsTheOutageItWaitsOut(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"bolt", "dynamodb"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			var s broker.Store
			if store == "dynamodb" {
				s = dynamoStore(t)
			}
			// Three cleanups answer 503: waits of 1, 2 and 4 minutes; then
			// one "not done", whose wait (7 s) the outage no longer shows.
			dt := startCleanupDownTarget(t, 3)
			clock := newOutageClock(time.Minute, 2*time.Minute, 4*time.Minute, 7*time.Second)
			b := failedProvisionOnDownTarget(t, dt, clock, s, "co-1")
			since := clock.Now()
			// As ops shows a time: its hour and minute, with the date when
			// it is not the broker's today (a run near midnight UTC).
			hhmm := func(t time.Time) string {
				if t.UTC().Format(time.DateOnly) != clock.Now().UTC().Format(time.DateOnly) {
					return t.UTC().Format("2006-01-02 15:04")
				}
				return t.UTC().Format("15:04")
			}
			for attempt, want := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute} {
				if wait := waittest.Recv(t, clock.held, "the cleanup's wait"); wait != want {
					t.Fatalf("attempt %d: the cleanup waits %s, want %s", attempt+1, wait, want)
				}
				d, text := opsDetached(t, b)
				next := clock.Now().Add(want)
				if d.State != "cleaning" || d.Outage == nil || !d.Outage.Since.Equal(since) || d.Outage.Attempts != attempt+1 ||
					d.Outage.Reason != "HTTP 503" || !d.Outage.NextTryAt.Equal(next) {
					t.Fatalf("attempt %d: ops --json detached %+v (outage %+v), want cleaning, unreachable (HTTP 503) since %s, attempt %d, next try %s",
						attempt+1, d, d.Outage, since, attempt+1, next)
				}
				line := fmt.Sprintf("cleaning — backend unreachable (HTTP 503) since %s, attempt %d, next try %s (UTC)", hhmm(since), attempt+1, hhmm(next))
				if !strings.Contains(text, line) {
					t.Fatalf("attempt %d: ops detached\n%s\nwant %q", attempt+1, text, line)
				}
				if attempt == 0 {
					var out bytes.Buffer
					if err := app.Ops(t.Context(), b.Local.Broker, []string{"operation", "co-1"}, &out); err != nil ||
						!strings.Contains(out.String(), "  outage:      backend unreachable (HTTP 503) since "+hhmm(since)+", attempt 1,") {
						t.Fatalf("ops operation co-1: %v\n%s\nwant the cleanup's outage", err, out.String())
					}
				}
				clock.release <- struct{}{}
			}
			if wait := waittest.Recv(t, clock.held, "the cleanup's wait once the target answers"); wait != 7*time.Second {
				t.Fatalf("the cleanup waits %s once the target answers, want its 7 s", wait)
			}
			if d, text := opsDetached(t, b); d.State != "cleaning" || d.Outage != nil || strings.Contains(text, "unreachable") {
				t.Fatalf("ops detached once the target answers: %+v\n%s\nwant cleaning, with no outage", d, text)
			}
			clock.release <- struct{}{}
			waittest.Until(t, func() error {
				ds, err := b.Local.Store.ListDetached(t.Context())
				if err != nil || len(ds) != 0 {
					return fmt.Errorf("detached %+v (%v), want the resource deleted", ds, err)
				}
				return nil
			})
			if n := dt.Calls(function.CallCleanup); n != 5 {
				t.Errorf("the target got %d cleanups, want 5: three down, one not done, one done", n)
			}
		})
	}
}

func TestACleanupPastItsOutageBudgetGivesUpSayingSinceWhen(t *testing.T) {
	t.Parallel()
	dt := startCleanupDownTarget(t, 1_000_000)
	clock := newOutageClock()
	since := clock.Now()
	b := failedProvisionOnDownTarget(t, dt, clock, nil, "co-2")
	var d detachedAnswer
	waittest.Until(t, func() error {
		ds, err := b.Local.Store.ListDetached(t.Context())
		if err != nil || len(ds) != 1 || ds[0].State != broker.DetachedFailed {
			return errors.New("the cleanup has not given up yet")
		}
		d, _ = opsDetached(t, b)
		return nil
	})
	want := "The cleanup gave up: the service's backend has been unreachable (HTTP 503) since " +
		since.Format("2006-01-02 15:04:05 UTC") + " (13 attempts over 4 hours, the cleanup's limit); the broker tries again 6 hours later."
	if d.Failure != want || d.Outage != nil {
		t.Errorf("ops --json detached: failure %q, outage %+v; want %q and no outage", d.Failure, d.Outage, want)
	}
	if took := clock.Now().Sub(since); took != broker.CleanupOutageBudget+time.Second {
		t.Errorf("gave up after %s of the broker's time, want the budget, 4 hours (and the last second)", took)
	}
	if n := dt.Calls(function.CallCleanup); n != 13 {
		t.Errorf("the target got %d cleanups, want 13", n)
	}
}
