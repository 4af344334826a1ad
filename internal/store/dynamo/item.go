package dynamo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/store/item"
)

// An item is the domain value's JSON, as the bolt store writes it, spread
// over top-level attributes: a JSON string becomes S, a number N (its text,
// so integers keep every digit), true/false BOOL, null NULL, an array L and
// an object M. The fields named in jsonText are the exception: they hold
// raw JSON that must come back byte for byte (or compacted), which an M
// would not do (key order, duplicate keys, numbers beyond DynamoDB's 38
// digits), so they are S attributes holding the JSON text.
//
// Decoding reverses this and hands the JSON to encoding/json, so that an
// item decodes exactly as the bolt store's JSON does. Attributes that are
// not fields (PK, SK, inprogress, expires_at_epoch) are ignored.
var jsonText = map[string]bool{
	"parameters":    true, // instance, binding
	"context":       true, // instance, binding
	"bind_resource": true, // binding
	"target":        true, // operation: holds raw parameters and context
	"data":          true, // resource, detached resource
}

// notFields are the attributes that the store adds to the domain fields.
var notFields = map[string]bool{attrPK: true, attrSK: true, attrInProgress: true, attrExpiresAt: true}

// marshalItem returns the item for v under the given key.
func marshalItem(pkValue, skValue string, v any) (map[string]types.AttributeValue, error) {
	data, err := item.Encode(v)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, err
	}
	item := key(pkValue, skValue)
	for name, raw := range fields {
		if notFields[name] {
			return nil, fmt.Errorf("field %q collides with a table attribute", name)
		}
		if jsonText[name] {
			item[name] = &types.AttributeValueMemberS{Value: string(raw)}
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var value any
		if err := dec.Decode(&value); err != nil {
			return nil, err
		}
		if item[name], err = attributeValue(value); err != nil {
			return nil, fmt.Errorf("field %q: %w", name, err)
		}
	}
	return item, nil
}

// unmarshalItem decodes an item into v.
func unmarshalItem(item map[string]types.AttributeValue, v any) error {
	var buf bytes.Buffer
	buf.WriteByte('{')
	first := true
	for _, name := range slices.Sorted(maps.Keys(item)) {
		if notFields[name] {
			continue
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		if err := writeString(&buf, name); err != nil {
			return err
		}
		buf.WriteByte(':')
		if s, ok := item[name].(*types.AttributeValueMemberS); ok && jsonText[name] {
			buf.WriteString(s.Value)
			continue
		}
		if err := writeJSON(&buf, item[name]); err != nil {
			return fmt.Errorf("attribute %q: %w", name, err)
		}
	}
	buf.WriteByte('}')
	if err := json.Unmarshal(buf.Bytes(), v); err != nil {
		return fmt.Errorf("decode item %s/%s: %w", keyPart(item, attrPK), keyPart(item, attrSK), err)
	}
	return nil
}

func keyPart(item map[string]types.AttributeValue, name string) string {
	if s, ok := item[name].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return "?"
}

// attributeValue converts a JSON value decoded with UseNumber.
func attributeValue(v any) (types.AttributeValue, error) {
	switch v := v.(type) {
	case nil:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case bool:
		return &types.AttributeValueMemberBOOL{Value: v}, nil
	case string:
		return &types.AttributeValueMemberS{Value: v}, nil
	case json.Number:
		return &types.AttributeValueMemberN{Value: v.String()}, nil
	case []any:
		l := make([]types.AttributeValue, len(v))
		for i, e := range v {
			var err error
			if l[i], err = attributeValue(e); err != nil {
				return nil, err
			}
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case map[string]any:
		m := make(map[string]types.AttributeValue, len(v))
		for k, e := range v {
			var err error
			if m[k], err = attributeValue(e); err != nil {
				return nil, err
			}
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	}
	return nil, fmt.Errorf("unexpected JSON value of type %T", v)
}

// writeJSON writes an attribute value as JSON.
func writeJSON(buf *bytes.Buffer, av types.AttributeValue) error {
	switch av := av.(type) {
	case *types.AttributeValueMemberNULL:
		buf.WriteString("null")
	case *types.AttributeValueMemberBOOL:
		buf.WriteString(strconv.FormatBool(av.Value))
	case *types.AttributeValueMemberS:
		return writeString(buf, av.Value)
	case *types.AttributeValueMemberN:
		if !json.Valid([]byte(av.Value)) {
			return fmt.Errorf("number %q is not JSON", av.Value)
		}
		buf.WriteString(av.Value)
	case *types.AttributeValueMemberL:
		buf.WriteByte('[')
		for i, e := range av.Value {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case *types.AttributeValueMemberM:
		buf.WriteByte('{')
		for i, k := range slices.Sorted(maps.Keys(av.Value)) {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeString(buf, k); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := writeJSON(buf, av.Value[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("unexpected attribute value of type %T", av)
	}
	return nil
}

func writeString(buf *bytes.Buffer, s string) error {
	data, err := item.Encode(s)
	if err != nil {
		return err
	}
	buf.Write(data)
	return nil
}

// The item builders below normalise times to UTC, as the bolt store does.

func instanceItem(i broker.Instance) (map[string]types.AttributeValue, error) {
	i.CreatedAt, i.UpdatedAt = i.CreatedAt.UTC(), i.UpdatedAt.UTC()
	return marshalItem(pk(i.ID), skInstance, i)
}

func bindingItem(b broker.Binding) (map[string]types.AttributeValue, error) {
	b.CreatedAt, b.UpdatedAt = b.CreatedAt.UTC(), b.UpdatedAt.UTC()
	return marshalItem(pk(b.InstanceID), skBinding(b.ID), b)
}

// operationItem adds the in-progress index key to an operation in progress,
// and the TTL attribute to a finished one that has an expiry.
func operationItem(op broker.Operation) (map[string]types.AttributeValue, error) {
	op.CreatedAt, op.UpdatedAt, op.NextCheckAt = op.CreatedAt.UTC(), op.UpdatedAt.UTC(), op.NextCheckAt.UTC()
	op.FinishedAt, op.ExpiresAt = op.FinishedAt.UTC(), op.ExpiresAt.UTC()
	item, err := marshalItem(pk(op.InstanceID), skOperation(op.ID), op)
	if err != nil {
		return nil, err
	}
	switch {
	case !op.Finished():
		item[attrInProgress] = &types.AttributeValueMemberS{Value: inProgressValue}
	case !op.ExpiresAt.IsZero():
		item[attrExpiresAt] = &types.AttributeValueMemberN{Value: strconv.FormatInt(op.ExpiresAt.Unix(), 10)}
	}
	return item, nil
}

func resourceItem(r broker.Resource) (map[string]types.AttributeValue, error) {
	r.UpdatedAt = r.UpdatedAt.UTC()
	return marshalItem(pk(r.InstanceID), skResource(r.Name), r)
}

func detachedItem(d broker.Detached) (map[string]types.AttributeValue, error) {
	d.CreatedAt, d.UpdatedAt = d.CreatedAt.UTC(), d.UpdatedAt.UTC()
	return marshalItem(pkDetached, d.ID, d)
}

// decode returns the item decoded as a T, or nil when there is no item.
func decode[T any](item map[string]types.AttributeValue) (*T, error) {
	if len(item) == 0 {
		return nil, nil
	}
	v := new(T)
	if err := unmarshalItem(item, v); err != nil {
		return nil, err
	}
	return v, nil
}
