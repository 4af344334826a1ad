package dynamo

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/serverless-osb/broker/internal/broker"
)

// Slots are the deployed broker.Slots: each Task runs in a Lambda instance
// of its own, so the bound is an item of the table per plan,
// PK=slots SK=plan#<plan_id>, whose holders map names each call holding a slot
// with the time its lease ends. A Task takes a slot with a read and one
// conditional write (at the version read), and gives it back with one
// write; one that finds every lease live writes nothing. A lease ends when
// the Task's invocation would (its context's deadline, else MaxLease), so
// the slot of a Task that crashed frees itself.
type Slots struct {
	client  *dynamodb.Client
	table   *string
	perPlan int
	// Now is the clock leases are read against; replaceable in tests.
	Now func() time.Time
	// Logger receives a failed release (its lease then ends by itself).
	Logger *slog.Logger
}

// MaxLease is a lease's length when the Task's context has no deadline:
// the workflows' Task timeout.
const MaxLease = 60 * time.Second

// slotsTries bounds the writes of one Take that lose to another's.
const slotsTries = 3

// The slots' items, outside every instance's partition ("i#..."), their
// sort keys apart from every other item's.
const pkSlots = "slots"

func slotsKey(planID string) map[string]types.AttributeValue { return key(pkSlots, "plan#"+planID) }

var _ broker.Slots = (*Slots)(nil)

// NewSlots returns perPlan (at least 1) slots per plan on table.
func NewSlots(client *dynamodb.Client, table string, perPlan int) *Slots {
	return &Slots{client: client, table: aws.String(table), perPlan: max(1, perPlan), Now: time.Now, Logger: slog.New(slog.DiscardHandler)}
}

type slotsItem struct {
	PK string `dynamodbav:"PK"`
	SK string `dynamodbav:"SK"`
	// Holders are the calls holding a slot, each with the end of its
	// lease (Unix seconds).
	Holders map[string]int64 `dynamodbav:"holders"`
	Version int64            `dynamodbav:"version"`
}

// Take implements broker.Slots.
func (s *Slots) Take(ctx context.Context, planID string) (func(), bool, error) {
	lease := MaxLease
	if deadline, ok := ctx.Deadline(); ok {
		lease = time.Until(deadline)
	}
	holder := rand.Text()
	for range slotsTries {
		out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: s.table, Key: slotsKey(planID), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, false, fmt.Errorf("read the slots of plan %s: %w", planID, err)
		}
		var it slotsItem
		if out.Item != nil {
			if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
				return nil, false, fmt.Errorf("read the slots of plan %s: %w", planID, err)
			}
		}
		now := s.Now()
		live := map[string]int64{}
		for h, end := range it.Holders {
			if end > now.Unix() {
				live[h] = end
			}
		}
		release := func() { s.release(context.WithoutCancel(ctx), planID, holder) }
		if _, ours := live[holder]; ours {
			// The write of the try before this one was carried out, but
			// the SDK lost its answer and tried again, whose condition
			// failed on it (retried.go): the slot is this call's.
			return release, true, nil
		}
		if len(live) >= s.perPlan {
			return nil, false, nil
		}
		next := slotsItem{PK: pkSlots, SK: "plan#" + planID, Holders: maps.Clone(live), Version: it.Version + 1}
		next.Holders[holder] = now.Add(lease).Unix() + 1
		item, err := encode(next, nil)
		if err != nil {
			return nil, false, err
		}
		cond := expression.AttributeNotExists(expression.Name(attrPK))
		if out.Item != nil {
			cond = expression.Name("version").Equal(expression.Value(it.Version))
		}
		e, err := build(cond, nil)
		if err != nil {
			return nil, false, err
		}
		_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: s.table, Item: item,
			ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()})
		var lost *types.ConditionalCheckFailedException
		switch {
		case errors.As(err, &lost):
			continue // another Task took or gave back one meanwhile
		case err != nil:
			return nil, false, fmt.Errorf("take a slot of plan %s: %w", planID, err)
		}
		return release, true, nil
	}
	return nil, false, nil
}

// release gives a slot back: its holder leaves the map, and the version
// moves, so that a Take that read the map before writes it again from a
// new read. A failure leaves the lease to end by itself.
func (s *Slots) release(ctx context.Context, planID, holder string) {
	update := expression.Remove(expression.Name("holders."+holder)).Add(expression.Name("version"), expression.Value(1))
	e, err := expression.NewBuilder().WithUpdate(update).
		WithCondition(expression.AttributeExists(expression.Name(attrPK))).Build()
	if err == nil {
		_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: s.table, Key: slotsKey(planID),
			UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()})
	}
	if err != nil {
		s.Logger.WarnContext(ctx, "a slot was not given back; its lease ends by itself", "plan_id", planID, "error", err.Error())
	}
}
