package mototest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go/middleware"
)

// LostAnswers is a fake network, for what moto cannot do: the first answer
// to each of the calls it is told to lose (Lose) is lost after moto has
// carried the call out (an answer of success: an error goes through), as a connection reset on the way back loses it.
// The SDK then tries the call again, as it does on a busy machine (and as
// it does against AWS after a 500 or a reset, where the call may or may
// not have been carried out). Register it as an APIOptions entry.
type LostAnswers struct {
	mu    sync.Mutex
	lose  map[string]int // operation → how many of its calls are still to lose an answer
	every map[string]bool
	lost  []string
}

// Lose makes the next call of operation op (an SDK operation name,
// "PutItem") lose its first answer; named twice, the next two calls.
func (l *LostAnswers) Lose(op ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lose == nil {
		l.lose = map[string]int{}
	}
	for _, o := range op {
		l.lose[o]++
	}
}

// LoseEvery makes every call of the operations op lose its first answer.
func (l *LostAnswers) LoseEvery(op ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.every == nil {
		l.every = map[string]bool{}
	}
	for _, o := range op {
		l.every[o] = true
	}
}

// Lost returns the operations whose answers were lost, in order.
func (l *LostAnswers) Lost() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lost...)
}

// callLoses marks a call that is to lose its first answer.
type callLoses struct{}

// Register adds the fake network to a client's middleware stack.
func (l *LostAnswers) Register(s *middleware.Stack) error {
	// Once a call (before the SDK's attempts): whether it loses an answer.
	err := s.Initialize.Add(middleware.InitializeMiddlewareFunc("LoseAnAnswerOfThisCall",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			op := middleware.GetOperationName(ctx)
			l.mu.Lock()
			if l.every[op] || l.lose[op] > 0 {
				if !l.every[op] {
					l.lose[op]--
				}
				ctx = context.WithValue(ctx, callLoses{}, new(bool))
			}
			l.mu.Unlock()
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
	if err != nil {
		return err
	}
	// Each attempt: the first answer of a marked call is lost.
	return s.Deserialize.Add(middleware.DeserializeMiddlewareFunc("LoseTheFirstAnswer",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			lost, _ := ctx.Value(callLoses{}).(*bool)
			if err != nil || lost == nil || *lost {
				return out, md, err
			}
			*lost = true
			l.mu.Lock()
			l.lost = append(l.lost, middleware.GetOperationName(ctx))
			l.mu.Unlock()
			return out, md, errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer")
		}), middleware.Before)
}

// RetryAtOnce is the SDK's standard retryer without its backoff, for a
// client whose lost answers are LostAnswers': each retry is the fake
// network's, not a busy server's, and waiting up to a second before each
// would make a test of hundreds of calls minutes long.
func RetryAtOnce() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
	})
}
