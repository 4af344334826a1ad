package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/serverless-osb/broker/internal/logging"
)

// CleanupInput is the input of a cleanup execution.
type CleanupInput struct {
	DetachedID string `json:"detached_id"`
}

// StartCleanup starts the next cleanup execution of d: one conditional
// write (so that two callers cannot both start one), then StartExecution.
// A start that is lost after the write is repaired by the reaper, which
// starts the same execution name again.
func StartCleanup(ctx context.Context, s DetachedRecords, e Engine, d Detached, now time.Time) (Detached, error) {
	next := d.withoutOutage()
	next.Attempts, next.State, next.Failure, next.UpdatedAt = d.Attempts+1, DetachedCleaning, "", now
	if err := s.UpdateDetached(ctx, next, d.Attempts); err != nil {
		return d, fmt.Errorf("start cleanup of %s: %w", d.ID, err)
	}
	if err := startCleanupExecution(ctx, e, next); err != nil {
		return next, err
	}
	return next, nil
}

func startCleanupExecution(ctx context.Context, e Engine, d Detached) error {
	input, _ := json.Marshal(CleanupInput{DetachedID: d.ID})
	if err := e.Start(ctx, WorkflowCleanup, d.CleanupName(d.Attempts), input); err != nil {
		return fmt.Errorf("start cleanup execution %s: %w", d.CleanupName(d.Attempts), err)
	}
	return nil
}

// ReapReport says what one run of the reaper did.
type ReapReport struct {
	// Operations in progress looked at, and those repaired: started again,
	// failed because their execution ended without a result, or stopped
	// and failed because they outlived their maximum polling duration.
	InProgress int
	Restarted  int
	Failed     int
	TimedOut   int
	// Detached resources looked at, and cleanups started (or started
	// again), and cleanups found ended without a result (now failed).
	Detached        int
	CleanupsStarted int
	CleanupsFailed  int
	// Finished operation records removed after their retention.
	Expired int
}

// MaxOperationAge is how long an operation may stay in progress when its
// plan sets no maximum_polling_duration.
const MaxOperationAge = 24 * time.Hour

// A cleanup that gave up (its workflow's retries, hours long, ran out: a
// long outage of the backend, or a resource that cannot be deleted yet) is
// started again by the reaper once CleanupRetryAfter has passed since, up
// to CleanupMaxAttempts executions in all (about a day); then it waits for
// an operator (`ops cleanup`), who the alarm on detached resources calls.
const (
	CleanupRetryAfter  = 6 * time.Hour
	CleanupMaxAttempts = 4
)

// Reap repairs what crashes and timeouts leave behind, as a scheduled job
// (EventBridge Scheduler in AWS, a ticker under `make run`):
//   - an operation in progress whose execution ended without a result is
//     failed with the reason; one whose execution never started is started;
//   - one older than its plan's maximum_polling_duration (or MaxOperationAge)
//     is stopped and failed;
//   - a detached resource with no cleanup running gets one, and one whose
//     cleanup gave up gets another after CleanupRetryAfter (up to
//     CleanupMaxAttempts);
//   - finished operation records past their retention are removed.
//
// Every action is idempotent; errors are logged and the run goes on.
func (b *Broker) Reap(ctx context.Context) (ReapReport, error) {
	var rep ReapReport
	var errs []error
	ops, err := b.Store.ListInProgress(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("list operations in progress: %w", err))
	}
	rep.InProgress = len(ops)
	for _, op := range ops {
		switch b.reapOperation(ctx, op) {
		case reapRestarted:
			rep.Restarted++
		case reapFailed:
			rep.Failed++
		case reapTimedOut:
			rep.TimedOut++
		}
	}
	detached, err := b.Detached.ListDetached(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("list detached resources: %w", err))
	}
	rep.Detached = len(detached)
	for _, d := range detached {
		started, failed, err := b.reapDetached(ctx, d)
		if err != nil {
			errs = append(errs, err)
		}
		if started {
			rep.CleanupsStarted++
		}
		if failed {
			rep.CleanupsFailed++
		}
	}
	if rep.Expired, err = b.Store.DeleteExpiredOperations(ctx, b.Now()); err != nil {
		errs = append(errs, fmt.Errorf("delete expired operations: %w", err))
	}
	return rep, errors.Join(errs...)
}

type reapAction int

const (
	reapNothing reapAction = iota
	reapRestarted
	reapFailed
	reapTimedOut
)

func (b *Broker) reapOperation(ctx context.Context, op Operation) reapAction {
	ctx = logging.With(ctx, op.LogAttrs()...)
	limit := MaxOperationAge
	if _, plan := b.Catalog.PlanByID(op.PlanID); plan != nil && plan.MaximumPollingDuration > 0 {
		limit = time.Duration(plan.MaximumPollingDuration) * time.Second
	}
	if age := b.Now().Sub(op.CreatedAt); age > limit {
		if op.Async {
			b.halt(ctx, op.ID, "the operation outlived its maximum polling duration")
		}
		description := fmt.Sprintf("The %s did not complete within %s and was stopped; try again.", op.Kind, limit)
		if err := b.RecordFailure(ctx, TaskOf(op), description); err != nil {
			b.Logger.ErrorContext(ctx, "reap: record failure", "error", err.Error())
			return reapNothing
		}
		return reapTimedOut
	}
	if b.Now().Before(op.NextCheckAt.Add(b.RepairAfter)) {
		return reapNothing
	}
	repaired, restarted := b.repairNow(ctx, op)
	switch {
	case restarted:
		return reapRestarted
	case repaired.Finished():
		return reapFailed
	}
	return reapNothing
}

// reapDetached makes sure a cleanup runs for d: it starts one when none was
// started, starts the recorded one again when its execution is missing, and
// marks d failed when its execution ended without removing it.
func (b *Broker) reapDetached(ctx context.Context, d Detached) (started, failed bool, err error) {
	switch d.State {
	case DetachedPending:
		_, err := StartCleanup(ctx, b.Detached, b.Engine, d, b.Now())
		return err == nil, false, err
	case DetachedCleaning:
		exec, err := b.Engine.Describe(ctx, d.CleanupName(d.Attempts))
		switch {
		case errors.Is(err, ErrExecutionNotFound):
			return true, false, startCleanupExecution(ctx, b.Engine, d)
		case err != nil:
			return false, false, fmt.Errorf("describe cleanup of %s: %w", d.ID, err)
		case exec.Status == ExecutionRunning:
			return false, false, nil
		}
		// Ended, yet the record is still here: the execution could not
		// record its outcome. Leave it for an operator, like a cleanup that
		// gave up.
		failedRecord := d.withoutOutage()
		failedRecord.State, failedRecord.UpdatedAt = DetachedFailed, b.Now()
		failedRecord.Failure = fmt.Sprintf("The cleanup execution ended (%s) without deleting the resource.", exec.Status)
		if err := b.Detached.UpdateDetached(ctx, failedRecord, d.Attempts); err != nil && !errors.Is(err, ErrNotFound) {
			return false, false, fmt.Errorf("record failed cleanup of %s: %w", d.ID, err)
		}
		return false, true, nil
	case DetachedFailed:
		if d.Attempts >= CleanupMaxAttempts || b.Now().Before(d.UpdatedAt.Add(CleanupRetryAfter)) {
			return false, false, nil
		}
		ctx = logging.With(ctx, slog.String("detached_id", d.ID))
		b.Logger.InfoContext(ctx, "reap: the cleanup gave up; starting it again", "attempt", d.Attempts+1)
		_, err := StartCleanup(ctx, b.Detached, b.Engine, d, b.Now())
		return err == nil, false, err
	}
	return false, false, nil
}

// RetryCleanup starts a new cleanup of a detached resource, for an
// operator: it is how a resource the cleanup gave up on is tried again.
func (b *Broker) RetryCleanup(ctx context.Context, id string) (Detached, error) {
	d, err := b.Detached.GetDetached(ctx, id)
	if err != nil {
		return Detached{}, fmt.Errorf("detached resource %s: %w", id, err)
	}
	if d.State == DetachedCleaning {
		if exec, err := b.Engine.Describe(ctx, d.CleanupName(d.Attempts)); err == nil && exec.Status == ExecutionRunning {
			return d, fmt.Errorf("a cleanup of %s is running: %s", id, d.CleanupName(d.Attempts))
		}
	}
	return StartCleanup(ctx, b.Detached, b.Engine, d, b.Now())
}

// CleanupDeleteTask runs the Delete Task of a cleanup: it asks the driver to
// delete a detached resource. A transient error of the driver is an outage
// the cleanup waits out (waitOutCleanup), on the record; the first answer
// after one clears it, in a write only when the resource is not deleted
// yet (a deleted one's record goes).
func (b *Broker) CleanupDeleteTask(ctx context.Context, id string) (TaskProgress, error) {
	d, err := b.Detached.GetDetached(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return TaskProgress{Done: true}, nil // deleted already
	}
	if err != nil {
		return TaskProgress{}, fmt.Errorf("read detached %s: %w", id, err)
	}
	driver, _, _, err := b.driverFor(d.PlanID)
	if err != nil {
		return TaskProgress{}, err
	}
	release, ok, err := b.takeSlot(ctx, d.PlanID, driver)
	if err != nil {
		return TaskProgress{}, err
	}
	if !ok {
		// Nothing called, nothing to record: the next Delete asks again.
		return waitFor(SlotWait), nil
	}
	p, err := func() (Progress, error) {
		defer release() // a panicking driver too
		return driver.Cleanup(ctx, d)
	}()
	var f *Failure
	switch {
	case err != nil && !errors.As(err, &f):
		return b.waitOutCleanup(ctx, d, err)
	case err != nil:
		return TaskProgress{}, err
	case p.Done:
		return TaskProgress{Done: true}, nil
	}
	if d.InOutage() {
		answered := d.withoutOutage()
		answered.UpdatedAt = b.Now()
		err := b.Detached.UpdateDetached(ctx, answered, d.Attempts)
		if _, ok := conflictOf(err); !ok && err != nil && !errors.Is(err, ErrNotFound) {
			return TaskProgress{}, fmt.Errorf("record the end of the outage of cleanup %s: %w", d.ID, err)
		}
	}
	return waitFor(p.RetryAfter), nil
}

// CleanupDeletedTask removes the record of a resource the driver deleted.
func (b *Broker) CleanupDeletedTask(ctx context.Context, id string) error {
	if err := b.Detached.DeleteDetached(ctx, id); err != nil {
		return fmt.Errorf("remove detached %s: %w", id, err)
	}
	b.Logger.InfoContext(ctx, "detached resource deleted")
	return nil
}

// CleanupGaveUpTask records that a detached resource could not be deleted,
// why (description) and, for the operator, the driver's full reason
// (detail, capped as an operation's is): it stays listed for an operator.
func (b *Broker) CleanupGaveUpTask(ctx context.Context, id, description, detail string) error {
	d, err := b.Detached.GetDetached(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read detached %s: %w", id, err)
	}
	// The failure says what became of an outage the cleanup waited out.
	failed := d.withoutOutage()
	failed.State, failed.Failure, failed.UpdatedAt = DetachedFailed, CleanLine(description), b.Now()
	// No request parameter to hold the detail against: a cleanup's driver
	// sees only the detached record, as its log lines do.
	failed.FailureDetail = OperatorDetail(CleanText(detail))
	if err := b.Detached.UpdateDetached(ctx, failed, d.Attempts); err != nil && !errors.Is(err, ErrNotFound) {
		if _, ok := conflictOf(err); ok {
			return nil // another cleanup started meanwhile: it decides
		}
		return fmt.Errorf("record failed cleanup of %s: %w", id, err)
	}
	b.Logger.ErrorContext(ctx, "cleanup gave up: the resource stays listed for an operator", "resource", d.Name)
	return nil
}
