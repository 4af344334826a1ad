package storetest

import (
	"sync"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
)

// NewSlots returns fresh broker.Slots of perPlan per plan for one test.
type NewSlots func(t *testing.T, perPlan int) broker.Slots

// RunSlots is the contract every broker.Slots passes (the local broker's in
// memory, the deployed one on the table): a plan's slots bound its takers,
// apart from every other plan's, and a slot given back may be taken again.
func RunSlots(t *testing.T, newSlots NewSlots) {
	take := func(t *testing.T, s broker.Slots, plan string) (func(), bool) {
		t.Helper()
		release, ok, err := s.Take(t.Context(), plan)
		if err != nil {
			t.Fatalf("take a slot of %s: %v", plan, err)
		}
		return release, ok
	}
	t.Run("a plan's slots are taken up to their number, and not beyond, while another plan's stay free", func(t *testing.T) {
		s := newSlots(t, 2)
		for i := range 2 {
			if _, ok := take(t, s, "p-1"); !ok {
				t.Fatalf("take %d of 2: no slot", i+1)
			}
		}
		if _, ok := take(t, s, "p-1"); ok {
			t.Fatal("a third taker of 2 slots got one")
		}
		if _, ok := take(t, s, "p-2"); !ok {
			t.Fatal("another plan's taker got no slot")
		}
	})
	t.Run("a slot given back is free again, and giving it back twice frees only it", func(t *testing.T) {
		s := newSlots(t, 1)
		release, ok := take(t, s, "p-1")
		if !ok {
			t.Fatal("no slot")
		}
		release()
		again, ok := take(t, s, "p-1")
		if !ok {
			t.Fatal("the slot given back is still taken")
		}
		release()
		if _, ok := take(t, s, "p-1"); ok {
			t.Fatal("a slot given back twice let a second taker in")
		}
		again()
	})
	t.Run("takers at once get at most the plan's slots", func(t *testing.T) {
		s := newSlots(t, 2)
		var wg sync.WaitGroup
		var mu sync.Mutex
		got := 0
		for range 6 {
			wg.Go(func() {
				if _, ok, err := s.Take(t.Context(), "p-1"); err != nil {
					t.Error(err)
				} else if ok {
					mu.Lock()
					got++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if got < 1 || got > 2 {
			t.Fatalf("%d of 6 takers at once got a slot, want 1 or 2 (2 slots)", got)
		}
	})
}
