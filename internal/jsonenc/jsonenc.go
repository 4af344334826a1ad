// Package jsonenc is the broker's one JSON encoder for the bytes it keeps
// or serves as they are: the catalog document, the items of the bolt store,
// the JSON text that DynamoDB items hold. It is encoding/json without HTML
// escaping, so that <, > and & in raw JSON (parameters, context, a
// driver's data) stay byte for byte, except insignificant whitespace, which
// encoding/json drops. What it writes is served as application/json or
// stored, never embedded in HTML.
//
// The package is a leaf: it imports nothing from this module.
package jsonenc

import (
	"bytes"
	"encoding/json"
)

// Marshal returns the compact JSON encoding of v, without HTML escaping and
// without a trailing newline.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
