package bbolt

// This file is serverless-osb's patch to bbolt v1.5.0 (the whole patch is
// in PATCH.md beside it): a commit that syncs once.
//
// bbolt commits in two steps, each followed by an fdatasync: the
// transaction's pages, then the meta page that points at them. The first
// sync orders the two: a meta page is never on disk before the pages it
// points at, so that after a crash the newest valid meta page is a whole
// transaction. With Options.SingleSyncCommit, a commit writes its pages
// and its meta page and syncs once, after both; the meta page carries the
// CRC-32C of every page the commit wrote (and of itself), and Open trusts
// the newest meta page only when each of those pages reads back with its
// sum. When one does not (the crash came between the writes and the sync,
// and the disk kept the meta page but not every page), Open uses the meta
// page before it: the transaction before, which its own sync made whole,
// and whose pages the interrupted commit did not write (a commit writes
// only pages that were free when it began, and the pages the transaction
// before it freed are not free until it is durable).
//
// So a commit is as durable as before (Commit returns after the sync that
// holds its pages and its meta page) and as atomic as before (after a
// crash, the file opens as of the last commit that returned, or of the one
// under way if every one of its writes reached the disk), with one device
// flush fewer. A commit of more pages than a meta page has room to list
// (about 250) syncs twice, as before, and its meta page carries no list.

import (
	"encoding/binary"
	"hash/crc32"
	"unsafe"

	"go.etcd.io/bbolt/errors"
	"go.etcd.io/bbolt/internal/common"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// The list's place in a meta page: after the page header and the Meta,
// a count (uint32), the list's own sum (uint32: CRC-32C of the Meta's
// bytes, the count and the entries, so that a list left from an older
// meta page in the same slot does not pass for this one's), then the
// entries: a page id (uint64), its overflow (uint32), and its sum.
const (
	pageSumsAt   = (int(common.PageHeaderSize) + int(unsafe.Sizeof(common.Meta{})) + 7) &^ 7
	pageSumsHead = 8
	pageSumSize  = 16
)

// maxPageSums is how many pages a meta page of pageSize can list.
func maxPageSums(pageSize int) int {
	return (pageSize - pageSumsAt - pageSumsHead) / pageSumSize
}

// appendPageSums appends an entry for each of pages, as written.
func appendPageSums(b []byte, pages common.Pages, pageSize int) []byte {
	for _, p := range pages {
		size := (int(p.Overflow()) + 1) * pageSize
		sum := crc32.Checksum(common.UnsafeByteSlice(unsafe.Pointer(p), 0, 0, size), castagnoli)
		b = binary.LittleEndian.AppendUint64(b, uint64(p.Id()))
		b = binary.LittleEndian.AppendUint32(b, p.Overflow())
		b = binary.LittleEndian.AppendUint32(b, sum)
	}
	return b
}

// listSum is the sum that binds a list to its meta page: buf is the meta
// page, its Meta already written, and sums the encoded entries.
func listSum(buf []byte, count uint32, sums []byte) uint32 {
	metaAt := int(common.PageHeaderSize)
	h := crc32.Update(0, castagnoli, buf[metaAt:metaAt+int(unsafe.Sizeof(common.Meta{}))])
	var c [4]byte
	binary.LittleEndian.PutUint32(c[:], count)
	h = crc32.Update(h, castagnoli, c[:])
	return crc32.Update(h, castagnoli, sums)
}

// writePageSums puts the list after the Meta in buf, a meta page whose Meta
// was written with MetaFlagPageSums.
func writePageSums(buf []byte, sums []byte) {
	count := uint32(len(sums) / pageSumSize)
	binary.LittleEndian.PutUint32(buf[pageSumsAt:], count)
	binary.LittleEndian.PutUint32(buf[pageSumsAt+4:], listSum(buf, count, sums))
	copy(buf[pageSumsAt+pageSumsHead:], sums)
}

// checkPageSums reports whether the pages that the meta page in slot (0 or
// 1, in the file's map) lists read back, within the first fileSize bytes
// of the file, as its commit wrote them. A meta page without the flag
// lists nothing: its commit synced its pages before writing it.
func (db *DB) checkPageSums(slot int, fileSize int) error {
	mp := db.page(common.Pgid(slot))
	if mp.Meta().Flags()&common.MetaFlagPageSums == 0 {
		return nil
	}
	buf := common.UnsafeByteSlice(unsafe.Pointer(mp), 0, 0, db.pageSize)
	count := binary.LittleEndian.Uint32(buf[pageSumsAt:])
	if int(count) > maxPageSums(db.pageSize) {
		return errors.ErrChecksum
	}
	sums := buf[pageSumsAt+pageSumsHead : pageSumsAt+pageSumsHead+int(count)*pageSumSize]
	if binary.LittleEndian.Uint32(buf[pageSumsAt+4:]) != listSum(buf, count, sums) {
		return errors.ErrChecksum
	}
	for e := sums; len(e) > 0; e = e[pageSumSize:] {
		id, pages := binary.LittleEndian.Uint64(e), uint64(binary.LittleEndian.Uint32(e[8:]))+1
		if filePages := uint64(fileSize / db.pageSize); id < 2 || id >= filePages || pages > filePages-id {
			return errors.ErrChecksum
		}
		size := pages * uint64(db.pageSize)
		p := db.page(common.Pgid(id))
		if crc32.Checksum(common.UnsafeByteSlice(unsafe.Pointer(p), 0, 0, int(size)), castagnoli) != binary.LittleEndian.Uint32(e[12:]) {
			return errors.ErrChecksum
		}
	}
	return nil
}

// checkNewestMeta runs once, at the file's first map: when the newest
// valid meta page lists pages that did not all reach the disk, the DB
// skips it (db.meta() returns the other) until a commit writes its slot
// again, which the next commit does (its transaction id has that slot's
// parity). It returns an error when no meta page can be used.
func (db *DB) checkNewestMeta(err0, err1 error, fileSize int) error {
	metas := [2]*common.Meta{db.meta0, db.meta1}
	errs := [2]error{err0, err1}
	newest := 0
	if errs[0] != nil || (errs[1] == nil && metas[1].Txid() > metas[0].Txid()) {
		newest = 1
	}
	if err := db.checkPageSums(newest, fileSize); err == nil {
		return nil
	}
	db.metaSkip[newest] = true
	other := 1 - newest
	if errs[other] != nil {
		return errs[other]
	}
	if err := db.checkPageSums(other, fileSize); err != nil {
		return err
	}
	db.Logger().Warningf("meta page %d (transaction %d) lists pages that did not reach the disk: the file opens as of transaction %d",
		newest, metas[newest].Txid(), metas[other].Txid())
	return nil
}
