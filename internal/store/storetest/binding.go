package storetest

import (
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
)

var bindingCases = []testCase{
	{"CreateBinding stores the binding and its bind, and counts a binding operation", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		inst := provision(t, s, "i-1")
		op := newBindingOperation("i-1", "b-1", "bind-b-1", broker.KindBind, at(10))
		b := newBinding("i-1", "b-1", op.ID)
		must(t, s.CreateBinding(t.Context(), b, op, nil), "CreateBinding")
		equal(t, "binding", getBinding(t, s, "i-1", "b-1"), &b)
		equal(t, "operation", getOperation(t, s, "i-1", op.ID), &op)
		equal(t, "operations in progress", inProgressIDs(t, s), []string{op.ID})
		// The count changes, and the version with it.
		want := inst
		want.BindingOps, want.Version = 1, inst.Version+1
		equal(t, "instance", getInstance(t, s, "i-1"), &want)

		op2 := newBindingOperation("i-1", "b-2", "bind-b-2", broker.KindBind, at(11))
		must(t, s.CreateBinding(t.Context(), newBinding("i-1", "b-2", op2.ID), op2, nil), "second CreateBinding")
		want.BindingOps, want.Version = 2, inst.Version+2
		equal(t, "instance after a second bind", getInstance(t, s, "i-1"), &want)
	}},
	{"CreateBinding fails and changes nothing", func(t *testing.T, newStore NewStore) {
		cases := []struct {
			name  string
			setup func(t *testing.T, s broker.Store)
			// names, when set, changes what the binding names of its
			// instance's offering.
			names func(b *broker.Binding)
		}{
			{"when the instance does not exist", func(t *testing.T, s broker.Store) {
				provision(t, s, "i-2")
			}, nil},
			{"when the instance is of another plan than the binding names", func(t *testing.T, s broker.Store) {
				provision(t, s, "i-1")
			}, func(b *broker.Binding) { b.PlanID = "another-plan" }},
			{"when the instance is of another service than the binding names", func(t *testing.T, s broker.Store) {
				provision(t, s, "i-1")
			}, func(b *broker.Binding) { b.ServiceID = "another-service" }},
			{"when a provision holds the instance", func(t *testing.T, s broker.Store) {
				startProvision(t, s, "i-1")
			}, nil},
			{"when an update holds the instance", func(t *testing.T, s broker.Store) {
				startInstanceOp(t, s, provision(t, s, "i-1"), broker.KindUpdate)
			}, nil},
			{"when a deprovision holds the instance", func(t *testing.T, s broker.Store) {
				startInstanceOp(t, s, provision(t, s, "i-1"), broker.KindDeprovision)
			}, nil},
			{"when an operation holds the instance although it is ready", func(t *testing.T, s broker.Store) {
				l := updateLock(provision(t, s, "i-1"), "")
				l.Instance.State = broker.InstanceReady
				must(t, s.LockInstance(t.Context(), l), "LockInstance")
			}, nil},
			{"when the instance failed", func(t *testing.T, s broker.Store) {
				failProvision(t, s, "i-1")
			}, nil},
			{"when the binding exists and is ready", func(t *testing.T, s broker.Store) {
				provision(t, s, "i-1")
				bind(t, s, "i-1", "b-1")
			}, nil},
			{"when the binding exists and its bind is in progress", func(t *testing.T, s broker.Store) {
				provision(t, s, "i-1")
				startBind(t, s, "i-1", "b-1")
			}, nil},
			{"when the binding exists and its unbind is in progress", func(t *testing.T, s broker.Store) {
				provision(t, s, "i-1")
				startUnbind(t, s, bind(t, s, "i-1", "b-1"))
			}, nil},
			{"when the binding exists and an update holds the instance", func(t *testing.T, s broker.Store) {
				provision(t, s, "i-1")
				bind(t, s, "i-1", "b-1")
				startInstanceOp(t, s, *getInstance(t, s, "i-1"), broker.KindUpdate)
			}, nil},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				s := newStore(t)
				tc.setup(t, s)
				before := snapshot(t, s)
				op := newBindingOperation("i-1", "b-1", "bind-new", broker.KindBind, at(300))
				b := newBinding("i-1", "b-1", op.ID)
				b.Fingerprint = "other request"
				if tc.names != nil {
					tc.names(&b)
				}
				c := conflict(t, s.CreateBinding(t.Context(), b, op, nil))
				equal(t, "conflict instance", c.Instance, before.instance("i-1"))
				equal(t, "conflict binding", c.Binding, before.binding("i-1", "b-1"))
				unchanged(t, s, before)
			})
		}
	}},
	{"LockBinding of an idle binding stores it and counts a binding operation", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		provision(t, s, "i-1")
		b := bind(t, s, "i-1", "b-1")
		inst := *getInstance(t, s, "i-1")
		l := unbindLock(b)
		must(t, s.LockBinding(t.Context(), l), "LockBinding")
		equal(t, "binding", getBinding(t, s, "i-1", "b-1"), &l.Binding)
		equal(t, "operation", getOperation(t, s, "i-1", l.Op.ID), &l.Op)
		equal(t, "operations in progress", inProgressIDs(t, s), []string{l.Op.ID})
		want := inst
		want.BindingOps, want.Version = 1, inst.Version+1
		equal(t, "instance", getInstance(t, s, "i-1"), &want)
	}},
	{"LockBinding of a failed binding stores it and counts a binding operation", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		provision(t, s, "i-1")
		b, op := startBind(t, s, "i-1", "b-1")
		b.State, b.Op, b.Version = broker.BindingFailed, "", b.Version+1
		must(t, s.FinishOperation(t.Context(), broker.Finish{
			Op: finished(op, broker.OperationFailed), Binding: &b, ReleaseBinding: true,
		}), "FinishOperation")
		l := unbindLock(b)
		must(t, s.LockBinding(t.Context(), l), "LockBinding")
		equal(t, "binding", getBinding(t, s, "i-1", "b-1"), &l.Binding)
		if got := getInstance(t, s, "i-1").BindingOps; got != 1 {
			t.Errorf("binding_ops: got %d, want 1", got)
		}
	}},
	{"LockBinding halts the bind that holds the binding and takes over its count", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		provision(t, s, "i-1")
		b, bindOp := startBind(t, s, "i-1", "b-1")
		inst := *getInstance(t, s, "i-1")
		l := unbindLock(b)
		if l.Holder != bindOp.ID {
			t.Fatalf("holder: got %q, want %q", l.Holder, bindOp.ID)
		}
		halted := finished(bindOp, broker.OperationFailed)
		l.Halted = &halted
		must(t, s.LockBinding(t.Context(), l), "LockBinding")
		equal(t, "binding", getBinding(t, s, "i-1", "b-1"), &l.Binding)
		equal(t, "unbind", getOperation(t, s, "i-1", l.Op.ID), &l.Op)
		equal(t, "halted bind", getOperation(t, s, "i-1", bindOp.ID), &halted)
		equal(t, "operations in progress", inProgressIDs(t, s), []string{l.Op.ID})
		equal(t, "instance (binding_ops unchanged)", getInstance(t, s, "i-1"), &inst)
	}},
	{"LockBinding fails and changes nothing", func(t *testing.T, newStore NewStore) {
		cases := []struct {
			name  string
			setup func(t *testing.T, s broker.Store) broker.LockBinding
		}{
			{"when the instance does not exist", func(t *testing.T, s broker.Store) broker.LockBinding {
				provision(t, s, "i-2")
				bind(t, s, "i-2", "b-1")
				b := newBinding("i-1", "b-1", "")
				return unbindLock(b)
			}},
			{"when the binding does not exist", func(t *testing.T, s broker.Store) broker.LockBinding {
				provision(t, s, "i-1")
				bind(t, s, "i-1", "b-2")
				b := newBinding("i-1", "b-1", "")
				return unbindLock(b)
			}},
			{"when the expected version is older than the stored one", func(t *testing.T, s broker.Store) broker.LockBinding {
				provision(t, s, "i-1")
				l := unbindLock(bind(t, s, "i-1", "b-1"))
				l.Version--
				return l
			}},
			{"when the expected version is newer than the stored one", func(t *testing.T, s broker.Store) broker.LockBinding {
				provision(t, s, "i-1")
				l := unbindLock(bind(t, s, "i-1", "b-1"))
				l.Version++
				return l
			}},
			{"when an unbind holds the binding", func(t *testing.T, s broker.Store) broker.LockBinding {
				provision(t, s, "i-1")
				b, _ := startUnbind(t, s, bind(t, s, "i-1", "b-1"))
				l := unbindLock(b)
				l.Holder, l.Op.ID = "", "unbind-again"
				l.Binding.Op, l.Binding.LastOp = l.Op.ID, l.Op.ID
				return l
			}},
			{"when a bind holds the binding and no holder is expected", func(t *testing.T, s broker.Store) broker.LockBinding {
				provision(t, s, "i-1")
				b, _ := startBind(t, s, "i-1", "b-1")
				l := unbindLock(b)
				l.Holder = ""
				return l
			}},
			{"when the binding is idle but a bind is expected to hold it", func(t *testing.T, s broker.Store) broker.LockBinding {
				provision(t, s, "i-1")
				l := unbindLock(bind(t, s, "i-1", "b-1"))
				halted := finished(*getOperation(t, s, "i-1", "bind-b-1"), broker.OperationFailed)
				l.Holder, l.Halted = halted.ID, &halted
				return l
			}},
			{"when an update holds the instance", func(t *testing.T, s broker.Store) broker.LockBinding {
				provision(t, s, "i-1")
				b := bind(t, s, "i-1", "b-1")
				startInstanceOp(t, s, *getInstance(t, s, "i-1"), broker.KindUpdate)
				return unbindLock(b)
			}},
			{"when a deprovision holds the instance", func(t *testing.T, s broker.Store) broker.LockBinding {
				provision(t, s, "i-1")
				b := bind(t, s, "i-1", "b-1")
				startInstanceOp(t, s, *getInstance(t, s, "i-1"), broker.KindDeprovision)
				return unbindLock(b)
			}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				s := newStore(t)
				l := tc.setup(t, s)
				before := snapshot(t, s)
				c := conflict(t, s.LockBinding(t.Context(), l))
				equal(t, "conflict instance", c.Instance, before.instance("i-1"))
				equal(t, "conflict binding", c.Binding, before.binding("i-1", "b-1"))
				unchanged(t, s, before)
			})
		}
	}},
}
