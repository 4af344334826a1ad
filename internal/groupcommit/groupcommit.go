// Package groupcommit lets the writers of one bbolt file share commits. A
// bbolt commit ends with an fsync, which costs milliseconds and admits one
// writer at a time; writers that arrive while a commit is on its way to
// disk wait, then go to disk together in the next one. Each writer still
// returns only after its own writes are durable, so nothing is weakened:
// the group is one transaction, applied in arrival order, as if each had
// committed alone in that order. A lone writer commits at once (unlike
// bbolt's DB.Batch, which waits for company).
//
// The committer also keeps the file written ahead of its last page
// (prepare): bbolt grows a file by truncating it, which leaves holes, and a
// commit whose new pages fall in a hole makes the filesystem allocate
// blocks in that commit's fsync, a journal commit that costs about as much
// again as the fsync itself.
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"
)

// Committer runs the read-write transactions of one DB.
type Committer struct {
	db      *bbolt.DB
	commits atomic.Uint64
	mu      sync.Mutex
	queue   []*call
	later   []*call
	// spare is the storage of the last group the leader committed, emptied:
	// the next queue, so that queueing a writer does not allocate.
	spare   []*call
	leading bool
	// soon, while writers of UpdateSoon wait without a commit under way,
	// commits them when no other writer has started one first.
	soon *time.Timer
	// prepared is where the region that prepare wrote past the file's last
	// page ends; only the leader, inside a transaction, reads or sets it.
	prepared int64
	// ahead is prepareAhead (0, for a benchmark's comparison: never).
	ahead int64
}

type call struct {
	fn   func(*bbolt.Tx) error
	err  error
	done chan error
	// within, for a call of UpdateSoon, is how long it may wait for a
	// commit to join; 0 for Update's.
	within time.Duration
	// after, for a call of Later, is told the outcome instead of done.
	after func(error)
}

// answer tells the call's writer the outcome.
func (cl *call) answer(err error) {
	if cl.after != nil {
		cl.after(err)
		return
	}
	cl.done <- err
}

// Later runs fn at the start of the next commit, whoever's it is, and then
// calls after with its outcome: fn never makes a commit of its own. It is
// for writes that may be lost in a crash because they can be made again
// (a cache of what durable writes imply), which then cost no fsync. Flush
// commits them now.
func (c *Committer) Later(fn func(*bbolt.Tx) error, after func(error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.later = append(c.later, &call{fn: fn, after: after})
}

// Flush commits the writes of Later now.
func (c *Committer) Flush() error {
	return c.Update(func(*bbolt.Tx) error { return nil })
}

// New returns the committer of db. Every writer of db goes through it, or
// through db.Update, which it serialises with.
func New(db *bbolt.DB) *Committer { return &Committer{db: db, ahead: prepareAhead} }

// Commits returns how many transactions the committer has committed.
func (c *Committer) Commits() uint64 { return c.commits.Load() }

// DB returns the committer's DB.
func (c *Committer) DB() *bbolt.DB { return c.db }

// rejected marks an error after which fn wrote nothing.
type rejected struct{ err error }

func (r rejected) Error() string { return r.err.Error() }
func (r rejected) Unwrap() error { return r.err }

func isRejected(err error) bool {
	var r rejected
	return errors.As(err, &r)
}

// Reject wraps err, returned by a transaction function that wrote nothing
// (a failed condition): Update returns err, and the other functions of the
// group commit as if fn had not run.
func Reject(err error) error { return rejected{err} }

// Update runs fn in a read-write transaction shared with the functions of
// other writers, and returns when the transaction is committed (or fn's
// error). fn may run more than once: when another function of the group
// fails with an error that is not Reject's, the group is rolled back and
// run again without it, and that one runs alone.
func (c *Committer) Update(fn func(*bbolt.Tx) error) error {
	cl := calls.Get().(*call)
	cl.fn = fn
	c.mu.Lock()
	c.queue = append(c.queue, cl)
	if c.leading {
		c.mu.Unlock()
	} else {
		c.leading = true
		if c.soon != nil {
			// The writers of UpdateSoon go with this commit.
			c.soon.Stop()
			c.soon = nil
		}
		c.mu.Unlock()
		c.lead()
	}
	return c.wait(cl)
}

// UpdateSoon is Update for a write that nobody waits on but its own
// goroutine, such as a workflow Task's: when no commit is under way it does
// not start one at once, but gives the writers of Update up to within to
// start one that it joins, and commits alone after that. A Task's write
// then shares the fsync of the next request's write instead of making that
// request wait for a commit of its own: the Task waits a little longer, the
// request does not. It returns, as Update does, once its writes are
// durable.
func (c *Committer) UpdateSoon(fn func(*bbolt.Tx) error, within time.Duration) error {
	// At least 1ns: a call's within of 0 marks Update's.
	within = max(within, 1)
	cl := calls.Get().(*call)
	cl.fn, cl.within = fn, within
	c.mu.Lock()
	c.queue = append(c.queue, cl)
	if !c.leading && c.soon == nil {
		c.soon = time.AfterFunc(within, c.leadSoon)
	}
	c.mu.Unlock()
	return c.wait(cl)
}

// waitsForCompany reports whether every queued writer is UpdateSoon's,
// and how long the first may wait; c.mu is held.
func (c *Committer) waitsForCompany() (time.Duration, bool) {
	var within time.Duration
	for _, cl := range c.queue {
		if cl.within == 0 {
			return 0, false
		}
		if within == 0 || cl.within < within {
			within = cl.within
		}
	}
	return within, len(c.queue) > 0
}

// leadSoon commits the writers of UpdateSoon that no writer of Update took
// along in time.
func (c *Committer) leadSoon() {
	c.mu.Lock()
	c.soon = nil
	if c.leading || len(c.queue) == 0 {
		// A commit under way takes them, or hands the lead on to them.
		c.mu.Unlock()
		return
	}
	c.leading = true
	c.mu.Unlock()
	c.lead()
}

// wait waits for a call's answer and gives the call back.
func (c *Committer) wait(cl *call) error {
	err := <-cl.done
	// Answered: the leader no longer reads it.
	cl.fn, cl.err, cl.within = nil, nil, 0
	calls.Put(cl)
	return c.unwrap(err)
}

// calls keeps Update's calls, each with its channel, for later writers:
// two allocations a writer fewer.
var calls = sync.Pool{New: func() any { return &call{done: make(chan error, 1)} }}

// lead commits the writers queued now, then hands the lead on: to a new
// goroutine when more are waiting, so that no writer waits for more than
// the commit under way and its own.
func (c *Committer) lead() {
	c.mu.Lock()
	group := c.queue
	if len(c.later) > 0 {
		group = append(c.later, c.queue...)
	}
	c.queue, c.later, c.spare = c.spare, nil, nil
	c.mu.Unlock()
	c.commit(group)
	clear(group) // the calls go back to the pool: hold none
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spare = group[:0]
	if len(c.queue) == 0 {
		c.leading = false
		return
	}
	if within, ok := c.waitsForCompany(); ok {
		// Only writes that may wait came during the commit: they wait
		// for the next, as they would have with none under way.
		c.leading = false
		if c.soon == nil {
			c.soon = time.AfterFunc(within, c.leadSoon)
		}
		return
	}
	go c.lead()
}

func (c *Committer) unwrap(err error) error {
	if err == nil {
		return nil
	}
	var r rejected // on the heap (errors.As): only for an error
	if errors.As(err, &r) {
		return r.err
	}
	return err
}

// commit runs a group in one transaction and answers each of its calls.
func (c *Committer) commit(group []*call) {
	for len(group) > 0 {
		failed := -1
		err := c.db.Update(func(tx *bbolt.Tx) error {
			if err := c.prepare(tx); err != nil {
				return err
			}
			for i, cl := range group {
				if cl.err = safely(cl.fn, tx); cl.err != nil && !isRejected(cl.err) {
					failed = i
					return cl.err
				}
			}
			return nil
		})
		if err == nil {
			c.commits.Add(1)
		}
		if failed >= 0 && len(group) > 1 {
			// Its writes, if any, went with the rollback: it runs alone, and
			// the others again without it.
			alone := group[failed]
			group = append(group[:failed:failed], group[failed+1:]...)
			err := c.db.Update(func(tx *bbolt.Tx) error { return safely(alone.fn, tx) })
			if err == nil {
				c.commits.Add(1)
			}
			alone.answer(err)
			continue
		}
		for _, cl := range group {
			if err != nil {
				cl.answer(err)
			} else {
				cl.answer(cl.err)
			}
		}
		return
	}
}

// prepareAhead is how far past the file's last page prepare keeps the file
// written: about 150 synchronous provisions of new items, written again
// when half of it is used. Writing it costs one commit an fsync of up to
// 256 KiB more, once for dozens of commits that each save a block
// allocation. (1 MiB did as well one writer at a time, worse with eight:
// a longer stall for the group that carries it.)
const prepareAhead = 256 << 10

// zeros is what prepare writes.
var zeros = make([]byte, 64<<10)

// prepare writes zeros past the file's last page (tx.Size()), so that the
// pages the next commits add are blocks the filesystem has already
// allocated: their fsyncs then write data, not the filesystem's journal
// too. It runs inside a read-write transaction, whose lock keeps every
// other writer out, and before the transaction allocates anything: no
// page past tx.Size() is in use, so the zeros overwrite nothing, and the
// transaction's own new pages are written over them. The zeros reach the
// disk with the transaction's fsync; a crash before that leaves them
// unused past the last page, as bbolt's own truncation leaves holes.
func (c *Committer) prepare(tx *bbolt.Tx) error {
	end := tx.Size()
	if c.ahead == 0 || end+c.ahead/2 <= c.prepared {
		return nil
	}
	from, to := max(c.prepared, end), end+c.ahead
	// bbolt does not share its file handle; this one writes the same file.
	f, err := os.OpenFile(c.db.Path(), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("write the file ahead of its pages: %w", err)
	}
	for off := from; off < to && err == nil; off += int64(len(zeros)) {
		_, err = f.WriteAt(zeros[:min(int64(len(zeros)), to-off)], off)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write the file ahead of its pages: %w", err)
	}
	c.prepared = to
	return nil
}

// PanicError is a transaction function's panic, returned to its writer
// rather than raised in whichever goroutine leads the group.
type PanicError struct{ Value any }

func (p PanicError) Error() string { return fmt.Sprintf("panic in a transaction: %v", p.Value) }

func safely(fn func(*bbolt.Tx) error, tx *bbolt.Tx) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = PanicError{Value: v}
		}
	}()
	return fn(tx)
}

type soonKey struct{}

// Soon marks ctx as a Task's: its writes may wait for company (UpdateSoon).
func Soon(ctx context.Context) context.Context { return context.WithValue(ctx, soonKey{}, true) }

// IsSoon reports whether ctx is marked by Soon.
func IsSoon(ctx context.Context) bool { soon, _ := ctx.Value(soonKey{}).(bool); return soon }
