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

// ReplaceSecret reads the item, checks that it holds secret.Value still,
// and writes sealed in its place: one UpdateItem of that one attribute, on
// condition that it is as read, so that the item's other attributes (a
// binding's state and hold, a detached record's attempts, an instance's
// version) are never written back as read over a newer write that moved
// them between the read and the write.
func (s *Store) ReplaceSecret(ctx context.Context, secret broker.StoredSecret, sealed json.RawMessage) error {
	err := s.replaceSecret(ctx, secret, sealed)
	if err != nil {
		return fmt.Errorf("replace %s %s of %s: %w", secret.Kind, secret.Name, secret.InstanceID, err)
	}
	return nil
}

func (s *Store) replaceSecret(ctx context.Context, secret broker.StoredSecret, sealed json.RawMessage) error {
	k, attr, err := secretAttribute(secret)
	if err != nil {
		return err
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: s.table, Key: k, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return err
	}
	if out.Item == nil || out.Item[attr] == nil {
		return broker.ErrSecretChanged
	}
	item, err := replacedItem(out.Item, secret, sealed)
	if err != nil {
		return err
	}
	if item == nil {
		return broker.ErrSecretChanged
	}
	// Plain credentials become the sealed attribute: the one attribute
	// written is sealed, and credentials goes.
	to := attr
	cond := expression.Name(attr).Equal(expression.Value(out.Item[attr]))
	if secret.Kind == broker.SecretCredentials && secret.Plain {
		to = attrSealed
		cond = cond.And(expression.AttributeNotExists(expression.Name(attrSealed)))
	}
	update := expression.Set(expression.Name(to), expression.Value(item[to]))
	if to != attr {
		update = update.Remove(expression.Name(attr))
	}
	e, err := build(cond, &update)
	if err != nil {
		return err
	}
	var attempts int
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: k, UpdateExpression: e.Update(),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ReturnValuesOnConditionCheckFailure: allOld,
	}, countAttempts(&attempts))
	var failed *types.ConditionalCheckFailedException
	switch {
	case !errors.As(err, &failed):
		return err
	case attempts > 1 && sameValue(failed.Item[to], item[to]) && (to == attr || failed.Item[attr] == nil):
		// This call's first attempt, whose answer was lost (retried.go):
		// the value it writes is sealed anew (its own nonce), so finding
		// it stored is finding this write done.
		return nil
	}
	return broker.ErrSecretChanged
}

// secretAttribute is the key of the item that holds secret and the
// attribute that holds it as stored.
func secretAttribute(secret broker.StoredSecret) (map[string]types.AttributeValue, string, error) {
	switch secret.Kind {
	case broker.SecretCredentials:
		if secret.Plain {
			return bindingKey(secret.InstanceID, secret.Name), attrCredentials, nil
		}
		return bindingKey(secret.InstanceID, secret.Name), attrSealed, nil
	case broker.SecretRecord:
		return resourceKey(secret.InstanceID, secret.Name), attrData, nil
	case broker.SecretDetached:
		return detachedKey(secret.DetachedID), attrData, nil
	case broker.SecretParameters, broker.SecretFingerprint:
		attr := attrFingerprint
		if secret.Kind == broker.SecretParameters {
			attr = attrParameters
			if secret.Of == broker.SecretOfOperation {
				attr = attrTarget
			}
		}
		switch secret.Of {
		case broker.SecretOfInstance:
			return instanceKey(secret.InstanceID), attr, nil
		case broker.SecretOfBinding:
			return bindingKey(secret.InstanceID, secret.Name), attr, nil
		case broker.SecretOfOperation:
			return operationKey(secret.InstanceID, secret.Name), attr, nil
		}
		return nil, "", fmt.Errorf("unknown item %q of %s", secret.Of, secret.Kind)
	}
	return nil, "", fmt.Errorf("unknown kind of secret %q", secret.Kind)
}

// replacedItem is stored with sealed in place of secret, encoded as the
// store writes it (the update takes the one attribute from it), or nil
// when stored no longer holds secret.Value.
func replacedItem(stored map[string]types.AttributeValue, secret broker.StoredSecret, sealed json.RawMessage) (map[string]types.AttributeValue, error) {
	switch secret.Kind {
	case broker.SecretCredentials, broker.SecretRecord, broker.SecretDetached:
		all, err := storedSecrets(stored)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(all, func(cur broker.StoredSecret) bool { return cur.Kind == secret.Kind })
		if i < 0 || all[i].Plain != secret.Plain || !bytes.Equal(all[i].Value, secret.Value) {
			return nil, nil
		}
	}
	switch {
	case secret.Kind == broker.SecretCredentials || secret.Of == broker.SecretOfBinding:
		b, err := decode(stored, bindingItem.binding)
		if err != nil {
			return nil, err
		}
		if secret.Kind == broker.SecretCredentials {
			b.Sealed, b.Credentials = sealed, nil
		} else if !b.ReplaceRequestSecret(secret, sealed) {
			return nil, nil
		}
		return encode(newBindingItem(*b))
	case secret.Kind == broker.SecretRecord:
		r, err := decode(stored, resourceItem.resource)
		if err != nil {
			return nil, err
		}
		r.Data = sealed
		return encode(newResourceItem(*r))
	case secret.Kind == broker.SecretDetached:
		d, err := decode(stored, detachedItem.detached)
		if err != nil {
			return nil, err
		}
		d.Data = sealed
		return encode(newDetachedItem(*d))
	case secret.Of == broker.SecretOfInstance:
		inst, err := decode(stored, instanceItem.instance)
		if err != nil {
			return nil, err
		}
		if !inst.ReplaceRequestSecret(secret, sealed) {
			return nil, nil
		}
		return encode(newInstanceItem(*inst))
	case secret.Of == broker.SecretOfOperation:
		op, err := decode(stored, operationItem.operation)
		if err != nil {
			return nil, err
		}
		if !op.ReplaceRequestSecret(secret, sealed) {
			return nil, nil
		}
		return encode(newOperationItem(*op))
	}
	return nil, fmt.Errorf("unknown item %q of %s", secret.Of, secret.Kind)
}
