package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

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
	t.Run("a binding's change sees the instance's records and its own binding's, not the other bindings'; an instance's, only the instance's", func(t *testing.T) {
		for name, want := range map[string]bool{
			"instance": true, "a": true, broker.BindingRecord("b-1"): true, broker.BindingRecord("b-2"): false,
		} {
			if got := broker.RecordFor(name, "b-1"); got != want {
				t.Fatalf("RecordFor(%q, b-1) = %v", name, got)
			}
			if got, own := broker.RecordFor(name, ""), !broker.IsBindingRecord(name); got != own {
				t.Fatalf("RecordFor(%q, \"\") = %v", name, got)
			}
		}
	})
	t.Run("every binding's record is named within the bounds that stores read around", func(t *testing.T) {
		for _, name := range []string{broker.BindingRecord("b"), broker.BindingRecord("\U0010FFFF"), broker.BindingRecord("~")} {
			if !broker.IsBindingRecord(name) || name < broker.BindingRecordsFrom || name >= broker.BindingRecordsTo {
				t.Fatalf("%q is outside [%q, %q)", name, broker.BindingRecordsFrom, broker.BindingRecordsTo)
			}
		}
		for _, name := range []string{"binding", "binding.", "bindings", "a", "zz"} {
			if broker.IsBindingRecord(name) || (name >= broker.BindingRecordsFrom && name < broker.BindingRecordsTo) {
				t.Fatalf("%q is taken for a binding's record", name)
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

// recordedResources is the Resources a driver writes through, keeping what
// it was given.
type recordedResources struct{ put []broker.Resource }

func (r *recordedResources) PutResource(_ context.Context, res broker.Resource) error {
	r.put = append(r.put, res)
	return nil
}
func (r *recordedResources) DeleteResource(context.Context, string, string) error { return nil }

// TestTheRecordKit: what a driver keeps in a record comes back from the
// change as it put it, and a record it cannot read is an error naming it.
func TestTheRecordKit(t *testing.T) {
	type stack struct {
		Name string `json:"name"`
	}
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	t.Run("a record made with NewRecord decodes into the driver's type", func(t *testing.T) {
		r, err := broker.NewRecord("i-1", "stack", stack{Name: "osb-i-1"}, at)
		if err != nil || r.InstanceID != "i-1" || r.Name != "stack" || !r.UpdatedAt.Equal(at) {
			t.Fatalf("NewRecord: %+v %v", r, err)
		}
		var got stack
		found, err := broker.Change{Records: []broker.Resource{r}}.DecodeRecord("stack", &got)
		if err != nil || !found || got.Name != "osb-i-1" {
			t.Fatalf("DecodeRecord: %+v found %v, %v", got, found, err)
		}
	})
	t.Run("a record the change does not have is not found, and v stays as it was", func(t *testing.T) {
		got := stack{Name: "kept"}
		found, err := broker.Change{}.DecodeRecord("stack", &got)
		if err != nil || found || got.Name != "kept" {
			t.Fatalf("DecodeRecord: %+v found %v, %v", got, found, err)
		}
	})
	t.Run("a record that is not the driver's type is an error naming it and its instance", func(t *testing.T) {
		c := broker.Change{Instance: broker.Instance{ID: "i-1"}, Records: []broker.Resource{{InstanceID: "i-1", Name: "stack", Data: json.RawMessage(`[1]`)}}}
		var got stack
		if found, err := c.DecodeRecord("stack", &got); found || err == nil || !strings.Contains(err.Error(), "record stack of i-1") {
			t.Fatalf("DecodeRecord: found %v, %v", found, err)
		}
	})
	t.Run("a value that cannot be encoded makes no record", func(t *testing.T) {
		if _, err := broker.NewRecord("i-1", "stack", func() {}, at); err == nil || !strings.Contains(err.Error(), "record stack of i-1") {
			t.Fatalf("NewRecord of a func: %v", err)
		}
	})
	t.Run("PutRecord writes the record at once through Resources", func(t *testing.T) {
		var res recordedResources
		if err := broker.PutRecord(t.Context(), &res, "i-1", "stack", stack{Name: "osb-i-1"}, at); err != nil {
			t.Fatal(err)
		}
		if len(res.put) != 1 || res.put[0].Name != "stack" || string(res.put[0].Data) != `{"name":"osb-i-1"}` {
			t.Fatalf("written: %+v", res.put)
		}
	})
}

// TestTheInstanceListingsPages: a page token says where the next page
// starts, and a token no page returned is refused as one.
func TestTheInstanceListingsPages(t *testing.T) {
	after, err := broker.InstancePageAfter(broker.InstancePageToken("i-42"))
	if err != nil || after != "i-42" {
		t.Fatalf("the token of i-42 reads back as %q, %v", after, err)
	}
	if after, err := broker.InstancePageAfter(""); err != nil || after != "" {
		t.Fatalf("the first page: %q, %v", after, err)
	}
	for _, bad := range []string{"not base64!", broker.InstancePageToken("a\nb")} {
		if _, err := broker.InstancePageAfter(bad); !errors.Is(err, broker.ErrBadPage) {
			t.Errorf("token %q: %v, want ErrBadPage", bad, err)
		}
	}
	inst := broker.Instance{InstanceRequest: broker.InstanceRequest{ServiceID: "svc", PlanID: "plan"}}
	for f, want := range map[broker.InstanceFilter]bool{
		{}: true, {ServiceID: "svc"}: true, {ServiceID: "svc", PlanID: "plan"}: true,
		{ServiceID: "other"}: false, {PlanID: "other"}: false,
	} {
		if got := f.Selects(inst); got != want {
			t.Errorf("%+v selects %v, want %v", f, got, want)
		}
	}
}
