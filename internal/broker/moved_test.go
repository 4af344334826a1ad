package broker_test

import (
	"fmt"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
)

// TestDecidedAgainWhenTheInstanceMoved: every binding operation moves its
// instance's version, and an update or deprovision locks the instance at
// the version it read. One that a binding's change overtook between its
// read and its write is refused by the store and decided again on what is
// stored now, at most three times.
func TestDecidedAgainWhenTheInstanceMoved(t *testing.T) {
	// bindBeforeLock makes the next times LockInstance writes bind a new
	// binding first, synchronously, as another request would.
	bindBeforeLock := func(h *harness, times int) {
		n := 0
		h.writes.before = func(write string) {
			if write != "LockInstance" || n == times {
				return
			}
			n++
			if _, err := h.b.Bind(ctx, bindOf("i-1", fmt.Sprintf("b-%d", n), planSync, false, "")); err != nil {
				h.t.Errorf("the bind between the read and the write: %v", err)
			}
		}
	}
	countLocks := func(h *harness) int {
		n := 0
		for _, w := range h.writes.since() {
			if w == "LockInstance" {
				n++
			}
		}
		return n
	}
	t.Run("an update overtaken by a bind between its read and its write is decided again, and succeeds", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.ready("i-1", planSync)
		bindBeforeLock(h, 1)
		h.writes.reset()
		if res, err := h.b.Update(ctx, updateOf("i-1", "", false, `{"size":2}`)); err != nil || res.Result != broker.ResultOK {
			t.Fatalf("update: %+v %v", res, err)
		}
		if n := countLocks(h); n != 2 {
			t.Fatalf("%d locks, want the refused one and the second", n)
		}
		if inst := h.instance("i-1"); string(inst.Parameters) != `{"size":2}` || inst.State != broker.InstanceReady {
			t.Fatalf("instance %+v, want updated", inst)
		}
	})
	t.Run("a deprovision overtaken by a bind between its read and its write reads again, and deletes the new binding too", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.ready("i-1", planSync)
		bindBeforeLock(h, 1)
		if res, err := h.b.Deprovision(ctx, deprovisionOf("i-1", planSync, false)); err != nil || res.Result != broker.ResultOK {
			t.Fatalf("deprovision: %+v %v", res, err)
		}
		snap := h.loadWhole("i-1")
		if snap.Instance != nil || h.binding("i-1", "b-1") != nil || len(snap.BindingIDs) != 0 {
			t.Fatalf("left behind: %+v", snap)
		}
	})
	t.Run("an update whose instance keeps moving is told to try again (422 ConcurrencyError) and changes nothing", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.ready("i-1", planSync)
		bindBeforeLock(h, 3)
		h.writes.reset()
		_, err := h.b.Update(ctx, updateOf("i-1", "", false, `{"size":2}`))
		wantCode(t, err, broker.CodeConcurrencyError)
		if n := countLocks(h); n != 3 {
			t.Fatalf("%d locks, want 3 tries", n)
		}
		if inst := h.instance("i-1"); inst.Parameters != nil || inst.LastOp != h.ops("i-1")[0].ID {
			t.Fatalf("instance %+v changed", inst)
		}
	})
}
