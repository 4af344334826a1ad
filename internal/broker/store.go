package broker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The Store port, split by caller: Repository (the broker's), Resources
// (the drivers'), DetachedRecords (the cleanup's), SecretStore and
// SealingModes (re-sealing's); the write requests its methods take, and the
// errors they return.

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
	// zero, the whole write fails with *ConflictError (with the Instance),
	// in every store (a DynamoDB transaction cannot skip one of its
	// writes). A binding operation in progress always counts one, so a
	// caller following the port never meets this. It is not combined with Instance or
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

// Snapshot is what Load reads: an instance, one binding, the resource
// records of the one and the other, and one of its operations; a whole
// snapshot (LoadWhole) also has the ids of every binding and every record.
type Snapshot struct {
	// Instance is nil when the instance does not exist.
	Instance *Instance
	// Operation is nil when none was asked for or it does not exist.
	Operation *Operation
	// Binding is the binding asked for or, when none was, the operation's
	// (a bind's or an unbind's); nil when there is none.
	Binding *Binding
	// BindingIDs are the ids of all the instance's bindings, in order, in
	// a whole snapshot only (nil otherwise).
	BindingIDs []string
	// Records are resource records, by name: the instance's own and, with
	// a binding, that binding's (RecordFor); in a whole snapshot, every
	// record under the instance.
	Records []Resource
}

// Whole reports whether a snapshot whose operation is op is whole: a
// deprovision's, which deletes every binding and hands every record to
// its driver.
func Whole(op *Operation) bool { return op != nil && op.Kind == KindDeprovision }

// Store is what a storage adapter provides: five ports, each for the
// callers that need it, and each component holds only those it uses (the
// Broker Repository and DetachedRecords, the drivers Resources, the
// sealing store's re-seal SecretStore and SealingModes). Every method that changes state is ONE conditional
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
	SecretStore
	SealingModes
	// Campaigns are the fleet upgrades; they hold no secret, so a
	// decorator passes them through.
	Campaigns
}

// Repository is the broker's port: instances, bindings and the operations
// that change them.
type Repository interface {
	GetInstance(ctx context.Context, instanceID string) (Instance, error)
	GetBinding(ctx context.Context, instanceID, bindingID string) (Binding, error)
	GetOperation(ctx context.Context, instanceID, operationID string) (Operation, error)
	// Load reads the instance and, when their ids are not empty, an
	// operation and a binding (else the operation's binding), and the
	// records RecordFor keeps: each by its key or a key range, so that its
	// cost does not grow with the instance's bindings and operations. A
	// missing item is a nil field, not an error. When the operation is a
	// deprovision (Whole), the snapshot is whole, as LoadWhole's.
	Load(ctx context.Context, instanceID, operationID, bindingID string) (Snapshot, error)
	// LoadWhole reads what Load does without a binding, and the ids of
	// every binding of the instance and every record under it, its
	// bindings' too: what a deprovision deletes. Its cost grows with the
	// instance's bindings (never with its operations).
	LoadWhole(ctx context.Context, instanceID, operationID string) (Snapshot, error)
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

// SecretStore is re-sealing's port (sealing.Store.Reseal):
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

// SealingModes is where a store keeps its SealingMode: the sealing store's
// port, which reads it when it meets a value in clear.
type SealingModes interface {
	// SealingMode returns the recorded mode, the zero one if none is.
	SealingMode(ctx context.Context) (SealingMode, error)
	// SetSealingMode records m.
	SetSealingMode(ctx context.Context, m SealingMode) error
}
