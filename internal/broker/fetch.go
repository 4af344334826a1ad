package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// FetchedInstance is the body of GET instance.
type FetchedInstance struct {
	ServiceID       string           `json:"service_id"`
	PlanID          string           `json:"plan_id"`
	DashboardURL    string           `json:"dashboard_url,omitempty"`
	Parameters      json.RawMessage  `json:"parameters,omitempty"`
	MaintenanceInfo *MaintenanceInfo `json:"maintenance_info,omitempty"`
	Metadata        InstanceMetadata `json:"metadata"`
}

// FetchInstance handles GET /v2/service_instances/:instance_id.
func (b *Broker) FetchInstance(ctx context.Context, instanceID string) (FetchedInstance, error) {
	inst, err := b.Store.GetInstance(ctx, instanceID)
	if errors.Is(err, ErrNotFound) {
		return FetchedInstance{}, Errorf(CodeNotFound, "Service instance %s does not exist.", instanceID)
	}
	if err != nil {
		return FetchedInstance{}, fmt.Errorf("fetch instance %s: %w", instanceID, err)
	}
	switch inst.State {
	case InstanceProvisioning:
		return FetchedInstance{}, Errorf(CodeNotFound, "Service instance %s is still being provisioned.", instanceID)
	case InstanceFailed:
		if inst.LastOp != "" {
			if op, err := b.Store.GetOperation(ctx, inst.ID, inst.LastOp); err == nil && op.Kind == KindProvision {
				return FetchedInstance{}, Errorf(CodeNotFound, "Service instance %s failed to provision.", instanceID)
			}
		}
	case InstanceUpdating:
		return FetchedInstance{}, concurrency("Service instance %s is being updated; fetch it when the update ends.", instanceID)
	}
	return FetchedInstance{
		ServiceID: inst.ServiceID, PlanID: inst.PlanID, DashboardURL: inst.DashboardURL,
		Parameters: inst.Parameters, MaintenanceInfo: inst.MaintenanceInfo, Metadata: inst.Metadata,
	}, nil
}

// FetchedBinding is the body of GET binding.
type FetchedBinding struct {
	Metadata    *BindingMetadata `json:"metadata,omitempty"`
	Credentials Credentials      `json:"credentials,omitempty"`
	Endpoints   []Endpoint       `json:"endpoints,omitempty"`
	Parameters  json.RawMessage  `json:"parameters,omitempty"`
}

// BindingMetadata is a binding's OSB metadata: when its credentials expire
// and when to renew them (rotate the binding), as the spec spells times.
type BindingMetadata struct {
	ExpiresAt   string `json:"expires_at,omitempty"`
	RenewBefore string `json:"renew_before,omitempty"`
}

// NewBindingMetadata is the metadata of credentials that expire at
// expires and are to be renewed before renew; nil when they do not expire.
func NewBindingMetadata(expires, renew time.Time) *BindingMetadata {
	if expires.IsZero() {
		return nil
	}
	spell := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.0") + "Z" }
	return &BindingMetadata{ExpiresAt: spell(expires), RenewBefore: spell(renew)}
}

// FetchBinding handles GET /v2/service_instances/:instance_id/service_bindings/:binding_id.
func (b *Broker) FetchBinding(ctx context.Context, instanceID, bindingID string) (FetchedBinding, error) {
	binding, err := b.Store.GetBinding(ctx, instanceID, bindingID)
	if errors.Is(err, ErrNotFound) {
		return FetchedBinding{}, Errorf(CodeNotFound, "Service binding %s does not exist.", bindingID)
	}
	if err != nil {
		return FetchedBinding{}, fmt.Errorf("fetch binding %s/%s: %w", instanceID, bindingID, err)
	}
	switch binding.State {
	case BindingCreating:
		return FetchedBinding{}, Errorf(CodeNotFound, "Service binding %s is still being created.", bindingID)
	case BindingFailed:
		return FetchedBinding{}, Errorf(CodeNotFound, "Service binding %s failed to be created.", bindingID)
	}
	return FetchedBinding{Metadata: NewBindingMetadata(binding.ExpiresAt, binding.RenewBefore),
		Credentials: binding.Credentials, Endpoints: binding.Endpoints, Parameters: binding.Parameters}, nil
}
