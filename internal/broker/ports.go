package broker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/serverless-osb/broker/internal/catalog"
)

// ErrNotFound is returned by a Store when an item does not exist.
var ErrNotFound = errors.New("not found")

// ConflictError is returned by a Store when a conditional write fails. It
// carries the items as they were stored when the condition failed (what
// DynamoDB returns with ReturnValuesOnConditionCheckFailure=ALL_OLD), so the
// broker can tell 200 / 202 / 409 / 422 apart without a second read. It
// carries EVERY item named in the method's condition as stored when the
// condition failed, not only the item whose check failed; a nil field means
// that item does not exist. A missing operation in UpdateOperation or
// FinishOperation gives Operation == nil.
type ConflictError struct {
	Instance  *Instance
	Binding   *Binding
	Operation *Operation
}

func (e *ConflictError) Error() string {
	switch {
	case e.Operation != nil:
		return fmt.Sprintf("conflict: operation %s is %s", e.Operation.ID, e.Operation.State)
	case e.Binding != nil:
		return fmt.Sprintf("conflict: binding %s is %s (op %q)", e.Binding.ID, e.Binding.State, e.Binding.Op)
	case e.Instance != nil:
		return fmt.Sprintf("conflict: instance %s is %s (op %q, binding ops %d, version %d)",
			e.Instance.ID, e.Instance.State, e.Instance.Op, e.Instance.BindingOps, e.Instance.Version)
	}
	return "conflict"
}

// LockInstance asks to start an update or deprovision.
type LockInstance struct {
	// Instance is the new value to store: Op and State set, Version already
	// incremented.
	Instance Instance
	// Version is the stored version the write expects (optimistic lock).
	Version int64
	// Holder is the operation expected to hold the instance now: empty for an
	// idle instance, or a provision that a deprovision halts.
	Holder string
	// Op is the new operation record.
	Op Operation
	// Halted, when set, is the holder's operation record, finished (failed),
	// written in the same transaction.
	Halted *Operation
}

// LockBinding asks to start an unbind. Its fields mean what LockInstance's do.
type LockBinding struct {
	Binding Binding
	Version int64
	Holder  string
	Op      Operation
	Halted  *Operation
}

// Finish records the outcome of an operation and releases what it held, in
// one transaction conditional on the operation still being in progress and
// still holding its instance or binding (Finish.Conditions).
type Finish struct {
	// Op is the finished operation record (State succeeded or failed).
	Op Operation
	// Instance, when set, is stored (condition: it is held by Op).
	Instance *Instance
	// DeleteInstance removes the instance and Bindings (condition: held by
	// Op). Operation records stay (they expire); resource records stay
	// unless Records removes them.
	DeleteInstance bool
	// Bindings are the ids of the instance's bindings, for DeleteInstance:
	// as the operation loaded them while it held the instance, so that no
	// binding could be added or removed since.
	Bindings []string
	// Binding, when set, is stored (condition: it is held by Op).
	Binding *Binding
	// DeleteBinding removes the binding (condition: held by Op).
	DeleteBinding bool
	// ReleaseBinding decrements the instance's BindingOps, never below zero
	// (ReleaseConditions): when the instance is missing or its count is
	// zero, a Store either skips the release or fails the whole write with
	// *ConflictError (with the Instance); DynamoDB, which cannot skip one
	// write of a transaction, fails. A binding operation in progress always
	// counts one, so a caller
	// following the port meets neither. It is not combined with Instance or
	// DeleteInstance: an operation holds either its instance or one binding
	// (Op.BindingID).
	ReleaseBinding bool
	// Records are the driver's record changes, written with the outcome.
	Records RecordChanges
	// Detach moves resource records into detached records for the cleanup
	// workflow: each record (InstanceID, Name) is deleted and the detached
	// record stored.
	Detach []Detached
}

// Settled is what a synchronous change that the broker made in memory,
// before any hold (see InMemory), adds to the write that creates its
// instance or binding: that write is then the change's only one.
type Settled struct {
	// Records are the driver's record changes.
	Records RecordChanges
	// InstanceVersion, for a binding, is the version of the instance the
	// change was computed from.
	InstanceVersion int64
}

// RecordChanges are changes to a driver's resource records that the broker
// writes in the same transaction as the operation's progress or outcome,
// so that the records and the operation never disagree.
type RecordChanges struct {
	// Save stores each record (unconditionally).
	Save []Resource
	// Remove deletes the records of these names under the operation's
	// instance; a missing one is not an error.
	Remove []string
}

// Empty reports whether there is no change.
func (r RecordChanges) Empty() bool { return len(r.Save) == 0 && len(r.Remove) == 0 }

// Merge returns r followed by later: a later change to a name wins.
func (r RecordChanges) Merge(later RecordChanges) RecordChanges {
	touched := map[string]bool{}
	for _, s := range later.Save {
		touched[s.Name] = true
	}
	for _, n := range later.Remove {
		touched[n] = true
	}
	var out RecordChanges
	for _, s := range r.Save {
		if !touched[s.Name] {
			out.Save = append(out.Save, s)
		}
	}
	for _, n := range r.Remove {
		if !touched[n] {
			out.Remove = append(out.Remove, n)
		}
	}
	out.Save = append(out.Save, later.Save...)
	out.Remove = append(out.Remove, later.Remove...)
	return out
}

// Snapshot is what Load reads in one request: an instance, the ids of its
// bindings, one binding, its resource records, and one of its operations.
type Snapshot struct {
	// Instance is nil when the instance does not exist.
	Instance *Instance
	// Operation is nil when none was asked for or it does not exist.
	Operation *Operation
	// Binding is the binding asked for or, when none was, the operation's
	// (a bind's or an unbind's); nil when there is none.
	Binding *Binding
	// BindingIDs are the ids of all the instance's bindings, in order.
	BindingIDs []string
	// Records are the instance's resource records, by name; with a
	// binding, only that binding's (see BindingRecord).
	Records []Resource
}

// bindingRecordPrefix starts the name of every binding's record.
const bindingRecordPrefix = "binding-"

// BindingRecord is the name of the resource record a driver keeps for a
// binding. A binding's change is handed that record and the instance's
// records, not the other bindings' (Load decodes only those), so that a bind
// costs the same on an instance with many bindings; a driver therefore
// names no instance record with this prefix.
func BindingRecord(bindingID string) string { return bindingRecordPrefix + bindingID }

// RecordFor reports whether the record called name belongs in a snapshot
// for bindingID (empty: the instance, which gets every record).
func RecordFor(name, bindingID string) bool {
	return bindingID == "" || !strings.HasPrefix(name, bindingRecordPrefix) || name == BindingRecord(bindingID)
}

// Store is what a storage adapter provides: three ports, each for the
// callers that need it. Every method that changes state is ONE conditional
// write or ONE transaction; when its condition fails it returns
// *ConflictError and changes nothing. Both halves of what must hold are
// said once, here, not in the adapters: the checks of a call's arguments
// (guards.go: CheckCreate, LockInstance.Check, ...), which a Store runs
// before it writes anything, and the conditions on the stored items
// (conditions.go: CreateInstanceConditions, LockInstance.Conditions, ...),
// data that an adapter translates in one function into its database's
// conditional writes and that name the items its *ConflictError carries.
// The storetest package is the contract every Store must pass; a new
// adapter implements these methods, translates the ConditionKinds, and
// passes it.
type Store interface {
	Repository
	Resources
	DetachedRecords
}

// Repository is the broker's port: instances, bindings and the operations
// that change them.
type Repository interface {
	GetInstance(ctx context.Context, instanceID string) (Instance, error)
	GetBinding(ctx context.Context, instanceID, bindingID string) (Binding, error)
	GetOperation(ctx context.Context, instanceID, operationID string) (Operation, error)
	// Load reads, in one consistent request, the instance, the ids of its
	// bindings, its resource records, and, when their ids are not empty,
	// an operation and a binding (else the operation's binding). A missing
	// item is a nil field, not an error. With a binding, the records are
	// those RecordFor keeps. It decodes only the one binding and its
	// records, so that its cost hardly grows with an instance's bindings.
	Load(ctx context.Context, instanceID, operationID, bindingID string) (Snapshot, error)
	// ListOperations returns the operations recorded under an instance
	// (including those of its bindings), oldest first.
	ListOperations(ctx context.Context, instanceID string) ([]Operation, error)
	// ListInProgress returns every operation still in progress (in no
	// particular order), for repairs after a restart.
	ListInProgress(ctx context.Context) ([]Operation, error)
	// ListInstances returns one page of the instances that f selects, in
	// the store's own order, and the token of the next page: page "" asks
	// for the first, and a returned "" says there is no more. A page holds
	// at most InstancePageSize instances (a last page may hold none). It
	// is for operators (ops instances, the fleet upgrade), not for a
	// request's path: a store may read its whole table to answer it. The
	// instances carry neither Parameters nor Fingerprint, which may hold a
	// request's secrets (GetInstance reads them); an instance created or
	// deleted while the pages are read may be listed or not.
	ListInstances(ctx context.Context, f InstanceFilter, page string) ([]Instance, string, error)

	// CreateInstance stores a new instance held by its provision operation;
	// with settled, the instance as a change done in memory left it, its
	// finished operation and the driver's records. Conditions:
	// CreateInstanceConditions (no instance with that id).
	CreateInstance(ctx context.Context, inst Instance, op Operation, settled *Settled) error
	// LockInstance starts an update or deprovision. Conditions:
	// l.Conditions() (the instance exists at the expected Version, is held
	// by Holder, and has no binding operations in progress).
	LockInstance(ctx context.Context, l LockInstance) error
	// CreateBinding stores a new binding held by its bind operation and
	// increments the instance's BindingOps; with settled, the binding as a
	// change done in memory left it, its finished operation and the driver's
	// records, and the count stays. Either way the instance's Version moves.
	// Conditions: CreateBindingConditions(b, settled) (the instance exists,
	// is ready, not held and of b's service and plan, and, settled, at
	// settled.InstanceVersion; no binding with that id).
	CreateBinding(ctx context.Context, b Binding, op Operation, settled *Settled) error
	// LockBinding starts an unbind. Conditions: l.Conditions() (the binding
	// exists at the expected Version and is held by Holder; its instance
	// exists and is not held). When Holder is empty the instance's
	// BindingOps is incremented.
	LockBinding(ctx context.Context, l LockBinding) error
	// UpdateOperation records progress of an operation, and the driver's
	// record changes with it. Conditions: UpdateOperationConditions (the
	// stored operation is in progress).
	UpdateOperation(ctx context.Context, op Operation, records RecordChanges) error
	// FinishOperation records an outcome; see Finish. Conditions:
	// f.Conditions(), and f.ReleaseConditions() for the release.
	FinishOperation(ctx context.Context, f Finish) error

	// DeleteExpiredOperations removes finished operation records whose
	// ExpiresAt is before now and returns how many it removed. A store
	// whose database expires them by itself (DynamoDB TTL) may remove none.
	DeleteExpiredOperations(ctx context.Context, now time.Time) (int, error)
}

// InstanceFilter selects the instances ListInstances lists: those of the
// offering ServiceID and of the plan PlanID; an empty field selects all.
type InstanceFilter struct {
	ServiceID, PlanID string
}

// Selects reports whether f selects inst.
func (f InstanceFilter) Selects(inst Instance) bool {
	return (f.ServiceID == "" || inst.ServiceID == f.ServiceID) && (f.PlanID == "" || inst.PlanID == f.PlanID)
}

// InstancePageSize is the most instances one page of ListInstances holds.
const InstancePageSize = 100

// ErrBadPage is returned, wrapped, by ListInstances for a page token that
// no page of it returned.
var ErrBadPage = errors.New("not a page token of the instance listing")

// InstancePageToken is the token of the page after the instance id: both
// stores list in an order where the last instance of a page says where
// the next one starts.
func InstancePageToken(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

// InstancePageAfter is the id of the last instance before page, "" for the
// first page.
func InstancePageAfter(page string) (string, error) {
	if page == "" {
		return "", nil
	}
	id, err := base64.RawURLEncoding.DecodeString(page)
	if err != nil || len(id) == 0 || CheckID(string(id)) != nil {
		return "", fmt.Errorf("%w: %q", ErrBadPage, page)
	}
	return string(id), nil
}

// Resources is the drivers' port: their own records, under the instance
// they belong to. A driver is handed this, never the Store: it cannot touch
// instances, bindings or operations. It reads its records from
// Change.Records and returns most changes in Progress.Records; it writes
// here only a record that must be durable before it acts on the world (the
// name of a stack it is about to create), and deletes one it no longer
// needs.
type Resources interface {
	// PutResource writes unconditionally (drivers make their own changes
	// idempotent).
	PutResource(ctx context.Context, r Resource) error
	// DeleteResource removes a record; a missing one is not an error.
	DeleteResource(ctx context.Context, instanceID, name string) error
}

// DetachedRecords is the cleanup's port: the resources that failed or
// deleted operations left behind (Finish.Detach stores them), each deleted
// by a cleanup workflow.
type DetachedRecords interface {
	GetDetached(ctx context.Context, id string) (Detached, error)
	// ListDetached returns every detached resource, oldest first.
	ListDetached(ctx context.Context) ([]Detached, error)
	// UpdateDetached stores d. Conditions: UpdateDetachedConditions
	// (the stored record has Attempts == attempts, so two reapers cannot
	// both start a cleanup); else *ConflictError with no fields set, or
	// ErrNotFound when missing.
	UpdateDetached(ctx context.Context, d Detached, attempts int) error
	// DeleteDetached removes a detached record once its resource is
	// deleted; a missing one is not an error.
	DeleteDetached(ctx context.Context, id string) error
}

// SecretKind says where a stored secret is.
type SecretKind string

// The kinds of stored secrets.
const (
	// SecretCredentials are a binding's credentials (Binding.Sealed, or,
	// stored before sealing, Binding.Credentials).
	SecretCredentials SecretKind = "credentials"
	// SecretRecord is a driver's record's data (Resource.Data).
	SecretRecord SecretKind = "record"
	// SecretDetached is a detached record's data (Detached.Data).
	SecretDetached SecretKind = "detached"
	// SecretParameters are the request parameters of an item (Of says
	// which): an instance's or a binding's Parameters, an update's
	// Target.Parameters.
	SecretParameters SecretKind = "parameters"
	// SecretFingerprint is the request fingerprint of an item (Of says
	// which), which hashes the parameters.
	SecretFingerprint SecretKind = "fingerprint"
)

// SecretItem says which item holds parameters or a fingerprint.
type SecretItem string

// The items that hold parameters and fingerprints.
const (
	SecretOfInstance  SecretItem = "instance"
	SecretOfBinding   SecretItem = "binding"
	SecretOfOperation SecretItem = "operation"
)

// StoredSecret is one stored value that may hold a secret, as stored.
type StoredSecret struct {
	Kind       SecretKind
	InstanceID string
	// Name is the binding's id, the record's name, or the detached
	// record's name (its ID is DetachedID); for parameters and
	// fingerprints, the binding's or the operation's id (none for the
	// instance's).
	Name       string
	DetachedID string
	// Of is the item whose parameters or fingerprint this is, and PlanID
	// the plan they are for (an update's: the plan it moves to).
	Of     SecretItem
	PlanID string
	// Value is the value as stored: for credentials, Binding.Sealed or,
	// when that is empty, the credentials' JSON (Plain); for a
	// fingerprint, its text.
	Value json.RawMessage
	// Plain says that Value is credentials stored before sealing.
	Plain bool
}

// ErrSecretChanged is returned by ReplaceSecret when the stored value is no
// longer the one read.
var ErrSecretChanged = errors.New("the stored value changed since it was read")

// SecretStore is what re-sealing needs of a store (both stores have it):
// every stored value that may hold a secret, and a write of one that holds
// only if the value is unchanged, so that re-sealing never overwrites a
// newer write, and a crash part way leaves every value readable.
type SecretStore interface {
	// StoredSecrets calls fn with each value that may hold a secret.
	StoredSecrets(ctx context.Context, fn func(StoredSecret) error) error
	// ReplaceSecret stores sealed in place of s.Value (for credentials
	// stored plain: as Binding.Sealed, the plain credentials removed)
	// while the item holds s.Value still, whatever else of it moved
	// since it was listed (an unbind's hold, a cleanup's attempts): that
	// newer state is kept, never written back as read. A value changed
	// or gone since (a record written anew, a binding deleted) returns
	// ErrSecretChanged and is left as it is.
	ReplaceSecret(ctx context.Context, s StoredSecret, sealed json.RawMessage) error
}

// SealingMode is what a store records of its sealing, in one item outside
// every instance's (PK=broker, SK=sealing). The zero value is what a store
// never told otherwise reads: values stored in clear are still accepted.
type SealingMode struct {
	// SealedOnly: a re-seal pass sealed every stored secret, so a value
	// that should be sealed and is found in clear was written to the store
	// behind the broker's back: reading it fails.
	SealedOnly bool
	// KeyID is the key that the pass sealed under, and Since when it ended.
	KeyID string
	Since time.Time
	// SensitivePlans are the plans whose parameters (and fingerprints)
	// the pass sealed: only theirs are refused in clear, so that marking
	// another plan sensitive refuses nothing until the next pass.
	SensitivePlans []string
}

// SealingModes is where a store keeps its SealingMode (both stores have it).
type SealingModes interface {
	// SealingMode returns the recorded mode, the zero one if none is.
	SealingMode(ctx context.Context) (SealingMode, error)
	// SetSealingMode records m.
	SetSealingMode(ctx context.Context, m SealingMode) error
}

// Workflow names a state machine in statemachines/ (without .asl.json).
type Workflow string

// The workflows.
const (
	// WorkflowOperation runs every provision, update, deprovision, bind and unbind.
	WorkflowOperation Workflow = "operation"
	// WorkflowCleanup deletes one detached resource, with retries over hours.
	WorkflowCleanup Workflow = "cleanup"
)

// ExecutionStatus is the status of a workflow execution, spelled as Step
// Functions does.
type ExecutionStatus string

const (
	ExecutionRunning   ExecutionStatus = "RUNNING"
	ExecutionSucceeded ExecutionStatus = "SUCCEEDED"
	ExecutionFailed    ExecutionStatus = "FAILED"
	ExecutionTimedOut  ExecutionStatus = "TIMED_OUT"
	ExecutionAborted   ExecutionStatus = "ABORTED"
)

// Execution is what an Engine reports about one execution.
type Execution struct {
	Name      string
	Workflow  Workflow
	Status    ExecutionStatus
	Input     json.RawMessage
	Output    json.RawMessage
	Error     string // for FAILED, TIMED_OUT, ABORTED
	Cause     string
	StartedAt time.Time
	StoppedAt time.Time
}

// ErrExecutionNotFound is returned by Describe for an unknown execution.
var ErrExecutionNotFound = errors.New("execution not found")

// ErrExecutionExists is returned by Start when an execution with that name
// exists with a different input.
var ErrExecutionExists = errors.New("execution already exists with a different input")

// Engine runs the workflows of statemachines/. Names are unique: starting a
// name again with the same input returns the existing execution (nil error),
// so a lost start can be retried safely.
type Engine interface {
	Start(ctx context.Context, workflow Workflow, name string, input json.RawMessage) error
	Describe(ctx context.Context, name string) (Execution, error)
	// Stop aborts a running execution; stopping one that has ended is not an error.
	Stop(ctx context.Context, name, cause string) error
}

// Change is what a driver is asked to do: the operation and the items it
// concerns, as stored when the step runs, and the plan it runs under.
type Change struct {
	Operation Operation
	Instance  Instance
	// Binding is set for bind and unbind.
	Binding *Binding
	// Plan is the plan the change runs under: the instance's plan, or for
	// an update that changes plan, the new one (Instance.PlanID is then
	// still the old one).
	Plan *catalog.Plan
	// Service is Plan's offering.
	Service *catalog.Service
	// Settings are Plan's driver settings, as the driver's kind parsed them
	// from the catalog when the broker started.
	Settings any
	// Records are the driver's resource records under the instance, as
	// they are when the step runs (with the changes of earlier steps of the
	// same request applied). A driver reads them here rather than from the
	// store.
	Records []Resource
}

// WithRecords returns c with the record changes applied to its Records, as
// a driver's next call must see them.
func (c Change) WithRecords(changes RecordChanges) Change {
	if changes.Empty() {
		return c
	}
	gone := map[string]bool{}
	for _, n := range changes.Remove {
		gone[n] = true
	}
	for _, s := range changes.Save {
		gone[s.Name] = true
	}
	var records []Resource
	for _, r := range c.Records {
		if !gone[r.Name] {
			records = append(records, r)
		}
	}
	c.Records = append(records, changes.Save...)
	return c
}

// BindingID is the id of the binding the change concerns, or "".
func (c Change) BindingID() string {
	if c.Binding != nil {
		return c.Binding.ID
	}
	return c.Operation.BindingID
}

// MadeRecords names the record of what a provision or bind makes, for a
// driver whose Leftovers are just that: instanceRecord (the driver's name
// for an instance's record) for a provision, the binding's BindingRecord
// for a bind, none for the other kinds (an update leaves its resource with
// the instance; a deprovision or unbind leaves it attached).
func (c Change) MadeRecords(instanceRecord string) []string {
	switch c.Operation.Kind {
	case KindProvision:
		return []string{instanceRecord}
	case KindBind:
		return []string{BindingRecord(c.BindingID())}
	}
	return nil
}

// Record returns the resource record called name, if the change has it.
func (c Change) Record(name string) (Resource, bool) {
	for _, r := range c.Records {
		if r.Name == name {
			return r, true
		}
	}
	return Resource{}, false
}

// DecodeRecord decodes the data of the change's record called name into v,
// the driver's own type for it; found is false, and v untouched, when the
// change has no such record.
func (c Change) DecodeRecord(name string, v any) (found bool, err error) {
	r, ok := c.Record(name)
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(r.Data, v); err != nil {
		return false, fmt.Errorf("decode record %s of %s: %w", name, c.Instance.ID, err)
	}
	return true, nil
}

// NewRecord is the resource record (instanceID, name) holding v, encoded as
// JSON, as of at: what a driver saves in Progress.Records or writes itself
// with PutRecord.
func NewRecord(instanceID, name string, v any, at time.Time) (Resource, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return Resource{}, fmt.Errorf("encode record %s of %s: %w", name, instanceID, err)
	}
	return Resource{InstanceID: instanceID, Name: name, Data: data, UpdatedAt: at}, nil
}

// PutRecord writes the record NewRecord makes through r at once: for a
// record that must be durable before the driver acts on the world.
func PutRecord(ctx context.Context, r Resources, instanceID, name string, v any, at time.Time) error {
	rec, err := NewRecord(instanceID, name, v, at)
	if err != nil {
		return err
	}
	if err := r.PutResource(ctx, rec); err != nil {
		return fmt.Errorf("write record %s of %s: %w", name, instanceID, err)
	}
	return nil
}

// Progress is a driver's answer about a change.
type Progress struct {
	Done bool
	// RetryAfter is when to check again, while not Done.
	RetryAfter time.Duration
	// Description says how far the change is, while not Done (for example
	// "Creating: 3 of 5 resources done."). It is shown to the user by
	// last_operation, so it never holds credentials; empty keeps the
	// broker's generic description.
	Description string
	// Results, when Done. Metadata, when set, replaces the instance's
	// (a provision's or an update's: labels and attributes the platform shows).
	DashboardURL string
	Metadata     *InstanceMetadata
	Credentials  Credentials
	Endpoints    []Endpoint
	// Records are changes to the driver's records that the broker writes
	// with the step's own write (the operation's progress or its outcome),
	// so that a record never disagrees with its operation. A driver whose
	// record must be durable BEFORE it acts on the world (the name of a
	// stack it is about to create) writes it itself, through Resources.
	Records RecordChanges
}

// Drivers gives the driver of a plan and the plan's settings for it
// (drivers.Set is the one the broker builds from its catalog).
type Drivers interface {
	For(plan *catalog.Plan) (driver Driver, settings any, ok bool)
}

// AcceptedParameters is implemented by the settings of a plan whose driver
// passes on only the parameters it names for each kind of request (the
// CloudFormation driver's: the properties of the plan's schemas). The
// broker refuses, with 400 and before anything is written, a request whose
// parameters name any other, rather than let the driver drop it or fail
// the operation later.
type AcceptedParameters interface {
	AcceptedParameters(kind catalog.SchemaKind) []string
}

// Versioned is implemented by the settings of a plan whose driver deploys
// what the catalog ships (the CloudFormation driver's templates and fixed
// parameters): PlanDigest identifies it. With the plan's maintenance_info
// version it is the version of the plan an instance runs
// (Instance.PlanDigest); the catalog's lock file (internal/drivers) holds
// a plan's digest to its version.
type Versioned interface {
	PlanDigest() string
}

// InMemory is implemented by a driver whose changes live only in the
// records it hands back (Progress.Records): its Begin touches nothing
// outside the broker, so it may run before the broker takes a hold, and a
// change that is not kept (a race lost, a crash) leaves nothing behind. A
// synchronous provision or bind of such a driver that is done at once is
// then one write (CreateInstance or CreateBinding with Settled).
type InMemory interface {
	InMemory() bool
}

// Driver creates, changes and deletes the real resource behind instances and
// bindings. Every method must be idempotent: a step may run again after a
// crash or a lost answer. A permanent failure is returned as *Failure (its
// description is shown to the user); any other error is transient and the
// step is retried, with backoff, by the workflow's Retry (or, for a change
// that completes within its request, a few times in the request).
//
// The broker runs every change the same way, asynchronous or not: Begin,
// then Check after RetryAfter until Done. For an operation that is not
// Async the whole loop runs within the platform's request (which platforms
// time out after about a minute), so a plan whose changes take longer must
// be async or async-only.
type Driver interface {
	// Leftovers names the resource records that a failure of c leaves
	// behind and that must be detached for cleanup: a provision's or bind's
	// half-made resource, an update's partial change. A deprovision or
	// unbind leaves none: its resource stays attached.
	Leftovers(ctx context.Context, c Change) ([]string, error)
	// Cleanup deletes a detached resource: Done once it is gone.
	Cleanup(ctx context.Context, d Detached) (Progress, error)

	// Begin starts the change.
	Begin(ctx context.Context, c Change) (Progress, error)
	// Check reports progress of a change begun earlier; once Done it returns
	// the results again each time it is called.
	Check(ctx context.Context, c Change) (Progress, error)
}
