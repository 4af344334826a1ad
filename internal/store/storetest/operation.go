package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// finishCase is a FinishOperation to try, and which items its condition
// involves: the instance, and the binding with that id (when not empty).
type finishCase struct {
	name     string
	setup    func(t *testing.T, s broker.Store) broker.Finish
	instance bool
	binding  string
}

// checkConflict checks that c carries the items as they were stored before
// the failed write: the operation always, and the instance and binding when
// the condition involves them.
func (fc finishCase) checkConflict(t *testing.T, c *broker.ConflictError, f broker.Finish, before world) {
	t.Helper()
	var op *broker.Operation
	for _, o := range before.Operations[f.Op.InstanceID] {
		if o.ID == f.Op.ID {
			op = &o
		}
	}
	equal(t, "conflict operation", c.Operation, op)
	if fc.instance {
		equal(t, "conflict instance", c.Instance, before.instance(f.Op.InstanceID))
	}
	if fc.binding != "" {
		equal(t, "conflict binding", c.Binding, before.binding(f.Op.InstanceID, fc.binding))
	}
}

var operationCases = []testCase{
	{"FinishOperation keeps a failed operation's detail for the operator, and ListOperations returns it", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		inst, op := startProvision(t, s, "i-1")
		failed := finished(op, broker.OperationFailed)
		failed.Detail = `Bucket (AWS::S3::Bucket) CREATE_FAILED: User: arn:aws:sts::123456789012:assumed-role/cfn is not authorized <&> ✓`
		inst.State, inst.Op, inst.Version = broker.InstanceFailed, "", inst.Version+1
		must(t, s.FinishOperation(t.Context(), broker.Finish{Op: failed, Instance: &inst}), "FinishOperation")
		equal(t, "operation", getOperation(t, s, "i-1", op.ID), &failed)
		ops, err := s.ListOperations(t.Context(), "i-1")
		must(t, err, "ListOperations")
		equal(t, "the instance's operations", ops, []broker.Operation{failed})
	}},
	{"UpdateOperation records progress of an operation in progress", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		_, op := startProvision(t, s, "i-1")
		op.RetryAfter, op.UpdatedAt, op.NextCheckAt = 20*time.Second, at(40), at(60)
		op.Description = "Creating the database."
		must(t, s.UpdateOperation(t.Context(), op, broker.RecordChanges{}), "UpdateOperation")
		equal(t, "operation", getOperation(t, s, "i-1", op.ID), &op)
		ops, err := s.ListInProgress(t.Context())
		must(t, err, "ListInProgress")
		equal(t, "operations in progress", ops, []broker.Operation{op})
	}},
	{"UpdateOperation fails and changes nothing", func(t *testing.T, newStore NewStore) {
		cases := []struct {
			name  string
			setup func(t *testing.T, s broker.Store) broker.Operation
		}{
			{"when the operation does not exist", func(t *testing.T, s broker.Store) broker.Operation {
				provision(t, s, "i-1")
				return newOperation("i-1", "ghost", broker.KindUpdate, at(5))
			}},
			{"when the operation succeeded", func(t *testing.T, s broker.Store) broker.Operation {
				provision(t, s, "i-1")
				return newOperation("i-1", "prov-i-1", broker.KindProvision, at(0))
			}},
			{"when the operation was halted", func(t *testing.T, s broker.Store) broker.Operation {
				provision(t, s, "i-1")
				b, op := startBind(t, s, "i-1", "b-1")
				l := unbindLock(b)
				halted := finished(op, broker.OperationFailed)
				l.Halted = &halted
				must(t, s.LockBinding(t.Context(), l), "LockBinding")
				op.Description = "still binding"
				return op
			}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				s := newStore(t)
				op := tc.setup(t, s)
				before := snapshot(t, s)
				want := getOperation(t, s, op.InstanceID, op.ID)
				c := conflict(t, s.UpdateOperation(t.Context(), op, broker.RecordChanges{}))
				equal(t, "conflict operation", c.Operation, want)
				unchanged(t, s, before)
			})
		}
	}},
	{"FinishOperation stores the outcome and the instance it releases", func(t *testing.T, newStore NewStore) {
		cases := []struct {
			name  string
			setup func(t *testing.T, s broker.Store) (broker.Instance, broker.Operation)
			state broker.OperationState
		}{
			{"for a provision that succeeded", func(t *testing.T, s broker.Store) (broker.Instance, broker.Operation) {
				return startProvision(t, s, "i-1")
			}, broker.OperationSucceeded},
			{"for a provision that failed", func(t *testing.T, s broker.Store) (broker.Instance, broker.Operation) {
				return startProvision(t, s, "i-1")
			}, broker.OperationFailed},
			{"for an update that succeeded", func(t *testing.T, s broker.Store) (broker.Instance, broker.Operation) {
				return startInstanceOp(t, s, provision(t, s, "i-1"), broker.KindUpdate)
			}, broker.OperationSucceeded},
			{"for a deprovision that failed", func(t *testing.T, s broker.Store) (broker.Instance, broker.Operation) {
				return startInstanceOp(t, s, provision(t, s, "i-1"), broker.KindDeprovision)
			}, broker.OperationFailed},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				s := newStore(t)
				inst, op := tc.setup(t, s)
				next := inst
				next.Op, next.Version, next.UpdatedAt = "", inst.Version+1, at(500)
				next.State = broker.InstanceReady
				if tc.state == broker.OperationFailed {
					next.State = broker.InstanceFailed
				}
				done := finished(op, tc.state)
				must(t, s.FinishOperation(t.Context(), broker.Finish{Op: done, Instance: &next}), "FinishOperation")
				equal(t, "instance", getInstance(t, s, "i-1"), &next)
				equal(t, "operation", getOperation(t, s, "i-1", op.ID), &done)
				equal(t, "operations in progress", inProgressIDs(t, s), []string{})
			})
		}
	}},
	{"FinishOperation of a deprovision deletes the instance and its bindings but keeps operations and resources", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		provision(t, s, "i-1")
		bind(t, s, "i-1", "b-1")
		failed, failedBind := startBind(t, s, "i-1", "b-2")
		failed.State, failed.Op = broker.BindingFailed, ""
		must(t, s.FinishOperation(t.Context(), broker.Finish{
			Op: finished(failedBind, broker.OperationFailed), Binding: &failed, ReleaseBinding: true,
		}), "FinishOperation failed bind")
		provision(t, s, "i-2")
		other := bind(t, s, "i-2", "b-1")
		// An instance whose id starts with "i-1b#" is another instance.
		lookalike := provision(t, s, "i-1b#b-1")
		lookalikeBinding := bind(t, s, "i-1b#b-1", "b-1")
		lookalike = *getInstance(t, s, lookalike.ID)
		res := broker.Resource{InstanceID: "i-1", Name: "r-1", Data: json.RawMessage(`{"db":"x"}`), UpdatedAt: at(5)}
		must(t, s.PutResource(t.Context(), res), "PutResource")
		_, dep := startInstanceOp(t, s, *getInstance(t, s, "i-1"), broker.KindDeprovision)
		opsBefore, err := s.ListOperations(t.Context(), "i-1")
		must(t, err, "ListOperations")

		done := finished(dep, broker.OperationSucceeded)
		must(t, s.FinishOperation(t.Context(), broker.Finish{Op: done, DeleteInstance: true, Bindings: []string{"b-1", "b-2"}}), "FinishOperation")
		if getInstance(t, s, "i-1") != nil {
			t.Error("the instance is still stored")
		}
		for _, id := range []string{"b-1", "b-2"} {
			if getBinding(t, s, "i-1", id) != nil {
				t.Errorf("binding %s is still stored", id)
			}
		}
		want := append([]broker.Operation(nil), opsBefore...)
		for i := range want {
			if want[i].ID == dep.ID {
				want[i] = done
			}
		}
		ops, err := s.ListOperations(t.Context(), "i-1")
		must(t, err, "ListOperations")
		equal(t, "operations", ops, want)
		equal(t, "resource", getResource(t, s, "i-1", "r-1"), &res)
		equal(t, "binding of another instance", getBinding(t, s, "i-2", "b-1"), &other)
		equal(t, "instance i-1b#b-1", getInstance(t, s, lookalike.ID), &lookalike)
		equal(t, "binding of instance i-1b#b-1", getBinding(t, s, lookalike.ID, "b-1"), &lookalikeBinding)
		equal(t, "operations in progress", inProgressIDs(t, s), []string{})
	}},
	{"FinishOperation of a bind stores the binding and releases its count", func(t *testing.T, newStore NewStore) {
		for _, state := range []broker.OperationState{broker.OperationSucceeded, broker.OperationFailed} {
			t.Run(string(state), func(t *testing.T) {
				s := newStore(t)
				provision(t, s, "i-1")
				startBind(t, s, "i-1", "b-2")
				b, op := startBind(t, s, "i-1", "b-1")
				inst := *getInstance(t, s, "i-1")
				next := b
				next.State, next.Op, next.Version, next.UpdatedAt = broker.BindingReady, "", b.Version+1, at(12)
				next.Credentials = broker.Credentials{"password": "secret"}
				next.Endpoints = []broker.Endpoint{{Host: "h", Ports: []string{"1"}}}
				if state == broker.OperationFailed {
					next.State, next.Credentials, next.Endpoints = broker.BindingFailed, nil, nil
				}
				done := finished(op, state)
				must(t, s.FinishOperation(t.Context(), broker.Finish{Op: done, Binding: &next, ReleaseBinding: true}), "FinishOperation")
				equal(t, "binding", getBinding(t, s, "i-1", "b-1"), &next)
				equal(t, "operation", getOperation(t, s, "i-1", op.ID), &done)
				inst.BindingOps, inst.Version = inst.BindingOps-1, inst.Version+1
				equal(t, "instance", getInstance(t, s, "i-1"), &inst)
				equal(t, "operations in progress", inProgressIDs(t, s), []string{"bind-b-2"})
			})
		}
	}},
	{"FinishOperation of an unbind deletes the binding and releases its count", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		provision(t, s, "i-1")
		other := bind(t, s, "i-1", "b-2")
		_, op := startUnbind(t, s, bind(t, s, "i-1", "b-1"))
		inst := *getInstance(t, s, "i-1")
		done := finished(op, broker.OperationSucceeded)
		must(t, s.FinishOperation(t.Context(), broker.Finish{Op: done, DeleteBinding: true, ReleaseBinding: true}), "FinishOperation")
		if getBinding(t, s, "i-1", "b-1") != nil {
			t.Error("the binding is still stored")
		}
		equal(t, "other binding", getBinding(t, s, "i-1", "b-2"), &other)
		equal(t, "operation", getOperation(t, s, "i-1", op.ID), &done)
		inst.BindingOps, inst.Version = inst.BindingOps-1, inst.Version+1
		equal(t, "instance", getInstance(t, s, "i-1"), &inst)
		equal(t, "operations in progress", inProgressIDs(t, s), []string{})
	}},
	{"FinishOperation of the operation alone leaves its instance as it is", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		inst, op := startProvision(t, s, "i-1")
		done := finished(op, broker.OperationFailed)
		must(t, s.FinishOperation(t.Context(), broker.Finish{Op: done}), "FinishOperation")
		equal(t, "operation", getOperation(t, s, "i-1", op.ID), &done)
		equal(t, "instance", getInstance(t, s, "i-1"), &inst)
	}},
	{"ReleaseBinding never takes the count below zero: the whole write fails and changes nothing", func(t *testing.T, newStore NewStore) {
		// Every store refuses the write (a DynamoDB transaction cannot skip
		// one of its writes), so that both behave the same.
		s := newStore(t)
		inst, op := startProvision(t, s, "i-1")
		before := snapshot(t, s)
		done := finished(op, broker.OperationFailed)
		c := conflict(t, s.FinishOperation(t.Context(), broker.Finish{Op: done, ReleaseBinding: true}))
		equal(t, "conflict operation", c.Operation, &op)
		equal(t, "conflict instance", c.Instance, &inst)
		unchanged(t, s, before)
	}},
	{"FinishOperation fails and changes nothing", func(t *testing.T, newStore NewStore) {
		cases := []finishCase{
			{name: "when the operation does not exist", setup: func(t *testing.T, s broker.Store) broker.Finish {
				provision(t, s, "i-1")
				return broker.Finish{Op: finished(newOperation("i-1", "ghost", broker.KindUpdate, at(5)), broker.OperationSucceeded)}
			}},
			{name: "when a deprovision halted the provision", instance: true, setup: func(t *testing.T, s broker.Store) broker.Finish {
				inst, prov := startProvision(t, s, "i-1")
				dep := newOperation("i-1", "dep-1", broker.KindDeprovision, at(100))
				next := inst
				next.State, next.Op, next.Version = broker.InstanceDeprovisioning, dep.ID, inst.Version+1
				halted := finished(prov, broker.OperationFailed)
				must(t, s.LockInstance(t.Context(), broker.LockInstance{
					Instance: next, Version: inst.Version, Holder: prov.ID, Op: dep, Halted: &halted,
				}), "LockInstance")
				ready := inst
				ready.State, ready.Op = broker.InstanceReady, ""
				return broker.Finish{Op: finished(prov, broker.OperationSucceeded), Instance: &ready}
			}},
			{name: "when an unbind halted the bind", binding: "b-1", instance: true, setup: func(t *testing.T, s broker.Store) broker.Finish {
				provision(t, s, "i-1")
				b, op := startBind(t, s, "i-1", "b-1")
				l := unbindLock(b)
				halted := finished(op, broker.OperationFailed)
				l.Halted = &halted
				must(t, s.LockBinding(t.Context(), l), "LockBinding")
				ready := b
				ready.State, ready.Op = broker.BindingReady, ""
				return broker.Finish{Op: finished(op, broker.OperationSucceeded), Binding: &ready, ReleaseBinding: true}
			}},
			{name: "when the operation does not hold the instance it stores", instance: true, setup: func(t *testing.T, s broker.Store) broker.Finish {
				inst := provision(t, s, "i-1")
				_, op := startBind(t, s, "i-1", "b-1")
				inst.DashboardURL = "changed"
				return broker.Finish{Op: finished(op, broker.OperationSucceeded), Instance: &inst}
			}},
			{name: "when the operation does not hold the instance it deletes", instance: true, setup: func(t *testing.T, s broker.Store) broker.Finish {
				provision(t, s, "i-1")
				_, op := startBind(t, s, "i-1", "b-1")
				return broker.Finish{Op: finished(op, broker.OperationSucceeded), DeleteInstance: true}
			}},
			{name: "when another operation holds the binding it stores", binding: "b-1", instance: true, setup: func(t *testing.T, s broker.Store) broker.Finish {
				provision(t, s, "i-1")
				_, op := startBind(t, s, "i-1", "b-2")
				b, _ := startUnbind(t, s, bind(t, s, "i-1", "b-1"))
				b.State, b.Op = broker.BindingReady, ""
				return broker.Finish{Op: finished(op, broker.OperationSucceeded), Binding: &b, ReleaseBinding: true}
			}},
			{name: "when the binding it stores is idle", binding: "b-1", instance: true, setup: func(t *testing.T, s broker.Store) broker.Finish {
				provision(t, s, "i-1")
				_, op := startBind(t, s, "i-1", "b-2")
				b := bind(t, s, "i-1", "b-1")
				b.Credentials = broker.Credentials{"changed": true}
				return broker.Finish{Op: finished(op, broker.OperationSucceeded), Binding: &b, ReleaseBinding: true}
			}},
			{name: "when the binding it stores does not exist", binding: "b-3", instance: true, setup: func(t *testing.T, s broker.Store) broker.Finish {
				provision(t, s, "i-1")
				_, op := startBind(t, s, "i-1", "b-1")
				b := newBinding("i-1", "b-3", op.ID)
				return broker.Finish{Op: finished(op, broker.OperationSucceeded), Binding: &b, ReleaseBinding: true}
			}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				s := newStore(t)
				f := tc.setup(t, s)
				before := snapshot(t, s)
				c := conflict(t, s.FinishOperation(t.Context(), f))
				tc.checkConflict(t, c, f, before)
				unchanged(t, s, before)
			})
		}
	}},
	{"finishing an operation again reports the stored outcome and changes nothing", func(t *testing.T, newStore NewStore) {
		cases := []finishCase{
			{name: "for a provision", instance: true, setup: func(t *testing.T, s broker.Store) broker.Finish {
				inst, op := startProvision(t, s, "i-1")
				inst.State, inst.Op = broker.InstanceReady, ""
				return broker.Finish{Op: finished(op, broker.OperationSucceeded), Instance: &inst}
			}},
			{name: "for the operation alone", setup: func(t *testing.T, s broker.Store) broker.Finish {
				_, op := startProvision(t, s, "i-1")
				return broker.Finish{Op: finished(op, broker.OperationFailed)}
			}},
			{name: "for an update", instance: true, setup: func(t *testing.T, s broker.Store) broker.Finish {
				inst, op := startInstanceOp(t, s, provision(t, s, "i-1"), broker.KindUpdate)
				inst.State, inst.Op = broker.InstanceReady, ""
				return broker.Finish{Op: finished(op, broker.OperationFailed), Instance: &inst}
			}},
			{name: "for a deprovision", instance: true, setup: func(t *testing.T, s broker.Store) broker.Finish {
				_, op := startInstanceOp(t, s, provision(t, s, "i-1"), broker.KindDeprovision)
				return broker.Finish{Op: finished(op, broker.OperationSucceeded), DeleteInstance: true}
			}},
			{name: "for a bind", binding: "b-1", instance: true, setup: func(t *testing.T, s broker.Store) broker.Finish {
				provision(t, s, "i-1")
				startBind(t, s, "i-1", "b-2")
				b, op := startBind(t, s, "i-1", "b-1")
				b.State, b.Op = broker.BindingReady, ""
				return broker.Finish{Op: finished(op, broker.OperationSucceeded), Binding: &b, ReleaseBinding: true}
			}},
			{name: "for an unbind", binding: "b-1", instance: true, setup: func(t *testing.T, s broker.Store) broker.Finish {
				provision(t, s, "i-1")
				startBind(t, s, "i-1", "b-2")
				_, op := startUnbind(t, s, bind(t, s, "i-1", "b-1"))
				return broker.Finish{Op: finished(op, broker.OperationSucceeded), DeleteBinding: true, ReleaseBinding: true}
			}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				s := newStore(t)
				f := tc.setup(t, s)
				must(t, s.FinishOperation(t.Context(), f), "first FinishOperation")
				before := snapshot(t, s)
				c := conflict(t, s.FinishOperation(t.Context(), f))
				tc.checkConflict(t, c, f, before)
				unchanged(t, s, before)
			})
		}
	}},
}
