package steps

import (
	"encoding/json"
	"reflect"
	"testing"
)

// payloadCases are payloads the short way reads and payloads it leaves to
// json.Unmarshal, which must decode all the same.
var payloadCases = []string{
	`{"step":"begin","operation_id":"op-1","instance_id":"i-1","execution_input":{"instance_id":"i-1","kind":"provision"}}`,
	`{"step":"check","operation_id":"op-1","instance_id":"i-1","execution_input":{"instance_id":"i-1","binding_id":"b-1","kind":"bind"}}`,
	`{"step":"record_failure","operation_id":"op-1","instance_id":"i-1","error":"PermanentError","cause":"{\"description\":\"no\"}"}`,
	`{"step":"cleanup_delete","detached_id":"d-1"}`,
	`{"step":"reap"}`,
	`{}`,
	`{"step":"begin","step":"check"}`,
	`{"execution_input":{"instance_id":"a"},"execution_input":{"kind":"bind"}}`,
	`{"execution_input":null}`,
	`{"execution_input":{}}`,
	`{"Step":"begin","INSTANCE_ID":"i"}`,
	`{"step": "begin"}`,
	` {"step":"begin"}`,
	`{"step":"begin"} `,
	`{"step":"be\u0067in"}`,
	`{"step":"caf` + "\xe9" + `"}`,
	`{"step":"café ☃"}`,
	`{"step":"begin","part":2,"budget":3,"dry_run":true,"lane_index":1}`,
	`{"step":"upgrade_plan","campaign_id":"c","options":{"concurrency":2}}`,
	`{"step":null}`,
	`{"step":1}`,
	`{"step":"begin",}`,
	`{"step":"begin"`,
	`{"step":"begin"}x`,
	`{"step":"a` + "\n" + `b"}`,
	`[]`,
	`null`,
	``,
}

func TestDecodePayloadIsJSONUnmarshal(t *testing.T) {
	for _, c := range payloadCases {
		checkDecodePayload(t, []byte(c))
	}
}

func FuzzDecodePayload(f *testing.F) {
	for _, c := range payloadCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkDecodePayload(t, data) })
}

func checkDecodePayload(t *testing.T, data []byte) {
	t.Helper()
	var want Payload
	wantErr := json.Unmarshal(data, &want)
	got, err := decodePayload(data)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%q: error %v, json.Unmarshal's %v", data, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: decoded %+v, json.Unmarshal %+v", data, got, want)
	}
}

// TestDecodePayloadOfAnOperationStepCopiesItOnce pins the short way's cost
// on the payload every operation Task gets: the text copied once, and the
// execution's input.
func TestDecodePayloadOfAnOperationStepCopiesItOnce(t *testing.T) {
	data := []byte(payloadCases[1])
	if n := testing.AllocsPerRun(100, func() { _, _ = decodePayload(data) }); n > 2 {
		t.Fatalf("decoding an operation step's payload allocates %v times, want at most 2", n)
	}
}

// BenchmarkDecodePayload decodes an operation step's payload the short way.
func BenchmarkDecodePayload(b *testing.B) {
	data := []byte(payloadCases[1])
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := decodeShort(data); !ok {
			b.Fatal("left to json.Unmarshal")
		}
	}
}

// BenchmarkDecodePayloadOfIDs decodes an operation step's payload with
// the ids a platform and the broker make (GUIDs, ULIDs).
func BenchmarkDecodePayloadOfIDs(b *testing.B) {
	data := []byte(`{"step":"check","operation_id":"01a2233e-fda7-717c-bbb2-c0841a402366","instance_id":"8f2c7a4e-51d3-4f0b-9a6e-2b7d4c1e9f03","execution_input":{"instance_id":"8f2c7a4e-51d3-4f0b-9a6e-2b7d4c1e9f03","binding_id":"c41d9e27-7b5a-4e8f-a3c2-90f1d6b8e4a7","kind":"bind"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := decodeShort(data); !ok {
			b.Fatal("left to json.Unmarshal")
		}
	}
}
