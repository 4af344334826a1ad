package dynamo

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func cancelledBy(codes ...string) error {
	e := &types.TransactionCanceledException{}
	for _, c := range codes {
		e.CancellationReasons = append(e.CancellationReasons, types.CancellationReason{Code: aws.String(c)})
	}
	return fmt.Errorf("operation error DynamoDB: TransactWriteItems: %w", e)
}

func TestRetryConflicts(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		wantCalls int
	}{
		{"retries a transaction cancelled by a concurrent one until it gives up",
			cancelledBy("None", "TransactionConflict"), conflictAttempts},
		{"retries a transaction cancelled by throttling",
			cancelledBy("ThrottlingError", "None"), conflictAttempts},
		{"retries a single write that met a transaction", &types.TransactionConflictException{}, conflictAttempts},
		{"does not retry a failed condition, even beside a conflict",
			cancelledBy("ConditionalCheckFailed", "TransactionConflict"), 1},
		{"does not retry a validation error beside a conflict",
			cancelledBy("ValidationError", "TransactionConflict"), 1},
		{"does not retry a cancellation without reasons", cancelledBy(), 1},
		{"does not retry other errors", errors.New("boom"), 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := retryConflicts(t.Context(), func() error { calls++; return tc.err })
			if calls != tc.wantCalls || !errors.Is(err, tc.err) {
				t.Errorf("got %d calls and %v; want %d calls and the error", calls, err, tc.wantCalls)
			}
		})
	}
	t.Run("returns once the call succeeds", func(t *testing.T) {
		calls := 0
		err := retryConflicts(t.Context(), func() error {
			if calls++; calls < 3 {
				return cancelledBy("TransactionConflict")
			}
			return nil
		})
		if err != nil || calls != 3 {
			t.Errorf("got %d calls and %v; want 3 calls and success", calls, err)
		}
	})
	t.Run("stops waiting when the context ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		calls := 0
		err := retryConflicts(ctx, func() error { calls++; cancel(); return cancelledBy("TransactionConflict") })
		if calls != 1 || !errors.Is(err, context.Canceled) {
			t.Errorf("got %d calls and %v; want 1 call and context.Canceled", calls, err)
		}
	})
}
