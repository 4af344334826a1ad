package bolt

import (
	"bytes"
	"fmt"
	"strings"

	"go.etcd.io/bbolt"

	"github.com/serverless-osb/broker/internal/broker"
)

// The file's key layout. An instance's items are its partition, keys that
// start with "i#<instance_id>" NUL, in this order:
//
//	b#<binding_id>          a binding
//	b#<binding_id> NUL r    that binding's record (broker.BindingRecord)
//	op#<operation_id>       an operation (UUIDv7 ids: the newest last)
//	op$<operation_id>       (empty) the operation is in progress
//	p#instance              the instance
//	r#<name>                the instance's own records
//
// so that what one change writes lies together in the B-tree: a binding
// beside its record, the instance beside its newest operations. A commit
// writes every leaf it changes with each branch above it (bbolt's
// TxStats.Write, docs/performance.md): a bind used to change four leaves
// (binding, instance, operation, record), now two; an asynchronous
// provision wrote a second bucket's, now one leaf. Layout 1 (until
// 7b0e725) kept a binding's record at r#binding-<id> and the instance at
// SK "instance", as DynamoDB does, and the keys of the operations in
// progress in a bucket of their own ("operations_in_progress"); Open moves
// such a file's items (migrate). Layout 3 has layout 2's keys, and
// values that may be in the binary form of itembin.go, which a broker of
// layout 2 would not read: a file of layout 2 is of layout 3 as it is
// (its JSON items read), and a broker of layout 2 refuses a file of
// layout 3 rather than fail on its first binary item.
const (
	layoutBucket = "layout"
	layoutKey    = "version"
	// layoutVersion is the layout this code writes; a file without a
	// version is of layout 1, written before there was one.
	layoutVersion = "3"
)

// inProgressSK prefixes the in-progress keys: after every "op#…" ('$'
// follows '#'), before the instance.
const inProgressSK = "op$"

// instanceSK sorts after every "op…" and before every "r#…".
const instanceSK = "p#instance"

// layout1InProgress is layout 1's bucket of the operations in progress,
// keyed by the operations' keys.
const layout1InProgress = "operations_in_progress"

func inProgressKey(instanceID, operationID string) []byte {
	return []byte(pk(instanceID) + inProgressSK + operationID)
}

// inProgressKeyOf is the in-progress key of the operation at key.
func inProgressKeyOf(operationKey []byte) []byte {
	pkPart, sk, _ := bytes.Cut(operationKey, []byte(sep))
	return []byte(string(pkPart) + sep + inProgressSK + string(sk[len("op#"):]))
}

// bindingRecordSuffix follows a binding's key in its record's.
const bindingRecordSuffix = sep + "r"

func instanceKey(instanceID string) []byte { return []byte(pk(instanceID) + instanceSK) }

// resourceKey is a binding's record's key beside the binding, any other
// record's under r#.
func resourceKey(instanceID, name string) []byte {
	if id, ok := strings.CutPrefix(name, broker.BindingRecordsFrom); ok {
		return []byte(pk(instanceID) + "b#" + id + bindingRecordSuffix)
	}
	return []byte(pk(instanceID) + "r#" + name)
}

// isBindingRecordKey reports whether sk, an instance's SK under "b#", is a
// binding's record's rather than the binding's (ids hold no NUL).
func isBindingRecordKey(sk []byte) bool { return bytes.IndexByte(sk, 0) >= 0 }

// migrate moves the items of a file in layout 1 to this layout in tx, the
// transaction that opens the store, and writes the layout's version (of a
// file in layout 2, only the version): an
// open that fails leaves the file as it was. A file of a later layout is
// refused, not read wrongly.
func migrate(tx *bbolt.Tx) error {
	meta, err := tx.CreateBucketIfNotExists([]byte(layoutBucket))
	if err != nil {
		return err
	}
	switch v := string(meta.Get([]byte(layoutKey))); v {
	case layoutVersion:
		return nil
	case "2":
		return meta.Put([]byte(layoutKey), []byte(layoutVersion))
	case "":
	default:
		return fmt.Errorf("the file is in layout %s, this broker reads layout %s: use a newer broker", v, layoutVersion)
	}
	items := tx.Bucket([]byte(itemsBucket))
	type move struct{ from, to, value []byte }
	var moves []move
	err = items.ForEach(func(k, v []byte) error {
		pkPart, sk, ok := bytes.Cut(k, []byte(sep))
		if !ok || !bytes.HasPrefix(pkPart, []byte("i#")) {
			return nil
		}
		id := string(pkPart[len("i#"):])
		var to []byte
		switch {
		case string(sk) == "instance":
			to = instanceKey(id)
		case bytes.HasPrefix(sk, []byte("r#"+broker.BindingRecordsFrom)):
			to = resourceKey(id, string(sk[len("r#"):]))
		default:
			return nil
		}
		// Cloned: the values live in pages that the moves below replace.
		moves = append(moves, move{bytes.Clone(k), to, bytes.Clone(v)})
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrate to key layout %s: %w", layoutVersion, err)
	}
	var inProgress [][]byte
	if b := tx.Bucket([]byte(layout1InProgress)); b != nil {
		err = b.ForEach(func(k, _ []byte) error {
			if isOperationKey(k) {
				inProgress = append(inProgress, inProgressKeyOf(k))
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("migrate to key layout %s: %w", layoutVersion, err)
		}
	}
	for _, m := range moves {
		if err := items.Delete(m.from); err != nil {
			return fmt.Errorf("migrate to key layout %s: %w", layoutVersion, err)
		}
		if err := items.Put(m.to, m.value); err != nil {
			return fmt.Errorf("migrate to key layout %s: %w", layoutVersion, err)
		}
	}
	for _, k := range inProgress {
		if err := items.Put(k, nil); err != nil {
			return fmt.Errorf("migrate to key layout %s: %w", layoutVersion, err)
		}
	}
	if tx.Bucket([]byte(layout1InProgress)) != nil {
		if err := tx.DeleteBucket([]byte(layout1InProgress)); err != nil {
			return fmt.Errorf("migrate to key layout %s: %w", layoutVersion, err)
		}
	}
	return meta.Put([]byte(layoutKey), []byte(layoutVersion))
}
