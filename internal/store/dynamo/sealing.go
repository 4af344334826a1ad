package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/serverless-osb/broker/internal/broker"
)

var _ broker.SealingModes = (*Store)(nil)

// The sealing mode's item, outside every instance's partition ("i#...").
const (
	pkBroker  = "broker"
	skSealing = "sealing"
)

func sealingKey() map[string]types.AttributeValue { return key(pkBroker, skSealing) }

type sealingItem struct {
	PK         string    `dynamodbav:"PK"`
	SK         string    `dynamodbav:"SK"`
	SealedOnly bool      `dynamodbav:"sealed_only"`
	KeyID      string    `dynamodbav:"key_id,omitempty"`
	Since      time.Time `dynamodbav:"since,omitempty"`
	// SensitivePlans came after the mode's first format: a list of
	// strings (a set cannot be empty).
	SensitivePlans []string `dynamodbav:"sensitive_plans,omitempty"`
}

func newSealingItem(m broker.SealingMode) (sealingItem, error) {
	return sealingItem{PK: pkBroker, SK: skSealing, SealedOnly: m.SealedOnly, KeyID: m.KeyID, Since: m.Since.UTC(), SensitivePlans: m.SensitivePlans}, nil
}

func (it sealingItem) mode() (broker.SealingMode, error) {
	return broker.SealingMode{SealedOnly: it.SealedOnly, KeyID: it.KeyID, Since: it.Since, SensitivePlans: it.SensitivePlans}, nil
}

// SealingMode reads the sealing mode's item (consistent read); with none,
// the zero mode.
func (s *Store) SealingMode(ctx context.Context) (broker.SealingMode, error) {
	m, err := get(ctx, s, sealingKey(), sealingItem.mode)
	switch {
	case err == nil:
		return *m, nil
	case errors.Is(err, broker.ErrNotFound):
		return broker.SealingMode{}, nil
	}
	return broker.SealingMode{}, fmt.Errorf("get the sealing mode: %w", err)
}

// SetSealingMode writes the sealing mode's item.
func (s *Store) SetSealingMode(ctx context.Context, m broker.SealingMode) error {
	item, err := encode(newSealingItem(m))
	if err == nil {
		_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: s.table, Item: item})
	}
	if err != nil {
		return fmt.Errorf("set the sealing mode: %w", err)
	}
	return nil
}
