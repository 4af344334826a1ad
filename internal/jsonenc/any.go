package jsonenc

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// DecodeAny decodes the JSON text data into what encoding/json's Decoder
// with UseNumber decodes it into as an any (map[string]any, []any,
// string, json.Number, bool, nil), the short way (Scanner: whitespace
// allowed; a string value with escapes decoded alone by encoding/json):
// for the pre-parsed files the functions read at every cold start, where
// encoding/json's reflection took about half of the catalog's load. ok is
// false for a text the short way does not take (not JSON, or a key with
// an escape), which the caller then decodes with encoding/json
// (FuzzDecodeAny holds the two to the same values).
func DecodeAny(data []byte) (v any, ok bool) {
	s := NewScanner(data, ScanOptions{Spaces: true})
	v = s.anyValue(0)
	if !s.End() {
		return nil, false
	}
	return v, true
}

// anyValue reads a value of any kind; on a failed read the scanner is
// stopped and the value is to be dropped.
func (s *Scanner) anyValue(depth int) any {
	if depth > maxSkipDepth {
		s.fail()
		return nil
	}
	switch s.Peek() {
	case '{':
		s.Enter('{')
		m := map[string]any{}
		for {
			k, ok := s.StringKey()
			if !ok {
				return m
			}
			m[k] = s.anyValue(depth + 1)
		}
	case '[':
		s.Enter('[')
		a := []any{}
		for s.More() {
			a = append(a, s.anyValue(depth+1))
		}
		return a
	case '"':
		return s.anyString()
	case 't':
		s.Literal("true")
		return true
	case 'f':
		s.Literal("false")
		return false
	case 'n':
		s.Literal("null")
		return nil
	}
	n, _ := s.Number()
	return json.Number(n)
}

// anyString reads a string value: a part of the scanner's one copy of the
// data when it is plain (no escape, valid UTF-8), else its text decoded by
// encoding/json, which unescapes it and replaces invalid UTF-8 as always.
func (s *Scanner) anyString() string {
	start := s.i
	if !s.skipString() {
		s.fail()
		return ""
	}
	token := s.data[start:s.i]
	if bytes.IndexByte(token, '\\') < 0 && utf8.Valid(token) {
		if s.text == "" {
			s.text = string(s.data)
		}
		return s.text[start+1 : s.i-1]
	}
	var str string
	if json.Unmarshal(token, &str) != nil {
		s.fail()
	}
	return str
}
