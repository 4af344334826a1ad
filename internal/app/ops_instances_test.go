package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/env"
)

// TestOpsInstancesListsEachInstancesVersion: ops instances lists every
// instance (more than a page of the store's listing) with the
// maintenance_info version and digest it runs and whether it is behind
// its plan's in the catalog; --service, --plan and --behind select; on
// either store, in text and JSON.
func TestOpsInstancesListsEachInstancesVersion(t *testing.T) {
	for _, store := range []string{"bolt", "dynamodb"} {
		t.Run(store, func(t *testing.T) { listInstancesVersions(t, store) })
	}
}

func listInstancesVersions(t *testing.T, store string) {
	opts := apptest.Options{ReapInterval: -1}
	if store == "dynamodb" {
		opts.Store = dynamoStore(t)
	}
	b := apptest.StartWith(t, opts)
	service, plan := b.Plan("fake-plan")
	_, asyncPlan := b.Plan("fake-async-plan")
	// Provisioned through the API: on the plan's version.
	for _, id := range []string{"current-1", "current-2"} {
		if r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/" + id, Body: provisionBody(service, plan, map[string]any{})}); r.Status != http.StatusCreated {
			t.Fatalf("provision %s: %d %s", id, r.Status, r.Raw)
		}
	}
	// Planted: instances on an older version of a plan, enough for more
	// than one page, and one whose plan the catalog no longer has.
	now := time.Now().UTC()
	plant := func(id, planID, version string) {
		op := broker.Operation{ID: "prov-" + id, InstanceID: id, Kind: broker.KindProvision, State: broker.OperationSucceeded,
			PlanID: planID, CreatedAt: now, UpdatedAt: now, FinishedAt: now, ExpiresAt: now.Add(broker.Retention)}
		inst := broker.Instance{ID: id, InstanceRequest: broker.InstanceRequest{ServiceID: service, PlanID: planID,
			MaintenanceInfo: &broker.MaintenanceInfo{Version: version}}, State: broker.InstanceReady, LastOp: op.ID, Version: 1, CreatedAt: now, UpdatedAt: now}
		if err := b.Local.Store.CreateInstance(t.Context(), inst, op, &broker.Settled{}); err != nil {
			t.Fatal(err)
		}
	}
	var behind []string
	for i := range broker.InstancePageSize {
		id := fmt.Sprintf("old-%03d", i)
		plant(id, asyncPlan, "0.9.0")
		behind = append(behind, id)
	}
	plant("gone-plan", "no-such-plan", "1.0.0")

	listed := func(args ...string) []map[string]any {
		t.Helper()
		var out bytes.Buffer
		if err := app.OpsJSON(t.Context(), b.Local.Broker, append([]string{"instances"}, args...), &out); err != nil {
			t.Fatalf("ops --json instances %v: %v", args, err)
		}
		var list []map[string]any
		if err := json.Unmarshal(out.Bytes(), &list); err != nil {
			t.Fatalf("ops --json instances %v: %v\n%s", args, err, out.String())
		}
		return list
	}
	ids := func(list []map[string]any) []string {
		out := []string{}
		for _, l := range list {
			out = append(out, l["instance_id"].(string))
		}
		return out
	}
	all := listed()
	if want := append([]string{"current-1", "current-2", "gone-plan"}, behind...); !slices.Equal(ids(all), sorted(want)) {
		t.Errorf("ops instances listed %v\nwant %v", ids(all), sorted(want))
	}
	for _, l := range all {
		runs, _ := l["runs"].(map[string]any)
		switch id := l["instance_id"].(string); {
		case strings.HasPrefix(id, "current-"):
			if l["behind"] != false || runs["version"] != "1.0.0" || l["state"] != "ready" || l["plan_id"] != plan {
				t.Errorf("ops instances: %v, want %s on the plan's version 1.0.0, not behind", l, id)
			}
		case strings.HasPrefix(id, "old-"):
			current, _ := l["current"].(map[string]any)
			if l["behind"] != true || runs["version"] != "0.9.0" || current["version"] != "1.0.0" {
				t.Errorf("ops instances: %v, want %s on 0.9.0, behind the plan's 1.0.0", l, id)
			}
		case id == "gone-plan":
			if l["behind"] != false || l["current"] != nil {
				t.Errorf("ops instances: %v, want an instance whose plan is gone not behind, with no current version", l)
			}
		}
	}
	if got := ids(listed("--behind")); !slices.Equal(got, behind) {
		t.Errorf("ops instances --behind listed %v\nwant %v", got, behind)
	}
	if got := ids(listed("--plan=" + plan)); !slices.Equal(got, []string{"current-1", "current-2"}) {
		t.Errorf("ops instances --plan %s listed %v, want the two instances of the plan", plan, got)
	}
	if got := ids(listed("--service=no-such-service")); len(got) != 0 {
		t.Errorf("ops instances --service no-such-service listed %v, want none", got)
	}

	var text bytes.Buffer
	if err := app.Ops(t.Context(), b.Local.Broker, []string{"instances", "--behind"}, &text); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(text.String()), "\n")
	if len(lines) != 1+len(behind) || !strings.Contains(lines[0], "BEHIND") {
		t.Fatalf("ops instances --behind printed %d lines, want a header and %d:\n%s", len(lines), len(behind), text.String())
	}
	if f := strings.Fields(lines[1]); len(f) < 7 || f[0] != "old-000" || f[2] != asyncPlan || f[3] != "ready" || f[4] != "0.9.0" ||
		!strings.Contains(lines[1], "yes: the plan is at 1.0.0") {
		t.Errorf("ops instances --behind: %q, want old-000, its plan, ready, 0.9.0 and that the plan is at 1.0.0", lines[1])
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestOpsInstancesExits: ops instances exits 0 with the listing, and 2,
// printing the usage, on a filter it does not understand or one given to
// another command.
func TestOpsInstancesExits(t *testing.T) {
	dir := t.TempDir()
	b := apptest.Start(t, dir)
	service, plan := b.Plan("fake-plan")
	if r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/i-1", Body: provisionBody(service, plan, map[string]any{})}); r.Status != http.StatusCreated {
		t.Fatalf("provision: %d %s", r.Status, r.Raw)
	}
	b.Stop() // ops opens the data: the broker must not hold it
	setenv(t, map[string]string{
		"BROKER_DATA_DIR": dir, env.Catalog: b.Config.CatalogPath, "BROKER_STATEMACHINES": filepath.Join(apptest.Root(), "statemachines"),
		env.Table: "", "BROKER_SEALING_KEYS": "",
	})
	for _, tt := range []struct {
		args []string
		exit int
		want string
	}{
		{[]string{"ops", "instances", "--plan", plan}, 0, "i-1"},
		{[]string{"ops", "instances", "--behind"}, 0, "INSTANCE"},
		{[]string{"ops", "instances", "--service"}, 2, "usage:"},
		{[]string{"ops", "instances", "extra"}, 2, "instances takes no argument"},
		{[]string{"ops", "operations", "--behind"}, 2, "go with instances"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := app.RunCommand(t.Context(), tt.args, &out, &errOut)
			if got := app.ExitCode(err); got != tt.exit {
				t.Fatalf("%v: exit %d (%v), want %d", tt.args, got, err, tt.exit)
			}
			said := out.String()
			if err != nil {
				said += err.Error()
			}
			if !strings.Contains(said, tt.want) {
				t.Errorf("%v said\n%s\nwant %q", tt.args, said, tt.want)
			}
			if tt.args[2] == "--behind" && strings.Contains(out.String(), "i-1") {
				t.Errorf("ops instances --behind listed i-1, which runs its plan's version:\n%s", out.String())
			}
		})
	}
}
