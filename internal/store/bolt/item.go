package bolt

import (
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/jsonenc"
)

// The storage types. Each kind of item is a struct of this package whose
// json tags are its field names in the file, and which converts to and
// from its domain type field by field. The domain's json tags play no
// part: renaming one changes nothing stored, and a field added to the
// domain is stored once it is added here. TestFieldNames lists every name,
// so that a rename here is deliberate.
//
// The names and the encoding are those the store has always written (the
// domain structs' JSON, written by jsonenc), so that the items of existing
// data directories read alike (TestStoredItems). Raw JSON (parameters,
// context, a record's data...) is embedded as it is, compact. The items a
// request writes (instance, binding, operation, record) are written in a
// binary form now, about half the bytes (itembin.go), and JSON where it
// does not take an item; both read back.

type instanceItem struct {
	ID               string               `json:"id"`
	ServiceID        string               `json:"service_id"`
	PlanID           string               `json:"plan_id"`
	OrganizationGUID string               `json:"organization_guid,omitempty"`
	SpaceGUID        string               `json:"space_guid,omitempty"`
	Parameters       json.RawMessage      `json:"parameters,omitempty"`
	Context          json.RawMessage      `json:"context,omitempty"`
	MaintenanceInfo  *maintenanceInfoItem `json:"maintenance_info,omitempty"`
	PlanDigest       string               `json:"plan_digest,omitempty"`
	DashboardURL     string               `json:"dashboard_url,omitempty"`
	Metadata         metadataItem         `json:"metadata"`
	State            string               `json:"state"`
	Op               string               `json:"op,omitempty"`
	LastOp           string               `json:"last_op,omitempty"`
	BindingOps       int                  `json:"binding_ops"`
	Fingerprint      string               `json:"fingerprint"`
	Version          int64                `json:"version"`
	CreatedAt        time.Time            `json:"created_at"`
	UpdatedAt        time.Time            `json:"updated_at"`
}

type maintenanceInfoItem struct {
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
}

type metadataItem struct {
	Labels     map[string]any `json:"labels,omitempty"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

type bindingItem struct {
	InstanceID    string          `json:"instance_id"`
	ID            string          `json:"id"`
	ServiceID     string          `json:"service_id"`
	PlanID        string          `json:"plan_id"`
	AppGUID       string          `json:"app_guid,omitempty"`
	BindResource  json.RawMessage `json:"bind_resource,omitempty"`
	Parameters    json.RawMessage `json:"parameters,omitempty"`
	Context       json.RawMessage `json:"context,omitempty"`
	State         string          `json:"state"`
	Credentials   map[string]any  `json:"credentials,omitempty"`
	Endpoints     []endpointItem  `json:"endpoints,omitempty"`
	Sealed        json.RawMessage `json:"sealed,omitempty"`
	PredecessorID string          `json:"predecessor_id,omitempty"`
	ExpiresAt     time.Time       `json:"expires_at,omitzero"`
	RenewBefore   time.Time       `json:"renew_before,omitzero"`
	Op            string          `json:"op,omitempty"`
	LastOp        string          `json:"last_op,omitempty"`
	Fingerprint   string          `json:"fingerprint"`
	Version       int64           `json:"version"`
	CreatedAt     time.Time       `json:"created_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
}

type endpointItem struct {
	Host     string   `json:"host"`
	Ports    []string `json:"ports"`
	Protocol string   `json:"protocol,omitempty"`
}

type operationItem struct {
	ID               string      `json:"id"`
	InstanceID       string      `json:"instance_id"`
	BindingID        string      `json:"binding_id,omitempty"`
	Kind             string      `json:"kind"`
	State            string      `json:"state"`
	Description      string      `json:"description,omitempty"`
	Detail           string      `json:"detail,omitempty"`
	Fingerprint      string      `json:"fingerprint"`
	Async            bool        `json:"async"`
	PlanID           string      `json:"plan_id"`
	Target           *targetItem `json:"target,omitempty"`
	RetryAfter       int64       `json:"retry_after"` // nanoseconds
	InstanceUsable   *bool       `json:"instance_usable,omitempty"`
	UpdateRepeatable *bool       `json:"update_repeatable,omitempty"`
	CreatedAt        time.Time   `json:"created_at"`
	UpdatedAt        time.Time   `json:"updated_at"`
	NextCheckAt      time.Time   `json:"next_check_at"`
	FinishedAt       time.Time   `json:"finished_at,omitzero"`
	ExpiresAt        time.Time   `json:"expires_at,omitzero"`
	OutageSince      time.Time   `json:"outage_since,omitzero"`
	OutageAttempts   int         `json:"outage_attempts,omitempty"`
	OutageInBegin    bool        `json:"outage_in_begin,omitempty"`
}

type targetItem struct {
	PlanID          string               `json:"plan_id,omitempty"`
	Parameters      json.RawMessage      `json:"parameters,omitempty"`
	Context         json.RawMessage      `json:"context,omitempty"`
	MaintenanceInfo *maintenanceInfoItem `json:"maintenance_info,omitempty"`
	PlanDigest      string               `json:"plan_digest,omitempty"`
}

type resourceItem struct {
	InstanceID string          `json:"instance_id"`
	Name       string          `json:"name"`
	Data       json.RawMessage `json:"data"` // nil is null, read back as null
	UpdatedAt  time.Time       `json:"updated_at"`
}

type detachedItem struct {
	ID             string          `json:"id"`
	InstanceID     string          `json:"instance_id"`
	Name           string          `json:"name"`
	Data           json.RawMessage `json:"data"`
	PlanID         string          `json:"plan_id"`
	OperationID    string          `json:"operation_id"`
	Reason         string          `json:"reason"`
	State          string          `json:"state"`
	Attempts       int             `json:"attempts"`
	Failure        string          `json:"failure,omitempty"`
	FailureDetail  string          `json:"failure_detail,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	OutageSince    time.Time       `json:"outage_since,omitzero"`
	OutageAttempts int             `json:"outage_attempts,omitempty"`
	OutageReason   string          `json:"outage_reason,omitempty"`
	NextTryAt      time.Time       `json:"next_try_at,omitzero"`
}

// The conversions from the domain normalise times to UTC, as the DynamoDB
// store does.

func newInstanceItem(i broker.Instance) instanceItem {
	return instanceItem{
		ID: i.ID, ServiceID: i.ServiceID, PlanID: i.PlanID, OrganizationGUID: i.OrganizationGUID, SpaceGUID: i.SpaceGUID,
		Parameters: i.Parameters, Context: i.Context, MaintenanceInfo: newMaintenanceInfoItem(i.MaintenanceInfo),
		PlanDigest: i.PlanDigest, DashboardURL: i.DashboardURL, Metadata: metadataItem{Labels: i.Metadata.Labels, Attributes: i.Metadata.Attributes},
		State: string(i.State), Op: i.Op, LastOp: i.LastOp, BindingOps: i.BindingOps, Fingerprint: i.Fingerprint,
		Version: i.Version, CreatedAt: i.CreatedAt.UTC(), UpdatedAt: i.UpdatedAt.UTC(),
	}
}

func (it instanceItem) instance() broker.Instance {
	return broker.Instance{
		ID: it.ID,
		InstanceRequest: broker.InstanceRequest{ServiceID: it.ServiceID, PlanID: it.PlanID, OrganizationGUID: it.OrganizationGUID,
			SpaceGUID: it.SpaceGUID, Parameters: it.Parameters, Context: it.Context, MaintenanceInfo: it.MaintenanceInfo.maintenanceInfo()},
		PlanDigest: it.PlanDigest, DashboardURL: it.DashboardURL, Metadata: broker.InstanceMetadata{Labels: it.Metadata.Labels, Attributes: it.Metadata.Attributes},
		State: broker.InstanceState(it.State), Op: it.Op, LastOp: it.LastOp, BindingOps: it.BindingOps,
		Fingerprint: it.Fingerprint, Version: it.Version, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt,
	}
}

func newMaintenanceInfoItem(m *broker.MaintenanceInfo) *maintenanceInfoItem {
	if m == nil {
		return nil
	}
	return &maintenanceInfoItem{Version: m.Version, Description: m.Description}
}

func (it *maintenanceInfoItem) maintenanceInfo() *broker.MaintenanceInfo {
	if it == nil {
		return nil
	}
	return &broker.MaintenanceInfo{Version: it.Version, Description: it.Description}
}

func newBindingItem(b broker.Binding) bindingItem {
	it := bindingItem{
		InstanceID: b.InstanceID, ID: b.ID, ServiceID: b.ServiceID, PlanID: b.PlanID, AppGUID: b.AppGUID,
		BindResource: b.BindResource, Parameters: b.Parameters, Context: b.Context,
		State: string(b.State), Credentials: b.Credentials, Sealed: b.Sealed, PredecessorID: b.PredecessorID,
		ExpiresAt: b.ExpiresAt.UTC(), RenewBefore: b.RenewBefore.UTC(),
		Op: b.Op, LastOp: b.LastOp, Fingerprint: b.Fingerprint, Version: b.Version,
		CreatedAt: b.CreatedAt.UTC(), UpdatedAt: b.UpdatedAt.UTC(),
	}
	for _, e := range b.Endpoints {
		it.Endpoints = append(it.Endpoints, endpointItem{Host: e.Host, Ports: e.Ports, Protocol: e.Protocol})
	}
	return it
}

func (it bindingItem) binding() broker.Binding {
	b := broker.Binding{
		InstanceID: it.InstanceID, ID: it.ID,
		BindingRequest: broker.BindingRequest{ServiceID: it.ServiceID, PlanID: it.PlanID, AppGUID: it.AppGUID,
			BindResource: it.BindResource, Parameters: it.Parameters, Context: it.Context, PredecessorID: it.PredecessorID},
		State: broker.BindingState(it.State), Credentials: it.Credentials, Sealed: it.Sealed,
		ExpiresAt: it.ExpiresAt, RenewBefore: it.RenewBefore,
		Op: it.Op, LastOp: it.LastOp, Fingerprint: it.Fingerprint, Version: it.Version,
		CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt,
	}
	for _, e := range it.Endpoints {
		b.Endpoints = append(b.Endpoints, broker.Endpoint{Host: e.Host, Ports: e.Ports, Protocol: e.Protocol})
	}
	return b
}

func newOperationItem(op broker.Operation) operationItem {
	it := operationItem{
		ID: op.ID, InstanceID: op.InstanceID, BindingID: op.BindingID, Kind: string(op.Kind), State: string(op.State),
		Description: op.Description, Detail: op.Detail, Fingerprint: op.Fingerprint, Async: op.Async, PlanID: op.PlanID,
		RetryAfter: int64(op.RetryAfter), InstanceUsable: op.InstanceUsable, UpdateRepeatable: op.UpdateRepeatable,
		CreatedAt: op.CreatedAt.UTC(), UpdatedAt: op.UpdatedAt.UTC(), NextCheckAt: op.NextCheckAt.UTC(),
		FinishedAt: op.FinishedAt.UTC(), ExpiresAt: op.ExpiresAt.UTC(),
		OutageSince: op.OutageSince.UTC(), OutageAttempts: op.OutageAttempts, OutageInBegin: op.OutageInBegin,
	}
	if t := op.Target; t != nil {
		it.Target = &targetItem{
			PlanID: t.PlanID, Parameters: t.Parameters, Context: t.Context,
			MaintenanceInfo: newMaintenanceInfoItem(t.MaintenanceInfo), PlanDigest: t.PlanDigest,
		}
	}
	return it
}

func (it operationItem) operation() broker.Operation {
	op := broker.Operation{
		ID: it.ID, InstanceID: it.InstanceID, BindingID: it.BindingID,
		Kind: broker.OperationKind(it.Kind), State: broker.OperationState(it.State),
		Description: it.Description, Detail: it.Detail, Fingerprint: it.Fingerprint, Async: it.Async, PlanID: it.PlanID,
		RetryAfter: time.Duration(it.RetryAfter), InstanceUsable: it.InstanceUsable, UpdateRepeatable: it.UpdateRepeatable,
		CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt, NextCheckAt: it.NextCheckAt,
		FinishedAt: it.FinishedAt, ExpiresAt: it.ExpiresAt,
		OutageSince: it.OutageSince, OutageAttempts: it.OutageAttempts, OutageInBegin: it.OutageInBegin,
	}
	if t := it.Target; t != nil {
		op.Target = &broker.Target{
			PlanID: t.PlanID, Parameters: t.Parameters, Context: t.Context,
			MaintenanceInfo: t.MaintenanceInfo.maintenanceInfo(), PlanDigest: t.PlanDigest,
		}
	}
	return op
}

func newResourceItem(r broker.Resource) resourceItem {
	return resourceItem{InstanceID: r.InstanceID, Name: r.Name, Data: r.Data, UpdatedAt: r.UpdatedAt.UTC()}
}

func (it resourceItem) resource() broker.Resource {
	return broker.Resource{InstanceID: it.InstanceID, Name: it.Name, Data: it.Data, UpdatedAt: it.UpdatedAt}
}

func newDetachedItem(d broker.Detached) detachedItem {
	return detachedItem{
		ID: d.ID, InstanceID: d.InstanceID, Name: d.Name, Data: d.Data, PlanID: d.PlanID,
		OperationID: d.OperationID, Reason: d.Reason, State: string(d.State), Attempts: d.Attempts, Failure: d.Failure,
		FailureDetail: d.FailureDetail,
		CreatedAt:     d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC(),
		OutageSince: d.OutageSince.UTC(), OutageAttempts: d.OutageAttempts, OutageReason: d.OutageReason,
		NextTryAt: d.NextTryAt.UTC(),
	}
}

func (it detachedItem) detached() broker.Detached {
	return broker.Detached{
		ID: it.ID, InstanceID: it.InstanceID, Name: it.Name, Data: it.Data, PlanID: it.PlanID,
		OperationID: it.OperationID, Reason: it.Reason, State: broker.DetachedState(it.State), Attempts: it.Attempts,
		Failure: it.Failure, FailureDetail: it.FailureDetail, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt,
		OutageSince: it.OutageSince, OutageAttempts: it.OutageAttempts, OutageReason: it.OutageReason, NextTryAt: it.NextTryAt,
	}
}

// itemJSONSize holds a synchronous provision's instance, operation and
// record (about 400 to 620 bytes) without growing.
const itemJSONSize = 704

// put writes a storage item at key.
func put(b *bbolt.Bucket, key []byte, item any) error {
	if it, ok := item.(itemBin); ok {
		if data, ok := it.appendBin(make([]byte, 0, itemJSONSize)); ok {
			return b.Put(key, data)
		}
	}
	if it, ok := item.(itemJSON); ok {
		// A buffer of its own: bbolt keeps the value until the commit.
		if data, ok := it.appendJSON(make([]byte, 0, itemJSONSize)); ok {
			return b.Put(key, data)
		}
	}
	data, err := jsonenc.Marshal(item)
	if err != nil {
		return fmt.Errorf("encode item %s: %w", showKey(key), err)
	}
	return b.Put(key, data)
}

// decode unmarshals the item at key, value, as an I and converts it with
// domain:
//
//	inst, err := decode(k, v, instanceItem.instance)
func decode[I, D any](key, value []byte, domain func(I) D) (D, error) {
	var it I
	if len(value) > 0 && value[0] == binMark {
		if r, ok := any(&it).(itemBinRead); ok {
			if err := r.readBin(value[1:]); err != nil {
				var zero D
				return zero, fmt.Errorf("decode item %s: %w", showKey(key), err)
			}
			return domain(it), nil
		}
	}
	if r, ok := any(&it).(itemRead); ok {
		if r.readJSON(value) {
			return domain(it), nil
		}
		var zero I
		it = zero
	}
	if err := json.Unmarshal(value, &it); err != nil {
		var zero D
		return zero, fmt.Errorf("decode item %s: %w", showKey(key), err)
	}
	return domain(it), nil
}

// get decodes the item at key, or returns nil when there is none.
func get[I, D any](t tx, key []byte, domain func(I) D) (*D, error) {
	v := t.value(key)
	if v == nil {
		return nil, nil
	}
	d, err := decode(key, v, domain)
	if err != nil {
		return nil, err
	}
	return &d, nil
}
