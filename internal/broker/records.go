package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The drivers' record kit: how a driver names, reads, makes and changes
// its resource records (Resource), which the broker writes with its own
// writes (RecordChanges) and hands back in each Change.

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

// bindingRecordPrefix starts the name of every binding's record.
const bindingRecordPrefix = "binding-"

// BindingRecord is the name of the resource record a driver keeps for a
// binding. A binding's change is handed that record and the instance's
// records, an instance's change only the instance's, not the bindings'
// (Load reads only those; a deprovision's change has every record), so
// that a change costs the same on an instance with many bindings; a driver
// therefore names no instance record with this prefix, nor one that sorts
// before it (CheckRecordName): the instance's own records are then the
// one key range above the bindings', which a store reads in one call.
func BindingRecord(bindingID string) string { return bindingRecordPrefix + bindingID }

// BindingRecords are the bounds of the bindings' record names, for a
// store to read around them: every name n that IsBindingRecord has
// BindingRecordsFrom <= n < BindingRecordsTo, in byte order, and every
// other record's name is BindingRecordsTo or above (CheckRecordName).
const (
	BindingRecordsFrom = bindingRecordPrefix
	BindingRecordsTo   = "binding." // '.' follows '-'
)

// CheckRecordName refuses the name of a record to be written that sorts
// before the bindings' records ("a-1", "Stack", "backup"): every name
// the drivers have ever given sorts after them ("instance", "stack"), so
// that a store reads an instance's own records in one key range, above
// the bindings', rather than two around them.
func CheckRecordName(name string) error {
	if name < BindingRecordsFrom {
		return fmt.Errorf("record name %q sorts before the bindings' records (%q): name an instance's record from %q on, in byte order (\"instance\", \"stack\")",
			name, BindingRecordsFrom, BindingRecordsTo)
	}
	return nil
}

// IsBindingRecord reports whether the record called name is a binding's.
func IsBindingRecord(name string) bool { return strings.HasPrefix(name, bindingRecordPrefix) }

// RecordFor reports whether the record called name belongs in a snapshot
// for bindingID (empty: the instance, which gets its own records only).
func RecordFor(name, bindingID string) bool {
	return !IsBindingRecord(name) || (bindingID != "" && name == BindingRecord(bindingID))
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
