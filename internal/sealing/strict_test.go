package sealing

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/store/dynamo"
	"github.com/serverless-osb/broker/internal/store/storetest"
)

// plantedSecret is what the values written in clear behind the broker's
// back hold: no error may show it.
const plantedSecret = "planted-in-clear-0f-the-table"

// rawStore is a store beneath the sealing store, as both stores are.
type rawStore interface {
	broker.Store
	broker.SecretStore
	broker.SealingModes
}

// checkPlantedValuesAreRefused fills the store, re-seals it, then writes
// values in clear into the store beneath (a binding's credentials, a
// detached record's data, a record's data): each read through a sealing
// store, the one that re-sealed or a new one (another process), fails with
// ErrStoredInClear naming the item and the field, never the value.
func checkPlantedValuesAreRefused(t *testing.T, inner rawStore, sealer Sealer) {
	ctx := t.Context()
	s := NewStore(inner, sealer)
	storeWithEveryKindOfSecret(t, s, inner)
	checkOpens(t, s) // b-old, in clear, is read as it is before the re-seal
	rep, err := s.Reseal(ctx)
	if err != nil || !rep.SealedOnly {
		t.Fatalf("reseal: %+v %v, want every value sealed and the mode recorded", rep, err)
	}
	if m, err := inner.SealingMode(ctx); err != nil || !m.SealedOnly || m.KeyID != rep.KeyID || m.Since.IsZero() {
		t.Fatalf("the mode recorded: %+v %v, want sealed only under %s", m, err, rep.KeyID)
	}

	now := time.Now().UTC()
	op := broker.Operation{ID: "bind-planted", InstanceID: "i-1", BindingID: "b-planted", Kind: broker.KindBind, State: broker.OperationSucceeded,
		CreatedAt: now, UpdatedAt: now, FinishedAt: now, ExpiresAt: now.Add(broker.Retention)}
	planted := broker.Binding{InstanceID: "i-1", ID: "b-planted", BindingRequest: broker.BindingRequest{ServiceID: "s", PlanID: "p"}, State: broker.BindingReady, LastOp: op.ID,
		Credentials: broker.Credentials{"password": plantedSecret}, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := inner.CreateBinding(ctx, planted, op, &broker.Settled{}); err != nil {
		t.Fatal(err)
	}
	clear := json.RawMessage(`{"secret":"` + plantedSecret + `"}`)
	storetest.Detach(t, inner, broker.Resource{InstanceID: "i-9", Name: "gone", Data: clear, UpdatedAt: now},
		broker.Detached{ID: "d-planted", InstanceID: "i-9", Name: "gone", Data: clear, PlanID: "p", OperationID: "op",
			State: broker.DetachedPending, CreatedAt: now, UpdatedAt: now})

	refused := func(t *testing.T, err error, names ...string) {
		t.Helper()
		if !errors.Is(err, ErrStoredInClear) {
			t.Fatalf("got %v, want ErrStoredInClear", err)
		}
		for _, name := range append(names, "stored in clear after the table was sealed") {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("the error %q does not name %q", err, name)
			}
		}
		if strings.Contains(err.Error(), plantedSecret) {
			t.Errorf("the error shows the planted value: %q", err)
		}
	}
	for _, c := range []struct {
		name string
		s    *Store
	}{{"the store that re-sealed", s}, {"a new sealing store", NewStore(inner, sealer)}} {
		t.Run(c.name+" refuses credentials in clear", func(t *testing.T) {
			b, err := c.s.GetBinding(ctx, "i-1", "b-planted")
			refused(t, err, "credentials", "b-planted", "i-1")
			if len(b.Credentials) != 0 {
				t.Errorf("handed out %v", b.Credentials)
			}
		})
		t.Run(c.name+" refuses a detached record in clear", func(t *testing.T) {
			_, err := c.s.GetDetached(ctx, "d-planted")
			refused(t, err, "d-planted", "gone", "i-9")
			_, err = c.s.ListDetached(ctx)
			refused(t, err, "d-planted")
		})
		t.Run(c.name+" still opens every sealed value", func(t *testing.T) {
			for _, id := range []string{"b-1", "b-old"} {
				if b, err := c.s.GetBinding(ctx, "i-1", id); err != nil || len(b.Credentials) == 0 {
					t.Errorf("binding %s: %v", id, err)
				}
			}
			if d, err := c.s.GetDetached(ctx, "d-1"); err != nil || len(d.Data) == 0 {
				t.Errorf("detached d-1: %v", err)
			}
		})
	}
	if err := inner.PutResource(ctx, broker.Resource{InstanceID: "i-1", Name: "planted", Data: clear, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	_, err = storetest.Record(ctx, NewStore(inner, sealer), "i-1", "instance")
	refused(t, err, "record planted", "i-1")
}

func TestPlantedClearValuesAreRefusedAfterAResealOnBolt(t *testing.T) {
	inner := boltStore(t, filepath.Join(t.TempDir(), "db"))
	checkPlantedValuesAreRefused(t, inner, localSealer(t))
}

func TestPlantedClearValuesAreRefusedAfterAResealOnDynamoDB(t *testing.T) {
	client := dynamodb.NewFromConfig(mototest.Config(t, "eu-west-3"))
	table := mototest.Name("strict")
	if err := dynamo.CreateTable(t.Context(), client, table); err != nil {
		t.Fatal(err)
	}
	f := newKMSFixture(t)
	sealer := f.sealer(t, KMSConfig{KeyID: f.newKey(t), SharedDataKeys: true, SharedContext: map[string]string{"table": table}})
	checkPlantedValuesAreRefused(t, dynamo.New(client, table), sealer)
}

// countedModes counts the reads of the sealing mode.
type countedModes struct {
	rawStore
	reads atomic.Int32
}

func (c *countedModes) SealingMode(ctx context.Context) (broker.SealingMode, error) {
	c.reads.Add(1)
	return c.rawStore.SealingMode(ctx)
}

// TestTheModeIsReadOnlyForAValueInClear: reading sealed values reads no
// mode (no request added to any endpoint); a value in clear reads it once
// per ModeMaxAge while it accepts them, so another process's re-seal is
// seen within ModeMaxAge.
func TestTheModeIsReadOnlyForAValueInClear(t *testing.T) {
	inner := boltStore(t, filepath.Join(t.TempDir(), "db"))
	sealer := localSealer(t)
	storeWithEveryKindOfSecret(t, NewStore(inner, sealer), inner)
	counted := &countedModes{rawStore: inner}
	now := time.Now()
	s := &Store{Store: counted, Sealer: sealer, ModeMaxAge: time.Minute, Now: func() time.Time { return now }}
	ctx := t.Context()

	checkReads := func(what string, want int32) {
		t.Helper()
		if got := counted.reads.Swap(0); got != want {
			t.Errorf("%s: %d reads of the mode, want %d", what, got, want)
		}
	}
	if _, err := s.GetBinding(ctx, "i-1", "b-1"); err != nil {
		t.Fatal(err)
	}
	checkReads("a sealed binding", 0)
	for range 3 {
		if _, err := s.GetBinding(ctx, "i-1", "b-old"); err != nil {
			t.Fatal(err)
		}
	}
	checkReads("a binding in clear, three times within ModeMaxAge", 1)

	// Another process re-seals, then a value is planted in clear.
	if _, err := NewStore(inner, sealer).Reseal(ctx); err != nil {
		t.Fatal(err)
	}
	plant := broker.Binding{InstanceID: "i-1", ID: "b-planted", BindingRequest: broker.BindingRequest{ServiceID: "s", PlanID: "p"}, State: broker.BindingReady,
		Credentials: broker.Credentials{"password": plantedSecret}, Version: 1, CreatedAt: now, UpdatedAt: now}
	op := broker.Operation{ID: "bind-planted", InstanceID: "i-1", BindingID: "b-planted", Kind: broker.KindBind, State: broker.OperationSucceeded,
		CreatedAt: now, UpdatedAt: now, FinishedAt: now, ExpiresAt: now.Add(broker.Retention)}
	if err := inner.CreateBinding(ctx, plant, op, &broker.Settled{}); err != nil {
		t.Fatal(err)
	}
	counted.reads.Store(0)
	if _, err := s.GetBinding(ctx, "i-1", "b-planted"); err != nil {
		t.Fatalf("within ModeMaxAge of its last read, the mode that accepts values in clear still holds: %v", err)
	}
	checkReads("within ModeMaxAge", 0)
	now = now.Add(time.Minute)
	for range 2 {
		if _, err := s.GetBinding(ctx, "i-1", "b-planted"); !errors.Is(err, ErrStoredInClear) {
			t.Fatalf("after ModeMaxAge: %v, want ErrStoredInClear", err)
		}
	}
	checkReads("after ModeMaxAge, twice: a mode that refuses is kept", 1)
}

// TestSealedOnlyRefusesValuesInClearWhateverTheStoreSays: a store that
// never recorded a mode, as one whose mode item was deleted, accepts
// values in clear, but not through a sealing store with SealedOnly (the
// deployment's sealedOnly): credentials and records in clear are refused,
// and the parameters and fingerprints of its sensitive plans, not those
// of another plan.
func TestSealedOnlyRefusesValuesInClearWhateverTheStoreSays(t *testing.T) {
	ctx := t.Context()
	inner := boltStore(t, filepath.Join(t.TempDir(), "db"))
	sealer := localSealer(t)
	planted := json.RawMessage(`{"password":"` + plantedSecret + `"}`)
	createInClear(t, inner, "i-s", "sensitive", planted)
	createInClear(t, inner, "i-o", "other", planted)
	now := time.Now().UTC()
	if err := inner.PutResource(ctx, broker.Resource{InstanceID: "i-o", Name: "planted", Data: planted, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if m, err := inner.SealingMode(ctx); err != nil || m.SealedOnly {
		t.Fatalf("the store's mode: %+v %v, want none", m, err)
	}

	accepting := &Store{Store: inner, Sealer: sealer, SensitivePlans: []string{"sensitive"}}
	if inst, err := accepting.GetInstance(ctx, "i-s"); err != nil || string(inst.Parameters) != string(planted) {
		t.Fatalf("without SealedOnly and with no mode, the parameters in clear: %s %v, want read as they are", inst.Parameters, err)
	}

	s := &Store{Store: inner, Sealer: sealer, SensitivePlans: []string{"sensitive"}, SealedOnly: true}
	for _, c := range []struct {
		name string
		err  func() error
		says string
	}{
		{"the sensitive plan's instance parameters", func() error { _, err := s.GetInstance(ctx, "i-s"); return err }, "the parameters of instance i-s"},
		{"the sensitive plan's binding parameters", func() error { _, err := s.GetBinding(ctx, "i-s", "b-1"); return err }, "the parameters of binding b-1 of instance i-s"},
		{"the sensitive plan's operation fingerprint", func() error { _, err := s.GetOperation(ctx, "i-s", "prov-i-s"); return err }, "the fingerprint of operation prov-i-s"},
		{"a record's data", func() error { _, err := storetest.Record(ctx, s, "i-o", "planted"); return err }, "record planted"},
	} {
		t.Run("SealedOnly refuses "+c.name+" in clear", func(t *testing.T) {
			err := c.err()
			if !errors.Is(err, ErrStoredInClear) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("got %v, want ErrStoredInClear naming %q", err, c.says)
			}
			if strings.Contains(err.Error(), plantedSecret) {
				t.Errorf("the error shows the planted value: %q", err)
			}
		})
	}
	t.Run("SealedOnly refuses credentials in clear", func(t *testing.T) {
		op := broker.Operation{ID: "bind-planted", InstanceID: "i-o", BindingID: "b-planted", Kind: broker.KindBind, State: broker.OperationSucceeded,
			CreatedAt: now, UpdatedAt: now, FinishedAt: now, ExpiresAt: now.Add(broker.Retention)}
		b := broker.Binding{InstanceID: "i-o", ID: "b-planted", BindingRequest: broker.BindingRequest{ServiceID: "s", PlanID: "other"}, State: broker.BindingReady, LastOp: op.ID,
			Credentials: broker.Credentials{"password": plantedSecret}, Version: 1, CreatedAt: now, UpdatedAt: now}
		if err := inner.CreateBinding(ctx, b, op, &broker.Settled{InstanceVersion: 2}); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetBinding(ctx, "i-o", "b-planted")
		if !errors.Is(err, ErrStoredInClear) || len(got.Credentials) != 0 {
			t.Fatalf("got %v %v, want ErrStoredInClear and no credentials", got.Credentials, err)
		}
	})
	t.Run("SealedOnly reads another plan's parameters in clear", func(t *testing.T) {
		if inst, err := s.GetInstance(ctx, "i-o"); err != nil || string(inst.Parameters) != string(planted) {
			t.Errorf("got %s %v", inst.Parameters, err)
		}
	})
}
