package bolt

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/bbolt"
)

// The keys of an instance's items (layout 5). An instance's items are its
// partition, the keys that start with 'i' and the instance's id (appendID),
// in this order:
//
//	'o' <operation_id>                     an operation (UUIDv7 ids: the newest last)
//	'o' <slot> 'b' <binding_id>            a binding, at its slot (bindings.go)
//	'o' <slot> 'b' <binding_id> 'r'        that binding's record (broker.BindingRecord)
//	'p' <operation_id>                     (empty) the operation is in progress
//	'q'                                    the instance
//	'r' <name>                             the instance's own records
//
// so that what one change writes lies together in the B-tree: a binding
// beside its record, the instance beside its newest operations, and a new
// binding (its slot is a UUIDv7 made when it is first written) among
// them. A commit writes every leaf it changes with each branch above it
// (bbolt's TxStats.Write, docs/performance.md). Keys are short because a
// branch page holds the first key of each page below it: with the ids as
// text (layout 3: "i#<id>" NUL "op#<id>", 78 bytes with UUIDs) a branch
// page held about 40 keys, with the ids' 16 bytes (36 bytes) about 75, and
// a file of a few thousand instances needs one branch level less, one page
// less in every commit. Layout 4 had these keys but for the bindings, at
// 'b' <binding_id> (and 'r' after it for the record): in the order of
// their ids, which a platform makes at random, so that a bind on an
// instance with many bindings changed two leaves, its binding's and its
// operation's with the instance. The other partitions (detached,
// campaigns, the sealing record) keep their text keys ("detached" NUL
// <id>, ...): none starts with 'i'.
const (
	partitionTag = 'i'
	// An id is tagged: a UUID in the canonical lowercase form (every
	// operation id, which the broker makes, and the ids Cloud Foundry and
	// SAP Service Manager send) is its 16 bytes, which sort as its text
	// does; any other id is its bytes and a NUL (ids hold no control
	// characters, broker.IDRule), so that no id's key is a prefix of
	// another's.
	idUUID = 0x01
	idText = 0x02
	// Each SK's first byte.
	skOperation  = 'o'
	skBinding    = 'b' // after a slot under skOperation: a binding
	skRecordOf   = 'r' // after a binding's id: its record
	skInProgress = 'p'
	skInstance   = 'q'
	skRecord     = 'r'
)

// maxKeyID is the most an id takes in a key (a UUID: tag and 16 bytes).
const maxKeyID = 17

// appendID appends id's key form.
func appendID(b []byte, id string) []byte {
	if u, ok := uuidBytes(id); ok {
		b = append(b, idUUID)
		return append(b, u[:]...)
	}
	b = append(b, idText)
	b = append(b, id...)
	return append(b, 0)
}

// skipID cuts an id's key form off the front of b: the rest after it.
func skipID(b []byte) (rest []byte, ok bool) {
	if len(b) == 0 {
		return nil, false
	}
	switch b[0] {
	case idUUID:
		if len(b) < 1+16 {
			return nil, false
		}
		return b[17:], true
	case idText:
		i := bytes.IndexByte(b[1:], 0)
		if i < 0 {
			return nil, false
		}
		return b[2+i:], true
	}
	return nil, false
}

// cutID is skipID with the id's text.
func cutID(b []byte) (id string, rest []byte, ok bool) {
	rest, ok = skipID(b)
	if !ok {
		return "", nil, false
	}
	enc := b[1 : len(b)-len(rest)]
	if b[0] == idUUID {
		return uuidText(enc), rest, true
	}
	return string(enc[:len(enc)-1]), rest, true // its NUL cut off
}

// uuidBytes reads a UUID in its canonical lowercase text form,
// 8-4-4-4-12 hex digits (uppercase ones are other ids: their bytes would
// not give them back).
func uuidBytes(s string) (u [16]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i++
			continue
		}
		hi, ok1 := hexDigit(s[i])
		lo, ok2 := hexDigit(s[i+1])
		if !ok1 || !ok2 {
			return u, false
		}
		u[j] = hi<<4 | lo
		i, j = i+2, j+1
	}
	return u, true
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// uuidText is the canonical text of a UUID's 16 bytes.
func uuidText(u []byte) string {
	var b [36]byte
	return string(appendUUIDText(b[:0], u))
}

// appendUUIDText appends the canonical text of a UUID's 16 bytes.
func appendUUIDText(b, u []byte) []byte {
	const digits = "0123456789abcdef"
	for i, c := range u[:16] {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, digits[c>>4], digits[c&0xf])
	}
	return b
}

// partitionKey is the instance's partition prefix with room for an SK of
// extra bytes beyond an id.
func partitionKey(instanceID string, extra int) []byte {
	b := make([]byte, 0, 1+maxKeyID+extra)
	return appendID(append(b, partitionTag), instanceID)
}

// pk is the instance's partition: the prefix of its every key.
func pk(instanceID string) []byte { return partitionKey(instanceID, 0) }

// pkWith is the prefix of the instance's keys whose SK starts with sk.
func pkWith(instanceID string, sk ...byte) []byte {
	return append(partitionKey(instanceID, len(sk)), sk...)
}

func instanceKey(instanceID string) []byte { return pkWith(instanceID, skInstance) }

// bindingKey is the key of the binding's item at slot; its record's is
// this and skRecordOf.
func bindingKey(instanceID string, slot [16]byte, bindingID string) []byte {
	b := append(partitionKey(instanceID, 1+maxKeyID+1+maxKeyID+1), skOperation, idUUID)
	b = append(append(b, slot[:]...), skBinding)
	return appendID(b, bindingID)
}

// slotSK reads an SK under skOperation (its first byte cut off): an
// operation's (isBinding false), or a binding's or its record's, at slot.
func slotSK(sk []byte) (slot [16]byte, bindingID string, record, isBinding, ok bool) {
	rest, ok := skipID(sk)
	switch {
	case !ok:
		return slot, "", false, false, false
	case len(rest) == 0:
		return slot, "", false, false, true
	case sk[0] != idUUID || rest[0] != skBinding:
		return slot, "", false, false, false
	}
	bindingID, tail, ok := cutID(rest[1:])
	if !ok || len(tail) > 1 || (len(tail) == 1 && tail[0] != skRecordOf) {
		return slot, "", false, false, false
	}
	copy(slot[:], sk[1:17])
	return slot, bindingID, len(tail) == 1, true, true
}

func operationKey(instanceID, operationID string) []byte {
	return idKey(instanceID, skOperation, operationID)
}

func inProgressKey(instanceID, operationID string) []byte {
	return idKey(instanceID, skInProgress, operationID)
}

// idKey is the key of the instance's item of kind sk and id.
func idKey(instanceID string, sk byte, id string) []byte {
	return appendID(append(partitionKey(instanceID, 1+maxKeyID), sk), id)
}

// recordKey is the key of an instance's own record (not a binding's).
func recordKey(instanceID, name string) []byte {
	return append(append(partitionKey(instanceID, 1+len(name)), skRecord), name...)
}

// partitionEnd sorts after every key of the instance's partition and before
// the next instance's (no SK starts with 0xff).
func partitionEnd(instanceID string) []byte { return pkWith(instanceID, 0xff) }

// partitionsStart is where the instances' partitions start; inPartitions
// says whether a key is in one.
var partitionsStart = []byte{partitionTag}

func inPartitions(k []byte) bool { return len(k) > 0 && k[0] == partitionTag }

// eachPartition calls fn with the id of each instance's partition from
// start on, in key order, seeking past each partition with c once fn
// returns (fn may move c), until fn says no more.
func eachPartition(c *bbolt.Cursor, start []byte, fn func(id string) (more bool, err error)) error {
	for k, _ := c.Seek(start); inPartitions(k); k, _ = c.Seek(start) {
		id, _, ok := splitKey(k)
		if !ok {
			return fmt.Errorf("key %s is in no instance's partition", showKey(k))
		}
		if more, err := fn(id); !more || err != nil {
			return err
		}
		start = partitionEnd(id)
	}
	return nil
}

// splitKey splits an instance's key into the instance's id and the SK.
func splitKey(k []byte) (instanceID string, sk []byte, ok bool) {
	if !inPartitions(k) {
		return "", nil, false
	}
	return cutID(k[1:])
}

// skOf is the SK of an instance's key (nil, false for another key).
func skOf(k []byte) ([]byte, bool) {
	if !inPartitions(k) {
		return nil, false
	}
	return skipID(k[1:])
}

// isOperationKey reports whether key is an operation's.
func isOperationKey(key []byte) bool {
	sk, ok := skOf(key)
	if !ok || len(sk) < 2 || sk[0] != skOperation {
		return false
	}
	_, _, _, isBinding, ok := slotSK(sk[1:])
	return ok && !isBinding
}

// isInstanceKey reports whether key is an instance's.
func isInstanceKey(key []byte) bool {
	sk, ok := skOf(key)
	return ok && len(sk) == 1 && sk[0] == skInstance
}

// showKey is a key as errors show it: an instance's as "i#<id>" NUL and its
// SK with the id as text, as layout 3 wrote it; another as it is.
func showKey(k []byte) string {
	id, sk, ok := splitKey(k)
	if !ok || len(sk) == 0 {
		return strconv.Quote(string(k))
	}
	s := "i#" + id + "\x00"
	switch sk[0] {
	case skOperation, skInProgress:
		if _, bid, record, isBinding, ok := slotSK(sk[1:]); sk[0] == skOperation && ok && isBinding {
			if record {
				return strconv.Quote(s + "b#" + bid + "\x00r")
			}
			return strconv.Quote(s + "b#" + bid)
		}
		mark := "op#"
		if sk[0] == skInProgress {
			mark = "op$"
		}
		if oid, tail, ok := cutID(sk[1:]); ok && len(tail) == 0 {
			return strconv.Quote(s + mark + oid)
		}
	case skInstance:
		if len(sk) == 1 {
			return strconv.Quote(s + "p#instance")
		}
	case skRecord:
		return strconv.Quote(s + "r#" + string(sk[1:]))
	}
	return strconv.Quote(string(k))
}

// inProgressKeyOf is the in-progress key of the operation at key: its SK's
// first byte changed.
func inProgressKeyOf(operationKey []byte) []byte {
	sk, _ := skOf(operationKey)
	out := bytes.Clone(operationKey)
	out[len(out)-len(sk)] = skInProgress
	return out
}

// compareIDs orders ids as their keys do: UUIDs in canonical form first,
// then the others, each by their bytes.
func compareIDs(a, b string) int {
	_, ua := uuidBytes(a)
	_, ub := uuidBytes(b)
	switch {
	case ua && !ub:
		return -1
	case ub && !ua:
		return 1
	}
	return strings.Compare(a, b)
}
