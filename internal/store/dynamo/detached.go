package dynamo

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/serverless-osb/broker/internal/broker"
)

// GetDetached returns a detached resource (consistent read), or an error
// wrapping broker.ErrNotFound.
func (s *Store) GetDetached(ctx context.Context, id string) (broker.Detached, error) {
	d, err := get(ctx, s, detachedKey(id), detachedItem.detached)
	if err != nil {
		return broker.Detached{}, fmt.Errorf("get detached resource %s: %w", id, err)
	}
	return *d, nil
}

// ListDetached returns every detached resource, oldest first (CreatedAt,
// then ID): one consistent Query (paginated) of the detached partition.
func (s *Store) ListDetached(ctx context.Context) ([]broker.Detached, error) {
	keyCond := expression.Key(attrPK).Equal(expression.Value(pkDetached))
	ds, err := query(ctx, s, &dynamodb.QueryInput{ConsistentRead: aws.Bool(true)}, keyCond, detachedItem.detached)
	if err != nil {
		return nil, fmt.Errorf("list detached resources: %w", err)
	}
	slices.SortStableFunc(ds, func(a, b broker.Detached) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return ds, nil
}

// UpdateDetached stores d: one conditional PutItem. Conditions:
// broker.UpdateDetachedConditions (d.ID is stored with attempts ==
// attempts); else an error wrapping
// broker.ErrNotFound when it is missing, or *broker.ConflictError with
// every field nil when its attempts differ. The item returned with the
// failed condition tells the two apart without a second read.
func (s *Store) UpdateDetached(ctx context.Context, d broker.Detached, attempts int) error {
	err := broker.CheckIDs(d.ID, d.InstanceID, d.Name)
	if err == nil {
		err = s.updateDetached(ctx, d, attempts)
	}
	if err != nil {
		return fmt.Errorf("update detached resource %s: %w", d.ID, err)
	}
	return nil
}

func (s *Store) updateDetached(ctx context.Context, d broker.Detached, attempts int) error {
	item, err := encode(newDetachedItem(d))
	if err != nil {
		return fmt.Errorf("encode detached resource: %w", err)
	}
	cond, err := condition(broker.UpdateDetachedConditions(attempts))
	if err != nil {
		return err
	}
	failed, err := s.putItemIf(ctx, item, cond)
	if err != nil || failed == nil {
		return err
	}
	cur, err := decode(failed.Item, detachedItem.detached)
	switch {
	case err != nil:
		return err
	case cur == nil:
		return broker.ErrNotFound
	}
	return fmt.Errorf("stored attempts %d, expected %d: %w", cur.Attempts, attempts, &broker.ConflictError{})
}

// DeleteDetached removes a detached record: one DeleteItem; a missing one
// is not an error.
func (s *Store) DeleteDetached(ctx context.Context, id string) error {
	err := broker.CheckIDs(id)
	if err == nil {
		_, err = s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: s.table, Key: detachedKey(id)})
	}
	if err != nil {
		return fmt.Errorf("delete detached resource %s: %w", id, err)
	}
	return nil
}

// DeleteExpiredOperations removes nothing and makes no call: the table's
// time to live on expires_at_epoch, which newOperationItem sets on finished
// operations only, deletes expired ones by itself (within days of expiry,
// so a record past ExpiresAt may still be read). Scanning the table to
// delete them sooner would cost a full read for no gain.
func (s *Store) DeleteExpiredOperations(ctx context.Context, now time.Time) (int, error) {
	return 0, nil
}
