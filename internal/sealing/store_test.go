package sealing

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/store/bolt"
	"github.com/serverless-osb/broker/internal/store/dynamo"
	"github.com/serverless-osb/broker/internal/store/storetest"
)

func localSealer(t *testing.T) *Local {
	t.Helper()
	l, err := OpenKeyDir(filepath.Join(t.TempDir(), "keys"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func boltStore(t *testing.T, path string) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestSealingStoreKeepsTheStoreContract runs the Store contract through
// the sealing store, on bolt: sealing changes nothing a caller sees.
func TestSealingStoreKeepsTheStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) broker.Store {
		return NewStore(boltStore(t, filepath.Join(t.TempDir(), "db")), localSealer(t))
	})
	t.Run("with every plan's parameters sealed", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) broker.Store {
			s := NewStore(boltStore(t, filepath.Join(t.TempDir(), "db")), localSealer(t))
			s.SensitivePlans = []string{"plan-small", "plan-large"}
			return s
		})
	})
}

// TestSensitiveParametersAreStoredSealed: on a plan whose parameters may
// hold secrets, the instance's, the binding's and an update's parameters
// are sealed in the store beneath, and read back as sent; another plan's
// are stored as they are.
func TestSensitiveParametersAreStoredSealed(t *testing.T) {
	const secret = "parameter-s3cret-value"
	inner := boltStore(t, filepath.Join(t.TempDir(), "db"))
	s := NewStore(inner, localSealer(t))
	s.SensitivePlans = []string{"sensitive"}
	ctx := t.Context()
	now := time.Now().UTC()
	params := json.RawMessage(`{"password":"` + secret + `"}`)
	for _, plan := range []string{"sensitive", "plain"} {
		id := "i-" + plan
		prov := broker.Operation{ID: "prov-" + plan, InstanceID: id, Kind: broker.KindProvision, State: broker.OperationSucceeded,
			PlanID: plan, CreatedAt: now, UpdatedAt: now, FinishedAt: now, ExpiresAt: now.Add(broker.Retention)}
		inst := broker.Instance{ID: id, InstanceRequest: broker.InstanceRequest{ServiceID: "s", PlanID: plan, Parameters: params},
			State: broker.InstanceReady, LastOp: prov.ID, Fingerprint: "fp-" + id, Version: 1, CreatedAt: now, UpdatedAt: now}
		if err := s.CreateInstance(ctx, inst, prov, &broker.Settled{}); err != nil {
			t.Fatal(err)
		}
		bind := broker.Operation{ID: "bind-" + plan, InstanceID: id, BindingID: "b-1", Kind: broker.KindBind, State: broker.OperationSucceeded,
			PlanID: plan, CreatedAt: now, UpdatedAt: now, FinishedAt: now, ExpiresAt: now.Add(broker.Retention)}
		b := broker.Binding{InstanceID: id, ID: "b-1", ServiceID: "s", PlanID: plan, State: broker.BindingReady, LastOp: bind.ID,
			Parameters: params, Version: 1, CreatedAt: now, UpdatedAt: now}
		if err := s.CreateBinding(ctx, b, bind, &broker.Settled{InstanceVersion: 1}); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetInstance(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		update := broker.Operation{ID: "update-" + plan, InstanceID: id, Kind: broker.KindUpdate, State: broker.OperationInProgress,
			PlanID: plan, Target: &broker.Target{Parameters: params}, CreatedAt: now, UpdatedAt: now, NextCheckAt: now}
		held := got
		held.State, held.Op, held.LastOp, held.Version = broker.InstanceUpdating, update.ID, update.ID, got.Version+1
		if err := s.LockInstance(ctx, broker.LockInstance{Instance: held, Version: got.Version, Op: update}); err != nil {
			t.Fatal(err)
		}

		rawInst, _ := inner.GetInstance(ctx, id)
		rawBinding, _ := inner.GetBinding(ctx, id, "b-1")
		rawOp, _ := inner.GetOperation(ctx, id, update.ID)
		stored := map[string]json.RawMessage{"instance": rawInst.Parameters, "binding": rawBinding.Parameters, "update": rawOp.Target.Parameters}
		for what, raw := range stored {
			if sealed := isSealed(raw); sealed != (plan == "sensitive") || sealed == bytes.Contains(raw, []byte(secret)) {
				t.Errorf("plan %s: the %s's parameters are stored as %s", plan, what, raw)
			}
		}
		// The fingerprint hashes the parameters: sealed with them.
		if sealed := isSealed(json.RawMessage(rawInst.Fingerprint)); sealed != (plan == "sensitive") {
			t.Errorf("plan %s: the instance's fingerprint is stored as %s", plan, rawInst.Fingerprint)
		}
		inst2, err1 := s.GetInstance(ctx, id)
		b2, err2 := s.GetBinding(ctx, id, "b-1")
		op2, err3 := s.GetOperation(ctx, id, update.ID)
		snap, err4 := s.Load(ctx, id, update.ID, "")
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			t.Fatal(err)
		}
		for what, got := range map[string]json.RawMessage{"instance": inst2.Parameters, "binding": b2.Parameters, "update": op2.Target.Parameters,
			"loaded instance": snap.Instance.Parameters, "loaded update": snap.Operation.Target.Parameters} {
			if !bytes.Equal(got, params) {
				t.Errorf("plan %s: the %s's parameters read back as %s", plan, what, got)
			}
		}
		if inst2.Fingerprint != "fp-"+id {
			t.Errorf("plan %s: the instance's fingerprint read back as %s", plan, inst2.Fingerprint)
		}
	}
	// The operators' listing carries no parameters, sealed or open.
	list, _, err := s.ListInstances(ctx, broker.InstanceFilter{}, "")
	if err != nil || len(list) != 2 {
		t.Fatalf("ListInstances: %d instances, %v; want 2", len(list), err)
	}
	for _, inst := range list {
		if inst.Parameters != nil || inst.Fingerprint != "" {
			t.Errorf("ListInstances lists %s with parameters %s and fingerprint %q, want neither", inst.ID, inst.Parameters, inst.Fingerprint)
		}
	}
}

// secrets are what the test's binding and record hold, to look for.
const (
	password     = "pa55-w0rd-of-binding-one"
	recordSecret = "rec0rd-secret-in-driver-data"
)

// bindWithSecrets creates instance i-1 and binding b-1 (with credentials)
// and a driver record, through s, and returns the binding as created.
func bindWithSecrets(t *testing.T, s broker.Store) broker.Binding {
	t.Helper()
	ctx := t.Context()
	now := time.Now().UTC()
	prov := broker.Operation{ID: "prov", InstanceID: "i-1", Kind: broker.KindProvision, State: broker.OperationSucceeded,
		CreatedAt: now, UpdatedAt: now, FinishedAt: now, ExpiresAt: now.Add(broker.Retention)}
	inst := broker.Instance{ID: "i-1", InstanceRequest: broker.InstanceRequest{ServiceID: "s", PlanID: "p"}, State: broker.InstanceReady, LastOp: "prov", Version: 1,
		CreatedAt: now, UpdatedAt: now}
	rec := broker.Resource{InstanceID: "i-1", Name: "instance", Data: json.RawMessage(`{"secret":"` + recordSecret + `"}`), UpdatedAt: now}
	if err := s.CreateInstance(ctx, inst, prov, &broker.Settled{Records: broker.RecordChanges{Save: []broker.Resource{rec}}}); err != nil {
		t.Fatal(err)
	}
	bind := broker.Operation{ID: "bind", InstanceID: "i-1", BindingID: "b-1", Kind: broker.KindBind, State: broker.OperationSucceeded,
		CreatedAt: now, UpdatedAt: now, FinishedAt: now, ExpiresAt: now.Add(broker.Retention)}
	b := broker.Binding{InstanceID: "i-1", ID: "b-1", ServiceID: "s", PlanID: "p", State: broker.BindingReady, LastOp: "bind",
		Credentials: broker.Credentials{"username": "u", "password": password}, Version: 2, CreatedAt: now, UpdatedAt: now}
	if err := s.CreateBinding(ctx, b, bind, &broker.Settled{InstanceVersion: 1}); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTheBoltFileHoldsNoSecret binds with credentials and a driver record
// through the sealing store, then reads the bolt file's bytes: neither
// secret is there, and through the store both read as they were written.
func TestTheBoltFileHoldsNoSecret(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	inner := boltStore(t, path)
	s := NewStore(inner, localSealer(t))
	bindWithSecrets(t, s)

	got, err := s.GetBinding(t.Context(), "i-1", "b-1")
	if err != nil || got.Credentials["password"] != password || got.Sealed != nil {
		t.Fatalf("the binding through the sealing store: %v %v", got.Credentials, err)
	}
	r, err := storetest.Record(t.Context(), s, "i-1", "instance")
	if err != nil || !bytes.Contains(r.Data, []byte(recordSecret)) {
		t.Fatalf("the record through the sealing store: %s %v", r.Data, err)
	}
	raw, err := inner.GetBinding(t.Context(), "i-1", "b-1")
	if err != nil || raw.Credentials != nil || len(raw.Sealed) == 0 {
		t.Fatalf("the binding as stored: credentials %v, sealed %d bytes (%v); want only the sealed form", raw.Credentials, len(raw.Sealed), err)
	}
	if err := inner.Close(); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{password, recordSecret} {
		if bytes.Contains(file, []byte(secret)) {
			t.Errorf("the bolt file holds %q", secret)
		}
	}
}

// TestASealedValueMovedToAnotherItemDoesNotOpen copies a binding's sealed
// credentials to another binding and a record's sealed data to another
// record, in the store beneath: reading them fails with ErrWrongContext,
// never with the other item's secret.
func TestASealedValueMovedToAnotherItemDoesNotOpen(t *testing.T) {
	inner := boltStore(t, filepath.Join(t.TempDir(), "db"))
	s := NewStore(inner, localSealer(t))
	bindWithSecrets(t, s)
	ctx := t.Context()

	raw, err := inner.GetBinding(ctx, "i-1", "b-1")
	if err != nil {
		t.Fatal(err)
	}
	moved := raw
	moved.ID, moved.LastOp = "b-2", "bind-2"
	now := time.Now().UTC()
	op := broker.Operation{ID: "bind-2", InstanceID: "i-1", BindingID: "b-2", Kind: broker.KindBind, State: broker.OperationSucceeded,
		CreatedAt: now, UpdatedAt: now, FinishedAt: now, ExpiresAt: now.Add(broker.Retention)}
	if err := inner.CreateBinding(ctx, moved, op, &broker.Settled{}); err != nil {
		t.Fatal(err)
	}
	if b, err := s.GetBinding(ctx, "i-1", "b-2"); !errors.Is(err, ErrWrongContext) {
		t.Errorf("a binding with another binding's sealed credentials: %v, %v; want ErrWrongContext", b.Credentials, err)
	}

	rawRecord, err := storetest.Record(ctx, inner, "i-1", "instance")
	if err != nil {
		t.Fatal(err)
	}
	rawRecord.Name = "other"
	if err := inner.PutResource(ctx, rawRecord); err != nil {
		t.Fatal(err)
	}
	if r, err := storetest.Record(ctx, s, "i-1", "other"); !errors.Is(err, ErrWrongContext) {
		t.Errorf("a record with another record's sealed data: %s, %v; want ErrWrongContext", r.Data, err)
	}
}

// TestDynamoDBWithKMSHoldsNoSecret runs the Store contract through the
// sealing store on DynamoDB with KMS envelope encryption (moto), then binds
// with secrets and scans the table: no item holds them.
func TestDynamoDBWithKMSHoldsNoSecret(t *testing.T) {
	cfg := mototest.Config(t, "eu-west-3")
	f := newKMSFixture(t)
	key := f.newKey(t)
	client := dynamodb.NewFromConfig(cfg)
	newStore := func(t *testing.T) (broker.Store, string) {
		table := mototest.Name("sealed")
		if err := dynamo.CreateTable(t.Context(), client, table); err != nil {
			t.Fatal(err)
		}
		sealer := f.sealer(t, KMSConfig{KeyID: key, SharedDataKeys: true, SharedContext: map[string]string{"broker": table}})
		return NewStore(dynamo.New(client, table), sealer), table
	}
	t.Run("contract", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) broker.Store { s, _ := newStore(t); return s })
	})
	s, table := newStore(t)
	bindWithSecrets(t, s)
	if got, err := s.GetBinding(t.Context(), "i-1", "b-1"); err != nil || got.Credentials["password"] != password {
		t.Fatalf("the binding through the sealing store: %v %v", got.Credentials, err)
	}
	out, err := client.Scan(t.Context(), &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	dump, _ := json.Marshal(out.Items)
	for _, secret := range []string{password, recordSecret} {
		if bytes.Contains(dump, []byte(secret)) {
			t.Errorf("a scan of the table finds %q", secret)
		}
	}
	if len(out.Items) < 3 {
		t.Fatalf("the scan found %d items, want the instance, binding, operations and record", len(out.Items))
	}
}
