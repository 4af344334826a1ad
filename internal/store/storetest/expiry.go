package storetest

import (
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

var expiryCases = []testCase{
	{"DeleteExpiredOperations removes only finished operations past their expiry", func(t *testing.T, newStore NewStore) {
		// A store whose database expires the records by itself (DynamoDB
		// TTL) may remove none; whatever it removes must be exactly the
		// expired ones, and it must count them.
		s := newStore(t)
		now := at(3600).Add(broker.Retention)
		// provisionAt provisions id with a provision created at created and
		// finished a minute later; edit may change the finished record.
		provisionAt := func(id string, created time.Time, edit func(*broker.Operation)) broker.Operation {
			t.Helper()
			op := newOperation(id, "prov-"+id, broker.KindProvision, created)
			must(t, s.CreateInstance(t.Context(), newInstance(id, op.ID), op, nil), "CreateInstance "+id)
			inst := *getInstance(t, s, id)
			inst.State, inst.Op = broker.InstanceReady, ""
			done := finished(op, broker.OperationSucceeded)
			if edit != nil {
				edit(&done)
			}
			must(t, s.FinishOperation(t.Context(), broker.Finish{Op: done, Instance: &inst}), "FinishOperation "+id)
			return done
		}
		expired := []broker.Operation{provisionAt("i-old", at(0), nil)}
		kept := []broker.Operation{
			provisionAt("i-new", at(7200), nil),
			provisionAt("i-edge", at(0), func(op *broker.Operation) { op.ExpiresAt = now }), // not before now
			provisionAt("i-kept", at(0), func(op *broker.Operation) { op.ExpiresAt = time.Time{} }),
		}
		// The operations of a deprovisioned instance stay, and expire like any.
		_, dep := startInstanceOp(t, s, *getInstance(t, s, "i-old"), broker.KindDeprovision)
		depDone := finished(dep, broker.OperationSucceeded)
		must(t, s.FinishOperation(t.Context(), broker.Finish{Op: depDone, DeleteInstance: true}), "FinishOperation deprovision")
		expired = append(expired, depDone)
		// An operation in progress is never removed, even with an expiry.
		busy := newOperation("i-busy", "prov-i-busy", broker.KindProvision, at(0))
		busy.ExpiresAt = at(1)
		must(t, s.CreateInstance(t.Context(), newInstance("i-busy", busy.ID), busy, nil), "CreateInstance i-busy")
		kept = append(kept, busy)
		// Nor is any item that is not an operation.
		r := newResource("i-new", "r-1")
		putResource(t, s, r)
		d := newDetached(newResource("i-new", "r-2"), "prov-i-new")
		Detach(t, s, newResource("i-new", "r-2"), d)
		instances := map[string]*broker.Instance{}
		for _, id := range []string{"i-old", "i-new", "i-edge", "i-kept", "i-busy"} {
			instances[id] = getInstance(t, s, id)
		}

		n, err := s.DeleteExpiredOperations(t.Context(), now)
		must(t, err, "DeleteExpiredOperations")
		for _, op := range kept {
			equal(t, "kept operation "+op.ID, getOperation(t, s, op.InstanceID, op.ID), &op)
		}
		switch n {
		case 0:
			for _, op := range expired {
				equal(t, "expired operation "+op.ID+" after none was removed", getOperation(t, s, op.InstanceID, op.ID), &op)
			}
		case len(expired):
			for _, op := range expired {
				if getOperation(t, s, op.InstanceID, op.ID) != nil {
					t.Errorf("expired operation %s is still stored", op.ID)
				}
			}
		default:
			t.Errorf("removed %d operations, want %d (every expired one) or 0 (left to the database)", n, len(expired))
		}
		equal(t, "operations in progress", inProgressIDs(t, s), []string{busy.ID})
		for id, inst := range instances {
			equal(t, "instance "+id, getInstance(t, s, id), inst)
		}
		equal(t, "resource", getResource(t, s, "i-new", "r-1"), &r)
		equal(t, "detached list", listDetached(t, s), []broker.Detached{d})

		again, err := s.DeleteExpiredOperations(t.Context(), now)
		must(t, err, "DeleteExpiredOperations again")
		if again != 0 {
			t.Errorf("a second call removed %d operations, want 0", again)
		}
	}},
}
