package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/serverless-osb/broker/internal/logging"
)

// The lifecycle's transitions: what an operation's end leaves of its
// instance and binding, as one table (transitions: kind × end → the states,
// the rules as data), which outcome and fail follow and lifecycle_test.go
// walks; and what a failure records, says and logs. How an operation gets
// to its end is flight.go's.

var succeeded = map[OperationKind]string{
	KindProvision:   "The service instance was provisioned.",
	KindUpdate:      "The service instance was updated.",
	KindDeprovision: "The service instance was deprovisioned.",
	KindBind:        "The service binding was created.",
	KindUnbind:      "The service binding was deleted.",
}

// outcome is what a change that is done leaves: the operation succeeded,
// and the instance or binding as the kind of operation says.
func (b *Broker) outcome(f *flight, p Progress) Finish {
	now := b.Now()
	fin := Finish{Op: b.finished(f.op, OperationSucceeded, succeeded[f.op.Kind]), Records: f.pending}
	inst := f.change.Instance
	inst.Op, inst.Version, inst.UpdatedAt = "", inst.Version+1, now
	switch f.op.Kind {
	case KindProvision, KindUpdate:
		if f.op.Target != nil {
			inst = f.op.Target.Apply(inst)
		}
		inst.State = InstanceReady
		if p.DashboardURL != "" {
			inst.DashboardURL = p.DashboardURL
		}
		if p.Metadata != nil {
			inst.Metadata = *p.Metadata
		}
		fin.Instance = &inst
	case KindDeprovision:
		fin.DeleteInstance, fin.Bindings = true, f.snap.BindingIDs
		if f.detaches() {
			fin.Detach = b.detachments(f.op, f.snap.Instance, f.change.Records, "The service instance was deprovisioned.")
			fin.Records = RecordChanges{}
		}
	case KindBind:
		bd := *f.change.Binding
		bd.State, bd.Op, bd.Version, bd.UpdatedAt = BindingReady, "", bd.Version+1, now
		bd.Credentials, bd.Endpoints = p.Credentials, p.Endpoints
		if life := f.plan.Settings.CredentialLifetime; life > 0 {
			bd.ExpiresAt = now.Add(life)
			bd.RenewBefore = bd.ExpiresAt.Add(-f.plan.Settings.CredentialRenewal)
		}
		fin.Binding, fin.ReleaseBinding = &bd, true
	case KindUnbind:
		fin.DeleteBinding, fin.ReleaseBinding = true, true
	}
	return fin
}

// logEnd logs the end of an operation: its kind and state and, for a
// failure, why (reason; see logReason).
func (b *Broker) logEnd(ctx context.Context, op Operation, reason string) {
	attrs := []slog.Attr{slog.String("kind", string(op.Kind)), slog.String("state", string(op.State))}
	level := slog.LevelInfo
	if op.State == OperationFailed {
		attrs, level = append(attrs, slog.String("reason", reason)), slog.LevelWarn
	}
	b.Logger.LogAttrs(ctx, level, "operation finished", attrs...)
}

// RecordFailure records an operation's failure with a description for the
// user, as RecordFailed does with no detail for the operator.
func (b *Broker) RecordFailure(ctx context.Context, instanceID, operationID, description string) error {
	return b.RecordFailed(ctx, instanceID, operationID, Failure{Description: description})
}

// RecordFailed records an operation's failure as the driver reported it:
// a description for the user and a detail for the operator
// (Operation.Detail), and releases what it held; what the failed change made
// is detached for the cleanup workflow in the same write. An asynchronous
// provision or bind leaves a failed instance or binding for the platform to
// delete; a synchronous one leaves nothing, since its request already
// reported the failure. A failed update also keeps what the driver said of
// the instance (Failure.InstanceUsable, Failure.UpdateRepeatable). A
// missing or finished operation has nothing to record.
func (b *Broker) RecordFailed(ctx context.Context, instanceID, operationID string, f Failure) error {
	snap, err := b.Store.Load(ctx, instanceID, operationID, "")
	if err != nil {
		return fmt.Errorf("record failure of %s: %w", operationID, err)
	}
	if snap.Operation == nil || snap.Operation.Finished() {
		return nil
	}
	ctx = logging.With(ctx, snap.Operation.LogAttrs()...)
	return b.fail(ctx, *snap.Operation, snap, f)
}

// fail records op's failure f from snap, as RecordFailed describes.
func (b *Broker) fail(ctx context.Context, op Operation, snap Snapshot, f Failure) error {
	description, detail := f.Description, f.Detail
	if description == "" {
		description = fmt.Sprintf("The %s failed.", op.Kind)
	}
	now := b.Now()
	fin := Finish{Op: b.finished(op, OperationFailed, description)}
	fin.Detach = b.leftovers(ctx, op, snap, description)
	// The parameters the driver saw, which neither the logged reason nor
	// the operator's detail may repeat.
	var params []json.RawMessage
	if op.Target != nil {
		params = append(params, op.Target.Parameters)
	}
	if snap.Instance != nil {
		params = append(params, snap.Instance.Parameters)
	}
	if op.Kind.IsBinding() && snap.Binding != nil {
		params = append(params, snap.Binding.Parameters)
	}
	fin.Op.Detail = OperatorDetail(detail, params...)
	reason := logReason(description, params...)
	if snap.Instance == nil {
		// Gone with its bindings, and their holds.
		return b.commit(ctx, fin, reason)
	}
	inst := *snap.Instance
	if op.Kind.IsBinding() {
		bd := snap.Binding
		switch {
		case bd == nil:
			// The binding is gone with its hold (its instance was deleted).
		case op.Kind == KindBind && !op.Async:
			fin.DeleteBinding, fin.ReleaseBinding = true, true
		default:
			failed := *bd
			failed.State, failed.Op, failed.Version, failed.UpdatedAt = BindingFailed, "", bd.Version+1, now
			if op.Kind == KindUnbind {
				failed.State = BindingReady
			}
			fin.Binding, fin.ReleaseBinding = &failed, true
		}
		return b.commit(ctx, fin, reason)
	}
	inst.Op, inst.Version, inst.UpdatedAt = "", inst.Version+1, now
	switch op.Kind {
	case KindProvision:
		if !op.Async {
			fin.DeleteInstance, fin.Bindings = true, snap.BindingIDs
			return b.commit(ctx, fin, reason)
		}
		inst.State = InstanceFailed
	case KindUpdate:
		// Usable and repeatable unless the driver says otherwise (a stack
		// that could not be rolled back). An unusable instance stays
		// ready, not failed: what is wrong is outside the broker, where the
		// operator mends it, after which the instance is updated and bound
		// again as any other; failed would leave only its deletion.
		inst.State = InstanceReady
		fin.Op.InstanceUsable, fin.Op.UpdateRepeatable = Bool(true), Bool(true)
		if f.InstanceUsable != nil {
			fin.Op.InstanceUsable = Bool(*f.InstanceUsable)
		}
		if f.UpdateRepeatable != nil {
			fin.Op.UpdateRepeatable = Bool(*f.UpdateRepeatable)
		}
	case KindDeprovision:
		inst.State = InstanceFailed
		fin.Op.InstanceUsable = Bool(false)
	}
	fin.Instance = &inst
	return b.commit(ctx, fin, reason)
}

// leftovers are the detached records of what a failed op leaves behind, as
// its driver names them: they go to the cleanup workflow, so the failed
// instance or binding holds nothing and deleting it is immediate. When the
// instance is gone already, every record still under it is a leftover. A
// deprovision or unbind leaves none: its resource stays attached.
func (b *Broker) leftovers(ctx context.Context, op Operation, snap Snapshot, reason string) []Detached {
	if op.Kind == KindDeprovision || op.Kind == KindUnbind {
		return nil
	}
	if snap.Instance == nil {
		return b.detachments(op, nil, snap.Records, reason)
	}
	nf, err := b.newFlight(op, snap)
	if err != nil {
		// No driver to ask (the plan left the catalog): the records stay
		// under the instance, for its deprovision.
		b.Logger.WarnContext(ctx, "no driver to name the leftovers", "error", err.Error())
		return nil
	}
	if nf.change.Binding == nil && op.Kind.IsBinding() {
		nf.change.Binding = &Binding{InstanceID: op.InstanceID, ID: op.BindingID}
	}
	names, err := nf.driver.Leftovers(ctx, nf.change)
	if err != nil {
		b.Logger.WarnContext(ctx, "leftovers: the driver could not name them; the records stay", "error", err.Error())
		return nil
	}
	var records []Resource
	for _, name := range names {
		if r, ok := nf.change.Record(name); ok {
			records = append(records, r)
		}
	}
	return b.detachments(op, snap.Instance, records, reason)
}

// detachments are the detached records for records that op leaves under
// its instance (inst, or nil when it is gone), each with its first cleanup
// counted as started (commit starts it).
func (b *Broker) detachments(op Operation, inst *Instance, records []Resource, reason string) []Detached {
	now := b.Now()
	planID := op.PlanID
	if inst != nil {
		planID = inst.PlanID
	}
	var out []Detached
	for _, r := range records {
		out = append(out, Detached{
			ID: DetachedID(op.InstanceID, r.Name, op.ID), InstanceID: op.InstanceID, Name: r.Name, Data: r.Data,
			PlanID: planID, OperationID: op.ID, Reason: reason, State: DetachedCleaning, Attempts: 1,
			CreatedAt: now, UpdatedAt: now,
		})
	}
	return out
}

// commit writes an outcome. One that lost to another writer (the operation
// already finished, or was taken over) returns ErrTakenOver. The log line
// of a failed operation says why, in reason (see logReason). The cleanups
// of what it detached start at once; a start that fails is the reaper's.
func (b *Broker) commit(ctx context.Context, fin Finish, reason string) error {
	err := b.Store.FinishOperation(ctx, fin)
	if _, ok := conflictOf(err); ok {
		b.Logger.InfoContext(ctx, "operation already finished or taken over")
		return ErrTakenOver
	}
	if err != nil {
		return fmt.Errorf("finish %s: %w", fin.Op.ID, err)
	}
	b.logEnd(ctx, fin.Op, reason)
	for _, d := range fin.Detach {
		b.Logger.InfoContext(ctx, "resource detached for cleanup", "detached_id", d.ID, "resource", d.Name)
		if err := startCleanupExecution(ctx, b.Engine, d); err != nil {
			b.Logger.WarnContext(ctx, "start cleanup; the reaper will", "detached_id", d.ID, "error", err.Error())
		}
	}
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

// RepeatsParameter reports whether s repeats a string value of any of
// params, so that a driver logging a text of its own (a cloud provider's
// reason for a failure) leaves it out as the broker's log does.
func RepeatsParameter(s string, params ...json.RawMessage) bool {
	return logReason(s, params...) == withheldReason && s != withheldReason
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

// FailureDescription turns an error a workflow caught into the description
// the user sees (Caught).
func FailureDescription(name, cause string) string {
	return Caught(name, cause).Description
}

// Caught turns an error a workflow caught, by its name and cause, into the
// failure it records: the description the user sees, the detail the
// operator sees (Operation.Detail), and what the driver said of the
// instance (Failure.InstanceUsable, Failure.UpdateRepeatable). Only a
// driver's permanent failure is shown as it is, as Failure.Cause encoded
// it; anything else is summarised for the user, so internals do not reach
// the platform, and given to the operator as it is.
func Caught(name, cause string) Failure {
	var lambdaErr struct {
		ErrorMessage string `json:"errorMessage"`
	}
	if json.Unmarshal([]byte(cause), &lambdaErr) == nil && lambdaErr.ErrorMessage != "" {
		cause = lambdaErr.ErrorMessage
	}
	const generic = "The operation failed because the service could not complete it; try again later."
	switch name {
	case "PermanentError":
		var f failureCause
		if json.Unmarshal([]byte(cause), &f) == nil && f.Description != "" {
			return Failure(f)
		}
		if cause != "" {
			return Failure{Description: cause}
		}
	case "States.Timeout":
		return Failure{Description: "The operation timed out; try again later.", Detail: clipDetail(strings.TrimSpace(name + ": " + cause))}
	}
	if name == "" && cause == "" {
		return Failure{Description: generic}
	}
	return Failure{Description: generic, Detail: clipDetail(strings.TrimSpace(name + ": " + cause))}
}

// failureCause is a permanent failure with a detail or flags, as the cause
// of the workflow's error carries it.
type failureCause struct {
	Description      string `json:"description"`
	Detail           string `json:"detail,omitempty"`
	InstanceUsable   *bool  `json:"instance_usable,omitempty"`
	UpdateRepeatable *bool  `json:"update_repeatable,omitempty"`
}

// Cause is the cause of a workflow's error for the permanent failure f
// (Caught reads it): its description as it is when that is all there is
// (as causes were before details), else all of f in one JSON object, the
// detail capped at MaxDetail. A description that is itself a JSON object
// (a demo driver's fail_description is the user's) is encoded too, so that
// it cannot pass for a detail or flags.
func (f *Failure) Cause() string {
	if f.Detail == "" && f.InstanceUsable == nil && f.UpdateRepeatable == nil &&
		!strings.HasPrefix(strings.TrimSpace(f.Description), "{") {
		return f.Description
	}
	data, err := json.Marshal(failureCause{Description: f.Description, Detail: clipDetail(f.Detail),
		InstanceUsable: f.InstanceUsable, UpdateRepeatable: f.UpdateRepeatable})
	if err != nil {
		return f.Description
	}
	return string(data)
}

// MaxDetail bounds an operator's detail, in bytes: a CloudFormation reason
// is a few hundred; the bound keeps a workflow's error cause (at most
// 32,768 characters) and the operation's item small.
const MaxDetail = 4096

// withheldDetail is the operator's detail of a failure whose detail
// repeats a request parameter.
const withheldDetail = "(left out: it repeats a request parameter; the provider's own record of the failure has it)"

// OperatorDetail is the detail an operation's record keeps (Operation.Detail):
// detail capped at MaxDetail, or withheldDetail when it repeats a string
// value of params, as a log line would.
func OperatorDetail(detail string, params ...json.RawMessage) string {
	if detail == "" {
		return ""
	}
	if RepeatsParameter(detail, params...) {
		return withheldDetail
	}
	return clipDetail(detail)
}

// clipDetail caps s at MaxDetail bytes, at a character's boundary.
func clipDetail(s string) string {
	if len(s) <= MaxDetail {
		return s
	}
	const more = " …(cut)"
	cut := MaxDetail - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}
