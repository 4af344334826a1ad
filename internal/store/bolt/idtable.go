package bolt

import (
	"hash/maphash"
	"strings"
)

// idTable maps ids to values of a type without pointers (V: a number, a
// slot, struct{}), and keeps them where the garbage collector has nothing
// to look at: the ids' bytes one after another in a slice, each entry in a
// map of integers under its id's hash. The indexes in memory hold an entry
// for every instance (plans.go) and every binding (bindings.go) in the
// file; as maps of strings, every cycle of the collector marked each of
// their strings, so its cost grew with the file (docs/performance.md, "The
// indexes in memory without pointers"). It is not safe for concurrent use:
// its index locks.
type idTable[V any] struct {
	// at is each id's entry, under its hash; other holds the ids whose
	// hash another id's entry held when they were set (two ids of one
	// 64-bit hash: not expected, but the table stays right).
	at    map[uint64]idEntry[V]
	other map[string]V
	// ids holds the entries' ids; dead counts the bytes in it of ids
	// deleted since, which compact gives back.
	ids  []byte
	dead int
	// hash is idHash; the tests make ids collide.
	hash func(string) uint64
}

type idEntry[V any] struct {
	off, n uint32
	v      V
}

// idSeed is the process's seed for the ids' hashes: random, so that no
// request can choose ids whose hashes collide.
var idSeed = maphash.MakeSeed()

func idHash(id string) uint64 { return maphash.String(idSeed, id) }

func newIDTable[V any]() *idTable[V] {
	return &idTable[V]{at: map[uint64]idEntry[V]{}, hash: idHash}
}

func (t *idTable[V]) idOf(e idEntry[V]) []byte { return t.ids[e.off : e.off+e.n] }

// len is how many ids the table holds.
func (t *idTable[V]) len() int { return len(t.at) + len(t.other) }

// get returns id's value.
func (t *idTable[V]) get(id string) (V, bool) {
	if e, ok := t.at[t.hash(id)]; ok && string(t.idOf(e)) == id {
		return e.v, true
	}
	v, ok := t.other[id]
	return v, ok
}

// set sets id's value.
func (t *idTable[V]) set(id string, v V) {
	h := t.hash(id)
	e, taken := t.at[h]
	switch {
	case taken && string(t.idOf(e)) == id:
		e.v = v
		t.at[h] = e
	case taken:
		if t.other == nil {
			t.other = map[string]V{}
		}
		t.other[strings.Clone(id)] = v
	default:
		if _, ok := t.other[id]; ok {
			// Set when the hash was another's, which has gone since.
			t.other[id] = v
			return
		}
		t.at[h] = idEntry[V]{off: uint32(len(t.ids)), n: uint32(len(id)), v: v}
		t.ids = append(t.ids, id...)
	}
}

// delete deletes id.
func (t *idTable[V]) delete(id string) {
	h := t.hash(id)
	if e, ok := t.at[h]; ok && string(t.idOf(e)) == id {
		delete(t.at, h)
		t.dead += int(e.n)
		t.compact()
		return
	}
	delete(t.other, id)
}

// compact gives back the bytes of deleted ids once they are over half of
// ids: each id is copied at most once per its own size of deletions.
func (t *idTable[V]) compact() {
	switch {
	case len(t.at) == 0:
		t.ids, t.dead = nil, 0
	case t.dead > 256 && 2*t.dead > len(t.ids):
		ids := make([]byte, 0, len(t.ids)-t.dead)
		for h, e := range t.at {
			off := len(ids)
			ids = append(ids, t.idOf(e)...)
			e.off = uint32(off)
			t.at[h] = e
		}
		t.ids, t.dead = ids, 0
	}
}

// each calls fn with every id and its value, in no order. The id's bytes
// are the table's, valid until its next change: fn copies what it keeps.
func (t *idTable[V]) each(fn func(id []byte, v V)) {
	for _, e := range t.at {
		fn(t.idOf(e), e.v)
	}
	for id, v := range t.other {
		fn([]byte(id), v)
	}
}
