package app_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/waittest"
)

// TestTheLocalReaperDeletesExecutionsThatEndedLongAgo: the local engine's
// file does not keep every execution it ever ran. An asynchronous
// provision's execution stays while the broker may read it, and the reaper
// deletes it once it ended more than the retention (30 days, a campaign's)
// ago; the instance stays, and a newer execution too.
func TestTheLocalReaperDeletesExecutionsThatEndedLongAgo(t *testing.T) {
	t0 := time.Now()
	var now atomic.Pointer[time.Time]
	now.Store(&t0)
	b := apptest.StartWith(t, apptest.Options{ReapInterval: 10 * time.Millisecond, Now: func() time.Time { return *now.Load() }})
	service, plan := b.Plan("fake-async-plan")
	provision := func(id string) string {
		t.Helper()
		r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/" + id + "?accepts_incomplete=true",
			Body: provisionBody(service, plan, map[string]any{})})
		if r.Status != http.StatusAccepted {
			t.Fatalf("provision %s: %d %s", id, r.Status, r.Raw)
		}
		if r := b.WaitLastOperation("/v2/service_instances/" + id + "/last_operation"); r.Str("state") != "succeeded" {
			t.Fatalf("provision %s: %s", id, r.Raw)
		}
		return r.Str("operation")
	}
	ctx := context.Background()
	old := provision("pruned-old")
	if x, err := b.Local.Engine.Describe(ctx, old); err != nil || x.Status != broker.ExecutionSucceeded {
		t.Fatalf("the provision's execution %s: %s, %v", old, x.Status, err)
	}

	later := t0.Add(31 * 24 * time.Hour)
	now.Store(&later)
	recent := provision("pruned-new")
	// The reaper deletes hourly, by the broker's clock: an hour passes at
	// each look, so that a deletion that ran while the record was still
	// held in memory (written with a later commit) runs again.
	waittest.Until(t, func() error {
		next := now.Load().Add(time.Hour)
		now.Store(&next)
		switch _, err := b.Local.Engine.Describe(ctx, old); {
		case errors.Is(err, broker.ErrExecutionNotFound):
			return nil
		case err != nil:
			t.Fatalf("Describe(%s) = %v", old, err)
		}
		return fmt.Errorf("the execution %s, ended 31 days ago, is still stored", old)
	})
	if x, err := b.Local.Engine.Describe(ctx, recent); err != nil || x.Status != broker.ExecutionSucceeded {
		t.Errorf("the execution %s, ended now: %s, %v; want SUCCEEDED, kept", recent, x.Status, err)
	}
	if r := b.Do(apptest.Request{Method: http.MethodGet, Path: "/v2/service_instances/pruned-old"}); r.Status != http.StatusOK {
		t.Errorf("fetch the instance whose execution went: %d %s", r.Status, r.Raw)
	}
}
