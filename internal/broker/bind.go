package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/logging"
)

// BindDetails is a bind request.
type BindDetails struct {
	InstanceID string
	BindingID  string
	// BindingRequest is what the request says of the binding, which the
	// binding keeps as it is (see BindingRequest).
	BindingRequest
	AcceptsIncomplete bool
}

// BindResult is the answer to a bind. Credentials are set only for a
// synchronous answer: a 202 never carries them.
type BindResult struct {
	Result      Result
	Operation   string
	Credentials Credentials
	Endpoints   []Endpoint
	// ExpiresAt and RenewBefore are the credentials' (zero: no lifetime).
	ExpiresAt, RenewBefore time.Time
}

// binding is the binding d describes: what the request says of it
// (BindingRequest, which both embed), and the fingerprint of the request.
func (d BindDetails) binding() Binding {
	bd := Binding{InstanceID: d.InstanceID, ID: d.BindingID, BindingRequest: d.BindingRequest}
	bd.Fingerprint = bd.requestFingerprint()
	return bd
}

// bound is the answer for a binding that is ready.
func bound(result Result, bd Binding) BindResult {
	return BindResult{Result: result, Credentials: bd.Credentials, Endpoints: bd.Endpoints,
		ExpiresAt: bd.ExpiresAt, RenewBefore: bd.RenewBefore}
}

// Bind handles PUT /v2/service_instances/:instance_id/service_bindings/:binding_id.
//
// The request is checked against the plan it names (bindable, rotation,
// the binding schema, the mode) before the instance is read, if at all:
// the write that creates the binding requires the instance to be of that
// service and plan (CreateBindingConditions), so those checks are the
// instance's plan's, and a request naming another plan writes nothing and
// gets a 400 (checkIDs). The in-memory path, which reads the instance
// first, checks the ids before its driver runs.
func (b *Broker) Bind(ctx context.Context, d BindDetails) (BindResult, error) {
	svc, plan, err := b.lookup(d.ServiceID, d.PlanID)
	if err != nil {
		return BindResult{}, err
	}
	if !svc.PlanBindable(plan) {
		return BindResult{}, b.refuseBind(ctx, d, Errorf(CodeBadRequest, "The service plan %s is not bindable.", plan.Name))
	}
	if d.PredecessorID != "" {
		if d, err = b.rotation(ctx, d, plan); err != nil {
			return BindResult{}, b.refuseBind(ctx, d, err)
		}
	}
	if err := b.validateParameters(plan, catalog.BindingCreate, d.Parameters); err != nil {
		return BindResult{}, b.refuseBind(ctx, d, err)
	}
	if err := b.checkBind(plan, d.BindingRequest); err != nil {
		return BindResult{}, b.refuseBind(ctx, d, err)
	}
	isAsync, err := async(plan, d.AcceptsIncomplete)
	if err != nil {
		return BindResult{}, b.refuseBind(ctx, d, err)
	}
	op := b.newOperation(KindBind, d.InstanceID, d.BindingID, d.PlanID, isAsync)
	binding := d.binding()
	op.Fingerprint = binding.Fingerprint
	binding.State, binding.Op, binding.LastOp = BindingCreating, op.ID, op.ID
	binding.Version, binding.CreatedAt, binding.UpdatedAt = 1, op.CreatedAt, op.CreatedAt
	if !isAsync && b.inMemory(plan) {
		if res, settled, err := b.bindInMemory(ctx, d, binding, op); settled {
			return res, err
		}
	}
	if err := b.Store.CreateBinding(ctx, binding, op, nil); err != nil {
		if c, ok := conflictOf(err); ok {
			return b.bindConflict(c, d, op.Fingerprint)
		}
		return BindResult{}, fmt.Errorf("bind %s/%s: %w", d.InstanceID, d.BindingID, err)
	}
	if isAsync {
		b.start(ctx, op)
		return BindResult{Result: ResultAccepted, Operation: op.ID}, nil
	}
	// The driver needs the instance and its records, which the write
	// above could not return.
	snap, err := b.Store.Load(ctx, d.InstanceID, "", d.BindingID)
	if err != nil {
		return BindResult{}, fmt.Errorf("bind %s/%s: %w", d.InstanceID, d.BindingID, b.abandon(ctx, op, err))
	}
	snap.Operation = &op
	fin, err := b.runSync(ctx, op, snap)
	if err != nil {
		return BindResult{}, syncError(op, err)
	}
	return bound(ResultCreated, *fin.Binding), nil
}

// bindInMemory settles a synchronous bind of an InMemory driver in one read
// and one write: the instance and its records, then the binding as the
// change leaves it, conditional on the instance being as read. settled is
// false when the change must take the hold instead (not done at once, or
// the instance moved meanwhile).
func (b *Broker) bindInMemory(ctx context.Context, d BindDetails, binding Binding, op Operation) (BindResult, bool, error) {
	snap, err := b.Store.Load(ctx, d.InstanceID, "", d.BindingID)
	if err != nil {
		return BindResult{}, true, fmt.Errorf("bind %s/%s: %w", d.InstanceID, d.BindingID, err)
	}
	if snap.Instance != nil {
		// Before the driver runs: it would run under the instance's plan,
		// which the request was not checked against.
		if err := b.checkIDs(*snap.Instance, d.ServiceID, d.PlanID); err != nil {
			return BindResult{}, true, err
		}
	}
	if snap.Instance == nil || snap.Binding != nil || snap.Instance.State != InstanceReady || snap.Instance.Op != "" {
		return BindResult{}, false, nil // the hold's write says why not
	}
	// Copies, made in one allocation (nothing writes through them).
	held := &struct {
		binding Binding
		op      Operation
	}{binding, op}
	snap.Binding, snap.Operation = &held.binding, &held.op
	fin, settled, err := b.settle(ctx, op, snap)
	switch {
	case !settled:
		return BindResult{}, false, nil
	case err != nil:
		return BindResult{}, true, syncError(op, err)
	}
	err = b.Store.CreateBinding(ctx, *fin.Binding, fin.Op, &Settled{Records: fin.Records, InstanceVersion: snap.Instance.Version})
	if c, ok := conflictOf(err); ok {
		if c.Binding == nil && c.Instance != nil && c.Instance.State == InstanceReady && c.Instance.Op == "" &&
			sameIDs(c.Instance.ServiceID, c.Instance.PlanID, d.ServiceID, d.PlanID) {
			return BindResult{}, false, nil // the instance moved: take the hold
		}
		res, err := b.bindConflict(c, d, op.Fingerprint)
		return res, true, err
	}
	if err != nil {
		return BindResult{}, true, fmt.Errorf("bind %s/%s: %w", d.InstanceID, d.BindingID, err)
	}
	b.logEnd(logging.With(ctx, op.LogAttrs()...), fin.Op, "")
	return bound(ResultCreated, *fin.Binding), true, nil
}

// rotation checks a bind that rotates a binding (predecessor_binding_id):
// the plan allows it, and the predecessor is a ready, unexpired binding of
// the same instance. The successor takes the predecessor's parameters,
// bind_resource, app_guid and context where the request gives none
// (platforms need not keep them).
func (b *Broker) rotation(ctx context.Context, d BindDetails, plan *catalog.Plan) (BindDetails, error) {
	pred := d.PredecessorID
	switch {
	case !plan.BindingRotatable:
		return d, Errorf(CodeBadRequest,
			"The service plan %s does not support binding rotation (binding_rotatable is false): omit predecessor_binding_id.", plan.Name)
	case pred == d.BindingID:
		return d, Errorf(CodeBadRequest, "Service binding %s cannot succeed itself: predecessor_binding_id names the binding to rotate.", d.BindingID)
	}
	snap, err := b.Store.Load(ctx, d.InstanceID, "", pred)
	if err != nil {
		return d, fmt.Errorf("bind %s/%s: read the predecessor: %w", d.InstanceID, d.BindingID, err)
	}
	p := snap.Binding
	switch {
	case snap.Instance == nil:
		return d, Errorf(CodeNotFound, "Service instance %s does not exist.", d.InstanceID)
	case p == nil:
		return d, Errorf(CodeBadRequest,
			"predecessor_binding_id %s is not a binding of service instance %s: rotate one of this instance's bindings.", pred, d.InstanceID)
	case p.State == BindingCreating:
		return d, concurrency("The predecessor binding %s is still being created; rotate it once it is.", pred)
	case p.State == BindingDeleting:
		return d, concurrency("The predecessor binding %s is being deleted; it cannot be rotated: bind anew.", pred)
	case p.State == BindingFailed:
		return d, Errorf(CodeUnprocessable, "The predecessor binding %s failed; it cannot be rotated: unbind it and bind anew.", pred)
	case !p.ExpiresAt.IsZero() && !b.Now().Before(p.ExpiresAt):
		return d, Errorf(CodeBadRequest, "The predecessor binding %s expired at %s; it cannot be rotated: bind anew.",
			pred, p.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if d.Parameters == nil {
		d.Parameters = p.Parameters
	}
	if d.BindResource == nil {
		d.BindResource = p.BindResource
	}
	if d.AppGUID == "" {
		d.AppGUID = p.AppGUID
	}
	if d.Context == nil {
		d.Context = p.Context
	}
	return d, nil
}

// refuseBind answers a bind that a check of the plan it names refused:
// when the instance is of another service or plan, the refusal was about a
// plan the change would not run under, and the ids are what to fix. Only a
// refusal pays this read.
func (b *Broker) refuseBind(ctx context.Context, d BindDetails, refusal error) error {
	var e *Error
	if !errors.As(refusal, &e) {
		return refusal
	}
	inst, err := b.Store.GetInstance(ctx, d.InstanceID)
	if err != nil {
		return refusal
	}
	if err := b.checkIDs(inst, d.ServiceID, d.PlanID); err != nil {
		return err
	}
	return refusal
}

// bindConflict explains why CreateBinding's condition failed.
func (b *Broker) bindConflict(c *ConflictError, d BindDetails, fingerprint string) (BindResult, error) {
	if c.Instance != nil {
		// First: a binding of this id, made under the instance's ids,
		// differs from a request naming others anyway.
		if err := b.checkIDs(*c.Instance, d.ServiceID, d.PlanID); err != nil {
			return BindResult{}, err
		}
	}
	if existing := c.Binding; existing != nil {
		if existing.Fingerprint != fingerprint {
			return BindResult{}, Errorf(CodeConflict,
				"Service binding %s already exists with different parameters: use another binding id.", d.BindingID)
		}
		switch existing.State {
		case BindingReady:
			return bound(ResultOK, *existing), nil
		case BindingCreating:
			if d.AcceptsIncomplete {
				return BindResult{Result: ResultAccepted, Operation: existing.Op}, nil
			}
			return BindResult{}, concurrency("Service binding %s is being created; send accepts_incomplete=true to follow it.", d.BindingID)
		case BindingFailed:
			return BindResult{}, Errorf(CodeConflict,
				"Service binding %s exists but failed: unbind it, then bind again.", d.BindingID)
		}
		return BindResult{}, concurrency("Service binding %s is being deleted.", d.BindingID)
	}
	inst := c.Instance
	switch {
	case inst == nil:
		return BindResult{}, Errorf(CodeNotFound, "Service instance %s does not exist.", d.InstanceID)
	case inst.State == InstanceFailed:
		return BindResult{}, Errorf(CodeUnprocessable,
			"Service instance %s is in a failed state and cannot be bound: deprovision it.", d.InstanceID)
	}
	return BindResult{}, concurrency("Another operation for service instance %s is in progress (%s).", d.InstanceID, inst.State)
}
