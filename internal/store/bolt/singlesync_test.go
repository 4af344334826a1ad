package bolt_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/store/bolt"
	"go.etcd.io/bbolt"
)

// The broker's bbolt commits sync once (third_party/bbolt, pagesums.go):
// a commit writes its pages and its meta page, which lists each page with
// its sum, and then syncs; Open trusts the newest meta page only when the
// pages it lists read back with their sums. These tests make the disk
// states a crash can leave between a commit's writes and its sync, from
// the file before the commit and after it: the pages that differ are the
// commit's writes, and the disk may hold any of them, none, or part of
// one (a page is eight 512-byte sectors, which a disk writes one by one).

// pageSize is bbolt's page on this machine (the OS page).
var pageSize = os.Getpagesize()

// A meta page as the tests read it from the file: bbolt's page header,
// then its Meta (flags, txid), then pagesums.go's list (a count, the
// list's sum, and 16-byte entries: page id, overflow, sum).
const (
	metaStart, metaSize = 16, 64
	metaFlagsAt         = metaStart + 12
	metaTxidAt          = metaStart + 48
	listAt              = (metaStart + metaSize + 7) &^ 7
	flagPageSums        = 1
	listEntrySize       = 16
)

// listsPages reports whether the meta page lists its commit's pages.
func listsPages(page []byte) bool {
	return binary.LittleEndian.Uint32(page[metaFlagsAt:])&flagPageSums != 0
}

// dumpDB reads every key and value of every bucket, nested ones as paths,
// and checks the file's consistency (bbolt's Tx.Check).
func dumpDB(t *testing.T, db *bbolt.DB) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(prefix string, b *bbolt.Bucket) error
	walk = func(prefix string, b *bbolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(prefix+string(k)+"/", b.Bucket(k))
			}
			out[prefix+string(k)] = string(v)
			return nil
		})
	}
	err := db.View(func(tx *bbolt.Tx) error {
		for err := range tx.Check() {
			return fmt.Errorf("check: %w", err)
		}
		// The root bucket's values (the store's items, layout 7) and its
		// buckets.
		return walk("", tx.Root())
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// newBoltFile opens a new bbolt file in a directory of its own, as the
// broker opens its file (bolt.Options).
func newBoltFile(t *testing.T) (dir, path string, db *bbolt.DB) {
	t.Helper()
	dir = t.TempDir()
	path = filepath.Join(dir, "db")
	db, err := bbolt.Open(path, 0o600, bolt.Options())
	if err != nil {
		t.Fatal(err)
	}
	return dir, path, db
}

// randomChange makes one transaction's worth of puts and deletes, over a
// few buckets and the root bucket (whose values the broker's store keeps,
// splitting its pages before what a transaction inserted:
// SplitBeforeLastInsert), with values from a few bytes to more than a page
// (bbolt writes those as overflow pages). One in ten writes 40 to 100 pages,
// whose list in the meta page spans several of its sectors; with huge, it
// writes 300 pages or more, more than a meta page can list: that commit
// syncs twice, as bbolt does.
func randomChange(r *rand.Rand, tx *bbolt.Tx, huge bool) error {
	n, big := 1+r.IntN(12), 0
	switch {
	case huge:
		n, big = 300+r.IntN(100), pageSize*3/4
	case r.IntN(10) == 0:
		n, big = 40+r.IntN(60), pageSize*3/4
	}
	for range n {
		b := tx.Root()
		b.SplitBeforeLastInsert = true
		if i := r.IntN(4); i < 3 {
			var err error
			if b, err = tx.CreateBucketIfNotExists(fmt.Appendf(nil, "b%d", i)); err != nil {
				return err
			}
			b.SplitBeforeLastInsert = r.IntN(2) == 0
		}
		key := fmt.Appendf(nil, "k%04d", r.IntN(400))
		if r.IntN(5) == 0 {
			if err := b.Delete(key); err != nil {
				return err
			}
			continue
		}
		size := 10 + r.IntN(300)
		if big > 0 {
			size = big + r.IntN(100)
		} else if r.IntN(20) == 0 {
			size = pageSize + r.IntN(2*pageSize)
		}
		value := make([]byte, size)
		for i := range value {
			value[i] = byte('a' + r.IntN(26))
		}
		if err := b.Put(key, value); err != nil {
			return err
		}
	}
	return nil
}

// crashImage is a disk state after a crash between a commit's writes and
// its sync: before, with each page the commit wrote (those where after
// differs) taken whole from after (half of them, or nine in ten: a draw
// for each image), left as before, or torn (some of its sectors from
// after). A commit whose meta page lists no pages synced its pages before
// writing its meta page: when the image has any of the meta page's new
// sectors, it has all the other pages whole. It reports whether every
// written page is whole in the image, and whether the meta page is.
func crashImage(r *rand.Rand, before, after []byte) (image []byte, all, meta bool) {
	before = append(before[:len(before):len(before)], make([]byte, len(after)-len(before))...)
	image = append([]byte(nil), before...)
	metaAt := 0
	if !bytes.Equal(before[pageSize:2*pageSize], after[pageSize:2*pageSize]) {
		metaAt = pageSize
	}
	wholeIn := []int{2, 10}[r.IntN(2)]
	for at := 0; at < len(after); at += pageSize {
		old, new := image[at:at+pageSize], after[at:at+pageSize]
		if bytes.Equal(old, new) {
			continue
		}
		switch k := r.IntN(wholeIn); {
		case k < wholeIn-1:
			copy(old, new)
		case r.IntN(2) == 0:
			for s := 0; s < pageSize; s += 512 {
				if r.IntN(2) == 0 {
					copy(old[s:s+512], new[s:s+512])
				}
			}
		}
	}
	metaPage := func(b []byte) []byte { return b[metaAt : metaAt+pageSize] }
	if !listsPages(metaPage(after)) && !bytes.Equal(metaPage(image), metaPage(before)) {
		copy(image[2*pageSize:], after[2*pageSize:])
	}
	return image, bytes.Equal(image, after), bytes.Equal(metaPage(image), metaPage(after))
}

// TestACommitCutShortOpensAsTheCommitBeforeOrItself: for 100 random
// commits, each after the last, 8 disk states a crash before the commit's
// sync can leave; each opens (bbolt's own check finds nothing wrong) with
// exactly the data of the commit before or of the commit itself: the
// commit's when the disk holds all its pages, the one before's when it
// lacks the meta page. Each image then takes a commit of its own, and
// opens again with it. Without the open's check, bbolt panics on the first
// image that has the commit's meta page and lacks one of its pages: it
// finds a page of the commit before where the meta page points at the
// commit's.
func TestACommitCutShortOpensAsTheCommitBeforeOrItself(t *testing.T) {
	dir, path, db := newBoltFile(t)
	defer db.Close()
	r := rand.New(rand.NewPCG(7, 32))
	counts := map[string]int{}
	for round := range 100 {
		before, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		wantBefore := dumpDB(t, db)
		huge := round == 30 || round == 70
		if err := db.Update(func(tx *bbolt.Tx) error { return randomChange(r, tx, huge) }); err != nil {
			t.Fatal(err)
		}
		after, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		wantAfter := dumpDB(t, db)
		for i := range 8 {
			image, all, meta := crashImage(r, before, after)
			imagePath := filepath.Join(dir, fmt.Sprintf("image-%d-%d", round, i))
			if err := os.WriteFile(imagePath, image, 0o600); err != nil {
				t.Fatal(err)
			}
			got := openImage(t, imagePath)
			switch {
			case maps.Equal(got, wantAfter):
				counts["as the commit"]++
			case maps.Equal(got, wantBefore):
				counts["as the commit before"]++
				if all {
					t.Fatalf("round %d image %d: the disk holds every page of the commit, and the file opens without it", round, i)
				}
			default:
				t.Fatalf("round %d image %d: the file opens with data of neither commit", round, i)
			}
			if !meta && !maps.Equal(got, wantBefore) {
				t.Fatalf("round %d image %d: the meta page did not reach the disk, and the file opens as the commit", round, i)
			}
			if !maps.Equal(got, wantAfter) && meta {
				counts["meta page on disk, opened as before"]++
			}
			_ = os.Remove(imagePath)
		}
	}
	t.Log(counts)
	// Not vacuous: both outcomes, and the fallback past a meta page that
	// reached the disk, came up.
	for _, k := range []string{"as the commit", "as the commit before", "meta page on disk, opened as before"} {
		if counts[k] == 0 {
			t.Errorf("no image opened %s: %v", k, counts)
		}
	}
}

// openImage opens a crash image as the broker opens its file, reads it,
// commits to it, and opens it again: the slot of a meta page skipped at
// open is the one the next commit writes, and the file then opens with
// that commit.
func openImage(t *testing.T, path string) map[string]string {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, bolt.Options())
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	got := dumpDB(t, db)
	if err := db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("after-crash"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	}); err != nil {
		t.Fatalf("commit after open: %v", err)
	}
	want := maps.Clone(got)
	want["after-crash/k"] = "v"
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = bbolt.Open(path, 0o600, bolt.Options())
	if err != nil {
		t.Fatalf("open again: %v", err)
	}
	defer db.Close()
	if again := dumpDB(t, db); !maps.Equal(again, want) {
		t.Fatalf("after a commit, the file opens with %d keys, want %d", len(again), len(want))
	}
	return got
}

// TestACommitListsEveryPageItWrote reads the meta page each commit wrote:
// it lists exactly the pages that differ from the file before (a page
// left out would go unchecked at open), each with the CRC-32C of what is
// on disk.
func TestACommitListsEveryPageItWrote(t *testing.T) {
	_, path, db := newBoltFile(t)
	defer db.Close()
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 60 {
		before, _ := os.ReadFile(path)
		if err := db.Update(func(tx *bbolt.Tx) error { return randomChange(r, tx, i%20 == 10) }); err != nil {
			t.Fatal(err)
		}
		after, _ := os.ReadFile(path)
		// The file grows in zeros (bbolt truncates it longer).
		before = append(before, make([]byte, len(after)-len(before))...)
		var metaAt int
		written := map[uint64]bool{}
		for at := 0; at < len(after); at += pageSize {
			if !bytes.Equal(before[at:at+pageSize], after[at:at+pageSize]) {
				if at < 2*pageSize {
					metaAt = at
					continue
				}
				written[uint64(at/pageSize)] = true
			}
		}
		// The commit's pages, each run of overflow pages as one (its first
		// page's header says how many follow).
		runs := 0
		for id := uint64(2); id < uint64(len(after)/pageSize); id++ {
			if written[id] {
				runs++
				id += uint64(binary.LittleEndian.Uint32(after[id*uint64(pageSize)+12:]))
			}
		}
		if runs > (pageSize-listAt-8)/listEntrySize {
			// More than a meta page lists: synced first, as bbolt does.
			if listsPages(after[metaAt:]) {
				t.Fatalf("a commit of %d pages has a list", runs)
			}
			continue
		}
		listed := listedPages(t, after, metaAt)
		covered := map[uint64]bool{}
		for id, span := range listed {
			if !written[id] {
				t.Fatalf("page %d is listed and was not written", id)
			}
			for p := id; p < id+span; p++ {
				covered[p] = true // an overflow page is checked with its first
			}
		}
		for id := range written {
			if !covered[id] {
				t.Fatalf("page %d was written and is not listed", id)
			}
		}
	}
}

// listedPages decodes the list in the meta page at metaAt and checks each
// entry's sum against the file: page id → pages spanned.
func listedPages(t *testing.T, file []byte, metaAt int) map[uint64]uint64 {
	t.Helper()
	page := file[metaAt : metaAt+pageSize]
	if !listsPages(page) {
		t.Fatalf("the meta page at %d has no list", metaAt)
	}
	count := binary.LittleEndian.Uint32(page[listAt:])
	out := map[uint64]uint64{}
	for i := range int(count) {
		e := page[listAt+8+listEntrySize*i:]
		id, overflow, sum := binary.LittleEndian.Uint64(e), binary.LittleEndian.Uint32(e[8:]), binary.LittleEndian.Uint32(e[12:])
		span := uint64(overflow) + 1
		body := file[id*uint64(pageSize) : (id+span)*uint64(pageSize)]
		if crc32c(body) != sum {
			t.Fatalf("page %d: listed sum %08x, on disk %08x", id, sum, crc32c(body))
		}
		out[id] = span
	}
	return out
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// TestTheStoreOpensACommitCutShort: the broker's store on a disk that a
// crash left with a bind's meta page and all but one of its other pages
// opens as before the bind: the binding is not found (its slot index is
// filled from the keys of the commit before), the bindings before it are,
// and the same bind then succeeds and is found after the store opens
// again. With every page on disk, the bind is there.
func TestTheStoreOpensACommitCutShort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "broker.db")
	s := open(t, path)
	defer s.Close()
	ctx := t.Context()
	op := broker.Operation{ID: "prov-i-1", InstanceID: "i-1", Kind: broker.KindProvision, State: broker.OperationInProgress}
	inst := broker.Instance{ID: "i-1", State: broker.InstanceProvisioning, Op: op.ID,
		InstanceRequest: broker.InstanceRequest{ServiceID: "s", PlanID: "p"}}
	if err := s.CreateInstance(ctx, inst, op, nil); err != nil {
		t.Fatal(err)
	}
	inst.State, inst.Op, inst.Version = broker.InstanceReady, "", inst.Version+1
	op.State = broker.OperationSucceeded
	if err := s.FinishOperation(ctx, broker.Finish{Op: op, Instance: &inst}); err != nil {
		t.Fatal(err)
	}
	bind := func(s *bolt.Store, id string) error {
		op := broker.Operation{ID: "bind-" + id, InstanceID: "i-1", BindingID: id, Kind: broker.KindBind,
			State: broker.OperationInProgress}
		b := broker.Binding{InstanceID: "i-1", ID: id, Op: op.ID, BindingRequest: broker.BindingRequest{
			ServiceID: "s", PlanID: "p", Parameters: json.RawMessage(`{"note":"` + strings.Repeat("x", 200) + `"}`)}}
		return s.CreateBinding(ctx, b, op, nil)
	}
	for i := range 40 {
		if err := bind(s, fmt.Sprintf("b-%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := bind(s, "b-40"); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	before = append(before, make([]byte, len(after)-len(before))...)
	var written []int
	for at := 2 * pageSize; at < len(after); at += pageSize {
		if !bytes.Equal(before[at:at+pageSize], after[at:at+pageSize]) {
			written = append(written, at)
		}
	}
	if len(written) < 2 {
		t.Fatalf("the bind wrote %d pages besides the meta page", len(written))
	}
	found := func(s *bolt.Store, id string) bool {
		t.Helper()
		_, err := s.GetBinding(ctx, "i-1", id)
		if err != nil && !errors.Is(err, broker.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	for _, missing := range []int{written[0], written[len(written)-1], -1} {
		image := append([]byte(nil), after...)
		if missing >= 0 {
			copy(image[missing:missing+pageSize], before[missing:])
		}
		imagePath := filepath.Join(dir, fmt.Sprintf("image-%d.db", missing))
		if err := os.WriteFile(imagePath, image, 0o600); err != nil {
			t.Fatal(err)
		}
		c := open(t, imagePath)
		if got, want := found(c, "b-40"), missing < 0; got != want {
			t.Errorf("page at %d missing: b-40 found %t, want %t", missing, got, want)
		}
		if !found(c, "b-39") || !found(c, "b-00") {
			t.Errorf("page at %d missing: a binding of an earlier commit is not found", missing)
		}
		if missing >= 0 {
			if err := bind(c, "b-40"); err != nil {
				t.Fatalf("page at %d missing: bind again: %v", missing, err)
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		c = open(t, imagePath)
		if !found(c, "b-40") {
			t.Errorf("page at %d missing: b-40 not found after it was made again", missing)
		}
		_ = c.Close()
	}
}

// TestAListThatNamesPagesPastTheFileIsRefused: a meta page whose list
// passes its own sum but names a page past the file's end (an id that
// would overflow the offset, one gigabytes past the end, a run longer than
// the file) is not trusted: the file opens as of the commit before, and
// reads no page outside the file (without the bounds, the sum of a page
// gigabytes past the map faults).
func TestAListThatNamesPagesPastTheFileIsRefused(t *testing.T) {
	dir, path, db := newBoltFile(t)
	put := func(v string) {
		t.Helper()
		if err := db.Update(func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return b.Put([]byte("k"), []byte(v))
		}); err != nil {
			t.Fatal(err)
		}
	}
	put("before")
	put("after")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The newest meta page is the one with the higher transaction id.
	txid := func(at int) uint64 { return binary.LittleEndian.Uint64(file[at+metaTxidAt:]) }
	metaAt := 0
	if txid(pageSize) > txid(0) {
		metaAt = pageSize
	}
	for name, entry := range map[string]func(e []byte){
		"an id whose offset overflows": func(e []byte) { binary.LittleEndian.PutUint64(e, 1<<60) },
		"an id far past the file":      func(e []byte) { binary.LittleEndian.PutUint64(e, uint64(len(file)/pageSize+1<<20)) },
		"the page after the file":      func(e []byte) { binary.LittleEndian.PutUint64(e, uint64(len(file)/pageSize)) },
		"a run far past the file":      func(e []byte) { binary.LittleEndian.PutUint32(e[8:], 1<<24) },
	} {
		image := append([]byte(nil), file...)
		page := image[metaAt : metaAt+pageSize]
		count := binary.LittleEndian.Uint32(page[listAt:])
		if count == 0 {
			t.Fatal("the commit listed no pages")
		}
		entries := page[listAt+8 : listAt+8+listEntrySize*int(count)]
		entry(entries)
		// The list's own sum, made again so that only the bounds refuse it.
		h := crc32.Update(0, crc32.MakeTable(crc32.Castagnoli), page[metaStart:metaStart+metaSize])
		h = crc32.Update(h, crc32.MakeTable(crc32.Castagnoli), page[listAt:listAt+4])
		h = crc32.Update(h, crc32.MakeTable(crc32.Castagnoli), entries)
		binary.LittleEndian.PutUint32(page[listAt+4:], h)
		imagePath := filepath.Join(dir, "image")
		if err := os.WriteFile(imagePath, image, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := bbolt.Open(imagePath, 0o600, bolt.Options())
		if err != nil {
			t.Fatalf("%s: open: %v", name, err)
		}
		if got := dumpDB(t, c)["b/k"]; got != "before" {
			t.Errorf("%s: the file opens with %q, want the commit before's %q", name, got, "before")
		}
		_ = c.Close()
	}
}
