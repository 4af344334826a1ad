package bolt

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	"go.etcd.io/bbolt"
)

// progressIndex is the set of the operations in progress, in memory, so
// that ListInProgress (the reaper's pass, every 30 s, and Recover) reads
// those operations and no other item. The file keeps an empty key beside
// each operation in progress (keys.go), which the index is filled from
// when the store opens (fillIndexes); a pass that sought each instance's partition for
// them read, and mapped, most of the file: 9.4 ms for 1,400 in progress
// among 14,000 instances. As with the plan index (plans.go), the file
// lock makes this process the file's only writer: every write that starts
// or finishes an operation records it (tx.putOperation), and the index
// takes it once the write is committed. An operation is never started and
// finished in one commit (it finishes once its start is committed), so
// the writes that move one are taken in the order they were committed.
type progressIndex struct {
	mu  sync.RWMutex
	ops map[progressOp]struct{}
}

// progressOp is an operation of an instance; in a move, whether it is now
// in progress.
type progressOp struct{ InstanceID, ID string }

type progressMove struct {
	op         progressOp
	inProgress bool
}

// addLocked indexes the in-progress keys of the partition id, read with
// c; p.mu is held.
func (p *progressIndex) addLocked(c *bbolt.Cursor, id string) error {
	prefix := pkWith(id, skInProgress)
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		opID, rest, ok := cutID(k[len(prefix):])
		if !ok || len(rest) > 0 {
			return fmt.Errorf("key %s is no operation's in progress", showKey(k))
		}
		p.ops[progressOp{strings.Clone(id), strings.Clone(opID)}] = struct{}{}
	}
	return nil
}

// apply takes the moves of a committed write.
func (p *progressIndex) apply(moves []progressMove) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range moves {
		if m.inProgress {
			// The index outlives the items the ids may be parts of
			// (br.str): copies of its own.
			p.ops[progressOp{strings.Clone(m.op.InstanceID), strings.Clone(m.op.ID)}] = struct{}{}
		} else {
			delete(p.ops, m.op)
		}
	}
}

// list returns the operations in progress in the order of their keys.
func (p *progressIndex) list() []progressOp {
	p.mu.RLock()
	out := make([]progressOp, 0, len(p.ops))
	for op := range p.ops {
		out = append(out, op)
	}
	p.mu.RUnlock()
	slices.SortFunc(out, func(a, b progressOp) int {
		return cmp.Or(compareIDs(a.InstanceID, b.InstanceID), compareIDs(a.ID, b.ID))
	})
	return out
}
