package groupcommit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.etcd.io/bbolt"
)

// seekHole is lseek's SEEK_HOLE on Linux: the offset of the first hole at
// or after the one given (the file's size when there is none).
const seekHole = 4

// firstHole is where the file at path has its first hole at or after off.
func firstHole(t *testing.T, path string, off int64) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hole, err := f.Seek(off, seekHole)
	if err != nil {
		t.Fatal(err)
	}
	return hole
}

func size(t *testing.T, db *bbolt.DB) int64 {
	t.Helper()
	var n int64
	if err := db.View(func(tx *bbolt.Tx) error { n = tx.Size(); return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// Items of about a synchronous provision's size (three of 600 bytes), so
// that the file grows as the broker's does.
func appendItems(i int) func(*bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		for j := range 3 {
			if err := tx.Bucket([]byte("b")).Put(fmt.Appendf(nil, "k%06d-%d", i, j), []byte(strings.Repeat("v", 600))); err != nil {
				return err
			}
		}
		return nil
	}
}

// A commit's fsync costs about twice as much when the pages it adds fall in
// a hole of the file, where the filesystem allocates blocks in that fsync
// (bbolt grows its file by truncating it). The committer writes the file
// ahead of its last page, so that the pages a commit adds were written
// before: by the commit before it, for all but its first commit.
func TestCommitsAddPagesWhereTheFileIsWritten(t *testing.T) {
	c := open(t)
	path := c.DB().Path()
	if err := c.Update(appendItems(-1)); err != nil {
		t.Fatal(err)
	}
	grew := 0
	for i := range 1000 {
		before := size(t, c.DB())
		hole := firstHole(t, path, before)
		if err := c.Update(appendItems(i)); err != nil {
			t.Fatal(err)
		}
		after := size(t, c.DB())
		if after > before {
			grew++
		}
		if after > hole {
			t.Fatalf("commit %d added pages up to byte %d of the file, past its first hole at %d: the filesystem allocated them in the commit", i, after, hole)
		}
	}
	if grew < 100 {
		t.Fatalf("only %d of 1000 commits added pages: the test does not grow the file", grew)
	}
}

// The region written ahead is past the last page bbolt uses, so a file
// closed with it opens as one without, every item there, and grows on.
func TestAFileWrittenAheadOpensAgainWithEveryItem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucket([]byte("b")); return err }); err != nil {
		t.Fatal(err)
	}
	c := New(db)
	for i := range 1000 {
		if err := c.Update(appendItems(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c = New(db)
	for i := 1000; i < 2000; i++ {
		if err := c.Update(appendItems(i)); err != nil {
			t.Fatal(err)
		}
	}
	err = db.View(func(tx *bbolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		if n := tx.Bucket([]byte("b")).Stats().KeyN; n != 6000 {
			return fmt.Errorf("%d items, want 6000", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkCommitsThatGrowTheFile compares commits of new items (a
// synchronous provision's size) with the file written ahead and as bbolt
// grows it (the committer before it wrote ahead), turn about in one run:
// one writer at a time, and eight at once (ns/op is per write).
func BenchmarkCommitsThatGrowTheFile(b *testing.B) {
	for _, writers := range []int{1, 8} {
		for _, ahead := range []bool{true, false} {
			name := fmt.Sprintf("%d writers, written ahead", writers)
			if !ahead {
				name = fmt.Sprintf("%d writers, grown by bbolt", writers)
			}
			b.Run(name, func(b *testing.B) {
				c := open(b)
				if !ahead {
					c.ahead = 0
				}
				var wg sync.WaitGroup
				var n atomic.Int64
				for range writers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := n.Add(1); i <= int64(b.N); i = n.Add(1) {
							if err := c.Update(appendItems(int(i))); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/float64(c.Commits()), "writes/commit")
			})
		}
	}
}
