// Package steps owns what each Task state of statemachines/operation.asl.json
// does: begin a change, check it, finish it, record its failure. The local
// engine calls Handle in-process; the worker Lambda calls the same Handle.
// Every step is idempotent: running it twice has the effect of running it
// once, which Task retries and re-started executions depend on.
package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
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
)

// Payload is the input of a Task.
type Payload struct {
	Step        string `json:"step"`
	OperationID string `json:"operation_id,omitempty"`
	InstanceID  string `json:"instance_id,omitempty"`
	// DetachedID names the detached resource of a cleanup step.
	DetachedID string `json:"detached_id,omitempty"`
	// Error and Cause are the caught error, for record_failure.
	Error string `json:"error,omitempty"`
	Cause string `json:"cause,omitempty"`
}

// LogAttrs say what a Task works on, for its log lines: the step, and the
// operation and instance, or the detached resource.
func (p Payload) LogAttrs() []slog.Attr {
	var attrs []slog.Attr
	for _, a := range [][2]string{{"step", p.Step}, {"operation_id", p.OperationID},
		{"instance_id", p.InstanceID}, {"detached_id", p.DetachedID}} {
		if a[1] != "" {
			attrs = append(attrs, slog.String(a[0], a[1]))
		}
	}
	return attrs
}

// Progress is the output of begin and check.
type Progress struct {
	Done       bool `json:"done"`
	RetryAfter int  `json:"retry_after"`
}

// TransientError is a failure worth retrying; the state machine's Retry
// matches its name.
type TransientError struct{ Err error }

func (e *TransientError) Error() string     { return e.Err.Error() }
func (e *TransientError) Unwrap() error     { return e.Err }
func (e *TransientError) ErrorName() string { return "TransientError" }

// PermanentError is a failure that retrying cannot fix; the state machine's
// Catch records it. Its message is the description the user sees.
type PermanentError struct{ Description string }

func (e *PermanentError) Error() string     { return e.Description }
func (e *PermanentError) ErrorName() string { return "PermanentError" }

// Drivers gives the driver of a plan and the plan's settings for it
// (drivers.Set is the one the broker builds from its catalog).
type Drivers interface {
	For(plan *catalog.Plan) (driver broker.Driver, settings any, ok bool)
}

// Steps runs the steps of operations.
type Steps struct {
	Store   broker.Store
	Catalog *catalog.Catalog
	Drivers Drivers
	Logger  *slog.Logger
	Now     func() time.Time
	// Backoff is the first pause between retries of a transient failure in
	// RunToEnd; it doubles each time.
	Backoff time.Duration
	// Engine, when set, starts the cleanup of a resource as soon as it is
	// detached; without it the reaper starts it.
	Engine broker.Engine
}

// New returns Steps with the default clock.
func New(s broker.Store, c *catalog.Catalog, drivers Drivers, logger *slog.Logger) *Steps {
	return &Steps{Store: s, Catalog: c, Drivers: drivers, Logger: logger,
		Now: func() time.Time { return time.Now().UTC() }, Backoff: 100 * time.Millisecond}
}

var _ broker.Runner = (*Steps)(nil)

// Handle runs one Task: it decodes the payload, runs the step and encodes
// its result. Errors are *TransientError or *PermanentError.
func (s *Steps) Handle(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
	var p Payload
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, &PermanentError{Description: fmt.Sprintf("malformed task payload: %v", err)}
	}
	ctx = logging.With(ctx, p.LogAttrs()...)
	var out any
	var err error
	switch p.Step {
	case StepBegin, StepCheck, StepFinish, StepRecordFailure:
		if p.OperationID == "" || p.InstanceID == "" {
			return nil, &PermanentError{Description: "task payload lacks operation_id or instance_id"}
		}
	case StepCleanupDelete, StepCleanupDeleted, StepCleanupGaveUp:
		if p.DetachedID == "" {
			return nil, &PermanentError{Description: "task payload lacks detached_id"}
		}
	default:
		return nil, &PermanentError{Description: fmt.Sprintf("unknown step %q", p.Step)}
	}
	switch p.Step {
	case StepBegin:
		out, err = s.Begin(ctx, p.InstanceID, p.OperationID)
	case StepCheck:
		out, err = s.Check(ctx, p.InstanceID, p.OperationID)
	case StepFinish:
		out, err = struct{}{}, s.Finish(ctx, p.InstanceID, p.OperationID)
	case StepRecordFailure:
		out, err = struct{}{}, s.RecordFailure(ctx, p.InstanceID, p.OperationID, failureDescription(p.Error, p.Cause))
	case StepCleanupDelete:
		out, err = s.CleanupDelete(ctx, p.DetachedID)
	case StepCleanupDeleted:
		out, err = struct{}{}, s.CleanupDeleted(ctx, p.DetachedID)
	case StepCleanupGaveUp:
		out, err = struct{}{}, s.CleanupGaveUp(ctx, p.DetachedID, failureDescription(p.Error, p.Cause))
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// Begin starts the operation's change.
func (s *Steps) Begin(ctx context.Context, instanceID, operationID string) (Progress, error) {
	return s.advance(ctx, instanceID, operationID, broker.Driver.Begin)
}

// Check asks how the operation's change is going.
func (s *Steps) Check(ctx context.Context, instanceID, operationID string) (Progress, error) {
	return s.advance(ctx, instanceID, operationID, broker.Driver.Check)
}

func (s *Steps) advance(ctx context.Context, instanceID, operationID string,
	call func(broker.Driver, context.Context, broker.Change) (broker.Progress, error)) (Progress, error) {
	w, err := s.load(ctx, instanceID, operationID)
	if err != nil || w.op.Finished() {
		// A finished operation (halted, repaired) has nothing left to do.
		return Progress{Done: true}, err
	}
	ctx = logging.With(ctx, w.op.LogAttrs()...)
	if w.op.Kind == broker.KindDeprovision && w.plan.Settings.Deprovision == catalog.DeprovisionDetach {
		// Detach the instance's resources for the cleanup workflow: the
		// deprovision itself is then done.
		return Progress{Done: true}, s.detachAll(ctx, w.op, w.change.Instance.PlanID, "The service instance was deprovisioned.")
	}
	p, err := call(w.driver, ctx, w.change)
	if err != nil {
		return Progress{}, s.classify(ctx, err)
	}
	if p.Done {
		return Progress{Done: true}, nil // finish follows at once: no progress to record
	}
	// Record when to look again: last_operation's Retry-After, and the
	// deadline after which a silent operation is repaired.
	// The driver's description of how far it is reaches last_operation.
	op := w.op
	op.RetryAfter, op.UpdatedAt = p.RetryAfter, s.Now()
	op.NextCheckAt = op.UpdatedAt.Add(p.RetryAfter)
	if p.Description != "" {
		op.Description = p.Description
	}
	if err := s.Store.UpdateOperation(ctx, op); err != nil && !isConflict(err) {
		return Progress{}, &TransientError{Err: fmt.Errorf("record progress of %s: %w", op.ID, err)}
	}
	return Progress{RetryAfter: max(1, int(math.Ceil(p.RetryAfter.Seconds())))}, nil
}

// Finish records the operation's success and releases what it held.
func (s *Steps) Finish(ctx context.Context, instanceID, operationID string) error {
	w, err := s.load(ctx, instanceID, operationID)
	if err != nil || w.op.Finished() {
		return err
	}
	ctx = logging.With(ctx, w.op.LogAttrs()...)
	p := broker.Progress{Done: true}
	if w.op.Kind == broker.KindDeprovision && w.plan.Settings.Deprovision == catalog.DeprovisionDetach {
		// Begin detached everything; what a late writer may have added since
		// goes the same way.
		err = s.detachAll(ctx, w.op, w.change.Instance.PlanID, "The service instance was deprovisioned.")
	} else {
		p, err = w.driver.Check(ctx, w.change)
	}
	if err != nil {
		return s.classify(ctx, err)
	}
	if !p.Done {
		return &TransientError{Err: fmt.Errorf("finish %s: the change is not done yet", w.op.ID)}
	}
	now := s.Now()
	f := broker.Finish{Op: finished(w.op, broker.OperationSucceeded, succeeded[w.op.Kind], now)}
	inst := w.change.Instance
	inst.Op, inst.Version, inst.UpdatedAt = "", inst.Version+1, now
	switch w.op.Kind {
	case broker.KindProvision, broker.KindUpdate:
		if w.op.Target != nil {
			inst = w.op.Target.Apply(inst)
		}
		inst.State = broker.InstanceReady
		if p.DashboardURL != "" {
			inst.DashboardURL = p.DashboardURL
		}
		f.Instance = &inst
	case broker.KindDeprovision:
		f.DeleteInstance = true
	case broker.KindBind:
		b := *w.change.Binding
		b.State, b.Op, b.Version, b.UpdatedAt = broker.BindingReady, "", b.Version+1, now
		b.Credentials, b.Endpoints = p.Credentials, p.Endpoints
		f.Binding, f.ReleaseBinding = &b, true
	case broker.KindUnbind:
		f.DeleteBinding, f.ReleaseBinding = true, true
	}
	return s.commit(ctx, f, "")
}

var succeeded = map[broker.OperationKind]string{
	broker.KindProvision:   "The service instance was provisioned.",
	broker.KindUpdate:      "The service instance was updated.",
	broker.KindDeprovision: "The service instance was deprovisioned.",
	broker.KindBind:        "The service binding was created.",
	broker.KindUnbind:      "The service binding was deleted.",
}

// RecordFailure records the operation's failure with a description for the
// user and releases what it held. An asynchronous provision or bind leaves a
// failed instance or binding for the platform to delete; a synchronous one
// leaves nothing, since its request already reported the failure.
func (s *Steps) RecordFailure(ctx context.Context, instanceID, operationID, description string) error {
	op, err := s.Store.GetOperation(ctx, instanceID, operationID)
	if errors.Is(err, broker.ErrNotFound) || (err == nil && op.Finished()) {
		return nil
	}
	if err != nil {
		return &TransientError{Err: fmt.Errorf("record failure of %s: %w", operationID, err)}
	}
	ctx = logging.With(ctx, op.LogAttrs()...)
	if description == "" {
		description = fmt.Sprintf("The %s failed.", op.Kind)
	}
	// Hand what the failed change made to the cleanup workflow first: the
	// failed instance or binding then holds nothing, and deleting it is
	// immediate. Detaching is idempotent, so a retry after a crash here
	// does no harm.
	if err := s.detachLeftovers(ctx, op, description); err != nil {
		return err
	}
	now := s.Now()
	f := broker.Finish{Op: finished(op, broker.OperationFailed, description, now)}
	// The parameters the driver saw, which the logged reason must not repeat.
	var params []json.RawMessage
	if op.Target != nil {
		params = append(params, op.Target.Parameters)
	}
	commit := func() error { return s.commit(ctx, f, logReason(description, params...)) }
	if op.Kind.IsBinding() {
		b, err := s.Store.GetBinding(ctx, instanceID, op.BindingID)
		if err != nil && !errors.Is(err, broker.ErrNotFound) {
			return &TransientError{Err: err}
		}
		params = append(params, b.Parameters)
		f.ReleaseBinding = true
		switch {
		case err != nil:
			// The binding is gone with its hold (its instance was deleted).
			f.ReleaseBinding = false
		case op.Kind == broker.KindBind && !op.Async:
			f.DeleteBinding = true
		default:
			b.State, b.Op, b.Version, b.UpdatedAt = broker.BindingFailed, "", b.Version+1, now
			if op.Kind == broker.KindUnbind {
				b.State = broker.BindingReady
			}
			f.Binding = &b
		}
		return commit()
	}
	inst, err := s.Store.GetInstance(ctx, instanceID)
	if errors.Is(err, broker.ErrNotFound) {
		return commit()
	}
	if err != nil {
		return &TransientError{Err: err}
	}
	params = append(params, inst.Parameters)
	inst.Op, inst.Version, inst.UpdatedAt = "", inst.Version+1, now
	switch op.Kind {
	case broker.KindProvision:
		if !op.Async {
			f.DeleteInstance = true
			return commit()
		}
		inst.State = broker.InstanceFailed
	case broker.KindUpdate:
		inst.State = broker.InstanceReady
		f.Op.InstanceUsable, f.Op.UpdateRepeatable = broker.Bool(true), broker.Bool(true)
	case broker.KindDeprovision:
		inst.State = broker.InstanceFailed
		f.Op.InstanceUsable = broker.Bool(false)
	}
	f.Instance = &inst
	return commit()
}

// commit writes a Finish; one that lost to another writer (the operation
// already finished, or was taken over) has nothing left to do. The log line
// of a failed operation says why, in reason (see logReason).
func (s *Steps) commit(ctx context.Context, f broker.Finish, reason string) error {
	err := s.Store.FinishOperation(ctx, f)
	if isConflict(err) {
		s.Logger.InfoContext(ctx, "operation already finished or taken over")
		return nil
	}
	if err != nil {
		return &TransientError{Err: fmt.Errorf("finish %s: %w", f.Op.ID, err)}
	}
	attrs := []slog.Attr{slog.String("kind", string(f.Op.Kind)), slog.String("state", string(f.Op.State))}
	level := slog.LevelInfo
	if f.Op.State == broker.OperationFailed {
		attrs, level = append(attrs, slog.String("reason", reason)), slog.LevelWarn
	}
	s.Logger.LogAttrs(ctx, level, "operation finished", attrs...)
	return nil
}

// withheldReason is what the log says about a failure whose description
// repeats request input.
const withheldReason = "The description repeats a request parameter, so the log leaves it out; last_operation shows it."

// logReason is what the log says about a failure described as description:
// the description itself, which the broker and the drivers write for the
// user without request input, unless it repeats a string value of the
// parameters the change was asked with (the demo driver's fail_description
// becomes the description as it is). Then it is withheldReason.
func logReason(description string, params ...json.RawMessage) string {
	for _, raw := range params {
		var v any
		if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
			continue
		}
		if repeatsString(description, v) {
			return withheldReason
		}
	}
	return description
}

// repeatsString reports whether s contains a non-empty string value found
// anywhere in the decoded JSON value v. Numbers and booleans are not looked
// for: "5" or "true" would match nearly every description. A driver must
// not quote them either (broker.Failure), as the demo driver does not.
func repeatsString(s string, v any) bool {
	switch v := v.(type) {
	case string:
		return v != "" && strings.Contains(s, v)
	case []any:
		for _, e := range v {
			if repeatsString(s, e) {
				return true
			}
		}
	case map[string]any:
		for _, e := range v {
			if repeatsString(s, e) {
				return true
			}
		}
	}
	return false
}

func finished(op broker.Operation, state broker.OperationState, description string, now time.Time) broker.Operation {
	op.State, op.Description = state, description
	op.UpdatedAt, op.FinishedAt, op.ExpiresAt = now, now, now.Add(broker.Retention)
	op.RetryAfter = 0
	return op
}

// work is what a step needs: the operation, the change and its driver.
type work struct {
	op     broker.Operation
	change broker.Change
	driver broker.Driver
	plan   *catalog.Plan
}

func (s *Steps) load(ctx context.Context, instanceID, operationID string) (work, error) {
	op, err := s.Store.GetOperation(ctx, instanceID, operationID)
	if errors.Is(err, broker.ErrNotFound) {
		return work{op: broker.Operation{State: broker.OperationFailed}}, nil
	}
	if err != nil {
		return work{}, &TransientError{Err: fmt.Errorf("load operation %s: %w", operationID, err)}
	}
	if op.Finished() {
		return work{op: op}, nil
	}
	inst, err := s.Store.GetInstance(ctx, instanceID)
	if err != nil {
		return work{}, s.loadError(op, "instance", err)
	}
	w := work{op: op, change: broker.Change{Operation: op, Instance: inst}}
	if op.Kind.IsBinding() {
		b, err := s.Store.GetBinding(ctx, instanceID, op.BindingID)
		if err != nil {
			return work{}, s.loadError(op, "binding", err)
		}
		w.change.Binding = &b
	}
	// The change runs under the instance's plan, or the plan an update
	// moves it to (whose driver and settings then apply).
	planID := inst.PlanID
	if op.Kind == broker.KindUpdate && op.Target != nil && op.Target.PlanID != "" {
		planID = op.Target.PlanID
	}
	if w.driver, w.plan, w.change.Settings, err = s.driverFor(planID); err != nil {
		return work{}, err
	}
	w.change.Service, w.change.Plan = s.Catalog.Service(inst.ServiceID), w.plan
	return w, nil
}

// driverFor returns the driver of a plan and the plan's settings for it.
func (s *Steps) driverFor(planID string) (broker.Driver, *catalog.Plan, any, error) {
	_, plan := s.Catalog.PlanByID(planID)
	if plan == nil {
		return nil, nil, nil, &PermanentError{Description: fmt.Sprintf("The plan %s is no longer in the catalog.", planID)}
	}
	driver, settings, ok := s.Drivers.For(plan)
	if !ok {
		return nil, nil, nil, &PermanentError{Description: fmt.Sprintf("The broker has no driver for plan %s.", plan.Name)}
	}
	return driver, plan, settings, nil
}

func (s *Steps) loadError(op broker.Operation, what string, err error) error {
	if errors.Is(err, broker.ErrNotFound) {
		return &PermanentError{Description: fmt.Sprintf("The %s of operation %s no longer exists.", what, op.ID)}
	}
	return &TransientError{Err: fmt.Errorf("load %s of %s: %w", what, op.ID, err)}
}

// classify turns a driver error into a step error.
func (s *Steps) classify(ctx context.Context, err error) error {
	var f *broker.Failure
	if errors.As(err, &f) {
		return &PermanentError{Description: f.Description}
	}
	s.Logger.WarnContext(ctx, "transient driver error", "error", err.Error())
	return &TransientError{Err: err}
}

// failureDescription turns a caught error into the description the user
// sees. Only a driver's permanent failure is shown as it is; anything else
// is summarised, so internals do not reach the platform.
func failureDescription(name, cause string) string {
	var lambdaErr struct {
		ErrorMessage string `json:"errorMessage"`
	}
	if json.Unmarshal([]byte(cause), &lambdaErr) == nil && lambdaErr.ErrorMessage != "" {
		cause = lambdaErr.ErrorMessage
	}
	switch name {
	case "PermanentError":
		if cause != "" {
			return cause
		}
	case "States.Timeout":
		return "The operation timed out; try again later."
	}
	return "The operation failed because the service could not complete it; try again later."
}

func isConflict(err error) bool {
	var c *broker.ConflictError
	return errors.As(err, &c)
}
