package dynamo_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/store/dynamo"
	"github.com/serverless-osb/broker/internal/store/storetest"
)

func TestSlotsContract(t *testing.T) {
	storetest.RunSlots(t, func(t *testing.T, perPlan int) broker.Slots {
		e := newEnv(t)
		return dynamo.NewSlots(e.client, e.table, perPlan)
	})
}

// TestASlotsLeaseEndsWithItsTask: the slot of a Task that never gave it
// back (its Lambda crashed) frees itself when the Task's invocation would
// have ended: its context's deadline.
func TestASlotsLeaseEndsWithItsTask(t *testing.T) {
	e := newEnv(t)
	s := dynamo.NewSlots(e.client, e.table, 1)
	now := time.Now()
	s.Now = func() time.Time { return now }
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, ok, err := s.Take(ctx, "p-1"); err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	if _, ok, err := s.Take(t.Context(), "p-1"); err != nil || ok {
		t.Fatalf("take while the lease runs: %v %v, want no slot", ok, err)
	}
	now = now.Add(32 * time.Second)
	if _, ok, err := s.Take(t.Context(), "p-1"); err != nil || !ok {
		t.Fatalf("take once the lease ended: %v %v, want the slot", ok, err)
	}
}

// TestSlotsCalls: a Task that finds every slot of its plan
// taken writes nothing; one that takes a slot reads and writes once, and
// gives it back in one write.
func TestSlotsCalls(t *testing.T) {
	e := newEnv(t)
	wantCalls := func(t *testing.T, e *env, what string, want map[string]int) {
		t.Helper()
		if got := e.calls.Take(); !maps.Equal(got, want) {
			t.Errorf("%s made the calls %v, want %v", what, got, want)
		}
	}
	s := dynamo.NewSlots(e.client, e.table, 1)
	release, ok, err := s.Take(t.Context(), "p-1")
	if err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	wantCalls(t, e, "a take", map[string]int{"GetItem": 1, "PutItem": 1})
	if _, ok, err := s.Take(t.Context(), "p-1"); err != nil || ok {
		t.Fatalf("take of a full plan: %v %v", ok, err)
	}
	wantCalls(t, e, "a take of a full plan", map[string]int{"GetItem": 1})
	release()
	wantCalls(t, e, "a release", map[string]int{"UpdateItem": 1})
}
