package dynamo

import (
	"bytes"
	"context"
	"maps"
	"math/big"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// A conditional write that the SDK tried again can fail on its own first
// attempt: DynamoDB carried that attempt out, but its answer was lost (a
// 500, a connection reset on the way back), and the retry's condition then
// meets the item the first attempt wrote. DynamoDB's idempotency token
// covers TransactWriteItems; a single-item write has none, so the store
// tells the two apart itself: a write that took more than one attempt, and
// whose condition failed on an item equal to the one it writes (the
// caller's timestamps included; a re-sealed secret's new value), is taken
// as done: putItemIf, replaceSecret.

// countAttempts is a call's option that counts into n the SDK's attempts
// of the call (its first and each retry).
func countAttempts(n *int) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			// At the end of Finalize: after the retry loop's start, so once
			// per attempt.
			return s.Finalize.Add(middleware.FinalizeMiddlewareFunc("CountAttempts",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					*n++
					return next.HandleFinalize(ctx, in)
				}), middleware.After)
		})
	}
}

// sameItem reports whether two items hold the same attributes and values,
// as DynamoDB compares them: numbers by value, sets in any order.
func sameItem(a, b map[string]types.AttributeValue) bool {
	return maps.EqualFunc(a, b, sameValue)
}

// sameValue is false when either is missing (nil).
func sameValue(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		return ok && sameNumber(a.Value, b.Value)
	case *types.AttributeValueMemberB:
		b, ok := b.(*types.AttributeValueMemberB)
		return ok && bytes.Equal(a.Value, b.Value)
	case *types.AttributeValueMemberBOOL:
		b, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberNULL:
		b, ok := b.(*types.AttributeValueMemberNULL)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberM:
		b, ok := b.(*types.AttributeValueMemberM)
		return ok && sameItem(a.Value, b.Value)
	case *types.AttributeValueMemberL:
		b, ok := b.(*types.AttributeValueMemberL)
		return ok && slices.EqualFunc(a.Value, b.Value, sameValue)
	case *types.AttributeValueMemberSS:
		b, ok := b.(*types.AttributeValueMemberSS)
		return ok && sameSet(a.Value, b.Value, func(x, y string) bool { return x == y })
	case *types.AttributeValueMemberNS:
		b, ok := b.(*types.AttributeValueMemberNS)
		return ok && sameSet(a.Value, b.Value, sameNumber)
	case *types.AttributeValueMemberBS:
		b, ok := b.(*types.AttributeValueMemberBS)
		return ok && sameSet(a.Value, b.Value, bytes.Equal)
	}
	return false
}

// sameNumber compares two DynamoDB numbers by value ("1" and "1.0").
func sameNumber(a, b string) bool {
	if a == b {
		return true
	}
	x, okx := new(big.Float).SetString(a)
	y, oky := new(big.Float).SetString(b)
	return okx && oky && x.Cmp(y) == 0
}

// sameSet compares two sets (no duplicates within either) in any order.
func sameSet[T any](a, b []T, eq func(T, T) bool) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.ContainsFunc(b, func(y T) bool { return eq(x, y) }) {
			return false
		}
	}
	return true
}
