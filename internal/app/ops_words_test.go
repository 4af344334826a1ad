package app_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
)

// TestOpsAnswersInItsOwnWords: ops' JSON is the operator's contract, which
// scripts read: a campaign's options and tally (ops upgrade status, list)
// and the reaper's report (ops reap) keep their names whatever the domain's
// fields or the workflow's JSON are called.
func TestOpsAnswersInItsOwnWords(t *testing.T) {
	b := apptest.StartWith(t, apptest.Options{ReapInterval: -1})
	ctx := t.Context()
	now := time.Now().UTC()
	c := broker.Campaign{ID: "upg-words", State: broker.CampaignRunning, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour),
		Options: broker.CampaignOptions{PlanIDs: []string{"plan-1"}, Canaries: 1, MaxInFlight: 2, MaxFailures: 3, DryRun: true,
			Skip: []string{"i-8"}, Defer: []string{"i-9"}}}
	items := []broker.CampaignItem{
		{CampaignID: c.ID, InstanceID: "i-1", PlanID: "plan-1", Order: 0, Canary: true, State: broker.ItemFailed, UpdatedAt: now},
		{CampaignID: c.ID, InstanceID: "i-2", PlanID: "plan-1", Order: 1, State: broker.ItemWouldChange, UpdatedAt: now},
	}
	if err := b.Local.Broker.Campaigns.CreateCampaign(ctx, c, items); err != nil {
		t.Fatal(err)
	}
	options := map[string]any{"plan_ids": []any{"plan-1"}, "canaries": 1.0, "max_in_flight": 2.0, "max_failures": 3.0, "dry_run": true,
		"skip": []any{"i-8"}, "defer": []any{"i-9"}}
	t.Run("ops upgrade status names the options and the tally", func(t *testing.T) {
		var out bytes.Buffer
		failed := app.OpsUpgrade(ctx, b.Local.Broker, []string{"status", c.ID}, true, true, &out)
		var status map[string]any
		if err := json.Unmarshal(out.Bytes(), &status); err != nil || failed == nil {
			t.Fatalf("status %s (%v), exit error %v: want JSON and a non-zero exit", out.String(), err, failed)
		}
		if !reflect.DeepEqual(status["options"], options) {
			t.Errorf("options %v, want %v", status["options"], options)
		}
		tally := map[string]any{"items": 2.0, "pending": 0.0, "running": 0.0, "busy": 0.0, "upgraded": 0.0, "failed": 1.0,
			"skipped": 0.0, "not_attempted": 0.0, "would_change": 1.0, "would_refuse": 0.0, "canary_failed": true, "blocked": 0.0}
		if !reflect.DeepEqual(status["tally"], tally) {
			t.Errorf("tally %v, want %v", status["tally"], tally)
		}
	})
	t.Run("ops upgrade list names the options", func(t *testing.T) {
		var out bytes.Buffer
		if err := app.OpsUpgrade(ctx, b.Local.Broker, []string{"list"}, true, true, &out); err != nil {
			t.Fatal(err)
		}
		var list []map[string]any
		if err := json.Unmarshal(out.Bytes(), &list); err != nil || len(list) != 1 || !reflect.DeepEqual(list[0]["options"], options) {
			t.Fatalf("list %s (%v), want the campaign with options %v", out.String(), err, options)
		}
	})
	t.Run("ops reap names what the reaper did", func(t *testing.T) {
		var out bytes.Buffer
		if err := app.OpsJSON(ctx, b.Local.Broker, []string{"reap"}, &out); err != nil {
			t.Fatal(err)
		}
		var rep map[string]any
		want := map[string]any{"in_progress": 0.0, "restarted": 0.0, "failed": 0.0, "timed_out": 0.0, "detached": 0.0,
			"cleanups_started": 0.0, "cleanups_failed": 0.0, "expired": 0.0}
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil || !reflect.DeepEqual(rep, want) {
			t.Fatalf("ops reap %s (%v), want %v", out.String(), err, want)
		}
	})
}
