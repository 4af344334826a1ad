package broker

import (
	"context"
	"fmt"
)

// UnbindDetails is an unbind request.
type UnbindDetails struct {
	InstanceID        string
	BindingID         string
	ServiceID         string
	PlanID            string
	AcceptsIncomplete bool
}

// UnbindResult is the answer to an unbind.
type UnbindResult struct {
	Result    Result
	Operation string
}

// Unbind handles DELETE /v2/service_instances/:instance_id/service_bindings/:binding_id.
func (b *Broker) Unbind(ctx context.Context, d UnbindDetails) (UnbindResult, error) {
	if _, _, err := b.lookup(d.ServiceID, d.PlanID); err != nil {
		return UnbindResult{}, err
	}
	return retryMoved(func() (UnbindResult, error) { return b.unbind(ctx, d) },
		"Service binding %s is changing; try the unbind again.", d.BindingID)
}

func (b *Broker) unbind(ctx context.Context, d UnbindDetails) (UnbindResult, error) {
	snap, err := b.Store.Load(ctx, d.InstanceID, "", d.BindingID)
	if err != nil {
		return UnbindResult{}, fmt.Errorf("unbind %s/%s: %w", d.InstanceID, d.BindingID, err)
	}
	if snap.Binding == nil || snap.Instance == nil {
		return UnbindResult{}, Errorf(CodeGone, "Service binding %s does not exist.", d.BindingID)
	}
	binding, inst := *snap.Binding, *snap.Instance
	// A binding belongs to its instance's plan as it is now (an update may
	// have changed it since the bind): the unbind runs under that plan,
	// and the request names it.
	if err := b.checkIDs(inst, d.ServiceID, d.PlanID); err != nil {
		return UnbindResult{}, err
	}
	_, plan, err := b.lookup(inst.ServiceID, inst.PlanID)
	if err != nil {
		return UnbindResult{}, Errorf(CodeUnprocessable,
			"The plan of service binding %s is no longer in the catalog; it cannot be unbound.", binding.ID)
	}
	isAsync, err := async(plan, d.AcceptsIncomplete)
	if err != nil {
		return UnbindResult{}, err
	}
	if binding.State == BindingFailed && binding.Op == "" {
		isAsync = false
	}
	lock := LockBinding{Version: binding.Version}
	switch binding.State {
	case BindingDeleting:
		return b.unbindInProgress(ctx, binding, d.AcceptsIncomplete)
	case BindingCreating:
		// Halt the bind: the unbind takes the binding over and deletes
		// whatever the bind made.
		lock.Holder = binding.Op
		halted, err := b.Store.GetOperation(ctx, binding.InstanceID, binding.Op)
		if err != nil {
			return UnbindResult{}, fmt.Errorf("unbind %s/%s: read bind: %w", d.InstanceID, d.BindingID, err)
		}
		halted = b.finished(halted, OperationFailed, "The bind was halted because the binding was deleted.")
		lock.Halted = &halted
	}
	op := b.newOperation(KindUnbind, binding.InstanceID, binding.ID, inst.PlanID, isAsync)
	op.Fingerprint = Fingerprint("unbind")
	lock.Op = op
	lock.Binding = binding
	lock.Binding.State, lock.Binding.Op, lock.Binding.LastOp = BindingDeleting, op.ID, op.ID
	lock.Binding.Version, lock.Binding.UpdatedAt = binding.Version+1, op.CreatedAt
	err = b.Store.LockBinding(ctx, lock)
	if c, ok := conflictOf(err); ok {
		switch {
		case c.Binding == nil:
			return UnbindResult{}, Errorf(CodeGone, "Service binding %s does not exist.", d.BindingID)
		case c.Binding.State == BindingDeleting:
			return b.unbindInProgress(ctx, *c.Binding, d.AcceptsIncomplete)
		case c.Instance != nil && c.Instance.Op != "":
			return UnbindResult{}, concurrency("Another operation for service instance %s is in progress (%s).", d.InstanceID, c.Instance.State)
		}
		return UnbindResult{}, errVersionMoved
	}
	if err != nil {
		return UnbindResult{}, fmt.Errorf("unbind %s/%s: %w", d.InstanceID, d.BindingID, err)
	}
	if lock.Halted != nil {
		b.halt(ctx, lock.Halted.ID, "unbound while binding")
	}
	if isAsync {
		b.start(ctx, op)
		return UnbindResult{Result: ResultAccepted, Operation: op.ID}, nil
	}
	snap.Binding, snap.Operation = &lock.Binding, &op
	if _, err := b.runSync(ctx, op, snap); err != nil {
		return UnbindResult{}, syncError(op, err)
	}
	return UnbindResult{Result: ResultOK}, nil
}

func (b *Broker) unbindInProgress(ctx context.Context, binding Binding, acceptsIncomplete bool) (UnbindResult, error) {
	if acceptsIncomplete {
		held, err := b.Store.GetOperation(ctx, binding.InstanceID, binding.Op)
		if err == nil && held.Async {
			return UnbindResult{Result: ResultAccepted, Operation: held.ID}, nil
		}
	}
	return UnbindResult{}, concurrency("Service binding %s is being deleted.", binding.ID)
}
