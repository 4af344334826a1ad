package dynamo_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// TestRace races locks (update at the instance's version) against binds of
// different bindings on one instance, released together. The lock and the
// binds exclude each other, so each round ends one of two ways: one lock won
// and nothing else (the instance held, its version moved once, no binding
// counted), or no lock won and every bind did (the instance idle at its
// version, counting every bind). Anything else, any error that is not a
// conflict, or a conflict without the instance, fails.
func TestRace(t *testing.T) {
	const (
		racers = 32
		rounds = 20
		binds  = racers / 2 // odd racers bind, even racers lock
	)
	ctx := t.Context()
	var lockRounds, bindRounds, conflicts int
	apiCalls := map[string]int{}
	start := time.Now()
	for round := range rounds {
		// A table per round keeps moto's copy of the table per transaction small.
		e := newEnv(t)
		s := e.store
		id := fmt.Sprintf("race-%02d", round)
		inst := provision(t, s, id)
		locks := make([]broker.LockInstance, racers)
		bindOps := make([]broker.Operation, racers)
		for i := range racers {
			locks[i] = lockFor(inst, broker.KindUpdate, fmt.Sprintf("upd-%02d", i))
			bindOps[i] = operation(id, fmt.Sprintf("bind-%02d", i), broker.KindBind)
			bindOps[i].BindingID = fmt.Sprintf("b-%02d", i)
		}
		errs := make([]error, racers)
		release := make(chan struct{})
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				<-release
				if i%2 == 0 {
					errs[i] = s.LockInstance(ctx, locks[i])
				} else {
					errs[i] = s.CreateBinding(ctx, bindingOf(id, bindOps[i].BindingID, bindOps[i].ID), bindOps[i], nil)
				}
			})
		}
		close(release)
		wg.Wait()

		var lockWinners, bindWinners, wantInProgress []string
		for i, err := range errs {
			var c *broker.ConflictError
			switch {
			case err == nil && i%2 == 0:
				lockWinners = append(lockWinners, locks[i].Op.ID)
				wantInProgress = append(wantInProgress, locks[i].Op.ID)
			case err == nil:
				bindWinners = append(bindWinners, bindOps[i].ID)
				wantInProgress = append(wantInProgress, bindOps[i].ID)
			case !errors.As(err, &c):
				t.Errorf("%s racer %d: got %v, want success or a conflict", id, i, err)
			case c.Instance == nil:
				t.Errorf("%s racer %d: the conflict carries no instance", id, i)
			default:
				conflicts++
			}
		}
		got, err := s.GetInstance(ctx, id)
		must(t, err, "GetInstance")
		switch {
		case len(lockWinners) == 1 && len(bindWinners) == 0:
			lockRounds++
			want := locks[slices.IndexFunc(locks, func(l broker.LockInstance) bool { return l.Op.ID == lockWinners[0] })].Instance
			if got.Op != want.Op || got.Version != inst.Version+1 || got.BindingOps != 0 || got.State != broker.InstanceUpdating {
				t.Errorf("%s: a lock won, instance is op %q version %d binding_ops %d state %s; want op %q version %d, no binding ops",
					id, got.Op, got.Version, got.BindingOps, got.State, want.Op, inst.Version+1)
			}
		case len(lockWinners) == 0 && len(bindWinners) == binds:
			bindRounds++
			if got.Op != "" || got.Version != inst.Version+int64(binds) || got.BindingOps != binds || got.State != broker.InstanceReady {
				t.Errorf("%s: the binds won, instance is op %q version %d binding_ops %d state %s; want idle at version %d counting %d",
					id, got.Op, got.Version, got.BindingOps, got.State, inst.Version+int64(binds), binds)
			}
		default:
			t.Errorf("%s: %d locks and %d binds won, want exactly one lock, or every bind", id, len(lockWinners), len(bindWinners))
		}
		ops, err := s.ListOperations(ctx, id)
		must(t, err, "ListOperations")
		var inProgress []string
		for _, op := range ops {
			if !op.Finished() {
				inProgress = append(inProgress, op.ID)
			}
		}
		slices.Sort(inProgress)
		slices.Sort(wantInProgress)
		if !slices.Equal(inProgress, wantInProgress) {
			t.Errorf("%s: operations in progress %q, want the winners' %q", id, inProgress, wantInProgress)
		}
		for name, n := range e.calls.Take() {
			apiCalls[name] += n
		}
	}
	t.Logf("%d rounds of %d racers in %s: a lock won %d rounds, the binds won %d; %d conflicts; API calls %v",
		rounds, racers, time.Since(start).Round(time.Millisecond), lockRounds, bindRounds, conflicts, apiCalls)
}
