package storetest

import (
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
)

// loadCases are Load, and the record changes and detachments that progress
// and outcomes carry: what lets a step read once and write once.
var loadCases = []testCase{
	{"Load reads an instance, the operation and the binding asked for and their records, and nothing of another instance or of the other bindings", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		provision(t, s, "i-1")
		b1 := bind(t, s, "i-1", "b-1")
		b2, bindOp := startBind(t, s, "i-1", "b-2")
		// Records named above the bindings' records, one at their edge
		// (none sorts before them: broker.CheckRecordName).
		r, edge := newResource("i-1", "r-1"), newResource("i-1", broker.BindingRecordsTo+"x")
		putResource(t, s, r)
		putResource(t, s, edge)
		r1, r2 := newResource("i-1", broker.BindingRecord("b-1")), newResource("i-1", broker.BindingRecord("b-2"))
		putResource(t, s, r1)
		putResource(t, s, r2)
		provision(t, s, "i-2")
		bind(t, s, "i-2", "b-3")
		putResource(t, s, newResource("i-2", "r-1"))
		inst := getInstance(t, s, "i-1")

		snap, err := s.Load(t.Context(), "i-1", bindOp.ID, "")
		must(t, err, "Load of a bind")
		equal(t, "with the operation: the snapshot (and the records of its binding, not of the others)", snap, broker.Snapshot{
			Instance: inst, Operation: &bindOp, Binding: &b2, Records: []broker.Resource{r2, edge, r}})

		snap, err = s.Load(t.Context(), "i-1", "", "b-1")
		must(t, err, "Load of a binding")
		equal(t, "with a binding: the snapshot", snap, broker.Snapshot{Instance: inst, Binding: &b1, Records: []broker.Resource{r1, edge, r}})

		snap, err = s.Load(t.Context(), "i-1", "", "b-9")
		must(t, err, "Load of a binding that does not exist")
		equal(t, "with a missing binding: the instance's records", snap, broker.Snapshot{Instance: inst, Records: []broker.Resource{edge, r}})

		snap, err = s.Load(t.Context(), "i-1", "", "")
		must(t, err, "Load of the instance")
		equal(t, "alone: the snapshot (the instance's own records)", snap, broker.Snapshot{Instance: inst, Records: []broker.Resource{edge, r}})

		snap, err = s.LoadWhole(t.Context(), "i-1", "")
		must(t, err, "LoadWhole of the instance")
		equal(t, "whole: the snapshot (every binding's id, every record)", snap, broker.Snapshot{Instance: inst, BindingIDs: []string{"b-1", "b-2"},
			Records: []broker.Resource{r1, r2, edge, r}})

		snap, err = s.Load(t.Context(), "i-1", "prov-i-2", "b-3")
		must(t, err, "Load of another instance's operation and binding")
		equal(t, "another instance's operation", snap.Operation, (*broker.Operation)(nil))
		equal(t, "another instance's binding", snap.Binding, (*broker.Binding)(nil))
		snap, err = s.Load(t.Context(), "i-9", "ghost", "ghost")
		must(t, err, "Load of a missing instance")
		equal(t, "a missing instance", snap, broker.Snapshot{})
		snap, err = s.LoadWhole(t.Context(), "i-9", "ghost")
		must(t, err, "LoadWhole of a missing instance")
		equal(t, "a missing instance, whole", snap, broker.Snapshot{})
	}},
	{"Load of a binding's operation reads the binding's record even when the binding is gone", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		provision(t, s, "i-1")
		b, op := startUnbind(t, s, bind(t, s, "i-1", "b-1"))
		r, r1, r2 := newResource("i-1", "r-1"), newResource("i-1", broker.BindingRecord("b-1")), newResource("i-1", broker.BindingRecord("b-2"))
		for _, x := range []broker.Resource{r, r1, r2} {
			putResource(t, s, x)
		}
		snap, err := s.Load(t.Context(), "i-1", op.ID, "")
		must(t, err, "Load of an unbind")
		equal(t, "the unbind's snapshot", snap, broker.Snapshot{Instance: getInstance(t, s, "i-1"), Operation: &op, Binding: &b, Records: []broker.Resource{r1, r}})

		must(t, s.FinishOperation(t.Context(), broker.Finish{Op: finished(op, broker.OperationSucceeded), DeleteBinding: true, ReleaseBinding: true}), "FinishOperation")
		done := finished(op, broker.OperationSucceeded)
		snap, err = s.Load(t.Context(), "i-1", op.ID, "")
		must(t, err, "Load of a finished unbind")
		equal(t, "the snapshot once the binding is gone", snap, broker.Snapshot{Instance: getInstance(t, s, "i-1"), Operation: &done, Records: []broker.Resource{r1, r}})
	}},
	{"Load of a deprovision is whole: every binding's id and every record", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		provision(t, s, "i-1")
		bind(t, s, "i-1", "b-1")
		bind(t, s, "i-1", "b-2")
		r, r1 := newResource("i-1", "r-1"), newResource("i-1", broker.BindingRecord("b-1"))
		putResource(t, s, r)
		putResource(t, s, r1)
		inst, op := startInstanceOp(t, s, *getInstance(t, s, "i-1"), broker.KindDeprovision)

		snap, err := s.Load(t.Context(), "i-1", op.ID, "")
		must(t, err, "Load of a deprovision")
		equal(t, "the deprovision's snapshot", snap, broker.Snapshot{Instance: &inst, Operation: &op, BindingIDs: []string{"b-1", "b-2"},
			Records: []broker.Resource{r1, r}})
		snap, err = s.LoadWhole(t.Context(), "i-1", op.ID)
		must(t, err, "LoadWhole of a deprovision")
		equal(t, "the deprovision's whole snapshot", snap, broker.Snapshot{Instance: &inst, Operation: &op, BindingIDs: []string{"b-1", "b-2"},
			Records: []broker.Resource{r1, r}})
	}},
	{"binding operations move the instance's version, so a lock at a version read with the bindings knows they are the same", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		v := provision(t, s, "i-1").Version
		b, op := startBind(t, s, "i-1", "b-1")
		if got := getInstance(t, s, "i-1").Version; got <= v {
			t.Fatalf("CreateBinding left the instance at version %d (was %d)", got, v)
		}
		v = getInstance(t, s, "i-1").Version
		b.State, b.Op, b.Version = broker.BindingReady, "", b.Version+1
		must(t, s.FinishOperation(t.Context(), broker.Finish{Op: finished(op, broker.OperationSucceeded), Binding: &b, ReleaseBinding: true}), "finish bind")
		if got := getInstance(t, s, "i-1").Version; got <= v {
			t.Fatalf("releasing the binding left the instance at version %d (was %d)", got, v)
		}
		v = getInstance(t, s, "i-1").Version
		startUnbind(t, s, *getBinding(t, s, "i-1", "b-1"))
		if got := getInstance(t, s, "i-1").Version; got <= v {
			t.Fatalf("LockBinding left the instance at version %d (was %d)", got, v)
		}
	}},
	{"UpdateOperation writes the record changes with the progress, and neither when its condition fails", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		_, op := startProvision(t, s, "i-1")
		gone := newResource("i-1", "r-1")
		putResource(t, s, gone)
		saved := newResource("i-1", "r-2")
		op.RetryAfter, op.UpdatedAt, op.NextCheckAt = 5e9, at(40), at(45)
		must(t, s.UpdateOperation(t.Context(), op, broker.RecordChanges{Save: []broker.Resource{saved}, Remove: []string{"r-1"}}), "UpdateOperation")
		equal(t, "operation", getOperation(t, s, "i-1", op.ID), &op)
		equal(t, "saved record", getResource(t, s, "i-1", "r-2"), &saved)
		equal(t, "removed record", getResource(t, s, "i-1", "r-1"), (*broker.Resource)(nil))

		done := finished(op, broker.OperationFailed)
		inst := *getInstance(t, s, "i-1")
		inst.State, inst.Op, inst.Version = broker.InstanceFailed, "", inst.Version+1
		must(t, s.FinishOperation(t.Context(), broker.Finish{Op: done, Instance: &inst}), "FinishOperation")
		putResource(t, s, gone)
		before := snapshot(t, s)
		conflict(t, s.UpdateOperation(t.Context(), op, broker.RecordChanges{Save: []broker.Resource{newResource("i-1", "r-3")}, Remove: []string{"r-1"}}))
		unchanged(t, s, before)
		equal(t, "record of a refused update", getResource(t, s, "i-1", "r-3"), (*broker.Resource)(nil))
	}},
	{"FinishOperation writes record changes and detaches records with the outcome, and nothing when its condition fails", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		inst, op := startProvision(t, s, "i-1")
		kept, gone, left := newResource("i-1", "r-1"), newResource("i-1", "r-2"), newResource("i-1", "r-3")
		for _, r := range []broker.Resource{kept, gone, left} {
			putResource(t, s, r)
		}
		saved := newResource("i-1", "r-4")
		d := newDetached(left, op.ID)
		inst.State, inst.Op, inst.Version = broker.InstanceFailed, "", inst.Version+1
		f := broker.Finish{Op: finished(op, broker.OperationFailed), Instance: &inst,
			Records: broker.RecordChanges{Save: []broker.Resource{saved}, Remove: []string{"r-2"}}, Detach: []broker.Detached{d}}

		// First with a condition that fails: another operation holds the
		// instance in the store's eyes once this one has finished.
		early := f
		early.Op.ID = "ghost"
		before := snapshot(t, s)
		conflict(t, s.FinishOperation(t.Context(), early))
		unchanged(t, s, before)
		equal(t, "record of a refused finish", getResource(t, s, "i-1", "r-4"), (*broker.Resource)(nil))

		must(t, s.FinishOperation(t.Context(), f), "FinishOperation")
		equal(t, "kept record", getResource(t, s, "i-1", "r-1"), &kept)
		equal(t, "removed record", getResource(t, s, "i-1", "r-2"), (*broker.Resource)(nil))
		equal(t, "detached record's resource", getResource(t, s, "i-1", "r-3"), (*broker.Resource)(nil))
		equal(t, "saved record", getResource(t, s, "i-1", "r-4"), &saved)
		equal(t, "detached", getDetached(t, s, d.ID), &d)
	}},
	{"FinishOperation deleting an instance deletes the bindings it names and the records it removes", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		inst := provision(t, s, "i-1")
		var ids []string
		for _, id := range snapshotBindings {
			bind(t, s, "i-1", id)
			ids = append(ids, id)
		}
		putResource(t, s, newResource("i-1", "r-1"))
		_, op := startInstanceOp(t, s, *getInstance(t, s, inst.ID), broker.KindDeprovision)
		must(t, s.FinishOperation(t.Context(), broker.Finish{Op: finished(op, broker.OperationSucceeded), DeleteInstance: true,
			Bindings: ids, Records: broker.RecordChanges{Remove: []string{"r-1"}}}), "FinishOperation")
		snap, err := s.LoadWhole(t.Context(), "i-1", "")
		must(t, err, "LoadWhole")
		equal(t, "what is left of the instance", snap, broker.Snapshot{})
	}},
	{"CreateInstance of a change settled in memory stores the instance as it ends, its finished operation and the records, in one write", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		op := finished(newOperation("i-1", "prov-i-1", broker.KindProvision, at(0)), broker.OperationSucceeded)
		inst := newInstance("i-1", op.ID)
		inst.State, inst.Op, inst.Version = broker.InstanceReady, "", 2
		r := newResource("i-1", "r-1")
		must(t, s.CreateInstance(t.Context(), inst, op, &broker.Settled{Records: broker.RecordChanges{Save: []broker.Resource{r}}}), "CreateInstance")
		equal(t, "instance", getInstance(t, s, "i-1"), &inst)
		equal(t, "operation", getOperation(t, s, "i-1", op.ID), &op)
		equal(t, "record", getResource(t, s, "i-1", "r-1"), &r)
		equal(t, "operations in progress", inProgressIDs(t, s), []string{})
		c := conflict(t, s.CreateInstance(t.Context(), inst, op, &broker.Settled{}))
		equal(t, "conflict instance", c.Instance, &inst)
	}},
	{"CreateBinding of a change settled in memory stores the binding as it ends, counts nothing, moves the version, and only at the version it was made from", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		inst := provision(t, s, "i-1")
		op := finished(newBindingOperation("i-1", "b-1", "bind-b-1", broker.KindBind, at(10)), broker.OperationSucceeded)
		b := newBinding("i-1", "b-1", op.ID)
		b.State, b.Op, b.Version = broker.BindingReady, "", 2
		r := newResource("i-1", broker.BindingRecord("b-1"))

		before := snapshot(t, s)
		stale := &broker.Settled{Records: broker.RecordChanges{Save: []broker.Resource{r}}, InstanceVersion: inst.Version - 1}
		c := conflict(t, s.CreateBinding(t.Context(), b, op, stale))
		equal(t, "conflict instance", c.Instance, before.instance("i-1"))
		equal(t, "conflict binding", c.Binding, (*broker.Binding)(nil))
		unchanged(t, s, before)
		equal(t, "record of a refused write", getResource(t, s, "i-1", r.Name), (*broker.Resource)(nil))

		must(t, s.CreateBinding(t.Context(), b, op, &broker.Settled{Records: broker.RecordChanges{Save: []broker.Resource{r}}, InstanceVersion: inst.Version}), "CreateBinding")
		equal(t, "binding", getBinding(t, s, "i-1", "b-1"), &b)
		equal(t, "operation", getOperation(t, s, "i-1", op.ID), &op)
		equal(t, "record", getResource(t, s, "i-1", r.Name), &r)
		want := inst
		want.Version++
		equal(t, "instance: no binding operation counted, the version moved", getInstance(t, s, "i-1"), &want)
		equal(t, "operations in progress", inProgressIDs(t, s), []string{})
	}},
}
