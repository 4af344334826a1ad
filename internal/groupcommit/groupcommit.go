// Package groupcommit lets the writers of one bbolt file share commits. A
// bbolt commit ends with an fsync, which costs milliseconds and admits one
// writer at a time; writers that arrive while a commit is on its way to
// disk wait, then go to disk together in the next one. Each writer still
// returns only after its own writes are durable, so nothing is weakened:
// the group is one transaction, applied in arrival order, as if each had
// committed alone in that order. A lone writer commits at once (unlike
// bbolt's DB.Batch, which waits for company).
package groupcommit

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.etcd.io/bbolt"
)

// Committer runs the read-write transactions of one DB.
type Committer struct {
	db      *bbolt.DB
	commits atomic.Uint64
	mu      sync.Mutex
	queue   []*call
	later   []*call
	leading bool
}

type call struct {
	fn   func(*bbolt.Tx) error
	err  error
	done chan error
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
func New(db *bbolt.DB) *Committer { return &Committer{db: db} }

// Commits returns how many transactions the committer has committed.
func (c *Committer) Commits() uint64 { return c.commits.Load() }

// DB returns the committer's DB.
func (c *Committer) DB() *bbolt.DB { return c.db }

// rejected marks an error after which fn wrote nothing.
type rejected struct{ err error }

func (r rejected) Error() string { return r.err.Error() }
func (r rejected) Unwrap() error { return r.err }

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
	cl := &call{fn: fn, done: make(chan error, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, cl)
	if c.leading {
		c.mu.Unlock()
		return c.unwrap(<-cl.done)
	}
	c.leading = true
	c.mu.Unlock()
	c.lead()
	return c.unwrap(<-cl.done)
}

// lead commits the writers queued now, then hands the lead on: to a new
// goroutine when more are waiting, so that no writer waits for more than
// the commit under way and its own.
func (c *Committer) lead() {
	c.mu.Lock()
	group := append(c.later, c.queue...)
	c.queue, c.later = nil, nil
	c.mu.Unlock()
	c.commit(group)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		c.leading = false
		return
	}
	go c.lead()
}

func (c *Committer) unwrap(err error) error {
	var r rejected
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
			for i, cl := range group {
				cl.err = safely(cl.fn, tx)
				var r rejected
				if cl.err != nil && !errors.As(cl.err, &r) {
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
