package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/logging"
)

// The lifecycle of an operation once its request has started it: begin its
// change, check it until it is done, then finish it, or record its failure.
// The workflow's Task states (package steps) and a synchronous request run
// the same functions; every one is idempotent, so a Task may run again.
//
// Cost: a Task reads once (Store.Load: the operation, its instance, bindings
// and the driver's records) and writes at most once (the progress with the
// driver's record changes, or the outcome in one transaction). A
// synchronous request keeps everything in memory between its steps and
// writes its outcome once.
//
// The transitions, by kind and outcome, are in outcome: a success and a
// failure each name what happens to the operation, its instance and its
// binding.

// transientAttempts bounds the tries of one driver call within a request.
const transientAttempts = 4

// Backoff is the first pause between the tries of a driver call within a
// request, after a transient error; it doubles each time.
const Backoff = 100 * time.Millisecond

// SyncWait is how long a synchronous request waits, by default, for a
// change its driver has begun but not done (Broker.SyncWait): with the
// plan's own timeout per call, under the 25 s the deployed api function
// has (the HTTP API's integration gives up at 30 s).
const SyncWait = 10 * time.Second

// unavailable is a synchronous change that its service's backend did not
// complete: it stayed unavailable through the request's tries, or did not
// finish within SyncWait. Its description is the user's (a 503).
type unavailable struct {
	description string
	err         error
}

func (u *unavailable) Error() string { return u.err.Error() }
func (u *unavailable) Unwrap() error { return u.err }

// driverError marks an error of the driver's own (not the store's) in a
// synchronous request, which runSync reports as the backend's.
type driverError struct{ err error }

func (e *driverError) Error() string { return e.err.Error() }
func (e *driverError) Unwrap() error { return e.err }

// ErrTakenOver says that an operation was finished by someone else while
// its step ran (a deprovision halted it, or a repair failed it).
var ErrTakenOver = errors.New("the operation was finished or taken over by another")

// flight is an operation on its way: what its steps need, in memory.
type flight struct {
	op     Operation
	snap   Snapshot
	change Change
	driver Driver
	plan   *catalog.Plan
	// pending are the driver's record changes not yet written.
	pending RecordChanges
}

// Progress of a Task: whether the change is done, and when to look again.
type TaskProgress struct {
	Done       bool `json:"done"`
	RetryAfter int  `json:"retry_after"`
}

// waitFor is the progress of a change not done yet: look again after d.
func waitFor(d time.Duration) TaskProgress { return TaskProgress{RetryAfter: RetryAfterSeconds(d)} }

// BeginTask runs the Begin Task of an operation: it starts the change and,
// when the change is done at once, finishes the operation.
func (b *Broker) BeginTask(ctx context.Context, instanceID, operationID string) (TaskProgress, error) {
	return b.advanceTask(ctx, instanceID, operationID, true)
}

// CheckTask runs the Check Task: it asks how the change is going and
// finishes the operation once it is done.
func (b *Broker) CheckTask(ctx context.Context, instanceID, operationID string) (TaskProgress, error) {
	return b.advanceTask(ctx, instanceID, operationID, false)
}

// FinishTask runs the Finish Task: it finishes an operation whose change is
// done (BeginTask and CheckTask normally have).
func (b *Broker) FinishTask(ctx context.Context, instanceID, operationID string) error {
	p, err := b.advanceTask(ctx, instanceID, operationID, false)
	if err == nil && !p.Done {
		return fmt.Errorf("finish %s: the change is not done yet", operationID)
	}
	return err
}

func (b *Broker) advanceTask(ctx context.Context, instanceID, operationID string, begin bool) (TaskProgress, error) {
	f, err := b.loadFlight(ctx, instanceID, operationID)
	if err != nil || f == nil {
		// A finished operation (halted, repaired) has nothing left to do.
		return TaskProgress{Done: true}, err
	}
	ctx = logging.With(ctx, f.op.LogAttrs()...)
	begin = begin || f.op.OutageInBegin
	p, err := b.step(ctx, f, begin)
	var failure *Failure
	switch {
	case err != nil && !errors.As(err, &failure):
		return b.waitOut(ctx, f, begin, err)
	case err != nil:
		return TaskProgress{}, err
	}
	f.endOutage()
	if p.Done {
		_, err := b.succeed(ctx, f, p)
		if errors.Is(err, ErrTakenOver) {
			err = nil
		}
		return TaskProgress{Done: true}, err
	}
	if err := b.recordProgress(ctx, f, p); err != nil {
		if errors.Is(err, ErrTakenOver) {
			return TaskProgress{Done: true}, nil
		}
		return TaskProgress{}, err
	}
	return waitFor(p.RetryAfter), nil
}

// loadFlight reads an operation and what it concerns in one request. It
// returns nil when the operation is missing or finished.
func (b *Broker) loadFlight(ctx context.Context, instanceID, operationID string) (*flight, error) {
	snap, err := b.Store.Load(ctx, instanceID, operationID, "")
	if err != nil {
		return nil, fmt.Errorf("load operation %s: %w", operationID, err)
	}
	if snap.Operation == nil || snap.Operation.Finished() {
		return nil, nil
	}
	op := *snap.Operation
	if op.Kind.IsBinding() && snap.Instance != nil && snap.Binding == nil {
		return nil, &Failure{Description: fmt.Sprintf("The binding of operation %s no longer exists.", op.ID)}
	}
	return b.newFlight(op, snap)
}

// newFlight makes the change of op from what snap holds. The change runs
// under the instance's plan, or the plan an update moves it to (whose
// driver and settings then apply).
func (b *Broker) newFlight(op Operation, snap Snapshot) (*flight, error) {
	if snap.Instance == nil {
		return nil, &Failure{Description: fmt.Sprintf("The instance of operation %s no longer exists.", op.ID)}
	}
	inst := *snap.Instance
	planID := inst.PlanID
	if op.Kind == KindUpdate && op.Target != nil && op.Target.PlanID != "" {
		planID = op.Target.PlanID
	}
	driver, plan, settings, err := b.driverFor(planID)
	if err != nil {
		return nil, err
	}
	f := &flight{op: op, snap: snap, driver: driver, plan: plan}
	f.change = Change{Operation: op, Instance: inst, Plan: plan, Service: b.Catalog.Service(inst.ServiceID),
		Settings: settings, Records: snap.Records}
	if op.Kind.IsBinding() && snap.Binding != nil {
		copied := *snap.Binding
		f.change.Binding = &copied
	}
	return f, nil
}

// driverFor returns the driver of a plan and the plan's settings for it.
func (b *Broker) driverFor(planID string) (Driver, *catalog.Plan, any, error) {
	_, plan := b.Catalog.PlanByID(planID)
	if plan == nil {
		return nil, nil, nil, &Failure{Description: fmt.Sprintf("The plan %s is no longer in the catalog.", planID)}
	}
	driver, settings, ok := b.Drivers.For(plan)
	if !ok {
		return nil, nil, nil, &Failure{Description: fmt.Sprintf("The broker has no driver for plan %s.", plan.Name)}
	}
	return driver, plan, settings, nil
}

// detaches reports whether the operation is a deprovision that hands the
// instance's resources to the cleanup workflow instead of asking the
// driver: the plan's `deprovision: detach`. This is the only place that
// decides it.
func (f *flight) detaches() bool {
	return f.op.Kind == KindDeprovision && f.plan.Settings.Deprovision == catalog.DeprovisionDetach
}

// step calls the driver's Begin or Check, and keeps the record changes it
// asks for in memory (applied to the change, pending for the next write).
func (b *Broker) step(ctx context.Context, f *flight, begin bool) (Progress, error) {
	if f.detaches() {
		return Progress{Done: true}, nil
	}
	call := f.driver.Check
	if begin {
		call = f.driver.Begin
	}
	p, err := call(ctx, f.change)
	if err != nil {
		var failure *Failure
		if !errors.As(err, &failure) {
			b.Logger.WarnContext(ctx, "transient driver error", "error", err.Error())
		}
		return Progress{}, err
	}
	f.change = f.change.WithRecords(p.Records)
	f.pending = f.pending.Merge(p.Records)
	return p, nil
}

// recordProgress writes how far the change is (last_operation's
// Retry-After and description, the deadline after which a silent operation
// is repaired) with the driver's pending record changes.
func (b *Broker) recordProgress(ctx context.Context, f *flight, p Progress) error {
	op := f.op
	op.RetryAfter, op.UpdatedAt = p.RetryAfter, b.Now()
	op.NextCheckAt = op.UpdatedAt.Add(p.RetryAfter)
	if p.Description != "" {
		op.Description = p.Description
	}
	err := b.Store.UpdateOperation(ctx, op, f.pending)
	if _, ok := conflictOf(err); ok {
		return ErrTakenOver
	}
	if err != nil {
		return fmt.Errorf("record progress of %s: %w", op.ID, err)
	}
	f.op, f.pending = op, RecordChanges{}
	return nil
}

var succeeded = map[OperationKind]string{
	KindProvision:   "The service instance was provisioned.",
	KindUpdate:      "The service instance was updated.",
	KindDeprovision: "The service instance was deprovisioned.",
	KindBind:        "The service binding was created.",
	KindUnbind:      "The service binding was deleted.",
}

// succeed records the success of a change that is done, with its results,
// and releases what the operation held. It returns what it wrote.
func (b *Broker) succeed(ctx context.Context, f *flight, p Progress) (Finish, error) {
	fin := b.outcome(f, p)
	return fin, b.commit(ctx, fin, "")
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

// inMemory reports whether plan's driver makes its changes in memory
// (InMemory): a synchronous provision or bind may then be settled before
// any hold.
func (b *Broker) inMemory(plan *catalog.Plan) bool {
	d, _, ok := b.Drivers.For(plan)
	im, pure := d.(InMemory)
	return ok && pure && im.InMemory()
}

// settle runs a synchronous provision or bind of an InMemory driver before
// any hold: its Begin, from snap, and, when it is done at once, its
// outcome, for the caller to write in the one write that creates the
// instance or binding. settled is false when the change is not done at
// once (or its driver is not InMemory): the caller then takes the hold and
// runs it as any other. A permanent failure is returned as *Failure, with
// nothing written, and logged as a failed operation's end.
func (b *Broker) settle(ctx context.Context, op Operation, snap Snapshot) (fin Finish, settled bool, err error) {
	f, err := b.newFlight(op, snap)
	if err != nil {
		return Finish{}, false, nil // the hold's path reports it
	}
	if im, ok := f.driver.(InMemory); !ok || !im.InMemory() {
		return Finish{}, false, nil
	}
	p, err := b.step(ctx, f, true)
	var failure *Failure
	switch {
	case errors.As(err, &failure):
		failed := b.finished(op, OperationFailed, failure.Description)
		params := []json.RawMessage{snap.Instance.Parameters, bindingParameters(snap.Binding)}
		b.logEnd(logging.With(ctx, op.LogAttrs()...), failed, logReason(failure.Description, params...))
		return Finish{}, true, err
	case err != nil || !p.Done:
		return Finish{}, false, nil
	}
	return b.outcome(f, p), true, nil
}

func bindingParameters(bd *Binding) json.RawMessage {
	if bd == nil {
		return nil
	}
	return bd.Parameters
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

// runSync runs op's change within its request, the way the workflow would,
// from what the request has in memory (snap: the instance, bindings and
// records as the request read or wrote them): begin, check until done,
// finish. A change done at once costs one write. A permanent failure is
// recorded and returned as *Failure; another operation taking this one
// over returns ErrTakenOver. It returns the outcome it wrote.
func (b *Broker) runSync(ctx context.Context, op Operation, snap Snapshot) (Finish, error) {
	ctx = logging.With(ctx, op.LogAttrs()...)
	wait := b.SyncWait
	if wait <= 0 {
		wait = SyncWait
	}
	deadline := b.Now().Add(wait)
	f, err := b.newFlight(op, snap)
	if err == nil {
		var p Progress
		p, err = b.retry(ctx, func(again bool) (Progress, error) { return b.stepAgain(ctx, &f, again, true) })
		for err == nil && !p.Done {
			if b.Now().Add(p.RetryAfter).After(deadline) {
				// The platform's request cannot wait for it: the change
				// fails, and what it made (its records written first) goes
				// to the cleanup.
				if err = b.recordProgress(ctx, f, p); err != nil {
					break
				}
				err = &unavailable{
					description: fmt.Sprintf("This service's backend did not complete the %s within %s, the time a synchronous request may wait; what it began is being cleaned up. Try again later.", op.Kind, wait),
					err:         fmt.Errorf("not done within %s (the backend asked to be checked again in %s)", wait, p.RetryAfter)}
				break
			}
			// Not done at once: make the progress durable, wait, and read
			// again (the driver may have written records itself).
			if err = b.recordProgress(ctx, f, p); err == nil {
				if err = sleep(ctx, p.RetryAfter); err == nil {
					f, err = b.loadFlight(ctx, op.InstanceID, op.ID)
					if err == nil && f == nil {
						err = ErrTakenOver
					}
				}
			}
			if err == nil {
				p, err = b.retry(ctx, func(again bool) (Progress, error) { return b.stepAgain(ctx, &f, again, false) })
			}
		}
		if err == nil {
			var fin Finish
			if fin, err = b.succeed(ctx, f, p); err == nil || errors.Is(err, ErrTakenOver) {
				return fin, err
			}
		}
	}
	if errors.Is(err, ErrTakenOver) {
		return Finish{}, err
	}
	var failure *Failure
	var de *driverError
	recorded := Failure{Description: FailureDescription("", ""), Detail: err.Error()}
	switch {
	case errors.As(err, &failure):
		recorded = *failure
	case errors.As(err, &de) && ctx.Err() == nil:
		// The backend stayed unavailable through the request's tries.
		reason := "it did not answer as the broker needs"
		var r TransientReason
		if errors.As(err, &r) {
			reason = r.TransientReason()
		}
		err = &unavailable{description: fmt.Sprintf("This service's backend is unavailable (%s), so the %s did not complete; try again later.", reason, op.Kind), err: err}
	}
	var u *unavailable
	if errors.As(err, &u) {
		recorded.Description = u.description
	}
	// The request's context may be what failed; record on a fresh one. Read
	// again first: the driver may have written records itself, and they are
	// leftovers to detach.
	rctx := context.WithoutCancel(ctx)
	if rerr := b.RecordFailed(rctx, op.InstanceID, op.ID, recorded); rerr != nil {
		// This error is logged: a permanent failure is named, not quoted,
		// since its description may repeat request input.
		cause := err
		if failure != nil {
			cause = errors.New("a permanent failure")
		}
		return Finish{}, fmt.Errorf("%s %s: %w (and recording the failure: %w)", op.Kind, op.ID, cause, rerr)
	}
	return Finish{}, err
}

// abandon records the failure of a synchronous operation that its request
// cannot run, and returns err.
func (b *Broker) abandon(ctx context.Context, op Operation, err error) error {
	if rerr := b.RecordFailure(context.WithoutCancel(ctx), op.InstanceID, op.ID, FailureDescription("", "")); rerr != nil {
		return fmt.Errorf("%w (and recording the failure: %w)", err, rerr)
	}
	return err
}

// stepAgain runs a step of a synchronous change; again, after a transient
// error, from the change as stored now, since the driver may have written
// a record before the call that failed.
func (b *Broker) stepAgain(ctx context.Context, f **flight, again, begin bool) (Progress, error) {
	if again {
		nf, err := b.loadFlight(ctx, (*f).op.InstanceID, (*f).op.ID)
		switch {
		case err != nil:
			return Progress{}, err
		case nf == nil:
			return Progress{}, ErrTakenOver
		}
		*f = nf
	}
	p, err := b.step(ctx, *f, begin)
	var failure *Failure
	if err != nil && !errors.As(err, &failure) {
		err = &driverError{err}
	}
	return p, err
}

// retry runs a driver call again after transient errors, with backoff.
func (b *Broker) retry(ctx context.Context, call func(again bool) (Progress, error)) (Progress, error) {
	wait := b.Backoff
	for attempt := 1; ; attempt++ {
		p, err := call(attempt > 1)
		var failure *Failure
		if err == nil || errors.As(err, &failure) || errors.Is(err, ErrTakenOver) || attempt == transientAttempts {
			return p, err
		}
		if err := sleep(ctx, wait); err != nil {
			return p, err
		}
		wait *= 2
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
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
