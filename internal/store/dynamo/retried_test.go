package dynamo_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/store/dynamo"
)

// A conditional PutItem whose first attempt DynamoDB carried out, but
// whose answer was lost (here: a fake network, as moto cannot lose one),
// is tried again by the SDK, and the retry's condition fails on the item
// the first attempt wrote. The store takes it as done: a make test run
// failed so, on a busy moto, with "stored attempts 1, expected 0". The
// same item met without a retry is still a conflict.
func TestAWriteRetriedAfterItsAnswerWasLostIsDone(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	res := broker.Resource{InstanceID: "i-lost", Name: "db", Data: json.RawMessage(`{"n":1}`)}
	d := broker.Detached{ID: "d-lost", InstanceID: res.InstanceID, Name: res.Name, Data: res.Data, State: broker.DetachedPending}
	failed, op := startProvision(t, e.store, res.InstanceID)
	if err := e.store.PutResource(ctx, res); err != nil {
		t.Fatal(err)
	}
	failed.State, failed.Op, failed.Version = broker.InstanceFailed, "", failed.Version+1
	err := e.store.FinishOperation(ctx, broker.Finish{Op: finished(op, broker.OperationFailed), Instance: &failed,
		Detach: []broker.Detached{d}})
	if err != nil {
		t.Fatal(err)
	}

	next := d
	next.State, next.Attempts = broker.DetachedCleaning, 1
	e.lost.Lose("PutItem")
	if err := e.store.UpdateDetached(ctx, next, 0); err != nil {
		t.Fatalf("UpdateDetached whose first answer was lost: %v, want it done", err)
	}
	if got := e.lost.Lost(); !slices.Equal(got, []string{"PutItem"}) {
		t.Fatalf("answers lost: %v, want the PutItem's", got)
	}
	stored, err := e.store.GetDetached(ctx, d.ID)
	if err != nil || stored.Attempts != 1 || stored.State != broker.DetachedCleaning {
		t.Fatalf("stored %+v, %v; want attempts 1, cleaning", stored, err)
	}

	// Without a retry, the same write meets the same item: a conflict, as
	// another writer's would be (the attempt was not this call's).
	if err := e.store.UpdateDetached(ctx, next, 0); !isConflict(err) {
		t.Fatalf("UpdateDetached at stale attempts, not retried: %v, want a conflict", err)
	}
}

// A slot's Take whose PutItem lost its answer after moto wrote it finds
// its own holder on the read that follows: the slot is its, not taken by
// another (with one slot a plan, it would otherwise find none free and
// leave its own to end with its lease).
func TestATakeRetriedAfterItsAnswerWasLostHoldsItsSlot(t *testing.T) {
	e := newEnv(t)
	s := dynamo.NewSlots(e.client, e.table, 1)
	e.lost.Lose("PutItem")
	release, ok, err := s.Take(t.Context(), "p-lost")
	if err != nil || !ok {
		t.Fatalf("take whose first answer was lost: %v %v, want the slot", ok, err)
	}
	if got := e.lost.Lost(); !slices.Equal(got, []string{"PutItem"}) {
		t.Fatalf("answers lost: %v, want the PutItem's", got)
	}
	if _, ok, err := s.Take(t.Context(), "p-lost"); err != nil || ok {
		t.Fatalf("a second take: %v %v, want no slot (the first holds the only one)", ok, err)
	}
	release()
	if _, ok, err := s.Take(t.Context(), "p-lost"); err != nil || !ok {
		t.Fatalf("take once the first gave its slot back: %v %v, want the slot", ok, err)
	}
}
