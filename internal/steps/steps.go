// Package steps is the adapter between the Task states of statemachines/
// and the broker, as package api is for HTTP: it decodes a Task's payload,
// runs the broker's step for it (begin a change, check it, finish it,
// record its failure; delete a detached resource) and sorts its error into
// the names the state machines' Retry and Catch match. The local engine
// calls Handle in-process; the worker Lambda calls Run. The broker owns what
// each step does, and every step is idempotent: running it twice has the
// effect of running it once, which Task retries and re-started executions
// depend on.
package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/logging"
)

// Step names, as the state machine sends them.
const (
	StepBegin         = "begin"
	StepCheck         = "check"
	StepFinish        = "finish"
	StepRecordFailure = "record_failure"

	// The steps of statemachines/cleanup.asl.json.
	StepCleanupDelete  = "cleanup_delete"
	StepCleanupDeleted = "cleanup_deleted"
	StepCleanupGaveUp  = "cleanup_gave_up"

	// The steps of statemachines/upgrade.asl.json (a fleet upgrade).
	StepUpgradePlan       = "upgrade_plan"
	StepUpgradeClaim      = "upgrade_claim"
	StepUpgradeStart      = "upgrade_start"
	StepUpgradeCheck      = "upgrade_check"
	StepUpgradeItemFailed = "upgrade_item_failed"
	StepUpgradeContinue   = "upgrade_continue"
	StepUpgradeTally      = "upgrade_tally"
	StepUpgradeFinish     = "upgrade_finish"
)

// Payload is the input of a Task.
type Payload struct {
	Step        string `json:"step"`
	OperationID string `json:"operation_id,omitempty"`
	InstanceID  string `json:"instance_id,omitempty"`
	// DetachedID names the detached resource of a cleanup step.
	DetachedID string `json:"detached_id,omitempty"`
	// CampaignID names the fleet upgrade of an upgrade step; Options are
	// its options and Part the execution's part of it (upgrade_plan,
	// upgrade_continue); Phase the lane's (upgrade_claim,
	// upgrade_continue); Lane the lane's state and Budget the Tasks it may
	// run in the execution (upgrade_claim, upgrade_start, upgrade_check);
	// DryRun says the campaign previews (upgrade_start, upgrade_check).
	CampaignID string                  `json:"campaign_id,omitempty"`
	Options    *broker.CampaignOptions `json:"options,omitempty"`
	Part       int                     `json:"part,omitempty"`
	Phase      broker.Phase            `json:"phase,omitempty"`
	Lane       broker.UpgradeLane      `json:"lane,omitzero"`
	Budget     int                     `json:"budget,omitempty"`
	DryRun     bool                    `json:"dry_run,omitempty"`
	// Error and Cause are the caught error, for record_failure.
	Error string `json:"error,omitempty"`
	Cause string `json:"cause,omitempty"`
}

// LogAttrs say what a Task works on, for its log lines: the step, and the
// operation and instance, or the detached resource.
func (p Payload) LogAttrs() []slog.Attr {
	var attrs []slog.Attr
	for _, a := range [][2]string{{"step", p.Step}, {"operation_id", p.OperationID},
		{"instance_id", p.InstanceID}, {"detached_id", p.DetachedID}, {"campaign_id", p.CampaignID}} {
		if a[1] != "" {
			attrs = append(attrs, slog.String(a[0], a[1]))
		}
	}
	return attrs
}

// Progress is the output of begin and check.
type Progress = broker.TaskProgress

// TransientError is a failure worth retrying; the state machine's Retry
// matches its name.
type TransientError struct{ Err error }

func (e *TransientError) Error() string     { return e.Err.Error() }
func (e *TransientError) Unwrap() error     { return e.Err }
func (e *TransientError) ErrorName() string { return "TransientError" }

// PermanentError is a failure that retrying cannot fix; the state machine's
// Catch records it. Its message is the description the user sees and the
// detail the operator sees, as broker.Failure.Cause encodes them, which
// record_failure decodes (broker.Caught).
type PermanentError struct {
	Description, Detail string
	// InstanceUsable and UpdateRepeatable: what the driver said of the
	// instance after a failed update (broker.Failure).
	InstanceUsable, UpdateRepeatable *bool
}

func (e *PermanentError) Error() string {
	return (&broker.Failure{Description: e.Description, Detail: e.Detail,
		InstanceUsable: e.InstanceUsable, UpdateRepeatable: e.UpdateRepeatable}).Cause()
}
func (e *PermanentError) ErrorName() string { return "PermanentError" }

// Steps runs the Tasks of the workflows on a Broker, which owns what each
// does; Steps decodes their payloads and sorts their errors for the state
// machines' Retry and Catch.
type Steps struct {
	Broker *broker.Broker
}

// New returns the Steps of b.
func New(b *broker.Broker) *Steps { return &Steps{Broker: b} }

// Handle runs one Task: it decodes the payload, runs the step and encodes
// its result. Errors are *TransientError or *PermanentError.
func (s *Steps) Handle(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
	var p Payload
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, &PermanentError{Description: fmt.Sprintf("malformed task payload: %v", err)}
	}
	return s.Run(ctx, p)
}

// Run runs the Task p names.
func (s *Steps) Run(ctx context.Context, p Payload) (json.RawMessage, error) {
	ctx = logging.With(ctx, p.LogAttrs()...)
	switch p.Step {
	case StepBegin, StepCheck, StepFinish, StepRecordFailure:
		if p.OperationID == "" || p.InstanceID == "" {
			return nil, &PermanentError{Description: "task payload lacks operation_id or instance_id"}
		}
	case StepCleanupDelete, StepCleanupDeleted, StepCleanupGaveUp:
		if p.DetachedID == "" {
			return nil, &PermanentError{Description: "task payload lacks detached_id"}
		}
	case StepUpgradePlan, StepUpgradeClaim, StepUpgradeContinue, StepUpgradeTally, StepUpgradeFinish:
		if p.CampaignID == "" || p.Step == StepUpgradePlan && p.Options == nil {
			return nil, &PermanentError{Description: "task payload lacks campaign_id or options"}
		}
	case StepUpgradeStart, StepUpgradeCheck, StepUpgradeItemFailed:
		if p.CampaignID == "" || p.InstanceID == "" {
			return nil, &PermanentError{Description: "task payload lacks campaign_id or instance_id"}
		}
	default:
		return nil, &PermanentError{Description: fmt.Sprintf("unknown step %q", p.Step)}
	}
	b := s.Broker
	var out any = struct{}{}
	var err error
	switch p.Step {
	case StepBegin:
		out, err = b.BeginTask(ctx, p.InstanceID, p.OperationID)
	case StepCheck:
		out, err = b.CheckTask(ctx, p.InstanceID, p.OperationID)
	case StepFinish:
		err = b.FinishTask(ctx, p.InstanceID, p.OperationID)
	case StepRecordFailure:
		err = b.RecordFailed(ctx, p.InstanceID, p.OperationID, broker.Caught(p.Error, p.Cause))
	case StepCleanupDelete:
		out, err = b.CleanupDeleteTask(ctx, p.DetachedID)
	case StepCleanupDeleted:
		err = b.CleanupDeletedTask(ctx, p.DetachedID)
	case StepCleanupGaveUp:
		f := broker.Caught(p.Error, p.Cause)
		err = b.CleanupGaveUpTask(ctx, p.DetachedID, f.Description, f.Detail)
	case StepUpgradePlan:
		out, err = b.UpgradePlanTask(ctx, p.CampaignID, p.Part, *p.Options)
	case StepUpgradeClaim:
		out, err = b.UpgradeClaimTask(ctx, p.CampaignID, p.Phase, p.Lane, p.Budget)
	case StepUpgradeStart, StepUpgradeCheck:
		out, err = b.UpgradeItemTask(ctx, p.CampaignID, p.InstanceID, p.DryRun, p.Lane, p.Budget)
	case StepUpgradeContinue:
		out, err = b.UpgradeContinueTask(ctx, p.CampaignID, p.Part, p.Phase)
	case StepUpgradeItemFailed:
		err = b.UpgradeItemFailedTask(ctx, p.CampaignID, p.InstanceID, broker.Caught(p.Error, p.Cause))
	case StepUpgradeTally:
		out, err = b.UpgradeTallyTask(ctx, p.CampaignID)
	case StepUpgradeFinish:
		out, err = b.UpgradeFinishTask(ctx, p.CampaignID)
	}
	if err != nil {
		return nil, classify(err)
	}
	return json.Marshal(out)
}

// classify sorts a step's error: a driver's permanent failure is caught and
// recorded by the workflow; anything else is retried.
func classify(err error) error {
	var f *broker.Failure
	if errors.As(err, &f) {
		return &PermanentError{Description: f.Description, Detail: f.Detail,
			InstanceUsable: f.InstanceUsable, UpdateRepeatable: f.UpdateRepeatable}
	}
	return &TransientError{Err: err}
}
