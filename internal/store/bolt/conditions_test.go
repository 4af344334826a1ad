package bolt

import (
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/store/storetest"
)

// TestMeets: each kind of broker.Condition, as this store translates it,
// holds on the stored items it should (storetest.ConditionCases, which the
// dynamo store's TestCondition runs too).
func TestMeets(t *testing.T) {
	items := map[string]*stored{}
	for name, inst := range storetest.ConditionInstances {
		items[name] = storedInstance(inst)
	}
	for name, d := range storetest.ConditionDetached {
		items[name] = storedDetached(d)
	}
	for _, c := range storetest.ConditionCases {
		for item, want := range c.Holds {
			t.Run(c.Name+" of "+item, func(t *testing.T) {
				got, err := meets(items[item], c.Conds)
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
