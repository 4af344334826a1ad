package broker

import (
	"context"
	"fmt"

	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/logging"
)

// ProvisionDetails is a provision request.
type ProvisionDetails struct {
	InstanceID string
	// InstanceRequest is what the request says of the instance, which
	// the instance keeps as it is (see InstanceRequest).
	InstanceRequest
	AcceptsIncomplete bool
}

// instance is the instance d describes: the request as it is (the
// InstanceRequest both embed), the plan's maintenance_info where the
// request names none, and the fingerprint of the request.
func (d ProvisionDetails) instance(plan *catalog.Plan) Instance {
	inst := Instance{ID: d.InstanceID, InstanceRequest: d.InstanceRequest}
	if inst.MaintenanceInfo == nil {
		inst.MaintenanceInfo = planMaintenanceInfo(plan)
	}
	inst.Fingerprint = inst.requestFingerprint()
	return inst
}

// ProvisionResult is the answer to a provision.
type ProvisionResult struct {
	Result       Result
	DashboardURL string
	Operation    string
	Metadata     InstanceMetadata
}

// Provision handles PUT /v2/service_instances/:instance_id.
func (b *Broker) Provision(ctx context.Context, d ProvisionDetails) (ProvisionResult, error) {
	_, plan, err := b.lookup(d.ServiceID, d.PlanID)
	if err != nil {
		return ProvisionResult{}, err
	}
	if err := checkMaintenanceInfo(plan, d.MaintenanceInfo); err != nil {
		return ProvisionResult{}, err
	}
	if err := b.validateParameters(plan, catalog.InstanceCreate, d.Parameters); err != nil {
		return ProvisionResult{}, err
	}
	if err := b.checkProvision(plan, d.InstanceRequest); err != nil {
		return ProvisionResult{}, err
	}
	if err := b.checkRoom(ctx, plan, d.InstanceRequest); err != nil {
		return ProvisionResult{}, err
	}
	isAsync, err := async(plan, d.AcceptsIncomplete)
	if err != nil {
		return ProvisionResult{}, err
	}
	op := b.newOperation(KindProvision, d.InstanceID, "", d.PlanID, isAsync)
	inst := d.instance(plan)
	inst.PlanDigest = b.planDigest(plan)
	op.Fingerprint = inst.Fingerprint
	inst.State, inst.Op, inst.LastOp = InstanceProvisioning, op.ID, op.ID
	inst.Version, inst.CreatedAt, inst.UpdatedAt = 1, op.CreatedAt, op.CreatedAt
	// A new instance has no bindings and no records: nothing to read.
	snap := Snapshot{Instance: &inst, Operation: &op}
	if !isAsync {
		fin, settled, err := b.settle(ctx, op, snap)
		switch {
		case settled && err != nil:
			return ProvisionResult{}, syncError(op, err)
		case settled:
			// One write: the instance as the change leaves it.
			err := b.Store.CreateInstance(ctx, *fin.Instance, fin.Op, &Settled{Records: fin.Records})
			if c, ok := conflictOf(err); ok && c.Instance != nil {
				return existingInstance(*c.Instance, op.Fingerprint, d.AcceptsIncomplete)
			}
			if err != nil {
				return ProvisionResult{}, fmt.Errorf("provision %s: %w", d.InstanceID, err)
			}
			b.logEnd(logging.With(ctx, op.LogAttrs()...), fin.Op, "")
			return ProvisionResult{Result: ResultCreated, DashboardURL: fin.Instance.DashboardURL, Metadata: fin.Instance.Metadata}, nil
		}
	}
	if err := b.Store.CreateInstance(ctx, inst, op, nil); err != nil {
		if c, ok := conflictOf(err); ok && c.Instance != nil {
			return existingInstance(*c.Instance, op.Fingerprint, d.AcceptsIncomplete)
		}
		return ProvisionResult{}, fmt.Errorf("provision %s: %w", d.InstanceID, err)
	}
	if isAsync {
		b.start(ctx, op)
		return ProvisionResult{Result: ResultAccepted, Operation: op.ID}, nil
	}
	fin, err := b.runSync(ctx, op, snap)
	if err != nil {
		return ProvisionResult{}, syncError(op, err)
	}
	return ProvisionResult{Result: ResultCreated, DashboardURL: fin.Instance.DashboardURL, Metadata: fin.Instance.Metadata}, nil
}

// existingInstance answers a provision for an id that is taken: the same
// request again gets 200 (finished) or 202 with the same operation (running);
// anything else is a conflict.
func existingInstance(inst Instance, fingerprint string, acceptsIncomplete bool) (ProvisionResult, error) {
	if inst.Fingerprint != fingerprint {
		return ProvisionResult{}, Errorf(CodeConflict,
			"Service instance %s already exists with different attributes: use another instance id, or update the instance.", inst.ID)
	}
	switch inst.State {
	case InstanceProvisioning:
		if !acceptsIncomplete {
			return ProvisionResult{}, concurrency(
				"Service instance %s is being provisioned; send accepts_incomplete=true to follow the operation.", inst.ID)
		}
		return ProvisionResult{Result: ResultAccepted, Operation: inst.Op}, nil
	case InstanceFailed:
		return ProvisionResult{}, Errorf(CodeConflict,
			"Service instance %s exists but failed to provision: deprovision it, then provision it again.", inst.ID)
	case InstanceDeprovisioning:
		return ProvisionResult{}, concurrency("Service instance %s is being deprovisioned.", inst.ID)
	}
	return ProvisionResult{Result: ResultOK, DashboardURL: inst.DashboardURL, Metadata: inst.Metadata}, nil
}
