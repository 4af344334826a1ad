package bolt

import "go.etcd.io/bbolt"

// ShowKey is showKey, for the package's black-box tests: a key as layout 3
// wrote it.
var ShowKey = showKey

// ForEachItem calls fn with each item of the store's file, in key order:
// each value of the root bucket (layout 7), not its buckets.
func ForEachItem(tx *bbolt.Tx, fn func(k, v []byte) error) error {
	root := tx.Root()
	return root.ForEach(func(k, v []byte) error {
		if root.Bucket(k) != nil {
			return nil
		}
		return fn(k, v)
	})
}
