package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/serverless-osb/broker/internal/logging"
)

// LastOperationDetails is a last_operation request. OperationID is the
// optional "operation" query parameter; ServiceID and PlanID, optional too,
// must be the instance's when sent (during or after an update that changes
// the plan, the spec has the plan before it sent).
type LastOperationDetails struct {
	InstanceID  string
	BindingID   string
	OperationID string
	ServiceID   string
	PlanID      string
}

// LastOperation is what both last_operation endpoints report of an
// operation, and when to look again while it runs.
type LastOperation struct {
	State            OperationState
	Description      string
	InstanceUsable   *bool
	UpdateRepeatable *bool
	// RetryAfter is when to poll again while in progress, as the broker
	// knows it; RetryAfterSeconds says it to the platform.
	RetryAfter time.Duration
}

// RetryAfterSeconds is d in whole seconds, rounded up, and at least
// MinRetryAfter (PaceRetry): the one rounding of a wait the broker tells,
// to the platform (Retry-After) or to a workflow's Wait state
// (TaskProgress.RetryAfter), so that neither looks again before the broker
// said.
func RetryAfterSeconds(d time.Duration) int { return int(math.Ceil(PaceRetry(d).Seconds())) }

// LastOperation handles GET /v2/service_instances/:instance_id/last_operation.
func (b *Broker) LastOperation(ctx context.Context, d LastOperationDetails) (LastOperation, error) {
	d.BindingID = ""
	return b.lastOperation(ctx, d, "Service instance "+d.InstanceID, KindDeprovision)
}

// LastBindingOperation handles
// GET /v2/service_instances/:instance_id/service_bindings/:binding_id/last_operation.
func (b *Broker) LastBindingOperation(ctx context.Context, d LastOperationDetails) (LastOperation, error) {
	return b.lastOperation(ctx, d, "Service binding "+d.BindingID, KindUnbind)
}

func (b *Broker) lastOperation(ctx context.Context, d LastOperationDetails, what string, deletion OperationKind) (LastOperation, error) {
	op, err := b.findOperation(ctx, d)
	if errors.Is(err, ErrNotFound) {
		return LastOperation{}, Errorf(CodeNotFound, "%s has no such operation, or does not exist.", what)
	}
	if err != nil {
		return LastOperation{}, fmt.Errorf("last operation %s: %w", d.InstanceID, err)
	}
	// The plan the operation began under (an update's: the plan before
	// it), or the one an update moves to; other ids cost a read of the
	// instance as it is now. Before the repair, which may write.
	plans := []string{op.PlanID}
	if op.Target != nil && op.Target.PlanID != "" {
		plans = append(plans, op.Target.PlanID)
	}
	if err := b.checkRecordedIDs(ctx, d.InstanceID, d.ServiceID, d.PlanID, plans...); err != nil {
		return LastOperation{}, err
	}
	op = b.repair(ctx, op)
	if op.Kind == deletion && op.State == OperationSucceeded {
		return LastOperation{}, Errorf(CodeGone, "%s was deleted.", what)
	}
	// Clean again: a record stored before the broker cleaned a driver's
	// words may hold what a terminal acts on.
	lo := LastOperation{State: op.State, Description: CleanLine(op.Description)}
	switch op.State {
	case OperationInProgress:
		lo.RetryAfter = op.RetryAfter
		if op.InOutage() {
			// The next try is at a set time, which the platform's next
			// poll should not come long before, nor after.
			lo.RetryAfter = op.NextCheckAt.Sub(b.Now())
		}
		if lo.Description == "" {
			lo.Description = fmt.Sprintf("The %s is in progress.", op.Kind)
		}
	case OperationFailed:
		if op.Kind == KindUpdate || op.Kind == KindDeprovision {
			lo.InstanceUsable = op.InstanceUsable
		}
		if op.Kind == KindUpdate {
			lo.UpdateRepeatable = op.UpdateRepeatable
		}
	}
	return lo, nil
}

// findOperation returns the operation named in the request, or the newest
// one of the instance or binding. Operations of bindings are not found
// through the instance endpoint, and the other way round.
func (b *Broker) findOperation(ctx context.Context, d LastOperationDetails) (Operation, error) {
	if d.OperationID == "" {
		// The newest is the one the instance or binding names, read by
		// key: what grows with its history is never read while it exists.
		last, err := b.lastOp(ctx, d.InstanceID, d.BindingID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Operation{}, err
		}
		d.OperationID = last
	}
	if d.OperationID != "" {
		op, err := b.Store.GetOperation(ctx, d.InstanceID, d.OperationID)
		if err != nil {
			return Operation{}, err
		}
		if op.BindingID != d.BindingID {
			return Operation{}, ErrNotFound
		}
		return op, nil
	}
	// Gone (deleted by its last operation), or stored before it named
	// its last operation: that one is among those under the instance.
	ops, err := b.Store.ListOperations(ctx, d.InstanceID)
	if err != nil {
		return Operation{}, err
	}
	for i := len(ops) - 1; i >= 0; i-- {
		if ops[i].BindingID == d.BindingID {
			return ops[i], nil
		}
	}
	return Operation{}, ErrNotFound
}

// lastOp is the id of the newest operation of the instance, or of its
// binding bindingID when not empty.
func (b *Broker) lastOp(ctx context.Context, instanceID, bindingID string) (string, error) {
	if bindingID != "" {
		bd, err := b.Store.GetBinding(ctx, instanceID, bindingID)
		return bd.LastOp, err
	}
	inst, err := b.Store.GetInstance(ctx, instanceID)
	return inst.LastOp, err
}

// Recover repairs every operation in progress, as a broker starting up
// must: one whose execution never started (a crash between the write and
// the start) is started, one whose execution ended without a result is
// failed, and a synchronous one (its request died with the process) is
// failed. It returns how many operations it looked at.
func (b *Broker) Recover(ctx context.Context) (int, error) {
	ops, err := b.Store.ListInProgress(ctx)
	if err != nil {
		return 0, fmt.Errorf("recover: %w", err)
	}
	for _, op := range ops {
		b.repairNow(ctx, op)
	}
	return len(ops), nil
}

// repair finishes an in-progress operation that its execution can no longer
// finish (it ended without recording a result), and starts again one whose
// execution never started or vanished, once the operation is overdue. It
// returns the record as it now is.
func (b *Broker) repair(ctx context.Context, op Operation) Operation {
	if op.Finished() || b.Now().Before(op.NextCheckAt.Add(b.RepairAfter)) {
		return op
	}
	op, _ = b.repairNow(ctx, op)
	return op
}

// repairNow repairs op whatever its age; restarted says it started op's
// execution again.
func (b *Broker) repairNow(ctx context.Context, op Operation) (_ Operation, restarted bool) {
	ctx = logging.With(ctx, op.LogAttrs()...)
	description, detail := "", ""
	if !op.Async {
		description = fmt.Sprintf("The %s was interrupted before it completed; try again.", op.Kind)
	} else {
		exec, err := b.Engine.Describe(ctx, op.ID)
		switch {
		case errors.Is(err, ErrExecutionNotFound):
			b.Logger.WarnContext(ctx, "repair: execution missing, starting it again")
			b.start(ctx, op)
			return op, true
		case err != nil:
			b.Logger.ErrorContext(ctx, "repair: describe execution", "error", err.Error())
			return op, false
		case exec.Status == ExecutionRunning:
			return op, false
		}
		description = endedDescription(op.Kind, exec)
		if exec.Error != "" || exec.Cause != "" {
			detail = strings.TrimSpace(exec.Error + ": " + exec.Cause) // the operator's, as fail keeps it
		}
		b.Logger.WarnContext(ctx, "repair: execution ended without a result", "status", string(exec.Status), "error_name", exec.Error)
	}
	if err := b.RecordFailed(ctx, TaskOf(op), Failure{Description: description, Detail: detail}); err != nil {
		b.Logger.ErrorContext(ctx, "repair: record failure", "error", err.Error())
		return op, false
	}
	if fresh, err := b.Store.GetOperation(ctx, op.InstanceID, op.ID); err == nil {
		return fresh, false
	}
	return op, false
}

func endedDescription(kind OperationKind, exec Execution) string {
	switch exec.Status {
	case ExecutionTimedOut:
		return fmt.Sprintf("The %s timed out.", kind)
	case ExecutionAborted:
		return fmt.Sprintf("The %s was stopped.", kind)
	case ExecutionFailed:
		return fmt.Sprintf("The %s failed: its workflow ended with %s.", kind, exec.Error)
	}
	return fmt.Sprintf("The %s ended without recording a result.", kind)
}
