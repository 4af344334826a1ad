package bolt_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// The broker's store keeps its items in the file's root bucket, and splits
// its pages before what a transaction inserted (third_party/bbolt,
// PATCH.md: Tx.Root and Bucket.SplitBeforeLastInsert). These tests hold the
// two to what they are for: fewer pages in each commit, and bbolt's
// handling of the file unchanged otherwise.

// pagesOf runs commit, one commit of db's, and returns the pages it wrote
// (TxStats.Write: each page and the meta page) and the splits it made.
func pagesOf(t *testing.T, db *bbolt.DB, commit func() error) (pages, splits int64) {
	t.Helper()
	before := db.Stats().TxStats
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	after := db.Stats().TxStats
	return after.GetWrite() - before.GetWrite(), after.GetSplit() - before.GetSplit()
}

// commitPages is pagesOf an update that runs fn.
func commitPages(t *testing.T, db *bbolt.DB, fn func(tx *bbolt.Tx) error) (pages, splits int64) {
	t.Helper()
	return pagesOf(t, db, func() error { return db.Update(fn) })
}

// wroteASecondLeaf runs commit, one commit of db's, and reports whether it
// wrote more pages than the meta page, the root bucket's path from its
// root to one leaf (as deep as the tree after the commit: a split may add
// a level) and a page for each split: a second leaf. And how many splits
// it made.
func wroteASecondLeaf(t *testing.T, db *bbolt.DB, commit func() error) (bool, int64) {
	t.Helper()
	pages, splits := pagesOf(t, db, commit)
	var depth int
	err := db.View(func(tx *bbolt.Tx) error {
		// Stats' depth adds the deepest top-level bucket's levels.
		var buckets int
		err := tx.ForEach(func(_ []byte, b *bbolt.Bucket) error {
			buckets = max(buckets, b.Stats().Depth)
			return nil
		})
		depth = tx.Root().Stats().Depth - buckets
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages > int64(1+depth)+splits, splits
}

// TestValuesInTheRootBucket puts values in the root bucket beside a
// bucket, and finds them after the file opens again: bbolt's check finds
// the file whole, Tx.ForEach lists the bucket and passes over the values,
// a value and a bucket cannot take each other's key, and Compact copies
// both. A commit that changes a value of the root bucket writes its leaf
// and the meta page; one that changes a value of a top-level bucket
// writes the root bucket's page too.
func TestValuesInTheRootBucket(t *testing.T) {
	dir, path, db := newBoltFile(t)
	value := bytes.Repeat([]byte{'v'}, 100)
	pages, _ := commitPages(t, db, func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte("bucket"))
		if err != nil {
			return err
		}
		// Enough that the bucket has a page of its own (a small one is
		// inline, a value of the root bucket).
		for i := range 20 {
			if err := b.Put(fmt.Appendf(nil, "in-bucket-%02d", i), value); err != nil {
				return err
			}
		}
		if err := tx.Root().Put([]byte("a\x00root"), value); err != nil {
			return err
		}
		return tx.Root().Put([]byte("z\x00empty"), nil)
	})
	t.Logf("the first commit wrote %d pages", pages)
	inRoot, _ := commitPages(t, db, func(tx *bbolt.Tx) error { return tx.Root().Put([]byte("a\x00root"), value[1:]) })
	inBucket, _ := commitPages(t, db, func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("bucket")).Put([]byte("in-bucket-00"), value[1:])
	})
	if inRoot != 2 || inBucket != 3 {
		t.Errorf("a value changed in the root bucket: %d pages written, want 2 (its leaf, the meta page); "+
			"in a top-level bucket: %d, want 3 (its leaf, the root bucket's, the meta page)", inRoot, inBucket)
	}
	err := db.Update(func(tx *bbolt.Tx) error {
		if err := tx.Root().Put([]byte("bucket"), value); !errors.Is(err, bolterrors.ErrIncompatibleValue) {
			t.Errorf("a value put at a bucket's name: %v, want %v", err, bolterrors.ErrIncompatibleValue)
		}
		if _, err := tx.CreateBucket([]byte("a\x00root")); !errors.Is(err, bolterrors.ErrIncompatibleValue) {
			t.Errorf("a bucket made at a value's key: %v, want %v", err, bolterrors.ErrIncompatibleValue)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	want := map[string]string{"a\x00root": string(value[1:]), "z\x00empty": "", "bucket/in-bucket-00": string(value[1:])}
	for i := 1; i < 20; i++ {
		want[fmt.Sprintf("bucket/in-bucket-%02d", i)] = string(value)
	}
	check := func(t *testing.T, path string) {
		t.Helper()
		db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if got := dumpDB(t, db); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("the file holds %q, want %q", got, want)
		}
		var names []string
		err = db.View(func(tx *bbolt.Tx) error {
			return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
				if b == nil {
					t.Errorf("Tx.ForEach passed %q without its bucket", name)
				}
				names = append(names, string(name))
				return nil
			})
		})
		if err != nil || fmt.Sprint(names) != "[bucket]" {
			t.Errorf("Tx.ForEach listed %q, %v; want the bucket alone", names, err)
		}
	}
	check(t, path)

	src, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	copied := filepath.Join(dir, "compacted")
	dst, err := bbolt.Open(copied, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(bbolt.Compact(dst, src, 0), dst.Close()); err != nil {
		t.Fatal(err)
	}
	check(t, copied)
}

// appendBeforeTail makes n commits, each of which inserts a value of 600
// bytes, in ascending order, before three keys that stay at the end ("t",
// "u" and "w", 340 bytes each) and rewrites "t": what a bind does to its
// instance's partition (keys.go: its items go to the end of the
// operations, before the instance's item, which it rewrites, and the
// instance's records). It returns how many of the commits wrote a second
// leaf (wroteASecondLeaf: the new value's and "t"'s) and how many splits
// they made. (With FillPercent 0.9, the page fills to 5 values
// and the tail, which is more than a page, and the 5 values and "t" fit
// under FillPercent's mark: bbolt splits before the last 3 keys, and the
// page after holds the tail alone.)
func appendBeforeTail(t *testing.T, db *bbolt.DB, splitBeforeLastInsert bool, n int) (extra, splits int64) {
	t.Helper()
	value, tail := bytes.Repeat([]byte{'v'}, 600), bytes.Repeat([]byte{'t'}, 340)
	for i := range n {
		second, split := wroteASecondLeaf(t, db, func() error {
			return db.Update(func(tx *bbolt.Tx) error {
				root := tx.Root()
				root.FillPercent, root.SplitBeforeLastInsert = 0.9, splitBeforeLastInsert
				if err := root.Put(fmt.Appendf(nil, "k%06d", i), value); err != nil {
					return err
				}
				if i == 0 {
					for _, k := range []string{"u", "w"} {
						if err := root.Put([]byte(k), tail); err != nil {
							return err
						}
					}
				}
				return root.Put([]byte("t"), tail)
			})
		})
		if second {
			extra++
		}
		splits += split
	}
	return extra, splits
}

// TestASplitKeepsTheInsertsWithTheKeysAfterThem appends values before
// keys of which every commit rewrites one, 300 commits: with
// SplitBeforeLastInsert, a page that splits keeps the newest value with
// the keys after it, and no commit writes a leaf more than the one they
// share (and the splits). Split where FillPercent says, the page after
// begins at "t", and the commits after it write two leaves: the check that
// they do shows the test can fail.
func TestASplitKeepsTheInsertsWithTheKeysAfterThem(t *testing.T) {
	for _, on := range []bool{true, false} {
		_, _, db := newBoltFile(t)
		extra, splits := appendBeforeTail(t, db, on, 300)
		t.Logf("SplitBeforeLastInsert %v: %d of 300 commits wrote a leaf more, %d splits", on, extra, splits)
		switch {
		case on && extra > 0:
			t.Errorf("with SplitBeforeLastInsert, %d of 300 commits wrote a second leaf, want none", extra)
		case !on && extra < 100:
			t.Errorf("without SplitBeforeLastInsert, %d of 300 commits wrote a second leaf: the test no longer tells the two apart", extra)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestASplitBeforeLastInsertFillsItsPagesAsFull makes 3,000 commits, each
// of which inserts a value (40 to 600 bytes) at the end of one of 40
// partitions picked at random and rewrites the partition's head key after
// it, with SplitBeforeLastInsert and without: the pages it leaves are as
// full (it moves a split by the keys between the last insert and the key
// rewritten, at most), and its commits write fewer pages.
func TestASplitBeforeLastInsertFillsItsPagesAsFull(t *testing.T) {
	fill, pages := map[bool]float64{}, map[bool]int64{}
	for _, on := range []bool{true, false} {
		_, _, db := newBoltFile(t)
		r := rand.New(rand.NewPCG(48, 1))
		head := bytes.Repeat([]byte{'h'}, 300)
		for i := range 3000 {
			p := r.IntN(40)
			n, _ := commitPages(t, db, func(tx *bbolt.Tx) error {
				root := tx.Root()
				root.FillPercent, root.SplitBeforeLastInsert = 0.9, on
				if err := root.Put(fmt.Appendf(nil, "p%02d-%06d", p, i), bytes.Repeat([]byte{'v'}, 40+r.IntN(560))); err != nil {
					return err
				}
				return root.Put(fmt.Appendf(nil, "p%02d~", p), head)
			})
			pages[on] += n
		}
		err := db.View(func(tx *bbolt.Tx) error {
			st := tx.Root().Stats()
			fill[on] = float64(st.LeafInuse) / float64(st.LeafAlloc)
			t.Logf("SplitBeforeLastInsert %v: %.2f pages a commit, %d leaves, %.1f%% full", on, float64(pages[on])/3000, st.LeafPageN, 100*fill[on])
			for err := range tx.Check() {
				t.Errorf("check: %v", err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if fill[true] < fill[false]-0.02 || pages[true] >= pages[false] {
		t.Errorf("with SplitBeforeLastInsert the leaves are %.1f%% full and the commits wrote %d pages, without it %.1f%% and %d: "+
			"want as full (within 2 points) and fewer pages", 100*fill[true], pages[true], 100*fill[false], pages[false])
	}
}
