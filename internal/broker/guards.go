package broker

import (
	"errors"
	"fmt"
)

// The checks below are the Store port's preconditions: calls that no caller
// following the port makes. Every Store runs them before it writes anything,
// so that all stores refuse the same calls with the same errors. What the
// stored items must be for a write to happen is conditions.go's.

// CheckIDs rejects ids and names no store can key faithfully: empty,
// invalid UTF-8, control characters, over MaxKeyLength bytes (see CheckID).
func CheckIDs(ids ...string) error {
	for _, id := range ids {
		if err := checkKey(id); err != nil {
			return fmt.Errorf("invalid id %q: %w", id, err)
		}
	}
	return nil
}

// CheckResource checks a PutResource call: the ids, and the record's name
// (CheckRecordName).
func CheckResource(r Resource) error {
	if err := CheckIDs(r.InstanceID, r.Name); err != nil {
		return err
	}
	return CheckRecordName(r.Name)
}

func sameInstance(op Operation, instanceID string) error {
	if op.InstanceID != instanceID {
		return fmt.Errorf("operation %s is recorded under instance %q, not %q", op.ID, op.InstanceID, instanceID)
	}
	return nil
}

// CheckLoad checks a Load call: the instance id, and the operation's and
// the binding's where given.
func CheckLoad(instanceID, operationID, bindingID string) error {
	if err := CheckIDs(instanceID); err != nil {
		return err
	}
	for _, id := range [...]string{operationID, bindingID} {
		if id != "" {
			if err := CheckIDs(id); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckCreate checks a CreateInstance or CreateBinding call: the ids, that
// op belongs to the instance, and that op is finished exactly when the
// change was settled in memory, whose records are the instance's.
func CheckCreate(instanceID string, op Operation, settled *Settled, ids ...string) error {
	if err := CheckIDs(instanceID, op.ID); err != nil {
		return err
	}
	if err := CheckIDs(ids...); err != nil {
		return err
	}
	switch {
	case settled == nil && op.Finished():
		return fmt.Errorf("operation %s is %s: only a change settled in memory is created finished", op.ID, op.State)
	case settled != nil && !op.Finished():
		return fmt.Errorf("operation %s is still in progress, yet settled", op.ID)
	case settled != nil:
		if err := settled.Records.check(instanceID); err != nil {
			return err
		}
	}
	return sameInstance(op, instanceID)
}

// checkLock checks the common part of LockInstance and LockBinding. A
// halted operation must be the holder, finished, under the same instance,
// and not the new operation (a transaction cannot write one item twice).
func checkLock(instanceID string, op Operation, holder string, halted *Operation, ids ...string) error {
	if err := CheckCreate(instanceID, op, nil, ids...); err != nil {
		return err
	}
	switch {
	case halted == nil:
		return nil
	case holder == "" || halted.ID != holder:
		return fmt.Errorf("halted operation %s is not the holder %q", halted.ID, holder)
	case !halted.Finished():
		return fmt.Errorf("halted operation %s is still %s", halted.ID, halted.State)
	case halted.ID == op.ID:
		return fmt.Errorf("operation %s cannot halt itself", op.ID)
	}
	return sameInstance(*halted, instanceID)
}

// Check checks a LockInstance call.
func (l LockInstance) Check() error {
	return checkLock(l.Instance.ID, l.Op, l.Holder, l.Halted)
}

// Check checks a LockBinding call.
func (l LockBinding) Check() error {
	return checkLock(l.Binding.InstanceID, l.Op, l.Holder, l.Halted, l.Binding.ID)
}

// CheckProgress checks an UpdateOperation call: progress of an operation
// still in progress (finishing goes through FinishOperation), and record
// changes under its instance.
func CheckProgress(op Operation, records RecordChanges) error {
	if err := CheckIDs(op.InstanceID, op.ID); err != nil {
		return err
	}
	if op.Finished() {
		return fmt.Errorf("operation is %s: use FinishOperation to finish it", op.State)
	}
	return records.check(op.InstanceID)
}

// HoldsInstance reports whether the Finish writes the instance.
func (f Finish) HoldsInstance() bool { return f.Instance != nil || f.DeleteInstance }

// HoldsBinding reports whether the Finish writes a binding.
func (f Finish) HoldsBinding() bool { return f.Binding != nil || f.DeleteBinding }

// Check checks a FinishOperation call.
func (f Finish) Check() error {
	op := f.Op
	if err := CheckIDs(op.InstanceID, op.ID); err != nil {
		return err
	}
	switch {
	case !op.Finished():
		return errors.New("the operation to record is still in progress")
	case f.Instance != nil && f.DeleteInstance:
		return errors.New("both Instance and DeleteInstance are set")
	case f.Binding != nil && f.DeleteBinding:
		return errors.New("both Binding and DeleteBinding are set")
	case f.HoldsInstance() && (f.HoldsBinding() || f.ReleaseBinding):
		return errors.New("an operation holds its instance or a binding, not both")
	case f.Instance != nil && f.Instance.ID != op.InstanceID:
		return fmt.Errorf("instance %s is not the operation's instance %s", f.Instance.ID, op.InstanceID)
	case f.Binding != nil && f.Binding.InstanceID != op.InstanceID:
		return fmt.Errorf("binding %s/%s is not under the operation's instance %s",
			f.Binding.InstanceID, f.Binding.ID, op.InstanceID)
	case f.DeleteBinding && op.BindingID == "":
		return errors.New("DeleteBinding is set but the operation names no binding")
	}
	if f.Binding != nil {
		if err := CheckIDs(f.Binding.ID); err != nil {
			return err
		}
	}
	if len(f.Bindings) > 0 && !f.DeleteInstance {
		return errors.New("the bindings to delete are set without DeleteInstance")
	}
	if err := CheckIDs(f.Bindings...); err != nil {
		return err
	}
	changed := map[string]bool{}
	for _, r := range f.Records.Save {
		changed[r.Name] = true
	}
	for _, n := range f.Records.Remove {
		changed[n] = true
	}
	for _, d := range f.Detach {
		if changed[d.Name] {
			return fmt.Errorf("record %s is both changed and detached", d.Name)
		}
		changed[d.Name] = true
		if d.InstanceID != op.InstanceID {
			return fmt.Errorf("detached %s is of instance %s, not the operation's %s", d.ID, d.InstanceID, op.InstanceID)
		}
		if err := CheckIDs(d.ID, d.Name); err != nil {
			return err
		}
	}
	return f.Records.check(op.InstanceID)
}

// check checks record changes under instanceID: valid names, each changed
// once.
func (r RecordChanges) check(instanceID string) error {
	seen := map[string]bool{}
	names := r.Remove
	for _, s := range r.Save {
		if s.InstanceID != instanceID {
			return fmt.Errorf("record %s is of instance %s, not %s", s.Name, s.InstanceID, instanceID)
		}
		if err := CheckRecordName(s.Name); err != nil {
			return err
		}
		names = append(names, s.Name)
	}
	for _, n := range names {
		if err := CheckIDs(n); err != nil {
			return err
		}
		if seen[n] {
			return fmt.Errorf("record %s is changed twice", n)
		}
		seen[n] = true
	}
	return nil
}
