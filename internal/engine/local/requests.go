package local

import (
	"context"
	"sync"
	"time"
)

// Requests counts the requests a server has in flight, for the engine's
// Tasks to give way to (Options.Requests): a burst of asynchronous
// provisions starts an execution per 202, and their Tasks, run beside the
// burst, took the processors and the commits from the requests still
// waiting for their 202 (docs/performance.md). A Task waits until no
// request is in flight, or until it has waited Options.YieldAtMost, so that
// a steady stream of requests delays each Task by that much at most and
// starves none. The zero value is ready to use; it is safe for concurrent
// use.
type Requests struct {
	mu sync.Mutex
	n  int
	// quiet is closed when n falls to zero; made when it rises from zero.
	quiet chan struct{}
	// waiting counts the Tasks waiting (Waiting).
	waiting int
}

// Begin counts a request in flight; End, once, ends it.
func (q *Requests) Begin() {
	q.mu.Lock()
	if q.n == 0 {
		q.quiet = make(chan struct{})
	}
	q.n++
	q.mu.Unlock()
}

// End ends a request Begin counted.
func (q *Requests) End() {
	q.mu.Lock()
	q.n--
	if q.n == 0 {
		close(q.quiet)
	}
	q.mu.Unlock()
}

// Waiting is how many Tasks wait for the requests in flight to end.
func (q *Requests) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting
}

// wait returns once no request is in flight, or after at most d, or once
// ctx is done.
func (q *Requests) wait(ctx context.Context, d time.Duration) {
	if q == nil || d <= 0 {
		return
	}
	q.mu.Lock()
	if q.n == 0 {
		q.mu.Unlock()
		return
	}
	quiet := q.quiet
	q.waiting++
	q.mu.Unlock()
	t := time.NewTimer(d)
	select {
	case <-quiet:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	q.mu.Lock()
	q.waiting--
	q.mu.Unlock()
}
