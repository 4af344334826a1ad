package jsonenc

import (
	"encoding/binary"
	"unicode/utf8"
)

// Scanner reads a JSON text a token at a time, the short way, for the
// broker's hand-written readers (request bodies, Task payloads, the local
// engine's values, bolt's items): those would cost encoding/json's state,
// reflection and a string each, for texts that are nearly always plain.
// It takes strings only without escapes, control characters or invalid
// UTF-8 (what encoding/json reads as it is), and whitespace between tokens
// only when told. A read that meets anything else returns false and stops
// the scanner (OK is false from then on, and every read fails): "not the
// short way", never "not JSON". Its caller then leaves the whole text to
// encoding/json, which reads it by its own rules or errors. What it does
// take, it takes as encoding/json does (FuzzScanner).
type Scanner struct {
	data []byte
	i    int
	// text is data as a string, made at the first String or StringKey:
	// one allocation for all of a text's strings.
	text  string
	first bool // no member read yet of the object or array just entered
	bad   bool
	ScanOptions
}

// ScanOptions say what a Scanner may meet.
type ScanOptions struct {
	// Spaces: whitespace may stand between tokens (request bodies); else
	// the text must be compact (what encoding/json writes).
	Spaces bool
	// Valid: the text is known to be valid JSON (json.Valid said so), so
	// that Skip only looks for the end of a value, at about twice the
	// speed of checking it.
	Valid bool
}

// NewScanner returns a Scanner at the start of data.
func NewScanner(data []byte, o ScanOptions) Scanner {
	return Scanner{data: data, ScanOptions: o}
}

// OK reports whether every read so far took what it met.
func (s *Scanner) OK() bool { return !s.bad }

// Fail stops the scanner: for a reader that meets a key or a value it does
// not take.
func (s *Scanner) Fail() { s.fail() }

// fail stops the scanner: its position at the end of data, where every
// read fails without another test of bad.
func (s *Scanner) fail() bool {
	s.bad = true
	s.i = len(s.data)
	return false
}

// Pos is the offset in data where the next read starts.
func (s *Scanner) Pos() int { return s.i }

// End reports whether every read took what it met and they read all of
// data (but trailing whitespace, when allowed).
func (s *Scanner) End() bool {
	s.space()
	return !s.bad && s.i == len(s.data)
}

func (s *Scanner) space() {
	if !s.Spaces {
		return
	}
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// Peek returns the byte the next token starts with, without reading it: 0
// at the end of data or once stopped.
func (s *Scanner) Peek() byte {
	s.space()
	if s.i < len(s.data) {
		return s.data[s.i]
	}
	return 0
}

// Enter reads the '{' or '[' (open) that starts an object or an array,
// whose members Key or More then read.
func (s *Scanner) Enter(open byte) bool {
	if s.Peek() != open {
		return s.fail()
	}
	s.i++
	s.first = true
	return true
}

// Key reads the next key of the object being read, and its colon; ok is
// false at the object's end ('}' read) and when stopped: OK tells them
// apart. The key is a part of data.
func (s *Scanner) Key() (key []byte, ok bool) {
	// max: none (end -1) is an empty part; so written, the four readers
	// of a part are inlined.
	start, end := s.key(false)
	return s.data[start:max(start, end)], end >= 0
}

// StringKey is Key as a part of the copy String makes.
func (s *Scanner) StringKey() (key string, ok bool) {
	start, end := s.key(true)
	return s.text[start:max(start, end)], end >= 0
}

// key is where the next key's content starts and ends (having read the
// comma before it, but before the first, and its colon); end is -1 at the
// object's end and when stopped. text: as plain's.
func (s *Scanner) key(text bool) (start, end int) {
	// member('}'), written out: a call a key less.
	c, first := s.Peek(), s.first
	s.first = false
	switch {
	case c == '}':
		s.i++
		return 0, -1
	case c == ',' && !first:
		s.i++
	case !first:
		s.fail()
		return 0, -1
	}
	if start, end = s.plain(text); end < 0 {
		return 0, -1
	}
	if s.Peek() != ':' {
		s.fail()
		return 0, -1
	}
	s.i++
	return start, end
}

// member reads what stands before a member of the object or array being
// read (a comma but before the first), or its end (close); more is false
// at the end, and at anything else (then the scanner is stopped). The
// member's own read fails at the end of data.
func (s *Scanner) member(close byte) (more bool) {
	c, first := s.Peek(), s.first
	s.first = false
	switch {
	case c == close:
		s.i++
		return false
	case c == ',' && !first:
		s.i++
	case !first:
		return s.fail()
	}
	return true
}

// More reports whether the array being read has another element, having
// read the comma before it; it is false at the array's end (']' read) and
// when stopped: OK tells them apart.
func (s *Scanner) More() bool { return s.member(']') }

// Plain reads a string and returns its bytes, a part of data.
func (s *Scanner) Plain() ([]byte, bool) {
	start, end := s.plain(false)
	return s.data[start:max(start, end)], end >= 0
}

// String reads a string as a part of one copy of data, made at its first
// string: one allocation for all of them.
func (s *Scanner) String() (string, bool) {
	start, end := s.plain(true)
	return s.text[start:max(start, end)], end >= 0
}

// plain reads a string without escapes, control characters or invalid
// UTF-8 (encoding/json would replace it), and returns where its content
// starts and ends; end is -1 for anything else. text makes the copy of
// data String's strings are parts of, at the first.
func (s *Scanner) plain(text bool) (start, end int) {
	if s.Peek() != '"' {
		s.fail()
		return 0, -1
	}
	data := s.data // a local slice: no reload, no bounds check a byte
	start = s.i + 1
	j := start
	for j+8 <= len(data) && !special(binary.LittleEndian.Uint64(data[j:])) {
		j += 8 // eight plain ASCII bytes at once: most of an id
	}
	var high byte // the bytes or'ed: from utf8.RuneSelf up, not ASCII
	for ; j < len(data); j++ {
		c := data[j]
		if c == '"' {
			if high >= utf8.RuneSelf && !utf8.Valid(data[start:j]) {
				break
			}
			if text && s.text == "" {
				s.text = string(data)
			}
			s.i = j + 1
			return start, j
		}
		if c == '\\' || c < 0x20 {
			break
		}
		high |= c
	}
	s.fail()
	return 0, -1
}

// special reports whether any of the eight bytes in x is a quote, a
// backslash, a control character or not ASCII. (Borrows may flag a byte
// after one that is, never a word with none.)
func special(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := x^(ones*'"'), x^(ones*'\\')
	return ((quote-ones)&^quote|(backslash-ones)&^backslash|(x-ones*0x20)&^x|x)&highs != 0
}

// Number reads a number (JSON's grammar) and returns its text, a part of
// data.
func (s *Scanner) Number() ([]byte, bool) {
	s.space()
	n := NumberPrefix(s.data[s.i:])
	if n < 0 {
		return nil, s.fail()
	}
	s.i += n
	return s.data[s.i-n : s.i], true
}

// Literal reads lit: true, false or null.
func (s *Scanner) Literal(lit string) bool {
	s.space()
	if !s.skipLiteral(lit) {
		return s.fail()
	}
	return true
}

// maxSkipDepth is encoding/json's limit on nesting: Skip takes what
// json.Valid takes.
const maxSkipDepth = 10000

// Skip reads a value of any kind (escapes and all: what json.Valid takes,
// without whitespace unless allowed; with Valid, whatever closes its
// brackets and strings) and returns its text, a part of data: for a
// reader that keeps a value as json.RawMessage, or ignores it.
func (s *Scanner) Skip() ([]byte, bool) {
	s.space()
	start := s.i
	if s.Valid && !s.skipValid() || !s.Valid && !s.skip(0) {
		return nil, s.fail()
	}
	return s.data[start:s.i], true
}

// skipValid is skip in valid JSON: it counts brackets and passes strings
// (their escapes too), whatever else it meets.
func (s *Scanner) skipValid() bool {
	end := validEnd(s.data, s.i)
	if end <= s.i || end > len(s.data) {
		return false
	}
	s.i = end
	return true
}

// validEnd is the end of the value at data[i], in valid JSON; at most i,
// or beyond data, where there is none.
func validEnd(data []byte, i int) int {
	depth := 0
	for j := i; j < len(data); j++ {
		switch data[j] {
		case '"':
			for j++; j < len(data) && data[j] != '"'; j++ {
				if data[j] == '\\' {
					j++
				}
			}
			if depth == 0 {
				return j + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return j // the end of the enclosing object or array
			}
			if depth--; depth == 0 {
				return j + 1
			}
		case ',', ':', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return j
			}
		}
	}
	if depth > 0 {
		return -1
	}
	return len(data)
}

func (s *Scanner) skip(depth int) bool {
	if s.i >= len(s.data) {
		return false
	}
	switch c := s.data[s.i]; c {
	case '{', '[':
		if depth++; depth > maxSkipDepth {
			return false
		}
		s.i++
		close := byte(']')
		if c == '{' {
			close = '}'
		}
		s.space()
		if s.i < len(s.data) && s.data[s.i] == close {
			s.i++
			return true
		}
		for {
			s.space()
			if c == '{' {
				if !s.skipString() {
					return false
				}
				s.space()
				if s.i >= len(s.data) || s.data[s.i] != ':' {
					return false
				}
				s.i++
				s.space()
			}
			if !s.skip(depth) {
				return false
			}
			s.space()
			if s.i >= len(s.data) {
				return false
			}
			switch s.data[s.i] {
			case ',':
				s.i++
			case close:
				s.i++
				return true
			default:
				return false
			}
		}
	case '"':
		return s.skipString()
	case 't':
		return s.skipLiteral("true")
	case 'f':
		return s.skipLiteral("false")
	case 'n':
		return s.skipLiteral("null")
	}
	n := NumberPrefix(s.data[s.i:])
	if n < 0 {
		return false
	}
	s.i += n
	return true
}

func (s *Scanner) skipLiteral(lit string) bool {
	if len(s.data)-s.i < len(lit) || string(s.data[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// skipString reads a string with any escapes JSON has, and any bytes but
// control characters (json.Valid takes invalid UTF-8).
func (s *Scanner) skipString() bool {
	data := s.data
	if s.i >= len(data) || data[s.i] != '"' {
		return false
	}
	for j := s.i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			s.i = j + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if j++; j >= len(data) {
				return false
			}
			switch data[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(data)-j <= 4 || !hex4(data[j+1:j+5]) {
					return false
				}
				j += 4
			default:
				return false
			}
		}
	}
	return false
}

func hex4(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}
