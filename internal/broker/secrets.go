package broker

import (
	"bytes"
	"cmp"
	"encoding/json"
)

// The request parameters and fingerprint of an instance, a binding or an
// operation, as stored secrets (a plan's sensitive_parameters has them
// sealed): both stores list them for a re-seal pass, and replace them
// with ReplaceRequestSecret, so that what counts as one is said once.

// RequestSecrets are the instance's parameters and fingerprint.
func (i Instance) RequestSecrets() []StoredSecret {
	return requestSecrets(SecretOfInstance, i.ID, "", i.PlanID, i.Parameters, i.Fingerprint)
}

// RequestSecrets are the binding's parameters and fingerprint.
func (b Binding) RequestSecrets() []StoredSecret {
	return requestSecrets(SecretOfBinding, b.InstanceID, b.ID, b.PlanID, b.Parameters, b.Fingerprint)
}

// RequestSecrets are an update's target parameters and the operation's
// fingerprint, for the plan the parameters are for (ParametersPlan).
func (op Operation) RequestSecrets() []StoredSecret {
	var params json.RawMessage
	if op.Target != nil {
		params = op.Target.Parameters
	}
	return requestSecrets(SecretOfOperation, op.InstanceID, op.ID, op.ParametersPlan(), params, op.Fingerprint)
}

// ParametersPlan is the plan an operation's parameters and fingerprint are
// for: the plan an update moves to, else the instance's.
func (op Operation) ParametersPlan() string {
	if op.Target != nil {
		return cmp.Or(op.Target.PlanID, op.PlanID)
	}
	return op.PlanID
}

func requestSecrets(of SecretItem, instanceID, name, planID string, params json.RawMessage, fingerprint string) []StoredSecret {
	var out []StoredSecret
	if len(params) > 0 {
		out = append(out, StoredSecret{Kind: SecretParameters, Of: of, InstanceID: instanceID, Name: name, PlanID: planID, Value: params})
	}
	if fingerprint != "" {
		out = append(out, StoredSecret{Kind: SecretFingerprint, Of: of, InstanceID: instanceID, Name: name, PlanID: planID,
			Value: json.RawMessage(fingerprint)})
	}
	return out
}

// ReplaceRequestSecret puts sealed in place of s.Value in the instance,
// if it holds it still; false if it does not.
func (i *Instance) ReplaceRequestSecret(s StoredSecret, sealed json.RawMessage) bool {
	return replaceRequestSecret(s, sealed, &i.Parameters, &i.Fingerprint)
}

// ReplaceRequestSecret puts sealed in place of s.Value in the binding, if
// it holds it still; false if it does not.
func (b *Binding) ReplaceRequestSecret(s StoredSecret, sealed json.RawMessage) bool {
	return replaceRequestSecret(s, sealed, &b.Parameters, &b.Fingerprint)
}

// ReplaceRequestSecret puts sealed in place of s.Value in the operation,
// if it holds it still; false if it does not.
func (op *Operation) ReplaceRequestSecret(s StoredSecret, sealed json.RawMessage) bool {
	var params json.RawMessage
	if op.Target != nil {
		target := *op.Target
		op.Target, params = &target, target.Parameters
	}
	if !replaceRequestSecret(s, sealed, &params, &op.Fingerprint) {
		return false
	}
	if op.Target != nil {
		op.Target.Parameters = params
	}
	return true
}

func replaceRequestSecret(s StoredSecret, sealed json.RawMessage, params *json.RawMessage, fingerprint *string) bool {
	switch s.Kind {
	case SecretParameters:
		if len(*params) == 0 || !bytes.Equal(*params, s.Value) {
			return false
		}
		*params = sealed
		return true
	case SecretFingerprint:
		if *fingerprint == "" || *fingerprint != string(s.Value) {
			return false
		}
		*fingerprint = string(sealed)
		return true
	}
	return false
}
