package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/drivers"
	"github.com/serverless-osb/broker/internal/store/bolt"
)

// onRecordDriver is a fake driver that acts on the world: it writes its
// record itself before acting, and its first Begin then fails with a
// transient error (a lost answer). It notes whether each Begin found its
// record in the change.
type onRecordDriver struct {
	store  broker.Resources
	begins []bool // per Begin: the record was in the change
}

func (d *onRecordDriver) Begin(ctx context.Context, c broker.Change) (broker.Progress, error) {
	_, found := c.Record("thing")
	d.begins = append(d.begins, found)
	if !found {
		if err := d.store.PutResource(ctx, broker.Resource{InstanceID: c.Instance.ID, Name: "thing", Data: json.RawMessage(`{}`)}); err != nil {
			return broker.Progress{}, err
		}
	}
	if len(d.begins) == 1 {
		return broker.Progress{}, errors.New("the answer was lost")
	}
	return broker.Progress{Done: true}, nil
}
func (d *onRecordDriver) Check(ctx context.Context, c broker.Change) (broker.Progress, error) {
	return broker.Progress{Done: true}, nil
}
func (d *onRecordDriver) Leftovers(context.Context, broker.Change) ([]string, error) { return nil, nil }
func (d *onRecordDriver) Cleanup(context.Context, broker.Detached) (broker.Progress, error) {
	return broker.Progress{Done: true}, nil
}

// TestASynchronousStepRetriedReadsWhatTheDriverWrote: after a transient
// error, a synchronous change's step runs again from the change as stored,
// so the driver finds the record it wrote before the call that failed.
func TestASynchronousStepRetriedReadsWhatTheDriverWrote(t *testing.T) {
	cat, err := catalog.Load(filepath.Join("..", "..", "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	d := &onRecordDriver{store: store}
	b := broker.New(cat, store, nil, drivers.Single(cat, d), slog.New(slog.DiscardHandler))
	b.Backoff = 0
	var svc, plan string
	for _, s := range cat.Services() {
		for _, p := range s.Plans {
			if p.Name == "fake-plan" {
				svc, plan = s.ID, p.ID
			}
		}
	}
	res, err := b.Provision(context.Background(), broker.ProvisionDetails{InstanceID: "i-1", InstanceRequest: broker.InstanceRequest{ServiceID: svc, PlanID: plan}})
	if err != nil || res.Result != broker.ResultCreated {
		t.Fatalf("provision: %+v %v", res, err)
	}
	if len(d.begins) != 2 || d.begins[0] || !d.begins[1] {
		t.Fatalf("begins found the record: %v; want [false true]", d.begins)
	}
}
