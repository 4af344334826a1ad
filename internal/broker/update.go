package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/serverless-osb/broker/internal/catalog"
)

// UpdateDetails is an update request. Empty PlanID and nil Parameters,
// Context and MaintenanceInfo keep the current values.
type UpdateDetails struct {
	InstanceID        string
	ServiceID         string
	PlanID            string
	Parameters        json.RawMessage
	Context           json.RawMessage
	MaintenanceInfo   *MaintenanceInfo
	AcceptsIncomplete bool
}

// UpdateResult is the answer to an update.
type UpdateResult struct {
	Result       Result
	DashboardURL string
	Operation    string
	Metadata     InstanceMetadata
}

// maxLockAttempts bounds the retries when an idle instance's version moved
// between the read and the conditional write (a binding finished, say).
const maxLockAttempts = 3

// Update handles PATCH /v2/service_instances/:instance_id.
func (b *Broker) Update(ctx context.Context, d UpdateDetails) (UpdateResult, error) {
	return retryMoved(func() (UpdateResult, error) { return b.update(ctx, d, "") },
		"Service instance %s is changing; try the update again.", d.InstanceID)
}

// upgrade is an update that a fleet upgrade makes, under operationID
// (UpgradeOperationID): a Task run again finds the operation it started
// rather than starting another.
func (b *Broker) upgrade(ctx context.Context, d UpdateDetails, operationID string) (UpdateResult, error) {
	return retryMoved(func() (UpdateResult, error) { return b.update(ctx, d, operationID) },
		"Service instance %s is changing; try the upgrade again.", d.InstanceID)
}

// errVersionMoved says that an idle instance or binding changed between the
// read and the conditional write (a binding operation finished, say): the
// request is decided again on the new state.
var errVersionMoved = errors.New("version moved")

// retryMoved runs attempt until it is decided, at most maxLockAttempts times.
func retryMoved[R any](attempt func() (R, error), format string, args ...any) (R, error) {
	for range maxLockAttempts {
		res, err := attempt()
		if !errors.Is(err, errVersionMoved) {
			return res, err
		}
	}
	var zero R
	return zero, concurrency(format, args...)
}

// update runs d; operationID, when set, is the id of the operation it
// starts (else a new one).
func (b *Broker) update(ctx context.Context, d UpdateDetails, operationID string) (UpdateResult, error) {
	snap, err := b.Store.Load(ctx, d.InstanceID, "", "")
	if err != nil {
		return UpdateResult{}, fmt.Errorf("update %s: %w", d.InstanceID, err)
	}
	if snap.Instance == nil {
		return UpdateResult{}, Errorf(CodeNotFound, "Service instance %s does not exist.", d.InstanceID)
	}
	inst := *snap.Instance
	if err := b.checkUpdateService(inst, d.ServiceID); err != nil {
		return UpdateResult{}, err
	}
	svc, current, err := b.lookup(inst.ServiceID, inst.PlanID)
	if err != nil {
		return UpdateResult{}, Errorf(CodeUnprocessable,
			"The plan of service instance %s is no longer in the catalog; it cannot be updated.", inst.ID)
	}
	target := d.target()
	plan := current
	if d.PlanID != "" && d.PlanID != inst.PlanID {
		if _, plan, err = b.lookup(d.ServiceID, d.PlanID); err != nil {
			return UpdateResult{}, err
		}
		if !svc.PlanIsUpdateable(current) {
			return UpdateResult{}, Errorf(CodeUnprocessable,
				"The plan %s cannot be changed to another plan (plan_updateable is false); update its parameters instead.", current.Name)
		}
	}
	if err := checkMaintenanceInfo(plan, d.MaintenanceInfo); err != nil {
		return UpdateResult{}, err
	}
	if d.Parameters != nil {
		if err := b.validateParameters(plan, catalog.InstanceUpdate, d.Parameters); err != nil {
			return UpdateResult{}, err
		}
	}
	isAsync, err := async(plan, d.AcceptsIncomplete)
	if err != nil {
		return UpdateResult{}, err
	}
	fingerprint := target.requestFingerprint()
	if target.MaintenanceInfo == nil && plan != current {
		target.MaintenanceInfo = planMaintenanceInfo(plan)
	}
	if target.MovesTemplate(inst) {
		target.PlanDigest = b.planDigest(plan)
	}

	switch {
	case inst.State == InstanceFailed:
		return UpdateResult{}, Errorf(CodeUnprocessable,
			"Service instance %s is in a failed state and cannot be updated: deprovision it.", inst.ID)
	case inst.Op != "" && inst.Op == operationID:
		return UpdateResult{Result: ResultAccepted, Operation: inst.Op}, nil
	case inst.Op != "":
		return b.updateInProgress(ctx, inst, fingerprint, d.AcceptsIncomplete)
	case inst.BindingOps > 0:
		return UpdateResult{}, concurrency("A binding operation on service instance %s is in progress; try again when it ends.", inst.ID)
	}
	if noop(inst, target) {
		return UpdateResult{Result: ResultOK, DashboardURL: inst.DashboardURL, Metadata: inst.Metadata}, nil
	}

	op := b.newOperation(KindUpdate, inst.ID, "", inst.PlanID, isAsync)
	if operationID != "" {
		op.ID = operationID
	}
	op.Fingerprint, op.Target = fingerprint, &target
	locked := inst
	locked.State, locked.Op, locked.LastOp = InstanceUpdating, op.ID, op.ID
	locked.Version, locked.UpdatedAt = inst.Version+1, op.CreatedAt
	err = b.Store.LockInstance(ctx, LockInstance{Instance: locked, Version: inst.Version, Op: op})
	if c, ok := conflictOf(err); ok {
		if c.Instance == nil {
			return UpdateResult{}, Errorf(CodeNotFound, "Service instance %s does not exist.", d.InstanceID)
		}
		if c.Instance.Op == "" && c.Instance.BindingOps == 0 {
			return UpdateResult{}, errVersionMoved
		}
		if c.Instance.Op != "" {
			return b.updateInProgress(ctx, *c.Instance, fingerprint, d.AcceptsIncomplete)
		}
		return UpdateResult{}, concurrency("A binding operation on service instance %s is in progress; try again when it ends.", inst.ID)
	}
	if err != nil {
		return UpdateResult{}, fmt.Errorf("update %s: %w", d.InstanceID, err)
	}
	if isAsync {
		b.start(ctx, op)
		return UpdateResult{Result: ResultAccepted, Operation: op.ID}, nil
	}
	snap.Instance, snap.Operation = &locked, &op
	fin, err := b.runSync(ctx, op, snap)
	if err != nil {
		return UpdateResult{}, syncError(op, err)
	}
	return UpdateResult{Result: ResultOK, DashboardURL: fin.Instance.DashboardURL, Metadata: fin.Instance.Metadata}, nil
}

// updateInProgress answers an update for a held instance: the same update
// re-sent gets 202 with its operation; anything else is a concurrency error.
func (b *Broker) updateInProgress(ctx context.Context, inst Instance, fingerprint string, acceptsIncomplete bool) (UpdateResult, error) {
	if inst.State == InstanceUpdating && acceptsIncomplete {
		held, err := b.Store.GetOperation(ctx, inst.ID, inst.Op)
		if err == nil && held.Fingerprint == fingerprint && held.Async {
			return UpdateResult{Result: ResultAccepted, Operation: held.ID}, nil
		}
	}
	return UpdateResult{}, concurrency("Another operation for service instance %s is in progress (%s).", inst.ID, inst.State)
}

// noop reports whether an update would change nothing.
func noop(inst Instance, t Target) bool {
	if t.PlanID != "" && t.PlanID != inst.PlanID {
		return false
	}
	if t.Parameters != nil && !SameJSON(t.Parameters, inst.Parameters) {
		return false
	}
	if t.Context != nil && !SameJSON(t.Context, inst.Context) {
		return false
	}
	if t.MaintenanceInfo != nil && (inst.MaintenanceInfo == nil || *t.MaintenanceInfo != *inst.MaintenanceInfo) {
		return false
	}
	return true
}

// Apply returns inst with the target's changes applied.
func (t Target) Apply(inst Instance) Instance {
	if t.MovesTemplate(inst) {
		inst.PlanDigest = t.PlanDigest
	}
	if t.PlanID != "" {
		inst.PlanID = t.PlanID
	}
	if t.Parameters != nil {
		inst.Parameters = t.Parameters
	}
	if t.Context != nil {
		inst.Context = t.Context
	}
	if t.MaintenanceInfo != nil {
		inst.MaintenanceInfo = t.MaintenanceInfo
	}
	inst.Fingerprint = inst.requestFingerprint()
	return inst
}

// MovesTemplate reports whether the update moves inst to the templates of
// the plan as the catalog has them now: a plan change, or an upgrade (a
// maintenance_info version other than the one inst runs). Any other update
// keeps inst on the templates it runs, whatever the catalog ships since.
func (t Target) MovesTemplate(inst Instance) bool {
	if t.PlanID != "" && t.PlanID != inst.PlanID {
		return true
	}
	return t.MaintenanceInfo != nil && (inst.MaintenanceInfo == nil || t.MaintenanceInfo.Version != inst.MaintenanceInfo.Version)
}

// planDigest is the digest of what plan p deploys now, when its driver
// has one (Versioned).
func (b *Broker) planDigest(p *catalog.Plan) string {
	if b.Drivers == nil {
		return ""
	}
	_, settings, _ := b.Drivers.For(p)
	if v, ok := settings.(Versioned); ok {
		return v.PlanDigest()
	}
	return ""
}

// target is what d asks to change. A new field of UpdateDetails that an
// update changes is copied here, applied in Target.Apply and hashed in
// Target.requestFingerprint (see fingerprint_test.go).
func (d UpdateDetails) target() Target {
	return Target{PlanID: d.PlanID, Parameters: d.Parameters, Context: d.Context, MaintenanceInfo: d.MaintenanceInfo}
}
