package sealing

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/store/dynamo"
	"github.com/serverless-osb/broker/internal/store/storetest"
)

// storeWithEveryKindOfSecret fills s (a sealing store over inner) with a
// binding's credentials and a driver record (bindWithSecrets), a detached
// record, and a binding stored before sealing was on (in inner directly).
func storeWithEveryKindOfSecret(t *testing.T, s *Store, inner broker.Store) {
	t.Helper()
	ctx := t.Context()
	bindWithSecrets(t, s)
	now := time.Now().UTC()
	storetest.Detach(t, s, broker.Resource{InstanceID: "i-1", Name: "gone", Data: json.RawMessage(`{"secret":"detached-one"}`), UpdatedAt: now},
		broker.Detached{ID: "d-1", InstanceID: "i-1", Name: "gone", Data: json.RawMessage(`{"secret":"detached-one"}`),
			PlanID: "p", OperationID: "op", State: broker.DetachedPending, CreatedAt: now, UpdatedAt: now})
	op := broker.Operation{ID: "bind-old", InstanceID: "i-1", BindingID: "b-old", Kind: broker.KindBind, State: broker.OperationSucceeded,
		CreatedAt: now, UpdatedAt: now, FinishedAt: now, ExpiresAt: now.Add(broker.Retention)}
	old := broker.Binding{InstanceID: "i-1", ID: "b-old", BindingRequest: broker.BindingRequest{ServiceID: "s", PlanID: "p"}, State: broker.BindingReady, LastOp: op.ID,
		Credentials: broker.Credentials{"password": "stored-before-sealing"}, Version: 2, CreatedAt: now, UpdatedAt: now}
	if err := inner.CreateBinding(ctx, old, op, &broker.Settled{}); err != nil {
		t.Fatal(err)
	}
}

// keysOf are the key ids that seal each stored credentials and record
// data, and how many are stored plain (request parameters: see
// TestResealSealsTheParametersOfSensitivePlans).
func keysOf(t *testing.T, raw broker.SecretStore) (map[string]int, int) {
	t.Helper()
	keys, plain := map[string]int{}, 0
	err := raw.StoredSecrets(t.Context(), func(v broker.StoredSecret) error {
		if v.Kind == broker.SecretParameters || v.Kind == broker.SecretFingerprint {
			return nil
		}
		s, err := Parse(v.Value)
		if v.Plain || err != nil {
			plain++
			return nil
		}
		keys[s.KeyID]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys, plain
}

// checkOpens reads every secret through the sealing store.
func checkOpens(t *testing.T, s *Store) {
	t.Helper()
	ctx := t.Context()
	for _, id := range []string{"b-1", "b-old"} {
		b, err := s.GetBinding(ctx, "i-1", id)
		if err != nil || len(b.Credentials) == 0 {
			t.Fatalf("binding %s: %v %v", id, b.Credentials, err)
		}
	}
	if r, err := storetest.Record(ctx, s, "i-1", "instance"); err != nil || len(r.Data) == 0 {
		t.Fatalf("record: %s %v", r.Data, err)
	}
	if d, err := s.GetDetached(ctx, "d-1"); err != nil || len(d.Data) == 0 {
		t.Fatalf("detached: %s %v", d.Data, err)
	}
}

// TestResealMovesEveryValueToTheCurrentKey rotates the local key, then
// re-seals: every value (credentials, records, detached records, and the
// credentials stored before sealing) ends under the new key and still
// opens; a second run changes nothing.
func TestResealMovesEveryValueToTheCurrentKey(t *testing.T) {
	inner := boltStore(t, filepath.Join(t.TempDir(), "db"))
	sealer := localSealer(t)
	s := NewStore(inner, sealer)
	storeWithEveryKindOfSecret(t, s, inner)
	first, _ := sealer.KeyIDs()
	if keys, plain := keysOf(t, inner); len(keys) != 1 || plain != 1 {
		t.Fatalf("before: keys %v, %d plain; want one key and the old binding plain", keys, plain)
	}
	current, err := sealer.Rotate()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Reseal(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rep.KeyID != current || rep.Values != 4 || rep.Resealed != 3 || rep.Sealed != 1 || rep.Current != 0 || rep.Changed != 0 {
		t.Fatalf("report %+v, want 3 re-sealed and 1 sealed under %s (was %v)", rep, current, first)
	}
	if keys, plain := keysOf(t, inner); len(keys) != 1 || keys[current] != 4 || plain != 0 {
		t.Fatalf("after: keys %v, %d plain; want all 4 under %s", keys, plain, current)
	}
	checkOpens(t, s)
	if again, err := s.Reseal(t.Context()); err != nil || again.Current != 4 || again.Resealed+again.Sealed != 0 {
		t.Fatalf("a second run: %+v %v, want all 4 current", again, err)
	}
}

// crashingSecrets is a fake that stands for a crash: its ReplaceSecret
// fails after n writes.
type crashingSecrets struct {
	broker.Store
	raw broker.SecretStore
	n   int
}

func (c *crashingSecrets) StoredSecrets(ctx context.Context, fn func(broker.StoredSecret) error) error {
	return c.raw.StoredSecrets(ctx, fn)
}

func (c *crashingSecrets) ReplaceSecret(ctx context.Context, v broker.StoredSecret, sealed json.RawMessage) error {
	if c.n == 0 {
		return errors.New("crash")
	}
	c.n--
	return c.raw.ReplaceSecret(ctx, v, sealed)
}

// TestAResealCutShortLosesNothing stops re-sealing after two writes: every
// value still opens, under one key or the other, and a new run finishes
// the work.
func TestAResealCutShortLosesNothing(t *testing.T) {
	inner := boltStore(t, filepath.Join(t.TempDir(), "db"))
	sealer := localSealer(t)
	storeWithEveryKindOfSecret(t, NewStore(inner, sealer), inner)
	current, err := sealer.Rotate()
	if err != nil {
		t.Fatal(err)
	}
	cut := NewStore(&crashingSecrets{Store: inner, raw: inner, n: 2}, sealer)
	if _, err := cut.Reseal(t.Context()); err == nil {
		t.Fatal("the cut-short run reported no error")
	}
	s := NewStore(inner, sealer)
	checkOpens(t, s)
	keys, plain := keysOf(t, inner)
	total := plain
	for _, n := range keys {
		total += n
	}
	if keys[current] != 2 || total != 4 {
		t.Fatalf("after the cut: keys %v, %d plain; want 2 of the 4 values moved and the rest as they were", keys, plain)
	}
	rep, err := s.Reseal(t.Context())
	if err != nil || rep.Current != 2 || rep.Resealed+rep.Sealed != 2 {
		t.Fatalf("the run after: %+v %v, want the 2 left moved", rep, err)
	}
	if keys, plain := keysOf(t, inner); keys[current] != 4 || plain != 0 {
		t.Fatalf("at the end: keys %v, %d plain", keys, plain)
	}
	checkOpens(t, s)
}

// TestResealOnDynamoDBMovesValuesToANewKMSKey: after the broker's KMS key
// changes, old values still open, and re-sealing moves every one (and the
// credentials stored plain) under the new key, with conditional writes.
func TestResealOnDynamoDBMovesValuesToANewKMSKey(t *testing.T) {
	cfg := mototest.Config(t, "eu-west-3")
	f := newKMSFixture(t)
	oldKey, newKey := f.newKey(t), f.newKey(t)
	client := dynamodb.NewFromConfig(cfg)
	table := mototest.Name("reseal")
	if err := dynamo.CreateTable(t.Context(), client, table); err != nil {
		t.Fatal(err)
	}
	inner := dynamo.New(client, table)
	shared := map[string]string{"table": table}
	storeWithEveryKindOfSecret(t, NewStore(inner, f.sealer(t, KMSConfig{KeyID: oldKey, SharedDataKeys: true, SharedContext: shared})), inner)

	s := NewStore(inner, f.sealer(t, KMSConfig{KeyID: newKey, SharedDataKeys: true, SharedContext: shared}))
	checkOpens(t, s)
	rep, err := s.Reseal(t.Context())
	if err != nil || rep.Values != 4 || rep.Resealed != 3 || rep.Sealed != 1 {
		t.Fatalf("reseal: %+v %v, want 3 re-sealed and 1 sealed", rep, err)
	}
	if keys, plain := keysOf(t, inner); keys[newKey] != 4 || plain != 0 {
		t.Fatalf("after: keys %v, %d plain; want all under the new key", keys, plain)
	}
	checkOpens(t, s)
}
