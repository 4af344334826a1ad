package jsonenc

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// stdAny is encoding/json's reading of data into an any, with UseNumber.
func stdAny(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, &json.SyntaxError{}
	}
	return v, nil
}

var anySeeds = []string{
	`{}`, `[]`, `""`, `0`, `-1.5e+3`, `true`, `false`, `null`, `{"a":1,"b":[true,null,"x"],"c":{"d":{}}}`,
	` { "a" : [ 1 , 2 ] , "b" : "c" } `, `{"a":1,"a":2}`, `[[],[[]],{}]`, `{"s":"é ü 日本"}`, `123456789012345678901234567890`,
	`{"a":"\n"}`, `"\u00e9"`, `{"\n":1}`, `["a\"b","\\","\/","\ud83d\ude00","\u0000"]`, "[\"\xff\xfe\"]", `{"a":}`, `[1,]`, `{"a" 1}`, `01`, `1.`, `-`, `tru`, `[1 2]`, `{"a":1}x`, `{"a":1} {"b":2}`,
	"{\"a\":\"\x01\"}", "\"\xff\"", `[` + `]`, `{"services":[{"id":"a","plans":[{"free":true,"metadata":{"cost":9.5}}]}]}`,
}

// TestDecodeAnyReadsAsEncodingJSON: what DecodeAny takes, it reads as
// encoding/json (UseNumber) does; what it leaves, encoding/json reads or
// refuses on its own.
func TestDecodeAnyReadsAsEncodingJSON(t *testing.T) {
	took := 0
	for _, s := range anySeeds {
		got, ok := DecodeAny([]byte(s))
		want, err := stdAny([]byte(s))
		if !ok {
			continue
		}
		took++
		if err != nil {
			t.Errorf("DecodeAny(%s) took a text encoding/json refuses: %v", s, err)
		} else if !reflect.DeepEqual(got, want) {
			t.Errorf("DecodeAny(%s) = %#v, encoding/json %#v", s, got, want)
		}
	}
	if took < 15 {
		t.Errorf("DecodeAny took %d of the seeds: the short way should take most", took)
	}
	if _, ok := DecodeAny([]byte(`{"\n":1}`)); ok {
		t.Error("DecodeAny took a key with an escape, which it leaves to encoding/json")
	}
	if v, ok := DecodeAny([]byte(`{"a":"x\"y\u00e9\n","b":"\ud800"}`)); !ok || !reflect.DeepEqual(v, map[string]any{"a": "x\"yé\n", "b": "\ufffd"}) {
		t.Errorf("string values with escapes: %#v, %v", v, ok)
	}
}

func FuzzDecodeAny(f *testing.F) {
	for _, s := range anySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := DecodeAny(data)
		if !ok {
			return
		}
		want, err := stdAny(data)
		if err != nil {
			t.Fatalf("DecodeAny(%q) took a text encoding/json refuses: %v", data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("DecodeAny(%q) = %#v, encoding/json %#v", data, got, want)
		}
	})
}
