package broker_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
)

// upgraded is h's broker after the catalog raised plan-sync's version to
// 2.0.0: the instances h made on 1.0.0 run behind it.
func upgraded(t *testing.T, h *harness) *broker.Broker {
	t.Helper()
	cat, err := catalog.Parse("test-catalog.yaml", []byte(strings.Replace(testCatalog,
		`maintenance_info: {version: "1.0.0"}`, `maintenance_info: {version: "2.0.0"}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	b := broker.New(cat, h.writes, h.engine, driversOf{h.driver}, slog.New(slog.DiscardHandler))
	b.Now, b.NewID, b.Backoff = h.clock.Now, h.b.NewID, 0
	b.Campaigns = h.store
	return b
}

// campaignOf writes a campaign of the instances ids (the first a canary),
// as its Plan Task would.
func campaignOf(t *testing.T, b *broker.Broker, id string, maxFailures int, ids ...string) {
	t.Helper()
	c := broker.Campaign{ID: id, State: broker.CampaignRunning, CreatedAt: b.Now(),
		Options: broker.CampaignOptions{PlanIDs: []string{planSync}, Canaries: 1, MaxInFlight: 2, MaxFailures: maxFailures}}
	var items []broker.CampaignItem
	for i, inst := range ids {
		items = append(items, broker.CampaignItem{CampaignID: id, InstanceID: inst, ServiceID: "svc-test", PlanID: planSync,
			Order: i, Canary: i == 0, State: broker.ItemPending, FromVersion: "1.0.0", ToVersion: "2.0.0"})
	}
	if err := b.Campaigns.CreateCampaign(ctx, c, items); err != nil {
		t.Fatal(err)
	}
}

// runLane runs one lane of phase to its end, each item's Task twice (as
// a Task run again after a lost answer), and returns how it ended.
func runLane(t *testing.T, b *broker.Broker, id string, phase broker.Phase) broker.ClaimAction {
	t.Helper()
	for range 20 {
		claim, err := b.UpgradeClaimTask(ctx, id, phase, nil, broker.UpgradeLane{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if claim.Action != broker.ClaimStart {
			return claim.Action
		}
		for range 2 {
			if _, err := b.UpgradeItemTask(ctx, id, claim.InstanceID, false, claim, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Fatal("the lane never ended")
	return ""
}

// itemStates are the items of campaign id (in claim order) and their
// states, "i-1:upgraded i-2:failed ...".
func itemStates(t *testing.T, b *broker.Broker, id string) ([]broker.CampaignItem, string) {
	t.Helper()
	_, items, err := b.Campaigns.LoadCampaign(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, it := range items {
		states = append(states, it.InstanceID+":"+string(it.State))
	}
	return items, strings.Join(states, " ")
}

func updates(h *harness, id string) int {
	n := 0
	for _, op := range h.ops(id) {
		if op.Kind == broker.KindUpdate {
			n++
		}
	}
	return n
}

func TestAFleetUpgradeMovesEachInstanceOnceCanaryFirst(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"i-1", "i-2", "i-3"} {
		h.ready(id, planSync)
	}
	b := upgraded(t, h)
	campaignOf(t, b, "upg-1", 1, "i-1", "i-2", "i-3")
	if got := runLane(t, b, "upg-1", broker.PhaseCanary); got != broker.ClaimNone {
		t.Fatalf("the canary lane ended with %s, want none", got)
	}
	_, items, _ := b.Campaigns.LoadCampaign(ctx, "upg-1")
	if items[0].State != broker.ItemUpgraded || items[1].State != broker.ItemPending {
		t.Fatalf("after the canary phase: %s %s, want the canary upgraded and the rest pending", items[0].State, items[1].State)
	}
	runLane(t, b, "upg-1", broker.PhaseRest)
	rep, err := b.UpgradeFinishTask(ctx, "upg-1")
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Ended || rep.State != broker.CampaignFinished || rep.Tally.Upgraded != 3 {
		t.Errorf("finish: %+v, want it ended, finished, 3 upgraded", rep)
	}
	for _, id := range []string{"i-1", "i-2", "i-3"} {
		if inst := h.instance(id); inst.MaintenanceInfo == nil || inst.MaintenanceInfo.Version != "2.0.0" {
			t.Errorf("%s runs %+v, want 2.0.0", id, inst.MaintenanceInfo)
		}
		if n := updates(h, id); n != 1 {
			t.Errorf("%s was updated %d times, want once", id, n)
		}
	}
	if again, _ := b.UpgradeFinishTask(ctx, "upg-1"); again.Ended {
		t.Error("a Finish run again ended the campaign again (its metrics would count twice)")
	}
	// A campaign of instances now current skips them, saying so.
	campaignOf(t, b, "upg-2", 1, "i-1")
	runLane(t, b, "upg-2", broker.PhaseRest)
	it, _ := b.Campaigns.GetCampaignItem(ctx, "upg-2", "i-1")
	if it.State != broker.ItemSkipped || !strings.Contains(it.Description, "already current") {
		t.Errorf("an instance already current: %s %q, want skipped, already current", it.State, it.Description)
	}
}

func TestAFleetUpgradeStopsAfterMaxFailures(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"i-1", "i-2", "i-3", "i-4"} {
		h.ready(id, planSync)
	}
	b := upgraded(t, h)
	campaignOf(t, b, "upg-1", 1, "i-1", "i-2", "i-3", "i-4")
	runLane(t, b, "upg-1", broker.PhaseCanary)
	h.driver.on("begin", broker.KindUpdate, fails("The engine version is not available."))
	if got := runLane(t, b, "upg-1", broker.PhaseRest); got != broker.ClaimStop {
		t.Fatalf("the lane ended with %s, want stop after 1 failure", got)
	}
	rep, err := b.UpgradeFinishTask(ctx, "upg-1")
	if err != nil {
		t.Fatal(err)
	}
	items, got := itemStates(t, b, "upg-1")
	want := "i-1:upgraded i-2:failed i-3:not_attempted i-4:not_attempted"
	if got != want || rep.State != broker.CampaignStopped {
		t.Errorf("got %s (%s), want %s (stopped)", got, rep.State, want)
	}
	if !strings.Contains(items[1].Description, "The engine version is not available.") {
		t.Errorf("the failed item says %q, want the update's failure", items[1].Description)
	}
	if n := updates(h, "i-3"); n != 0 {
		t.Errorf("i-3 was updated %d times after the campaign stopped", n)
	}
}

// TestALaneClaimingAgainAdoptsTheItemItLeftRunning: a lane's Claim run
// again (its answer lost, or its Map run again after a crash) finds the
// item it claimed running under its id and takes it up again, rather than
// claiming another beside it; another lane claims the next.
func TestALaneClaimingAgainAdoptsTheItemItLeftRunning(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"i-1", "i-2", "i-3"} {
		h.ready(id, planSync)
	}
	b := upgraded(t, h)
	campaignOf(t, b, "upg-1", 1, "i-1", "i-2", "i-3")
	zero, one := 0, 1
	first, err := b.UpgradeClaimTask(ctx, "upg-1", broker.PhaseRest, &zero, broker.UpgradeLane{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.UpgradeClaimTask(ctx, "upg-1", broker.PhaseRest, &zero, broker.UpgradeLane{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if first.Action != broker.ClaimStart || again.Action != broker.ClaimStart || again.InstanceID != first.InstanceID {
		t.Fatalf("lane 0 claimed %s %s, then again %s %s: want the same item twice", first.Action, first.InstanceID, again.Action, again.InstanceID)
	}
	other, err := b.UpgradeClaimTask(ctx, "upg-1", broker.PhaseRest, &one, broker.UpgradeLane{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if other.InstanceID == first.InstanceID {
		t.Errorf("lane 1 claimed %s, lane 0's item", other.InstanceID)
	}
	_, items, _ := b.Campaigns.LoadCampaign(ctx, "upg-1")
	running := map[string]string{}
	for _, it := range items {
		if it.State == broker.ItemRunning {
			running[it.InstanceID] = it.Lane
		}
	}
	if len(running) != 2 || running[first.InstanceID] != "rest/0" || running[other.InstanceID] != "rest/1" {
		t.Errorf("running items by lane: %v, want %s under rest/0 and %s under rest/1", running, first.InstanceID, other.InstanceID)
	}
}

// TestACampaignIsKeptPastItsEndHoweverLongItRuns: a campaign's records
// (DynamoDB drops them at their expiry) are kept the retention past the
// end of the execution that runs it, pushed forward by each execution it
// continues in, and set from its end once it ends: one that runs longer
// than its first execution's window never expires while it runs.
func TestACampaignIsKeptPastItsEndHoweverLongItRuns(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"i-1", "i-2"} {
		h.ready(id, planSync)
	}
	b := upgraded(t, h)
	o := broker.CampaignOptions{PlanIDs: []string{planSync}, MaxInFlight: 1, MaxFailures: 1}
	if _, err := b.UpgradePlanTask(ctx, "upg-1", 1, o); err != nil {
		t.Fatal(err)
	}
	expiries := func(when string, want time.Time) {
		t.Helper()
		c, items, err := b.Campaigns.LoadCampaign(ctx, "upg-1")
		if err != nil {
			t.Fatal(err)
		}
		if !c.ExpiresAt.Equal(want) {
			t.Errorf("%s the campaign expires at %s, want %s", when, c.ExpiresAt, want)
		}
		for _, it := range items {
			if !it.ExpiresAt.Equal(want) {
				t.Errorf("%s item %s (%s) expires at %s, want %s", when, it.InstanceID, it.State, it.ExpiresAt, want)
			}
		}
	}
	window := 7*24*time.Hour + broker.CampaignRetention
	expiries("planned,", h.clock.Now().Add(window))

	// The first execution's lane upgrades one item and yields; the
	// campaign continues, 36 days on (a long campaign, many parts).
	lane := 0
	claim, err := b.UpgradeClaimTask(ctx, "upg-1", broker.PhaseRest, &lane, broker.UpgradeLane{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.UpgradeItemTask(ctx, "upg-1", claim.InstanceID, false, claim, 0); err != nil {
		t.Fatal(err)
	}
	h.clock.advance(36 * 24 * time.Hour)
	next, err := b.UpgradeContinueTask(ctx, "upg-1", 1, broker.PhaseRest)
	if err != nil || !next.Continued {
		t.Fatalf("continue: %+v %v, want the campaign continued (an item left)", next, err)
	}
	expiries("continued 36 days on,", h.clock.Now().Add(window))

	h.clock.advance(36 * 24 * time.Hour)
	runLane(t, b, "upg-1", broker.PhaseRest)
	if _, err := b.UpgradeFinishTask(ctx, "upg-1"); err != nil {
		t.Fatal(err)
	}
	expiries("ended,", h.clock.Now().Add(broker.CampaignRetention))
	if list, err := b.Campaigns.ListCampaigns(ctx); err != nil || len(list) != 1 || !list[0].ExpiresAt.Equal(h.clock.Now().Add(broker.CampaignRetention)) {
		t.Errorf("listed: %+v %v, want the campaign expiring %s past its end", list, err, broker.CampaignRetention)
	}
}

// TestACanaryWhoseTaskFailsStopsTheCampaign: the workflow's Catch of a
// canary's Task (UpgradeItemFailedTask) records the item failed, once; the
// Tally after the canaries then stops the campaign, and its Finish leaves
// the other instances not attempted, never updated.
func TestACanaryWhoseTaskFailsStopsTheCampaign(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"i-1", "i-2", "i-3"} {
		h.ready(id, planSync)
	}
	b := upgraded(t, h)
	campaignOf(t, b, "upg-1", 1, "i-1", "i-2", "i-3")
	stop, err := b.UpgradeTallyTask(ctx, "upg-1")
	if err != nil || stop.Stop {
		t.Fatalf("before any failure: stop %v (%v), want the campaign to go on", stop.Stop, err)
	}
	claim, err := b.UpgradeClaimTask(ctx, "upg-1", broker.PhaseCanary, nil, broker.UpgradeLane{}, 0)
	if err != nil || claim.Action != broker.ClaimStart || claim.InstanceID != "i-1" {
		t.Fatalf("claim %+v (%v), want the canary i-1", claim, err)
	}
	// The Task's error, as the workflow caught it; the Catch run twice.
	for range 2 {
		if err := b.UpgradeItemFailedTask(ctx, "upg-1", "i-1", broker.Failure{Description: "The worker timed out."}); err != nil {
			t.Fatal(err)
		}
	}
	// A payload naming no item of the campaign records nothing.
	if err := b.UpgradeItemFailedTask(ctx, "upg-1", "i-9", broker.Failure{}); err != nil {
		t.Fatal(err)
	}
	stop, err = b.UpgradeTallyTask(ctx, "upg-1")
	if err != nil || !stop.Stop || stop.Tally.Failed != 1 {
		t.Fatalf("after the canary failed: %+v (%v), want stop with 1 failed", stop, err)
	}
	rep, err := b.UpgradeFinishTask(ctx, "upg-1")
	if err != nil {
		t.Fatal(err)
	}
	items, got := itemStates(t, b, "upg-1")
	if want := "i-1:failed i-2:not_attempted i-3:not_attempted"; got != want || rep.State != broker.CampaignStopped {
		t.Errorf("got %s (%s), want %s (stopped)", got, rep.State, want)
	}
	if items[0].Description != "The worker timed out." {
		t.Errorf("the canary says %q, want the caught failure's description", items[0].Description)
	}
	for _, id := range []string{"i-1", "i-2", "i-3"} {
		if n := updates(h, id); n != 0 {
			t.Errorf("%s was updated %d times", id, n)
		}
	}
}

// TestACampaignNamingNoInstanceOfItsPlansDoesNotStart: the Plan Task
// refuses, as a Failure for the operator, a skip or defer naming an
// instance that does not exist or is of a plan the campaign leaves, and
// writes nothing; one naming its own instances plans the campaign.
func TestACampaignNamingNoInstanceOfItsPlansDoesNotStart(t *testing.T) {
	h := newHarness(t)
	h.ready("i-1", planSync)
	h.ready("i-2", planSync)
	h.ready("i-other", planLarge)
	b := upgraded(t, h)
	o := broker.CampaignOptions{PlanIDs: []string{planSync}, MaxInFlight: 1, MaxFailures: 1}
	for _, tc := range []struct {
		name       string
		skip, dfer []string
		want       string
	}{
		{"a misspelt id", []string{"i-l"}, nil, "skip names instance i-l, which does not exist"},
		{"an instance of another plan", nil, []string{"i-other"}, "defer names instance i-other, whose plan " + planLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := o
			bad.Skip, bad.Defer = tc.skip, tc.dfer
			_, err := b.UpgradePlanTask(ctx, "upg-bad", 1, bad)
			var f *broker.Failure
			if !errors.As(err, &f) || !strings.Contains(f.Description, tc.want) {
				t.Fatalf("plan: %v, want a Failure saying %q", err, tc.want)
			}
			if _, _, err := b.Campaigns.LoadCampaign(ctx, "upg-bad"); !errors.Is(err, broker.ErrNotFound) {
				t.Errorf("a refused campaign was stored: %v", err)
			}
		})
	}
	good := o
	good.Skip, good.Defer = []string{"i-1"}, []string{"i-2"}
	if _, err := b.UpgradePlanTask(ctx, "upg-good", 1, good); err != nil {
		t.Fatal(err)
	}
	if _, got := itemStates(t, b, "upg-good"); got != "i-1:skipped i-2:pending" {
		t.Errorf("items %s, want i-1 skipped and i-2 pending", got)
	}
}
