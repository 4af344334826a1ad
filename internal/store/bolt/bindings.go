package bolt

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/uuid"
	"go.etcd.io/bbolt"

	"github.com/serverless-osb/broker/internal/broker"
)

// bindingIndex is each binding's slot, in memory: where its items are in
// its instance's partition (layout 5, keys.go). A binding's items sit
// among the instance's operations, in the order they were created
// (its slot is a UUIDv7 made when the binding was first written), so that
// a bind's items, its operation and the instance lie together, at the end
// of the partition, in one leaf of the B-tree: 5.5 page writes a bind on
// an instance with thousands of bindings, where layout 4's keys by binding
// id put the binding in one leaf and its operation and the instance in
// another (7.4). A binding is found by its id through this index, filled
// from the keys when the store opens (each binding's key holds its id).
//
// As with the plan index, the file lock makes this process the file's only
// writer. Slots are taken inside the write transaction, under the commit's
// order, so that the next transaction finds a binding the one before
// created: a slot is made when a write first puts a binding's item (or its
// record) and is kept, so that a group that is rolled back and run again
// (groupcommit) puts the binding at the same slot, and a binding deleted
// and created again reuses it. A slot is let go only once a committed
// write leaves neither the binding nor its record (drop), and only when no
// write has taken it since (gen). A slot without items, from a write that
// failed, reads as no binding. A slot is made before the write that fills
// it commits, so a reader finds every binding its view holds; it is let go
// after the write that empties it commits, so a reader whose view began
// before that commit may miss that binding, as if it read after the
// commit: the write that empties a binding's slot moves the instance's
// version too, which a write made from that reader's view is conditional
// on.
type bindingIndex struct {
	mu sync.RWMutex
	// of is each instance's bindings' slots, by binding id: a table
	// without pointers (idtable.go), which the collector does not go
	// through binding by binding.
	of map[string]*idTable[bindingSlot]
	// gen counts the slots taken.
	gen uint64
}

type bindingSlot struct {
	id [16]byte
	// gen is the index's count when a write last took the slot.
	gen uint64
}

// bindingDrop is a slot that a write left empty: the index lets it go once
// the write is committed, unless a later write took it (gen).
type bindingDrop struct {
	instanceID, bindingID string
	gen                   uint64
}

// lookup returns the binding's slot.
func (ix *bindingIndex) lookup(instanceID, bindingID string) ([16]byte, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	sl, ok := ix.slotLocked(instanceID, bindingID)
	return sl.id, ok
}

// slotLocked returns the binding's slot; ix.mu is held.
func (ix *bindingIndex) slotLocked(instanceID, bindingID string) (bindingSlot, bool) {
	if t := ix.of[instanceID]; t != nil {
		return t.get(bindingID)
	}
	return bindingSlot{}, false
}

// take returns the binding's slot, made now when it has none, for a write.
func (ix *bindingIndex) take(instanceID, bindingID string) [16]byte {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.gen++
	if t := ix.of[instanceID]; t != nil {
		if sl, ok := t.get(bindingID); ok {
			sl.gen = ix.gen
			t.set(bindingID, sl)
			return sl.id
		}
	}
	sl := bindingSlot{id: uuid.Must(uuid.NewV7()), gen: ix.gen}
	ix.addLocked(instanceID, bindingID, sl)
	return sl.id
}

// addLocked indexes a slot; ix.mu is held. The index outlives the items
// the ids may be parts of (br.str): copies of its own (the table copies
// the binding's).
func (ix *bindingIndex) addLocked(instanceID, bindingID string, sl bindingSlot) {
	t := ix.of[instanceID]
	if t == nil {
		t = newIDTable[bindingSlot]()
		ix.of[strings.Clone(instanceID)] = t
	}
	t.set(bindingID, sl)
}

// genOf returns the slot's gen, for a drop (0: no slot).
func (ix *bindingIndex) genOf(instanceID, bindingID string) uint64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	sl, _ := ix.slotLocked(instanceID, bindingID)
	return sl.gen
}

// apply lets go of the slots of a committed write's drops.
func (ix *bindingIndex) apply(drops []bindingDrop) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, d := range drops {
		t := ix.of[d.instanceID]
		if t == nil {
			continue
		}
		if sl, ok := t.get(d.bindingID); ok && sl.gen == d.gen {
			t.delete(d.bindingID)
			if t.len() == 0 {
				delete(ix.of, d.instanceID)
			}
		}
	}
}

// indexedBinding is a binding's id and slot.
type indexedBinding struct {
	id   string
	slot [16]byte
}

// list returns the instance's bindings' slots in the order of their ids
// (compareIDs), as layout 4's keys listed them.
func (ix *bindingIndex) list(instanceID string) []indexedBinding {
	ix.mu.RLock()
	var out []indexedBinding
	if t := ix.of[instanceID]; t != nil {
		out = make([]indexedBinding, 0, t.len())
		t.each(func(id []byte, sl bindingSlot) { out = append(out, indexedBinding{string(id), sl.id}) })
	}
	ix.mu.RUnlock()
	slices.SortFunc(out, func(a, b indexedBinding) int { return compareIDs(a.id, b.id) })
	return out
}

// fillLocked indexes the bindings of the partition id, read with c from
// their keys (a binding's or its record's, skBinding after a slot under
// skOperation); ix.mu is held.
func (ix *bindingIndex) fillLocked(c *bbolt.Cursor, id string) error {
	prefix := pkWith(id, skOperation)
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		slot, bindingID, _, isBinding, ok := slotSK(k[len(prefix):])
		if !ok {
			return fmt.Errorf("key %s is of no kind this broker knows", showKey(k))
		}
		if !isBinding {
			continue // an operation
		}
		if _, ok := ix.slotLocked(id, bindingID); !ok {
			ix.addLocked(id, bindingID, bindingSlot{id: slot})
		}
	}
	return nil
}

// bindingSlot is the binding's slot, for a read: ok is false when it has
// none (no binding, and no record of one).
func (t tx) bindingSlot(instanceID, bindingID string) ([16]byte, bool) {
	return t.bindings.lookup(instanceID, bindingID)
}

// takeSlot is the binding's slot, for a write that puts its item or its
// record.
func (t tx) takeSlot(instanceID, bindingID string) [16]byte {
	return t.bindings.take(instanceID, bindingID)
}

// emptied records, after a write deleted the binding's item or its record,
// that its slot is empty if neither is left; key is the binding's item's.
func (t tx) emptied(instanceID, bindingID string, key []byte) {
	if t.drops == nil || t.has(key) || t.has(append(key, skRecordOf)) {
		return
	}
	*t.drops = append(*t.drops, bindingDrop{instanceID, bindingID, t.bindings.genOf(instanceID, bindingID)})
}

// deleteBinding deletes the binding's item (its record stays).
func (t tx) deleteBinding(instanceID, bindingID string) error {
	slot, ok := t.bindingSlot(instanceID, bindingID)
	if !ok {
		return nil
	}
	key := bindingKey(instanceID, slot, bindingID)
	if err := t.items.Delete(key); err != nil {
		return err
	}
	t.emptied(instanceID, bindingID, key)
	return nil
}

// resourceKey is a record's key: a binding's beside the binding, at its
// slot (taken, for a write), any other's under skRecord. ok is false for
// the record of a binding without a slot, which there is none of to read
// or delete.
func (t tx) resourceKey(instanceID, name string, write bool) (key []byte, ok bool) {
	bindingID, isBinding := strings.CutPrefix(name, broker.BindingRecordsFrom)
	if !isBinding {
		return recordKey(instanceID, name), true
	}
	var slot [16]byte
	if write {
		slot = t.takeSlot(instanceID, bindingID)
	} else if slot, ok = t.bindingSlot(instanceID, bindingID); !ok {
		return nil, false
	}
	return append(bindingKey(instanceID, slot, bindingID), skRecordOf), true
}

// resource reads a record: nil when there is none.
func (t tx) resource(instanceID, name string) (*broker.Resource, error) {
	key, ok := t.resourceKey(instanceID, name, false)
	if !ok {
		return nil, nil
	}
	return get(t, key, resourceItem.resource)
}

// deleteResource deletes a record, if there is one.
func (t tx) deleteResource(instanceID, name string) error {
	key, ok := t.resourceKey(instanceID, name, false)
	if !ok {
		return nil
	}
	if err := t.items.Delete(key); err != nil {
		return err
	}
	if bindingID, isBinding := strings.CutPrefix(name, broker.BindingRecordsFrom); isBinding {
		t.emptied(instanceID, bindingID, key[:len(key)-1]) // the record's key is the binding's and skRecordOf
	}
	return nil
}
