package dynamo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/serverless-osb/broker/internal/broker"
)

// GetInstance returns the instance (consistent read), or an error wrapping
// broker.ErrNotFound.
func (s *Store) GetInstance(ctx context.Context, instanceID string) (broker.Instance, error) {
	inst, err := get(ctx, s, instanceKey(instanceID), instanceItem.instance)
	if err != nil {
		return broker.Instance{}, fmt.Errorf("get instance %s: %w", instanceID, err)
	}
	return *inst, nil
}

// GetBinding returns the binding (consistent read), or an error wrapping
// broker.ErrNotFound.
func (s *Store) GetBinding(ctx context.Context, instanceID, bindingID string) (broker.Binding, error) {
	b, err := get(ctx, s, bindingKey(instanceID, bindingID), bindingItem.binding)
	if err != nil {
		return broker.Binding{}, fmt.Errorf("get binding %s/%s: %w", instanceID, bindingID, err)
	}
	return *b, nil
}

// GetOperation returns the operation (consistent read), or an error wrapping
// broker.ErrNotFound.
func (s *Store) GetOperation(ctx context.Context, instanceID, operationID string) (broker.Operation, error) {
	op, err := get(ctx, s, operationKey(instanceID, operationID), operationItem.operation)
	if err != nil {
		return broker.Operation{}, fmt.Errorf("get operation %s/%s: %w", instanceID, operationID, err)
	}
	return *op, nil
}

// get reads the item at k (consistent read) and decodes it with domain.
func get[I, D any](ctx context.Context, s *Store, k map[string]types.AttributeValue, domain func(I) (D, error)) (*D, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: s.table, Key: k, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, err
	}
	v, err := decode(out.Item, domain)
	if err == nil && v == nil {
		err = broker.ErrNotFound
	}
	return v, err
}

// ListOperations returns the operations under an instance, its bindings'
// included, oldest first (CreatedAt, then ID), from a consistent Query of
// the instance's partition. An instance with none, or unknown, has an empty
// list.
func (s *Store) ListOperations(ctx context.Context, instanceID string) ([]broker.Operation, error) {
	keyCond := expression.Key(attrPK).Equal(expression.Value(pk(instanceID))).
		And(expression.KeyBeginsWith(expression.Key(attrSK), skOperation("")))
	ops, err := s.queryOperations(ctx, &dynamodb.QueryInput{ConsistentRead: aws.Bool(true)}, keyCond)
	if err != nil {
		return nil, fmt.Errorf("list operations of %s: %w", instanceID, err)
	}
	return ops, nil
}

// ListInProgress returns every operation in progress, oldest first, from
// the sparse index InProgress. A global secondary index cannot be read
// consistently: an operation that started or finished a moment ago may be
// missing or still listed. Its callers (repairs after a restart, the
// reaper) read each operation again, consistently, and change it only
// through conditional writes, so a stale entry costs a read, not a wrong
// write. The index has one hash key value, which is fine for the number of
// operations a broker runs at once.
func (s *Store) ListInProgress(ctx context.Context) ([]broker.Operation, error) {
	keyCond := expression.Key(attrInProgress).Equal(expression.Value(inProgressValue))
	ops, err := s.queryOperations(ctx, &dynamodb.QueryInput{IndexName: aws.String(indexInProgress)}, keyCond)
	if err != nil {
		return nil, fmt.Errorf("list operations in progress: %w", err)
	}
	return ops, nil
}

func (s *Store) queryOperations(ctx context.Context, in *dynamodb.QueryInput, keyCond expression.KeyConditionBuilder) ([]broker.Operation, error) {
	ops, err := query(ctx, s, in, keyCond, operationItem.operation)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(ops, func(a, b broker.Operation) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return ops, nil
}

// query runs in with keyCond, every page, and decodes the items with
// domain in the order DynamoDB returns them (by SK within a partition).
func query[I, D any](ctx context.Context, s *Store, in *dynamodb.QueryInput, keyCond expression.KeyConditionBuilder, domain func(I) (D, error)) ([]D, error) {
	e, err := expression.NewBuilder().WithKeyCondition(keyCond).Build()
	if err != nil {
		return nil, fmt.Errorf("build expression: %w", err)
	}
	in.TableName = s.table
	in.KeyConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.KeyCondition(), e.Names(), e.Values()
	out := []D{}
	pages := dynamodb.NewQueryPaginator(s.client, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, item := range page.Items {
			v, err := decode(item, domain)
			if err != nil {
				return nil, err
			}
			out = append(out, *v)
		}
	}
	return out, nil
}

// CreateInstance stores a new instance and its provision operation in one
// transaction. Conditions: broker.CreateInstanceConditions; else
// *broker.ConflictError{Instance}.
func (s *Store) CreateInstance(ctx context.Context, inst broker.Instance, op broker.Operation, settled *broker.Settled) error {
	err := broker.CheckCreate(inst.ID, op, settled)
	if err == nil {
		err = s.run(ctx, func(add adder) {
			add(s.putInstance(inst, broker.CreateInstanceConditions().Instance, roleInstance))
			add(s.putOperation(op))
			if settled != nil {
				s.changeRecords(add, inst.ID, settled.Records)
			}
		})
	}
	if err != nil {
		return fmt.Errorf("create instance %s: %w", inst.ID, err)
	}
	return nil
}

// LockInstance starts an update or deprovision: one transaction that stores
// l.Instance, l.Op and l.Halted. Conditions: l.Conditions(); else
// *broker.ConflictError{Instance} (nil when missing).
func (s *Store) LockInstance(ctx context.Context, l broker.LockInstance) error {
	err := l.Check()
	if err == nil {
		err = s.run(ctx, func(add adder) {
			add(s.putInstance(l.Instance, l.Conditions().Instance, roleInstance))
			add(s.putOperation(l.Op))
			if l.Halted != nil {
				add(s.putOperation(*l.Halted))
			}
		})
	}
	if err != nil {
		return fmt.Errorf("lock instance %s: %w", l.Instance.ID, err)
	}
	return nil
}

// CreateBinding stores a new binding and its bind operation and adds one to
// the instance's binding_ops and version, in one transaction: a request
// that read the instance with its bindings and locks it at that version
// knows the bindings have not changed since. Conditions:
// broker.CreateBindingConditions, on the instance's update and the
// binding's put; else *broker.ConflictError{Instance, Binding}, each as
// stored or nil when missing.
func (s *Store) CreateBinding(ctx context.Context, b broker.Binding, op broker.Operation, settled *broker.Settled) error {
	err := broker.CheckCreate(b.InstanceID, op, settled, b.ID)
	if err == nil {
		e := broker.CreateBindingConditions(b, settled)
		count := countBindingOp()
		if settled != nil {
			// Done in memory: nothing to count.
			count = expression.Add(nameVersion, expression.Value(1))
		}
		err = s.run(ctx, func(add adder) {
			add(s.update(instanceKey(b.InstanceID), count, e.Instance, roleInstance))
			add(s.putBinding(b, e.Binding, roleBinding))
			add(s.putOperation(op))
			if settled != nil {
				s.changeRecords(add, b.InstanceID, settled.Records)
			}
		})
	}
	if err != nil {
		return fmt.Errorf("create binding %s/%s: %w", b.InstanceID, b.ID, err)
	}
	return nil
}

// LockBinding starts an unbind: one transaction that stores l.Binding,
// l.Op and l.Halted. Conditions: l.Conditions(); else
// *broker.ConflictError{Instance, Binding}. When l.Holder is empty the
// instance counts one more binding operation; otherwise the halted bind's
// count passes to the unbind and the instance is only checked.
func (s *Store) LockBinding(ctx context.Context, l broker.LockBinding) error {
	b := l.Binding
	err := l.Check()
	if err == nil {
		e := l.Conditions()
		err = s.run(ctx, func(add adder) {
			add(s.putBinding(b, e.Binding, roleBinding))
			if l.Holder == "" {
				add(s.update(instanceKey(b.InstanceID), countBindingOp(), e.Instance, roleInstance))
			} else {
				add(s.check(instanceKey(b.InstanceID), e.Instance, roleInstance))
			}
			add(s.putOperation(l.Op))
			if l.Halted != nil {
				add(s.putOperation(*l.Halted))
			}
		})
	}
	if err != nil {
		return fmt.Errorf("lock binding %s/%s: %w", b.InstanceID, b.ID, err)
	}
	return nil
}

func countBindingOp() expression.UpdateBuilder {
	return expression.Add(nameBindingOps, expression.Value(1)).Add(nameVersion, expression.Value(1))
}

// UpdateOperation records progress: one conditional PutItem. Conditions:
// broker.UpdateOperationConditions (the stored operation is in progress);
// else *broker.ConflictError{Operation}
// with the stored record, or a nil Operation when there is none. op itself
// must be in progress: finishing goes through FinishOperation, which
// releases what the operation held.
func (s *Store) UpdateOperation(ctx context.Context, op broker.Operation, records broker.RecordChanges) error {
	err := broker.CheckProgress(op, records)
	cond := broker.UpdateOperationConditions().Operation
	switch {
	case err != nil:
	case records.Empty():
		var item map[string]types.AttributeValue
		if item, err = encode(newOperationItem(op)); err == nil {
			err = s.putItem(ctx, item, cond, roleOperation)
		}
	default:
		err = s.run(ctx, func(add adder) {
			add(s.putOperationIf(op, cond))
			s.changeRecords(add, op.InstanceID, records)
		})
	}
	if err != nil {
		return fmt.Errorf("update operation %s/%s: %w", op.InstanceID, op.ID, err)
	}
	return nil
}

// FinishOperation records an outcome and releases what the operation held,
// in one transaction. Conditions: f.Conditions() (the stored operation is
// in progress, and holds the instance or binding it writes), and with
// ReleaseBinding f.ReleaseConditions() (the instance counts a binding
// operation). Else *broker.ConflictError with the stored Operation, plus
// the Instance and Binding that were part of the conditions (nil when
// missing). An operation already finished is therefore reported as a
// conflict carrying its outcome, which callers treat as done.
//
// DeleteInstance deletes the instance and f.Bindings: the operation read
// them while it held the instance, so no binding could be created or
// locked since, and the condition on the instance guards that. When the
// items do not fit in one transaction (DynamoDB takes 100), the bindings
// and record removals beyond that are deleted first, 98 at a time, each
// transaction conditional on the operation being in progress and holding
// the instance, so none of them can delete an item the operation does not
// own. Operations stay; resource records stay unless f.Records removes
// them. f.Records and f.Detach are written in the final transaction.
//
// ReleaseBinding subtracts one from the instance's binding_ops (and adds
// one to its version); f.ReleaseConditions() are that write's conditions,
// so the transaction fails when they do. A binding operation in progress
// always counts one, so callers following the port never meet this.
func (s *Store) FinishOperation(ctx context.Context, f broker.Finish) error {
	op := f.Op
	e, bindingID := f.Conditions(), f.BindingID()
	err := f.Check()
	var deletes []map[string]types.AttributeValue
	if f.DeleteInstance {
		for _, id := range f.Bindings {
			deletes = append(deletes, bindingKey(op.InstanceID, id))
		}
	}
	records := f.Records
	if f.HoldsInstance() && err == nil {
		// Record removals can go ahead with the bindings: only the
		// operation holding the instance touches them.
		for _, name := range records.Remove {
			deletes = append(deletes, resourceKey(op.InstanceID, name))
		}
		records.Remove = nil
	}
	// The final transaction: the operation, the instance or binding, the
	// release, the records and detached resources, and the deletes left.
	fixed := 1 + len(records.Save) + len(records.Remove) + 2*len(f.Detach)
	for _, w := range []bool{f.HoldsInstance(), f.HoldsBinding(), f.ReleaseBinding} {
		if w {
			fixed++
		}
	}
	if err == nil && fixed+len(deletes) > maxTransactItems {
		if !f.HoldsInstance() || fixed > maxTransactItems {
			err = fmt.Errorf("%d items do not fit in one transaction", fixed+len(deletes))
		} else {
			deletes, err = s.deleteAhead(ctx, op, e, deletes, maxTransactItems-fixed)
		}
	}
	if err == nil {
		err = s.run(ctx, func(add adder) {
			add(s.putOperationIf(op, e.Operation))
			switch {
			case f.DeleteInstance:
				add(s.delete(instanceKey(op.InstanceID), e.Instance, roleInstance))
			case f.Instance != nil:
				add(s.putInstance(*f.Instance, e.Instance, roleInstance))
			}
			for _, k := range deletes {
				add(s.delete(k, nil, noRole))
			}
			switch {
			case f.DeleteBinding:
				add(s.delete(bindingKey(op.InstanceID, bindingID), e.Binding, roleBinding))
			case f.Binding != nil:
				add(s.putBinding(*f.Binding, e.Binding, roleBinding))
			}
			if f.ReleaseBinding {
				// A transaction cannot skip one of its writes: the
				// release's conditions are the write's.
				release := expression.Set(nameBindingOps, expression.Minus(nameBindingOps, expression.Value(1))).
					Add(nameVersion, expression.Value(1))
				add(s.update(instanceKey(op.InstanceID), release, f.ReleaseConditions(), roleInstance))
			}
			s.changeRecords(add, op.InstanceID, records)
			for _, d := range f.Detach {
				add(s.delete(resourceKey(d.InstanceID, d.Name), nil, noRole))
				item, err := encode(newDetachedItem(d))
				if err != nil {
					add(write{}, fmt.Errorf("encode detached resource: %w", err))
					continue
				}
				add(s.put(item, nil, noRole))
			}
		})
	}
	if err != nil {
		return fmt.Errorf("finish operation %s/%s: %w", op.InstanceID, op.ID, err)
	}
	return nil
}

// changeRecords adds a driver's record changes under instanceID to a
// transaction.
func (s *Store) changeRecords(add adder, instanceID string, r broker.RecordChanges) {
	for _, rec := range r.Save {
		item, err := encode(newResourceItem(rec))
		if err != nil {
			add(write{}, fmt.Errorf("encode resource: %w", err))
			continue
		}
		add(s.put(item, nil, noRole))
	}
	for _, name := range r.Remove {
		add(s.delete(resourceKey(instanceID, name), nil, noRole))
	}
}

// deleteAhead deletes the items that do not fit in the final transaction
// of an operation that holds its instance, 98 at a time, each batch
// conditional on the operation being in progress and holding the instance
// (e: the Finish's conditions on them). It returns the items left for the
// final transaction (at most room).
func (s *Store) deleteAhead(ctx context.Context, op broker.Operation, e broker.Expect, keys []map[string]types.AttributeValue, room int) ([]map[string]types.AttributeValue, error) {
	const batch = maxTransactItems - 2
	for len(keys) > room {
		n := min(batch, len(keys)-room)
		now := keys[len(keys)-n:]
		keys = keys[:len(keys)-n]
		err := s.run(ctx, func(add adder) {
			add(s.check(operationKey(op.InstanceID, op.ID), e.Operation, roleOperation))
			add(s.check(instanceKey(op.InstanceID), e.Instance, roleInstance))
			for _, k := range now {
				add(s.delete(k, nil, noRole))
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// PutResource writes a resource record unconditionally: one PutItem.
func (s *Store) PutResource(ctx context.Context, r broker.Resource) error {
	err := broker.CheckResource(r)
	if err == nil {
		var item map[string]types.AttributeValue
		if item, err = encode(newResourceItem(r)); err == nil {
			_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: s.table, Item: item})
		}
	}
	if err != nil {
		return fmt.Errorf("put resource %s/%s: %w", r.InstanceID, r.Name, err)
	}
	return nil
}

// DeleteResource deletes a resource record: one DeleteItem; deleting a
// missing one is not an error.
func (s *Store) DeleteResource(ctx context.Context, instanceID, name string) error {
	err := broker.CheckIDs(instanceID, name)
	if err == nil {
		_, err = s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: s.table, Key: resourceKey(instanceID, name)})
	}
	if err != nil {
		return fmt.Errorf("delete resource %s/%s: %w", instanceID, name, err)
	}
	return nil
}

// putItem is one conditional PutItem. A failed condition returns
// *broker.ConflictError with the stored item in the field of r.
func (s *Store) putItem(ctx context.Context, item map[string]types.AttributeValue, conds []broker.Condition, r role) error {
	cond, err := condition(conds)
	if err != nil {
		return err
	}
	failed, err := s.putItemIf(ctx, item, cond)
	if err != nil || failed == nil {
		return err
	}
	c := &broker.ConflictError{}
	if err := setConflict(c, r, failed.Item); err != nil {
		return err
	}
	return c
}

// putItemIf is one conditional PutItem. When the condition fails it returns
// DynamoDB's exception, whose Item is the stored item (empty when there is
// none), and a nil error; but when it fails on a retry of the SDK's and the
// stored item is item, the write is the call's own first attempt, whose
// answer was lost (retried.go), and it returns nil and nil.
func (s *Store) putItemIf(ctx context.Context, item map[string]types.AttributeValue, cond expression.ConditionBuilder) (*types.ConditionalCheckFailedException, error) {
	e, err := build(cond, nil)
	if err != nil {
		return nil, err
	}
	in := &dynamodb.PutItemInput{
		TableName: s.table, Item: item,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ReturnValuesOnConditionCheckFailure: allOld,
	}
	var attempts int
	err = retryConflicts(ctx, func() error {
		attempts = 0
		_, err := s.client.PutItem(ctx, in, countAttempts(&attempts))
		return err
	})
	var failed *types.ConditionalCheckFailedException
	switch {
	case !errors.As(err, &failed):
		return nil, err
	case attempts > 1 && sameItem(failed.Item, item):
		return nil, nil
	}
	return failed, nil
}

// adder adds a write to a transaction being built.
type adder func(write, error)

// run builds a transaction with build and runs it, or returns the first
// error met while building it.
func (s *Store) run(ctx context.Context, build func(add adder)) error {
	var writes []write
	var buildErr error
	build(func(w write, err error) {
		if err != nil && buildErr == nil {
			buildErr = err
		}
		writes = append(writes, w)
	})
	if buildErr != nil {
		return buildErr
	}
	return s.transact(ctx, writes)
}

func (s *Store) putInstance(inst broker.Instance, conds []broker.Condition, r role) (write, error) {
	item, err := encode(newInstanceItem(inst))
	if err != nil {
		return write{}, fmt.Errorf("encode instance: %w", err)
	}
	return s.put(item, conds, r)
}

func (s *Store) putBinding(b broker.Binding, conds []broker.Condition, r role) (write, error) {
	item, err := encode(newBindingItem(b))
	if err != nil {
		return write{}, fmt.Errorf("encode binding: %w", err)
	}
	return s.put(item, conds, r)
}

// putOperation writes an operation unconditionally: the new operation of a
// create or lock, or the operation it halts, both guarded by the condition
// on the item they concern.
func (s *Store) putOperation(op broker.Operation) (write, error) {
	return s.putOperationIf(op, nil)
}

func (s *Store) putOperationIf(op broker.Operation, conds []broker.Condition) (write, error) {
	item, err := encode(newOperationItem(op))
	if err != nil {
		return write{}, fmt.Errorf("encode operation: %w", err)
	}
	r := noRole
	if len(conds) > 0 {
		r = roleOperation
	}
	return s.put(item, conds, r)
}
