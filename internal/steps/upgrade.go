package steps

import "github.com/serverless-osb/broker/internal/broker"

// The JSON of statemachines/upgrade.asl.json's Tasks: what their payloads
// carry into the broker's upgrade calls and what their outputs give the
// workflow's Choice, Wait and Map states. Each is a broker type with the
// JSON the workflow reads; the conversions are field for field, so that a
// field added to the broker's type fails to compile here until the
// workflow's JSON says what it is.

// Options are a campaign's options in the upgrade_plan payload, which the
// Plan state copies from the execution's input ($.options; that input is
// broker.CampaignInput, the Engine port's).
type Options struct {
	PlanIDs      []string `json:"plan_ids,omitempty"`
	All          bool     `json:"all,omitempty"`
	Canaries     int      `json:"canaries,omitempty"`
	CanaryOrgs   []string `json:"canary_orgs,omitempty"`
	CanarySpaces []string `json:"canary_spaces,omitempty"`
	MaxInFlight  int      `json:"max_in_flight"`
	MaxFailures  int      `json:"max_failures"`
	DryRun       bool     `json:"dry_run,omitempty"`
	Skip         []string `json:"skip,omitempty"`
	Defer        []string `json:"defer,omitempty"`
}

// Lanes is the output of upgrade_plan (broker.UpgradeLanes): the Plan
// state's ResultSelector reads every field, and the Maps iterate the lanes.
type Lanes struct {
	CampaignID  string `json:"campaign_id"`
	Part        int    `json:"part"`
	DryRun      bool   `json:"dry_run"`
	HasCanaries bool   `json:"has_canaries"`
	CanaryLanes []int  `json:"canary_lanes"`
	Lanes       []int  `json:"lanes"`
	LaneSteps   int    `json:"lane_steps"`
}

// Lane is a lane's state, $.lane (broker.UpgradeLane): the payload of
// upgrade_claim, upgrade_start and upgrade_check and their output. Every
// field is always written: a Choice on a field that is absent fails.
type Lane struct {
	Action     broker.ClaimAction `json:"action"`
	InstanceID string             `json:"instance_id"`
	RetryAfter int                `json:"retry_after"`
	Done       bool               `json:"done"`
	Yield      bool               `json:"yield"`
	Steps      int                `json:"steps"`
}

// Next is the output of upgrade_continue (broker.UpgradeNext).
type Next struct {
	Continued bool   `json:"continued"`
	Execution string `json:"execution,omitempty"`
}

// Tally is a campaign's count of items by state (broker.Tally), in the
// outputs of upgrade_tally and upgrade_finish.
type Tally struct {
	Items        int  `json:"items"`
	Pending      int  `json:"pending"`
	Running      int  `json:"running"`
	Busy         int  `json:"busy"`
	Upgraded     int  `json:"upgraded"`
	Failed       int  `json:"failed"`
	Skipped      int  `json:"skipped"`
	NotAttempted int  `json:"not_attempted"`
	WouldChange  int  `json:"would_change"`
	WouldRefuse  int  `json:"would_refuse"`
	CanaryFailed bool `json:"canary_failed,omitempty"`
	Blocked      int  `json:"blocked"`
}

// Stop is the output of upgrade_tally (broker.UpgradeStop).
type Stop struct {
	Stop  bool  `json:"stop"`
	Tally Tally `json:"tally"`
}

// Report is the output of upgrade_finish (broker.UpgradeReport).
type Report struct {
	CampaignID string               `json:"campaign_id"`
	State      broker.CampaignState `json:"state"`
	Tally      Tally                `json:"tally"`
	Ended      bool                 `json:"ended"`
}

// ReapReport is the output of reap (broker.ReapReport), which the
// schedule's invocation records.
type ReapReport struct {
	InProgress      int `json:"in_progress"`
	Restarted       int `json:"restarted"`
	Failed          int `json:"failed"`
	TimedOut        int `json:"timed_out"`
	Detached        int `json:"detached"`
	CleanupsStarted int `json:"cleanups_started"`
	CleanupsFailed  int `json:"cleanups_failed"`
	Expired         int `json:"expired"`
}

// options is the broker's CampaignOptions of o, which the step's needs
// made sure the payload has.
func (o *Options) options() broker.CampaignOptions { return broker.CampaignOptions(*o) }

// lanes, lane, next, stop and report are the JSON of the broker's answers,
// with the broker's error.
func lanes(l broker.UpgradeLanes, err error) (any, error) { return Lanes(l), err }

func lane(l broker.UpgradeLane, err error) (any, error) { return Lane(l), err }

func next(n broker.UpgradeNext, err error) (any, error) { return Next(n), err }

func stop(s broker.UpgradeStop, err error) (any, error) {
	return Stop{Stop: s.Stop, Tally: Tally(s.Tally)}, err
}

func report(r broker.UpgradeReport) Report {
	return Report{CampaignID: r.CampaignID, State: r.State, Tally: Tally(r.Tally), Ended: r.Ended}
}
