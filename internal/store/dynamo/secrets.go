package dynamo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/serverless-osb/broker/internal/broker"
)

var _ broker.SecretStore = (*Store)(nil)

// StoredSecrets calls fn with every binding's credentials and every
// record's and detached record's data: a consistent Scan of the table,
// every page, then fn for each (fn may write).
func (s *Store) StoredSecrets(ctx context.Context, fn func(broker.StoredSecret) error) error {
	var all []broker.StoredSecret
	pages := dynamodb.NewScanPaginator(s.client, &dynamodb.ScanInput{TableName: s.table, ConsistentRead: aws.Bool(true)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("stored secrets: %w", err)
		}
		for _, item := range page.Items {
			secret, ok, err := storedSecret(item)
			if err != nil {
				return fmt.Errorf("stored secrets: %w", err)
			}
			if ok {
				all = append(all, secret)
			}
		}
	}
	for _, secret := range all {
		if err := fn(secret); err != nil {
			return err
		}
	}
	return nil
}

// storedSecret is the secret an item holds, if it may hold one.
func storedSecret(item map[string]types.AttributeValue) (broker.StoredSecret, bool, error) {
	pkv, sk := keyPart(item, attrPK), keyPart(item, attrSK)
	switch {
	case pkv == pkDetached:
		d, err := decode(item, detachedItem.detached)
		if err != nil {
			return broker.StoredSecret{}, false, err
		}
		return broker.StoredSecret{Kind: broker.SecretDetached, InstanceID: d.InstanceID, Name: d.Name, DetachedID: d.ID, Value: d.Data}, true, nil
	case strings.HasPrefix(sk, skBinding("")):
		b, err := decode(item, bindingItem.binding)
		if err != nil {
			return broker.StoredSecret{}, false, err
		}
		secret := broker.StoredSecret{Kind: broker.SecretCredentials, InstanceID: b.InstanceID, Name: b.ID, Value: b.Sealed}
		if len(b.Sealed) == 0 {
			if len(b.Credentials) == 0 {
				return secret, false, nil
			}
			secret.Value, _ = json.Marshal(b.Credentials)
			secret.Plain = true
		}
		return secret, true, nil
	case strings.HasPrefix(sk, skResource("")):
		r, err := decode(item, resourceItem.resource)
		if err != nil {
			return broker.StoredSecret{}, false, err
		}
		return broker.StoredSecret{Kind: broker.SecretRecord, InstanceID: r.InstanceID, Name: r.Name, Value: r.Data}, true, nil
	}
	return broker.StoredSecret{}, false, nil
}

// ReplaceSecret reads the item, checks that its value is still
// secret.Value, and writes it back with sealed in its place: one
// conditional PutItem whose condition is the attribute as read.
func (s *Store) ReplaceSecret(ctx context.Context, secret broker.StoredSecret, sealed json.RawMessage) error {
	err := s.replaceSecret(ctx, secret, sealed)
	if err != nil {
		return fmt.Errorf("replace %s %s of %s: %w", secret.Kind, secret.Name, secret.InstanceID, err)
	}
	return nil
}

func (s *Store) replaceSecret(ctx context.Context, secret broker.StoredSecret, sealed json.RawMessage) error {
	var k map[string]types.AttributeValue
	attr := attrData
	switch secret.Kind {
	case broker.SecretCredentials:
		k, attr = bindingKey(secret.InstanceID, secret.Name), attrSealed
		if secret.Plain {
			attr = attrCredentials
		}
	case broker.SecretRecord:
		k = resourceKey(secret.InstanceID, secret.Name)
	case broker.SecretDetached:
		k = detachedKey(secret.DetachedID)
	default:
		return fmt.Errorf("unknown kind of secret %q", secret.Kind)
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: s.table, Key: k, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return err
	}
	cur, ok, err := storedSecret(out.Item)
	if err != nil {
		return err
	}
	if !ok || cur.Plain != secret.Plain || !bytes.Equal(cur.Value, secret.Value) {
		return broker.ErrSecretChanged
	}
	var item map[string]types.AttributeValue
	switch secret.Kind {
	case broker.SecretCredentials:
		var b *broker.Binding
		if b, err = decode(out.Item, bindingItem.binding); err == nil {
			b.Sealed, b.Credentials = sealed, nil
			item, err = encode(newBindingItem(*b))
		}
	case broker.SecretRecord:
		var r *broker.Resource
		if r, err = decode(out.Item, resourceItem.resource); err == nil {
			r.Data = sealed
			item, err = encode(newResourceItem(*r))
		}
	case broker.SecretDetached:
		var d *broker.Detached
		if d, err = decode(out.Item, detachedItem.detached); err == nil {
			d.Data = sealed
			item, err = encode(newDetachedItem(*d))
		}
	}
	if err != nil {
		return err
	}
	failed, err := s.putItemIf(ctx, item, expression.Name(attr).Equal(expression.Value(out.Item[attr])))
	if err == nil && failed != nil {
		return broker.ErrSecretChanged
	}
	return err
}
