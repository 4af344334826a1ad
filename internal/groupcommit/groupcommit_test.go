package groupcommit

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/serverless-osb/broker/internal/waittest"
)

func open(t testing.TB) *Committer {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucket([]byte("b")); return err }); err != nil {
		t.Fatal(err)
	}
	return New(db)
}

func put(key string) func(*bbolt.Tx) error {
	return func(tx *bbolt.Tx) error { return tx.Bucket([]byte("b")).Put([]byte(key), []byte("v")) }
}

func stored(t *testing.T, c *Committer, key string) bool {
	t.Helper()
	var ok bool
	if err := c.DB().View(func(tx *bbolt.Tx) error { ok = tx.Bucket([]byte("b")).Get([]byte(key)) != nil; return nil }); err != nil {
		t.Fatal(err)
	}
	return ok
}

func queued(c *Committer) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// group blocks a first writer inside its transaction until the writers of
// fns are all queued, then lets them commit, and returns their errors and
// the id of the transaction each ran in last.
func group(t *testing.T, c *Committer, fns ...func(*bbolt.Tx) error) ([]error, []int) {
	t.Helper()
	release := hold(t, c)
	errs, txs := make([]error, len(fns)), make([]int, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Update(func(tx *bbolt.Tx) error { txs[i] = tx.ID(); return fn(tx) })
		}()
	}
	waittest.Until(t, func() error {
		if n := queued(c); n != len(fns) {
			return fmt.Errorf("%d of %d writers queued", n, len(fns))
		}
		return nil
	})
	release()
	wg.Wait()
	return errs, txs
}

// hold starts a first writer that waits inside its transaction, a commit
// under way, until release lets it commit; release returns once it has.
func hold(t *testing.T, c *Committer) (release func()) {
	t.Helper()
	inside, let := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- c.Update(func(tx *bbolt.Tx) error {
			close(inside)
			<-let
			return put("first")(tx)
		})
	}()
	waittest.Recv(t, inside, "the first writer in its transaction")
	return func() {
		t.Helper()
		close(let)
		if err := waittest.Recv(t, first, "the first writer's commit"); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWritersThatWaitShareOneCommit(t *testing.T) {
	c := open(t)
	var fns []func(*bbolt.Tx) error
	for i := range 20 {
		fns = append(fns, put(fmt.Sprint("k", i)))
	}
	before := c.Commits()
	errs, txs := group(t, c, fns...)
	if n := c.Commits() - before; n != 2 {
		t.Errorf("%d commits for a first writer and 20 that waited, want 2", n)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
		if txs[i] != txs[0] {
			t.Errorf("writer %d committed in transaction %d, writer 0 in %d: want one commit", i, txs[i], txs[0])
		}
		if !stored(t, c, fmt.Sprint("k", i)) {
			t.Errorf("k%d is not stored", i)
		}
	}
}

func TestARejectedWriterLeavesTheOthersInTheGroup(t *testing.T) {
	c := open(t)
	refused := errors.New("condition failed")
	errs, txs := group(t, c, put("a"), func(*bbolt.Tx) error { return Reject(refused) }, put("c"))
	if errs[0] != nil || errs[2] != nil || errs[1] != refused {
		t.Fatalf("errors %v, want nil, the bare refusal, nil", errs)
	}
	if txs[0] != txs[2] {
		t.Errorf("the writers around a rejected one committed apart: %v", txs)
	}
	if !stored(t, c, "a") || !stored(t, c, "c") {
		t.Error("a writer of the group is not stored")
	}
}

func TestAFailingWriterIsRolledBackAloneAndThePanicOfAnotherIsAnError(t *testing.T) {
	c := open(t)
	broken := errors.New("disk says no")
	errs, _ := group(t, c,
		put("a"),
		func(tx *bbolt.Tx) error {
			if err := put("half")(tx); err != nil {
				return err
			}
			return broken
		},
		func(*bbolt.Tx) error { panic("bug") },
		put("d"))
	var p PanicError
	if errs[0] != nil || errs[1] != broken || !errors.As(errs[2], &p) || errs[3] != nil {
		t.Fatalf("errors %v, want nil, the failure, a PanicError, nil", errs)
	}
	if !stored(t, c, "a") || !stored(t, c, "d") {
		t.Error("a writer of the group is not stored")
	}
	if stored(t, c, "half") {
		t.Error("the failing writer's write was committed")
	}
}

func TestALoneWriterCommitsAtOnce(t *testing.T) {
	c := open(t)
	if err := c.Update(put("k")); err != nil {
		t.Fatal(err)
	}
	if !stored(t, c, "k") {
		t.Fatal("not stored")
	}
}

func TestLaterWritesRideTheNextCommitAndMakeNone(t *testing.T) {
	c := open(t)
	outcome := make(chan error, 1)
	var laterTx int
	c.Later(func(tx *bbolt.Tx) error { laterTx = tx.ID(); return put("later")(tx) }, func(err error) { outcome <- err })
	if stored(t, c, "later") {
		t.Fatal("a Later write committed by itself")
	}
	var tx int
	if err := c.Update(func(t *bbolt.Tx) error { tx = t.ID(); return put("now")(t) }); err != nil {
		t.Fatal(err)
	}
	if err := waittest.Recv(t, outcome, "the Later write's outcome"); err != nil {
		t.Fatal(err)
	}
	if !stored(t, c, "later") || laterTx != tx {
		t.Errorf("the Later write is stored: %v, in transaction %d; the next commit was %d", stored(t, c, "later"), laterTx, tx)
	}
	c.Later(put("flushed"), func(err error) { outcome <- err })
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := waittest.Recv(t, outcome, "the flushed write's outcome"); err != nil || !stored(t, c, "flushed") {
		t.Errorf("Flush: %v, stored %v", err, stored(t, c, "flushed"))
	}
}

// TestASoonWriteJoinsTheNextCommit: a write of UpdateSoon, with no commit
// under way, waits for a writer of Update to start one, and goes to disk in
// it: one commit for both.
func TestASoonWriteJoinsTheNextCommit(t *testing.T) {
	c := open(t)
	before := c.Commits()
	var soonTx int
	soon := make(chan error, 1)
	go func() {
		// Longer than any test: it commits with the next Update, or never.
		soon <- c.UpdateSoon(func(tx *bbolt.Tx) error { soonTx = tx.ID(); return put("soon")(tx) }, time.Hour)
	}()
	waittest.Until(t, func() error {
		if queued(c) != 1 {
			return errors.New("the soon write is not queued")
		}
		return nil
	})
	if stored(t, c, "soon") {
		t.Fatal("the soon write committed by itself at once")
	}
	var tx int
	if err := c.Update(func(t *bbolt.Tx) error { tx = t.ID(); return put("now")(t) }); err != nil {
		t.Fatal(err)
	}
	if err := waittest.Recv(t, soon, "the soon write's outcome"); err != nil {
		t.Fatal(err)
	}
	if n := c.Commits() - before; n != 1 || soonTx != tx || !stored(t, c, "soon") {
		t.Errorf("%d commits, the soon write in transaction %d, the next Update's %d, stored %v: want one commit for both",
			n, soonTx, tx, stored(t, c, "soon"))
	}
}

// TestALoneSoonWriteCommitsByItself: with no other writer, a write of
// UpdateSoon commits once its wait is over.
func TestALoneSoonWriteCommitsByItself(t *testing.T) {
	c := open(t)
	before := c.Commits()
	if err := c.UpdateSoon(put("k"), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if !stored(t, c, "k") || c.Commits()-before != 1 {
		t.Errorf("stored %v, %d commits; want stored, one", stored(t, c, "k"), c.Commits()-before)
	}
}

func TestSoonMarksAContext(t *testing.T) {
	if IsSoon(t.Context()) || !IsSoon(Soon(t.Context())) {
		t.Error("IsSoon does not read what Soon marks")
	}
}

// TestASoonWriteQueuedDuringACommitWaitsForTheNext: a write of UpdateSoon
// that comes while a commit is under way does not get a commit of its own
// after it, but joins the next writer's of Update.
func TestASoonWriteQueuedDuringACommitWaitsForTheNext(t *testing.T) {
	c := open(t)
	before := c.Commits()
	release := hold(t, c)
	soon := make(chan error, 1)
	go func() { soon <- c.UpdateSoon(put("soon"), time.Hour) }()
	waittest.Until(t, func() error {
		if queued(c) != 1 {
			return errors.New("the soon write is not queued")
		}
		return nil
	})
	release()
	waittest.Until(t, func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.leading {
			return errors.New("a commit is under way")
		}
		return nil
	})
	if stored(t, c, "soon") {
		t.Fatal("the soon write had a commit of its own")
	}
	if err := c.Update(put("now")); err != nil {
		t.Fatal(err)
	}
	if err := waittest.Recv(t, soon, "the soon write's outcome"); err != nil {
		t.Fatal(err)
	}
	if n := c.Commits() - before; n != 2 || !stored(t, c, "soon") {
		t.Errorf("%d commits, soon stored %v: want 2 (the first, then the next with the soon write)", n, stored(t, c, "soon"))
	}
}
