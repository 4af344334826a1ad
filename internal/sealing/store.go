package sealing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/env"
	"github.com/serverless-osb/broker/internal/jsonenc"
)

// Store seals what a broker.Store keeps that may be secret, before it
// reaches the wrapped store, and opens it on the way out: a binding's
// credentials (kept sealed in Binding.Sealed) and the drivers' records
// (Resource.Data and Detached.Data, replaced by the sealed envelope). Each
// value is bound to its item (the instance and binding, or the instance and
// record name), so that a value copied to another item fails to open with
// ErrWrongContext rather than give its secret to the wrong one.
//
// Values stored before sealing was on are read as they are, until `ops
// reseal` has sealed them all and recorded so in the store
// (broker.SealingMode.SealedOnly): from then on a value found in clear was
// written behind the broker's back, and reading it fails with
// ErrStoredInClear. The mode is read only when a value in clear turns up,
// so reading sealed values costs no request; a mode that refuses nothing
// is read again after ModeMaxAge, one that refuses is kept.
// Every other method passes through.
type Store struct {
	broker.Store
	Sealer Sealer
	// ModeMaxAge is how long a mode that accepts values in clear is
	// trusted before it is read again; zero means DefaultModeMaxAge.
	ModeMaxAge time.Duration
	// Now tells the time; nil means time.Now.
	Now func() time.Time
	// SensitivePlans are the plans whose request parameters may hold
	// secrets (the catalog's sensitive_parameters): those, and the
	// request fingerprints that hash them, are stored sealed too; Reseal
	// records them in the sealing mode.
	SensitivePlans []string
	// SealedOnly refuses every value in clear from the start, whatever
	// the store's mode says (env.SealedOnly, set by the deployment once
	// `ops reseal` has sealed everything): anyone who can write the
	// table can delete the mode item, and a new process would then
	// accept values in clear again; the function's environment they
	// cannot change. A plan's parameters and fingerprints are refused
	// for the plans in SensitivePlans and those the mode records.
	SealedOnly bool

	mu         sync.Mutex
	mode       broker.SealingMode
	modeReadAt time.Time
}

var _ broker.Store = (*Store)(nil)

// DefaultModeMaxAge bounds how long a broker still accepts a value in
// clear after `ops reseal` turned the sealed-only mode on.
const DefaultModeMaxAge = time.Minute

// ErrStoredInClear: a value that the broker seals was found in clear after
// a re-seal pass had sealed every one (broker.SealingMode.SealedOnly): it
// was written to the store behind the broker's back, and is refused.
var ErrStoredInClear = errors.New("stored in clear after the table was sealed")

// NewStore returns s sealing with sealer.
func NewStore(s broker.Store, sealer Sealer) *Store { return &Store{Store: s, Sealer: sealer} }

// SetSealingMode records m in the store beneath, and uses it at once
// (SealingMode, which reads the store beneath, passes through).
func (s *Store) SetSealingMode(ctx context.Context, m broker.SealingMode) error {
	if err := s.Store.SetSealingMode(ctx, m); err != nil {
		return err
	}
	s.mu.Lock()
	s.mode, s.modeReadAt = m, s.now()
	s.mu.Unlock()
	return nil
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// inClear is what reading a value found in clear, named by what, returns: nil while
// the store accepts values in clear (neither SealedOnly nor the mode
// refuses them), else an error naming it. A plan's parameters and
// fingerprints (plan not empty) are refused by the mode only when it
// records the plan among those it sealed: a plan marked sensitive after
// the last re-seal pass still has values in clear. The name is built only
// for an error: most reads find values in clear and accept them.
func (s *Store) inClear(ctx context.Context, plan string, what func() string) error {
	if s.SealedOnly && (plan == "" || s.sensitive(plan)) {
		// Sealed-only is the deployments' default: on one upgraded from a
		// broker that stored values in clear, this is the line that says
		// what to do.
		return fmt.Errorf("%s: %w (%s=true: if the value dates from before sealing, run `ops reseal`, "+
			"or deploy with sealedOnly=false until it has run)", what(), ErrStoredInClear, env.SealedOnly)
	}
	refuses := func(m broker.SealingMode) bool {
		return m.SealedOnly && (plan == "" || slices.Contains(m.SensitivePlans, plan))
	}
	maxAge := s.ModeMaxAge
	if maxAge == 0 {
		maxAge = DefaultModeMaxAge
	}
	now := s.now()
	s.mu.Lock()
	m, at := s.mode, s.modeReadAt
	s.mu.Unlock()
	if !refuses(m) && (at.IsZero() || !now.Before(at.Add(maxAge))) {
		read, err := s.SealingMode(ctx)
		if err != nil {
			return fmt.Errorf("%s is in clear, and the sealing mode is unknown: %w", what(), err)
		}
		s.mu.Lock()
		// A mode that refused once is kept: deleting the item does not
		// turn the refusal off in a running broker.
		if s.mode.SealedOnly {
			read.SealedOnly = true
			read.SensitivePlans = append(slices.Clone(s.mode.SensitivePlans), read.SensitivePlans...)
		}
		s.mode, s.modeReadAt, m = read, now, read
		s.mu.Unlock()
	}
	if refuses(m) {
		return fmt.Errorf("%s: %w", what(), ErrStoredInClear)
	}
	return nil
}

func credentialsContext(instanceID, bindingID string) map[string]string {
	return map[string]string{"instance_id": instanceID, "binding_id": bindingID, "field": "credentials"}
}

func recordContext(instanceID, name string) map[string]string {
	return map[string]string{"instance_id": instanceID, "record": name}
}

func parametersContext(instanceID, bindingID, operationID string) requestItem {
	return requestItem{"parameters", instanceID, bindingID, operationID}
}

func fingerprintContext(instanceID, bindingID, operationID string) requestItem {
	return requestItem{"fingerprint", instanceID, bindingID, operationID}
}

// requestItem names a request's field and its item: the instance, the
// binding, or the operation. Most such fields are stored in clear (their
// plan's parameters are not secret), so its encryption context is built
// only to seal or open one.
type requestItem struct{ field, instanceID, bindingID, operationID string }

// context binds the field to its item.
func (r requestItem) context() map[string]string {
	return requestContext(r.field, r.instanceID, r.bindingID, r.operationID)
}

// describe names the item, for errors.
func (r requestItem) describe() string {
	switch {
	case r.bindingID != "":
		return "binding " + r.bindingID + " of instance " + r.instanceID
	case r.operationID != "":
		return "operation " + r.operationID + " of instance " + r.instanceID
	}
	return "instance " + r.instanceID
}

// requestContext binds a request's field to its item: the instance, the
// binding, or the operation.
func requestContext(field, instanceID, bindingID, operationID string) map[string]string {
	ec := map[string]string{"instance_id": instanceID, "field": field}
	if bindingID != "" {
		ec["binding_id"] = bindingID
	}
	if operationID != "" {
		ec["operation_id"] = operationID
	}
	return ec
}

func (s *Store) sensitive(planID string) bool { return slices.Contains(s.SensitivePlans, planID) }

// sealParameters seals the parameters of an item of planID when the plan
// says they may hold secrets, or when they look like a sealed value, so
// that opening them gives back exactly what the platform sent.
func (s *Store) sealParameters(ctx context.Context, planID string, params json.RawMessage, item requestItem) (json.RawMessage, error) {
	if len(params) == 0 || !(isSealed(params) || s.sensitive(planID)) {
		return params, nil
	}
	sealed, err := s.seal(ctx, params, item.context())
	if err != nil {
		return nil, fmt.Errorf("seal the parameters of %s: %w", item.describe(), err)
	}
	return sealed, nil
}

// openParameters opens sealed parameters of an item of planID in place;
// parameters in clear are refused when the sealing mode refuses the plan's.
func (s *Store) openParameters(ctx context.Context, planID string, params *json.RawMessage, item requestItem) error {
	sealed, ok := parseSealed(*params)
	if !ok {
		if len(*params) == 0 || string(*params) == "null" {
			return nil
		}
		return s.inClear(ctx, planID, func() string { return "the parameters of " + item.describe() })
	}
	plain, err := s.Sealer.Open(ctx, sealed, item.context())
	if err != nil {
		return fmt.Errorf("open the parameters of %s: %w", item.describe(), err)
	}
	*params = plain
	return nil
}

// sealFingerprint seals the request fingerprint of an item of planID when
// the plan says its parameters may hold secrets: the fingerprint hashes
// them, and a plain hash of a low-entropy secret can be reversed by
// trying values. Sealed, it is opened on read like the parameters, so the
// broker still compares fingerprints in clear, in memory; no key beyond
// the sealing one is needed, and with KMS the cached data key opens it.
func (s *Store) sealFingerprint(ctx context.Context, planID string, fp *string, item requestItem) error {
	if *fp == "" || !s.sensitive(planID) || isSealedString(*fp) {
		return nil
	}
	sealed, err := s.seal(ctx, []byte(*fp), item.context())
	if err != nil {
		return fmt.Errorf("seal the fingerprint of %s: %w", item.describe(), err)
	}
	*fp = string(sealed)
	return nil
}

// openFingerprint opens a sealed fingerprint of an item of planID in
// place; one in clear is refused when the sealing mode refuses the plan's.
func (s *Store) openFingerprint(ctx context.Context, planID string, fp *string, item requestItem) error {
	if *fp == "" {
		return nil
	}
	if !isSealedString(*fp) {
		return s.inClear(ctx, planID, func() string { return "the fingerprint of " + item.describe() })
	}
	plain, err := s.open(ctx, json.RawMessage(*fp), item.context())
	if err != nil {
		return fmt.Errorf("open the fingerprint of %s: %w", item.describe(), err)
	}
	*fp = string(plain)
	return nil
}

func (s *Store) sealInstance(ctx context.Context, inst broker.Instance) (broker.Instance, error) {
	var err error
	if inst.Parameters, err = s.sealParameters(ctx, inst.PlanID, inst.Parameters, parametersContext(inst.ID, "", "")); err != nil {
		return inst, err
	}
	err = s.sealFingerprint(ctx, inst.PlanID, &inst.Fingerprint, fingerprintContext(inst.ID, "", ""))
	return inst, err
}

func (s *Store) openInstance(ctx context.Context, inst *broker.Instance) error {
	if inst == nil {
		return nil
	}
	if err := s.openParameters(ctx, inst.PlanID, &inst.Parameters, parametersContext(inst.ID, "", "")); err != nil {
		return err
	}
	return s.openFingerprint(ctx, inst.PlanID, &inst.Fingerprint, fingerprintContext(inst.ID, "", ""))
}

// sealOperation seals an update's target parameters and the operation's
// fingerprint, by the plan the update moves to (or the instance's, when
// it keeps its plan: broker.Operation.ParametersPlan).
func (s *Store) sealOperation(ctx context.Context, op broker.Operation) (broker.Operation, error) {
	plan := op.ParametersPlan()
	if err := s.sealFingerprint(ctx, plan, &op.Fingerprint, fingerprintContext(op.InstanceID, "", op.ID)); err != nil {
		return op, err
	}
	if op.Target == nil || len(op.Target.Parameters) == 0 {
		return op, nil
	}
	target := *op.Target
	var err error
	target.Parameters, err = s.sealParameters(ctx, plan, target.Parameters, parametersContext(op.InstanceID, "", op.ID))
	op.Target = &target
	return op, err
}

func (s *Store) openOperation(ctx context.Context, op *broker.Operation) error {
	if op == nil {
		return nil
	}
	plan := op.ParametersPlan()
	if err := s.openFingerprint(ctx, plan, &op.Fingerprint, fingerprintContext(op.InstanceID, "", op.ID)); err != nil {
		return err
	}
	if op.Target == nil {
		return nil
	}
	target := *op.Target
	if err := s.openParameters(ctx, plan, &target.Parameters, parametersContext(op.InstanceID, "", op.ID)); err != nil {
		return err
	}
	op.Target = &target
	return nil
}

func (s *Store) sealOptionalOperation(ctx context.Context, op *broker.Operation) (*broker.Operation, error) {
	if op == nil {
		return nil, nil
	}
	sealed, err := s.sealOperation(ctx, *op)
	return &sealed, err
}

// SealBinding returns b with its credentials sealed.
func (s *Store) SealBinding(ctx context.Context, b broker.Binding) (broker.Binding, error) {
	var err error
	if b.Parameters, err = s.sealParameters(ctx, b.PlanID, b.Parameters, parametersContext(b.InstanceID, b.ID, "")); err != nil {
		return b, err
	}
	if err = s.sealFingerprint(ctx, b.PlanID, &b.Fingerprint, fingerprintContext(b.InstanceID, b.ID, "")); err != nil {
		return b, err
	}
	if len(b.Credentials) == 0 {
		return b, nil
	}
	plain, err := jsonenc.MarshalValue(map[string]any(b.Credentials))
	if err != nil {
		return b, fmt.Errorf("seal the credentials of binding %s: %w", b.ID, err)
	}
	sealed, err := s.seal(ctx, plain, credentialsContext(b.InstanceID, b.ID))
	if err != nil {
		return b, fmt.Errorf("seal the credentials of binding %s: %w", b.ID, err)
	}
	b.Credentials, b.Sealed = nil, sealed
	return b, nil
}

// openBinding opens b's sealed credentials in place.
func (s *Store) openBinding(ctx context.Context, b *broker.Binding) error {
	if b == nil {
		return nil
	}
	if err := s.openParameters(ctx, b.PlanID, &b.Parameters, parametersContext(b.InstanceID, b.ID, "")); err != nil {
		return err
	}
	if err := s.openFingerprint(ctx, b.PlanID, &b.Fingerprint, fingerprintContext(b.InstanceID, b.ID, "")); err != nil {
		return err
	}
	if len(b.Sealed) == 0 {
		if len(b.Credentials) == 0 {
			return nil
		}
		return s.inClear(ctx, "", func() string {
			return fmt.Sprintf("the credentials of binding %s of instance %s", b.ID, b.InstanceID)
		})
	}
	plain, err := s.open(ctx, b.Sealed, credentialsContext(b.InstanceID, b.ID))
	if err != nil {
		return fmt.Errorf("open the credentials of binding %s: %w", b.ID, err)
	}
	var creds broker.Credentials
	if err := json.Unmarshal(plain, &creds); err != nil {
		return fmt.Errorf("open the credentials of binding %s: %w", b.ID, err)
	}
	b.Credentials, b.Sealed = creds, nil
	return nil
}

// SealData returns a record's data sealed for its instance and name.
func (s *Store) SealData(ctx context.Context, instanceID, name string, data json.RawMessage) (json.RawMessage, error) {
	if len(data) == 0 || isSealed(data) {
		return data, nil
	}
	sealed, err := s.seal(ctx, data, recordContext(instanceID, name))
	if err != nil {
		return nil, fmt.Errorf("seal record %s of %s: %w", name, instanceID, err)
	}
	return sealed, nil
}

// openData opens a record's data in place; data that is not sealed (stored
// before sealing was on) is left as it is, unless the store is sealed only.
func (s *Store) openData(ctx context.Context, what, instanceID, name string, data *json.RawMessage) error {
	sealed, ok := parseSealed(*data)
	if !ok {
		if len(*data) == 0 || string(*data) == "null" {
			return nil
		}
		return s.inClear(ctx, "", func() string { return fmt.Sprintf("the data of %s %s of instance %s", what, name, instanceID) })
	}
	plain, err := s.Sealer.Open(ctx, sealed, recordContext(instanceID, name))
	if err != nil {
		return fmt.Errorf("open record %s of %s: %w", name, instanceID, err)
	}
	*data = plain
	return nil
}

func (s *Store) seal(ctx context.Context, plain []byte, ec map[string]string) (json.RawMessage, error) {
	sealed, err := s.Sealer.Seal(ctx, plain, ec)
	if err != nil {
		return nil, err
	}
	return marshalSealed(sealed)
}

func (s *Store) open(ctx context.Context, data json.RawMessage, ec map[string]string) ([]byte, error) {
	sealed, err := Parse(data)
	if err != nil {
		return nil, err
	}
	return s.Sealer.Open(ctx, sealed, ec)
}

func (s *Store) sealResource(ctx context.Context, r broker.Resource) (broker.Resource, error) {
	var err error
	r.Data, err = s.SealData(ctx, r.InstanceID, r.Name, r.Data)
	return r, err
}

func (s *Store) sealDetached(ctx context.Context, d broker.Detached) (broker.Detached, error) {
	var err error
	d.Data, err = s.SealData(ctx, d.InstanceID, d.Name, d.Data)
	return d, err
}

func (s *Store) sealRecords(ctx context.Context, r broker.RecordChanges) (broker.RecordChanges, error) {
	if len(r.Save) == 0 {
		return r, nil
	}
	saved := make([]broker.Resource, len(r.Save))
	for i, rec := range r.Save {
		var err error
		if saved[i], err = s.sealResource(ctx, rec); err != nil {
			return r, err
		}
	}
	r.Save = saved
	return r, nil
}

func (s *Store) sealSettled(ctx context.Context, settled *broker.Settled) (*broker.Settled, error) {
	if settled == nil {
		return nil, nil
	}
	out := *settled
	var err error
	out.Records, err = s.sealRecords(ctx, settled.Records)
	return &out, err
}

// openConflict opens the binding a conflict carries (the broker answers an
// identical bind with its credentials).
func (s *Store) openConflict(ctx context.Context, err error) error {
	if err == nil {
		return nil // no variable on the heap for errors.As
	}
	var c *broker.ConflictError
	if errors.As(err, &c) {
		oerr := s.openBinding(ctx, c.Binding)
		if oerr == nil {
			oerr = s.openInstance(ctx, c.Instance)
		}
		if oerr == nil {
			oerr = s.openOperation(ctx, c.Operation)
		}
		if oerr != nil {
			return oerr
		}
	}
	return err
}

// GetBinding opens the binding's credentials.
func (s *Store) GetBinding(ctx context.Context, instanceID, bindingID string) (broker.Binding, error) {
	b, err := s.Store.GetBinding(ctx, instanceID, bindingID)
	if err == nil {
		err = s.openBinding(ctx, &b)
	}
	if err != nil {
		return broker.Binding{}, err
	}
	return b, nil
}

// GetInstance opens the instance's parameters.
func (s *Store) GetInstance(ctx context.Context, instanceID string) (broker.Instance, error) {
	inst, err := s.Store.GetInstance(ctx, instanceID)
	if err == nil {
		err = s.openInstance(ctx, &inst)
	}
	if err != nil {
		return broker.Instance{}, err
	}
	return inst, nil
}

// GetOperation opens an update's target parameters.
func (s *Store) GetOperation(ctx context.Context, instanceID, operationID string) (broker.Operation, error) {
	op, err := s.Store.GetOperation(ctx, instanceID, operationID)
	if err == nil {
		err = s.openOperation(ctx, &op)
	}
	if err != nil {
		return broker.Operation{}, err
	}
	return op, nil
}

// ListOperations opens the updates' target parameters.
func (s *Store) ListOperations(ctx context.Context, instanceID string) ([]broker.Operation, error) {
	return s.openOperations(ctx)(s.Store.ListOperations(ctx, instanceID))
}

// ListInProgress opens the updates' target parameters.
func (s *Store) ListInProgress(ctx context.Context) ([]broker.Operation, error) {
	return s.openOperations(ctx)(s.Store.ListInProgress(ctx))
}

func (s *Store) openOperations(ctx context.Context) func([]broker.Operation, error) ([]broker.Operation, error) {
	return func(ops []broker.Operation, err error) ([]broker.Operation, error) {
		for i := range ops {
			if err == nil {
				err = s.openOperation(ctx, &ops[i])
			}
		}
		if err != nil {
			return nil, err
		}
		return ops, nil
	}
}

// Load opens the instance's and the binding's parameters, the binding's
// credentials, an update's target parameters and the records.
func (s *Store) Load(ctx context.Context, instanceID, operationID, bindingID string) (broker.Snapshot, error) {
	snap, err := s.Store.Load(ctx, instanceID, operationID, bindingID)
	return s.openSnapshot(ctx, snap, err)
}

// LoadWhole opens what Load does.
func (s *Store) LoadWhole(ctx context.Context, instanceID, operationID string) (broker.Snapshot, error) {
	snap, err := s.Store.LoadWhole(ctx, instanceID, operationID)
	return s.openSnapshot(ctx, snap, err)
}

func (s *Store) openSnapshot(ctx context.Context, snap broker.Snapshot, err error) (broker.Snapshot, error) {
	if err == nil {
		err = s.openBinding(ctx, snap.Binding)
	}
	if err == nil {
		err = s.openInstance(ctx, snap.Instance)
	}
	if err == nil {
		err = s.openOperation(ctx, snap.Operation)
	}
	for i := range snap.Records {
		if err == nil {
			err = s.openData(ctx, "record", snap.Records[i].InstanceID, snap.Records[i].Name, &snap.Records[i].Data)
		}
	}
	if err != nil {
		return broker.Snapshot{}, err
	}
	return snap, nil
}

// CreateInstance seals the instance's parameters and the records of a
// change settled in memory.
func (s *Store) CreateInstance(ctx context.Context, inst broker.Instance, op broker.Operation, settled *broker.Settled) error {
	settled, err := s.sealSettled(ctx, settled)
	if err == nil {
		inst, err = s.sealInstance(ctx, inst)
	}
	if err == nil {
		op, err = s.sealOperation(ctx, op)
	}
	if err != nil {
		return err
	}
	return s.openConflict(ctx, s.Store.CreateInstance(ctx, inst, op, settled))
}

// LockInstance seals the instance's parameters and an update's target
// parameters.
func (s *Store) LockInstance(ctx context.Context, l broker.LockInstance) error {
	var err error
	if l.Instance, err = s.sealInstance(ctx, l.Instance); err != nil {
		return err
	}
	if l.Op, err = s.sealOperation(ctx, l.Op); err != nil {
		return err
	}
	if l.Halted, err = s.sealOptionalOperation(ctx, l.Halted); err != nil {
		return err
	}
	return s.openConflict(ctx, s.Store.LockInstance(ctx, l))
}

// CreateBinding seals the binding's credentials and records.
func (s *Store) CreateBinding(ctx context.Context, b broker.Binding, op broker.Operation, settled *broker.Settled) error {
	b, err := s.SealBinding(ctx, b)
	if err == nil {
		settled, err = s.sealSettled(ctx, settled)
	}
	if err == nil {
		op, err = s.sealOperation(ctx, op)
	}
	if err != nil {
		return err
	}
	return s.openConflict(ctx, s.Store.CreateBinding(ctx, b, op, settled))
}

// LockBinding seals the binding's credentials.
func (s *Store) LockBinding(ctx context.Context, l broker.LockBinding) error {
	var err error
	if l.Binding, err = s.SealBinding(ctx, l.Binding); err != nil {
		return err
	}
	if l.Op, err = s.sealOperation(ctx, l.Op); err != nil {
		return err
	}
	if l.Halted, err = s.sealOptionalOperation(ctx, l.Halted); err != nil {
		return err
	}
	return s.openConflict(ctx, s.Store.LockBinding(ctx, l))
}

// UpdateOperation seals the records saved with the progress.
func (s *Store) UpdateOperation(ctx context.Context, op broker.Operation, records broker.RecordChanges) error {
	records, err := s.sealRecords(ctx, records)
	if err == nil {
		op, err = s.sealOperation(ctx, op)
	}
	if err != nil {
		return err
	}
	return s.openConflict(ctx, s.Store.UpdateOperation(ctx, op, records))
}

// FinishOperation seals the binding's credentials, the records and the
// detached records.
func (s *Store) FinishOperation(ctx context.Context, f broker.Finish) error {
	var err error
	f.Op, err = s.sealOperation(ctx, f.Op)
	if err == nil && f.Binding != nil {
		b, serr := s.SealBinding(ctx, *f.Binding)
		f.Binding, err = &b, serr
	}
	if err == nil && f.Instance != nil {
		inst, serr := s.sealInstance(ctx, *f.Instance)
		f.Instance, err = &inst, serr
	}
	if err == nil {
		f.Records, err = s.sealRecords(ctx, f.Records)
	}
	if err == nil && len(f.Detach) > 0 {
		detach := make([]broker.Detached, len(f.Detach))
		for i, d := range f.Detach {
			if detach[i], err = s.sealDetached(ctx, d); err != nil {
				break
			}
		}
		f.Detach = detach
	}
	if err != nil {
		return err
	}
	return s.openConflict(ctx, s.Store.FinishOperation(ctx, f))
}

// PutResource seals the record.
func (s *Store) PutResource(ctx context.Context, r broker.Resource) error {
	r, err := s.sealResource(ctx, r)
	if err != nil {
		return err
	}
	return s.Store.PutResource(ctx, r)
}

// GetDetached opens the detached record.
func (s *Store) GetDetached(ctx context.Context, id string) (broker.Detached, error) {
	d, err := s.Store.GetDetached(ctx, id)
	if err == nil {
		err = s.openData(ctx, "detached record "+d.ID+" of record", d.InstanceID, d.Name, &d.Data)
	}
	if err != nil {
		return broker.Detached{}, err
	}
	return d, nil
}

// ListDetached opens the detached records.
func (s *Store) ListDetached(ctx context.Context) ([]broker.Detached, error) {
	ds, err := s.Store.ListDetached(ctx)
	for i := range ds {
		if err == nil {
			err = s.openData(ctx, "detached record "+ds[i].ID+" of record", ds[i].InstanceID, ds[i].Name, &ds[i].Data)
		}
	}
	if err != nil {
		return nil, err
	}
	return ds, nil
}

// UpdateDetached seals the detached record.
func (s *Store) UpdateDetached(ctx context.Context, d broker.Detached, attempts int) error {
	d, err := s.sealDetached(ctx, d)
	if err != nil {
		return err
	}
	return s.Store.UpdateDetached(ctx, d, attempts)
}

// requestSecretContext is the context that binds stored parameters or a
// fingerprint to their item.
func requestSecretContext(v broker.StoredSecret) map[string]string {
	binding, operation := "", ""
	switch v.Of {
	case broker.SecretOfBinding:
		binding = v.Name
	case broker.SecretOfOperation:
		operation = v.Name
	}
	return requestContext(string(v.Kind), v.InstanceID, binding, operation)
}

// ResealReport says what Reseal did.
type ResealReport struct {
	// KeyID is the key that seals now.
	KeyID string `json:"key_id"`
	// Values is how many stored values may hold a secret.
	Values int `json:"values"`
	// Resealed were sealed under another key and are now under KeyID;
	// Sealed were stored before sealing and are now sealed; Current
	// were under KeyID already; Changed changed while re-sealing (their
	// newer value was sealed by its own write).
	Resealed int `json:"resealed"`
	Sealed   int `json:"sealed"`
	Current  int `json:"current"`
	Changed  int `json:"changed"`
	// SealedOnly says that the pass sealed every value and recorded so:
	// from now on a value found in clear is refused.
	SealedOnly bool `json:"sealed_only"`
}

// Reseal seals every stored value under the current key: one sealed under
// another key is opened and sealed again, one stored before sealing is
// sealed. Each value is written back only if it is unchanged since it was
// read, so a newer write is never overwritten, and a crash part way leaves
// every value readable: each is as it was or re-sealed, and Reseal can run
// again. A pass that ends with every value sealed records the sealed-only
// mode in the store (broker.SealingMode), so that a value written in clear
// behind the broker's back is refused from then on; a value changed during
// the pass was sealed by the write that changed it. The request parameters
// and fingerprints of the plans in SensitivePlans are sealed too, and the
// mode records those plans: only theirs are refused in clear. The store
// beneath lists and replaces them (broker.SecretStore).
func (s *Store) Reseal(ctx context.Context) (ResealReport, error) {
	var rep ResealReport
	raw := s.Store
	_, key, err := s.Sealer.CurrentKey(ctx)
	if err != nil {
		return rep, fmt.Errorf("reseal: %w", err)
	}
	rep.KeyID = key
	err = raw.StoredSecrets(ctx, func(v broker.StoredSecret) error {
		if len(v.Value) == 0 {
			return nil
		}
		ec := recordContext(v.InstanceID, v.Name)
		switch v.Kind {
		case broker.SecretCredentials:
			ec = credentialsContext(v.InstanceID, v.Name)
		case broker.SecretParameters, broker.SecretFingerprint:
			// A plan's parameters are secret only where the catalog says
			// so; those sealed before stay sealed, under the current key.
			if !s.sensitive(v.PlanID) && !isSealed(v.Value) {
				return nil
			}
			ec = requestSecretContext(v)
		}
		rep.Values++
		var next json.RawMessage
		count := &rep.Sealed
		if sealed, perr := Parse(v.Value); perr == nil && !v.Plain {
			out, changed, err := Reseal(ctx, s.Sealer, sealed, ec)
			if err != nil {
				return fmt.Errorf("reseal %s %s of %s: %w", v.Kind, v.Name, v.InstanceID, err)
			}
			if !changed {
				rep.Current++
				return nil
			}
			if next, err = json.Marshal(out); err != nil {
				return err
			}
			count = &rep.Resealed
		} else if next, err = s.seal(ctx, v.Value, ec); err != nil {
			return fmt.Errorf("seal %s %s of %s: %w", v.Kind, v.Name, v.InstanceID, err)
		}
		if err := raw.ReplaceSecret(ctx, v, next); err != nil {
			if errors.Is(err, broker.ErrSecretChanged) {
				rep.Changed++
				return nil
			}
			return err
		}
		*count++
		return nil
	})
	if err != nil {
		return rep, err
	}
	mode := broker.SealingMode{SealedOnly: true, KeyID: key, Since: s.now().UTC(), SensitivePlans: slices.Clone(s.SensitivePlans)}
	if err := s.SetSealingMode(ctx, mode); err != nil {
		return rep, fmt.Errorf("reseal: every value is sealed, but the mode that refuses values in clear is not recorded: %w", err)
	}
	rep.SealedOnly = true
	return rep, nil
}
