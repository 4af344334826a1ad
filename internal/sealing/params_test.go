package sealing

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/store/dynamo"
)

// createInClear writes an instance of plan, with params, and its binding
// with params, into the store beneath, as a broker did before the plan
// was marked sensitive (or as someone writing the table does).
func createInClear(t *testing.T, inner broker.Store, id, plan string, params json.RawMessage) {
	t.Helper()
	ctx := t.Context()
	now := time.Now().UTC()
	prov := broker.Operation{ID: "prov-" + id, InstanceID: id, Kind: broker.KindProvision, State: broker.OperationSucceeded,
		Fingerprint: "fp-prov-" + id, PlanID: plan, CreatedAt: now, UpdatedAt: now, FinishedAt: now, ExpiresAt: now.Add(broker.Retention)}
	inst := broker.Instance{ID: id, InstanceRequest: broker.InstanceRequest{ServiceID: "s", PlanID: plan, Parameters: params},
		State: broker.InstanceReady, LastOp: prov.ID, Fingerprint: "fp-" + id, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := inner.CreateInstance(ctx, inst, prov, &broker.Settled{}); err != nil {
		t.Fatal(err)
	}
	bind := broker.Operation{ID: "bind-" + id, InstanceID: id, BindingID: "b-1", Kind: broker.KindBind, State: broker.OperationSucceeded,
		Fingerprint: "fp-bind-" + id, PlanID: plan, CreatedAt: now, UpdatedAt: now, FinishedAt: now, ExpiresAt: now.Add(broker.Retention)}
	b := broker.Binding{InstanceID: id, ID: "b-1", BindingRequest: broker.BindingRequest{ServiceID: "s", PlanID: plan, Parameters: params},
		State: broker.BindingReady, LastOp: bind.ID, Fingerprint: "fp-b-" + id, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := inner.CreateBinding(ctx, b, bind, &broker.Settled{InstanceVersion: 1}); err != nil {
		t.Fatal(err)
	}
}

// checkResealSealsSensitiveParameters stores parameters in clear on a
// plan, marks the plan sensitive and re-seals: the parameters and the
// fingerprints of its instance, binding and operations are sealed beneath
// and read back as they were, another plan's stay in clear, and the mode
// records the plan. Then parameters and a fingerprint planted in clear on
// that plan are refused, naming the item and the field, never the value.
func checkResealSealsSensitiveParameters(t *testing.T, inner rawStore, sealer Sealer) {
	ctx := t.Context()
	params := json.RawMessage(`{"password":"` + plantedSecret + `-before"}`)
	createInClear(t, inner, "i-s", "sensitive", params)
	createInClear(t, inner, "i-o", "other", params)
	s := NewStore(inner, sealer)
	s.SensitivePlans = []string{"sensitive"}
	rep, err := s.Reseal(ctx)
	if err != nil || !rep.SealedOnly || rep.Sealed != 6 {
		t.Fatalf("reseal: %+v %v, want the sensitive plan's 2 parameters and 4 fingerprints sealed", rep, err)
	}
	if m, err := inner.SealingMode(ctx); err != nil || !slices.Equal(m.SensitivePlans, []string{"sensitive"}) {
		t.Errorf("the mode recorded %+v %v, want the plan sensitive", m, err)
	}
	err = inner.StoredSecrets(ctx, func(v broker.StoredSecret) error {
		if v.Kind != broker.SecretParameters && v.Kind != broker.SecretFingerprint {
			return nil
		}
		if sealed := isSealed(v.Value); sealed != (v.PlanID == "sensitive") {
			t.Errorf("%s of %s %s/%s (plan %s) stored as %s", v.Kind, v.Of, v.InstanceID, v.Name, v.PlanID, v.Value)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"i-s", "i-o"} {
		inst, err1 := s.GetInstance(ctx, id)
		b, err2 := s.GetBinding(ctx, id, "b-1")
		op, err3 := s.GetOperation(ctx, id, "prov-"+id)
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		got := []string{string(inst.Parameters), inst.Fingerprint, string(b.Parameters), b.Fingerprint, op.Fingerprint}
		want := []string{string(params), "fp-" + id, string(params), "fp-b-" + id, "fp-prov-" + id}
		if !slices.Equal(got, want) {
			t.Errorf("%s read back %q, want %q", id, got, want)
		}
	}

	planted := json.RawMessage(`{"password":"` + plantedSecret + `"}`)
	createInClear(t, inner, "i-planted", "sensitive", planted)
	createInClear(t, inner, "i-other", "other", planted)
	for _, c := range []struct {
		name string
		s    *Store
	}{{"the store that re-sealed", s}, {"a new sealing store", &Store{Store: inner, Sealer: sealer, SensitivePlans: []string{"sensitive"}}}} {
		t.Run(c.name+" refuses a sensitive plan's parameters and fingerprints in clear", func(t *testing.T) {
			_, err1 := c.s.GetInstance(ctx, "i-planted")
			_, err2 := c.s.GetBinding(ctx, "i-planted", "b-1")
			_, err3 := c.s.GetOperation(ctx, "i-planted", "prov-i-planted")
			for _, e := range []struct {
				err   error
				names []string
			}{
				{err1, []string{"the parameters of instance i-planted"}},
				{err2, []string{"the parameters of binding b-1 of instance i-planted"}},
				{err3, []string{"the fingerprint of operation prov-i-planted of instance i-planted"}},
			} {
				if !errors.Is(e.err, ErrStoredInClear) {
					t.Errorf("got %v, want ErrStoredInClear", e.err)
					continue
				}
				for _, name := range e.names {
					if !strings.Contains(e.err.Error(), name) {
						t.Errorf("the error %q does not name %q", e.err, name)
					}
				}
				if strings.Contains(e.err.Error(), plantedSecret) {
					t.Errorf("the error shows the planted value: %q", e.err)
				}
			}
		})
		t.Run(c.name+" reads another plan's parameters in clear", func(t *testing.T) {
			if inst, err := c.s.GetInstance(ctx, "i-other"); err != nil || string(inst.Parameters) != string(planted) {
				t.Errorf("got %s %v", inst.Parameters, err)
			}
		})
	}
}

func TestResealSealsTheParametersOfSensitivePlansOnBolt(t *testing.T) {
	checkResealSealsSensitiveParameters(t, boltStore(t, filepath.Join(t.TempDir(), "db")), localSealer(t))
}

func TestResealSealsTheParametersOfSensitivePlansOnDynamoDB(t *testing.T) {
	client := dynamodb.NewFromConfig(mototest.Config(t, "eu-west-3"))
	table := mototest.Name("params")
	if err := dynamo.CreateTable(t.Context(), client, table); err != nil {
		t.Fatal(err)
	}
	f := newKMSFixture(t)
	sealer := f.sealer(t, KMSConfig{KeyID: f.newKey(t), SharedDataKeys: true, SharedContext: map[string]string{"table": table}})
	checkResealSealsSensitiveParameters(t, dynamo.New(client, table), sealer)
}
