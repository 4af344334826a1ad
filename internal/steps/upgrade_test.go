package steps

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
)

// TestTheUpgradeWorkflowReadsTheJSONItDid pins the JSON of every field the
// upgrade's Tasks exchange with statemachines/upgrade.asl.json, set (the
// outputs on an empty campaign are TestEveryStepAnswersWhatItsWorkflowReads'):
// the payloads reach the broker whole, and the outputs say what the
// workflow's ResultSelectors read.
func TestTheUpgradeWorkflowReadsTheJSONItDid(t *testing.T) {
	options := broker.CampaignOptions{PlanIDs: []string{"p-1"}, All: true, Canaries: 2, CanaryOrgs: []string{"o-1"},
		CanarySpaces: []string{"s-1"}, MaxInFlight: 3, MaxFailures: 4, DryRun: true, Skip: []string{"i-8"}, Defer: []string{"i-9"}}
	t.Run("the execution's input, which the Plan state passes on, is the upgrade_plan payload", func(t *testing.T) {
		input, err := json.Marshal(broker.CampaignInput{CampaignID: "upg-1", Options: options, Part: 2})
		const want = `{"campaign_id":"upg-1","options":{"plan_ids":["p-1"],"all":true,"canaries":2,"canary_orgs":["o-1"],"canary_spaces":["s-1"],"max_in_flight":3,"max_failures":4,"dry_run":true,"skip":["i-8"],"defer":["i-9"]},"part":2}`
		if err != nil || string(input) != want {
			t.Fatalf("input %s (%v), want %s", input, err, want)
		}
		var p Payload
		if err := json.Unmarshal(input, &p); err != nil || p.CampaignID != "upg-1" || p.Part != 2 || p.Options == nil {
			t.Fatalf("payload %+v (%v)", p, err)
		}
		if got := p.Options.options(); !reflect.DeepEqual(got, options) {
			t.Errorf("the broker is given %+v, want %+v", got, options)
		}
		var back broker.CampaignInput
		if err := json.Unmarshal(input, &back); err != nil || !reflect.DeepEqual(back, broker.CampaignInput{CampaignID: "upg-1", Options: options, Part: 2}) {
			t.Errorf("the input reads back as %+v (%v)", back, err)
		}
	})
	full := broker.UpgradeLane{Action: broker.ClaimStart, InstanceID: "i-1", RetryAfter: 5, Done: true, Yield: true, Steps: 7}
	const laneJSON = `{"action":"start","instance_id":"i-1","retry_after":5,"done":true,"yield":true,"steps":7}`
	t.Run("a lane's state reaches the broker whole", func(t *testing.T) {
		var p Payload
		payload := `{"step":"upgrade_check","campaign_id":"upg-1","instance_id":"i-1","phase":"canary","dry_run":true,"budget":9,"lane":` + laneJSON + `}`
		if err := json.Unmarshal([]byte(payload), &p); err != nil {
			t.Fatal(err)
		}
		if got := broker.UpgradeLane(p.Lane); got != full || p.Phase != broker.PhaseCanary || !p.DryRun || p.Budget != 9 {
			t.Errorf("payload %s gives the broker %+v, phase %q, dry run %v, budget %d", payload, got, p.Phase, p.DryRun, p.Budget)
		}
	})
	tally := broker.Tally{Items: 1, Pending: 2, Running: 3, Busy: 4, Upgraded: 5, Failed: 6, Skipped: 7, NotAttempted: 8,
		WouldChange: 9, WouldRefuse: 10, CanaryFailed: true, Blocked: 11}
	const tallyJSON = `{"items":1,"pending":2,"running":3,"busy":4,"upgraded":5,"failed":6,"skipped":7,"not_attempted":8,"would_change":9,"would_refuse":10,"canary_failed":true,"blocked":11}`
	outputs := []struct {
		name string
		out  func() (any, error)
		want string
	}{
		{"upgrade_plan's lanes", func() (any, error) {
			return lanes(broker.UpgradeLanes{CampaignID: "upg-1", Part: 2, DryRun: true, HasCanaries: true, CanaryLanes: []int{0}, Lanes: []int{0, 1}, LaneSteps: 40}, nil)
		}, `{"campaign_id":"upg-1","part":2,"dry_run":true,"has_canaries":true,"canary_lanes":[0],"lanes":[0,1],"lane_steps":40}`},
		{"a lane's state", func() (any, error) { return lane(full, nil) }, laneJSON},
		{"upgrade_continue's next execution", func() (any, error) {
			return next(broker.UpgradeNext{Continued: true, Execution: "upg-1-2"}, nil)
		}, `{"continued":true,"execution":"upg-1-2"}`},
		{"upgrade_tally's stop", func() (any, error) { return stop(broker.UpgradeStop{Stop: true, Tally: tally}, nil) },
			`{"stop":true,"tally":` + tallyJSON + `}`},
		{"upgrade_finish's report", func() (any, error) {
			return report(broker.UpgradeReport{CampaignID: "upg-1", State: broker.CampaignStopped, Tally: tally, Ended: true}), nil
		}, `{"campaign_id":"upg-1","state":"stopped","tally":` + tallyJSON + `,"ended":true}`},
		{"reap's report", func() (any, error) {
			return ReapReport(broker.ReapReport{InProgress: 1, Restarted: 2, Failed: 3, TimedOut: 4, Detached: 5, CleanupsStarted: 6, CleanupsFailed: 7, Expired: 8}), nil
		}, `{"in_progress":1,"restarted":2,"failed":3,"timed_out":4,"detached":5,"cleanups_started":6,"cleanups_failed":7,"expired":8}`},
	}
	for _, o := range outputs {
		t.Run(o.name+" is the JSON the workflow reads", func(t *testing.T) {
			v, err := o.out()
			if err != nil {
				t.Fatal(err)
			}
			if got, err := json.Marshal(v); err != nil || string(got) != o.want {
				t.Errorf("output %s (%v), want %s", got, err, o.want)
			}
		})
	}
}
