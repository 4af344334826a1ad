// Package steps is to the Task payloads of statemachines/ what package api
// is to HTTP: the one adapter between Step Functions (or the local engine,
// which runs the same files) and the broker. It decodes each payload once,
// runs the broker's step for it (begin a change, check it, finish it,
// record its failure; delete a detached resource; run the reaper), encodes
// the step's result, and sorts its error into the names the state
// machines' Retry and Catch match (TransientError, PermanentError); it
// reads a caught error back into the failure it records (Caught). The local
// engine calls Handle in-process; the worker Lambda calls Lambda. The broker
// owns what each step does, and every step is idempotent: running it twice
// has the effect of running it once, which Task retries and re-started
// executions depend on.
//
// A step is one entry of the table in New: its name, what its payload must
// name, and the broker's call.
package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/lambdacontext"

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

	// StepReap runs the reaper, as the EventBridge Scheduler schedule asks
	// the worker: {"step":"reap"}.
	StepReap = "reap"

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
	// ExecutionInput is the operation workflow's execution's input
	// ($$.Execution.Input), whose binding and kind let a Task read in one
	// round trip (broker.OperationTask); absent from the payloads of a
	// workflow that predates it.
	ExecutionInput *broker.WorkflowInput `json:"execution_input,omitempty"`
	// DetachedID names the detached resource of a cleanup step.
	DetachedID string `json:"detached_id,omitempty"`
	// CampaignID names the fleet upgrade of an upgrade step; Options are
	// its options and Part the execution's part of it (upgrade_plan,
	// upgrade_continue); Phase the lane's (upgrade_claim,
	// upgrade_continue); Lane the lane's state and Budget the Tasks it may
	// run in the execution (upgrade_claim, upgrade_start, upgrade_check);
	// LaneIndex the lane's index in its Map (upgrade_claim; absent from
	// the payloads of a workflow that predates it); DryRun says the
	// campaign previews (upgrade_start, upgrade_check).
	CampaignID string       `json:"campaign_id,omitempty"`
	Options    *Options     `json:"options,omitempty"`
	Part       int          `json:"part,omitempty"`
	Phase      broker.Phase `json:"phase,omitempty"`
	Lane       Lane         `json:"lane,omitzero"`
	Budget     int          `json:"budget,omitempty"`
	LaneIndex  *int         `json:"lane_index,omitempty"`
	DryRun     bool         `json:"dry_run,omitempty"`
	// Error and Cause are the caught error, for record_failure,
	// cleanup_gave_up and upgrade_item_failed (Caught reads them).
	Error string `json:"error,omitempty"`
	Cause string `json:"cause,omitempty"`
}

// LogAttrs say what a Task works on, for its log lines: the step, and the
// operation and instance, or the detached resource.
func (p Payload) LogAttrs() []slog.Attr {
	attrs := make([]slog.Attr, 0, 5) // one allocation, not one per append that grows it
	for _, a := range [][2]string{{"step", p.Step}, {"operation_id", p.OperationID},
		{"instance_id", p.InstanceID}, {"detached_id", p.DetachedID}, {"campaign_id", p.CampaignID}} {
		if a[1] != "" {
			attrs = append(attrs, slog.String(a[0], a[1]))
		}
	}
	return attrs
}

// operationTask is the operation that an operation step's payload names.
func (p Payload) operationTask() broker.OperationTask {
	t := broker.OperationTask{InstanceID: p.InstanceID, OperationID: p.OperationID}
	// An input of another instance (it cannot be) names nothing of this one.
	if in := p.ExecutionInput; in != nil && in.InstanceID == p.InstanceID {
		t.BindingID, t.Kind = in.BindingID, in.Kind
	}
	return t
}

// Progress is the output of begin, check and cleanup_delete, which the
// workflows' Choice and Wait states read.
type Progress struct {
	Done       bool `json:"done"`
	RetryAfter int  `json:"retry_after"`
}

// Steps runs the Tasks of the workflows on a Broker, which owns what each
// does.
type Steps struct {
	Broker *broker.Broker
	// Reaped, when set, makes the reap step available and receives the
	// report of each run (the reaper's metrics). The worker sets it when it
	// has the workflows' state machines, which the reaper restarts; the
	// local broker runs its reaper on a ticker instead.
	Reaped func(broker.ReapReport)
	// Upgraded, when set, receives the report of each fleet upgrade that
	// its upgrade_finish step ends (the upgrade's metrics).
	Upgraded func(broker.UpgradeReport)

	steps map[string]step
}

// step is one Task: what its payload must name, and the broker's call,
// whose result becomes the Task's output.
type step struct {
	needs needs
	run   func(ctx context.Context, s *Steps, p Payload) (any, error)
}

// needs is what a step's payload must name.
type needs int

const (
	needsOperation        needs = iota // operation_id and instance_id
	needsDetached                      // detached_id
	needsCampaign                      // campaign_id
	needsCampaignOptions               // campaign_id and options
	needsCampaignInstance              // campaign_id and instance_id
	needsNothing
)

// lacks says what p lacks for a step that needs n, or "" when nothing.
func (n needs) lacks(p Payload) string {
	switch {
	case n == needsOperation && (p.OperationID == "" || p.InstanceID == ""):
		return "task payload lacks operation_id or instance_id"
	case n == needsDetached && p.DetachedID == "":
		return "task payload lacks detached_id"
	case (n == needsCampaign || n == needsCampaignOptions) && p.CampaignID == "",
		n == needsCampaignOptions && p.Options == nil:
		return "task payload lacks campaign_id or options"
	case n == needsCampaignInstance && (p.CampaignID == "" || p.InstanceID == ""):
		return "task payload lacks campaign_id or instance_id"
	}
	return ""
}

// New returns the Steps of b.
func New(b *broker.Broker) *Steps {
	return &Steps{Broker: b, steps: map[string]step{
		StepBegin: {needsOperation, func(ctx context.Context, s *Steps, p Payload) (any, error) {
			return progress(s.Broker.BeginTask(ctx, p.operationTask()))
		}},
		StepCheck: {needsOperation, func(ctx context.Context, s *Steps, p Payload) (any, error) {
			return progress(s.Broker.CheckTask(ctx, p.operationTask()))
		}},
		StepFinish: {needsOperation, func(ctx context.Context, s *Steps, p Payload) (any, error) {
			return nothing(s.Broker.FinishTask(ctx, p.operationTask()))
		}},
		StepRecordFailure: {needsOperation, func(ctx context.Context, s *Steps, p Payload) (any, error) {
			return nothing(s.Broker.RecordFailed(ctx, p.operationTask(), Caught(p.Error, p.Cause)))
		}},
		StepCleanupDelete: {needsDetached, func(ctx context.Context, s *Steps, p Payload) (any, error) {
			return progress(s.Broker.CleanupDeleteTask(ctx, p.DetachedID))
		}},
		StepCleanupDeleted: {needsDetached, func(ctx context.Context, s *Steps, p Payload) (any, error) {
			return nothing(s.Broker.CleanupDeletedTask(ctx, p.DetachedID))
		}},
		StepCleanupGaveUp: {needsDetached, func(ctx context.Context, s *Steps, p Payload) (any, error) {
			f := Caught(p.Error, p.Cause)
			return nothing(s.Broker.CleanupGaveUpTask(ctx, p.DetachedID, f.Description, f.Detail))
		}},
		StepReap: {needsNothing, func(ctx context.Context, s *Steps, _ Payload) (any, error) {
			return s.reap(ctx)
		}},
		StepUpgradePlan: {needsCampaignOptions, func(ctx context.Context, s *Steps, p Payload) (any, error) {
			return lanes(s.Broker.UpgradePlanTask(ctx, p.CampaignID, p.Part, p.Options.options()))
		}},
		StepUpgradeClaim: {needsCampaign, func(ctx context.Context, s *Steps, p Payload) (any, error) {
			return lane(s.Broker.UpgradeClaimTask(ctx, p.CampaignID, p.Phase, p.LaneIndex, broker.UpgradeLane(p.Lane), p.Budget))
		}},
		StepUpgradeStart: {needsCampaignInstance, upgradeItem},
		StepUpgradeCheck: {needsCampaignInstance, upgradeItem},
		StepUpgradeContinue: {needsCampaign, func(ctx context.Context, s *Steps, p Payload) (any, error) {
			return next(s.Broker.UpgradeContinueTask(ctx, p.CampaignID, p.Part, p.Phase))
		}},
		StepUpgradeItemFailed: {needsCampaignInstance, func(ctx context.Context, s *Steps, p Payload) (any, error) {
			return nothing(s.Broker.UpgradeItemFailedTask(ctx, p.CampaignID, p.InstanceID, Caught(p.Error, p.Cause)))
		}},
		StepUpgradeTally: {needsCampaign, func(ctx context.Context, s *Steps, p Payload) (any, error) {
			return stop(s.Broker.UpgradeTallyTask(ctx, p.CampaignID))
		}},
		StepUpgradeFinish: {needsCampaign, func(ctx context.Context, s *Steps, p Payload) (any, error) {
			rep, err := s.Broker.UpgradeFinishTask(ctx, p.CampaignID)
			if err == nil && s.Upgraded != nil {
				s.Upgraded(rep)
			}
			return report(rep), err
		}},
	}}
}

// upgradeItem runs upgrade_start and upgrade_check: one idempotent call
// that starts the claimed instance's upgrade (or preview) or checks it.
func upgradeItem(ctx context.Context, s *Steps, p Payload) (any, error) {
	return lane(s.Broker.UpgradeItemTask(ctx, p.CampaignID, p.InstanceID, p.DryRun, broker.UpgradeLane(p.Lane), p.Budget))
}

// progress is the output of a step that reports how its change goes.
func progress(p broker.TaskProgress, err error) (any, error) { return Progress(p), err }

// nothing is the output of a step that has none: {}.
func nothing(err error) (any, error) { return struct{}{}, err }

// reap runs the reaper and reports what it did, even when it failed on
// some of the operations and resources it looked at.
func (s *Steps) reap(ctx context.Context) (any, error) {
	rep, err := s.Broker.Reap(ctx)
	s.Reaped(rep)
	s.Broker.Logger.InfoContext(ctx, "reaper ran", "report", fmt.Sprintf("%+v", rep))
	if err != nil {
		// Whatever its errors are, the next run repairs what this one left.
		return nil, &TransientError{Err: err}
	}
	return ReapReport(rep), nil
}

// Handle runs one Task for the local engine: it decodes the payload, runs
// the step and encodes its result. Errors are *TransientError or
// *PermanentError.
func (s *Steps) Handle(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
	return s.handle(ctx, payload, false)
}

// Lambda is the worker function's handler: Handle, with the Lambda request
// id on every log line and a line for each failed step.
//
// aws-lambda-go names a function error after its Go type (a pointer's
// element type), and Step Functions matches Retry and Catch on that name,
// which is why every error leaves bare (classify).
func (s *Steps) Lambda(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		ctx = logging.With(ctx, slog.String("aws_request_id", lc.AwsRequestID))
	}
	return s.handle(ctx, payload, true)
}

func (s *Steps) handle(ctx context.Context, payload json.RawMessage, logFailure bool) (json.RawMessage, error) {
	p, err := decodePayload(payload)
	if err != nil {
		return nil, &PermanentError{broker.Failure{Description: fmt.Sprintf("malformed task payload: %v", err)}}
	}
	ctx = logging.With(ctx, p.LogAttrs()...)
	out, err := s.run(ctx, p)
	if err != nil && logFailure {
		if _, ok := err.(*PermanentError); ok {
			// Its message is the description the user sees, which may repeat
			// request input; record_failure logs it when it does not.
			s.Broker.Logger.WarnContext(ctx, "step failed", "error_type", errorName(err))
		} else {
			s.Broker.Logger.WarnContext(ctx, "step failed", "error_type", errorName(err), "error", err.Error())
		}
	}
	return out, err
}

// Run runs the Task p names. Errors are *TransientError or *PermanentError.
func (s *Steps) Run(ctx context.Context, p Payload) (json.RawMessage, error) {
	return s.run(logging.With(ctx, p.LogAttrs()...), p)
}

func (s *Steps) run(ctx context.Context, p Payload) (json.RawMessage, error) {
	st, ok := s.steps[p.Step]
	if !ok || p.Step == StepReap && s.Reaped == nil {
		return nil, &PermanentError{broker.Failure{Description: fmt.Sprintf("unknown step %q", p.Step)}}
	}
	if lacks := st.needs.lacks(p); lacks != "" {
		return nil, &PermanentError{broker.Failure{Description: lacks}}
	}
	out, err := st.run(ctx, s, p)
	if err != nil {
		return nil, classify(err)
	}
	return json.Marshal(out)
}
