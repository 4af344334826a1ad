package dynamo_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/store/dynamo"
	"github.com/serverless-osb/broker/internal/store/storetest"
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

// The store's contracts (the store's, the secrets', the slots') hold when
// the first answer of every write is lost after moto carried the write
// out, and the SDK tries it again: every write the store makes is one
// whose retry finds its own work done. Without retried.go's check,
// UpdateDetached, UpdateCampaignItem and ReplaceSecret answered conflicts
// here for writes they had made.
func TestContractWhenEveryWriteLosesItsFirstAnswer(t *testing.T) {
	writes := []string{"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
	noWait := func(o *dynamodb.Options) { o.Retryer = mototest.RetryAtOnce() }
	var envs []*env
	lossy := func(t *testing.T) *env {
		e := newEnv(t, noWait)
		e.lost.LoseEvery(writes...)
		envs = append(envs, e)
		return e
	}
	storetest.Run(t, func(t *testing.T) broker.Store { return lossy(t).store })
	storetest.RunSecrets(t, func(t *testing.T) (broker.Store, storetest.Interleave) {
		e := lossy(t)
		return e.store, e.afterNextGet
	})
	storetest.RunSlots(t, func(t *testing.T, perPlan int) broker.Slots {
		e := lossy(t)
		return dynamo.NewSlots(e.client, e.table, perPlan)
	})
	lost := map[string]int{}
	for _, e := range envs {
		for _, op := range e.lost.Lost() {
			lost[op]++
		}
	}
	// Each kind of write the store makes lost answers (the contract
	// makes them all).
	for _, op := range []string{"PutItem", "TransactWriteItems"} {
		if lost[op] < 10 {
			t.Errorf("answers lost: %v; want at least 10 of %s's", lost, op)
		}
	}
	t.Logf("answers lost, by call: %v", lost)
}
