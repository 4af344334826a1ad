package jsonenc_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/jsonenc"
)

// scanValue reads data's value through a Scanner, as a reader built on it
// would: keys and strings, numbers as json.Number, literals, and every
// third member of an object skipped whole (kept as json.RawMessage).
func scanValue(s *jsonenc.Scanner) any {
	switch s.Peek() {
	case '{':
		s.Enter('{')
		m := map[string]any{}
		for n := 0; ; n++ {
			k, ok := s.StringKey()
			if !ok {
				return m
			}
			if n%3 == 2 {
				raw, _ := s.Skip()
				m[k] = json.RawMessage(raw)
				continue
			}
			m[k] = scanValue(s)
		}
	case '[':
		s.Enter('[')
		l := []any{}
		for s.More() {
			l = append(l, scanValue(s))
		}
		return l
	case '"':
		v, _ := s.String()
		return v
	case 't':
		return s.Literal("true")
	case 'f':
		return !s.Literal("false")
	case 'n':
		s.Literal("null")
		return nil
	}
	n, _ := s.Number()
	return json.Number(n)
}

// decoded is what encoding/json reads of data, with numbers as
// json.Number.
func decoded(data []byte) (any, bool) {
	if !json.Valid(data) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	return v, dec.Decode(&v) == nil
}

// normalized makes of scanValue's skipped members what encoding/json
// reads of them, to compare.
func normalized(t *testing.T, v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = normalized(t, e)
		}
	case []any:
		for i, e := range v {
			v[i] = normalized(t, e)
		}
	case json.RawMessage:
		e, ok := decoded(v)
		if !ok {
			t.Fatalf("Skip took %q, which encoding/json refuses", v)
		}
		return e
	}
	return v
}

// checkScanner fails when a Scanner, with whitespace allowed or not, takes
// a text that encoding/json refuses or reads otherwise (one told the text
// is valid: when it is), or when Skip and json.Valid disagree on a whole
// text.
func checkScanner(t *testing.T, data []byte) {
	want, valid := decoded(data)
	for _, o := range []jsonenc.ScanOptions{{}, {Spaces: true}, {Spaces: true, Valid: true}} {
		s := jsonenc.NewScanner(data, o)
		got := scanValue(&s)
		if !s.End() || o.Valid && !valid {
			continue
		}
		if !valid {
			t.Fatalf("Scanner (%+v) took %q, which encoding/json refuses", o, data)
		}
		if got = normalized(t, got); !reflect.DeepEqual(got, want) {
			t.Fatalf("Scanner (%+v) read %q as %#v; encoding/json: %#v", o, data, got, want)
		}
	}
	s := jsonenc.NewScanner(data, jsonenc.ScanOptions{Spaces: true})
	raw, _ := s.Skip()
	if s.End() != valid {
		t.Fatalf("Skip of %q: took all of it %v, json.Valid %v", data, s.End(), valid)
	}
	if s.End() && !bytes.Equal(raw, bytes.TrimSpace(data)) {
		t.Fatalf("Skip of %q returned %q", data, raw)
	}
	if valid {
		s = jsonenc.NewScanner(data, jsonenc.ScanOptions{Spaces: true, Valid: true})
		if raw, _ = s.Skip(); !s.End() || !bytes.Equal(raw, bytes.TrimSpace(data)) {
			t.Fatalf("Skip of %q, known valid, returned %q (took all of it: %v)", data, raw, s.End())
		}
	}
	s = jsonenc.NewScanner(data, jsonenc.ScanOptions{})
	if s.Skip(); s.End() {
		var compacted bytes.Buffer
		if err := json.Compact(&compacted, data); err != nil || !bytes.Equal(compacted.Bytes(), data) {
			t.Fatalf("Skip without whitespace took %q; json.Compact: %q, %v", data, compacted.Bytes(), err)
		}
	}
}

var scannerSeeds = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `-1.5e+10`, `1E5`, `01`, `1.`, `-`, `"x"`, `""`, `"é"`,
	`{"instance_id":"i-1"}`, `{"b":1,"a":[1,"two",{"c":null,"d":true}],"e":{"f":"g\"h"}}`, `{"a":1,"a":2}`,
	`{ "a" : 1 , "b" : [ 1 , 2 ] , "c" : { "d" : "\u00e9" } }`, " \n{}\t", `[1,]`, `{"a":1,}`, `{,"a":1}`, `[,1]`,
	`{"a"}`, `{"a":}`, `[`, `{`, `"`, `"a\"b"`, `"\n"`, "\"\x01\"", "\"\xff\"", `"\ud800"`, `"\u12"`, `"\x"`,
	`{}{}`, `{} `, `nul`, `tru`, `{"a":tru}`, `[1 ,2]`, `{"":1}`, `{"a":1 "b":2}`, `[1 2]`, `{"a" 1}`,
	strings.Repeat("[", 70) + strings.Repeat("]", 70),
}

func TestScannerReadsAsEncodingJSON(t *testing.T) {
	for _, s := range scannerSeeds {
		checkScanner(t, []byte(s))
	}
	for _, c := range []struct {
		name, data string
		o          jsonenc.ScanOptions
	}{
		{"a compact value", `{"a":[1,-2.5e3,true,null,"x"],"b":{},"c":{"g":["h\n"]},"d":"é"}`, jsonenc.ScanOptions{}},
		{"a spaced value, when allowed", `{ "a" : [ 1 , true ] , "b":{ } , "c" : { "d" : [ "e\n" ] } } `, jsonenc.ScanOptions{Spaces: true}},
		{"a spaced value known valid", `{ "a" : [ 1 , true ] , "b":{ } , "c" : { "d" : [ "e\n" ] } } `, jsonenc.ScanOptions{Spaces: true, Valid: true}},
	} {
		t.Run(c.name+" is read the short way", func(t *testing.T) {
			s := jsonenc.NewScanner([]byte(c.data), c.o)
			if scanValue(&s); !s.End() {
				t.Errorf("Scanner stopped at %d of %q", s.Pos(), c.data)
			}
		})
	}
	for _, c := range []struct{ name, data string }{
		{"an escape", `{"a":"\n"}`},
		{"invalid UTF-8", "{\"a\":\"\xff\"}"},
		{"whitespace, when not allowed", `{"a": 1}`},
	} {
		t.Run(c.name+" is left to encoding/json", func(t *testing.T) {
			s := jsonenc.NewScanner([]byte(c.data), jsonenc.ScanOptions{})
			if scanValue(&s); s.End() || s.OK() {
				t.Errorf("Scanner took %q", c.data)
			}
		})
	}
	t.Run("Skip nests as deep as json.Valid takes, and no deeper", func(t *testing.T) {
		for _, depth := range []int{10000, 10001} {
			data := []byte(strings.Repeat("[", depth) + strings.Repeat("]", depth))
			s := jsonenc.NewScanner(data, jsonenc.ScanOptions{})
			if s.Skip(); s.End() != json.Valid(data) {
				t.Errorf("depth %d: Skip took it %v, json.Valid %v", depth, s.End(), json.Valid(data))
			}
		}
	})
}

func FuzzScanner(f *testing.F) {
	for _, s := range scannerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkScanner(t, data) })
}
