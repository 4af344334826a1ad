package local

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Requests counts the requests a server has in flight, for the engine's
// Tasks to give way to (Options.Requests): a burst of asynchronous
// provisions starts an execution per 202, and their Tasks, run beside the
// burst, took the processors and the commits from the requests still
// waiting for their 202 (docs/performance.md). A Task waits until no
// request has been in flight for quietFor, or until it has waited
// Options.YieldAtMost, so that a steady stream of requests delays each Task
// by that much at most and starves none. The zero value is ready to use;
// it is safe for concurrent use.
type Requests struct {
	// n is the requests in flight: Begin and End take mu only when it
	// leaves or reaches zero, not for each of a burst's requests.
	n  atomic.Int64
	mu sync.Mutex
	// busy is open while the server is not quiet: since a request began,
	// until none has been in flight for quietFor. Then it is closed, and
	// nil.
	busy chan struct{}
	// idleSince is when n last fell to zero, and release the timer that
	// closes busy quietFor later.
	idleSince time.Time
	release   *time.Timer
	// waiting counts the Tasks waiting (Waiting).
	waiting int
}

// quietFor is how long no request must be in flight before Tasks run: a
// burst's requests arrive a few at a time (clients dialling, writing), and
// a moment between two of them is not its end.
const quietFor = 2 * time.Millisecond

// Begin counts a request in flight; End, once, ends it.
func (q *Requests) Begin() {
	if q.n.Add(1) != 1 {
		return
	}
	q.mu.Lock()
	if q.busy == nil {
		q.busy = make(chan struct{})
	}
	q.mu.Unlock()
}

// End ends a request Begin counted.
func (q *Requests) End() {
	if q.n.Add(-1) != 0 {
		return
	}
	q.mu.Lock()
	if q.n.Load() == 0 {
		q.idleSince = time.Now()
		if q.release == nil {
			q.release = time.AfterFunc(quietFor, q.quiet)
		} else {
			q.release.Reset(quietFor)
		}
	}
	q.mu.Unlock()
}

// quiet lets the Tasks go if no request has been in flight for quietFor.
func (q *Requests) quiet() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n.Load() == 0 && q.busy != nil && time.Since(q.idleSince) >= quietFor {
		close(q.busy)
		q.busy = nil
	}
}

// Waiting is how many Tasks wait for the requests in flight to end.
func (q *Requests) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting
}

// wait returns once the server is quiet, or after at most d, or once
// ctx is done.
func (q *Requests) wait(ctx context.Context, d time.Duration) {
	if q == nil || d <= 0 {
		return
	}
	q.mu.Lock()
	if q.busy == nil {
		q.mu.Unlock()
		return
	}
	busy := q.busy
	q.waiting++
	q.mu.Unlock()
	t := time.NewTimer(d)
	select {
	case <-busy:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	q.mu.Lock()
	q.waiting--
	q.mu.Unlock()
}
