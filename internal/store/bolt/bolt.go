// Package bolt is the embedded Store: instances, bindings, operations,
// driver resources and detached resources in one bbolt file, so that `make run` needs no cloud
// account. It keeps the same items as the DynamoDB table (see DESIGN.md)
// in the file's root bucket (layout.go: layout 7), beside the top-level
// buckets (the local engine's, the layout's), value the item's JSON or
// binary form (itembin.go: an instance's items, which every request
// writes). An item's key holds a NUL or starts with 'i' and a tag byte
// below 0x20 (keys.go); a bucket's name is a word: the two never meet.
// An instance's items are
// keyed by keys.go, in a partition of their own and in an order that keeps
// one change's items together, in short keys; the other items by PK + "\x00"
// + SK, as the table keys them. A key beside each operation in progress
// serves ListInProgress. Each kind of
// item has a storage type of this package (item.go), whose json tags name
// its fields in the file; the domain's json tags play no part.
//
// Every method that changes state runs in ONE bbolt Update transaction that
// checks all of its conditions before it writes anything; bbolt runs one
// Update at a time, so a condition cannot change between check and write.
// The conditions are the broker's (broker.Expect, from the write request);
// this package only translates them, in one function (meets, in
// conditions.go), against the items it read and decoded.
package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/groupcommit"
)

// Bucket names. The local workflow engine keeps its own bucket
// ("executions") in a shared file; this package never touches it. Layouts
// 1 to 6 kept the items in a bucket "items", and layout 1 also had a
// bucket "operations_in_progress" (layout.go).
const itemsBucket = "items"

// lockTimeout bounds how long Open waits for the file lock that another
// process holds: a second broker on the same data dir fails fast.
const lockTimeout = time.Second

// ErrLocked is returned by Open when another process has the file open.
var ErrLocked = errors.New("store file is locked by another process")

// Store is the bbolt Store.
type Store struct {
	db *bbolt.DB
	// commit shares commits among concurrent writers (see groupcommit).
	commit *groupcommit.Committer
	// owned is set when Open created db: Close closes it then, and only then.
	owned bool
	// plans is the table's ByPlan index, in memory (plans.go).
	plans planIndex
	// progress is the set of operations in progress (progress.go).
	progress progressIndex
	// bindings is each binding's slot (bindings.go).
	bindings bindingIndex
}

var _ broker.Store = (*Store)(nil)

// Options are how the broker opens its bolt file, here and where the
// local broker shares it with its workflow engine (internal/app): no
// freelist written with every commit (one page less per commit, and more
// as the file grows), which bbolt rebuilds when it opens the file; commits
// that sync once, after their pages and their meta page, which lists the
// pages' sums for Open to check (third_party/bbolt, pagesums.go: one
// device flush a commit where bbolt as released makes two, as durable and
// as atomic); and a wait of lockTimeout for another process's lock.
func Options() *bbolt.Options {
	return &bbolt.Options{Timeout: lockTimeout, NoFreelistSync: true, SingleSyncCommit: true,
		FreelistType: bbolt.FreelistMapType}
}

// Open opens the bolt file at path, creating it and its directory when
// missing. It fails after about a second with ErrLocked when another process
// holds the file. Close releases it.
func Open(path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	db, err := bbolt.Open(path, 0o600, Options())
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open store %s: %w (waited %s; is another broker running on this data dir?)",
			path, ErrLocked, lockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s, err := New(db)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

// New returns a Store on a DB that its caller opened and closes. It moves
// a file of an earlier layout to this one (layout.go).
func New(db *bbolt.DB) (*Store, error) { return NewShared(groupcommit.New(db)) }

// NewShared returns a Store whose writes go through c, shared with the other
// writers of c's DB (the local workflow engine), so that they share commits.
func NewShared(c *groupcommit.Committer) (*Store, error) {
	db := c.DB()
	err := db.Update(migrate)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", db.Path(), err)
	}
	s := &Store{db: db, commit: c}
	if err := db.View(func(t *bbolt.Tx) error { return s.fillIndexes(t.Root()) }); err != nil {
		return nil, fmt.Errorf("open store %s: index the plans and the operations in progress: %w", db.Path(), err)
	}
	return s, nil
}

// fillIndexes fills the plan index, the bindings' slots and the index of
// the operations in progress from items, in one pass over the instances'
// partitions: each one's instance item, its operations' and bindings' keys
// and its in-progress keys, then a seek past the rest.
func (s *Store) fillIndexes(items *bbolt.Bucket) error {
	s.plans.mu.Lock()
	defer s.plans.mu.Unlock()
	s.progress.mu.Lock()
	defer s.progress.mu.Unlock()
	s.plans.reset()
	s.progress.ops = map[progressOp]struct{}{}
	s.bindings.mu.Lock()
	defer s.bindings.mu.Unlock()
	s.bindings.of = map[string]*idTable[bindingSlot]{}
	c := items.Cursor()
	return eachPartition(c, partitionsStart, func(id string) (bool, error) {
		if err := s.plans.addLocked(items, id); err != nil {
			return false, err
		}
		if err := s.bindings.fillLocked(c, id); err != nil {
			return false, err
		}
		return true, s.progress.addLocked(c, id)
	})
}

// Close closes the file when Open opened it; a DB passed to New is left to
// its owner.
func (s *Store) Close() error {
	if !s.owned {
		return nil
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store %s: %w", s.db.Path(), err)
	}
	return nil
}

// DB returns the underlying DB, to share the file with the local engine.
func (s *Store) DB() *bbolt.DB { return s.db }

// Keys outside the instances' partitions (keys.go): PK + "\x00" + SK, as
// the DynamoDB items are keyed. The NUL separator keeps one partition's
// prefix from matching another's; ids therefore must not contain NUL.
const sep = "\x00"

// pkDetached is the partition of the detached resources, outside every
// instance's.
const pkDetached = "detached" + sep

func detachedKey(id string) []byte { return []byte(pkDetached + id) }

// tx is one transaction's view of the store's buckets, and, in an update,
// of the plan index: the instances' moves between plans it makes, which
// the index takes once the transaction is committed.
type tx struct {
	items *bbolt.Bucket
	// cur serves the transaction's reads by key (get): bbolt's Get makes
	// a cursor, and grows its stack, for each.
	cur   *bbolt.Cursor
	plans *planIndex
	moves *[]planMove
	// progress and progressMoves are as plans and moves, for the
	// operations in progress (progress.go).
	progress      *progressIndex
	progressMoves *[]progressMove
	// bindings is the bindings' slots (bindings.go); drops, in an update,
	// the slots it left empty, which the index lets go once it is
	// committed.
	bindings *bindingIndex
	drops    *[]bindingDrop
}

func (s *Store) view(ctx context.Context, fn func(tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(func(t *bbolt.Tx) error {
		b := buckets(t)
		b.bindings = &s.bindings
		return fn(b)
	})
}

// taskCommitWait is how long a Task's write waits for a request's commit
// to join, when none is under way (groupcommit.UpdateSoon): about the time
// between two requests of one client, well under what a platform waits
// between two polls of last_operation.
const taskCommitWait = time.Millisecond

// update runs fn in one read-write transaction, which concurrent writers
// share (see groupcommit); an error from fn rolls back everything fn wrote.
// Every fn checks its conditions before it writes anything, so a failed
// condition (a *broker.ConflictError, or broker.ErrNotFound) leaves the
// others of its group to commit.
func (s *Store) update(ctx context.Context, fn func(tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var moves []planMove
	var progress []progressMove
	var drops []bindingDrop
	run := s.commit.Update
	if groupcommit.IsSoon(ctx) {
		run = func(fn func(*bbolt.Tx) error) error { return s.commit.UpdateSoon(fn, taskCommitWait) }
	}
	err := run(func(t *bbolt.Tx) error {
		// fn may run again (groupcommit): only its last run's moves count.
		moves, progress, drops = moves[:0], progress[:0], drops[:0]
		b := buckets(t)
		b.plans, b.moves = &s.plans, &moves
		b.progress, b.progressMoves = &s.progress, &progress
		b.bindings, b.drops = &s.bindings, &drops
		err := fn(b)
		var c *broker.ConflictError
		if errors.As(err, &c) || errors.Is(err, broker.ErrNotFound) {
			return groupcommit.Reject(err)
		}
		return err
	})
	if err == nil && len(moves) > 0 {
		s.plans.apply(moves)
	}
	if err == nil && len(progress) > 0 {
		s.progress.apply(progress)
	}
	if err == nil && len(drops) > 0 {
		s.bindings.apply(drops)
	}
	return err
}

// itemsFillPercent is how full bbolt leaves a page it splits where
// SplitBeforeLastInsert (below) does not decide (its
// default, 0.5, leaves it half full). An instance's new operations all go
// to the end of its operations (UUIDv7 ids), and a new binding's items
// come two at once (the binding and its record): with pages split half
// full, nearly every bind and provision split a page, one more page
// written. At 0.9 a bind on an instance with hundreds of bindings writes
// 7.2 pages, not 8.0 (7.9, not 9.0, with random binding ids), a
// synchronous provision 5.0, not 5.6 (TestPageWritesPerRequest).
const itemsFillPercent = 0.9

// buckets is t's view of the items: the file's root bucket (layout 7),
// whose values no other bucket's page holds, so that a commit writes no
// page above the items' own (a value in a top-level bucket made every
// commit write the root bucket's page too). A page of it that would split
// between a transaction's last insert and a key after it that the
// transaction rewrote splits before that insert (SplitBeforeLastInsert,
// third_party/bbolt/PATCH.md): a bind's items go to the end of its
// instance's operations, before the instance's own item, which the bind
// writes too; split where FillPercent says, the page after could begin at
// the instance's item, and every bind after it would write two leaves, the
// new items' and the instance's.
func buckets(t *bbolt.Tx) tx {
	items := t.Root()
	items.FillPercent = itemsFillPercent
	items.SplitBeforeLastInsert = true
	return tx{items: items, cur: items.Cursor()}
}

func (t tx) instance(id string) (*broker.Instance, error) {
	return get(t, instanceKey(id), instanceItem.instance)
}

func (t tx) binding(instanceID, id string) (*broker.Binding, error) {
	slot, ok := t.bindingSlot(instanceID, id)
	if !ok {
		return nil, nil
	}
	return get(t, bindingKey(instanceID, slot, id), bindingItem.binding)
}

func (t tx) operation(instanceID, id string) (*broker.Operation, error) {
	return get(t, operationKey(instanceID, id), operationItem.operation)
}

// putInstance writes an instance, and its move to its plan when the plan
// index has it under another or not at all.
func (t tx) putInstance(i broker.Instance) error {
	if err := put(t.items, instanceKey(i.ID), newInstanceItem(i)); err != nil {
		return err
	}
	t.move(i.ID, i.PlanID)
	return nil
}

// progressMove records that the operation is now in progress or not.
func (t tx) progressMove(op progressOp, inProgress bool) {
	if t.progressMoves != nil {
		*t.progressMoves = append(*t.progressMoves, progressMove{op, inProgress})
	}
}

// move records that the instance is now of plan ("" once deleted), when
// the plan index does not say so already.
func (t tx) move(instanceID, plan string) {
	if t.moves != nil && !t.plans.has(instanceID, plan) {
		*t.moves = append(*t.moves, planMove{instanceID, plan})
	}
}

func (t tx) putBinding(b broker.Binding) error {
	return put(t.items, bindingKey(b.InstanceID, t.takeSlot(b.InstanceID, b.ID), b.ID), newBindingItem(b))
}

// putOperation writes an operation and its in-progress key while it is in
// progress (layout.go).
func (t tx) putOperation(op broker.Operation) error {
	if err := put(t.items, operationKey(op.InstanceID, op.ID), newOperationItem(op)); err != nil {
		return err
	}
	key := inProgressKey(op.InstanceID, op.ID)
	if op.Finished() {
		// Most finished operations never had the key (a synchronous
		// provision's or bind's): bbolt's Delete makes a cursor and
		// grows its stack even to find none; the transaction's cursor
		// looks first.
		if !t.has(key) {
			return nil
		}
		t.progressMove(progressOp{op.InstanceID, op.ID}, false)
		return t.items.Delete(key)
	}
	t.progressMove(progressOp{op.InstanceID, op.ID}, true)
	return t.items.Put(key, nil)
}

func (t tx) putResource(r broker.Resource) error {
	key, _ := t.resourceKey(r.InstanceID, r.Name, true)
	return put(t.items, key, newResourceItem(r))
}

func (t tx) detached(id string) (*broker.Detached, error) {
	return get(t, detachedKey(id), detachedItem.detached)
}

func (t tx) putDetached(d broker.Detached) error {
	return put(t.items, detachedKey(d.ID), newDetachedItem(d))
}

// value is the value at key, nil when there is none.
func (t tx) value(key []byte) []byte {
	k, v := t.cur.Seek(key)
	if !bytes.Equal(k, key) {
		return nil
	}
	return v
}

// has reports whether there is a key (its value may be empty, as an
// in-progress key's is).
func (t tx) has(key []byte) bool {
	k, _ := t.cur.Seek(key)
	return bytes.Equal(k, key)
}

// scan decodes every item whose key starts with prefix, in key order.
func scan[I, D any](b *bbolt.Bucket, p []byte, domain func(I) D) ([]D, error) {
	out := []D{}
	c := b.Cursor()
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		d, err := decode(k, v, domain)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// deleteInstance deletes an instance and its bindings. Its operations stay
// (last_operation reads them after a deprovision) and so do its resources,
// which belong to drivers, its bindings' records among its bindings.
func (t tx) deleteInstance(id string) error {
	for _, b := range t.bindings.list(id) {
		if err := t.deleteBinding(id, b.id); err != nil {
			return err
		}
	}
	t.move(id, "")
	return t.items.Delete(instanceKey(id))
}
