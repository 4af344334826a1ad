package broker_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
)

// TestRecordChanges: a driver's record changes, kept in memory between the
// steps of a synchronous change and written with its outcome.
func TestRecordChanges(t *testing.T) {
	res := func(name, data string) broker.Resource {
		return broker.Resource{InstanceID: "i-1", Name: name, Data: json.RawMessage(data)}
	}
	names := func(rs []broker.Resource) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Name+"="+string(r.Data))
		}
		return out
	}
	t.Run("a later change to a name wins when changes are merged", func(t *testing.T) {
		earlier := broker.RecordChanges{Save: []broker.Resource{res("a", "1"), res("b", "1")}, Remove: []string{"c"}}
		later := broker.RecordChanges{Save: []broker.Resource{res("c", "2")}, Remove: []string{"a"}}
		got := earlier.Merge(later)
		if s := names(got.Save); !slices.Equal(s, []string{"b=1", "c=2"}) || !slices.Equal(got.Remove, []string{"a"}) {
			t.Fatalf("merged: save %v, remove %v", s, got.Remove)
		}
	})
	t.Run("a change's next step sees the records as the changes so far left them", func(t *testing.T) {
		c := broker.Change{Records: []broker.Resource{res("a", "1"), res("b", "1")}}
		c = c.WithRecords(broker.RecordChanges{Save: []broker.Resource{res("b", "2"), res("c", "1")}, Remove: []string{"a"}})
		if got := names(c.Records); !slices.Equal(got, []string{"b=2", "c=1"}) {
			t.Fatalf("records %v", got)
		}
		if _, ok := c.Record("a"); ok {
			t.Fatal("a removed record is still found")
		}
	})
	t.Run("a binding's change sees the instance's records and its own binding's, not the other bindings'", func(t *testing.T) {
		for name, want := range map[string]bool{
			"instance": true, broker.BindingRecord("b-1"): true, broker.BindingRecord("b-2"): false,
		} {
			if got := broker.RecordFor(name, "b-1"); got != want {
				t.Fatalf("RecordFor(%q, b-1) = %v", name, got)
			}
			if !broker.RecordFor(name, "") {
				t.Fatalf("the instance's change does not see %q", name)
			}
		}
	})
	t.Run("what a provision or bind makes is its record; an update, deprovision or unbind makes none to leave", func(t *testing.T) {
		for kind, want := range map[broker.OperationKind][]string{
			broker.KindProvision:   {"db"},
			broker.KindBind:        {broker.BindingRecord("b-1")},
			broker.KindUpdate:      nil,
			broker.KindDeprovision: nil,
			broker.KindUnbind:      nil,
		} {
			c := broker.Change{Operation: broker.Operation{Kind: kind, BindingID: "b-1"}}
			if got := c.MadeRecords("db"); !slices.Equal(got, want) {
				t.Fatalf("%s: %v, want %v", kind, got, want)
			}
		}
	})
}
