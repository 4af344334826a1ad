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
	// plan is each instance's plan; ids, each plan's instances.
	plan map[string]string
	ids  map[string]map[string]struct{}
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
	got, ok := p.plan[instanceID]
	return got == plan && ok == (plan != "")
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
	if old, ok := p.plan[instanceID]; ok {
		delete(p.ids[old], instanceID)
		if len(p.ids[old]) == 0 {
			delete(p.ids, old)
		}
		delete(p.plan, instanceID)
	}
	if plan == "" {
		return
	}
	// The index outlives the items it was read from, whose string fields
	// are parts of the whole item (br.str): it keeps copies of its own, one
	// string per plan.
	instanceID = strings.Clone(instanceID)
	if ids := p.ids[plan]; ids != nil {
		for id := range ids {
			plan = p.plan[id] // the index's own copy
			break
		}
	} else {
		plan = strings.Clone(plan)
	}
	p.plan[instanceID] = plan
	if p.ids[plan] == nil {
		p.ids[plan] = map[string]struct{}{}
	}
	p.ids[plan][instanceID] = struct{}{}
}

// after returns the ids of plan's instances above after, in key order
// (compareIDs).
func (p *planIndex) after(plan, after string) []string {
	p.mu.RLock()
	out := make([]string, 0, len(p.ids[plan]))
	for id := range p.ids[plan] {
		if after == "" || compareIDs(id, after) > 0 {
			out = append(out, id)
		}
	}
	p.mu.RUnlock()
	// In the order of their keys, as a listing without a plan.
	slices.SortFunc(out, compareIDs)
	return out
}
