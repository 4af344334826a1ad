package broker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"
)

// InstanceState is where a service instance is in its life. Transitions
// happen only through the Store's conditional writes.
type InstanceState string

const (
	// InstanceProvisioning: a provision operation holds the instance. It is
	// not visible through GET until the provision succeeds.
	InstanceProvisioning InstanceState = "provisioning"
	// InstanceReady: provisioned and idle or serving binding operations.
	InstanceReady InstanceState = "ready"
	// InstanceUpdating: an update operation holds the instance.
	InstanceUpdating InstanceState = "updating"
	// InstanceDeprovisioning: a deprovision operation holds the instance.
	InstanceDeprovisioning InstanceState = "deprovisioning"
	// InstanceFailed: the provision failed, or a deprovision left the
	// instance unusable. Only a deprovision may follow.
	InstanceFailed InstanceState = "failed"
)

// BindingState is where a service binding is in its life.
type BindingState string

const (
	BindingCreating BindingState = "creating" // a bind operation holds the binding
	BindingReady    BindingState = "ready"    // created; credentials are available
	BindingDeleting BindingState = "deleting" // an unbind operation holds the binding
	BindingFailed   BindingState = "failed"   // the bind failed; only an unbind may follow
)

// OperationKind says what an operation changes.
type OperationKind string

const (
	KindProvision   OperationKind = "provision"
	KindUpdate      OperationKind = "update"
	KindDeprovision OperationKind = "deprovision"
	KindBind        OperationKind = "bind"
	KindUnbind      OperationKind = "unbind"
)

// IsBinding reports whether the operation changes a binding.
func (k OperationKind) IsBinding() bool { return k == KindBind || k == KindUnbind }

// OperationState is the state of an operation, spelled as OSB's
// last_operation reports it.
type OperationState string

const (
	OperationInProgress OperationState = "in progress"
	OperationSucceeded  OperationState = "succeeded"
	OperationFailed     OperationState = "failed"
)

// Retention is how long finished operations are kept for last_operation.
const Retention = 7 * 24 * time.Hour

// MaintenanceInfo is OSB's maintenance_info object.
type MaintenanceInfo struct {
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
}

// InstanceMetadata is OSB's service instance metadata object.
type InstanceMetadata struct {
	Labels     map[string]any `json:"labels,omitempty"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

// InstanceRequest is what a provision request says of an instance, and
// what the instance keeps of it: ProvisionDetails and Instance both embed
// it, so that a field added here goes from the request to the instance
// with no copying. Such a field then needs its place in the api's request
// body (and the answer's, if GET returns it), in each store's storage type,
// and a decision in the fingerprint (Instance.requestFingerprint, or
// fingerprint_test.go's list of fields left out); the contract test in
// internal/api names each place still missing.
type InstanceRequest struct {
	ServiceID        string           `json:"service_id"`
	PlanID           string           `json:"plan_id"`
	OrganizationGUID string           `json:"organization_guid,omitempty"`
	SpaceGUID        string           `json:"space_guid,omitempty"`
	Parameters       json.RawMessage  `json:"parameters,omitempty"`
	Context          json.RawMessage  `json:"context,omitempty"`
	MaintenanceInfo  *MaintenanceInfo `json:"maintenance_info,omitempty"`
}

// Instance is a service instance. Item key: PK=i#<ID>, SK=instance.
type Instance struct {
	ID string `json:"id"`
	// InstanceRequest is what the provision request said of the instance,
	// as updates have changed it since.
	InstanceRequest
	// PlanDigest is the digest of the plan's templates and fixed
	// parameters that the instance runs (PlanVersion), with its
	// maintenance_info version: an update that keeps both keeps the
	// instance on the template it runs. Empty for a plan whose driver has
	// no such digest, and for instances made before the broker kept it.
	PlanDigest   string           `json:"plan_digest,omitempty"`
	DashboardURL string           `json:"dashboard_url,omitempty"`
	Metadata     InstanceMetadata `json:"metadata"`
	State        InstanceState    `json:"state"`
	// Op is the id of the operation that holds the instance; empty when idle.
	Op string `json:"op,omitempty"`
	// LastOp is the id of the newest instance operation.
	LastOp string `json:"last_op,omitempty"`
	// BindingOps counts the binding operations in progress; an update or
	// deprovision may start only when it is zero.
	BindingOps int `json:"binding_ops"`
	// Fingerprint identifies the provision request, to tell a re-sent
	// request (200/202) from a different one (409).
	Fingerprint string    `json:"fingerprint"`
	Version     int64     `json:"version"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// Credentials are a binding's credentials. They never reach a log line.
type Credentials map[string]any

// String redacts the credentials for fmt.
func (Credentials) String() string { return "[REDACTED]" }

// LogValue redacts the credentials for log/slog.
func (Credentials) LogValue() slog.Value { return slog.StringValue("[REDACTED]") }

// Endpoint is OSB's endpoint object of a binding.
type Endpoint struct {
	Host     string   `json:"host"`
	Ports    []string `json:"ports"`
	Protocol string   `json:"protocol,omitempty"`
}

// BindingRequest is what a bind request says of a binding, and what the
// binding keeps of it: BindDetails and Binding both embed it, so that a
// field added here goes from the request to the binding with no copying.
// Such a field then needs its place in the api's request body (and the
// answer's, if GET returns it), in each store's storage type, and a
// decision in the fingerprint (Binding.requestFingerprint, or
// fingerprint_test.go's list of fields left out); the contract test in
// internal/api names each place still missing.
type BindingRequest struct {
	ServiceID    string          `json:"service_id"`
	PlanID       string          `json:"plan_id"`
	AppGUID      string          `json:"app_guid,omitempty"`
	BindResource json.RawMessage `json:"bind_resource,omitempty"`
	Parameters   json.RawMessage `json:"parameters,omitempty"`
	Context      json.RawMessage `json:"context,omitempty"`
	// PredecessorID is the binding this one succeeds (binding rotation:
	// the request's predecessor_binding_id).
	PredecessorID string `json:"predecessor_id,omitempty"`
}

// Binding is a service binding. Item key: PK=i#<InstanceID>, SK=b#<ID>.
type Binding struct {
	InstanceID string `json:"instance_id"`
	ID         string `json:"id"`
	// BindingRequest is what the bind request said of the binding.
	BindingRequest
	State       BindingState `json:"state"`
	Credentials Credentials  `json:"credentials,omitempty"`
	Endpoints   []Endpoint   `json:"endpoints,omitempty"`
	// Sealed is the credentials as a sealing store keeps them (see
	// internal/sealing): set only inside such a store, which hands out
	// Credentials opened.
	Sealed json.RawMessage `json:"sealed,omitempty"`
	// ExpiresAt and RenewBefore, when the plan sets a credential lifetime,
	// say when the credentials stop being valid and when to rotate them.
	ExpiresAt   time.Time `json:"expires_at,omitzero"`
	RenewBefore time.Time `json:"renew_before,omitzero"`
	Op          string    `json:"op,omitempty"`
	LastOp      string    `json:"last_op,omitempty"`
	Fingerprint string    `json:"fingerprint"`
	Version     int64     `json:"version"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// Target is what an update asks for. A nil field keeps the current value.
type Target struct {
	PlanID          string           `json:"plan_id,omitempty"`
	Parameters      json.RawMessage  `json:"parameters,omitempty"`
	Context         json.RawMessage  `json:"context,omitempty"`
	MaintenanceInfo *MaintenanceInfo `json:"maintenance_info,omitempty"`
	// PlanDigest is the digest of the templates the update moves the
	// instance to (an upgrade or a plan change); empty: the instance stays
	// on those it runs. The broker sets it, not the request.
	PlanDigest string `json:"plan_digest,omitempty"`
}

// Operation is one provision, update, deprovision, bind or unbind. Item key:
// PK=i#<InstanceID>, SK=op#<ID>. Its ID is also the OSB "operation" string
// and the name of the workflow execution that runs it.
type Operation struct {
	ID         string         `json:"id"`
	InstanceID string         `json:"instance_id"`
	BindingID  string         `json:"binding_id,omitempty"`
	Kind       OperationKind  `json:"kind"`
	State      OperationState `json:"state"`
	// Description is shown to the user by last_operation.
	Description string `json:"description,omitempty"`
	// Detail is what the platform operator alone sees of a failure (`ops
	// operation`): the driver's full reason, or the workflow's error,
	// capped at MaxDetail and withheld when it repeats a request parameter,
	// as the log does. It is never served to the platform. It is not
	// sealed: it holds no credentials, and no parameter value.
	Detail      string `json:"detail,omitempty"`
	Fingerprint string `json:"fingerprint"`
	// Async is false for an operation completed within its request.
	Async bool `json:"async"`
	// PlanID is the instance's plan when the operation started:
	// last_operation after a plan change reports the pre-update plan.
	PlanID string  `json:"plan_id"`
	Target *Target `json:"target,omitempty"`
	// RetryAfter is the driver's estimate of when to look again.
	RetryAfter       time.Duration `json:"retry_after"`
	InstanceUsable   *bool         `json:"instance_usable,omitempty"`
	UpdateRepeatable *bool         `json:"update_repeatable,omitempty"`
	CreatedAt        time.Time     `json:"created_at"`
	UpdatedAt        time.Time     `json:"updated_at"`
	// NextCheckAt is when the workflow promised to report progress again;
	// a record still in progress long after it is repaired.
	NextCheckAt time.Time `json:"next_check_at"`
	FinishedAt  time.Time `json:"finished_at,omitzero"`
	// ExpiresAt is when a finished record may be dropped (DynamoDB TTL).
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// OutageSince is when the driver's backend stopped answering, while
	// the operation waits out that outage (outage.go); zero otherwise.
	// OutageAttempts counts the calls that failed since, and OutageInBegin
	// says the outage hit Begin, so the next Task begins again. They live
	// on the record that each Task writes anyway, so an outage costs no
	// extra write.
	OutageSince    time.Time `json:"outage_since,omitzero"`
	OutageAttempts int       `json:"outage_attempts,omitempty"`
	OutageInBegin  bool      `json:"outage_in_begin,omitempty"`
}

// InOutage reports whether the operation is waiting out an outage.
func (o Operation) InOutage() bool { return !o.OutageSince.IsZero() }

// Finished reports whether the operation reached a terminal state.
func (o Operation) Finished() bool { return o.State != OperationInProgress }

// LogAttrs identify the operation on a log line: operation_id, instance_id
// and, for a binding's operation, binding_id.
func (o Operation) LogAttrs() []slog.Attr {
	attrs := make([]slog.Attr, 2, 3) // room for the binding's: one allocation
	attrs[0], attrs[1] = slog.String("operation_id", o.ID), slog.String("instance_id", o.InstanceID)
	if o.BindingID != "" {
		attrs = append(attrs, slog.String("binding_id", o.BindingID))
	}
	return attrs
}

// Resource is a record a driver owns, such as the demo driver's fake
// database. Item key: PK=i#<InstanceID>, SK=r#<Name>.
type Resource struct {
	InstanceID string          `json:"instance_id"`
	Name       string          `json:"name"`
	Data       json.RawMessage `json:"data"`
	UpdatedAt  time.Time       `json:"updated_at"`
}

// DetachedState is where a detached resource is in its cleanup.
type DetachedState string

const (
	// DetachedPending: waiting for a cleanup execution (none running).
	DetachedPending DetachedState = "pending"
	// DetachedCleaning: a cleanup execution (named in Cleanup) runs.
	DetachedCleaning DetachedState = "cleaning"
	// DetachedFailed: the cleanup gave up; listed for an operator, who may
	// start it again.
	DetachedFailed DetachedState = "failed"
)

// Detached is a resource no longer attached to a live instance or binding:
// the leftover of a failed creation or update, or the resource of an
// instance deprovisioned in detach mode. The cleanup workflow deletes it;
// once deleted its record is removed. Item key: PK=detached, SK=<ID>.
type Detached struct {
	// ID is derived from the instance, resource name and operation, so that
	// detaching twice writes one record; cleanup executions are named
	// "<ID>-<attempt>".
	ID         string `json:"id"`
	InstanceID string `json:"instance_id"`
	// Name and Data are the resource record as the driver wrote it.
	Name string          `json:"name"`
	Data json.RawMessage `json:"data"`
	// PlanID chooses the driver that deletes it.
	PlanID      string        `json:"plan_id"`
	OperationID string        `json:"operation_id"`
	Reason      string        `json:"reason"`
	State       DetachedState `json:"state"`
	// Attempts counts the cleanup executions started.
	Attempts int    `json:"attempts"`
	Failure  string `json:"failure,omitempty"`
	// FailureDetail is the operator's detail of Failure, as
	// Operation.Detail is of an operation's description.
	FailureDetail string    `json:"failure_detail,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
	// OutageSince is when the driver's backend stopped answering the
	// cleanup, while the cleanup waits out that outage (outage.go); zero
	// otherwise. OutageAttempts counts the calls that failed since,
	// OutageReason says why in words fit for users (TransientReason), and
	// NextTryAt is when the workflow calls again. The Delete Task writes
	// them, and clears them once the backend answers.
	OutageSince    time.Time `json:"outage_since,omitzero"`
	OutageAttempts int       `json:"outage_attempts,omitempty"`
	OutageReason   string    `json:"outage_reason,omitempty"`
	NextTryAt      time.Time `json:"next_try_at,omitzero"`
}

// InOutage reports whether the cleanup is waiting out an outage.
func (d Detached) InOutage() bool { return !d.OutageSince.IsZero() }

// withoutOutage is d with no outage: its backend answered, or the cleanup
// that waited it out ended.
func (d Detached) withoutOutage() Detached {
	d.OutageSince, d.OutageAttempts, d.OutageReason, d.NextTryAt = time.Time{}, 0, "", time.Time{}
	return d
}

// CleanupName is the name of the cleanup execution for attempt n.
func (d Detached) CleanupName(n int) string { return fmt.Sprintf("%s-%d", d.ID, n) }

// DetachedID derives a detached resource's id: "d" and 32 hex digits, fit
// for an execution name.
func DetachedID(instanceID, name, operationID string) string {
	h := sha256.Sum256([]byte(instanceID + "\x00" + name + "\x00" + operationID))
	return "d" + hex.EncodeToString(h[:16])
}
