// Package jsonenc is the broker's one JSON encoder for the bytes it keeps
// or serves as they are: the catalog document, the items of the bolt store,
// the JSON text that DynamoDB items hold. It is encoding/json without HTML
// escaping, so that <, > and & in raw JSON (parameters, context, a
// driver's data) stay byte for byte, except insignificant whitespace, which
// encoding/json drops. What it writes is served as application/json or
// stored, never embedded in HTML.
//
// Its Scanner is the other way: the one reader of JSON the short way
// (without encoding/json's state and reflection) that the broker's
// hand-written readers share, each leaving to encoding/json what it does
// not take.
//
// The package is a leaf: it imports nothing from this module.
package jsonenc

import (
	"bytes"
	"encoding/json"
	"sync"
)

// encoder is a buffer with its Encoder, kept between calls: a new one per
// call grew its buffer from nothing, a few allocations for every item the
// store writes.
type encoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var encoders = sync.Pool{New: func() any {
	e := &encoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}}

// maxPooled keeps a buffer that one large value grew out of the pool.
const maxPooled = 64 << 10

// Marshal returns the compact JSON encoding of v, without HTML escaping and
// without a trailing newline.
func Marshal(v any) ([]byte, error) {
	e := encoders.Get().(*encoder)
	defer func() {
		if e.buf.Cap() <= maxPooled {
			e.buf.Reset()
			encoders.Put(e)
		}
	}()
	if err := e.enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.Clone(bytes.TrimSuffix(e.buf.Bytes(), []byte("\n"))), nil
}
