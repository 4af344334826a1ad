package bolt

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/jsonenc"
)

// checkItemBin fails t when an item's binary form reads back other than
// its JSON does (jsonenc.Marshal, then json.Unmarshal: what the store
// wrote and read before), or when its JSON fails where the binary form
// did not.
func checkItemBin(t *testing.T, it itemJSON) (taken bool) {
	t.Helper()
	w, ok := it.(itemBin)
	if !ok {
		return false
	}
	got, ok := w.appendBin(nil)
	if !ok {
		return false
	}
	data, err := jsonenc.Marshal(it)
	if err != nil {
		t.Fatalf("%T: written in binary, where jsonenc.Marshal fails: %v", it, err)
	}
	switch it.(type) {
	case operationItem:
		var fromJSON operationItem
		if err := json.Unmarshal(data, &fromJSON); err != nil {
			t.Fatalf("%T: written in binary, where its JSON does not read back: %v", it, err)
		}
		read, err := decode([]byte("k"), got, operationItem.operation)
		if err != nil {
			t.Fatalf("%T: %v", it, err)
		}
		if want := fromJSON.operation(); !reflect.DeepEqual(read, want) {
			t.Fatalf("%T:\n got %+v\nwant %+v", it, read, want)
		}
	case instanceItem:
		var fromJSON instanceItem
		if err := json.Unmarshal(data, &fromJSON); err != nil {
			t.Fatalf("%T: written in binary, where its JSON does not read back: %v", it, err)
		}
		read, err := decode([]byte("k"), got, instanceItem.instance)
		if err != nil {
			t.Fatalf("%T: %v", it, err)
		}
		if want := fromJSON.instance(); !reflect.DeepEqual(read, want) {
			t.Fatalf("%T:\n got %+v\nwant %+v", it, read, want)
		}
	default:
		t.Fatalf("%T: no check of its binary form", it)
	}
	return true
}

func TestItemBinReadsAsItsJSON(t *testing.T) {
	at := time.Date(2026, 11, 28, 17, 0, 0, 120000000, time.UTC)
	cases := []struct {
		name  string
		s, u  string
		raw   string
		at    time.Time
		taken int
	}{
		// The operation with every field and the one with an empty target,
		// with the flag set and not, and the two instances with the flag
		// set (without it, they have metadata, left to JSON).
		{"plain values are written in binary", "sync-1", "a <b> & c é", `{"a":[1,2.5e3,"x y"],"b":null}`, at, 6},
		{"the zero time and empty strings and raw values too", "", "", "", time.Time{}, 6},
		{"a quote, a control character and U+2028 too", "a\"\n\u2028b", "y", `{}`, at, 6},
		{"a time of the year 1678 too", "x", "y", `{}`, time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC), 6},
		// The empty target has no raw value, no string and no time; the
		// instance with an id only, no raw value and no time.
		{"raw JSON with spaces is left to JSON", "x", "y", `{"a": 1}`, at, 3},
		{"invalid raw JSON too", "x", "y", `{"a":`, at, 3},
		{"invalid UTF-8 too, in every item", "a\xffb", "y", `{}`, at, 0},
		{"a time outside UTC too", "x", "y", `{}`, at.In(time.FixedZone("x", 3600)), 3},
		{"a time past UnixNano's range too", "x", "y", `{}`, time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC), 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			taken := 0
			for _, flag := range []bool{true, false} {
				for _, it := range items(c.s, c.u, []byte(c.raw), c.at, 42, flag) {
					if checkItemBin(t, it) {
						taken++
					}
				}
			}
			if taken != c.taken {
				t.Errorf("%d items written in binary, want %d", taken, c.taken)
			}
		})
	}
}

func TestItemBinRefusesWhatItDidNotWrite(t *testing.T) {
	for name, bad := range map[string][]byte{
		"an unknown tag":                    {binMark, 0xff},
		"a string longer than the item":     {binMark, opID, 9, 'a'},
		"a time cut short":                  {binMark, opCreatedAt, 0x80},
		"a target's field outside a target": {binMark, opTargetPlanID, 1, 'p'},
	} {
		if _, err := decode([]byte("k"), bad, operationItem.operation); err == nil {
			t.Errorf("%s: read without an error", name)
		}
	}
}

func FuzzItemBin(f *testing.F) {
	f.Add("sync-1", "a <b> & c", []byte(`{"a":[1,2]}`), int64(1764349200), int64(120000000), int64(3), true)
	f.Add("a\"b", "\u2028", []byte(` {"a": 1}`), int64(-62135596800), int64(0), int64(-1), false)
	f.Add("x", "y", []byte(nil), int64(253402300800), int64(1), int64(0), true)
	f.Fuzz(func(t *testing.T, s, u string, raw []byte, sec, nsec, n int64, flag bool) {
		for _, at := range []time.Time{time.Unix(sec, nsec).UTC(), time.Unix(sec, nsec)} {
			for _, it := range items(s, u, raw, at, n, flag) {
				checkItemBin(t, it)
			}
		}
	})
}
