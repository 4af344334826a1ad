package local

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

var compactSeeds = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `-1.5e+10`, `1E5`, `01`, `1.`, `"x"`, `""`, `"é"`,
	`{"instance_id":"i-1"}`, `{"b":1,"a":[1,"two",{"c":null,"d":true}]}`, `{"a":1,"a":2}`, `{"a":{"a":[]}}`,
	`{ "a":1}`, `[1,]`, `{"a":1,}`, `{"a"}`, `{"a":}`, `[`, `{`, `"`, `"a\"b"`, `"\n"`, "\"\x01\"", "\"\xff\"",
	`{}{}`, `{} `, `nul`, `tru`, `{"a":tru}`, `[1 ,2]`,
	strings.Repeat("[", 70) + strings.Repeat("]", 70),
}

// decodeLong is decodeValue's long way: the Decoder.
func decodeLong(data []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, false
	}
	return v, true
}

// checkCompact fails when decodeCompact takes a text that the Decoder
// refuses or reads otherwise.
func checkCompact(t *testing.T, data []byte) {
	got, ok := decodeCompact(data)
	if !ok {
		return
	}
	want, wok := decodeLong(data)
	if !wok || !reflect.DeepEqual(got, want) {
		t.Errorf("decodeCompact(%q) = %#v; the Decoder: %#v (valid: %v)", data, got, want, wok)
	}
}

func TestDecodeCompactIsTheDecoders(t *testing.T) {
	for _, s := range compactSeeds {
		checkCompact(t, []byte(s))
	}
	for _, s := range []string{`{"instance_id":"i-1"}`, `{"a":[1,-2.5e3,true,null,"x"],"b":{}}`} {
		if _, ok := decodeCompact([]byte(s)); !ok {
			t.Errorf("decodeCompact(%q) took the long way", s)
		}
	}
}

func FuzzDecodeCompact(f *testing.F) {
	for _, s := range compactSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkCompact(t, data) })
}

// workerAnswer is a worker's answer as the engine stores it.
const workerAnswer = `{"instance_id":"i-1","operation_id":"01a2233e-fda7-717c-bbb2-c0841a402366","step":"check","result":{"done":false,"retry_after":5,"state":"in progress","outputs":{"url":"https://x.example/a","port":5432,"tags":["a","b"],"ha":true,"standby":null}}}`

// TestDecodeCompactAllocatesItsValuesAndOneCopy pins the short way's cost
// on a worker's answer: its maps, lists, boxed strings and numbers, and
// one copy of the text for all of its strings.
func TestDecodeCompactAllocatesItsValuesAndOneCopy(t *testing.T) {
	data := []byte(workerAnswer)
	if n := testing.AllocsPerRun(100, func() { _, _ = decodeCompact(data) }); n > 20 {
		t.Fatalf("decoding a worker's answer allocates %v times, want at most 20", n)
	}
}

// BenchmarkDecodeCompact decodes a worker's answer and a stored execution
// input the short way.
func BenchmarkDecodeCompact(b *testing.B) {
	data := []byte(workerAnswer)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := decodeCompact(data); !ok {
			b.Fatal("took the long way")
		}
	}
}
