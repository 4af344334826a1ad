package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/logging"
)

// How an operation runs once its request has started it (a flight): begin
// its change, check it until it is done, then finish it, or record its
// failure. The workflow's Task states (package steps) and a synchronous
// request run the same functions; every one is idempotent, so a Task may
// run again. What an ending leaves is lifecycle.go's.
//
// Cost: a Task reads once (Store.Load: the operation, its instance, its
// binding and the driver's records that the change is handed, by key and
// key range; a Finish of a finished operation reads it alone) and writes
// at most once (the progress with the
// driver's record changes, or the outcome in one transaction). A
// synchronous request keeps everything in memory between its steps and
// writes its outcome once.

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

// SyncChecks bounds the checks a synchronous request makes after its
// begin: with the floor under every wait (MinRetryAfter) SyncWait allows
// about as many, and the bound holds whatever the clock or SyncWait says.
// A change not done by then ends as one past SyncWait does (503, and what
// it began goes to the cleanup).
const SyncChecks = 10

// MinRetryAfter is the floor under every wait between two calls of a
// driver about one change, whatever the driver (or the target behind it)
// asks: a target answering "check again at once" must not make a request,
// or a workflow, a loop of calls and writes. Plans have no minimum of their
// own (their retry_after settings start at 1 s too). PaceRetry applies it.
const MinRetryAfter = time.Second

// PaceRetry is the wait before the next call about a change whose driver
// asked for d: d, but at least MinRetryAfter. It is the one rule of the
// synchronous path (runSync's sleep), the workflows' Wait states
// (RetryAfterSeconds) and last_operation's Retry-After.
func PaceRetry(d time.Duration) time.Duration { return max(d, MinRetryAfter) }

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
	// binding is the change's copy of the binding, held here to save it
	// an allocation of its own.
	binding Binding
}

// TaskProgress is how a workflow's change goes: whether it is done, and
// when to look again (in seconds). Package steps gives it to the workflow.
type TaskProgress struct {
	Done       bool
	RetryAfter int
}

// waitFor is the progress of a change not done yet: look again after d.
func waitFor(d time.Duration) TaskProgress { return TaskProgress{RetryAfter: RetryAfterSeconds(d)} }

// BeginTask runs the Begin Task of an operation: it starts the change and,
// when the change is done at once, finishes the operation.
func (b *Broker) BeginTask(ctx context.Context, t OperationTask) (TaskProgress, error) {
	return b.advanceTask(ctx, t, true)
}

// CheckTask runs the Check Task: it asks how the change is going and
// finishes the operation once it is done.
func (b *Broker) CheckTask(ctx context.Context, t OperationTask) (TaskProgress, error) {
	return b.advanceTask(ctx, t, false)
}

// FinishTask runs the Finish Task: it finishes an operation whose change is
// done (BeginTask and CheckTask normally have).
func (b *Broker) FinishTask(ctx context.Context, t OperationTask) error {
	// Normally finished already: then the operation is all it reads.
	op, err := b.Store.GetOperation(ctx, t.InstanceID, t.OperationID)
	switch {
	case errors.Is(err, ErrNotFound) || (err == nil && op.Finished()):
		return nil
	case err != nil:
		return fmt.Errorf("finish %s: %w", t.OperationID, err)
	}
	p, err := b.advanceTask(ctx, TaskOf(op), false)
	if err == nil && !p.Done {
		return fmt.Errorf("finish %s: the change is not done yet", t.OperationID)
	}
	return err
}

func (b *Broker) advanceTask(ctx context.Context, t OperationTask, begin bool) (TaskProgress, error) {
	f, err := b.loadFlight(ctx, t)
	if err != nil || f == nil {
		// A finished operation (halted, repaired) has nothing left to do.
		return TaskProgress{Done: true}, err
	}
	ctx = logging.With(ctx, f.op.LogAttrs()...)
	begin = begin || f.op.OutageInBegin
	release, ok, err := func() {}, true, error(nil)
	if !f.detaches() { // which calls no driver
		release, ok, err = b.takeSlot(ctx, f.plan.ID, f.driver)
	}
	switch {
	case err != nil:
		return TaskProgress{}, err
	case !ok:
		return b.waitForSlot(ctx, f, begin)
	}
	p, err := func() (Progress, error) {
		defer release() // a panicking driver too
		return b.step(ctx, f, begin)
	}()
	switch {
	case err != nil && !isFailure(err):
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

// loadFlight reads an operation and what it concerns (loadTask). It
// returns nil when the operation is missing or finished.
func (b *Broker) loadFlight(ctx context.Context, t OperationTask) (*flight, error) {
	snap, err := b.loadTask(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("load operation %s: %w", t.OperationID, err)
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

// loadTask reads what a Task of t needs (Load), in one round trip when t
// carries what its execution's input adds: the operation's binding is read
// with it, and a deprovision's whole snapshot by LoadWhole. Without it (an
// execution started before the input had it), the store reads the
// operation first. An operation other than t says (an input that does not
// match it) is read again as it is.
func (b *Broker) loadTask(ctx context.Context, t OperationTask) (Snapshot, error) {
	whole := t.Kind == KindDeprovision
	var snap Snapshot
	var err error
	if whole {
		snap, err = b.Store.LoadWhole(ctx, t.InstanceID, t.OperationID)
	} else {
		snap, err = b.Store.Load(ctx, t.InstanceID, t.OperationID, t.BindingID)
	}
	if err != nil || !t.knows() || snap.Operation == nil {
		return snap, err
	}
	if op := snap.Operation; op.BindingID != t.BindingID || Whole(op) != whole {
		return b.Store.Load(ctx, t.InstanceID, t.OperationID, "")
	}
	return snap, nil
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
		f.binding = *snap.Binding
		f.change.Binding = &f.binding
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
	if !p.Done {
		// What is recorded (next_check_at) and waited for, on either path.
		p.RetryAfter = PaceRetry(p.RetryAfter)
	}
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
		op.Description = CleanLine(p.Description)
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

// succeed records the success of a change that is done, with its results,
// and releases what the operation held. It returns what it wrote.
func (b *Broker) succeed(ctx context.Context, f *flight, p Progress) (Finish, error) {
	fin := b.outcome(f, p)
	return fin, b.commit(ctx, fin, "")
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
	switch failure, ok := failureOf(err); {
	case ok:
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
		for checks := 0; err == nil && !p.Done; checks++ {
			late, spent := b.Now().Add(p.RetryAfter).After(deadline), checks >= SyncChecks
			if late || spent {
				// The platform's request cannot wait for it: the change
				// fails, and what it made (its records written first) goes
				// to the cleanup.
				if err = b.recordProgress(ctx, f, p); err != nil {
					break
				}
				limit, detail := fmt.Sprintf("%s, the time a synchronous request may wait", wait), fmt.Sprintf("not done within %s", wait)
				if spent {
					limit, detail = fmt.Sprintf("%d checks, the most a synchronous request makes", SyncChecks), fmt.Sprintf("not done after %d checks", checks)
				}
				err = &unavailable{
					description: fmt.Sprintf("This service's backend did not complete the %s within %s; what it began is being cleaned up. Try again later.", op.Kind, limit),
					err:         fmt.Errorf("%s (the backend asked to be checked again in %s)", detail, p.RetryAfter)}
				break
			}
			// Not done at once: make the progress durable, wait, and read
			// again (the driver may have written records itself).
			if err = b.recordProgress(ctx, f, p); err == nil {
				if err = b.sleep(ctx, p.RetryAfter); err == nil {
					f, err = b.loadFlight(ctx, TaskOf(op))
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
	recorded := Failure{Description: GenericFailure, Detail: err.Error()}
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
	if rerr := b.RecordFailed(rctx, TaskOf(op), recorded); rerr != nil {
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
	if rerr := b.RecordFailure(context.WithoutCancel(ctx), TaskOf(op), GenericFailure); rerr != nil {
		return fmt.Errorf("%w (and recording the failure: %w)", err, rerr)
	}
	return err
}

// stepAgain runs a step of a synchronous change; again, after a transient
// error, from the change as stored now, since the driver may have written
// a record before the call that failed.
func (b *Broker) stepAgain(ctx context.Context, f **flight, again, begin bool) (Progress, error) {
	if again {
		nf, err := b.loadFlight(ctx, TaskOf((*f).op))
		switch {
		case err != nil:
			return Progress{}, err
		case nf == nil:
			return Progress{}, ErrTakenOver
		}
		*f = nf
	}
	p, err := b.step(ctx, *f, begin)
	if err != nil && !isFailure(err) {
		err = &driverError{err}
	}
	return p, err
}

// retry runs a driver call again after transient errors, with backoff.
func (b *Broker) retry(ctx context.Context, call func(again bool) (Progress, error)) (Progress, error) {
	wait := b.Backoff
	for attempt := 1; ; attempt++ {
		p, err := call(attempt > 1)
		if err == nil || isFailure(err) || errors.Is(err, ErrTakenOver) || attempt == transientAttempts {
			return p, err
		}
		if err := b.sleep(ctx, wait); err != nil {
			return p, err
		}
		wait *= 2
	}
}

// sleep waits for d, or until ctx is done (Broker.Sleep, else a timer).
func (b *Broker) sleep(ctx context.Context, d time.Duration) error {
	if b.Sleep != nil && d > 0 {
		b.Sleep(ctx, d)
		return ctx.Err()
	}
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

// failureOf is the *Failure in err's chain, if any: a driver's verdict on
// the change. The variable errors.As fills is on the heap, so it is made
// only for an error, not on every step.
func failureOf(err error) (*Failure, bool) {
	if err == nil {
		return nil, false
	}
	var f *Failure
	ok := errors.As(err, &f)
	return f, ok
}

func isFailure(err error) bool {
	_, ok := failureOf(err)
	return ok
}
