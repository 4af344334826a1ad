package broker_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
)

// TestRequestSecrets: an instance's, a binding's and an operation's
// request parameters and fingerprint are the secrets a re-seal pass lists,
// each named by its item and the plan it is for, and replaced only while
// the item holds the value read.
func TestRequestSecrets(t *testing.T) {
	params, fp := json.RawMessage(`{"password":"p"}`), "fp-1"
	var inst broker.Instance
	inst.ID, inst.PlanID, inst.Parameters, inst.Fingerprint = "i-1", "plan-1", params, fp
	var bind broker.Binding
	bind.ID, bind.InstanceID, bind.PlanID, bind.Parameters, bind.Fingerprint = "b-1", "i-1", "plan-1", params, fp
	update := broker.Operation{ID: "op-1", InstanceID: "i-1", PlanID: "plan-1", Fingerprint: fp,
		Target: &broker.Target{PlanID: "plan-2", Parameters: params}}
	paramsOnly := broker.Operation{ID: "op-2", InstanceID: "i-1", PlanID: "plan-1", Target: &broker.Target{Parameters: params}}
	provision := broker.Operation{ID: "op-3", InstanceID: "i-1", PlanID: "plan-1", Fingerprint: fp}

	type item interface {
		RequestSecrets() []broker.StoredSecret
	}
	secrets := func(of broker.SecretItem, name, plan string, kinds ...broker.SecretKind) []broker.StoredSecret {
		var out []broker.StoredSecret
		for _, k := range kinds {
			s := broker.StoredSecret{Kind: k, Of: of, InstanceID: "i-1", Name: name, PlanID: plan, Value: params}
			if k == broker.SecretFingerprint {
				s.Value = json.RawMessage(fp)
			}
			out = append(out, s)
		}
		return out
	}
	both := []broker.SecretKind{broker.SecretParameters, broker.SecretFingerprint}
	tests := []struct {
		name string
		item item
		want []broker.StoredSecret
	}{
		{"an instance's are its parameters and fingerprint", inst, secrets(broker.SecretOfInstance, "", "plan-1", both...)},
		{"a binding's are named by its id", bind, secrets(broker.SecretOfBinding, "b-1", "plan-1", both...)},
		{"an update's are for the plan it moves to", update, secrets(broker.SecretOfOperation, "op-1", "plan-2", both...)},
		{"an update within its plan's are for the instance's plan", paramsOnly, secrets(broker.SecretOfOperation, "op-2", "plan-1", broker.SecretParameters)},
		{"an operation without a target has its fingerprint alone", provision, secrets(broker.SecretOfOperation, "op-3", "plan-1", broker.SecretFingerprint)},
		{"an item without parameters or fingerprint has none", broker.Instance{ID: "i-2"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.item.RequestSecrets(); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("RequestSecrets() = %+v, want %+v", got, tt.want)
			}
		})
	}

	sealed := json.RawMessage(`"sealed"`)
	type replacer interface {
		item
		ReplaceRequestSecret(broker.StoredSecret, json.RawMessage) bool
	}
	for _, tt := range []struct {
		name string
		item func() replacer
	}{
		{"an instance", func() replacer { i := inst; return &i }},
		{"a binding", func() replacer { b := bind; return &b }},
		{"an update", func() replacer { op := update; return &op }},
	} {
		t.Run(tt.name+"'s secrets are replaced while it holds the value read, and not after", func(t *testing.T) {
			it := tt.item()
			read := it.RequestSecrets()
			for _, s := range read {
				if !it.ReplaceRequestSecret(s, sealed) {
					t.Fatalf("the %s was not replaced", s.Kind)
				}
				if it.ReplaceRequestSecret(s, sealed) {
					t.Fatalf("the %s was replaced again, though the item no longer holds the value read", s.Kind)
				}
			}
			for _, s := range it.RequestSecrets() {
				if string(s.Value) != string(sealed) {
					t.Errorf("the %s is %s after its replacement, want %s", s.Kind, s.Value, sealed)
				}
			}
			if it.ReplaceRequestSecret(broker.StoredSecret{Kind: "credentials", Value: sealed}, sealed) {
				t.Error("a kind that is not a request's secret was replaced")
			}
		})
	}
	t.Run("an update's replacement leaves the target it was read from as it was", func(t *testing.T) {
		op := update
		if !op.ReplaceRequestSecret(op.RequestSecrets()[0], sealed) || string(update.Target.Parameters) != string(params) {
			t.Fatalf("the original target's parameters are %s, want %s", update.Target.Parameters, params)
		}
	})
}
