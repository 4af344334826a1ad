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

// An end is how an operation ended, as the transitions key it: a success,
// or a failure that the platform learns of by polling (an asynchronous
// operation) or from the request that ran it (a synchronous one), which
// already reported it.
type end string

const (
	endSucceeded       end = "succeeded"
	endFailed          end = "failed"
	endFailedInRequest end = "failed in its request"
)

// endOf is how op ends when it fails (failed) or not.
func endOf(op Operation, failed bool) end {
	switch {
	case !failed:
		return endSucceeded
	case op.Async:
		return endFailed
	}
	return endFailedInRequest
}

// transition is what an operation's end leaves of the item it changed:
// its instance, or for a binding operation its binding (whose end also
// releases the instance's count of binding operations).
type transition struct {
	// Instance or Binding is the item's state after the end; Delete, that
	// the item is deleted instead (an instance with its bindings).
	Instance InstanceState
	Binding  BindingState
	Delete   bool
	// Leftovers: what the failed change made (as its driver names them,
	// Driver.Leftovers) is detached for the cleanup, so that the item
	// holds nothing and deleting it is immediate. Without, the resource
	// stays attached, for the next deprovision or unbind.
	Leftovers bool
	// Usable and Repeatable are the operation's instance_usable and
	// update_repeatable (nil: not said); with DriverSays, the driver's
	// Failure.InstanceUsable and UpdateRepeatable, when it gives them,
	// say instead.
	Usable, Repeatable *bool
	DriverSays         bool
}

// transitions are the lifecycle's, by kind and end: the one place that says
// which end moves which item to which state (lifecycle_test.go walks every
// entry through the broker, and fails on an end the table does not list).
// A failed update leaves its instance ready, not failed: what is wrong is
// outside the broker (a stack that could not be rolled back), where the
// operator mends it, after which the instance is updated and bound again
// as any other; failed would leave only its deletion. A failed deprovision
// or unbind leaves its resource attached, so that deleting again deletes
// it. A change that failed within its request leaves nothing to delete: the
// request reported the failure.
var transitions = map[OperationKind]map[end]transition{
	KindProvision: {
		endSucceeded:       {Instance: InstanceReady},
		endFailed:          {Instance: InstanceFailed, Leftovers: true},
		endFailedInRequest: {Delete: true, Leftovers: true},
	},
	KindUpdate: {
		endSucceeded:       {Instance: InstanceReady},
		endFailed:          {Instance: InstanceReady, Leftovers: true, Usable: Bool(true), Repeatable: Bool(true), DriverSays: true},
		endFailedInRequest: {Instance: InstanceReady, Leftovers: true, Usable: Bool(true), Repeatable: Bool(true), DriverSays: true},
	},
	KindDeprovision: {
		endSucceeded:       {Delete: true},
		endFailed:          {Instance: InstanceFailed, Usable: Bool(false)},
		endFailedInRequest: {Instance: InstanceFailed, Usable: Bool(false)},
	},
	KindBind: {
		endSucceeded:       {Binding: BindingReady},
		endFailed:          {Binding: BindingFailed, Leftovers: true},
		endFailedInRequest: {Delete: true, Leftovers: true},
	},
	KindUnbind: {
		endSucceeded:       {Delete: true},
		endFailed:          {Binding: BindingReady},
		endFailedInRequest: {Binding: BindingReady},
	},
}

// said is the flag an end records: the driver's, when the transition takes
// the driver's word and it gave one, else the transition's own (a copy: the
// table is shared).
func (t transition) said(own, driver *bool) *bool {
	if t.DriverSays && driver != nil {
		own = driver
	}
	if own == nil {
		return nil
	}
	return Bool(*own)
}

var succeeded = map[OperationKind]string{
	KindProvision:   "The service instance was provisioned.",
	KindUpdate:      "The service instance was updated.",
	KindDeprovision: "The service instance was deprovisioned.",
	KindBind:        "The service binding was created.",
	KindUnbind:      "The service binding was deleted.",
}

// outcome is what a change that is done leaves: the operation succeeded,
// and the instance or binding as its transition says, with the results
// the driver returned.
func (b *Broker) outcome(f *flight, p Progress) Finish {
	now := b.Now()
	t := transitions[f.op.Kind][endSucceeded]
	fin := Finish{Op: b.finished(f.op, OperationSucceeded, succeeded[f.op.Kind]), Records: f.pending}
	switch {
	case f.op.Kind.IsBinding() && t.Delete:
		fin.DeleteBinding, fin.ReleaseBinding = true, true
	case f.op.Kind.IsBinding():
		bd := *f.change.Binding
		bd.State, bd.Op, bd.Version, bd.UpdatedAt = t.Binding, "", bd.Version+1, now
		bd.Credentials, bd.Endpoints = p.Credentials, p.Endpoints
		if life := f.plan.Settings.CredentialLifetime; life > 0 {
			bd.ExpiresAt = now.Add(life)
			bd.RenewBefore = bd.ExpiresAt.Add(-f.plan.Settings.CredentialRenewal)
		}
		fin.Binding, fin.ReleaseBinding = &bd, true
	case t.Delete:
		fin.DeleteInstance, fin.Bindings = true, f.snap.BindingIDs
		if f.detaches() {
			fin.Detach = b.detachments(f.op, f.snap.Instance, f.change.Records, "The service instance was deprovisioned.")
			fin.Records = RecordChanges{}
		}
	default:
		inst := f.change.Instance
		inst.Op, inst.Version, inst.UpdatedAt = "", inst.Version+1, now
		if f.op.Target != nil {
			inst = f.op.Target.Apply(inst)
		}
		inst.State = t.Instance
		if p.DashboardURL != "" {
			inst.DashboardURL = p.DashboardURL
		}
		if p.Metadata != nil {
			inst.Metadata = *p.Metadata
		}
		fin.Instance = &inst
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
	logging.LogAttrs(ctx, b.Logger, level, "operation finished", attrs...)
}

// RecordFailure records an operation's failure with a description for the
// user, as RecordFailed does with no detail for the operator.
func (b *Broker) RecordFailure(ctx context.Context, t OperationTask, description string) error {
	return b.RecordFailed(ctx, t, Failure{Description: description})
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
func (b *Broker) RecordFailed(ctx context.Context, t OperationTask, f Failure) error {
	snap, err := b.loadTask(ctx, t)
	if err != nil {
		return fmt.Errorf("record failure of %s: %w", t.OperationID, err)
	}
	if snap.Operation == nil || snap.Operation.Finished() {
		return nil
	}
	ctx = logging.With(ctx, snap.Operation.LogAttrs()...)
	return b.fail(ctx, *snap.Operation, snap, f)
}

// fail records op's failure f from snap, as RecordFailed describes.
func (b *Broker) fail(ctx context.Context, op Operation, snap Snapshot, f Failure) error {
	// A driver's words, stored clean of what a terminal acts on.
	description, detail := CleanLine(f.Description), CleanText(f.Detail)
	if description == "" {
		description = fmt.Sprintf("The %s failed.", op.Kind)
	}
	now := b.Now()
	t := transitions[op.Kind][endOf(op, true)]
	fin := Finish{Op: b.finished(op, OperationFailed, description)}
	if t.Leftovers {
		fin.Detach = b.leftovers(ctx, op, snap, description)
	}
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
	switch {
	case snap.Instance == nil:
		// Gone with its bindings, and their holds.
	case op.Kind.IsBinding() && snap.Binding == nil:
		// The binding is gone with its hold (its instance was deleted).
	case op.Kind.IsBinding() && t.Delete:
		fin.DeleteBinding, fin.ReleaseBinding = true, true
	case op.Kind.IsBinding():
		failed := *snap.Binding
		failed.State, failed.Op, failed.Version, failed.UpdatedAt = t.Binding, "", failed.Version+1, now
		fin.Binding, fin.ReleaseBinding = &failed, true
	case t.Delete:
		fin.DeleteInstance, fin.Bindings = true, snap.BindingIDs
	default:
		inst := *snap.Instance
		inst.State, inst.Op, inst.Version, inst.UpdatedAt = t.Instance, "", inst.Version+1, now
		fin.Instance = &inst
		fin.Op.InstanceUsable = t.said(t.Usable, f.InstanceUsable)
		fin.Op.UpdateRepeatable = t.said(t.Repeatable, f.UpdateRepeatable)
	}
	return b.commit(ctx, fin, reason)
}

// leftovers are the detached records of what a failed op leaves behind, as
// its driver names them: they go to the cleanup workflow, so the failed
// instance or binding holds nothing and deleting it is immediate. When the
// instance is gone already, every record still under it is a leftover. Only
// an end whose transition says Leftovers has any.
func (b *Broker) leftovers(ctx context.Context, op Operation, snap Snapshot, reason string) []Detached {
	if snap.Instance == nil && !op.Kind.IsBinding() && !Whole(&op) {
		// Load read the instance's own records; its bindings' are
		// leftovers too.
		whole, err := b.Store.LoadWhole(ctx, op.InstanceID, "")
		if err != nil {
			b.Logger.WarnContext(ctx, "leftovers: the records could not be read; they stay", "error", err.Error())
			return nil
		}
		return b.detachments(op, nil, whole.Records, reason)
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

// GenericFailure is the description of a failure that the user is told
// nothing more of, so that internals do not reach the platform: the
// operator finds its cause in the operation's detail.
const GenericFailure = "The operation failed because the service could not complete it; try again later."

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
	return ClipDetail(detail)
}

// ClipDetail caps s at MaxDetail bytes, at a character's boundary.
func ClipDetail(s string) string {
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
