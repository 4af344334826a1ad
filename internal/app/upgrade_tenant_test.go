package app_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/waittest"
)

// TestOneTenantCannotStopAFleetUpgrade: through ops upgrade start and
// status, with --max-failures 1. One instance is kept busy by its own
// update past every try, another holds a parameter the new version no
// longer accepts: both end blocked, which counts for the operator (ops
// exits non-zero, the count in text and JSON) but not toward the failures
// that stop the campaign, so every other instance is upgraded. The
// operator skips one instance (left as it is, never claimed) and defers
// another (never the canary, upgraded last).
func TestOneTenantCannotStopAFleetUpgrade(t *testing.T) {
	clock := newStepClock()
	b := apptest.StartWith(t, apptest.Options{ReapInterval: -1, Now: clock.Now, Sleep: clock.Sleep})
	service, plan := b.Plan("fake-async-plan")
	// Oldest first: deferred would be the canary, were it not deferred.
	deferred, canary, busy, retired, skipped, other := "t-deferred", "t-canary", "t-busy", "t-retired", "t-skipped", "t-other"
	// The version the instance was made on took a parameter the new one
	// no longer does.
	plantBehindWith(t, b, service, plan, "0.9.0", map[string]string{retired: `{"retired_option":true}`},
		deferred, canary, busy, retired, skipped, other)

	b.Hold(busy)
	r := b.Do(apptest.Request{Method: http.MethodPatch, Path: "/v2/service_instances/" + busy + "?accepts_incomplete=true",
		Body: map[string]any{"service_id": service, "parameters": map[string]any{"duration_seconds": 0}}})
	if r.Status != http.StatusAccepted {
		t.Fatalf("the update that keeps %s busy: %d %s", busy, r.Status, r.Raw)
	}

	// A misspelt id is refused before anything starts.
	var out bytes.Buffer
	err := app.OpsUpgrade(t.Context(), b.Local.Broker, []string{"start", "--plan", plan, "--skip", "t-skiped"}, true, false, &out)
	if err == nil || !strings.Contains(err.Error(), "t-skiped") || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("ops upgrade start --skip naming no instance: %v, want a refusal naming it", err)
	}
	if cs, _ := b.Local.Broker.Campaigns.ListCampaigns(t.Context()); len(cs) != 0 {
		t.Fatalf("a refused start left %d campaigns", len(cs))
	}

	id, err := startCampaignOps(t, b.Local.Broker, false, "--plan", plan, "--canaries", "1", "--max-failures", "1",
		"--skip", skipped, "--defer", deferred)
	if err != nil {
		t.Fatalf("ops upgrade start: %v", err)
	}
	waittest.Until(t, func() error {
		c, _, err := b.Local.Broker.Campaigns.LoadCampaign(t.Context(), id)
		if err != nil || c.State == broker.CampaignRunning {
			clock.advance(broker.BusyRetry)
			return fmt.Errorf("the campaign is %s (%v)", c.State, err)
		}
		return nil
	})

	status, failed := campaignStatusJSON(t, b.Local.Broker, id)
	if failed == nil || !strings.Contains(failed.Error(), "2 blocked") {
		t.Errorf("ops upgrade status exits with %v, want non-zero saying 2 blocked", failed)
	}
	if status["state"] != "finished" {
		t.Errorf("the campaign %v (%v), want finished: blocked instances must not stop it", status["state"], status["outcome"])
	}
	tally, _ := status["tally"].(map[string]any)
	if tally["blocked"] != 2.0 || tally["failed"] != 0.0 || tally["upgraded"] != 3.0 || tally["skipped"] != 1.0 {
		t.Errorf("tally %v, want 2 blocked, 0 failed, 3 upgraded, 1 skipped", tally)
	}
	items := status["items"].([]any)
	want := map[string]string{canary: "upgraded", busy: "blocked", retired: "blocked", skipped: "skipped", other: "upgraded", deferred: "upgraded"}
	for _, x := range items {
		it := x.(map[string]any)
		inst := fmt.Sprint(it["instance_id"])
		if it["state"] != want[inst] {
			t.Errorf("%s: %v (%v), want %s", inst, it["state"], it["description"], want[inst])
		}
	}
	describe := func(inst string) string {
		for _, x := range items {
			if it := x.(map[string]any); it["instance_id"] == inst {
				return fmt.Sprint(it["description"])
			}
		}
		return ""
	}
	if d := describe(busy); !strings.Contains(d, "stayed busy") {
		t.Errorf("%s says %q, want that it stayed busy", busy, d)
	}
	if d := describe(retired); !strings.Contains(d, "retired_option") || !strings.Contains(d, "do not fit version 1.0.0") {
		t.Errorf("%s says %q, want the parameter the new version refuses", retired, d)
	}
	if d := describe(skipped); d != "Skipped by the operator." {
		t.Errorf("%s says %q, want skipped by the operator", skipped, d)
	}
	last := items[len(items)-1].(map[string]any)
	first := items[0].(map[string]any)
	if last["instance_id"] != deferred || last["deferred"] != true || first["instance_id"] != canary || first["canary"] != true {
		t.Errorf("claim order %v first, %v last, want the canary %s first and the deferred %s last, marked", first, last, canary, deferred)
	}
	if inst, err := b.Local.Store.GetInstance(t.Context(), skipped); err != nil || inst.MaintenanceInfo.Version != "0.9.0" {
		t.Errorf("the skipped instance: %+v %v, want it left on 0.9.0", inst.MaintenanceInfo, err)
	}
	if _, err := b.Local.Store.GetOperation(t.Context(), skipped, broker.UpgradeOperationID(id, skipped)); err == nil {
		t.Error("the skipped instance was updated by the campaign")
	}

	var text bytes.Buffer
	err = app.OpsUpgrade(t.Context(), b.Local.Broker, []string{"status", id}, false, true, &text)
	if err == nil || !strings.Contains(text.String(), "2 blocked") || !strings.Contains(lineOf(text.String(), deferred), "deferred") {
		t.Errorf("ops upgrade status (text): %v\n%s\nwant 2 blocked in its progress, the deferred instance marked, a non-zero exit", err, text.String())
	}
	c, _, _ := b.Local.Broker.Campaigns.LoadCampaign(t.Context(), id)
	if !strings.Contains(c.Outcome, "2 blocked") || strings.Contains(c.Outcome, "Stopped") {
		t.Errorf("outcome %q, want 2 blocked counted, not a stop", c.Outcome)
	}
	b.Release(busy)
}
