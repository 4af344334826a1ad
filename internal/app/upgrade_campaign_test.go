package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
)

// plantBehind stores ready instances of plan on maintenance_info version
// from, as a broker of an older catalog left them.
func plantBehind(t *testing.T, b *apptest.Broker, service, plan, from string, ids ...string) {
	t.Helper()
	plantBehindWith(t, b, service, plan, from, nil, ids...)
}

// plantBehindWith is plantBehind with some instances' stored parameters.
func plantBehindWith(t *testing.T, b *apptest.Broker, service, plan, from string, params map[string]string, ids ...string) {
	t.Helper()
	now := time.Now().UTC()
	for i, id := range ids {
		at := now.Add(time.Duration(i) * time.Millisecond) // the claim order: oldest first
		op := broker.Operation{ID: "prov-" + id, InstanceID: id, Kind: broker.KindProvision, State: broker.OperationSucceeded,
			PlanID: plan, CreatedAt: at, UpdatedAt: at, FinishedAt: at, ExpiresAt: at.Add(broker.Retention)}
		inst := broker.Instance{ID: id, InstanceRequest: broker.InstanceRequest{ServiceID: service, PlanID: plan,
			OrganizationGUID: "org", SpaceGUID: "space", MaintenanceInfo: &broker.MaintenanceInfo{Version: from}},
			State: broker.InstanceReady, LastOp: op.ID, Version: 1, CreatedAt: at, UpdatedAt: at}
		if p, ok := params[id]; ok {
			inst.Parameters = json.RawMessage(p)
		}
		if err := b.Local.Store.CreateInstance(t.Context(), inst, op, &broker.Settled{}); err != nil {
			t.Fatal(err)
		}
	}
}

// upgradedEachOnce checks that campaign id finished (ops exiting 0) with
// every item upgraded, each instance of ids updated once, and returns ops
// upgrade status --json; ok is false when the campaign did not finish.
func upgradedEachOnce(t *testing.T, b *apptest.Broker, id string, ids []string) (status map[string]any, ok bool) {
	t.Helper()
	status, failed := campaignStatusJSON(t, b.Local.Broker, id)
	if failed != nil || status["state"] != "finished" {
		t.Errorf("the campaign: %v %v, want it finished, ops exiting 0", status["state"], failed)
		return status, false
	}
	for _, it := range status["items"].([]any) {
		it := it.(map[string]any)
		if it["state"] != "upgraded" {
			t.Errorf("%s: %s %v, want upgraded", it["instance_id"], it["state"], it["description"])
		}
	}
	for _, inst := range ids {
		ops, err := b.Local.Store.ListOperations(t.Context(), inst)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(slices.DeleteFunc(ops, func(o broker.Operation) bool { return o.Kind != broker.KindUpdate })); n != 1 {
			t.Errorf("%s was updated %d times, want once", inst, n)
		}
	}
	return status, true
}

// campaignStatusJSON is ops upgrade status --json of campaign id, and
// whether ops would exit non-zero.
func campaignStatusJSON(t *testing.T, b *broker.Broker, id string) (status map[string]any, failed error) {
	t.Helper()
	var out bytes.Buffer
	failed = app.OpsUpgrade(t.Context(), b, []string{"status", id}, true, true, &out)
	if err := json.Unmarshal(out.Bytes(), &status); err != nil {
		t.Fatalf("ops upgrade status --json %s: %v (%v)\n%s", id, err, failed, out.String())
	}
	return status, failed
}

// startCampaign runs ops upgrade start with args and returns the id it
// printed; local: the command follows the campaign to its end.
func startCampaignOps(t *testing.T, b *broker.Broker, local bool, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := app.OpsUpgrade(t.Context(), b, append([]string{"start"}, args...), true, local, &out)
	var a struct {
		ID string `json:"campaign_id"`
	}
	if jerr := json.Unmarshal(out.Bytes(), &a); jerr != nil || a.ID == "" {
		t.Fatalf("ops upgrade start %v: %v (%v)\n%s", args, jerr, err, out.String())
	}
	return a.ID, err
}

// TestAFleetUpgradeContinuesInNewExecutionsWhenItsHistoryIsSpent: Step
// Functions keeps 25,000 events of an execution; a campaign's lanes spend
// a budget of them (here made small), then the campaign continues in a new
// execution of the workflow, <campaign>-2, ..., which adopts what the last
// left running. On the local engine: every instance upgraded once, the
// campaign finished, run by several executions, none of whose lanes ran
// more Tasks than its budget; ops upgrade status names the last.
func TestAFleetUpgradeContinuesInNewExecutionsWhenItsHistoryIsSpent(t *testing.T) {
	b := apptest.StartWith(t, apptest.Options{ReapInterval: -1, Sleep: noSleep})
	service, plan := b.Plan("fake-async-plan")
	var ids []string
	for i := range 9 {
		ids = append(ids, fmt.Sprintf("behind-%d", i))
	}
	plantBehind(t, b, service, plan, "0.9.0", ids...)
	const lanes = 2
	// 2 canary lanes and 2 others: 4 Tasks per lane and execution.
	b.Local.Broker.CampaignHistory = 4 * 2 * lanes * broker.CampaignEventsPerStep
	id, err := startCampaignOps(t, b.Local.Broker, true, "--plan", plan, "--canaries", "2", "--max-in-flight", fmt.Sprint(lanes))
	if err != nil {
		t.Fatalf("ops upgrade start: %v", err)
	}
	status, ok := upgradedEachOnce(t, b, id, ids)
	if !ok {
		t.FailNow()
	}
	parts := 0
	for part := 1; ; part++ {
		name := broker.CampaignExecution(id, part)
		history, err := b.Local.Engine.History(t.Context(), name)
		if err != nil {
			break
		}
		parts = part
		tasks := 0
		for _, s := range history {
			if strings.HasSuffix(s, "Claim") || strings.HasSuffix(s, "Start") || strings.HasSuffix(s, "Check") {
				tasks++
			}
		}
		// Each lane runs at most its budget, and one Claim more that
		// yields.
		if most := 2 * lanes * (4 + 1); tasks > most {
			t.Errorf("execution %s ran %d lane Tasks, want at most %d", name, tasks, most)
		}
	}
	t.Logf("%d executions", parts)
	if parts < 2 {
		t.Errorf("the campaign ran in %d execution, want it continued in more", parts)
	}
	if want := broker.CampaignExecution(id, parts); status["execution"] != want {
		t.Errorf("ops upgrade status names execution %v, want the last, %s", status["execution"], want)
	}
}
