package storetest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
)

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
		raw := broker.SecretStore(s)
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

// secretOf is the one secret s lists of kind for item name (a binding's
// id, a record's name, a detached record's id), or fails.
func secretOf(t *testing.T, s broker.SecretStore, kind broker.SecretKind, of broker.SecretItem, name string) broker.StoredSecret {
	t.Helper()
	var found []broker.StoredSecret
	must(t, s.StoredSecrets(t.Context(), func(v broker.StoredSecret) error {
		if v.Kind == kind && v.Of == of && (v.Name == name || v.DetachedID == name) {
			found = append(found, v)
		}
		return nil
	}), "StoredSecrets")
	if len(found) != 1 {
		t.Fatalf("%s of %q: listed %d, want 1", kind, name, len(found))
	}
	return found[0]
}

// interleavedSecretCases are those of a write that comes between
// ReplaceSecret's read and its write (NewSecretStore's Interleave).
var interleavedSecretCases = []struct {
	name string
	run  func(t *testing.T, newStore NewSecretStore)
}{
	{"a secret replaced while a write moves its item keeps the item's newer state, and is refused once the value itself changed or went", func(t *testing.T, newStore NewSecretStore) {
		s, between := newStore(t)
		raw := broker.SecretStore(s)
		provision(t, s, "i-1")
		b1, b2 := bind(t, s, "i-1", "b-1"), bind(t, s, "i-1", "b-2")
		r := newResource("i-1", "r-1")
		putResource(t, s, r)
		gone := newResource("i-1", "r-2")
		d := newDetached(gone, "prov-i-1")
		Detach(t, s, gone, d)
		replace := func(what string, secret broker.StoredSecret, sealed string, move func(), want error) {
			t.Helper()
			between(move)
			if err := raw.ReplaceSecret(t.Context(), secret, json.RawMessage(sealed)); !errors.Is(err, want) {
				t.Fatalf("ReplaceSecret %s with a write between its read and its write: %v, want %v", what, err, want)
			}
		}

		// Plain credentials, while an unbind takes the binding.
		plain := secretOf(t, raw, broker.SecretCredentials, "", "b-1")
		var unbind broker.Operation
		replace("plain credentials", plain, `{"sealed":"b-1"}`, func() { _, unbind = startUnbind(t, s, b1) }, nil)
		held := unbindLock(b1).Binding
		held.Credentials, held.Sealed = nil, json.RawMessage(`{"sealed":"b-1"}`)
		equal(t, "binding taken by the unbind, credentials sealed", getBinding(t, s, "i-1", "b-1"), &held)
		equal(t, "in progress", inProgressIDs(t, s), []string{unbind.ID})

		// Sealed credentials, while the unbind deletes the binding.
		sealed := secretOf(t, raw, broker.SecretCredentials, "", "b-1")
		replace("sealed credentials of a binding deleted", sealed, `{"sealed":"again"}`, func() {
			must(t, s.FinishOperation(t.Context(), broker.Finish{Op: finished(unbind, broker.OperationSucceeded), DeleteBinding: true, ReleaseBinding: true}),
				"FinishOperation unbind")
		}, broker.ErrSecretChanged)
		if b := getBinding(t, s, "i-1", "b-1"); b != nil {
			t.Errorf("the deleted binding is back: %+v", b)
		}

		// Sealed credentials, while an unbind takes the binding.
		must(t, raw.ReplaceSecret(t.Context(), secretOf(t, raw, broker.SecretCredentials, "", "b-2"), json.RawMessage(`{"sealed":"b-2"}`)),
			"ReplaceSecret plain credentials of b-2")
		b2 = *getBinding(t, s, "i-1", "b-2")
		sealed = secretOf(t, raw, broker.SecretCredentials, "", "b-2")
		replace("sealed credentials", sealed, `{"resealed":"b-2"}`, func() { _, unbind = startUnbind(t, s, b2) }, nil)
		held = unbindLock(b2).Binding
		held.Sealed = json.RawMessage(`{"resealed":"b-2"}`)
		equal(t, "binding taken by the unbind, credentials resealed", getBinding(t, s, "i-1", "b-2"), &held)
		must(t, s.FinishOperation(t.Context(), broker.Finish{Op: finished(unbind, broker.OperationSucceeded), DeleteBinding: true, ReleaseBinding: true}),
			"FinishOperation unbind b-2")

		// A detached record's data, while a cleanup counts an attempt.
		cleaning := d
		cleaning.State, cleaning.Attempts, cleaning.UpdatedAt = broker.DetachedCleaning, 1, at(40)
		replace("a detached record's data", secretOf(t, raw, broker.SecretDetached, "", d.ID), `{"sealed":"d"}`, func() {
			must(t, s.UpdateDetached(t.Context(), cleaning, 0), "UpdateDetached to cleaning")
		}, nil)
		cleaning.Data = json.RawMessage(`{"sealed":"d"}`)
		equal(t, "detached record cleaning, data sealed", getDetached(t, s, d.ID), &cleaning)

		// A record's data, while its driver writes it anew.
		newer := r
		newer.Data, newer.UpdatedAt = json.RawMessage(`{"arn":"newer"}`), at(50)
		replace("a record's data written anew", secretOf(t, raw, broker.SecretRecord, "", "r-1"), `{"sealed":"r"}`, func() {
			putResource(t, s, newer)
		}, broker.ErrSecretChanged)
		equal(t, "record written anew", getResource(t, s, "i-1", "r-1"), &newer)

		// An instance's parameters, while an update takes the instance.
		inst := *getInstance(t, s, "i-1")
		op := newOperation(inst.ID, "update-i-1", broker.KindUpdate, at(60))
		next := inst
		next.State, next.Op, next.LastOp, next.Version = broker.InstanceUpdating, op.ID, op.ID, inst.Version+1
		replace("an instance's parameters", secretOf(t, raw, broker.SecretParameters, broker.SecretOfInstance, ""), `{"sealed":"i"}`, func() {
			must(t, s.LockInstance(t.Context(), broker.LockInstance{Instance: next, Version: inst.Version, Op: op}), "LockInstance")
		}, nil)
		next.Parameters = json.RawMessage(`{"sealed":"i"}`)
		equal(t, "instance taken by the update, parameters sealed", getInstance(t, s, "i-1"), &next)
	}},
}
