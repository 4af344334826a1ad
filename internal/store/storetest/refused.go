package storetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
)

var refusedCases = []testCase{
	{"calls that break the port's rules are refused before any write, and change nothing", func(t *testing.T, newStore NewStore) {
		CheckRefusedCalls(t, newStore(t), nil)
	}},
}

// CheckRefusedCalls makes every call that breaks the Store port's
// preconditions (broker.CheckIDs, CheckCreate, the Check methods) on s,
// asserting that each fails with an error that is not a conflict and that
// the store is unchanged. around, when set, wraps the calls, so that a
// store's own test can also assert, say, that they made no API call.
func CheckRefusedCalls(t *testing.T, s broker.Store, around func(calls func())) {
	t.Helper()
	ctx := t.Context()
	inst, prov := startProvision(t, s, "i-1")
	done := finished(prov, broker.OperationSucceeded)
	elsewhere := prov
	elsewhere.InstanceID = "i-2"
	dep := newOperation("i-1", "dep", broker.KindDeprovision, at(1))
	bindingOfI2 := &broker.Binding{InstanceID: "i-2", ID: "b-1"}
	calls := []struct {
		name string
		call func() error
	}{
		{"a new instance whose operation is finished but not settled", func() error {
			return s.CreateInstance(ctx, newInstance("i-3", "prov-3"), finished(newOperation("i-3", "prov-3", broker.KindProvision, at(1)), broker.OperationSucceeded), nil)
		}},
		{"a settled new instance whose operation is in progress", func() error {
			return s.CreateInstance(ctx, newInstance("i-3", "prov-3"), newOperation("i-3", "prov-3", broker.KindProvision, at(1)), &broker.Settled{})
		}},
		{"a settled new instance with another instance's records", func() error {
			op := finished(newOperation("i-3", "prov-3", broker.KindProvision, at(1)), broker.OperationSucceeded)
			return s.CreateInstance(ctx, newInstance("i-3", "prov-3"), op, &broker.Settled{Records: broker.RecordChanges{Save: []broker.Resource{newResource("i-2", "r-1")}}})
		}},
		{"an empty instance id", func() error {
			return s.CreateInstance(ctx, broker.Instance{}, broker.Operation{ID: "op", State: broker.OperationInProgress}, nil)
		}},
		{"an instance id that is not valid UTF-8", func() error {
			op := newOperation("i-\xff", "op-utf8", broker.KindProvision, at(1))
			return s.CreateInstance(ctx, broker.Instance{ID: "i-\xff"}, op, nil)
		}},
		{"a binding id that is not valid UTF-8", func() error {
			op := newOperation("i-1", "op-utf8-b", broker.KindBind, at(1))
			return s.CreateBinding(ctx, broker.Binding{InstanceID: "i-1", ID: "b-\xfe"}, op, nil)
		}},
		{"an instance id longer than the limit", func() error {
			id := strings.Repeat("i", broker.MaxKeyLength+1)
			return s.CreateInstance(ctx, broker.Instance{ID: id}, newOperation(id, "op-long", broker.KindProvision, at(1)), nil)
		}},
		{"a progress update of an operation id holding a control character", func() error {
			op := prov
			op.ID = "op\n1"
			return s.UpdateOperation(ctx, op, broker.RecordChanges{})
		}},
		{"an operation under another instance", func() error { return s.CreateInstance(ctx, broker.Instance{ID: "i-3"}, prov, nil) }},
		{"a progress update that finishes", func() error { return s.UpdateOperation(ctx, done, broker.RecordChanges{}) }},
		{"a finish still in progress", func() error { return s.FinishOperation(ctx, broker.Finish{Op: prov, Instance: &inst}) }},
		{"a finish that stores and deletes the instance", func() error {
			return s.FinishOperation(ctx, broker.Finish{Op: done, Instance: &inst, DeleteInstance: true})
		}},
		{"a finish that releases a binding count and stores the instance", func() error {
			return s.FinishOperation(ctx, broker.Finish{Op: done, Instance: &inst, ReleaseBinding: true})
		}},
		{"a finish that stores a binding of another instance", func() error {
			return s.FinishOperation(ctx, broker.Finish{Op: done, Binding: bindingOfI2})
		}},
		{"a finish that deletes a binding the operation does not name", func() error {
			return s.FinishOperation(ctx, broker.Finish{Op: done, DeleteBinding: true})
		}},
		{"a halted operation that is not the holder", func() error {
			return s.LockInstance(ctx, broker.LockInstance{Instance: inst, Holder: "other", Op: elsewhere, Halted: &done})
		}},
		{"a halted operation still in progress", func() error {
			return s.LockInstance(ctx, broker.LockInstance{Instance: inst, Holder: prov.ID, Op: dep, Halted: &prov})
		}},
		{"an operation that halts itself", func() error {
			return s.LockInstance(ctx, broker.LockInstance{Instance: inst, Holder: prov.ID, Op: done, Halted: &done})
		}},
		{"a detach to an empty id", func() error {
			return s.FinishOperation(ctx, broker.Finish{Op: done, Instance: &inst, Detach: []broker.Detached{{InstanceID: "i-1", Name: "r"}}})
		}},
		{"a detach of a resource name holding NUL", func() error {
			return s.FinishOperation(ctx, broker.Finish{Op: done, Instance: &inst, Detach: []broker.Detached{{ID: "d-1", InstanceID: "i-1", Name: "r\x00"}}})
		}},
		{"a detach of another instance's resource", func() error {
			return s.FinishOperation(ctx, broker.Finish{Op: done, Instance: &inst, Detach: []broker.Detached{{ID: "d-1", InstanceID: "i-2", Name: "r"}}})
		}},
		{"an update of a detached id holding NUL", func() error {
			return s.UpdateDetached(ctx, broker.Detached{ID: "d\x001", InstanceID: "i-1", Name: "r"}, 0)
		}},
		{"a delete of an empty detached id", func() error { return s.DeleteDetached(ctx, "") }},
		{"a record named before the bindings' records", func() error { return s.PutResource(ctx, newResource("i-1", "a-1")) }},
		{"a progress update saving a record named before the bindings' records", func() error {
			return s.UpdateOperation(ctx, prov, broker.RecordChanges{Save: []broker.Resource{newResource("i-1", "Stack")}})
		}},
	}
	before := snapshot(t, s)
	run := func() {
		for _, c := range calls {
			var conflict *broker.ConflictError
			if err := c.call(); err == nil || errors.As(err, &conflict) {
				t.Errorf("%s: got %v, want an error that is not a conflict", c.name, err)
			}
		}
	}
	if around != nil {
		around(run)
	} else {
		run()
	}
	unchanged(t, s, before)
}
