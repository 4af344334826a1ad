package broker_test

import (
	"reflect"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
)

// TestConditions: what each conditional write requires of the stored items,
// as docs/DESIGN.md and the Store port state it. The stores translate these
// lists and nothing else; storetest checks that they do.
func TestConditions(t *testing.T) {
	op := broker.Operation{ID: "op-2", InstanceID: "i-1", State: broker.OperationSucceeded}
	bindOp := op
	bindOp.BindingID = "b-1"
	inst := broker.Instance{ID: "i-1"}
	b := broker.Binding{InstanceID: "i-1", ID: "b-1", BindingRequest: broker.BindingRequest{ServiceID: "svc-1", PlanID: "plan-1"}}
	cases := []struct {
		name string
		got  broker.Expect
		want broker.Expect
	}{
		{"a provision creates an instance only where none is stored",
			broker.CreateInstanceConditions(),
			broker.Expect{Instance: []broker.Condition{broker.Missing}}},
		{"an update or deprovision locks an idle instance at the version it read, with no binding operations",
			broker.LockInstance{Version: 7}.Conditions(),
			broker.Expect{Instance: []broker.Condition{broker.AtVersion(7), broker.HeldBy(""), broker.NoBindingOps}}},
		{"a deprovision during a provision locks the instance held by the provision it halts",
			broker.LockInstance{Version: 2, Holder: "prov-1"}.Conditions(),
			broker.Expect{Instance: []broker.Condition{broker.AtVersion(2), broker.HeldBy("prov-1"), broker.NoBindingOps}}},
		{"a bind creates a binding of an idle, ready instance of the service and plan it names, where none is stored",
			broker.CreateBindingConditions(b, nil),
			broker.Expect{
				Instance: []broker.Condition{broker.HeldBy(""), broker.InState(broker.InstanceReady),
					broker.OfService("svc-1"), broker.OfPlan("plan-1")},
				Binding: []broker.Condition{broker.Missing},
			}},
		{"a bind settled in memory also requires the instance at the version it was computed from",
			broker.CreateBindingConditions(b, &broker.Settled{InstanceVersion: 5}),
			broker.Expect{
				Instance: []broker.Condition{broker.HeldBy(""), broker.InState(broker.InstanceReady),
					broker.OfService("svc-1"), broker.OfPlan("plan-1"), broker.AtVersion(5)},
				Binding: []broker.Condition{broker.Missing},
			}},
		{"a bind settled in memory from no known version requires no version",
			broker.CreateBindingConditions(b, &broker.Settled{}),
			broker.Expect{
				Instance: []broker.Condition{broker.HeldBy(""), broker.InState(broker.InstanceReady),
					broker.OfService("svc-1"), broker.OfPlan("plan-1")},
				Binding: []broker.Condition{broker.Missing},
			}},
		{"an unbind locks an idle binding at the version it read, of an idle instance",
			broker.LockBinding{Version: 3}.Conditions(),
			broker.Expect{
				Instance: []broker.Condition{broker.HeldBy("")},
				Binding:  []broker.Condition{broker.AtVersion(3), broker.HeldBy("")},
			}},
		{"an unbind during a bind locks the binding held by the bind it halts",
			broker.LockBinding{Version: 1, Holder: "bind-1"}.Conditions(),
			broker.Expect{
				Instance: []broker.Condition{broker.HeldBy("")},
				Binding:  []broker.Condition{broker.AtVersion(1), broker.HeldBy("bind-1")},
			}},
		{"progress is recorded only of an operation in progress",
			broker.UpdateOperationConditions(),
			broker.Expect{Operation: []broker.Condition{broker.InState(broker.OperationInProgress)}}},
		{"an outcome that writes nothing else requires only the operation in progress",
			broker.Finish{Op: op}.Conditions(),
			broker.Expect{Operation: []broker.Condition{broker.InState(broker.OperationInProgress)}}},
		{"an outcome that stores the instance requires the operation to hold it",
			broker.Finish{Op: op, Instance: &inst}.Conditions(),
			broker.Expect{
				Instance:  []broker.Condition{broker.HeldBy("op-2")},
				Operation: []broker.Condition{broker.InState(broker.OperationInProgress)},
			}},
		{"a deprovision's outcome deletes the instance only while it holds it",
			broker.Finish{Op: op, DeleteInstance: true}.Conditions(),
			broker.Expect{
				Instance:  []broker.Condition{broker.HeldBy("op-2")},
				Operation: []broker.Condition{broker.InState(broker.OperationInProgress)},
			}},
		{"a bind's outcome stores the binding only while it holds it",
			broker.Finish{Op: bindOp, Binding: &b, ReleaseBinding: true}.Conditions(),
			broker.Expect{
				Binding:   []broker.Condition{broker.HeldBy("op-2")},
				Operation: []broker.Condition{broker.InState(broker.OperationInProgress)},
			}},
		{"an unbind's outcome deletes the binding only while it holds it",
			broker.Finish{Op: bindOp, DeleteBinding: true, ReleaseBinding: true}.Conditions(),
			broker.Expect{
				Binding:   []broker.Condition{broker.HeldBy("op-2")},
				Operation: []broker.Condition{broker.InState(broker.OperationInProgress)},
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !reflect.DeepEqual(c.got, c.want) {
				t.Errorf("got %v, want %v", c.got, c.want)
			}
			checkKinds(t, c.got)
		})
	}

	t.Run("a release of a binding operation never takes the count below zero", func(t *testing.T) {
		got := broker.Finish{Op: bindOp, DeleteBinding: true, ReleaseBinding: true}.ReleaseConditions()
		if want := []broker.Condition{broker.HasBindingOps}; !reflect.DeepEqual(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
		if got := (broker.Finish{Op: op, Instance: &inst}).ReleaseConditions(); got != nil {
			t.Errorf("without ReleaseBinding: got %v, want none", got)
		}
	})
	t.Run("two reapers cannot both start a cleanup: a detached record is updated at the attempts read", func(t *testing.T) {
		got := broker.UpdateDetachedConditions(4)
		if want := []broker.Condition{broker.AttemptsAre(4)}; !reflect.DeepEqual(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("a Finish writes the binding it stores, or to delete, the operation's", func(t *testing.T) {
		other := b
		other.ID = "b-2"
		if got := (broker.Finish{Op: bindOp, Binding: &other}).BindingID(); got != "b-2" {
			t.Errorf("storing: got %q, want b-2", got)
		}
		if got := (broker.Finish{Op: bindOp, DeleteBinding: true}).BindingID(); got != "b-1" {
			t.Errorf("deleting: got %q, want b-1", got)
		}
	})
}

// checkKinds fails when a list asks of an item what it does not have, or
// combines Missing with anything: the stores' translations assume neither.
func checkKinds(t *testing.T, e broker.Expect) {
	t.Helper()
	allowed := []struct {
		item  string
		conds []broker.Condition
		kinds []broker.ConditionKind
	}{
		{"instance", e.Instance, []broker.ConditionKind{broker.CondMissing, broker.CondHeldBy, broker.CondVersion,
			broker.CondState, broker.CondNoBindingOps, broker.CondBindingOps, broker.CondService, broker.CondPlan}},
		{"binding", e.Binding, []broker.ConditionKind{broker.CondMissing, broker.CondHeldBy, broker.CondVersion}},
		{"operation", e.Operation, []broker.ConditionKind{broker.CondState}},
	}
	for _, a := range allowed {
		for _, c := range a.conds {
			ok := false
			for _, k := range a.kinds {
				ok = ok || c.Kind == k
			}
			if !ok {
				t.Errorf("%s: condition %v does not apply to it", a.item, c)
			}
			if c.Kind == broker.CondMissing && len(a.conds) > 1 {
				t.Errorf("%s: Missing combined with %v", a.item, a.conds)
			}
		}
	}
}

func TestConditionString(t *testing.T) {
	cases := map[broker.Condition]string{
		broker.Missing:      "missing",
		broker.HeldBy(""):   `held by ""`,
		broker.AtVersion(3): "at version 3",
		broker.InState(broker.OperationInProgress):  `in state "in progress"`,
		broker.NoBindingOps:                         "no binding operations",
		broker.AttemptsAre(2):                       "attempts 2",
		broker.OfService("svc-1"):                   `of service "svc-1"`,
		broker.OfPlan("plan-1"):                     `of plan "plan-1"`,
		{Kind: broker.ConditionKind(99), Text: "x"}: "condition(99)",
	}
	for c, want := range cases {
		if got := c.String(); got != want {
			t.Errorf("%#v: got %q, want %q", c, got, want)
		}
	}
}
