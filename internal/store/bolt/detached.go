package bolt

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// GetDetached returns a detached resource, or an error wrapping
// broker.ErrNotFound.
func (s *Store) GetDetached(ctx context.Context, id string) (broker.Detached, error) {
	var d *broker.Detached
	err := s.view(ctx, func(t tx) (err error) {
		d, err = t.detached(id)
		return err
	})
	if err == nil && d == nil {
		err = broker.ErrNotFound
	}
	if err != nil {
		return broker.Detached{}, fmt.Errorf("get detached resource %s: %w", id, err)
	}
	return *d, nil
}

// ListDetached returns every detached resource, oldest first (CreatedAt,
// then ID).
func (s *Store) ListDetached(ctx context.Context) ([]broker.Detached, error) {
	var ds []broker.Detached
	err := s.view(ctx, func(t tx) (err error) {
		ds, err = scan(t.items, []byte(pkDetached), detachedItem.detached)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list detached resources: %w", err)
	}
	sortDetached(ds)
	return ds, nil
}

func sortDetached(ds []broker.Detached) {
	slices.SortStableFunc(ds, func(a, b broker.Detached) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
}

// UpdateDetached stores d. Conditions: broker.UpdateDetachedConditions
// (d.ID is stored with Attempts == attempts); else an error wrapping broker.ErrNotFound when it is missing,
// or *broker.ConflictError with every field nil when its attempts differ.
func (s *Store) UpdateDetached(ctx context.Context, d broker.Detached, attempts int) error {
	err := broker.CheckIDs(d.ID, d.InstanceID, d.Name)
	if err == nil {
		err = s.update(ctx, func(t tx) error {
			cur, err := t.detached(d.ID)
			if err != nil {
				return err
			}
			if cur == nil {
				return broker.ErrNotFound
			}
			ok, err := meets(storedDetached(cur), broker.UpdateDetachedConditions(attempts))
			switch {
			case err != nil:
				return err
			case !ok:
				return fmt.Errorf("stored attempts %d, expected %d: %w", cur.Attempts, attempts, &broker.ConflictError{})
			}
			return t.putDetached(d)
		})
	}
	if err != nil {
		return fmt.Errorf("update detached resource %s: %w", d.ID, err)
	}
	return nil
}

// DeleteDetached removes a detached record; a missing one is not an error.
func (s *Store) DeleteDetached(ctx context.Context, id string) error {
	err := broker.CheckIDs(id)
	if err == nil {
		err = s.update(ctx, func(t tx) error { return t.items.Delete(detachedKey(id)) })
	}
	if err != nil {
		return fmt.Errorf("delete detached resource %s: %w", id, err)
	}
	return nil
}

// DeleteExpiredOperations removes the finished operations whose ExpiresAt
// is before now, in one transaction, and returns how many it removed. It
// reads every item: bbolt has no expiry and no index by time, and a local
// store is small. An operation in progress is never removed, whatever its
// ExpiresAt, and neither is one with no ExpiresAt.
func (s *Store) DeleteExpiredOperations(ctx context.Context, now time.Time) (int, error) {
	var removed int
	err := s.update(ctx, func(t tx) error {
		var expired [][]byte
		err := t.items.ForEach(func(k, _ []byte) error {
			if !isOperationKey(k) {
				return nil
			}
			op, err := get(t, k, operationItem.operation)
			if err != nil {
				return err
			}
			if op.Finished() && !op.ExpiresAt.IsZero() && op.ExpiresAt.Before(now) {
				expired = append(expired, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range expired {
			if err := t.items.Delete(k); err != nil {
				return err
			}
			// A finished operation is not indexed; deleting its key keeps
			// the index from ever naming a missing record.
			if ipk := inProgressKeyOf(k); t.has(ipk) {
				id, sk, _ := splitKey(k)
				opID, _, _ := cutID(sk[1:])
				t.progressMove(progressOp{id, opID}, false)
				if err := t.items.Delete(ipk); err != nil {
					return err
				}
			}
		}
		removed = len(expired)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("delete operations expired before %s: %w", now.UTC().Format(time.RFC3339), err)
	}
	return removed, nil
}

// detach moves the resource record d names into d (as FinishOperation's
// Detach asks).
func (t tx) detach(d broker.Detached) error {
	if err := t.deleteResource(d.InstanceID, d.Name); err != nil {
		return err
	}
	return t.putDetached(d)
}
