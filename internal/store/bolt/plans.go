package bolt

import (
	"slices"
	"strings"
	"sync"

	"go.etcd.io/bbolt"
)

// planIndex is the table's ByPlan index for bolt: each instance's plan, in
// memory, so that ListInstances of a plan reads that plan's instances and
// no other item, and an instance write adds no page to its commit (a
// bucket of its own would add its leaf and branch to every new instance's
// commit). The file lock makes this process the file's only writer, so
// the index, filled from the instance items when the store opens, stays
// whole: every write that creates, deletes or moves an instance records
// the move (tx.move), and the index takes it once the write is committed.
// Writes that change one instance's plan or existence are never
// concurrent (each is conditional on the instance as the one before left
// it), so they are taken in the order they were committed.
type planIndex struct {
	mu sync.RWMutex
	// plan is each instance's plan, by its number in plans; ids, each
	// plan's instances, by the same number. Tables without pointers
	// (idtable.go): the collector does not go through an entry per
	// instance.
	plan   *idTable[uint32]
	ids    map[uint32]*idTable[struct{}]
	plans  []string
	number map[string]uint32
}

// reset empties the index; p.mu is held.
func (p *planIndex) reset() {
	p.plan, p.ids, p.plans, p.number = newIDTable[uint32](), map[uint32]*idTable[struct{}]{}, nil, map[string]uint32{}
}

// planMove is an instance now of Plan, "" once deleted.
type planMove struct{ InstanceID, Plan string }

// addLocked indexes the instance of the partition id, if any (a
// deprovisioned one's operations stay without it); p.mu is held.
func (p *planIndex) addLocked(items *bbolt.Bucket, id string) error {
	key := instanceKey(id)
	v := items.Get(key)
	if v == nil {
		return nil
	}
	inst, err := decode(key, v, instanceItem.instance)
	if err != nil {
		return err
	}
	p.set(id, inst.PlanID)
	return nil
}

// has says whether the index has the instance under plan ("": not at all).
func (p *planIndex) has(instanceID, plan string) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	n, ok := p.plan.get(instanceID)
	if plan == "" {
		return !ok
	}
	return ok && p.plans[n] == plan
}

// apply takes the moves of a committed write.
func (p *planIndex) apply(moves []planMove) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range moves {
		p.set(m.InstanceID, m.Plan)
	}
}

func (p *planIndex) set(instanceID, plan string) {
	if old, ok := p.plan.get(instanceID); ok {
		ids := p.ids[old]
		ids.delete(instanceID)
		if ids.len() == 0 {
			delete(p.ids, old)
		}
	}
	if plan == "" {
		p.plan.delete(instanceID)
		return
	}
	n, ok := p.number[plan]
	if !ok {
		// The index outlives the item the plan's id was read from, whose
		// string fields are parts of the whole item (br.str): a copy.
		n = uint32(len(p.plans))
		p.plans = append(p.plans, strings.Clone(plan))
		p.number[p.plans[n]] = n
	}
	p.plan.set(instanceID, n) // over the old plan's number, if any
	ids := p.ids[n]
	if ids == nil {
		ids = newIDTable[struct{}]()
		p.ids[n] = ids
	}
	ids.set(instanceID, struct{}{})
}

// after returns the ids of plan's instances above after, in key order
// (compareIDs).
func (p *planIndex) after(plan, after string) []string {
	p.mu.RLock()
	var out []string
	if n, ok := p.number[plan]; ok {
		// A plan seen before has a table while it has instances.
		if ids := p.ids[n]; ids != nil {
			out = make([]string, 0, ids.len())
			ids.each(func(id []byte, _ struct{}) {
				if after == "" || compareIDs(string(id), after) > 0 {
					out = append(out, string(id))
				}
			})
		}
	}
	p.mu.RUnlock()
	// In the order of their keys, as a listing without a plan.
	slices.SortFunc(out, compareIDs)
	return out
}
