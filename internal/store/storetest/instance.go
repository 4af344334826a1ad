package storetest

import (
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
)

var instanceCases = []testCase{
	{"CreateInstance stores the instance and its provision in progress", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		op := newOperation("i-1", "prov-i-1", broker.KindProvision, at(0))
		inst := newInstance("i-1", op.ID)
		must(t, s.CreateInstance(t.Context(), inst, op, nil), "CreateInstance")
		equal(t, "instance", getInstance(t, s, "i-1"), &inst)
		equal(t, "operation", getOperation(t, s, "i-1", op.ID), &op)
		equal(t, "operations in progress", inProgressIDs(t, s), []string{op.ID})
	}},
	{"CreateInstance of an existing id reports the stored instance and changes nothing", func(t *testing.T, newStore NewStore) {
		for _, existing := range []struct {
			name  string
			setup func(t *testing.T, s broker.Store)
		}{
			{"while it provisions", func(t *testing.T, s broker.Store) { startProvision(t, s, "i-1") }},
			{"once ready", func(t *testing.T, s broker.Store) { provision(t, s, "i-1") }},
			{"once failed", func(t *testing.T, s broker.Store) { failProvision(t, s, "i-1") }},
		} {
			t.Run(existing.name, func(t *testing.T) {
				s := newStore(t)
				existing.setup(t, s)
				before := snapshot(t, s)
				op := newOperation("i-1", "prov-again", broker.KindProvision, at(50))
				inst := newInstance("i-1", op.ID)
				inst.Fingerprint = "other request"
				c := conflict(t, s.CreateInstance(t.Context(), inst, op, nil))
				equal(t, "conflict instance", c.Instance, before.instance("i-1"))
				unchanged(t, s, before)
			})
		}
	}},
	{"LockInstance of an idle instance stores the instance and the new operation", func(t *testing.T, newStore NewStore) {
		for _, kind := range []broker.OperationKind{broker.KindUpdate, broker.KindDeprovision} {
			t.Run(string(kind), func(t *testing.T) {
				s := newStore(t)
				provision(t, s, "i-1")
				b := bind(t, s, "i-1", "b-1")
				inst := *getInstance(t, s, "i-1")
				op := newOperation("i-1", "op-1", kind, at(100))
				next := inst
				next.State, next.Op, next.LastOp, next.Version = broker.InstanceUpdating, op.ID, op.ID, inst.Version+1
				next.PlanID, next.UpdatedAt = "plan-large", at(100)
				must(t, s.LockInstance(t.Context(), broker.LockInstance{Instance: next, Version: inst.Version, Op: op}), "LockInstance")
				equal(t, "instance", getInstance(t, s, "i-1"), &next)
				equal(t, "operation", getOperation(t, s, "i-1", op.ID), &op)
				equal(t, "binding", getBinding(t, s, "i-1", "b-1"), &b)
				equal(t, "operations in progress", inProgressIDs(t, s), []string{op.ID})
			})
		}
	}},
	{"LockInstance halts the provision that holds the instance in the same write", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		inst, prov := startProvision(t, s, "i-1")
		dep := newOperation("i-1", "dep-1", broker.KindDeprovision, at(100))
		next := inst
		next.State, next.Op, next.LastOp, next.Version = broker.InstanceDeprovisioning, dep.ID, dep.ID, inst.Version+1
		halted := finished(prov, broker.OperationFailed)
		must(t, s.LockInstance(t.Context(), broker.LockInstance{
			Instance: next, Version: inst.Version, Holder: prov.ID, Op: dep, Halted: &halted,
		}), "LockInstance")
		equal(t, "instance", getInstance(t, s, "i-1"), &next)
		equal(t, "deprovision", getOperation(t, s, "i-1", dep.ID), &dep)
		equal(t, "halted provision", getOperation(t, s, "i-1", prov.ID), &halted)
		equal(t, "operations in progress", inProgressIDs(t, s), []string{dep.ID})
	}},
	{"LockInstance fails and changes nothing", func(t *testing.T, newStore NewStore) {
		// Each setup breaks exactly one condition and returns the lock to try.
		cases := []struct {
			name  string
			setup func(t *testing.T, s broker.Store) broker.LockInstance
		}{
			{"when the instance does not exist", func(t *testing.T, s broker.Store) broker.LockInstance {
				provision(t, s, "i-2")
				return updateLock(newInstance("i-1", ""), "")
			}},
			{"when the expected version is older than the stored one", func(t *testing.T, s broker.Store) broker.LockInstance {
				inst := provision(t, s, "i-1")
				l := updateLock(inst, "")
				l.Version = inst.Version - 1
				return l
			}},
			{"when the expected version is newer than the stored one", func(t *testing.T, s broker.Store) broker.LockInstance {
				inst := provision(t, s, "i-1")
				l := updateLock(inst, "")
				l.Version = inst.Version + 1
				return l
			}},
			{"when an update holds the instance", func(t *testing.T, s broker.Store) broker.LockInstance {
				inst, _ := startInstanceOp(t, s, provision(t, s, "i-1"), broker.KindUpdate)
				return updateLock(inst, "")
			}},
			{"when a provision holds the instance and no holder is expected", func(t *testing.T, s broker.Store) broker.LockInstance {
				inst, _ := startProvision(t, s, "i-1")
				return updateLock(inst, "")
			}},
			{"when the instance is idle but a provision is expected to hold it", func(t *testing.T, s broker.Store) broker.LockInstance {
				inst := provision(t, s, "i-1")
				l := updateLock(inst, "prov-i-1")
				halted := finished(*getOperation(t, s, "i-1", "prov-i-1"), broker.OperationFailed)
				l.Halted = &halted
				return l
			}},
			{"when another operation holds the instance than the one expected", func(t *testing.T, s broker.Store) broker.LockInstance {
				inst, _ := startInstanceOp(t, s, provision(t, s, "i-1"), broker.KindDeprovision)
				l := updateLock(inst, "prov-i-1")
				halted := finished(*getOperation(t, s, "i-1", "prov-i-1"), broker.OperationFailed)
				l.Halted = &halted
				return l
			}},
			{"when a bind is in progress", func(t *testing.T, s broker.Store) broker.LockInstance {
				provision(t, s, "i-1")
				startBind(t, s, "i-1", "b-1")
				return updateLock(*getInstance(t, s, "i-1"), "")
			}},
			{"when an unbind is in progress", func(t *testing.T, s broker.Store) broker.LockInstance {
				provision(t, s, "i-1")
				startUnbind(t, s, bind(t, s, "i-1", "b-1"))
				return updateLock(*getInstance(t, s, "i-1"), "")
			}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				s := newStore(t)
				l := tc.setup(t, s)
				before := snapshot(t, s)
				c := conflict(t, s.LockInstance(t.Context(), l))
				equal(t, "conflict instance", c.Instance, before.instance("i-1"))
				unchanged(t, s, before)
			})
		}
	}},
}

// updateLock is the LockInstance that starts update "upd-new" of inst as
// read, expecting holder.
func updateLock(inst broker.Instance, holder string) broker.LockInstance {
	op := newOperation(inst.ID, "upd-new", broker.KindUpdate, at(200))
	next := inst
	next.State, next.Op, next.LastOp, next.Version, next.UpdatedAt = broker.InstanceUpdating, op.ID, op.ID, inst.Version+1, at(200)
	return broker.LockInstance{Instance: next, Version: inst.Version, Holder: holder, Op: op}
}
