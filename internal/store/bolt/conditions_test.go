package bolt

import (
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
)

// TestMeets: each kind of broker.Condition, as this store translates it,
// holds on the stored items it should (the dynamo store's TestCondition
// has the same table).
func TestMeets(t *testing.T) {
	items := map[string]*stored{
		"idle":    storedInstance(&broker.Instance{ID: "idle", State: broker.InstanceReady, Version: 3}),
		"held":    storedInstance(&broker.Instance{ID: "held", State: broker.InstanceUpdating, Op: "op-1", Version: 4, BindingOps: 1}),
		"missing": storedInstance(nil), "detached": storedDetached(&broker.Detached{ID: "d-1", Attempts: 2}),
		"missing detached": storedDetached(nil),
	}
	cases := []struct {
		name  string
		conds []broker.Condition
		holds map[string]bool
	}{
		{"missing", []broker.Condition{broker.Missing},
			map[string]bool{"idle": false, "held": false, "missing": true, "missing detached": true}},
		{"idle", []broker.Condition{broker.HeldBy("")}, map[string]bool{"idle": true, "held": false, "missing": false}},
		{"held by op-1", []broker.Condition{broker.HeldBy("op-1")}, map[string]bool{"idle": false, "held": true, "missing": false}},
		{"at version 3", []broker.Condition{broker.AtVersion(3)}, map[string]bool{"idle": true, "held": false, "missing": false}},
		{"ready", []broker.Condition{broker.InState(broker.InstanceReady)}, map[string]bool{"idle": true, "held": false, "missing": false}},
		{"no binding operations", []broker.Condition{broker.NoBindingOps}, map[string]bool{"idle": true, "held": false, "missing": false}},
		{"binding operations", []broker.Condition{broker.HasBindingOps}, map[string]bool{"idle": false, "held": true, "missing": false}},
		{"idle at version 3", []broker.Condition{broker.HeldBy(""), broker.AtVersion(3)}, map[string]bool{"idle": true, "held": false}},
		{"idle at version 4", []broker.Condition{broker.HeldBy(""), broker.AtVersion(4)}, map[string]bool{"idle": false, "held": false}},
		{"attempts 2", []broker.Condition{broker.AttemptsAre(2)}, map[string]bool{"detached": true, "missing detached": false}},
		{"attempts 1", []broker.Condition{broker.AttemptsAre(1)}, map[string]bool{"detached": false}},
	}
	for _, c := range cases {
		for item, want := range c.holds {
			t.Run(c.name+" of "+item, func(t *testing.T) {
				got, err := meets(items[item], c.conds)
				if err != nil || got != want {
					t.Errorf("got %v, %v; want %v", got, err, want)
				}
			})
		}
	}
	t.Run("an unknown kind is an error, not a failed condition", func(t *testing.T) {
		if _, err := meets(items["idle"], []broker.Condition{{Kind: 99}}); err == nil {
			t.Error("got no error")
		}
	})
	t.Run("no conditions hold of any item", func(t *testing.T) {
		if got, err := meets(nil, nil); !got || err != nil {
			t.Errorf("got %v, %v", got, err)
		}
	})
}
