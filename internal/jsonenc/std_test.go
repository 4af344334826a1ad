package jsonenc

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

var marshalSeeds = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-1.5e+10`, `"x"`, `""`,
	`{"b":1,"a":[1,"two",{"c":null,"d":true}],"é":"ü"}`, `{"html":"<a>&</a>","nl":"a\nb","q":"\"","bs":"\\"}`,
	`{"ctl":"\u0001\u001f","ls":"\u2028\u2029","bad":"\ud800"}`, `{"instance_id":"i-1","Payload":{"x":[[],{}]}}`,
	"{\"invalid\":\"\xff\"}", `{"bf":"\b\f\u007f\t\r","more":"a\u2029b\u0000"}`, `{"B":1,"a":2,"_":3,"":4}`,
}

// TestMarshalValueIsJSONMarshal: what MarshalValue writes is what
// json.Marshal writes, for values decoded as the local engine decodes them and a
// few it builds itself.
func TestMarshalValueIsJSONMarshal(t *testing.T) {
	for _, s := range marshalSeeds {
		checkMarshalValue(t, []byte(s))
	}
	for _, v := range []any{json.Number(""), json.Number("01"), 1.5, 3, map[string]string{"a": "<"}, []any(nil), map[string]any(nil),
		map[string]any{"n": json.Number("12"), "f": 2.0, "l": []string{"x"}},
		map[string]any{"port": 5432, "min": int64(math.MinInt64), "max": uint64(math.MaxUint64), "i32": int32(-7), "u": uint(9),
			"list": []any{0, -1, int64(math.MaxInt64)}, "i8": int8(-8), "u16": uint16(16)}} {
		want, werr := json.Marshal(v)
		got, gerr := MarshalValue(v)
		if !bytes.Equal(got, want) || (werr == nil) != (gerr == nil) {
			t.Errorf("MarshalValue(%#v) = %q, %v; json.Marshal: %q, %v", v, got, gerr, want, werr)
		}
	}
}

func checkMarshalValue(t *testing.T, data []byte) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return
	}
	want, werr := json.Marshal(v)
	got, gerr := MarshalValue(v)
	if !bytes.Equal(got, want) || (werr == nil) != (gerr == nil) {
		t.Errorf("MarshalValue of %q = %q, %v; json.Marshal: %q, %v", data, got, gerr, want, werr)
	}
}

func FuzzMarshalValue(f *testing.F) {
	for _, s := range marshalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkMarshalValue(t, data) })
}
