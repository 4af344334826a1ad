package jsonenc

import (
	"bytes"
	"unicode/utf8"
)

// Canonical says whether data is already what decoding it (numbers as
// json.Number, objects as maps) and encoding it again would make: one JSON
// value, no whitespace, each object's keys once and in ascending byte order
// (encoding/json sorts a map's keys), strings without escapes or anything
// the encoder would escape (control characters, invalid UTF-8, U+2028 and
// U+2029, and with EscapeHTML also <, > and &). A caller that would decode
// and re-encode such a text can keep it as it is: the common small bodies
// (`{}`, `{"app_guid":"app"}`) then cost no allocation. LowerKeys also
// asks that every key be lower-case ASCII, so that keys that differ only in
// case cannot hide behind distinct bytes. False means "do it the long
// way", never that data is invalid.
func Canonical(data []byte, o CanonicalOptions) bool {
	c := canon{data: data, CanonicalOptions: o}
	end, ok := c.value(0, 0)
	return ok && end == len(data)
}

// CanonicalOptions say which re-encoding Canonical stands for.
type CanonicalOptions struct {
	// EscapeHTML: the encoder escapes <, > and & (json.Marshal's default).
	EscapeHTML bool
	// LowerKeys: every key must be lower-case ASCII.
	LowerKeys bool
	// Float64: numbers were decoded as float64, not json.Number, so only
	// integers that float64 holds exactly and encodes as written (at most
	// 15 digits, no -0) keep their spelling.
	Float64 bool
}

// maxCanonicalDepth bounds the recursion; deeper texts go the long way.
const maxCanonicalDepth = 64

type canon struct {
	data []byte
	CanonicalOptions
}

// value checks the value at i and returns where it ends.
func (c canon) value(i, depth int) (int, bool) {
	if i >= len(c.data) || depth > maxCanonicalDepth {
		return i, false
	}
	switch b := c.data[i]; {
	case b == '{':
		return c.object(i+1, depth+1)
	case b == '[':
		return c.array(i+1, depth+1)
	case b == '"':
		end, ok := c.str(i)
		return end, ok
	case b == 't':
		return c.literal(i, "true")
	case b == 'f':
		return c.literal(i, "false")
	case b == 'n':
		return c.literal(i, "null")
	case b == '-' || b >= '0' && b <= '9':
		return c.number(i)
	}
	return i, false
}

func (c canon) object(i, depth int) (int, bool) {
	if i < len(c.data) && c.data[i] == '}' {
		return i + 1, true
	}
	var prev []byte
	for first := true; ; first = false {
		start := i
		end, ok := c.str(i)
		if !ok {
			return i, false
		}
		key := c.data[start+1 : end-1]
		if !first && bytes.Compare(prev, key) >= 0 {
			return i, false
		}
		if c.LowerKeys {
			for _, b := range key {
				if b >= utf8.RuneSelf || b >= 'A' && b <= 'Z' {
					return i, false
				}
			}
		}
		prev = key
		if end >= len(c.data) || c.data[end] != ':' {
			return i, false
		}
		if i, ok = c.value(end+1, depth); !ok || i >= len(c.data) {
			return i, false
		}
		switch c.data[i] {
		case ',':
			i++
		case '}':
			return i + 1, true
		default:
			return i, false
		}
	}
}

func (c canon) array(i, depth int) (int, bool) {
	if i < len(c.data) && c.data[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = c.value(i, depth); !ok || i >= len(c.data) {
			return i, false
		}
		switch c.data[i] {
		case ',':
			i++
		case ']':
			return i + 1, true
		default:
			return i, false
		}
	}
}

// str checks the string whose opening quote is at i.
func (c canon) str(i int) (int, bool) {
	if i >= len(c.data) || c.data[i] != '"' {
		return i, false
	}
	for j := i + 1; j < len(c.data); {
		b := c.data[j]
		switch {
		case b == '"':
			return j + 1, true
		case b == '\\' || b < 0x20:
			return j, false
		case c.EscapeHTML && (b == '<' || b == '>' || b == '&'):
			return j, false
		case b < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(c.data[j:])
			if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
				return j, false
			}
			j += size
		}
	}
	return len(c.data), false
}

func (c canon) literal(i int, lit string) (int, bool) {
	if !bytes.HasPrefix(c.data[i:], []byte(lit)) {
		return i, false
	}
	return i + len(lit), true
}

// number checks JSON's number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (c canon) number(i int) (int, bool) {
	d := c.data
	if c.Float64 {
		start := i
		if d[i] == '-' {
			i++
		}
		first := i
		switch {
		case i < len(d) && d[i] == '0' && i == start:
			i++
		case i < len(d) && d[i] >= '1' && d[i] <= '9':
			i = digits(d, i)
		default:
			return i, false
		}
		if i-first > 15 || i < len(d) && (d[i] == '.' || d[i] == 'e' || d[i] == 'E') {
			return i, false
		}
		return i, true
	}
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = digits(d, i)
	default:
		return i, false
	}
	if i < len(d) && d[i] == '.' {
		j := digits(d, i+1)
		if j == i+1 {
			return i, false
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := digits(d, i)
		if j == i {
			return i, false
		}
		i = j
	}
	return i, true
}

func digits(d []byte, i int) int {
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	return i
}
