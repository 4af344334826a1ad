package broker

import (
	"context"
	"errors"
	"fmt"
)

// FetchInstanceDetails is a fetch instance request. ServiceID and PlanID
// are optional: when sent, they must be the instance's.
type FetchInstanceDetails struct {
	InstanceID string
	ServiceID  string
	PlanID     string
}

// FetchInstance handles GET /v2/service_instances/:instance_id: the
// instance, once it is provisioned and while no update holds it.
func (b *Broker) FetchInstance(ctx context.Context, d FetchInstanceDetails) (Instance, error) {
	inst, err := b.Store.GetInstance(ctx, d.InstanceID)
	if errors.Is(err, ErrNotFound) {
		return Instance{}, Errorf(CodeNotFound, "Service instance %s does not exist.", d.InstanceID)
	}
	if err != nil {
		return Instance{}, fmt.Errorf("fetch instance %s: %w", d.InstanceID, err)
	}
	serviceID, planID := b.hints(d.ServiceID, d.PlanID)
	if err := b.checkIDs(inst, serviceID, planID); err != nil {
		return Instance{}, err
	}
	switch inst.State {
	case InstanceProvisioning:
		return Instance{}, Errorf(CodeNotFound, "Service instance %s is still being provisioned.", d.InstanceID)
	case InstanceFailed:
		if inst.LastOp != "" {
			if op, err := b.Store.GetOperation(ctx, inst.ID, inst.LastOp); err == nil && op.Kind == KindProvision {
				return Instance{}, Errorf(CodeNotFound, "Service instance %s failed to provision.", d.InstanceID)
			}
		}
	case InstanceUpdating:
		return Instance{}, concurrency("Service instance %s is being updated; fetch it when the update ends.", d.InstanceID)
	}
	return inst, nil
}

// FetchBindingDetails is a fetch binding request. ServiceID and PlanID
// are optional: when sent, they must be the instance's (or those the
// binding was made under).
type FetchBindingDetails struct {
	InstanceID string
	BindingID  string
	ServiceID  string
	PlanID     string
}

// FetchBinding handles GET /v2/service_instances/:instance_id/service_bindings/:binding_id:
// the binding, once it is created. It holds the credentials.
func (b *Broker) FetchBinding(ctx context.Context, d FetchBindingDetails) (Binding, error) {
	binding, err := b.Store.GetBinding(ctx, d.InstanceID, d.BindingID)
	if errors.Is(err, ErrNotFound) {
		return Binding{}, Errorf(CodeNotFound, "Service binding %s does not exist.", d.BindingID)
	}
	if err != nil {
		return Binding{}, fmt.Errorf("fetch binding %s/%s: %w", d.InstanceID, d.BindingID, err)
	}
	// The binding keeps the ids it was made under; only other ids cost a
	// read of the instance, whose plan may have changed since.
	if err := b.checkRecordedIDs(ctx, d.InstanceID, d.ServiceID, d.PlanID, binding.PlanID); err != nil {
		return Binding{}, err
	}
	switch binding.State {
	case BindingCreating:
		return Binding{}, Errorf(CodeNotFound, "Service binding %s is still being created.", d.BindingID)
	case BindingFailed:
		return Binding{}, Errorf(CodeNotFound, "Service binding %s failed to be created.", d.BindingID)
	}
	return binding, nil
}
