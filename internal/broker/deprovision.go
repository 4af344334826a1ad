package broker

import (
	"context"
	"fmt"

	"github.com/serverless-osb/broker/internal/catalog"
)

// DeprovisionDetails is a deprovision request.
type DeprovisionDetails struct {
	InstanceID        string
	ServiceID         string
	PlanID            string
	AcceptsIncomplete bool
}

// DeprovisionResult is the answer to a deprovision.
type DeprovisionResult struct {
	Result    Result
	Operation string
}

// Deprovision handles DELETE /v2/service_instances/:instance_id.
func (b *Broker) Deprovision(ctx context.Context, d DeprovisionDetails) (DeprovisionResult, error) {
	if _, _, err := b.lookup(d.ServiceID, d.PlanID); err != nil {
		return DeprovisionResult{}, err
	}
	return retryMoved(func() (DeprovisionResult, error) { return b.deprovision(ctx, d) },
		"Service instance %s is changing; try the deprovision again.", d.InstanceID)
}

func (b *Broker) deprovision(ctx context.Context, d DeprovisionDetails) (DeprovisionResult, error) {
	// Whole: a deprovision deletes every binding and hands the driver
	// every record.
	snap, err := b.Store.LoadWhole(ctx, d.InstanceID, "")
	if err != nil {
		return DeprovisionResult{}, fmt.Errorf("deprovision %s: %w", d.InstanceID, err)
	}
	if snap.Instance == nil {
		return DeprovisionResult{}, Errorf(CodeGone, "Service instance %s does not exist.", d.InstanceID)
	}
	inst := *snap.Instance
	if err := b.checkIDs(inst, d.ServiceID, d.PlanID); err != nil {
		return DeprovisionResult{}, err
	}
	_, plan, err := b.lookup(inst.ServiceID, inst.PlanID)
	if err != nil {
		return DeprovisionResult{}, Errorf(CodeUnprocessable,
			"The plan of service instance %s is no longer in the catalog; it cannot be deprovisioned.", inst.ID)
	}
	var isAsync bool
	switch {
	case plan.Settings.Deprovision == catalog.DeprovisionDetach:
		// The resource is detached and the cleanup workflow deletes it:
		// the answer comes at once, whatever the plan's mode.
	case inst.State == InstanceFailed && inst.Op == "" && len(snap.Records) == 0:
		// A failed provision detached what it made: the instance holds
		// nothing worth waiting for, so delete it now. A failed
		// deprovision left its resource attached (its records are still
		// here): deleting that runs as the plan says.
	default:
		if isAsync, err = async(plan, d.AcceptsIncomplete); err != nil {
			return DeprovisionResult{}, err
		}
	}

	lock := LockInstance{Version: inst.Version}
	switch {
	case inst.State == InstanceDeprovisioning:
		return b.deprovisionInProgress(ctx, inst, d.AcceptsIncomplete)
	case inst.State == InstanceProvisioning:
		// Halt the provision: the deprovision takes the instance over and
		// deletes whatever the provision made.
		lock.Holder = inst.Op
		halted, err := b.Store.GetOperation(ctx, inst.ID, inst.Op)
		if err != nil {
			return DeprovisionResult{}, fmt.Errorf("deprovision %s: read provision: %w", d.InstanceID, err)
		}
		halted = b.finished(halted, OperationFailed, "The provision was halted because the instance was deprovisioned.")
		lock.Halted = &halted
	case inst.Op != "":
		return DeprovisionResult{}, concurrency("Another operation for service instance %s is in progress (%s).", inst.ID, inst.State)
	case inst.BindingOps > 0:
		return DeprovisionResult{}, concurrency("A binding operation on service instance %s is in progress; try again when it ends.", inst.ID)
	}

	op := b.newOperation(KindDeprovision, inst.ID, "", inst.PlanID, isAsync)
	op.Fingerprint = Fingerprint("deprovision")
	lock.Op = op
	lock.Instance = inst
	lock.Instance.State, lock.Instance.Op, lock.Instance.LastOp = InstanceDeprovisioning, op.ID, op.ID
	lock.Instance.Version, lock.Instance.UpdatedAt = inst.Version+1, op.CreatedAt
	err = b.Store.LockInstance(ctx, lock)
	if c, ok := conflictOf(err); ok {
		switch {
		case c.Instance == nil:
			return DeprovisionResult{}, Errorf(CodeGone, "Service instance %s does not exist.", d.InstanceID)
		case c.Instance.State == InstanceDeprovisioning:
			return b.deprovisionInProgress(ctx, *c.Instance, d.AcceptsIncomplete)
		case c.Instance.Op == "" && c.Instance.BindingOps == 0:
			return DeprovisionResult{}, errVersionMoved
		}
		return DeprovisionResult{}, concurrency("Another operation for service instance %s is in progress.", inst.ID)
	}
	if err != nil {
		return DeprovisionResult{}, fmt.Errorf("deprovision %s: %w", d.InstanceID, err)
	}
	if lock.Halted != nil {
		b.halt(ctx, lock.Halted.ID, "deprovisioned while provisioning")
	}
	if isAsync {
		b.start(ctx, op)
		return DeprovisionResult{Result: ResultAccepted, Operation: op.ID}, nil
	}
	// The lock is conditional on the version read with the bindings, and
	// every binding operation moves it: the bindings are still these.
	snap.Instance, snap.Operation = &lock.Instance, &op
	if _, err := b.runSync(ctx, op, snap); err != nil {
		return DeprovisionResult{}, syncError(op, err)
	}
	return DeprovisionResult{Result: ResultOK}, nil
}

func (b *Broker) deprovisionInProgress(ctx context.Context, inst Instance, acceptsIncomplete bool) (DeprovisionResult, error) {
	if acceptsIncomplete {
		held, err := b.Store.GetOperation(ctx, inst.ID, inst.Op)
		if err == nil && held.Async {
			return DeprovisionResult{Result: ResultAccepted, Operation: held.ID}, nil
		}
	}
	return DeprovisionResult{}, concurrency("Service instance %s is being deprovisioned.", inst.ID)
}
