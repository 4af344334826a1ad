package demo

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/store/bolt"
)

func newDriver(t *testing.T) (*Driver, *time.Time) {
	t.Helper()
	s, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := New(s)
	d.Now = func() time.Time { return now }
	return d, &now
}

func change(kind broker.OperationKind, opID string, async bool, params string) broker.Change {
	c := broker.Change{
		Operation: broker.Operation{ID: opID, InstanceID: "i", Kind: kind, Async: async},
		Instance:  broker.Instance{ID: "i", Parameters: json.RawMessage(params)},
	}
	if kind.IsBinding() {
		c.Binding = &broker.Binding{InstanceID: "i", ID: "b", Parameters: json.RawMessage(params)}
	}
	return c
}

func TestAsyncChangeTakesItsDuration(t *testing.T) {
	d, now := newDriver(t)
	ctx := context.Background()
	c := change(broker.KindProvision, "op-1", true, `{"duration_seconds":10}`)
	p, err := d.Begin(ctx, c)
	if err != nil || p.Done || p.RetryAfter != 10*time.Second {
		t.Fatalf("begin: %+v %v, want not done, retry after 10s", p, err)
	}
	if again, _ := d.Begin(ctx, c); again.RetryAfter != 10*time.Second {
		t.Fatalf("a second begin restarted the clock: %+v", again)
	}
	*now = now.Add(4 * time.Second)
	if p, _ := d.Check(ctx, c); p.Done || p.RetryAfter != 6*time.Second {
		t.Fatalf("check at 4s: %+v", p)
	}
	*now = now.Add(6 * time.Second)
	p, err = d.Check(ctx, c)
	if err != nil || !p.Done || p.DashboardURL == "" {
		t.Fatalf("check at 10s: %+v %v", p, err)
	}
}

func TestSyncChangeIsDoneAtOnce(t *testing.T) {
	d, _ := newDriver(t)
	p, err := d.Begin(context.Background(), change(broker.KindProvision, "op-1", false, `{"duration_seconds":3600}`))
	if err != nil || !p.Done {
		t.Fatalf("sync begin: %+v %v", p, err)
	}
}

func TestFailReportsItsDescription(t *testing.T) {
	d, now := newDriver(t)
	ctx := context.Background()
	var f *broker.Failure
	if _, err := d.Begin(ctx, change(broker.KindProvision, "op-1", false, `{"fail":true,"fail_description":"nope"}`)); !errors.As(err, &f) || f.Description != "nope" {
		t.Fatalf("sync fail: %v", err)
	}
	c := change(broker.KindProvision, "op-2", true, `{"fail":true,"duration_seconds":1}`)
	if _, err := d.Begin(ctx, c); err != nil {
		t.Fatalf("async fail begins without error: %v", err)
	}
	*now = now.Add(time.Second)
	if _, err := d.Check(ctx, c); !errors.As(err, &f) || f.Description == "" {
		t.Fatalf("async fail at its time: %v", err)
	}
}

func TestBindingsGetTheirOwnCredentialsAndUnbindDeletesThem(t *testing.T) {
	d, _ := newDriver(t)
	ctx := context.Background()
	c := change(broker.KindBind, "op-1", false, `{}`)
	p, err := d.Begin(ctx, c)
	if err != nil || p.Credentials["password"] == "" || p.Credentials["username"] != "u-b" {
		t.Fatalf("bind: %+v %v", p, err)
	}
	if again, _ := d.Check(ctx, c); again.Credentials["password"] != p.Credentials["password"] {
		t.Fatal("a check after bind returned other credentials")
	}
	other := change(broker.KindBind, "op-2", false, `{}`)
	other.Binding.ID = "b2"
	if p2, _ := d.Begin(ctx, other); p2.Credentials["password"] == p.Credentials["password"] {
		t.Fatal("two bindings share a password")
	}
	unbind := change(broker.KindUnbind, "op-3", false, `{}`)
	if p, err := d.Begin(ctx, unbind); err != nil || !p.Done {
		t.Fatalf("unbind: %+v %v", p, err)
	}
	if _, err := d.Store.GetResource(ctx, "i", "binding-b"); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("the binding's record survived: %v", err)
	}
	if p, err := d.Check(ctx, unbind); err != nil || !p.Done {
		t.Fatalf("unbind checked again: %+v %v", p, err)
	}
}

func TestDeprovisionOfNothingIsDone(t *testing.T) {
	d, _ := newDriver(t)
	if p, err := d.Begin(context.Background(), change(broker.KindDeprovision, "op-1", true, `{}`)); err != nil || !p.Done {
		t.Fatalf("deprovision with no record: %+v %v", p, err)
	}
}
