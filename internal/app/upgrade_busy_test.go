package app_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/waittest"
)

// stepClock is the broker's clock and the local engine's Sleep: it moves
// only when the test advances it, and a wait ends once the clock passed
// its end (or the engine closes), so that a busy instance's minute between
// tries passes when the test says.
type stepClock struct {
	mu    sync.Mutex
	now   time.Time
	moved chan struct{} // closed, and made again, at each advance
}

func newStepClock() *stepClock { return &stepClock{now: time.Now().UTC(), moved: make(chan struct{})} }

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	close(c.moved)
	c.moved = make(chan struct{})
}

func (c *stepClock) Sleep(ctx context.Context, d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		passed, moved := !c.now.Before(end), c.moved
		c.mu.Unlock()
		if passed {
			return
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return
		}
	}
}

// TestAFleetUpgradeRetriesABusyInstanceUntilItIsFree: an instance whose
// own update is in flight (held) when its turn comes is not skipped: ops
// upgrade status shows it busy, with why, while the others are upgraded;
// once its update ends, a later try upgrades it, and the campaign finishes
// with every instance upgraded. Time is the test's clock: no test sleeps.
func TestAFleetUpgradeRetriesABusyInstanceUntilItIsFree(t *testing.T) {
	clock := newStepClock()
	b := apptest.StartWith(t, apptest.Options{ReapInterval: -1, Now: clock.Now, Sleep: clock.Sleep})
	service, plan := b.Plan("fake-async-plan")
	ids := []string{"busy-0", "busy-1", "busy-2"}
	plantBehind(t, b, service, plan, "0.9.0", ids...)
	busy := ids[1]
	b.Hold(busy)
	r := b.Do(apptest.Request{Method: http.MethodPatch, Path: "/v2/service_instances/" + busy + "?accepts_incomplete=true",
		Body: map[string]any{"service_id": service, "parameters": map[string]any{"duration_seconds": 0}}})
	if r.Status != http.StatusAccepted {
		t.Fatalf("the update that keeps %s busy: %d %s", busy, r.Status, r.Raw)
	}
	held := r.Str("operation")

	id, err := startCampaignOps(t, b.Local.Broker, false, "--plan", plan, "--max-in-flight", "1")
	if err != nil {
		t.Fatalf("ops upgrade start: %v", err)
	}
	item := func(status map[string]any, inst string) map[string]any {
		for _, it := range status["items"].([]any) {
			if it := it.(map[string]any); it["instance_id"] == inst {
				return it
			}
		}
		t.Fatalf("ops upgrade status lists no %s: %v", inst, status)
		return nil
	}
	// Its turn comes while its update runs; the others are upgraded.
	waittest.Until(t, func() error {
		if _, _, err := b.Local.Broker.Campaigns.LoadCampaign(t.Context(), id); err != nil {
			return fmt.Errorf("the campaign is not planned yet: %w", err)
		}
		status, _ := campaignStatusJSON(t, b.Local.Broker, id)
		it := item(status, busy)
		if state := broker.ItemState(fmt.Sprint(it["state"])); state.Ended() {
			t.Fatalf("%s, busy while its turn came, ended %s: %v", busy, state, it["description"])
		}
		others := item(status, ids[0])["state"] == "upgraded" && item(status, ids[2])["state"] == "upgraded"
		if it["state"] != "busy" || !others {
			clock.advance(time.Second)
			return fmt.Errorf("%s is %v, the others %v and %v: want it busy, them upgraded", busy, it["state"],
				item(status, ids[0])["state"], item(status, ids[2])["state"])
		}
		return nil
	})
	status, _ := campaignStatusJSON(t, b.Local.Broker, id)
	if it := item(status, busy); !strings.Contains(fmt.Sprint(it["description"]), "in progress") || it["busy_attempts"] == nil {
		t.Errorf("the busy item says %q after %v attempts, want why (an operation in progress) and its busy_attempts", it["description"], it["busy_attempts"])
	}
	if status["state"] != "running" {
		t.Errorf("the campaign is %v while an instance is busy, want running", status["state"])
	}
	var text bytes.Buffer
	if err := app.OpsUpgrade(t.Context(), b.Local.Broker, []string{"status", id}, false, true, &text); err != nil {
		t.Errorf("ops upgrade status while busy: %v", err)
	}
	if line := lineOf(text.String(), busy); !strings.Contains(line, " busy ") {
		t.Errorf("ops upgrade status shows %s as %q, want busy:\n%s", busy, line, text.String())
	}

	// Its update ends; a later try upgrades it.
	b.Release(busy)
	waittest.Until(t, func() error {
		c, _, err := b.Local.Broker.Campaigns.LoadCampaign(t.Context(), id)
		if err != nil || c.State == broker.CampaignRunning {
			clock.advance(10 * time.Second)
			return fmt.Errorf("the campaign is %s (%v)", c.State, err)
		}
		return nil
	})
	status, failed := campaignStatusJSON(t, b.Local.Broker, id)
	if failed != nil || status["state"] != "finished" {
		t.Errorf("the campaign: %v %v, want it finished, ops exiting 0", status["state"], failed)
	}
	for _, inst := range ids {
		if it := item(status, inst); it["state"] != "upgraded" {
			t.Errorf("%s: %s %v, want upgraded", inst, it["state"], it["description"])
		}
	}
	if lo := b.Do(apptest.Request{Method: http.MethodGet, Path: "/v2/service_instances/" + busy + "/last_operation?operation=" + held}); lo.Str("state") != "succeeded" {
		t.Errorf("the update that kept %s busy: %s, want succeeded", busy, lo.Raw)
	}
	if v := instanceVersion(t, b, busy); v == "0.9.0" {
		t.Errorf("%s still runs %s", busy, v)
	}
}

// lineOf is the line of text that names s.
func lineOf(text, s string) string {
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}
