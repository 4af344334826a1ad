package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/serverless-osb/broker/internal/broker"
)

var _ broker.SecretStore = (*Store)(nil)

// StoredSecrets calls fn with every binding's credentials and every
// record's and detached record's data, from one read transaction's view,
// after it has ended (fn may write).
func (s *Store) StoredSecrets(ctx context.Context, fn func(broker.StoredSecret) error) error {
	var all []broker.StoredSecret
	err := s.view(ctx, func(t tx) error {
		return t.items.ForEach(func(k, v []byte) error {
			pkPart, skPart, ok := bytes.Cut(k, []byte(sep))
			if !ok {
				return nil
			}
			switch {
			case string(pkPart)+sep == pkDetached:
				d, err := decode(k, v, detachedItem.detached)
				if err != nil {
					return err
				}
				all = append(all, broker.StoredSecret{Kind: broker.SecretDetached, InstanceID: d.InstanceID, Name: d.Name,
					DetachedID: d.ID, Value: d.Data})
			case bytes.HasPrefix(skPart, []byte("b#")):
				b, err := decode(k, v, bindingItem.binding)
				if err != nil {
					return err
				}
				if secret, ok := credentialsSecret(b); ok {
					all = append(all, secret)
				}
			case bytes.HasPrefix(skPart, []byte("r#")):
				r, err := decode(k, v, resourceItem.resource)
				if err != nil {
					return err
				}
				all = append(all, broker.StoredSecret{Kind: broker.SecretRecord, InstanceID: r.InstanceID, Name: r.Name, Value: r.Data})
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
// first checks the value is still s.Value.
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
			r, err := get(t.items, resourceKey(secret.InstanceID, secret.Name), resourceItem.resource)
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
