package bolt

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"go.etcd.io/bbolt"

	"github.com/serverless-osb/broker/internal/broker"
)

// The file's layouts. Layout 1 (until 7b0e725) kept a binding's record at
// r#binding-<id> and the instance at SK "instance", as DynamoDB does, and
// the keys of the operations in progress in a bucket of their own
// ("operations_in_progress"). Layout 2 placed an instance's items in the
// order keys.go gives them, with text keys ("i#<id>" NUL "b#<binding_id>",
// "op#…", "op$…", "p#instance", "r#<name>"). Layout 3 has layout 2's keys
// and values that may be in the binary form of itembin.go. Layout 4 has
// layout 3's values and short keys, each binding's at 'b' and its id (and
// 'r' after it for its record). Layout 5 has layout 4's keys but for the
// bindings', which keys.go places at slots among the operations
// (bindings.go). Layout 6 has layout 5's keys and values, but that a
// field of a binary value may be in a short form (itembin.go: a UUID in
// its 16 bytes, a fingerprint's hex in its bytes, a sealed value in the
// binary form of sealing/envelope), which a broker of layout 5 would not
// read. Layout 7 has layout 6's keys and values in the file's root bucket,
// not in the bucket "items" (bolt.go: buckets). Open moves a file of an
// earlier layout to this one (migrate), in the transaction that opens it;
// a broker of layout 4 refuses a file of layout 5 ("use a newer broker")
// rather than find none of its bindings, one of layout 5 a file of layout
// 6 rather than fail on the items written since, and one of layout 6 a
// file of layout 7 rather than find an empty bucket "items".
const (
	layoutBucket = "layout"
	layoutKey    = "version"
	// layoutVersion is the layout this code writes; a file without a
	// version is of layout 1, written before there was one, or new.
	layoutVersion = "7"
)

// layout4Binding is the first byte of layout 4's SK of a binding and its
// record.
const layout4Binding = 'b'

// layout1InProgress is layout 1's bucket of the operations in progress,
// keyed by the operations' keys.
const layout1InProgress = "operations_in_progress"

// migrate moves the items of a file in an earlier layout to this one in
// tx, the transaction that opens the store, and writes the layout's
// version: an open that fails leaves the file as it was. A file of a later
// layout is refused, not read wrongly.
func migrate(tx *bbolt.Tx) error {
	meta, err := tx.CreateBucketIfNotExists([]byte(layoutBucket))
	if err != nil {
		return err
	}
	v := string(meta.Get([]byte(layoutKey)))
	switch {
	case v == layoutVersion:
		return nil
	case v == "" && tx.Bucket([]byte(itemsBucket)) == nil:
		// A new file (layout 1 had the bucket).
		return meta.Put([]byte(layoutKey), []byte(layoutVersion))
	case !slices.Contains([]string{"", "2", "3", "4", "5", "6"}, v):
		return fmt.Errorf("the file is in layout %s, this broker reads layout %s: use a newer broker", v, layoutVersion)
	}
	items, err := tx.CreateBucketIfNotExists([]byte(itemsBucket))
	if err != nil {
		return err
	}
	switch v {
	case "2", "3":
		err = fromLayout3(items)
	case "":
		if err = fromLayout1(tx); err == nil {
			err = fromLayout3(items)
		}
	}
	if err == nil && v != "5" && v != "6" {
		err = fromLayout4(items)
	}
	// Layout 5's values read as layout 6's, which only the root moves.
	if err == nil {
		err = fromLayout6(tx, items)
	}
	if err != nil {
		return fmt.Errorf("migrate to key layout %s: %w", layoutVersion, err)
	}
	return meta.Put([]byte(layoutKey), []byte(layoutVersion))
}

// move is an item that a migration moves to another key.
type move struct{ from, to, value []byte }

// apply moves the items.
func apply(items *bbolt.Bucket, moves []move) error {
	for _, m := range moves {
		if err := items.Delete(m.from); err != nil {
			return err
		}
		if err := items.Put(m.to, m.value); err != nil {
			return err
		}
	}
	return nil
}

// fromLayout1 moves a file's items from layout 1 to layout 3's keys.
func fromLayout1(tx *bbolt.Tx) error {
	items := tx.Bucket([]byte(itemsBucket))
	var moves []move
	err := items.ForEach(func(k, v []byte) error {
		pkPart, sk, ok := bytes.Cut(k, []byte(sep))
		if !ok || !bytes.HasPrefix(pkPart, []byte("i#")) {
			return nil
		}
		partition := string(pkPart) + sep
		var to []byte
		switch {
		case string(sk) == "instance":
			to = []byte(partition + "p#instance")
		case bytes.HasPrefix(sk, []byte("r#"+broker.BindingRecordsFrom)):
			to = []byte(partition + "b#" + string(sk[len("r#"+broker.BindingRecordsFrom):]) + sep + "r")
		default:
			return nil
		}
		// Cloned: the values live in pages that the moves below replace.
		moves = append(moves, move{bytes.Clone(k), to, bytes.Clone(v)})
		return nil
	})
	if err != nil {
		return err
	}
	var inProgress [][]byte
	if b := tx.Bucket([]byte(layout1InProgress)); b != nil {
		err = b.ForEach(func(k, _ []byte) error {
			// layout 1's "i#<id>" NUL "op#<id>" is layout 3's operation
			// key; its in-progress key has "op$".
			if pkPart, sk, ok := bytes.Cut(k, []byte(sep)); ok && bytes.HasPrefix(pkPart, []byte("i#")) && bytes.HasPrefix(sk, []byte("op#")) {
				inProgress = append(inProgress, []byte(string(pkPart)+sep+"op$"+string(sk[len("op#"):])))
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if err := apply(items, moves); err != nil {
		return err
	}
	for _, k := range inProgress {
		if err := items.Put(k, nil); err != nil {
			return err
		}
	}
	if tx.Bucket([]byte(layout1InProgress)) != nil {
		return tx.DeleteBucket([]byte(layout1InProgress))
	}
	return nil
}

// fromLayout3 moves the items of a file in layout 2 or 3 to layout 4's
// keys: every key of an instance's partition ("i#<id>" NUL SK) to its
// short form. A key of no kind it knows stops the move, the file left as
// it was, rather than lose an item.
func fromLayout3(items *bbolt.Bucket) error {
	var moves []move
	err := items.ForEach(func(k, v []byte) error {
		if !bytes.HasPrefix(k, []byte("i#")) {
			return nil
		}
		to, ok := layout4Key(k)
		if !ok {
			return fmt.Errorf("key %q of layout 3 is of no kind this broker knows", k)
		}
		moves = append(moves, move{bytes.Clone(k), to, bytes.Clone(v)})
		return nil
	})
	if err != nil {
		return err
	}
	return apply(items, moves)
}

// layout4Key is the layout 4 key of a layout 3 key of an instance's
// partition.
func layout4Key(k []byte) ([]byte, bool) {
	id, sk, ok := strings.Cut(string(k[len("i#"):]), sep)
	if !ok {
		return nil, false
	}
	switch {
	case sk == "p#instance":
		return instanceKey(id), true
	case strings.HasPrefix(sk, "op$"):
		return inProgressKey(id, sk[len("op$"):]), true
	case strings.HasPrefix(sk, "op#"):
		return operationKey(id, sk[len("op#"):]), true
	case strings.HasPrefix(sk, "b#"):
		bindingID, record, isRecord := strings.Cut(sk[len("b#"):], sep)
		switch {
		case !isRecord:
			return idKey(id, layout4Binding, bindingID), true
		case record == "r":
			return append(idKey(id, layout4Binding, bindingID), skRecordOf), true
		}
	case strings.HasPrefix(sk, "r#"):
		// As it was, whatever the name (resourceKey would move a
		// "binding-…" name beside its binding, where layout 3 did not).
		return recordKey(id, sk[len("r#"):]), true
	}
	return nil, false
}

// fromLayout6 moves every item of a file in layout 6 (or 5) from the bucket
// "items" to the same key in the root bucket, as its pages hold it, and
// deletes the bucket.
func fromLayout6(tx *bbolt.Tx, items *bbolt.Bucket) error {
	root := tx.Root()
	root.FillPercent = itemsFillPercent
	err := items.ForEach(func(k, v []byte) error {
		if root.Bucket(k) != nil {
			return fmt.Errorf("item %s has the name of a bucket", showKey(k))
		}
		// Cloned: the pages that hold them are freed below.
		return root.Put(bytes.Clone(k), bytes.Clone(v))
	})
	if err != nil {
		return err
	}
	return tx.DeleteBucket([]byte(itemsBucket))
}

// fromLayout4 moves the bindings of a file in layout 4 to their slots
// (layout 5): each binding and its record from 'b' and the binding's id to
// a slot of their own among the instance's operations, made now (their
// order among the operations does not matter to a binding made before).
func fromLayout4(items *bbolt.Bucket) error {
	var moves []move
	slots := map[string][16]byte{}
	c := items.Cursor()
	err := eachPartition(c, partitionsStart, func(id string) (bool, error) {
		prefix := pkWith(id, layout4Binding)
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			bindingID, rest, ok := cutID(k[len(prefix):])
			if !ok || len(rest) > 1 || (len(rest) == 1 && rest[0] != skRecordOf) {
				return false, fmt.Errorf("key %q of layout 4 is of no kind this broker knows", k)
			}
			slot, ok := slots[id+sep+bindingID]
			if !ok {
				slot = uuid.Must(uuid.NewV7())
				slots[id+sep+bindingID] = slot
			}
			to := append(bindingKey(id, slot, bindingID), rest...)
			moves = append(moves, move{bytes.Clone(k), to, bytes.Clone(v)})
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	return apply(items, moves)
}
