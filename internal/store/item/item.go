// Package item holds what every store shares about encoding its items, so
// that the same item is written alike by all of them.
package item

import (
	"bytes"
	"encoding/json"
)

// Encode marshals an item without HTML escaping, so that raw JSON values
// (parameters, context) are kept byte for byte, except insignificant
// whitespace, which encoding/json drops.
func Encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
