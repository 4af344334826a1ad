package bolt

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// checkItemRead fails t when what the reader reads from data is not what
// json.Unmarshal reads; it reports whether the reader took data.
func checkItemRead[I any, P interface {
	*I
	itemRead
}](t *testing.T, data []byte) bool {
	t.Helper()
	var got, want I
	if !P(&got).readJSON(data) {
		return false
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("%T: read from %s, which json.Unmarshal refuses: %v", got, data, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%T from %s:\n got %#v\nwant %#v", got, data, got, want)
	}
	return true
}

func TestItemReadIsJSONUnmarshals(t *testing.T) {
	at := time.Date(2026, 11, 28, 17, 0, 0, 120000000, time.UTC)
	// What the writer writes is read here, every field set or none.
	for _, flag := range []bool{true, false} {
		for _, it := range items("sync-1", "a <b> & c é", []byte(`{"a":[1,"x y"]}`), at, 42, flag) {
			data, ok := it.appendJSON(nil)
			if !ok {
				continue
			}
			var taken bool
			switch it.(type) {
			case instanceItem:
				taken = checkItemRead[instanceItem](t, data)
			case resourceItem:
				taken = checkItemRead[resourceItem](t, data)
			default:
				continue
			}
			if !taken {
				t.Errorf("%T %s left to json.Unmarshal", it, data)
			}
		}
	}
	instance := `{"id":"i","service_id":"s","plan_id":"p","metadata":{},"state":"provisioned","binding_ops":2,"fingerprint":"f","version":3,"created_at":"2026-11-28T17:00:00.12Z","updated_at":"2026-11-28T17:00:00Z"}`
	for _, c := range []struct {
		name, data string
		taken      bool
	}{
		{"an instance as the writer writes it is read here", instance, true},
		{"a key out of the writer's order too", `{"state":"s","id":"i"}`, true},
		{"an escaped string is left to json.Unmarshal", `{"id":"a\"b"}`, false},
		{"whitespace too", `{"id": "i"}`, false},
		{"an unknown key too (json.Unmarshal matches keys without case)", `{"ID":"i"}`, false},
		{"a key twice too", `{"id":"a","id":"b"}`, false},
		{"metadata with labels too", `{"metadata":{"labels":{"a":"b"}}}`, false},
		{"a time with an offset too", `{"created_at":"2026-11-28T18:00:00+01:00"}`, false},
		{"a time not as MarshalJSON writes it too", `{"created_at":"2026-11-28T17:00:00.100Z"}`, false},
		{"null for a raw value too", `{"parameters":null}`, true},
		{"null for a string is left to json.Unmarshal", `{"id":null}`, false},
		{"a float for an int too", `{"version":1.0}`, false},
		{"a number with a leading zero too", `{"version":01}`, false},
		{"bytes after the object too", `{"id":"i"} `, false},
		{"an object not closed too", `{"id":"i"`, false},
		{"a trailing comma too", `{"id":"i",}`, false},
		{"invalid raw JSON too", `{"parameters":{"a":}}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := checkItemRead[instanceItem](t, []byte(c.data)); got != c.taken {
				t.Errorf("read here: %v, want %v", got, c.taken)
			}
		})
	}
}

func FuzzItemRead(f *testing.F) {
	at := time.Date(2026, 11, 28, 17, 0, 0, 120000000, time.UTC)
	for _, it := range items("sync-1", "y", []byte(`{"a":[1,"x y"]}`), at, 42, true) {
		if data, ok := it.appendJSON(nil); ok {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"id":"a","id":"b"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkItemRead[instanceItem](t, data)
		checkItemRead[resourceItem](t, data)
	})
}

// BenchmarkItemRead reads an instance item (as a bind's read and its
// write's conditions do) here and through json.Unmarshal.
func BenchmarkItemRead(b *testing.B) {
	data := []byte(`{"id":"sync-0","service_id":"4618c717-e0da-4a48-8d9c-b1f789bf2f5e","plan_id":"e3daf424-4de7-4619-b0ff-5de8cd16cc5e","organization_guid":"o","space_guid":"s","parameters":{},"maintenance_info":{"version":"1.0.0"},"plan_digest":"sha256:61f69c552cb7424d92f8c59d61f69c552cb7424d92f8c59d","metadata":{},"state":"provisioned","last_op":"01a2233e-fda7-717c-bbb2-c0841a402366","binding_ops":2000,"fingerprint":"61f69c552cb7424d92f8c59d61f69c552cb7424d92f8c59d","version":2001,"created_at":"2026-11-28T17:41:00.449736665Z","updated_at":"2026-11-28T17:41:00.449736665Z"}`)
	b.Run("here", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var it instanceItem
			if !it.readJSON(data) {
				b.Fatal("left to json.Unmarshal")
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var it instanceItem
			if err := json.Unmarshal(data, &it); err != nil {
				b.Fatal(err)
			}
		}
	})
}
