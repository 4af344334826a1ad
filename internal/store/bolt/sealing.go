package bolt

import (
	"context"
	"fmt"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

var _ broker.SealingModes = (*Store)(nil)

// sealingKey is the sealing mode's item, outside every instance's
// partition ("i#...") as in the DynamoDB table: PK=broker, SK=sealing.
var sealingKey = []byte("broker" + sep + "sealing")

type sealingItem struct {
	SealedOnly bool      `json:"sealed_only"`
	KeyID      string    `json:"key_id,omitempty"`
	Since      time.Time `json:"since,omitzero"`
	// SensitivePlans came after the mode's first format.
	SensitivePlans []string `json:"sensitive_plans,omitempty"`
}

func newSealingItem(m broker.SealingMode) sealingItem {
	return sealingItem{SealedOnly: m.SealedOnly, KeyID: m.KeyID, Since: m.Since.UTC(), SensitivePlans: m.SensitivePlans}
}

func (it sealingItem) mode() broker.SealingMode {
	return broker.SealingMode{SealedOnly: it.SealedOnly, KeyID: it.KeyID, Since: it.Since, SensitivePlans: it.SensitivePlans}
}

// SealingMode reads the sealing mode's item; with none, the zero mode.
func (s *Store) SealingMode(ctx context.Context) (broker.SealingMode, error) {
	var m *broker.SealingMode
	err := s.view(ctx, func(t tx) (err error) {
		m, err = get(t, sealingKey, sealingItem.mode)
		return err
	})
	if err != nil {
		return broker.SealingMode{}, fmt.Errorf("get the sealing mode: %w", err)
	}
	if m == nil {
		return broker.SealingMode{}, nil
	}
	return *m, nil
}

// SetSealingMode writes the sealing mode's item.
func (s *Store) SetSealingMode(ctx context.Context, m broker.SealingMode) error {
	err := s.update(ctx, func(t tx) error { return put(t.items, sealingKey, newSealingItem(m)) })
	if err != nil {
		return fmt.Errorf("set the sealing mode: %w", err)
	}
	return nil
}
