package steps

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// transientAttempts bounds the tries of one step in RunToEnd.
const transientAttempts = 4

// RunToEnd runs op's steps within the caller's request, the way the
// operation workflow would: begin, check until done, finish; a permanent
// failure is recorded and returned as *broker.Failure.
func (s *Steps) RunToEnd(ctx context.Context, op broker.Operation) (broker.Operation, error) {
	p, err := s.retry(ctx, func() (Progress, error) { return s.Begin(ctx, op.InstanceID, op.ID) })
	for err == nil && !p.Done {
		if err = sleep(ctx, time.Duration(p.RetryAfter)*time.Second); err == nil {
			p, err = s.retry(ctx, func() (Progress, error) { return s.Check(ctx, op.InstanceID, op.ID) })
		}
	}
	if err == nil {
		_, err = s.retry(ctx, func() (Progress, error) { return Progress{}, s.Finish(ctx, op.InstanceID, op.ID) })
	}
	if err != nil {
		var perm *PermanentError
		description := failureDescription("", "")
		if errors.As(err, &perm) {
			description = perm.Description
		}
		// The request's context may be what failed; record on a fresh one.
		rctx := context.WithoutCancel(ctx)
		if rerr := s.RecordFailure(rctx, op.InstanceID, op.ID, description); rerr != nil {
			// This error is logged: a permanent failure is named, not
			// quoted, since its description may repeat request input.
			cause := err
			if perm != nil {
				cause = errors.New("a permanent failure")
			}
			return op, fmt.Errorf("%s %s: %w (and recording the failure: %w)", op.Kind, op.ID, cause, rerr)
		}
		if perm != nil {
			err = &broker.Failure{Description: perm.Description}
		}
		final, _ := s.Store.GetOperation(rctx, op.InstanceID, op.ID)
		return final, err
	}
	return s.Store.GetOperation(ctx, op.InstanceID, op.ID)
}

// retry runs a step again after transient failures, with backoff.
func (s *Steps) retry(ctx context.Context, step func() (Progress, error)) (Progress, error) {
	wait := s.Backoff
	for attempt := 1; ; attempt++ {
		p, err := step()
		var transient *TransientError
		if !errors.As(err, &transient) || attempt == transientAttempts {
			return p, err
		}
		if err := sleep(ctx, wait); err != nil {
			return p, err
		}
		wait *= 2
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
