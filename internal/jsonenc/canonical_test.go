package jsonenc_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/jsonenc"
)

// reencoded is the long way Canonical stands for: decode with numbers as
// json.Number, encode again (with or without HTML escaping).
func reencoded(data []byte, escapeHTML, float bool) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if !float {
		dec.UseNumber()
	}
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, false
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(v); err != nil {
		return nil, false
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), true
}

// lowerASCIIKeys says whether every key of v, at any depth, is lower-case
// ASCII.
func lowerASCIIKeys(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if strings.IndexFunc(k, func(r rune) bool { return r >= 'A' && r <= 'Z' || r >= 0x80 }) >= 0 || !lowerASCIIKeys(e) {
				return false
			}
		}
	case []any:
		for _, e := range v {
			if !lowerASCIIKeys(e) {
				return false
			}
		}
	}
	return true
}

// checkCanonical fails when Canonical says yes to a text that the long way
// changes or refuses, or with lowerKeys to one with a key that is not
// lower-case ASCII. (No to a text the long way keeps, escapes say, only
// costs the long way.)
func checkCanonical(t *testing.T, data []byte) {
	for o := range 8 {
		html, lower, float := o&1 != 0, o&2 != 0, o&4 != 0
		{
			got := jsonenc.Canonical(data, jsonenc.CanonicalOptions{EscapeHTML: html, LowerKeys: lower, Float64: float})
			again, ok := reencoded(data, html, float)
			if got && (!ok || !bytes.Equal(again, data)) {
				t.Errorf("Canonical(%q, html %v, lower %v, float64 %v) = true, but re-encoded it is %q (valid: %v)", data, html, lower, float, again, ok)
			}
			var v any
			if got && lower && json.Unmarshal(data, &v) == nil && !lowerASCIIKeys(v) {
				t.Errorf("Canonical(%q, html %v, lower true) = true, but a key is not lower-case ASCII", data, html)
			}
		}
	}
}

var canonicalSeeds = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1.5e+10`, `1E5`, `01`, `1.`, `-`, `.5`, `""`,
	`{"app_guid":"app"}`, `{"duration_seconds":3600}`, `123456789012345`, `1234567890123456`, `9999999999999999`, `-9999999999999999`, `999999999999999`, `-123456789012345`, `12345678901234567890`, `{"a":1,"b":[1,2,{"c":null}]}`,
	`{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"a":1,"A":2}`, `{"A":1}`, `{"é":1}`, `{"":1,"a":2}`, `{"":1,"":2}`,
	`{ "a":1}`, `{"a": 1}`, ` {}`, `{}  `, `{}{}`, `[1,]`, `{"a":1,}`, `{"a"}`, `{"a":}`, `[`, `{`, `"`,
	`"<a>&"`, `"\u003c"`, `"a\"b"`, `"\n"`, "\"\x01\"", "\"\x7f\"", "\"\xff\"", "\"\u2028\"", "\"\ufffd\"", `"é"`,
	`{"k":"v","l":{"m":[true,false,null,"x",-1.25e-3]}}`, `[[[[[[[[[[]]]]]]]]]]`, `nul`, `tru`, `{"a":tru}`,
	strings.Repeat("[", 100) + strings.Repeat("]", 100),
}

func TestCanonicalIsWhatReencodingKeeps(t *testing.T) {
	for _, s := range canonicalSeeds {
		checkCanonical(t, []byte(s))
	}
	for _, s := range []string{`{}`, `{"app_guid":"app"}`, `{"duration_seconds":3600}`, `{"instance_id":"i-1"}`} {
		if !jsonenc.Canonical([]byte(s), jsonenc.CanonicalOptions{EscapeHTML: true, LowerKeys: true, Float64: true}) {
			t.Errorf("Canonical(%q) = false, want true: the common bodies take the short way", s)
		}
	}
}

func FuzzCanonical(f *testing.F) {
	for _, s := range canonicalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkCanonical(t, data) })
}

// BenchmarkCanonical checks the texts it meets most: a request's
// parameters and context, and an execution's input and a Task's output.
func BenchmarkCanonical(b *testing.B) {
	for _, c := range []struct {
		name, data string
		o          jsonenc.CanonicalOptions
	}{
		{"parameters", `{"replicas":3,"size":"small","tags":["a","b"]}`, jsonenc.CanonicalOptions{EscapeHTML: true, LowerKeys: true, Float64: true}},
		{"context", `{"organization_guid":"8f2c7a4e-51d3-4f0b-9a6e-2b7d4c1e9f03","platform":"cloudfoundry","space_guid":"c41d9e27-7b5a-4e8f-a3c2-90f1d6b8e4a7"}`, jsonenc.CanonicalOptions{EscapeHTML: true, LowerKeys: true, Float64: true}},
		{"output", `{"instance_id":"i-1","operation_id":"01a2233e-fda7-717c-bbb2-c0841a402366","result":{"done":false,"outputs":{"ha":true,"port":5432,"standby":null,"tags":["a","b"],"url":"https://x.example/a"},"retry_after":5,"state":"in progress"},"step":"check"}`, jsonenc.CanonicalOptions{EscapeHTML: true}},
	} {
		data := []byte(c.data)
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if !jsonenc.Canonical(data, c.o) {
					b.Fatal("not canonical")
				}
			}
		})
	}
}
