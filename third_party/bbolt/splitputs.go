package bbolt

import "go.etcd.io/bbolt/internal/common"

// Patched (PATCH.md): where a node splits under Bucket.SplitBeforeLastInsert.

// putRun is where a node's transaction put inodes: lastInsert is 1 + the
// index of the last key it inserted, last 1 + the index of the last key it
// put (inserted, or replaced the value of); 0 for none. Deletes and merges
// keep them as near as they can: they serve a choice of split position,
// which any value leaves correct.
type putRun struct{ lastInsert, last int }

// add records a put at index i, an insert when inserted (the inodes from i
// on moved up one).
func (r *putRun) add(i int, inserted bool) {
	if inserted {
		if i < r.lastInsert {
			r.lastInsert++
		} else {
			r.lastInsert = i + 1
		}
		if i < r.last {
			r.last++
		}
	}
	r.last = max(r.last, i+1)
}

// del records a delete at index i (the inodes after i moved down one).
func (r *putRun) del(i int) {
	if i < r.lastInsert {
		r.lastInsert--
	}
	if i < r.last {
		r.last--
	}
}

// split is the runs of the two nodes that a split at index at makes.
func (r putRun) split(at int) (left, right putRun) {
	left = putRun{min(r.lastInsert, at), min(r.last, at)}
	right = putRun{max(r.lastInsert-at, 0), max(r.last-at, 0)}
	return left, right
}

// join is the run of a node of n inodes merged with right's after them.
func (r putRun) join(n int, right putRun) putRun {
	if right.lastInsert > 0 {
		r.lastInsert = n + right.lastInsert
	}
	if right.last > 0 {
		r.last = n + right.last
	}
	return r
}

// splitBeforeLastInsert is the position at which a node of a bucket with
// SplitBeforeLastInsert splits, given the one FillPercent gives (at). When
// at falls after the last key the transaction inserted and before or at a
// key after it that the transaction put (the node after the split would
// begin with a key it did not insert, and hold one it rewrote), it splits
// before the inserted key instead, when the node before it keeps
// MinKeysPerPage keys; or else after the last key put, when the node up to
// there fits in a page. A key inserted in ascending order goes to the node
// of the key before it: the next transaction's, after this one's last, to
// the node that holds the key both rewrite.
func (n *node) splitBeforeLastInsert(at, pageSize uintptr) uintptr {
	if n.puts.lastInsert == 0 {
		return at
	}
	inserted, last := uintptr(n.puts.lastInsert-1), uintptr(n.puts.last-1)
	if at <= inserted || at > last {
		return at
	}
	if inserted >= common.MinKeysPerPage {
		return inserted
	}
	if end := last + 1; end+common.MinKeysPerPage <= uintptr(len(n.inodes)) && n.fits(end, pageSize) {
		return end
	}
	return at
}

// fits reports whether the node's first count inodes fit in a page.
func (n *node) fits(count, pageSize uintptr) bool {
	head := node{isLeaf: n.isLeaf, inodes: n.inodes[:count]}
	return head.sizeLessThan(pageSize + 1)
}
