package broker

import (
	"context"
	"errors"
	"fmt"
)

// FetchInstanceDetails is a fetch instance request.
type FetchInstanceDetails struct {
	InstanceID string
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

// FetchBindingDetails is a fetch binding request.
type FetchBindingDetails struct {
	InstanceID string
	BindingID  string
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
	switch binding.State {
	case BindingCreating:
		return Binding{}, Errorf(CodeNotFound, "Service binding %s is still being created.", d.BindingID)
	case BindingFailed:
		return Binding{}, Errorf(CodeNotFound, "Service binding %s failed to be created.", d.BindingID)
	}
	return binding, nil
}
