package dynamo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/serverless-osb/broker/internal/broker"
)

// role says which field of a *broker.ConflictError a write's item fills
// when the write's transaction fails its condition.
type role int

const (
	noRole role = iota
	roleInstance
	roleBinding
	roleOperation
)

// write is one item of a TransactWriteItems call.
type write struct {
	item types.TransactWriteItem
	role role
	// key is the item's key, to read it after a failed condition.
	key map[string]types.AttributeValue
}

// maxTransactItems is DynamoDB's limit of items in one transaction.
const maxTransactItems = 100

// expr builds the condition of conds (see condition), and an update when
// set.
func expr(conds []broker.Condition, update *expression.UpdateBuilder) (expression.Expression, error) {
	cond, err := condition(conds)
	if err != nil {
		return expression.Expression{}, err
	}
	return build(cond, update)
}

// build builds cond, and an update when set.
func build(cond expression.ConditionBuilder, update *expression.UpdateBuilder) (expression.Expression, error) {
	if !cond.IsSet() && update == nil {
		return expression.Expression{}, nil
	}
	b := expression.NewBuilder()
	if cond.IsSet() {
		b = b.WithCondition(cond)
	}
	if update != nil {
		b = b.WithUpdate(*update)
	}
	e, err := b.Build()
	if err != nil {
		return expression.Expression{}, fmt.Errorf("build expression: %w", err)
	}
	return e, nil
}

// allOld asks for the item as stored when a condition fails.
const allOld = types.ReturnValuesOnConditionCheckFailureAllOld

func (s *Store) put(item map[string]types.AttributeValue, conds []broker.Condition, r role) (write, error) {
	e, err := expr(conds, nil)
	if err != nil {
		return write{}, err
	}
	p := &types.Put{TableName: s.table, Item: item}
	if len(conds) > 0 {
		p.ConditionExpression, p.ExpressionAttributeNames, p.ExpressionAttributeValues = e.Condition(), e.Names(), e.Values()
		p.ReturnValuesOnConditionCheckFailure = allOld
	}
	return write{item: types.TransactWriteItem{Put: p}, role: r, key: key(keyPart(item, attrPK), keyPart(item, attrSK))}, nil
}

func (s *Store) delete(k map[string]types.AttributeValue, conds []broker.Condition, r role) (write, error) {
	e, err := expr(conds, nil)
	if err != nil {
		return write{}, err
	}
	d := &types.Delete{TableName: s.table, Key: k}
	if len(conds) > 0 {
		d.ConditionExpression, d.ExpressionAttributeNames, d.ExpressionAttributeValues = e.Condition(), e.Names(), e.Values()
		d.ReturnValuesOnConditionCheckFailure = allOld
	}
	return write{item: types.TransactWriteItem{Delete: d}, role: r, key: k}, nil
}

// update always has a condition: an update of a missing item creates it.
func (s *Store) update(k map[string]types.AttributeValue, u expression.UpdateBuilder, conds []broker.Condition, r role) (write, error) {
	if len(conds) == 0 {
		return write{}, errors.New("an update needs a condition")
	}
	e, err := expr(conds, &u)
	if err != nil {
		return write{}, err
	}
	return write{item: types.TransactWriteItem{Update: &types.Update{
		TableName: s.table, Key: k, UpdateExpression: e.Update(),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ReturnValuesOnConditionCheckFailure: allOld,
	}}, role: r, key: k}, nil
}

func (s *Store) check(k map[string]types.AttributeValue, conds []broker.Condition, r role) (write, error) {
	e, err := expr(conds, nil)
	if err != nil {
		return write{}, err
	}
	return write{item: types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: s.table, Key: k,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ReturnValuesOnConditionCheckFailure: allOld,
	}}, role: r, key: k}, nil
}

// transact runs writes as ONE TransactWriteItems. When a condition fails it
// returns *broker.ConflictError with every item that has a role: from the
// cancellation reasons where DynamoDB returned it, else from one consistent
// TransactGetItems after the failed write. A cancellation caused only by
// concurrent transactions or throttling is retried (see retryConflicts).
func (s *Store) transact(ctx context.Context, writes []write) error {
	err := s.transactWrite(ctx, writes)
	var cancelled *types.TransactionCanceledException
	if !errors.As(err, &cancelled) || !conditionFailed(cancelled.CancellationReasons) {
		return err
	}
	c := &broker.ConflictError{}
	var unread []write
	for i, w := range writes {
		if w.role == noRole {
			continue
		}
		if i < len(cancelled.CancellationReasons) && isConditionFailure(cancelled.CancellationReasons[i]) {
			if err := setConflict(c, w.role, cancelled.CancellationReasons[i].Item); err != nil {
				return err
			}
			continue
		}
		unread = append(unread, w)
	}
	if err := s.readConflict(ctx, c, unread); err != nil {
		return fmt.Errorf("read the items of a failed condition: %w", err)
	}
	return c
}

// transactWrite runs writes as ONE TransactWriteItems, retried while only
// concurrent transactions or throttling cancel it, and returns its error as
// DynamoDB gave it.
func (s *Store) transactWrite(ctx context.Context, writes []write) error {
	if len(writes) > maxTransactItems {
		return fmt.Errorf("transaction of %d items: DynamoDB allows %d", len(writes), maxTransactItems)
	}
	in := &dynamodb.TransactWriteItemsInput{TransactItems: make([]types.TransactWriteItem, len(writes))}
	for i, w := range writes {
		in.TransactItems[i] = w.item
	}
	return retryConflicts(ctx, func() error {
		// The SDK fills in an idempotency token, which keeps its own
		// retries of one attempt safe; a new attempt needs a new token.
		in.ClientRequestToken = nil
		_, err := s.client.TransactWriteItems(ctx, in)
		return err
	})
}

// readConflict fills c with the stored items of writes (one role each) in
// one consistent TransactGetItems. It reads after a write that failed and
// changes nothing.
func (s *Store) readConflict(ctx context.Context, c *broker.ConflictError, writes []write) error {
	if len(writes) == 0 {
		return nil
	}
	in := &dynamodb.TransactGetItemsInput{TransactItems: make([]types.TransactGetItem, len(writes))}
	for i, w := range writes {
		in.TransactItems[i] = types.TransactGetItem{Get: &types.Get{TableName: s.table, Key: w.key}}
	}
	var out *dynamodb.TransactGetItemsOutput
	err := retryConflicts(ctx, func() (err error) {
		out, err = s.client.TransactGetItems(ctx, in)
		return err
	})
	if err != nil {
		return err
	}
	if len(out.Responses) != len(writes) {
		return fmt.Errorf("TransactGetItems returned %d items for %d keys", len(out.Responses), len(writes))
	}
	for i, w := range writes {
		if err := setConflict(c, w.role, out.Responses[i].Item); err != nil {
			return err
		}
	}
	return nil
}

func setConflict(c *broker.ConflictError, r role, item map[string]types.AttributeValue) (err error) {
	switch r {
	case roleInstance:
		c.Instance, err = decode(item, instanceItem.instance)
	case roleBinding:
		c.Binding, err = decode(item, bindingItem.binding)
	case roleOperation:
		c.Operation, err = decode(item, operationItem.operation)
	}
	return err
}

const reasonConditionFailed = "ConditionalCheckFailed"

// retryReasons are the cancellation reasons that decide nothing: concurrent
// transactions on an item, and throttling (which an on-demand table meets
// too), which the SDK does not retry inside a cancelled transaction.
var retryReasons = map[string]bool{
	"TransactionConflict":           true,
	"ThrottlingError":               true,
	"ProvisionedThroughputExceeded": true,
}

func isConditionFailure(r types.CancellationReason) bool {
	return aws.ToString(r.Code) == reasonConditionFailed
}

func conditionFailed(reasons []types.CancellationReason) bool {
	for _, r := range reasons {
		if isConditionFailure(r) {
			return true
		}
	}
	return false
}

// isTransactionConflict reports whether err says only that concurrent
// transactions collided (or were throttled): nothing was decided, and trying
// again is safe.
func isTransactionConflict(err error) bool {
	var single *types.TransactionConflictException
	if errors.As(err, &single) {
		return true
	}
	var cancelled *types.TransactionCanceledException
	if !errors.As(err, &cancelled) {
		return false
	}
	retry := false
	for _, r := range cancelled.CancellationReasons {
		switch code := aws.ToString(r.Code); {
		case code == "" || code == "None":
		case retryReasons[code]:
			retry = true
		default:
			return false // a failed condition, a validation error...
		}
	}
	return retry
}

// Retries of transaction conflicts: the SDK does not retry them (they are
// not transient network or throttling errors), yet the right answer to one
// is to try again shortly, at a jittered time so colliding writers spread.
const (
	conflictAttempts = 6
	conflictBackoff  = 10 * time.Millisecond
	conflictMaxSleep = 500 * time.Millisecond
)

func retryConflicts(ctx context.Context, call func() error) error {
	for attempt := 1; ; attempt++ {
		err := call()
		if err == nil || !isTransactionConflict(err) {
			return err
		}
		if attempt == conflictAttempts {
			return fmt.Errorf("gave up after %d attempts cancelled by concurrent transactions or throttling: %w", attempt, err)
		}
		limit := min(conflictBackoff<<attempt, conflictMaxSleep)
		timer := time.NewTimer(limit/2 + rand.N(limit/2))
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("%w (while retrying after: %w)", ctx.Err(), err)
		case <-timer.C:
		}
	}
}
