package bolt_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// pageMap is where each page of a bbolt file lies in its trees, read from
// the file's bytes (bbolt's on-disk format: a 16-byte page header of id,
// flags, count and overflow; branch elements of pos, ksize and child;
// leaf elements of flags, pos, ksize and vsize; a bucket's value starts
// with its root's page id, 0 when the bucket is inline). bbolt writes
// every page it changes at a new id (copy on write) and never reuses a
// page it freed in the same commit, so the pages of the tree after a
// commit that were not in it before are the ones the commit wrote: what
// TxStats.Write counts, but for the meta page and any freelist.
type pageMap map[uint64]pagePlace

// pagePlace is a page's place: the bucket's path ("" for the file's root
// bucket), its depth in that bucket's tree (0 its root) and whether it is
// a leaf.
type pagePlace struct {
	bucket string
	depth  int
	leaf   bool
}

func (p pagePlace) String() string {
	kind := "branch"
	if p.leaf {
		kind = "leaf"
	}
	b := p.bucket
	if b == "" {
		b = "(root bucket)"
	}
	return fmt.Sprintf("%s %s@%d", b, kind, p.depth)
}

const (
	branchPageFlag = 0x01
	leafPageFlag   = 0x02
	bucketLeafFlag = 0x01
)

// readPageMap maps the pages of the bbolt file at path.
func readPageMap(t testing.TB, path string, pageSize int) pageMap {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The newer of the two meta pages: txid at 16+48, root at 16+16.
	meta := func(i int) []byte { return data[i*pageSize+16:] }
	m := meta(0)
	if binary.LittleEndian.Uint64(meta(1)[48:]) > binary.LittleEndian.Uint64(m[48:]) {
		m = meta(1)
	}
	pages := pageMap{}
	var walk func(id uint64, bucket string, depth int)
	walk = func(id uint64, bucket string, depth int) {
		p := data[int(id)*pageSize:]
		flags, count := binary.LittleEndian.Uint16(p[8:]), int(binary.LittleEndian.Uint16(p[10:]))
		pages[id] = pagePlace{bucket: bucket, depth: depth, leaf: flags&leafPageFlag != 0}
		switch {
		case flags&branchPageFlag != 0:
			for i := range count {
				e := p[16+i*16:]
				walk(binary.LittleEndian.Uint64(e[8:]), bucket, depth+1)
			}
		case flags&leafPageFlag != 0:
			for i := range count {
				e := p[16+i*16:]
				if binary.LittleEndian.Uint32(e)&bucketLeafFlag == 0 {
					continue
				}
				pos, ksize := int(binary.LittleEndian.Uint32(e[4:])), int(binary.LittleEndian.Uint32(e[8:]))
				k := e[pos : pos+ksize]
				v := e[pos+ksize:]
				if root := binary.LittleEndian.Uint64(v); root != 0 {
					walk(root, strings.TrimPrefix(bucket+"/"+string(k), "/"), 0)
				}
			}
		}
	}
	walk(binary.LittleEndian.Uint64(m[16:]), "", 0)
	return pages
}

// written lists the places of the pages in after that were not in before,
// sorted, as "items leaf@2 ×2".
func written(before, after pageMap) []string {
	n := map[pagePlace]int{}
	for id, p := range after {
		if _, ok := before[id]; !ok {
			n[p]++
		}
	}
	var out []string
	for p, c := range n {
		out = append(out, fmt.Sprintf("%s ×%d", p, c))
	}
	slices.Sort(out)
	return out
}
