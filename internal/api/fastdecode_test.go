package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// fastDecodeCases are bodies of each shape readFast meets: the plain ones
// it reads, and the ones it must leave to json.Unmarshal (escapes, keys in
// another case or unknown, values of another type, null, invalid UTF-8,
// duplicates, nesting, whitespace, a body large enough for a copy a field).
var fastDecodeCases = []string{
	`{}`,
	` { } `,
	`{"service_id":"s","plan_id":"p","bind_resource":{"app_guid":"app"}}`,
	`{"service_id":"s","plan_id":"p","organization_guid":"o","space_guid":"s","parameters":{}}`,
	"{\n\t\"service_id\" : \"s\" ,\r\n \"plan_id\":\"p\" , \"parameters\" : {\"a\":[1,{\"b\":\"}\"}],\"c\":\"x\\\"y\"} }\n",
	`{"service_id":"s","service_id":"t"}`,
	`{"service_id":null,"plan_id":"p","context":null,"parameters":null}`,
	`{"service_id":"s","SERVICE_ID":"t"}`,
	`{"Service_Id":"s"}`,
	`{"service_id":"a\"b"}`,
	`{"service_id":"a\u00e9b"}`,
	`{"service_id":"é ☃ 🙂"}`,
	"{\"service_id\":\"\xff\"}",
	`{"service_id":42}`,
	`{"service_id":true,"plan_id":"p"}`,
	`{"service_id":{"x":1}}`,
	`{"service_id":["x"]}`,
	`{"parameters":"x","context":[1,2],"bind_resource":42}`,
	`{"parameters":-1.5e3,"context":true,"bind_resource":false}`,
	`{"unknown":"x","service_id":"s"}`,
	`{"service_id":"s","maintenance_info":{"version":"1.0"}}`,
	`{"app_guid":"a","route":"r","predecessor_binding_id":"b"}`,
	`{"app_guid":"","route":null}`,
	`{"\u0073ervice_id":"s"}`,
	`[]`,
	`"x"`,
	`null`,
	`{"service_id":"s","plan_id":"p","parameters":{"big":"` + strings.Repeat("x", 2000) + `"},"space_guid":"g"}`,
}

// TestFastDecodeIsUnmarshal holds readFast to json.Unmarshal: on every
// body it reads, each body type ends as json.Unmarshal leaves it, and on
// every body it does not, it leaves the body empty for json.Unmarshal.
func TestFastDecodeIsUnmarshal(t *testing.T) {
	read := 0
	for _, data := range fastDecodeCases {
		read += checkFastDecode(t, []byte(data))
	}
	if read < 10 {
		t.Errorf("readFast read %d of the bodies, want most of the plain ones", read)
	}
}

func FuzzFastDecodeIsUnmarshal(f *testing.F) {
	for _, data := range fastDecodeCases {
		f.Add([]byte(data))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkFastDecode(t, data) })
}

// checkFastDecode checks readFast on data for each body type, as
// decodeBody calls it (only on valid JSON), and returns how many read it.
func checkFastDecode(t *testing.T, data []byte) int {
	t.Helper()
	if !json.Valid(data) {
		return 0
	}
	read := 0
	for _, pair := range [][2]fastBody{
		{&bindBody{}, &bindBody{}},
		{&provisionBody{}, &provisionBody{}},
		{&bindResourceBody{}, &bindResourceBody{}},
	} {
		fast, std := pair[0], pair[1]
		if !fast.readFast(data) {
			if !reflect.ValueOf(fast).Elem().IsZero() {
				t.Errorf("%T: readFast(%q) failed and left %+v, want it empty", fast, data, fast)
			}
			continue
		}
		read++
		if err := json.Unmarshal(data, std); err != nil {
			t.Errorf("%T: readFast(%q) read what json.Unmarshal refuses: %v", fast, data, err)
			continue
		}
		if !reflect.DeepEqual(fast, std) {
			t.Errorf("%T: readFast(%q) = %+v, json.Unmarshal %+v", fast, data, describe(fast), describe(std))
		}
	}
	return read
}

// describe shows a body's pointers as the strings they point to.
func describe(b any) string {
	out, _ := json.Marshal(b)
	return string(out)
}

// BenchmarkReadFast reads the bodies platforms send, compact and printed
// with spaces, the short way (for comparing readers, not a figure of its
// own).
func BenchmarkReadFast(b *testing.B) {
	for _, c := range []struct{ name, data string }{
		{"provision", `{"service_id":"4618c717-e0da-4a48-8d9c-b1f789bf2f5e","plan_id":"e3daf424-4de7-4619-b0ff-5de8cd16cc5e","organization_guid":"org-guid","space_guid":"space-guid","parameters":{"size":"small","tags":["a","b"],"replicas":3},"context":{"platform":"cloudfoundry","organization_guid":"org-guid"}}`},
		{"bind spaced", "{\n  \"service_id\": \"4618c717-e0da-4a48-8d9c-b1f789bf2f5e\",\n  \"plan_id\": \"e3daf424-4de7-4619-b0ff-5de8cd16cc5e\",\n  \"bind_resource\": { \"app_guid\": \"app\" },\n  \"parameters\": { \"role\": \"reader\" }\n}\n"},
	} {
		data := []byte(c.data)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var p provisionBody
				var bb bindBody
				if !p.readFast(data) && !bb.readFast(data) {
					b.Fatal("left to json.Unmarshal")
				}
			}
		})
	}
}
