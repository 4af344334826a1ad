package dynamo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/serverless-osb/broker/internal/broker"
)

var nameAttempts = expression.Name(attrAttempts)

// ListResources returns an instance's resource records by name: one
// consistent Query (paginated) of the instance's partition, which DynamoDB
// returns in SK order. An instance with none, or unknown, has an empty list.
func (s *Store) ListResources(ctx context.Context, instanceID string) ([]broker.Resource, error) {
	keyCond := expression.Key(attrPK).Equal(expression.Value(pk(instanceID))).
		And(expression.KeyBeginsWith(expression.Key(attrSK), skResource("")))
	rs, err := query(ctx, s, &dynamodb.QueryInput{ConsistentRead: aws.Bool(true)}, keyCond, resourceItem.resource)
	if err != nil {
		return nil, fmt.Errorf("list resources of %s: %w", instanceID, err)
	}
	return rs, nil
}

// DetachResource deletes the resource record (d.InstanceID, d.Name) and
// stores d: one TransactWriteItems of a Delete (condition: the resource
// exists) and a Put (condition: d.ID is not stored). When the resource is
// gone it returns nil if d.ID is stored (a repeated detach) and an error
// wrapping broker.ErrNotFound if not. When the resource exists but d.ID is
// already stored (an id reused for a resource made again), it writes
// nothing and returns *broker.ConflictError with every field nil: the stored
// record is not overwritten, since a cleanup may be under way for it.
//
// The cancellation reasons tell the cases apart. A Put reported without a
// failure after the Delete failed is confirmed by one consistent GetItem of
// the detached record before answering ErrNotFound: DynamoDB documents a
// reason per item, not that it checks every condition once one failed.
func (s *Store) DetachResource(ctx context.Context, d broker.Detached) error {
	err := broker.CheckIDs(d.ID, d.InstanceID, d.Name)
	if err == nil {
		err = s.detach(ctx, d)
	}
	if err != nil {
		return fmt.Errorf("detach resource %s/%s as %s: %w", d.InstanceID, d.Name, d.ID, err)
	}
	return nil
}

func (s *Store) detach(ctx context.Context, d broker.Detached) error {
	item, err := encode(newDetachedItem(d))
	if err != nil {
		return fmt.Errorf("encode detached resource: %w", err)
	}
	del, err := s.delete(resourceKey(d.InstanceID, d.Name), exists(), noRole)
	if err != nil {
		return err
	}
	put, err := s.put(item, missing(), noRole)
	if err != nil {
		return err
	}
	err = s.transactWrite(ctx, []write{del, put})
	var cancelled *types.TransactionCanceledException
	if !errors.As(err, &cancelled) || !conditionFailed(cancelled.CancellationReasons) {
		return err
	}
	reasons := cancelled.CancellationReasons
	failed := func(i int) bool { return i < len(reasons) && isConditionFailure(reasons[i]) }
	resourceGone, detachedStored := failed(0), failed(1)
	if resourceGone && !detachedStored {
		_, err := get(ctx, s, detachedKey(d.ID), detachedItem.detached)
		switch {
		case err == nil:
			detachedStored = true
		case !errors.Is(err, broker.ErrNotFound):
			return fmt.Errorf("read the detached record after a failed condition: %w", err)
		}
	}
	switch {
	case resourceGone && detachedStored:
		return nil
	case resourceGone:
		return fmt.Errorf("resource: %w", broker.ErrNotFound)
	}
	return fmt.Errorf("detached resource %s exists: %w", d.ID, &broker.ConflictError{})
}

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

// UpdateDetached stores d: one conditional PutItem. Condition: d.ID is
// stored with attempts == attempts; else an error wrapping
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
	failed, err := s.putItemIf(ctx, item, exists().And(nameAttempts.Equal(expression.Value(attempts))))
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
