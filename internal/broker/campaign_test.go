package broker

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/catalog"
)

func TestNextClaim(t *testing.T) {
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	item := func(id string, canary bool, state ItemState) CampaignItem {
		return CampaignItem{InstanceID: id, Canary: canary, State: state}
	}
	due := item("busy-due", false, ItemBusy)
	due.NextTry = now.Add(-time.Second)
	later := item("busy-later", false, ItemBusy)
	later.NextTry = now.Add(40 * time.Second)
	started := item("started", false, ItemPending)
	started.OperationID = "upgrade-1" // by a lane of the execution before
	mine := item("mine", false, ItemRunning)
	mine.OperationID, mine.Lane = "upgrade-2", LaneID(PhaseRest, 1) // by this lane, before its Map ran again
	theirs := item("theirs", false, ItemRunning)
	theirs.OperationID, theirs.Lane = "upgrade-3", LaneID(PhaseRest, 0)

	k := func(n int) Campaign { return Campaign{Options: CampaignOptions{MaxInFlight: 3, MaxFailures: n}} }
	for _, tc := range []struct {
		name   string
		c      Campaign
		items  []CampaignItem
		phase  Phase
		lane   string
		want   string
		action ClaimAction
		wait   time.Duration
	}{
		{"the canary phase claims the first pending canary", k(1),
			[]CampaignItem{item("c1", true, ItemUpgraded), item("c2", true, ItemPending), item("o1", false, ItemPending)}, PhaseCanary, "", "c2", ClaimStart, 0},
		{"the canary phase ends when no canary is left, whatever else is pending", k(1),
			[]CampaignItem{item("c1", true, ItemUpgraded), item("o1", false, ItemPending)}, PhaseCanary, "", "", ClaimNone, 0},
		{"the rest phase claims in order", k(1),
			[]CampaignItem{item("c1", true, ItemUpgraded), item("o1", false, ItemRunning), item("o2", false, ItemPending)}, PhaseRest, "", "o2", ClaimStart, 0},
		{"K failures stop the campaign", k(2),
			[]CampaignItem{item("o1", false, ItemFailed), item("o2", false, ItemFailed), item("o3", false, ItemPending)}, PhaseRest, "", "", ClaimStop, 0},
		{"fewer than K failures do not", k(2),
			[]CampaignItem{item("o1", false, ItemFailed), item("o2", false, ItemPending)}, PhaseRest, "", "o2", ClaimStart, 0},
		{"a failed canary stops the campaign whatever K is", k(5),
			[]CampaignItem{item("c1", true, ItemFailed), item("c2", true, ItemPending)}, PhaseCanary, "", "", ClaimStop, 0},
		{"skips, refusals and instances not attempted are no failures", k(1),
			[]CampaignItem{item("o1", false, ItemSkipped), item("o2", false, ItemWouldRefuse), item("o3", false, ItemPending)}, PhaseRest, "", "o3", ClaimStart, 0},
		{"a pending item goes before a busy one that is due", k(1),
			[]CampaignItem{due, item("o2", false, ItemPending)}, PhaseRest, "", "o2", ClaimStart, 0},
		{"a busy item that is due is claimed again", k(1),
			[]CampaignItem{item("o1", false, ItemUpgraded), due}, PhaseRest, "", "busy-due", ClaimStart, 0},
		{"a busy item not yet due makes the lane wait for it, never skips it", k(1),
			[]CampaignItem{item("o1", false, ItemUpgraded), later}, PhaseRest, "", "", ClaimWait, 40 * time.Second},
		{"an item an earlier execution started goes before the pending ones", k(1),
			[]CampaignItem{item("o1", false, ItemPending), started}, PhaseRest, "", "started", ClaimStart, 0},
		{"and is watched to its end once the campaign stops", k(1),
			[]CampaignItem{item("o1", false, ItemFailed), item("o2", false, ItemPending), started}, PhaseRest, "", "started", ClaimStart, 0},
		{"the canary phase adopts no other", k(1),
			[]CampaignItem{item("c1", true, ItemUpgraded), started}, PhaseCanary, "", "", ClaimNone, 0},
		{"nothing left: the lane ends", k(1),
			[]CampaignItem{item("o1", false, ItemUpgraded), item("o2", false, ItemRunning)}, PhaseRest, "", "", ClaimNone, 0},
		{"an item the lane left running goes first, before started and pending ones", k(1),
			[]CampaignItem{item("o1", false, ItemPending), started, theirs, mine}, PhaseRest, LaneID(PhaseRest, 1), "mine", ClaimStart, 0},
		{"and is watched to its end once the campaign stops", k(1),
			[]CampaignItem{item("o1", false, ItemFailed), mine}, PhaseRest, LaneID(PhaseRest, 1), "mine", ClaimStart, 0},
		{"another lane's running item is that lane's", k(1),
			[]CampaignItem{theirs, item("o2", false, ItemPending)}, PhaseRest, LaneID(PhaseRest, 1), "o2", ClaimStart, 0},
		{"the canary lane of the same index is another lane", k(1),
			[]CampaignItem{mine, item("o2", false, ItemPending)}, PhaseRest, LaneID(PhaseCanary, 1), "o2", ClaimStart, 0},
		{"a lane that does not say which it is adopts none", k(1),
			[]CampaignItem{mine, item("o2", false, ItemPending)}, PhaseRest, "", "o2", ClaimStart, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it, action, wait := NextClaim(tc.c, tc.items, tc.phase, tc.lane, now)
			if it.InstanceID != tc.want || action != tc.action || wait != tc.wait {
				t.Errorf("got %q %s %s, want %q %s %s", it.InstanceID, action, wait, tc.want, tc.action, tc.wait)
			}
		})
	}
}

func TestBusyAgain(t *testing.T) {
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	it := busyAgain(CampaignItem{State: ItemRunning}, now, "an update is in progress")
	if it.State != ItemBusy || it.Attempts != 1 || !it.NextTry.Equal(now.Add(BusyRetry)) {
		t.Errorf("first busy: %+v, want busy, 1 attempt, next try in %s", it, BusyRetry)
	}
	it = busyAgain(CampaignItem{State: ItemRunning, Attempts: MaxBusyAttempts - 1}, now, "an update is in progress")
	if it.State != ItemBlocked || !strings.Contains(it.Description, "stayed busy") || !strings.Contains(it.Description, "an update is in progress") {
		t.Errorf("busy past the limit: %+v, want blocked saying it stayed busy, and why", it)
	}
	// Blocked is bad for the operator, and no failure of the campaign.
	if tally := TallyItems([]CampaignItem{it}); tally.Blocked != 1 || tally.Failed != 0 || tally.Stops(CampaignOptions{MaxFailures: 1}) || !it.State.Bad() {
		t.Errorf("a blocked item tallies %+v (stops: %v, bad: %v), want 1 blocked, not stopping the campaign, bad for ops",
			tally, tally.Stops(CampaignOptions{MaxFailures: 1}), it.State.Bad())
	}
}

func TestPlanItems(t *testing.T) {
	plan := &catalog.Plan{ID: "p", Name: "standard", MaintenanceInfo: &catalog.MaintenanceInfo{Version: "2.0.0"}}
	at := func(s int) time.Time { return time.Date(2026, 5, 1, 10, 0, s, 0, time.UTC) }
	inst := func(id string, created int, version string, state InstanceState, org, space string) Instance {
		i := Instance{ID: id, InstanceRequest: InstanceRequest{ServiceID: "s", PlanID: "p",
			MaintenanceInfo: &MaintenanceInfo{Version: version}}, State: state, CreatedAt: at(created)}
		i.Context, _ = json.Marshal(map[string]string{"platform": "cloudfoundry", "organization_guid": org, "space_guid": space})
		return i
	}
	fleet := []Instance{
		inst("d", 4, "1.0.0", InstanceReady, "org-b", "space-2"),
		inst("a", 1, "1.0.0", InstanceReady, "org-a", "space-1"),
		inst("current", 0, "2.0.0", InstanceReady, "org-a", "space-1"),
		inst("b", 2, "1.0.0", InstanceFailed, "org-a", "space-1"),
		inst("c", 3, "1.0.0", InstanceReady, "org-b", "space-1"),
	}
	behind := func(i Instance) (bool, *catalog.Plan) {
		return i.RunsVersion().Behind(PlanVersion{Version: plan.MaintenanceInfo.Version}), plan
	}
	for _, tc := range []struct {
		name string
		o    CampaignOptions
		want string // id:state[:canary], in claim order
	}{
		{"no canaries: the instances behind, oldest first; a failed one listed skipped", CampaignOptions{},
			"a:pending b:skipped c:pending d:pending"},
		{"a number of canaries: the oldest that can be upgraded", CampaignOptions{Canaries: 2},
			"a:pending:canary c:pending:canary b:skipped d:pending"},
		{"canaries by organization", CampaignOptions{CanaryOrgs: []string{"org-b"}},
			"c:pending:canary d:pending:canary a:pending b:skipped"},
		{"canaries by space", CampaignOptions{CanarySpaces: []string{"space-2"}},
			"d:pending:canary a:pending b:skipped c:pending"},
		{"skipped by the operator: listed, never claimed", CampaignOptions{Skip: []string{"c"}},
			"a:pending b:skipped c:skipped d:pending"},
		{"deferred: last, and never a canary, whatever picks the canaries", CampaignOptions{Canaries: 1, Defer: []string{"a"}},
			"c:pending:canary b:skipped d:pending a:pending:deferred"},
		{"deferred out of the canaries' organization", CampaignOptions{CanaryOrgs: []string{"org-b"}, Defer: []string{"c", "a"}},
			"d:pending:canary b:skipped a:pending:deferred c:pending:deferred"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items := PlanItems(Campaign{ID: "upg", Options: tc.o}, fleet, behind)
			var got []string
			for i, it := range items {
				if it.Order != i || it.FromVersion != "1.0.0" || it.ToVersion != "2.0.0" {
					t.Errorf("item %s: order %d (want %d), from %q to %q", it.InstanceID, it.Order, i, it.FromVersion, it.ToVersion)
				}
				s := it.InstanceID + ":" + string(it.State)
				if it.Canary {
					s += ":canary"
				}
				if it.Deferred {
					s += ":deferred"
				}
				if it.InstanceID == "c" && it.State == ItemSkipped && it.Description != "Skipped by the operator." {
					t.Errorf("c skipped saying %q, want that the operator skipped it", it.Description)
				}
				got = append(got, s)
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("got  %s\nwant %s", strings.Join(got, " "), tc.want)
			}
		})
	}
}

func TestCampaignLaneSteps(t *testing.T) {
	for _, tc := range []struct {
		budget, lanes, want int
	}{
		{0, 1, CampaignHistoryBudget / CampaignEventsPerStep},
		{0, 100, CampaignHistoryBudget / (100 * CampaignEventsPerStep)},
		{90, 1, 10},
		{1, 50, CampaignMinLaneSteps},
		{0, 0, 0},
	} {
		got := CampaignLaneSteps(tc.budget, tc.lanes)
		if got != tc.want {
			t.Errorf("CampaignLaneSteps(%d, %d) = %d, want %d", tc.budget, tc.lanes, got, tc.want)
		}
		// The events the lanes may spend stay within Step Functions'
		// 25,000 with the margin (the floor of CampaignMinLaneSteps aside).
		if tc.budget == 0 && got*tc.lanes*CampaignEventsPerStep > CampaignHistoryBudget {
			t.Errorf("%d lanes of %d steps spend more than %d events", tc.lanes, got, CampaignHistoryBudget)
		}
	}
	// The most lanes an execution runs (both phases' at MaxInFlightCap)
	// still leave each a few Tasks.
	if n := CampaignLaneSteps(0, 2*MaxInFlightCap); n < 10 {
		t.Errorf("at %d lanes each runs %d Tasks per execution", 2*MaxInFlightCap, n)
	}
}

func TestLeftBehind(t *testing.T) {
	c := Campaign{Options: CampaignOptions{MaxInFlight: 2, MaxFailures: 1}}
	item := func(canary bool, state ItemState, op string) CampaignItem {
		return CampaignItem{Canary: canary, State: state, OperationID: op}
	}
	for _, tc := range []struct {
		name  string
		items []CampaignItem
		phase Phase
		want  bool
	}{
		{"an item left running: continue", []CampaignItem{item(false, ItemRunning, "u")}, PhaseRest, true},
		{"items left pending: continue", []CampaignItem{item(false, ItemUpgraded, "u"), item(false, ItemPending, "")}, PhaseRest, true},
		{"all ended: no", []CampaignItem{item(false, ItemUpgraded, "u"), item(false, ItemSkipped, "")}, PhaseRest, false},
		{"the campaign stops: pending items are for Finish", []CampaignItem{item(false, ItemFailed, "u"), item(false, ItemPending, "")}, PhaseRest, false},
		{"but one started is watched to its end", []CampaignItem{item(false, ItemFailed, "u"), item(false, ItemRunning, "u")}, PhaseRest, true},
		{"after the canaries, the others' pending are the next phase's", []CampaignItem{item(true, ItemUpgraded, "u"), item(false, ItemPending, "")}, PhaseCanary, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := leftBehind(c, tc.items, tc.phase); got != tc.want {
				t.Errorf("leftBehind = %v, want %v", got, tc.want)
			}
		})
	}
}
