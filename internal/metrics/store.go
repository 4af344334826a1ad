package metrics

import (
	"context"

	"github.com/serverless-osb/broker/internal/broker"
)

// Store counts operations and cleanups as the broker records them: an
// operation has started when the write that creates or locks its instance
// or binding succeeded, and has ended when FinishOperation succeeded (or a
// deprovision or unbind halted it in its lock's transaction); a cleanup has
// given up when a detached record is stored failed. Counting at the store,
// where each of these is one conditional write, counts each once however
// often a request or step is retried: a retried write fails its condition.
// Every other method passes through (the embedded Store).
type Store struct {
	broker.Store
	Metrics *Recorder
}

var _ broker.Store = (*Store)(nil)

// NewStore returns s counting into r; with a nil r it returns s.
func NewStore(s broker.Store, r *Recorder) broker.Store {
	if r == nil {
		return s
	}
	return &Store{Store: s, Metrics: r}
}

// CreateInstance starts a provision, or records one settled in memory.
func (s *Store) CreateInstance(ctx context.Context, inst broker.Instance, op broker.Operation, settled *broker.Settled) error {
	err := s.Store.CreateInstance(ctx, inst, op, settled)
	if err == nil {
		s.started(op)
	}
	return err
}

// started counts an operation started, and ended when it was settled in
// memory (created finished).
func (s *Store) started(op broker.Operation) {
	s.Metrics.OperationStarted(op)
	if op.Finished() {
		s.Metrics.OperationFinished(op)
	}
}

// LockInstance starts an update or deprovision, and may end the provision
// it halts.
func (s *Store) LockInstance(ctx context.Context, l broker.LockInstance) error {
	err := s.Store.LockInstance(ctx, l)
	if err == nil {
		if l.Halted != nil {
			s.Metrics.OperationFinished(*l.Halted)
		}
		s.Metrics.OperationStarted(l.Op)
	}
	return err
}

// CreateBinding starts a bind, or records one settled in memory.
func (s *Store) CreateBinding(ctx context.Context, b broker.Binding, op broker.Operation, settled *broker.Settled) error {
	err := s.Store.CreateBinding(ctx, b, op, settled)
	if err == nil {
		s.started(op)
	}
	return err
}

// LockBinding starts an unbind, and may end the bind it halts.
func (s *Store) LockBinding(ctx context.Context, l broker.LockBinding) error {
	err := s.Store.LockBinding(ctx, l)
	if err == nil {
		if l.Halted != nil {
			s.Metrics.OperationFinished(*l.Halted)
		}
		s.Metrics.OperationStarted(l.Op)
	}
	return err
}

// FinishOperation ends an operation.
func (s *Store) FinishOperation(ctx context.Context, f broker.Finish) error {
	err := s.Store.FinishOperation(ctx, f)
	if err == nil {
		s.Metrics.OperationFinished(f.Op)
	}
	return err
}

// UpdateDetached records a cleanup that gave up when it stores d failed
// (a step that stores the same failure again after a lost answer counts
// twice: rare, and an alarm threshold of one does not tell).
func (s *Store) UpdateDetached(ctx context.Context, d broker.Detached, attempts int) error {
	err := s.Store.UpdateDetached(ctx, d, attempts)
	if err == nil && d.State == broker.DetachedFailed {
		s.Metrics.CleanupFailed(d)
	}
	return err
}
