package storetest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
)

// secretStore is the store's broker.SecretStore, which every store has.
func secretStore(t *testing.T, s broker.Store) broker.SecretStore {
	t.Helper()
	m, ok := s.(broker.SecretStore)
	if !ok {
		t.Fatalf("%T does not list its secrets (broker.SecretStore)", s)
	}
	return m
}

// requestSecrets are the parameters and fingerprints s lists, by kind,
// item and name.
func requestSecrets(t *testing.T, s broker.SecretStore) map[string]broker.StoredSecret {
	t.Helper()
	out := map[string]broker.StoredSecret{}
	must(t, s.StoredSecrets(t.Context(), func(v broker.StoredSecret) error {
		if v.Kind == broker.SecretParameters || v.Kind == broker.SecretFingerprint {
			out[string(v.Kind)+" of "+string(v.Of)+" "+v.InstanceID+"/"+v.Name] = v
		}
		return nil
	}), "StoredSecrets")
	return out
}

var secretCases = []testCase{
	{"a store lists the parameters and fingerprints of instances, bindings and updates with their plans, and replaces each only while it is as read", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		raw := secretStore(t, s)
		inst := provision(t, s, "i-1")
		bind(t, s, "i-1", "b-1")
		inst = *getInstance(t, s, "i-1")
		op := newOperation(inst.ID, "update-i-1", broker.KindUpdate, at(100))
		op.Target = &broker.Target{PlanID: "plan-large", Parameters: json.RawMessage(`{"size":5}`)}
		next := inst
		next.State, next.Op, next.LastOp, next.Version = broker.InstanceUpdating, op.ID, op.ID, inst.Version+1
		must(t, s.LockInstance(t.Context(), broker.LockInstance{Instance: next, Version: inst.Version, Op: op}), "LockInstance")

		got := requestSecrets(t, raw)
		want := map[string]string{ // key → plan
			"parameters of instance i-1/":             "plan-small",
			"fingerprint of instance i-1/":            "plan-small",
			"parameters of binding i-1/b-1":           "plan-small",
			"fingerprint of binding i-1/b-1":          "plan-small",
			"parameters of operation i-1/update-i-1":  "plan-large",
			"fingerprint of operation i-1/update-i-1": "plan-large",
			"fingerprint of operation i-1/prov-i-1":   "plan-small",
			"fingerprint of operation i-1/bind-b-1":   "plan-small",
		}
		for k, plan := range want {
			if v, ok := got[k]; !ok || v.PlanID != plan {
				t.Errorf("%s: listed %v with plan %q, want plan %q", k, ok, v.PlanID, plan)
			}
		}
		equal(t, "fingerprint of the instance", string(got["fingerprint of instance i-1/"].Value), "fp-i-1")

		before := snapshot(t, s)
		for k := range want {
			v := got[k]
			sealed := json.RawMessage(`{"sealed":"` + k + `"}`)
			must(t, raw.ReplaceSecret(t.Context(), v, sealed), "ReplaceSecret "+k)
			if err := raw.ReplaceSecret(t.Context(), v, sealed); !errors.Is(err, broker.ErrSecretChanged) {
				t.Errorf("%s replaced again from the value as first read: %v, want ErrSecretChanged", k, err)
			}
		}
		after := snapshot(t, s)
		i, b := after.instance("i-1"), after.binding("i-1", "b-1")
		u := getOperation(t, s, "i-1", "update-i-1")
		equal(t, "instance's parameters", string(i.Parameters), `{"sealed":"parameters of instance i-1/"}`)
		equal(t, "instance's fingerprint", i.Fingerprint, `{"sealed":"fingerprint of instance i-1/"}`)
		equal(t, "binding's parameters", string(b.Parameters), `{"sealed":"parameters of binding i-1/b-1"}`)
		equal(t, "binding's fingerprint", b.Fingerprint, `{"sealed":"fingerprint of binding i-1/b-1"}`)
		equal(t, "update's parameters", string(u.Target.Parameters), `{"sealed":"parameters of operation i-1/update-i-1"}`)
		equal(t, "update's fingerprint", u.Fingerprint, `{"sealed":"fingerprint of operation i-1/update-i-1"}`)
		equal(t, "update's target plan", u.Target.PlanID, "plan-large")
		// Nothing else of the items changed: their state, hold and version.
		bi, bb := before.instance("i-1"), before.binding("i-1", "b-1")
		equal(t, "instance's hold and version", [2]any{i.Op, i.Version}, [2]any{bi.Op, bi.Version})
		equal(t, "binding's state and version", [2]any{b.State, b.Version}, [2]any{bb.State, bb.Version})
		equal(t, "in progress", inProgressIDs(t, s), []string{"update-i-1"})
	}},
}
