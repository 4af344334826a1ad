package demo

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

func newDriver(t *testing.T) (*Driver, *time.Time) {
	t.Helper()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := New()
	d.Now = func() time.Time { return now }
	return d, &now
}

// records plays the broker: it keeps the records the driver's changes
// leave, and hands them to each change.
type records struct{ list []broker.Resource }

func (r *records) call(c broker.Change, step func(context.Context, broker.Change) (broker.Progress, error)) (broker.Progress, error) {
	c.Records = r.list
	p, err := step(context.Background(), c)
	if err == nil {
		r.list = c.WithRecords(p.Records).Records
	}
	return p, err
}

func (r *records) has(name string) bool {
	_, ok := broker.Change{Records: r.list}.Record(name)
	return ok
}

func change(kind broker.OperationKind, opID string, async bool, params string) broker.Change {
	c := broker.Change{
		Operation: broker.Operation{ID: opID, InstanceID: "i", Kind: kind, Async: async},
		Instance:  broker.Instance{ID: "i", InstanceRequest: broker.InstanceRequest{Parameters: json.RawMessage(params)}},
	}
	if kind.IsBinding() {
		c.Binding = &broker.Binding{InstanceID: "i", ID: "b", BindingRequest: broker.BindingRequest{Parameters: json.RawMessage(params)}}
	}
	return c
}

func TestAsyncChangeTakesItsDuration(t *testing.T) {
	d, now := newDriver(t)
	var r records
	c := change(broker.KindProvision, "op-1", true, `{"duration_seconds":10}`)
	p, err := r.call(c, d.Begin)
	if err != nil || p.Done || p.RetryAfter != 10*time.Second || !r.has("instance") {
		t.Fatalf("begin: %+v %v, want not done, retry after 10s, and the record", p, err)
	}
	if again, _ := r.call(c, d.Begin); again.RetryAfter != 10*time.Second {
		t.Fatalf("a second begin restarted the clock: %+v", again)
	}
	*now = now.Add(4 * time.Second)
	if p, _ := r.call(c, d.Check); p.Done || p.RetryAfter != 6*time.Second {
		t.Fatalf("check at 4s: %+v", p)
	}
	*now = now.Add(6 * time.Second)
	p, err = r.call(c, d.Check)
	if err != nil || !p.Done || p.DashboardURL == "" {
		t.Fatalf("check at 10s: %+v %v", p, err)
	}
}

func TestSyncChangeIsDoneAtOnce(t *testing.T) {
	d, _ := newDriver(t)
	var r records
	p, err := r.call(change(broker.KindProvision, "op-1", false, `{"duration_seconds":3600}`), d.Begin)
	if err != nil || !p.Done || !r.has("instance") {
		t.Fatalf("sync begin: %+v %v", p, err)
	}
}

func TestFailReportsItsDescription(t *testing.T) {
	d, now := newDriver(t)
	var r records
	var f *broker.Failure
	if _, err := r.call(change(broker.KindProvision, "op-1", false, `{"fail":true,"fail_description":"nope"}`), d.Begin); !errors.As(err, &f) || f.Description != "nope" {
		t.Fatalf("sync fail: %v", err)
	}
	c := change(broker.KindProvision, "op-2", true, `{"fail":true,"duration_seconds":1}`)
	if _, err := r.call(c, d.Begin); err != nil {
		t.Fatalf("async fail begins without error: %v", err)
	}
	*now = now.Add(time.Second)
	if _, err := r.call(c, d.Check); !errors.As(err, &f) || f.Description == "" {
		t.Fatalf("async fail at its time: %v", err)
	}
}

func TestBindingsGetTheirOwnCredentialsAndUnbindDeletesThem(t *testing.T) {
	d, _ := newDriver(t)
	var r records
	c := change(broker.KindBind, "op-1", false, `{}`)
	p, err := r.call(c, d.Begin)
	if err != nil || p.Credentials["password"] == "" || p.Credentials["username"] != "u-b" {
		t.Fatalf("bind: %+v %v", p, err)
	}
	if again, _ := r.call(c, d.Check); again.Credentials["password"] != p.Credentials["password"] {
		t.Fatal("a check after bind returned other credentials")
	}
	other := change(broker.KindBind, "op-2", false, `{}`)
	other.Binding.ID = "b2"
	if p2, _ := r.call(other, d.Begin); p2.Credentials["password"] == p.Credentials["password"] {
		t.Fatal("two bindings share a password")
	}
	unbind := change(broker.KindUnbind, "op-3", false, `{}`)
	if p, err := r.call(unbind, d.Begin); err != nil || !p.Done {
		t.Fatalf("unbind: %+v %v", p, err)
	}
	if r.has("binding-b") || !r.has("binding-b2") {
		t.Fatalf("the unbind did not remove exactly its binding's record: %+v", r.list)
	}
	if p, err := r.call(unbind, d.Check); err != nil || !p.Done {
		t.Fatalf("unbind checked again: %+v %v", p, err)
	}
}

func TestDeprovisionOfNothingIsDone(t *testing.T) {
	d, _ := newDriver(t)
	if p, err := d.Begin(context.Background(), change(broker.KindDeprovision, "op-1", true, `{}`)); err != nil || !p.Done {
		t.Fatalf("deprovision with no record: %+v %v", p, err)
	}
}
