package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
)

// racers is how many goroutines race in each case.
const racers = 16

// race runs fn(0..n-1) on n goroutines released together and returns their
// errors by index.
func race(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// oneWinner checks that exactly one call succeeded and every other one got a
// *broker.ConflictError, and returns the winner's index.
func oneWinner(t *testing.T, errs []error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		var c *broker.ConflictError
		switch {
		case err == nil && winner >= 0:
			t.Errorf("racers %d and %d both succeeded", winner, i)
		case err == nil:
			winner = i
		case !errors.As(err, &c):
			t.Errorf("racer %d: got %v, want success or a *broker.ConflictError", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no racer succeeded: %v", errs)
	}
	return winner
}

var raceCases = []testCase{
	{"concurrent binds of different bindings all succeed and are all counted", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		inst := provision(t, s, "i-1")
		bindings := make([]broker.Binding, racers)
		errs := race(racers, func(i int) error {
			id := fmt.Sprintf("race-%02d", i)
			op := newBindingOperation("i-1", id, "bind-"+id, broker.KindBind, at(10))
			bindings[i] = newBinding("i-1", id, op.ID)
			return s.CreateBinding(t.Context(), bindings[i], op, nil)
		})
		for i, err := range errs {
			if err != nil {
				t.Errorf("bind %d: %v", i, err)
			}
		}
		for _, b := range bindings {
			equal(t, "binding "+b.ID, getBinding(t, s, "i-1", b.ID), &b)
		}
		want := inst
		want.BindingOps, want.Version = racers, inst.Version+racers
		equal(t, "instance", getInstance(t, s, "i-1"), &want)
		if got := len(inProgressIDs(t, s)); got != racers {
			t.Errorf("operations in progress: got %d, want %d", got, racers)
		}
	}},
	{"concurrent binds of the same binding let exactly one win", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		provision(t, s, "i-1")
		ops := make([]broker.Operation, racers)
		errs := race(racers, func(i int) error {
			ops[i] = newBindingOperation("i-1", "b-1", fmt.Sprintf("bind-%02d", i), broker.KindBind, at(10))
			return s.CreateBinding(t.Context(), newBinding("i-1", "b-1", ops[i].ID), ops[i], nil)
		})
		winner := oneWinner(t, errs)
		if got := getBinding(t, s, "i-1", "b-1").Op; got != ops[winner].ID {
			t.Errorf("binding held by %q, want the winner %q", got, ops[winner].ID)
		}
		if got := getInstance(t, s, "i-1").BindingOps; got != 1 {
			t.Errorf("binding_ops: got %d, want 1", got)
		}
		equal(t, "operations in progress", inProgressIDs(t, s), []string{ops[winner].ID})
	}},
	{"concurrent locks at the same version let exactly one win", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		inst := provision(t, s, "i-1")
		locks := make([]broker.LockInstance, racers)
		for i := range locks {
			locks[i] = updateLock(inst, "")
			locks[i].Op.ID = fmt.Sprintf("upd-%02d", i)
			locks[i].Instance.Op = locks[i].Op.ID
		}
		errs := race(racers, func(i int) error { return s.LockInstance(t.Context(), locks[i]) })
		winner := oneWinner(t, errs)
		equal(t, "instance", getInstance(t, s, "i-1"), &locks[winner].Instance)
		equal(t, "operations in progress", inProgressIDs(t, s), []string{locks[winner].Op.ID})
		for i, err := range errs {
			var c *broker.ConflictError
			if i != winner && errors.As(err, &c) && (c.Instance == nil || c.Instance.Op != locks[winner].Op.ID) {
				t.Errorf("racer %d: conflict reports instance %s, want it held by the winner", i, show(c.Instance))
			}
		}
	}},
	{"a bind racing a lock never leaves both in progress", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		for round := range 8 {
			id := fmt.Sprintf("round-%d", round)
			inst := provision(t, s, id)
			lock := updateLock(inst, "")
			op := newBindingOperation(id, "b-1", "bind-"+id, broker.KindBind, at(10))
			errs := race(2, func(i int) error {
				if i == 0 {
					return s.LockInstance(t.Context(), lock)
				}
				return s.CreateBinding(t.Context(), newBinding(id, "b-1", op.ID), op, nil)
			})
			oneWinner(t, errs)
			got := getInstance(t, s, id)
			if got.Op != "" && got.BindingOps > 0 {
				t.Errorf("%s: instance held by %q with %d binding operations", id, got.Op, got.BindingOps)
			}
		}
	}},
	{"concurrent UpdateDetached at the same attempts let exactly one win", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		r := newResource("i-1", "r-1")
		d := newDetached(r, "prov-i-1")
		Detach(t, s, r, d)
		next := make([]broker.Detached, racers)
		for i := range next {
			next[i] = d
			next[i].State, next[i].Attempts, next[i].UpdatedAt = broker.DetachedCleaning, 1, at(100+i)
		}
		errs := race(racers, func(i int) error { return s.UpdateDetached(t.Context(), next[i], 0) })
		winner := oneWinner(t, errs)
		equal(t, "detached", getDetached(t, s, d.ID), &next[winner])
		for i, err := range errs {
			var c *broker.ConflictError
			if i != winner && errors.As(err, &c) && *c != (broker.ConflictError{}) {
				t.Errorf("racer %d: conflict %s, want every field nil", i, show(c))
			}
		}
	}},
	{"concurrent finishes of one operation let exactly one win", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		provision(t, s, "i-1")
		startBind(t, s, "i-1", "b-2")
		b, op := startBind(t, s, "i-1", "b-1")
		b.State, b.Op = broker.BindingReady, ""
		f := broker.Finish{Op: finished(op, broker.OperationSucceeded), Binding: &b, ReleaseBinding: true}
		oneWinner(t, race(racers, func(int) error { return s.FinishOperation(t.Context(), f) }))
		if got := getInstance(t, s, "i-1").BindingOps; got != 1 {
			t.Errorf("binding_ops: got %d, want 1 (released once)", got)
		}
		equal(t, "binding", getBinding(t, s, "i-1", "b-1"), &b)
	}},
}
