package bolt

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/serverless-osb/broker/internal/broker"
)

// GetInstance returns the instance, or an error wrapping broker.ErrNotFound.
func (s *Store) GetInstance(ctx context.Context, instanceID string) (broker.Instance, error) {
	var inst *broker.Instance
	err := s.view(ctx, func(t tx) (err error) {
		inst, err = t.instance(instanceID)
		return err
	})
	if err == nil && inst == nil {
		err = broker.ErrNotFound
	}
	if err != nil {
		return broker.Instance{}, fmt.Errorf("get instance %s: %w", instanceID, err)
	}
	return *inst, nil
}

// GetBinding returns the binding, or an error wrapping broker.ErrNotFound.
func (s *Store) GetBinding(ctx context.Context, instanceID, bindingID string) (broker.Binding, error) {
	var b *broker.Binding
	err := s.view(ctx, func(t tx) (err error) {
		b, err = t.binding(instanceID, bindingID)
		return err
	})
	if err == nil && b == nil {
		err = broker.ErrNotFound
	}
	if err != nil {
		return broker.Binding{}, fmt.Errorf("get binding %s/%s: %w", instanceID, bindingID, err)
	}
	return *b, nil
}

// GetOperation returns the operation, or an error wrapping broker.ErrNotFound.
func (s *Store) GetOperation(ctx context.Context, instanceID, operationID string) (broker.Operation, error) {
	var op *broker.Operation
	err := s.view(ctx, func(t tx) (err error) {
		op, err = t.operation(instanceID, operationID)
		return err
	})
	if err == nil && op == nil {
		err = broker.ErrNotFound
	}
	if err != nil {
		return broker.Operation{}, fmt.Errorf("get operation %s/%s: %w", instanceID, operationID, err)
	}
	return *op, nil
}

// Load reads the instance, the operation and binding asked for (or the
// operation's binding) and their records, each by its key or a key range,
// in one read transaction; a deprovision's snapshot is whole.
func (s *Store) Load(ctx context.Context, instanceID, operationID, bindingID string) (broker.Snapshot, error) {
	return s.load(ctx, instanceID, operationID, bindingID, false)
}

// LoadWhole reads what Load does without a binding, and every binding's id
// and every record of the instance.
func (s *Store) LoadWhole(ctx context.Context, instanceID, operationID string) (broker.Snapshot, error) {
	return s.load(ctx, instanceID, operationID, "", true)
}

func (s *Store) load(ctx context.Context, instanceID, operationID, bindingID string, whole bool) (broker.Snapshot, error) {
	var snap broker.Snapshot
	err := broker.CheckLoad(instanceID, operationID, bindingID)
	if err == nil {
		err = s.view(ctx, func(t tx) error {
			var err error
			if snap.Instance, err = t.instance(instanceID); err != nil {
				return err
			}
			if operationID != "" {
				if snap.Operation, err = t.operation(instanceID, operationID); err != nil {
					return err
				}
			}
			whole = whole || broker.Whole(snap.Operation)
			if bindingID == "" && snap.Operation != nil {
				bindingID = snap.Operation.BindingID
			}
			if bindingID != "" {
				if snap.Binding, err = t.binding(instanceID, bindingID); err != nil {
					return err
				}
			}
			snap.BindingIDs, snap.Records, err = t.records(instanceID, bindingID, whole)
			return err
		})
	}
	if err != nil {
		return broker.Snapshot{}, fmt.Errorf("load %s: %w", instanceID, err)
	}
	return snap, nil
}

// records reads an instance's records, by name: its own (a key range that
// holds nothing else) and bindingID's by its key; when whole, every
// binding's too, and the bindings' ids, each by its key from the bindings'
// slots (bindings.go).
func (t tx) records(instanceID, bindingID string, whole bool) (bindingIDs []string, out []broker.Resource, err error) {
	if whole {
		for _, b := range t.bindings.list(instanceID) {
			key := bindingKey(instanceID, b.slot, b.id)
			if t.has(key) {
				bindingIDs = append(bindingIDs, b.id)
			}
			r, err := get(t, append(key, skRecordOf), resourceItem.resource)
			if err != nil {
				return nil, nil, err
			}
			if r != nil {
				out = append(out, *r)
			}
		}
	} else if bindingID != "" {
		r, err := t.resource(instanceID, broker.BindingRecord(bindingID))
		if err != nil {
			return nil, nil, err
		}
		if r != nil {
			out = append(out, *r)
		}
	}
	c := t.cur // no get while it iterates
	prefix := pkWith(instanceID, skRecord)
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		r, err := decode(k, v, resourceItem.resource)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, r)
	}
	// By name, as the records' keys sorted them in layout 1.
	slices.SortFunc(out, func(a, b broker.Resource) int { return cmp.Compare(a.Name, b.Name) })
	return bindingIDs, out, nil
}

// ListOperations returns the operations under an instance, its bindings'
// included, oldest first (CreatedAt, then ID). An instance with none, or
// unknown, has an empty list.
func (s *Store) ListOperations(ctx context.Context, instanceID string) ([]broker.Operation, error) {
	var ops []broker.Operation
	err := s.view(ctx, func(t tx) (err error) {
		prefix := pkWith(instanceID, skOperation)
		ops = []broker.Operation{}
		c := t.items.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if !isOperationKey(k) {
				continue // a binding's item (bindings.go)
			}
			op, err := decode(k, v, operationItem.operation)
			if err != nil {
				return err
			}
			ops = append(ops, op)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list operations of %s: %w", instanceID, err)
	}
	sortOperations(ops)
	return ops, nil
}

// ListInProgress returns every operation in progress, oldest first: those
// the index of the operations in progress names (progress.go), each read
// by its key, so that the reaper's and Recover's read grows with the
// operations in progress, not with the instances or their history.
func (s *Store) ListInProgress(ctx context.Context) ([]broker.Operation, error) {
	ops := []broker.Operation{}
	// Listed before the read begins: the index takes a write once it is
	// committed, so each operation it names is in the read's view; one
	// that finished since is not listed.
	inProgress := s.progress.list()
	err := s.view(ctx, func(t tx) error {
		for _, p := range inProgress {
			op, err := t.operation(p.InstanceID, p.ID)
			if err != nil {
				return err
			}
			if op == nil {
				return fmt.Errorf("the operation %s of %s in progress is missing", p.ID, p.InstanceID)
			}
			if !op.Finished() {
				ops = append(ops, *op)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list operations in progress: %w", err)
	}
	sortOperations(ops)
	return ops, nil
}

// ListInstances returns a page of the instances f selects, in the order of
// their keys (compareIDs: UUIDs first, then other ids, each by bytes), and
// the next page's token. With a plan it reads the
// instances the plan index (plans.go) has under that plan; without one, a cursor that visits each instance's partition
// once, reading its instance item and seeking past the rest (its
// bindings, operations and records).
func (s *Store) ListInstances(ctx context.Context, f broker.InstanceFilter, page string) ([]broker.Instance, string, error) {
	after, err := broker.InstancePageAfter(page)
	list := []broker.Instance{}
	next := ""
	if err == nil {
		err = s.view(ctx, func(t tx) error {
			// each lists the instance id unless the page is full.
			each := func(id string) (bool, error) {
				inst, err := t.instance(id)
				if err != nil {
					return false, err
				}
				if inst == nil || !f.Selects(*inst) {
					return true, nil
				}
				if len(list) == broker.InstancePageSize {
					next = broker.InstancePageToken(list[len(list)-1].ID)
					return false, nil
				}
				inst.Parameters, inst.Fingerprint = nil, ""
				list = append(list, *inst)
				return true, nil
			}
			if f.PlanID != "" {
				for _, id := range s.plans.after(f.PlanID, after) {
					if more, err := each(id); !more || err != nil {
						return err
					}
				}
				return nil
			}
			start := partitionsStart
			if after != "" {
				start = partitionEnd(after)
			}
			return eachPartition(t.items.Cursor(), start, each)
		})
	}
	if err != nil {
		return nil, "", fmt.Errorf("list instances: %w", err)
	}
	return list, next, nil
}

func sortOperations(ops []broker.Operation) {
	slices.SortStableFunc(ops, func(a, b broker.Operation) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
}

// CreateInstance stores a new instance and its provision operation.
// Conditions: broker.CreateInstanceConditions; else
// *broker.ConflictError{Instance}.
func (s *Store) CreateInstance(ctx context.Context, inst broker.Instance, op broker.Operation, settled *broker.Settled) error {
	err := broker.CheckCreate(inst.ID, op, settled)
	if err == nil {
		err = s.update(ctx, func(t tx) error {
			cur, err := t.instance(inst.ID)
			if err != nil {
				return err
			}
			if err := expect(broker.CreateInstanceConditions(), cur, nil, nil); err != nil {
				return err
			}
			if err := t.putInstance(inst); err != nil {
				return err
			}
			if err := t.putOperation(op); err != nil {
				return err
			}
			return t.settle(inst.ID, settled)
		})
	}
	if err != nil {
		return fmt.Errorf("create instance %s: %w", inst.ID, err)
	}
	return nil
}

// LockInstance starts an update or deprovision. Conditions:
// l.Conditions(); else *broker.ConflictError{Instance} (nil when missing).
func (s *Store) LockInstance(ctx context.Context, l broker.LockInstance) error {
	err := l.Check()
	if err == nil {
		err = s.update(ctx, func(t tx) error {
			cur, err := t.instance(l.Instance.ID)
			if err != nil {
				return err
			}
			if err := expect(l.Conditions(), cur, nil, nil); err != nil {
				return err
			}
			if err := t.putInstance(l.Instance); err != nil {
				return err
			}
			return t.putOperations(l.Op, l.Halted)
		})
	}
	if err != nil {
		return fmt.Errorf("lock instance %s: %w", l.Instance.ID, err)
	}
	return nil
}

// CreateBinding stores a new binding and its bind operation, and counts one
// more binding operation on the instance, whose Version moves with it: a
// request that read the instance with its bindings and locks it at that
// version knows the bindings have not changed since.
// Conditions: broker.CreateBindingConditions; else
// *broker.ConflictError{Instance, Binding}, each as stored or nil when
// missing.
func (s *Store) CreateBinding(ctx context.Context, b broker.Binding, op broker.Operation, settled *broker.Settled) error {
	err := broker.CheckCreate(b.InstanceID, op, settled, b.ID)
	if err == nil {
		err = s.update(ctx, func(t tx) error {
			inst, err := t.instance(b.InstanceID)
			if err != nil {
				return err
			}
			cur, err := t.binding(b.InstanceID, b.ID)
			if err != nil {
				return err
			}
			if err := expect(broker.CreateBindingConditions(b, settled), inst, cur, nil); err != nil {
				return err
			}
			if settled == nil {
				inst.BindingOps++
			}
			inst.Version++
			if err := t.putInstance(*inst); err != nil {
				return err
			}
			if err := t.putBinding(b); err != nil {
				return err
			}
			if err := t.putOperation(op); err != nil {
				return err
			}
			return t.settle(b.InstanceID, settled)
		})
	}
	if err != nil {
		return fmt.Errorf("create binding %s/%s: %w", b.InstanceID, b.ID, err)
	}
	return nil
}

// LockBinding starts an unbind. Conditions: l.Conditions(); else
// *broker.ConflictError{Instance, Binding}. When l.Holder is empty the
// instance counts one more binding operation (and its Version moves);
// otherwise the halted bind's count passes to the unbind.
func (s *Store) LockBinding(ctx context.Context, l broker.LockBinding) error {
	err := l.Check()
	if err == nil {
		err = s.update(ctx, func(t tx) error {
			inst, err := t.instance(l.Binding.InstanceID)
			if err != nil {
				return err
			}
			cur, err := t.binding(l.Binding.InstanceID, l.Binding.ID)
			if err != nil {
				return err
			}
			if err := expect(l.Conditions(), inst, cur, nil); err != nil {
				return err
			}
			if l.Holder == "" {
				inst.BindingOps++
				inst.Version++
				if err := t.putInstance(*inst); err != nil {
					return err
				}
			}
			if err := t.putBinding(l.Binding); err != nil {
				return err
			}
			return t.putOperations(l.Op, l.Halted)
		})
	}
	if err != nil {
		return fmt.Errorf("lock binding %s/%s: %w", l.Binding.InstanceID, l.Binding.ID, err)
	}
	return nil
}

// UpdateOperation records progress. Conditions:
// broker.UpdateOperationConditions (the stored operation is in progress);
// else *broker.ConflictError{Operation} with the stored record, or
// with a nil Operation when there is none (as DynamoDB reports it, and as
// FinishOperation does). op itself must be in progress: finishing goes
// through FinishOperation, which releases what the operation held.
func (s *Store) UpdateOperation(ctx context.Context, op broker.Operation, records broker.RecordChanges) error {
	err := broker.CheckProgress(op, records)
	if err == nil {
		err = s.update(ctx, func(t tx) error {
			cur, err := t.operation(op.InstanceID, op.ID)
			if err != nil {
				return err
			}
			if err := expect(broker.UpdateOperationConditions(), nil, nil, cur); err != nil {
				return err
			}
			if err := t.putOperation(op); err != nil {
				return err
			}
			return t.changeRecords(op.InstanceID, records)
		})
	}
	if err != nil {
		return fmt.Errorf("update operation %s/%s: %w", op.InstanceID, op.ID, err)
	}
	return nil
}

// FinishOperation records an outcome and releases what the operation held.
// Conditions: f.Conditions() (the stored operation is in progress, and
// holds the instance or binding it writes). Else *broker.ConflictError
// with the stored Operation, plus the Instance and Binding that were part
// of the conditions (nil when missing). An operation already finished is
// therefore reported as a conflict carrying its outcome, which callers
// treat as done.
//
// DeleteInstance deletes the instance and all its bindings (f.Bindings, and
// any other: the transaction sees them all); operations and driver
// resources stay, unless f.Records removes them. ReleaseBinding decrements
// the instance's BindingOps and moves its Version; f.ReleaseConditions()
// (the instance exists and counts a binding operation) are then conditions
// of the write, and the instance part of its *ConflictError, as in every
// store. f.Records and f.Detach are written in the same transaction.
// An operation holds either its instance or one binding, so Instance or
// DeleteInstance cannot be combined with Binding, DeleteBinding or
// ReleaseBinding.
func (s *Store) FinishOperation(ctx context.Context, f broker.Finish) error {
	op := f.Op
	e, bindingID := f.Conditions(), f.BindingID()
	err := f.Check()
	if f.ReleaseBinding {
		// Never with a write of the instance (f.Check), whose conditions
		// these would join.
		e.Instance = f.ReleaseConditions()
	}
	if err == nil {
		err = s.update(ctx, func(t tx) error {
			cur, err := t.operation(op.InstanceID, op.ID)
			if err != nil {
				return err
			}
			var inst *broker.Instance
			if e.Instance != nil {
				if inst, err = t.instance(op.InstanceID); err != nil {
					return err
				}
			}
			var b *broker.Binding
			if e.Binding != nil {
				if b, err = t.binding(op.InstanceID, bindingID); err != nil {
					return err
				}
			}
			if err := expect(e, inst, b, cur); err != nil {
				return err
			}

			if err := t.putOperation(op); err != nil {
				return err
			}
			switch {
			case f.DeleteInstance:
				err = t.deleteInstance(op.InstanceID)
			case f.Instance != nil:
				err = t.putInstance(*f.Instance)
			}
			if err != nil {
				return err
			}
			switch {
			case f.DeleteBinding:
				err = t.deleteBinding(op.InstanceID, bindingID)
			case f.Binding != nil:
				err = t.putBinding(*f.Binding)
			}
			if err != nil {
				return err
			}
			if f.ReleaseBinding {
				inst.BindingOps--
				inst.Version++
				if err := t.putInstance(*inst); err != nil {
					return err
				}
			}
			if err := t.changeRecords(op.InstanceID, f.Records); err != nil {
				return err
			}
			for _, d := range f.Detach {
				if err := t.detach(d); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("finish operation %s/%s: %w", op.InstanceID, op.ID, err)
	}
	return nil
}

// PutResource writes a resource record unconditionally.
func (s *Store) PutResource(ctx context.Context, r broker.Resource) error {
	err := broker.CheckResource(r)
	if err == nil {
		err = s.update(ctx, func(t tx) error { return t.putResource(r) })
	}
	if err != nil {
		return fmt.Errorf("put resource %s/%s: %w", r.InstanceID, r.Name, err)
	}
	return nil
}

// DeleteResource deletes a resource record; deleting a missing one is not an
// error.
func (s *Store) DeleteResource(ctx context.Context, instanceID, name string) error {
	err := broker.CheckIDs(instanceID, name)
	if err == nil {
		err = s.update(ctx, func(t tx) error { return t.deleteResource(instanceID, name) })
	}
	if err != nil {
		return fmt.Errorf("delete resource %s/%s: %w", instanceID, name, err)
	}
	return nil
}

// settle writes the records of a change settled in memory, if any.
func (t tx) settle(instanceID string, settled *broker.Settled) error {
	if settled == nil {
		return nil
	}
	return t.changeRecords(instanceID, settled.Records)
}

// changeRecords writes a driver's record changes under instanceID.
func (t tx) changeRecords(instanceID string, r broker.RecordChanges) error {
	for _, rec := range r.Save {
		if err := t.putResource(rec); err != nil {
			return err
		}
	}
	for _, name := range r.Remove {
		if err := t.deleteResource(instanceID, name); err != nil {
			return err
		}
	}
	return nil
}

// putOperations writes a new operation and, when set, the halted one.
func (t tx) putOperations(op broker.Operation, halted *broker.Operation) error {
	if err := t.putOperation(op); err != nil {
		return err
	}
	if halted != nil {
		return t.putOperation(*halted)
	}
	return nil
}

// The checks below reject calls that no caller following the port makes;
// they guard the items' integrity, and fail before any transaction starts.
