package local

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/serverless-osb/broker/internal/jsonenc"
)

// decodeCompact is decodeValue's short way for the texts the engine meets
// nearly always (its own stored values and the worker's answers, written by
// encoding/json): compact, strings without escapes. It makes what a
// json.Decoder with UseNumber makes of them (maps, []any, strings,
// json.Number, booleans, nil; the last of a key twice), without the
// Decoder, its buffer and its scanner. ok is false for anything else, and
// for texts nested deeper than maxCompactDepth: decodeValue then takes the
// Decoder (FuzzDecodeCompact compares the two).
//
// Its strings are parts of one copy of data, made at its first string: one
// allocation, not one per key and string.
func decodeCompact(data []byte) (v any, ok bool) {
	d := compactDecoder{data: data}
	v, ok = d.value(0)
	return v, ok && d.i == len(data)
}

const maxCompactDepth = 64

type compactDecoder struct {
	data []byte
	i    int
	// text is data as a string, made at the first string read.
	text string
}

func (d *compactDecoder) value(depth int) (any, bool) {
	if d.i >= len(d.data) || depth > maxCompactDepth {
		return nil, false
	}
	switch c := d.data[d.i]; {
	case c == '{':
		d.i++
		m := map[string]any{}
		if d.i < len(d.data) && d.data[d.i] == '}' {
			d.i++
			return m, true
		}
		for {
			k, ok := d.str()
			if !ok || d.i >= len(d.data) || d.data[d.i] != ':' {
				return nil, false
			}
			d.i++
			v, ok := d.value(depth + 1)
			if !ok || d.i >= len(d.data) {
				return nil, false
			}
			m[k] = v
			switch d.data[d.i] {
			case ',':
				d.i++
			case '}':
				d.i++
				return m, true
			default:
				return nil, false
			}
		}
	case c == '[':
		d.i++
		l := []any{}
		if d.i < len(d.data) && d.data[d.i] == ']' {
			d.i++
			return l, true
		}
		for {
			v, ok := d.value(depth + 1)
			if !ok || d.i >= len(d.data) {
				return nil, false
			}
			l = append(l, v)
			switch d.data[d.i] {
			case ',':
				d.i++
			case ']':
				d.i++
				return l, true
			default:
				return nil, false
			}
		}
	case c == '"':
		return d.str()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	}
	return nil, false
}

// str reads a string without escapes, of valid UTF-8 (a Decoder would
// replace what is not).
func (d *compactDecoder) str() (string, bool) {
	if d.i >= len(d.data) || d.data[d.i] != '"' {
		return "", false
	}
	start := d.i + 1
	for j := start; j < len(d.data); {
		c := d.data[j]
		switch {
		case c == '"':
			d.i = j + 1
			if d.text == "" {
				d.text = string(d.data)
			}
			return d.text[start:j], true
		case c == '\\' || c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(d.data[j:])
			if r == utf8.RuneError && size == 1 {
				return "", false
			}
			j += size
		}
	}
	return "", false
}

func (d *compactDecoder) literal(lit string) bool {
	if len(d.data)-d.i < len(lit) || string(d.data[d.i:d.i+len(lit)]) != lit {
		return false
	}
	d.i += len(lit)
	return true
}

// number reads JSON's number grammar into a json.Number.
func (d *compactDecoder) number() (any, bool) {
	n := jsonenc.NumberPrefix(d.data[d.i:])
	if n < 0 {
		return nil, false
	}
	start := d.i
	d.i += n
	return json.Number(d.data[start:d.i]), true
}
