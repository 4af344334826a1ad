package local

import (
	"encoding/json"

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
	s := jsonenc.NewScanner(data, jsonenc.ScanOptions{})
	v = compactValue(&s, 0)
	return v, s.End()
}

const maxCompactDepth = 64

// compactValue reads the value at s; what it returns counts only when s
// is still OK.
func compactValue(s *jsonenc.Scanner, depth int) any {
	if depth > maxCompactDepth {
		s.Fail()
		return nil
	}
	switch c := s.Peek(); {
	case c == '{':
		s.Enter('{')
		m := map[string]any{}
		for k, ok := s.StringKey(); ok; k, ok = s.StringKey() {
			m[k] = compactValue(s, depth+1)
		}
		return m
	case c == '[':
		s.Enter('[')
		l := []any{}
		for s.More() {
			l = append(l, compactValue(s, depth+1))
		}
		return l
	case c == '"':
		v, _ := s.String()
		return v
	case c == 't':
		return s.Literal("true")
	case c == 'f':
		s.Literal("false")
		return false
	case c == 'n':
		s.Literal("null")
		return nil
	}
	n, ok := s.Number()
	if !ok {
		return nil
	}
	return json.Number(n)
}
