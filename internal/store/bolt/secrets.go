package bolt

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/serverless-osb/broker/internal/broker"
)

var _ broker.SecretStore = (*Store)(nil)

// StoredSecrets calls fn with every binding's credentials, every record's
// and detached record's data, and the request parameters and fingerprint
// of every instance, binding and operation, from one read transaction's
// view, after it has ended (fn may write).
func (s *Store) StoredSecrets(ctx context.Context, fn func(broker.StoredSecret) error) error {
	var all []broker.StoredSecret
	err := s.view(ctx, func(t tx) error {
		return t.items.ForEach(func(k, v []byte) error {
			if bytes.HasPrefix(k, []byte(pkDetached)) {
				d, err := decode(k, v, detachedItem.detached)
				if err != nil {
					return err
				}
				all = append(all, broker.StoredSecret{Kind: broker.SecretDetached, InstanceID: d.InstanceID, Name: d.Name,
					DetachedID: d.ID, Value: d.Data})
				return nil
			}
			sk, ok := skOf(k)
			if !ok || len(sk) == 0 {
				return nil
			}
			_, _, record, isBinding, _ := slotSK(sk[1:])
			isBinding = isBinding && sk[0] == skOperation
			switch {
			case isBinding && record, sk[0] == skRecord:
				r, err := decode(k, v, resourceItem.resource)
				if err != nil {
					return err
				}
				all = append(all, broker.StoredSecret{Kind: broker.SecretRecord, InstanceID: r.InstanceID, Name: r.Name, Value: r.Data})
			case isBinding:
				b, err := decode(k, v, bindingItem.binding)
				if err != nil {
					return err
				}
				if secret, ok := credentialsSecret(b); ok {
					all = append(all, secret)
				}
				all = append(all, b.RequestSecrets()...)
			case isInstanceKey(k):
				inst, err := decode(k, v, instanceItem.instance)
				if err != nil {
					return err
				}
				all = append(all, inst.RequestSecrets()...)
			case isOperationKey(k):
				op, err := decode(k, v, operationItem.operation)
				if err != nil {
					return err
				}
				all = append(all, op.RequestSecrets()...)
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("stored secrets: %w", err)
	}
	for _, secret := range all {
		if err := fn(secret); err != nil {
			return err
		}
	}
	return nil
}

// credentialsSecret is a binding's credentials as a stored secret.
func credentialsSecret(b broker.Binding) (broker.StoredSecret, bool) {
	secret := broker.StoredSecret{Kind: broker.SecretCredentials, InstanceID: b.InstanceID, Name: b.ID, Value: b.Sealed}
	if len(b.Sealed) == 0 {
		if len(b.Credentials) == 0 {
			return secret, false
		}
		secret.Value, _ = json.Marshal(b.Credentials)
		secret.Plain = true
	}
	return secret, true
}

// ReplaceSecret writes sealed in place of s.Value, in one transaction that
// first checks the value is still s.Value: the item it writes back is the
// one it read in that transaction, so no other write comes between.
func (s *Store) ReplaceSecret(ctx context.Context, secret broker.StoredSecret, sealed json.RawMessage) error {
	err := s.update(ctx, func(t tx) error {
		switch secret.Kind {
		case broker.SecretCredentials:
			b, err := t.binding(secret.InstanceID, secret.Name)
			if err != nil {
				return err
			}
			if b == nil {
				return broker.ErrNotFound
			}
			if cur, ok := credentialsSecret(*b); !ok || !bytes.Equal(cur.Value, secret.Value) {
				return fmt.Errorf("binding %s: %w", secret.Name, &broker.ConflictError{})
			}
			b.Sealed, b.Credentials = sealed, nil
			return t.putBinding(*b)
		case broker.SecretRecord:
			r, err := t.resource(secret.InstanceID, secret.Name)
			if err != nil {
				return err
			}
			if r == nil {
				return broker.ErrNotFound
			}
			if !bytes.Equal(r.Data, secret.Value) {
				return fmt.Errorf("record %s: %w", secret.Name, &broker.ConflictError{})
			}
			r.Data = sealed
			return t.putResource(*r)
		case broker.SecretDetached:
			d, err := t.detached(secret.DetachedID)
			if err != nil {
				return err
			}
			if d == nil {
				return broker.ErrNotFound
			}
			if !bytes.Equal(d.Data, secret.Value) {
				return fmt.Errorf("detached %s: %w", secret.DetachedID, &broker.ConflictError{})
			}
			d.Data = sealed
			return t.putDetached(*d)
		case broker.SecretParameters, broker.SecretFingerprint:
			return t.replaceRequestSecret(secret, sealed)
		}
		return fmt.Errorf("unknown kind of secret %q", secret.Kind)
	})
	if err != nil {
		if isConflictOrGone(err) {
			return fmt.Errorf("replace %s %s of %s: %w", secret.Kind, secret.Name, secret.InstanceID, broker.ErrSecretChanged)
		}
		return fmt.Errorf("replace %s %s of %s: %w", secret.Kind, secret.Name, secret.InstanceID, err)
	}
	return nil
}

func isConflictOrGone(err error) bool {
	var c *broker.ConflictError
	return errors.As(err, &c) || errors.Is(err, broker.ErrNotFound)
}

// replaceRequestSecret writes sealed in place of the parameters or the
// fingerprint of the item secret.Of names, if it holds secret.Value still.
func (t tx) replaceRequestSecret(secret broker.StoredSecret, sealed json.RawMessage) error {
	changed := fmt.Errorf("%s %s: %w", secret.Of, secret.Name, &broker.ConflictError{})
	switch secret.Of {
	case broker.SecretOfInstance:
		inst, err := t.instance(secret.InstanceID)
		if err != nil || inst == nil {
			return cmp.Or(err, broker.ErrNotFound)
		}
		if !inst.ReplaceRequestSecret(secret, sealed) {
			return changed
		}
		return t.putInstance(*inst)
	case broker.SecretOfBinding:
		b, err := t.binding(secret.InstanceID, secret.Name)
		if err != nil || b == nil {
			return cmp.Or(err, broker.ErrNotFound)
		}
		if !b.ReplaceRequestSecret(secret, sealed) {
			return changed
		}
		return t.putBinding(*b)
	case broker.SecretOfOperation:
		op, err := t.operation(secret.InstanceID, secret.Name)
		if err != nil || op == nil {
			return cmp.Or(err, broker.ErrNotFound)
		}
		if !op.ReplaceRequestSecret(secret, sealed) {
			return changed
		}
		return t.putOperation(*op)
	}
	return fmt.Errorf("unknown item %q of %s", secret.Of, secret.Kind)
}
