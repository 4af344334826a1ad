package dynamo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/serverless-osb/broker/internal/broker"
)

var _ broker.SecretStore = (*Store)(nil)

// StoredSecrets calls fn with every binding's credentials, every record's
// and detached record's data, and the request parameters and fingerprint
// of every instance, binding and operation: a consistent Scan of the
// table, every page, then fn for each (fn may write).
func (s *Store) StoredSecrets(ctx context.Context, fn func(broker.StoredSecret) error) error {
	var all []broker.StoredSecret
	pages := dynamodb.NewScanPaginator(s.client, &dynamodb.ScanInput{TableName: s.table, ConsistentRead: aws.Bool(true)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("stored secrets: %w", err)
		}
		for _, item := range page.Items {
			secrets, err := storedSecrets(item)
			if err != nil {
				return fmt.Errorf("stored secrets: %w", err)
			}
			all = append(all, secrets...)
		}
	}
	for _, secret := range all {
		if err := fn(secret); err != nil {
			return err
		}
	}
	return nil
}

// storedSecrets are the secrets an item may hold.
func storedSecrets(item map[string]types.AttributeValue) ([]broker.StoredSecret, error) {
	pkv, sk := keyPart(item, attrPK), keyPart(item, attrSK)
	switch {
	case pkv == pkDetached:
		d, err := decode(item, detachedItem.detached)
		if err != nil {
			return nil, err
		}
		return []broker.StoredSecret{{Kind: broker.SecretDetached, InstanceID: d.InstanceID, Name: d.Name, DetachedID: d.ID, Value: d.Data}}, nil
	case !strings.HasPrefix(pkv, pk("")):
		return nil, nil
	case sk == skInstance:
		inst, err := decode(item, instanceItem.instance)
		if err != nil {
			return nil, err
		}
		return inst.RequestSecrets(), nil
	case strings.HasPrefix(sk, skOperation("")):
		op, err := decode(item, operationItem.operation)
		if err != nil {
			return nil, err
		}
		return op.RequestSecrets(), nil
	case strings.HasPrefix(sk, skBinding("")):
		b, err := decode(item, bindingItem.binding)
		if err != nil {
			return nil, err
		}
		out := b.RequestSecrets()
		secret := broker.StoredSecret{Kind: broker.SecretCredentials, InstanceID: b.InstanceID, Name: b.ID, Value: b.Sealed}
		if len(b.Sealed) == 0 {
			if len(b.Credentials) == 0 {
				return out, nil
			}
			secret.Value, _ = json.Marshal(b.Credentials)
			secret.Plain = true
		}
		return append([]broker.StoredSecret{secret}, out...), nil
	case strings.HasPrefix(sk, skResource("")):
		r, err := decode(item, resourceItem.resource)
		if err != nil {
			return nil, err
		}
		return []broker.StoredSecret{{Kind: broker.SecretRecord, InstanceID: r.InstanceID, Name: r.Name, Value: r.Data}}, nil
	}
	return nil, nil
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
	case broker.SecretParameters, broker.SecretFingerprint:
		return s.replaceRequestSecret(ctx, secret, sealed)
	default:
		return fmt.Errorf("unknown kind of secret %q", secret.Kind)
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: s.table, Key: k, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return err
	}
	all, err := storedSecrets(out.Item)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(all, func(cur broker.StoredSecret) bool { return cur.Kind == secret.Kind })
	if i < 0 || all[i].Plain != secret.Plain || !bytes.Equal(all[i].Value, secret.Value) {
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

// replaceRequestSecret puts sealed in place of the parameters or the
// fingerprint of the item secret.Of names: one UpdateItem of that one
// attribute, on condition that it is as read, so that the item's other
// attributes (its state, its version) are never written back as read.
func (s *Store) replaceRequestSecret(ctx context.Context, secret broker.StoredSecret, sealed json.RawMessage) error {
	var k map[string]types.AttributeValue
	attr := attrFingerprint
	switch secret.Of {
	case broker.SecretOfInstance:
		k = instanceKey(secret.InstanceID)
	case broker.SecretOfBinding:
		k = bindingKey(secret.InstanceID, secret.Name)
	case broker.SecretOfOperation:
		k = operationKey(secret.InstanceID, secret.Name)
	default:
		return fmt.Errorf("unknown item %q of %s", secret.Of, secret.Kind)
	}
	if secret.Kind == broker.SecretParameters {
		attr = attrParameters
		if secret.Of == broker.SecretOfOperation {
			attr = attrTarget
		}
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: s.table, Key: k, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return err
	}
	if out.Item == nil || out.Item[attr] == nil {
		return broker.ErrSecretChanged
	}
	var item map[string]types.AttributeValue
	switch secret.Of {
	case broker.SecretOfInstance:
		var inst *broker.Instance
		if inst, err = decode(out.Item, instanceItem.instance); err == nil {
			if !inst.ReplaceRequestSecret(secret, sealed) {
				return broker.ErrSecretChanged
			}
			item, err = encode(newInstanceItem(*inst))
		}
	case broker.SecretOfBinding:
		var b *broker.Binding
		if b, err = decode(out.Item, bindingItem.binding); err == nil {
			if !b.ReplaceRequestSecret(secret, sealed) {
				return broker.ErrSecretChanged
			}
			item, err = encode(newBindingItem(*b))
		}
	case broker.SecretOfOperation:
		var op *broker.Operation
		if op, err = decode(out.Item, operationItem.operation); err == nil {
			if !op.ReplaceRequestSecret(secret, sealed) {
				return broker.ErrSecretChanged
			}
			item, err = encode(newOperationItem(*op))
		}
	}
	if err != nil {
		return err
	}
	update := expression.Set(expression.Name(attr), expression.Value(item[attr]))
	e, err := build(expression.Name(attr).Equal(expression.Value(out.Item[attr])), &update)
	if err != nil {
		return err
	}
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: k, UpdateExpression: e.Update(),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		return broker.ErrSecretChanged
	}
	return err
}
