package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Slots bound the calls that the Tasks of each plan make to its driver at
// once, so that one slow or hanging backend holds at most its plan's share
// of the workers, and the Tasks of other plans go on. The bound is per
// plan, not per backend: the plan is what a Task knows without another
// read (its flight's, a detached record's), and what a catalog names.
// Broker.Slots nil: no bound.
type Slots interface {
	// Take takes one of plan's slots for a call, when one is free: ok
	// false when none is. release gives the slot back.
	Take(ctx context.Context, planID string) (release func(), ok bool, err error)
}

// SlotWait is how long a Task that found its plan's slots taken waits (the
// workflow's Wait state: no worker's time) before it tries again.
const SlotWait = 2 * time.Second

// MemorySlots are the Slots of one process, PerPlan per plan: the local
// broker's, whose engine runs every Task in it.
type MemorySlots struct {
	PerPlan int

	mu    sync.Mutex
	taken map[string]int
}

// NewMemorySlots returns Slots of perPlan (at least 1) per plan.
func NewMemorySlots(perPlan int) *MemorySlots {
	return &MemorySlots{PerPlan: max(1, perPlan), taken: map[string]int{}}
}

var _ Slots = (*MemorySlots)(nil)

// Take implements Slots.
func (s *MemorySlots) Take(_ context.Context, planID string) (func(), bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken[planID] >= s.PerPlan {
		return nil, false, nil
	}
	s.taken[planID]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.taken[planID]--; s.taken[planID] <= 0 {
				delete(s.taken, planID)
			}
		})
	}, true, nil
}

// takeSlot takes a slot of plan for a Task's call to driver. A driver
// whose changes live in its records (InMemory) calls no backend, and takes
// none.
func (b *Broker) takeSlot(ctx context.Context, planID string, driver Driver) (func(), bool, error) {
	if im, ok := driver.(InMemory); b.Slots == nil || ok && im.InMemory() {
		return func() {}, true, nil
	}
	release, ok, err := b.Slots.Take(ctx, planID)
	if err != nil {
		return nil, false, fmt.Errorf("take a slot of plan %s: %w", planID, err)
	}
	return release, ok, nil
}

// waitForSlot is the progress of a Task whose plan's slots were all taken:
// it called nothing; the record says why it waits (and, when it was to
// begin, that the next Task begins), and the workflow tries again after
// SlotWait.
func (b *Broker) waitForSlot(ctx context.Context, f *flight, begin bool) (TaskProgress, error) {
	b.Logger.InfoContext(ctx, "every slot of the plan is taken; the operation waits for one")
	f.op.OutageInBegin = f.op.OutageInBegin || begin
	p := Progress{RetryAfter: SlotWait,
		Description: "Waiting for a turn: the service's backend is busy with other changes of this plan."}
	if err := b.recordProgress(ctx, f, p); err != nil {
		if errors.Is(err, ErrTakenOver) {
			return TaskProgress{Done: true}, nil
		}
		return TaskProgress{}, err
	}
	return waitFor(SlotWait), nil
}
