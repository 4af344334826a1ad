package dynamo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/serverless-osb/broker/internal/broker"
)

// item is one item as DynamoDB returns it.
type item = map[string]types.AttributeValue

// The key ranges of an instance's records (SK r#<name>) that Load reads.
// The bindings' records (r#binding-<id>) sort before every other record
// (broker.CheckRecordName), so the instance's own are one range, above
// them.

func ownRecords(sk expression.KeyBuilder) expression.KeyConditionBuilder {
	return sk.Between(expression.Value(skResource(broker.BindingRecordsTo)), expression.Value(skRecordsEnd))
}

func bindingsRecords(sk expression.KeyBuilder) expression.KeyConditionBuilder {
	return expression.KeyBeginsWith(sk, skResource(broker.BindingRecordsFrom))
}

func allRecords(sk expression.KeyBuilder) expression.KeyConditionBuilder {
	return expression.KeyBeginsWith(sk, skResource(""))
}

// bindings are the keys of an instance's bindings.
func bindings(sk expression.KeyBuilder) expression.KeyConditionBuilder {
	return expression.KeyBeginsWith(sk, skBinding(""))
}

// skRecordsEnd is above the SK of every record, whatever its name ('$'
// follows '#'), and no item has it.
const skRecordsEnd = "r$"

// Load reads the instance, the operation and the binding asked for (or the
// operation's binding) and the binding's record by key, in one
// BatchGetItem, and, at the same time, the instance's own records: one
// consistent Query of the key range above its bindings' records. Its
// items read do not grow with the instance's bindings or operations.
// Without the binding's id, the operation's binding and its record are a
// second BatchGetItem once the operation is read. A deprovision's snapshot
// is whole.
func (s *Store) Load(ctx context.Context, instanceID, operationID, bindingID string) (broker.Snapshot, error) {
	return s.load(ctx, instanceID, operationID, bindingID, false)
}

// LoadWhole reads the instance and the operation asked for by key, and,
// at the same time, the ids of its bindings (a Query of their keys) and
// every record (a Query of the records' range).
func (s *Store) LoadWhole(ctx context.Context, instanceID, operationID string) (broker.Snapshot, error) {
	return s.load(ctx, instanceID, operationID, "", true)
}

func (s *Store) load(ctx context.Context, instanceID, operationID, bindingID string, whole bool) (broker.Snapshot, error) {
	snap, err := s.loadItems(ctx, instanceID, operationID, bindingID, whole)
	if err != nil {
		return broker.Snapshot{}, fmt.Errorf("load %s: %w", instanceID, err)
	}
	return snap, nil
}

func (s *Store) loadItems(ctx context.Context, instanceID, operationID, bindingID string, whole bool) (broker.Snapshot, error) {
	var snap broker.Snapshot
	if err := broker.CheckLoad(instanceID, operationID, bindingID); err != nil {
		return snap, err
	}
	var own, bindingKeys, all *pendingQuery
	// Every query is waited for, whatever fails first, once cancelled.
	defer func() {
		for _, q := range []*pendingQuery{own, bindingKeys, all} {
			q.wait()
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if whole {
		all = s.queryAsync(ctx, instanceID, allRecords, false)
		bindingKeys = s.queryAsync(ctx, instanceID, bindings, true)
	} else {
		own = s.queryAsync(ctx, instanceID, ownRecords, false)
	}

	keys := []item{instanceKey(instanceID)}
	if operationID != "" {
		keys = append(keys, operationKey(instanceID, operationID))
	}
	if bindingID != "" {
		keys = append(keys, bindingKey(instanceID, bindingID), resourceKey(instanceID, broker.BindingRecord(bindingID)))
	}
	got, err := s.getItems(ctx, keys)
	if err != nil {
		return snap, err
	}
	if snap.Instance, err = decode(got[skInstance], instanceItem.instance); err != nil {
		return snap, err
	}
	if operationID != "" {
		if snap.Operation, err = decode(got[skOperation(operationID)], operationItem.operation); err != nil {
			return snap, err
		}
	}
	if bindingID == "" && snap.Operation != nil && snap.Operation.BindingID != "" {
		bindingID = snap.Operation.BindingID
		if err := broker.CheckIDs(bindingID); err != nil {
			return snap, err
		}
		if got, err = s.getItems(ctx, []item{bindingKey(instanceID, bindingID), resourceKey(instanceID, broker.BindingRecord(bindingID))}); err != nil {
			return snap, err
		}
	}
	if bindingID != "" {
		if snap.Binding, err = decode(got[skBinding(bindingID)], bindingItem.binding); err != nil {
			return snap, err
		}
	}
	var mid []item
	switch {
	case !whole && broker.Whole(snap.Operation):
		// A deprovision's: the bindings' ids and records besides.
		whole = true
		bindingKeys = s.queryAsync(ctx, instanceID, bindings, true)
		if mid, err = s.queryAsync(ctx, instanceID, bindingsRecords, false).wait(); err != nil {
			return snap, err
		}
	case bindingID != "" && !whole:
		if it, ok := got[skResource(broker.BindingRecord(bindingID))]; ok {
			mid = []item{it}
		}
	}
	if whole {
		ids, err := bindingKeys.wait()
		if err != nil {
			return snap, err
		}
		for _, it := range ids {
			snap.BindingIDs = append(snap.BindingIDs, strings.TrimPrefix(keyPart(it, attrSK), skBinding("")))
		}
	}
	// The records in name order: the bindings' (the one binding's, or
	// every binding's in a whole snapshot), then the instance's own.
	records, err := all.wait()
	if err != nil {
		return snap, err
	}
	upper, err := own.wait()
	if err != nil {
		return snap, err
	}
	records = append(append(records, mid...), upper...)
	for _, it := range records {
		r, err := decode(it, resourceItem.resource)
		if err != nil {
			return snap, err
		}
		snap.Records = append(snap.Records, *r)
	}
	return snap, nil
}

// pendingQuery is a consistent Query on its way; a nil one has no items.
type pendingQuery struct {
	done  chan struct{}
	items []item
	err   error
}

// queryAsync starts a consistent Query of the SK range that cond selects
// in an instance's partition, every page; keysOnly reads only the keys'
// attributes back (the items read, and paid for, are the same).
func (s *Store) queryAsync(ctx context.Context, instanceID string, cond func(expression.KeyBuilder) expression.KeyConditionBuilder, keysOnly bool) *pendingQuery {
	q := &pendingQuery{done: make(chan struct{})}
	go func() {
		defer close(q.done)
		b := expression.NewBuilder().WithKeyCondition(
			expression.Key(attrPK).Equal(expression.Value(pk(instanceID))).And(cond(expression.Key(attrSK))))
		if keysOnly {
			b = b.WithProjection(expression.NamesList(expression.Name(attrPK), expression.Name(attrSK)))
		}
		e, err := b.Build()
		if err != nil {
			q.err = fmt.Errorf("build expression: %w", err)
			return
		}
		pages := dynamodb.NewQueryPaginator(s.client, &dynamodb.QueryInput{
			TableName: s.table, ConsistentRead: aws.Bool(true),
			KeyConditionExpression: e.KeyCondition(), ProjectionExpression: e.Projection(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				q.err = err
				return
			}
			q.items = append(q.items, page.Items...)
		}
	}()
	return q
}

// wait returns the query's items once it is done.
func (q *pendingQuery) wait() ([]item, error) {
	if q == nil {
		return nil, nil
	}
	<-q.done
	return q.items, q.err
}

// getItems reads the items at keys of the table, consistently, and
// returns those that exist by SK (every key of one Load has the same PK):
// one GetItem for one key, else one BatchGetItem, whose consistent read of
// a key costs one read unit where a TransactGetItems' costs two. The batch
// reads each item consistently but not all at one point in time, which
// Load never needed: its records' Queries were never read with the keys,
// and every write that follows a Load is conditional on the versions and
// states it read (the instance's version, which every binding operation
// moves, the binding's, the operation's state), so a write made from
// items read at different moments fails its condition rather than
// overwrite a change it did not see. At most 100 keys.
func (s *Store) getItems(ctx context.Context, keys []item) (map[string]item, error) {
	out := make(map[string]item, len(keys))
	if len(keys) == 1 {
		got, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: s.table, Key: keys[0], ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, err
		}
		if len(got.Item) > 0 {
			out[keyPart(got.Item, attrSK)] = got.Item
		}
		return out, nil
	}
	err := s.batchGet(ctx, types.KeysAndAttributes{Keys: keys, ConsistentRead: aws.Bool(true)}, func(it item) {
		out[keyPart(it, attrSK)] = it
	})
	return out, err
}

// batchGet reads keys (with their projection) in BatchGetItems, handing
// each item read to got. DynamoDB may leave keys unprocessed (throttling,
// a response over 16 MB): they are asked again, after a pause that grows.
func (s *Store) batchGet(ctx context.Context, keys types.KeysAndAttributes, got func(item)) error {
	table := aws.ToString(s.table)
	in := &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{table: keys}}
	for attempt := 0; ; attempt++ {
		out, err := s.client.BatchGetItem(ctx, in)
		if err != nil {
			return err
		}
		for _, it := range out.Responses[table] {
			got(it)
		}
		left, ok := out.UnprocessedKeys[table]
		if !ok || len(left.Keys) == 0 {
			return nil
		}
		if err := pauseUnprocessed(ctx, attempt); err != nil {
			return err
		}
		in.RequestItems = map[string]types.KeysAndAttributes{table: left}
	}
}

// pauseUnprocessed waits before asking again for the keys a BatchGetItem
// left unprocessed, as retryConflicts waits between transactions, and
// gives up as it does.
func pauseUnprocessed(ctx context.Context, attempt int) error {
	if attempt+1 == conflictAttempts {
		return fmt.Errorf("keys left unprocessed after %d attempts", attempt+1)
	}
	limit := min(conflictBackoff<<(attempt+1), conflictMaxSleep)
	timer := time.NewTimer(limit/2 + rand.N(limit/2))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
