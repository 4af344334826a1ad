package dynamo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/jsonenc"
)

// The storage types. Each kind of item is a struct of this package whose
// dynamodbav tags are its attribute names, key attributes included, and
// which converts to and from its domain type field by field. The domain's
// json tags play no part: renaming one changes nothing stored, and a field
// added to the domain is stored once it is added here. TestAttributeNames
// lists every attribute name, so that a rename here is deliberate.
//
// The names and types are those the store has always written (the domain
// structs' JSON spread over top-level attributes), so that items stored
// before these types existed read alike (TestStoredItems):
//   - strings are S, numbers N, booleans BOOL; times are S in RFC 3339 with
//     nanoseconds, in UTC;
//   - raw JSON (parameters, context, bind_resource, an operation's target,
//     a record's data) is S holding the JSON text (jsonText), compact, so
//     that it comes back byte for byte, which an M would not do (key order,
//     duplicate keys, numbers beyond DynamoDB's 38 digits);
//   - metadata, maintenance_info and endpoints are M and L of their fields;
//     credentials and sealed are JSON values as M, L, S, N, BOOL and NULL.

// Attribute names that expressions use, besides the keys (dynamo.go).
// TestAttributeNames checks each against the tags of the types it names.
const (
	attrOp          = "op"          // instanceItem, bindingItem
	attrState       = "state"       // instanceItem, operationItem
	attrVersion     = "version"     // instanceItem, bindingItem
	attrBindingOps  = "binding_ops" // instanceItem
	attrAttempts    = "attempts"    // detachedItem
	attrData        = "data"        // resourceItem, detachedItem
	attrCredentials = "credentials" // bindingItem
	attrSealed      = "sealed"      // bindingItem
	attrServiceID   = "service_id"  // instanceItem
	attrPlanID      = "plan_id"     // instanceItem
	attrParameters  = "parameters"  // instanceItem, bindingItem
	attrTarget      = "target"      // operationItem
	attrFingerprint = "fingerprint" // instanceItem, bindingItem, operationItem
)

type instanceItem struct {
	PK               string               `dynamodbav:"PK"`
	SK               string               `dynamodbav:"SK"`
	ID               string               `dynamodbav:"id"`
	ServiceID        string               `dynamodbav:"service_id"`
	PlanID           string               `dynamodbav:"plan_id,omitempty"`
	OrganizationGUID string               `dynamodbav:"organization_guid,omitempty"`
	SpaceGUID        string               `dynamodbav:"space_guid,omitempty"`
	Parameters       jsonText             `dynamodbav:"parameters,omitempty"`
	Context          jsonText             `dynamodbav:"context,omitempty"`
	MaintenanceInfo  *maintenanceInfoItem `dynamodbav:"maintenance_info,omitempty"`
	PlanDigest       string               `dynamodbav:"plan_digest,omitempty"`
	DashboardURL     string               `dynamodbav:"dashboard_url,omitempty"`
	Metadata         metadataItem         `dynamodbav:"metadata"`
	State            string               `dynamodbav:"state"`
	Op               string               `dynamodbav:"op,omitempty"`
	LastOp           string               `dynamodbav:"last_op,omitempty"`
	BindingOps       int                  `dynamodbav:"binding_ops"`
	Fingerprint      string               `dynamodbav:"fingerprint"`
	Version          int64                `dynamodbav:"version"`
	CreatedAt        time.Time            `dynamodbav:"created_at"`
	UpdatedAt        time.Time            `dynamodbav:"updated_at"`
}

// maintenanceInfoItem is also a field of an operation's target text, hence
// its json tags.
type maintenanceInfoItem struct {
	Version     string `dynamodbav:"version" json:"version"`
	Description string `dynamodbav:"description,omitempty" json:"description,omitempty"`
}

type metadataItem struct {
	Labels     map[string]any `dynamodbav:"labels,omitempty"`
	Attributes map[string]any `dynamodbav:"attributes,omitempty"`
}

type bindingItem struct {
	PK            string         `dynamodbav:"PK"`
	SK            string         `dynamodbav:"SK"`
	InstanceID    string         `dynamodbav:"instance_id"`
	ID            string         `dynamodbav:"id"`
	ServiceID     string         `dynamodbav:"service_id"`
	PlanID        string         `dynamodbav:"plan_id,omitempty"`
	AppGUID       string         `dynamodbav:"app_guid,omitempty"`
	BindResource  jsonText       `dynamodbav:"bind_resource,omitempty"`
	Parameters    jsonText       `dynamodbav:"parameters,omitempty"`
	Context       jsonText       `dynamodbav:"context,omitempty"`
	State         string         `dynamodbav:"state"`
	Credentials   map[string]any `dynamodbav:"credentials,omitempty"`
	Endpoints     []endpointItem `dynamodbav:"endpoints,omitempty"`
	Sealed        any            `dynamodbav:"sealed,omitempty"`
	PredecessorID string         `dynamodbav:"predecessor_id,omitempty"`
	ExpiresAt     time.Time      `dynamodbav:"expires_at,omitempty"`
	RenewBefore   time.Time      `dynamodbav:"renew_before,omitempty"`
	Op            string         `dynamodbav:"op,omitempty"`
	LastOp        string         `dynamodbav:"last_op,omitempty"`
	Fingerprint   string         `dynamodbav:"fingerprint"`
	Version       int64          `dynamodbav:"version"`
	CreatedAt     time.Time      `dynamodbav:"created_at"`
	UpdatedAt     time.Time      `dynamodbav:"updated_at"`
}

type endpointItem struct {
	Host     string   `dynamodbav:"host"`
	Ports    []string `dynamodbav:"ports"` // nil is NULL
	Protocol string   `dynamodbav:"protocol,omitempty"`
}

// operationItem carries InProgress ("1") while the operation is in
// progress, the key of the sparse index InProgress, and ExpiresAtEpoch
// once it is finished, if it has an expiry: the table's time to live.
type operationItem struct {
	PK               string    `dynamodbav:"PK"`
	SK               string    `dynamodbav:"SK"`
	InProgress       string    `dynamodbav:"inprogress,omitempty"`
	ExpiresAtEpoch   int64     `dynamodbav:"expires_at_epoch,omitempty"`
	ID               string    `dynamodbav:"id"`
	InstanceID       string    `dynamodbav:"instance_id"`
	BindingID        string    `dynamodbav:"binding_id,omitempty"`
	Kind             string    `dynamodbav:"kind"`
	State            string    `dynamodbav:"state"`
	Description      string    `dynamodbav:"description,omitempty"`
	Detail           string    `dynamodbav:"detail,omitempty"`
	Fingerprint      string    `dynamodbav:"fingerprint"`
	Async            bool      `dynamodbav:"async"`
	PlanID           string    `dynamodbav:"plan_id,omitempty"`
	Target           jsonText  `dynamodbav:"target,omitempty"` // a targetText
	RetryAfter       int64     `dynamodbav:"retry_after"`      // nanoseconds
	InstanceUsable   *bool     `dynamodbav:"instance_usable,omitempty"`
	UpdateRepeatable *bool     `dynamodbav:"update_repeatable,omitempty"`
	CreatedAt        time.Time `dynamodbav:"created_at"`
	UpdatedAt        time.Time `dynamodbav:"updated_at"`
	NextCheckAt      time.Time `dynamodbav:"next_check_at"`
	FinishedAt       time.Time `dynamodbav:"finished_at,omitempty"`
	ExpiresAt        time.Time `dynamodbav:"expires_at,omitempty"`
	OutageSince      time.Time `dynamodbav:"outage_since,omitempty"`
	OutageAttempts   int       `dynamodbav:"outage_attempts,omitempty"`
	OutageInBegin    bool      `dynamodbav:"outage_in_begin,omitempty"`
}

// targetText is an update's target as the JSON text of an operation's
// target attribute.
type targetText struct {
	PlanID          string               `json:"plan_id,omitempty"`
	Parameters      json.RawMessage      `json:"parameters,omitempty"`
	Context         json.RawMessage      `json:"context,omitempty"`
	MaintenanceInfo *maintenanceInfoItem `json:"maintenance_info,omitempty"`
	PlanDigest      string               `json:"plan_digest,omitempty"`
}

type resourceItem struct {
	PK         string    `dynamodbav:"PK"`
	SK         string    `dynamodbav:"SK"`
	InstanceID string    `dynamodbav:"instance_id"`
	Name       string    `dynamodbav:"name"`
	Data       jsonText  `dynamodbav:"data"` // missing data is "null"
	UpdatedAt  time.Time `dynamodbav:"updated_at"`
}

type detachedItem struct {
	PK             string    `dynamodbav:"PK"`
	SK             string    `dynamodbav:"SK"`
	ID             string    `dynamodbav:"id"`
	InstanceID     string    `dynamodbav:"instance_id"`
	Name           string    `dynamodbav:"name"`
	Data           jsonText  `dynamodbav:"data"` // missing data is "null"
	PlanID         string    `dynamodbav:"plan_id,omitempty"`
	OperationID    string    `dynamodbav:"operation_id"`
	Reason         string    `dynamodbav:"reason"`
	State          string    `dynamodbav:"state"`
	Attempts       int       `dynamodbav:"attempts"`
	Failure        string    `dynamodbav:"failure,omitempty"`
	FailureDetail  string    `dynamodbav:"failure_detail,omitempty"`
	CreatedAt      time.Time `dynamodbav:"created_at"`
	UpdatedAt      time.Time `dynamodbav:"updated_at"`
	OutageSince    time.Time `dynamodbav:"outage_since,omitempty"`
	OutageAttempts int       `dynamodbav:"outage_attempts,omitempty"`
	OutageReason   string    `dynamodbav:"outage_reason,omitempty"`
	NextTryAt      time.Time `dynamodbav:"next_try_at,omitempty"`
}

// The conversions from the domain normalise times to UTC, as the bolt
// store does.

func newInstanceItem(i broker.Instance) (instanceItem, error) {
	params, err1 := newJSONText(i.Parameters, "parameters")
	osbContext, err2 := newJSONText(i.Context, "context")
	labels, err3 := jsonObject(i.Metadata.Labels, "metadata labels")
	attributes, err4 := jsonObject(i.Metadata.Attributes, "metadata attributes")
	return instanceItem{
		PK: pk(i.ID), SK: skInstance,
		ID: i.ID, ServiceID: i.ServiceID, PlanID: i.PlanID, OrganizationGUID: i.OrganizationGUID, SpaceGUID: i.SpaceGUID,
		Parameters: params, Context: osbContext, MaintenanceInfo: newMaintenanceInfoItem(i.MaintenanceInfo),
		PlanDigest: i.PlanDigest, DashboardURL: i.DashboardURL, Metadata: metadataItem{Labels: labels, Attributes: attributes},
		State: string(i.State), Op: i.Op, LastOp: i.LastOp, BindingOps: i.BindingOps, Fingerprint: i.Fingerprint,
		Version: i.Version, CreatedAt: i.CreatedAt.UTC(), UpdatedAt: i.UpdatedAt.UTC(),
	}, errors.Join(err1, err2, err3, err4)
}

func (it instanceItem) instance() (broker.Instance, error) {
	return broker.Instance{
		ID: it.ID,
		InstanceRequest: broker.InstanceRequest{ServiceID: it.ServiceID, PlanID: it.PlanID, OrganizationGUID: it.OrganizationGUID,
			SpaceGUID: it.SpaceGUID, Parameters: it.Parameters.raw(), Context: it.Context.raw(), MaintenanceInfo: it.MaintenanceInfo.maintenanceInfo()},
		PlanDigest: it.PlanDigest, DashboardURL: it.DashboardURL, Metadata: broker.InstanceMetadata{Labels: it.Metadata.Labels, Attributes: it.Metadata.Attributes},
		State: broker.InstanceState(it.State), Op: it.Op, LastOp: it.LastOp, BindingOps: it.BindingOps,
		Fingerprint: it.Fingerprint, Version: it.Version, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt,
	}, nil
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

func newBindingItem(b broker.Binding) (bindingItem, error) {
	bindResource, err1 := newJSONText(b.BindResource, "bind_resource")
	params, err2 := newJSONText(b.Parameters, "parameters")
	osbContext, err3 := newJSONText(b.Context, "context")
	credentials, err4 := jsonObject(b.Credentials, "credentials")
	var sealed any
	var err5 error
	if len(b.Sealed) > 0 {
		sealed, err5 = jsonValue[any](b.Sealed, "sealed")
	}
	it := bindingItem{
		PK: pk(b.InstanceID), SK: skBinding(b.ID),
		InstanceID: b.InstanceID, ID: b.ID, ServiceID: b.ServiceID, PlanID: b.PlanID, AppGUID: b.AppGUID,
		BindResource: bindResource, Parameters: params, Context: osbContext,
		State: string(b.State), Credentials: credentials, Sealed: sealed, PredecessorID: b.PredecessorID,
		ExpiresAt: b.ExpiresAt.UTC(), RenewBefore: b.RenewBefore.UTC(),
		Op: b.Op, LastOp: b.LastOp, Fingerprint: b.Fingerprint, Version: b.Version,
		CreatedAt: b.CreatedAt.UTC(), UpdatedAt: b.UpdatedAt.UTC(),
	}
	for _, e := range b.Endpoints {
		it.Endpoints = append(it.Endpoints, endpointItem{Host: e.Host, Ports: e.Ports, Protocol: e.Protocol})
	}
	return it, errors.Join(err1, err2, err3, err4, err5)
}

func (it bindingItem) binding() (broker.Binding, error) {
	b := broker.Binding{
		InstanceID: it.InstanceID, ID: it.ID,
		BindingRequest: broker.BindingRequest{ServiceID: it.ServiceID, PlanID: it.PlanID, AppGUID: it.AppGUID,
			BindResource: it.BindResource.raw(), Parameters: it.Parameters.raw(), Context: it.Context.raw(), PredecessorID: it.PredecessorID},
		State: broker.BindingState(it.State), Credentials: it.Credentials,
		ExpiresAt: it.ExpiresAt, RenewBefore: it.RenewBefore,
		Op: it.Op, LastOp: it.LastOp, Fingerprint: it.Fingerprint, Version: it.Version,
		CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt,
	}
	for _, e := range it.Endpoints {
		b.Endpoints = append(b.Endpoints, broker.Endpoint{Host: e.Host, Ports: e.Ports, Protocol: e.Protocol})
	}
	if it.Sealed != nil {
		// Numbers come back as float64 and keys sorted: the sealing
		// envelope's only number is its small format version.
		sealed, err := jsonenc.Marshal(it.Sealed)
		if err != nil {
			return broker.Binding{}, fmt.Errorf("sealed: %w", err)
		}
		b.Sealed = sealed
	}
	return b, nil
}

func newOperationItem(op broker.Operation) (operationItem, error) {
	it := operationItem{
		PK: pk(op.InstanceID), SK: skOperation(op.ID),
		ID: op.ID, InstanceID: op.InstanceID, BindingID: op.BindingID, Kind: string(op.Kind), State: string(op.State),
		Description: op.Description, Detail: op.Detail, Fingerprint: op.Fingerprint, Async: op.Async, PlanID: op.PlanID,
		RetryAfter: int64(op.RetryAfter), InstanceUsable: op.InstanceUsable, UpdateRepeatable: op.UpdateRepeatable,
		CreatedAt: op.CreatedAt.UTC(), UpdatedAt: op.UpdatedAt.UTC(), NextCheckAt: op.NextCheckAt.UTC(),
		FinishedAt: op.FinishedAt.UTC(), ExpiresAt: op.ExpiresAt.UTC(),
		OutageSince: op.OutageSince.UTC(), OutageAttempts: op.OutageAttempts, OutageInBegin: op.OutageInBegin,
	}
	switch {
	case !op.Finished():
		it.InProgress = inProgressValue
	case !op.ExpiresAt.IsZero():
		it.ExpiresAtEpoch = op.ExpiresAt.Unix()
	}
	if t := op.Target; t != nil {
		text, err := jsonenc.Marshal(targetText{
			PlanID: t.PlanID, Parameters: t.Parameters, Context: t.Context,
			MaintenanceInfo: newMaintenanceInfoItem(t.MaintenanceInfo), PlanDigest: t.PlanDigest,
		})
		if err != nil {
			return operationItem{}, fmt.Errorf("target: %w", err)
		}
		it.Target = jsonText(text)
	}
	return it, nil
}

func (it operationItem) operation() (broker.Operation, error) {
	op := broker.Operation{
		ID: it.ID, InstanceID: it.InstanceID, BindingID: it.BindingID,
		Kind: broker.OperationKind(it.Kind), State: broker.OperationState(it.State),
		Description: it.Description, Detail: it.Detail, Fingerprint: it.Fingerprint, Async: it.Async, PlanID: it.PlanID,
		RetryAfter: time.Duration(it.RetryAfter), InstanceUsable: it.InstanceUsable, UpdateRepeatable: it.UpdateRepeatable,
		CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt, NextCheckAt: it.NextCheckAt,
		FinishedAt: it.FinishedAt, ExpiresAt: it.ExpiresAt,
		OutageSince: it.OutageSince, OutageAttempts: it.OutageAttempts, OutageInBegin: it.OutageInBegin,
	}
	if it.Target != "" {
		var t targetText
		if err := json.Unmarshal([]byte(it.Target), &t); err != nil {
			return broker.Operation{}, fmt.Errorf("target: %w", err)
		}
		op.Target = &broker.Target{
			PlanID: t.PlanID, Parameters: t.Parameters, Context: t.Context,
			MaintenanceInfo: t.MaintenanceInfo.maintenanceInfo(), PlanDigest: t.PlanDigest,
		}
	}
	return op, nil
}

func newResourceItem(r broker.Resource) (resourceItem, error) {
	data, err := newJSONText(r.Data, "data")
	return resourceItem{
		PK: pk(r.InstanceID), SK: skResource(r.Name),
		InstanceID: r.InstanceID, Name: r.Name, Data: data.orNull(), UpdatedAt: r.UpdatedAt.UTC(),
	}, err
}

func (it resourceItem) resource() (broker.Resource, error) {
	return broker.Resource{InstanceID: it.InstanceID, Name: it.Name, Data: it.Data.raw(), UpdatedAt: it.UpdatedAt}, nil
}

func newDetachedItem(d broker.Detached) (detachedItem, error) {
	data, err := newJSONText(d.Data, "data")
	return detachedItem{
		PK: pkDetached, SK: d.ID,
		ID: d.ID, InstanceID: d.InstanceID, Name: d.Name, Data: data.orNull(), PlanID: d.PlanID,
		OperationID: d.OperationID, Reason: d.Reason, State: string(d.State), Attempts: d.Attempts, Failure: d.Failure,
		FailureDetail: d.FailureDetail,
		CreatedAt:     d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC(),
		OutageSince: d.OutageSince.UTC(), OutageAttempts: d.OutageAttempts, OutageReason: d.OutageReason,
		NextTryAt: d.NextTryAt.UTC(),
	}, err
}

func (it detachedItem) detached() (broker.Detached, error) {
	return broker.Detached{
		ID: it.ID, InstanceID: it.InstanceID, Name: it.Name, Data: it.Data.raw(), PlanID: it.PlanID,
		OperationID: it.OperationID, Reason: it.Reason, State: broker.DetachedState(it.State), Attempts: it.Attempts,
		Failure: it.Failure, FailureDetail: it.FailureDetail, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt,
		OutageSince: it.OutageSince, OutageAttempts: it.OutageAttempts, OutageReason: it.OutageReason, NextTryAt: it.NextTryAt,
	}, nil
}

// jsonText is raw JSON as an S attribute holds it: its compact text.
type jsonText string

// newJSONText compacts raw, which must be JSON; empty raw is "".
func newJSONText(raw json.RawMessage, field string) (jsonText, error) {
	if len(raw) == 0 {
		return "", nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	return jsonText(buf.String()), nil
}

// orNull is t, or the JSON null when t is empty: the text of an attribute
// that is always present.
func (t jsonText) orNull() jsonText {
	if t == "" {
		return "null"
	}
	return t
}

// raw is the JSON t holds; nil when t is empty.
func (t jsonText) raw() json.RawMessage {
	if t == "" {
		return nil
	}
	return json.RawMessage(t)
}

// jsonObject is m as JSON has it (nil when empty), so that values of any Go
// type are stored as their JSON, and numbers with the digits JSON gives
// them. Read back, numbers are float64, as encoding/json decodes them.
func jsonObject(m map[string]any, field string) (map[string]any, error) {
	if len(m) == 0 {
		return nil, nil
	}
	data, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return jsonValue[map[string]any](data, field)
}

// jsonValue decodes data with numbers as json.Number, which attributevalue
// stores as N with the same digits.
func jsonValue[T any](data []byte, field string) (T, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return v, fmt.Errorf("%s: %w", field, err)
	}
	return v, nil
}

// encode marshals a storage item, as newXxxItem returns it. A zero time in
// a field tagged omitempty is left out, as encoding/json's omitzero did.
func encode[I any](it I, err error) (map[string]types.AttributeValue, error) {
	if err != nil {
		return nil, err
	}
	return attributevalue.MarshalMapWithOptions(it, func(o *attributevalue.EncoderOptions) { o.OmitEmptyTime = true })
}

// decode unmarshals item as an I and converts it with domain, or returns
// nil when there is no item:
//
//	inst, err := decode(out.Item, instanceItem.instance)
func decode[I, D any](item map[string]types.AttributeValue, domain func(I) (D, error)) (*D, error) {
	if len(item) == 0 {
		return nil, nil
	}
	var it I
	err := attributevalue.UnmarshalMap(item, &it)
	var v D
	if err == nil {
		v, err = domain(it)
	}
	if err != nil {
		return nil, fmt.Errorf("decode item %s/%s: %w", keyPart(item, attrPK), keyPart(item, attrSK), err)
	}
	return &v, nil
}

func keyPart(item map[string]types.AttributeValue, name string) string {
	if s, ok := item[name].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return "?"
}
