package bolt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
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
	var read, want any
	switch it := it.(type) {
	case operationItem:
		read, want, err = readBoth(got, data, operationItem.operation)
	case instanceItem:
		read, want, err = readBoth(got, data, instanceItem.instance)
	case bindingItem:
		read, want, err = readBoth(got, data, bindingItem.binding)
	case resourceItem:
		read, want, err = readBoth(got, data, resourceItem.resource)
	default:
		t.Fatalf("%T: no check of its binary form", it)
	}
	if err != nil {
		t.Fatalf("%T: %v", it, err)
	}
	if !reflect.DeepEqual(read, want) {
		t.Fatalf("%T:\n got %+v\nwant %+v", it, read, want)
	}
	return true
}

// readBoth reads an item from its binary form, bin, and from its JSON,
// with json.Unmarshal, as the store read it before.
func readBoth[I, D any](bin, data []byte, domain func(I) D) (fromBin, fromJSON D, err error) {
	var it I
	if err := json.Unmarshal(data, &it); err != nil {
		return fromBin, fromJSON, fmt.Errorf("written in binary, where its JSON does not read back: %w", err)
	}
	fromBin, err = decode([]byte("k"), bin, domain)
	return fromBin, domain(it), err
}

func TestItemBinReadsAsItsJSON(t *testing.T) {
	at := time.Date(2026, 11, 28, 17, 0, 0, 120000000, time.UTC)
	cases := []itemCase{
		// Of the 16 items, all but the binding with endpoints with the flag
		// set; without it, the instances have metadata and the binding
		// credentials in clear, left to JSON.
		{"plain values are written in binary", "sync-1", "a <b> & c é", `{"a":[1,2.5e3,"x y"],"b":null}`, at, 11},
		// A record's empty data, which JSON refuses, is left to it.
		{"the zero time and empty strings and raw values too", "", "", "", time.Time{}, 9},
		{"a quote, a control character and U+2028 too", "a\"\n\u2028b", "y", `{}`, at, 11},
		{"a time of the year 1678 too", "x", "y", `{}`, time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC), 11},
		// The items without a raw value and a time: the empty target, the
		// instance with an id only (with the flag), the empty record.
		{"raw JSON with spaces is left to JSON", "x", "y", `{"a": 1}`, at, 5},
		{"invalid raw JSON too", "x", "y", `{"a":`, at, 5},
		{"a time outside UTC too", "x", "y", `{}`, at.In(time.FixedZone("x", 3600)), 5},
		{"a time past UnixNano's range too", "x", "y", `{}`, time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC), 5},
		// The empty record alone has no string.
		{"invalid UTF-8 too", "a\xffb", "y", `{}`, at, 2},
		// Layout 6's short forms: a UUID in its 16 bytes, lowercase hex of
		// at least 32 digits in its bytes.
		{"a UUID and a fingerprint in their short forms", "01936f7e-0000-7000-8000-000000000001", strings.Repeat("0956781685a518cf", 4), `{}`, at, 11},
		{"an uppercase UUID, and hex odd, short or in uppercase, as text", "01936F7E-0000-7000-8000-000000000001", "0956781685a518cf0956781685a518cf0", `{}`, at, 11},
		{"hex of 32 digits, and a UUID's digits without dashes", "0956781685a518cf0956781685a518cf", "01936f7e0000700080000000000000010", `{}`, at, 11},
		{"hex in uppercase", "0956781685A518CF0956781685A518CF", "01936f7e-0000-7000-8000-00000000000", `{}`, at, 11},
		// Raw values that are sealed values as the sealing store writes
		// them: in their binary form (formSealed), short and long.
		{"a sealed value in its binary form", "x", "y", `{"v":1,"alg":"A256GCM","kid":"k1","ctx":"5MEBTXF0ZLw=","nonce":"9zItlJLuBIz9IfeC","ct":"twka/vJLJvEG+zrNGhHfAA=="}`, at, 11},
		{"a long sealed value too", "x", "y", `{"v":1,"alg":"KMS+A256GCM","kid":"arn:aws:kms:eu-west-1:111122223333:key/x","dk":"` + strings.Repeat("AAAA", 60) + `","ctx":null,"nonce":"9zItlJLuBIz9IfeC","ct":"` + strings.Repeat("twka/vJLJvEG+zrNGhHf", 30) + `"}`, at, 11},
	}
	runItemCases(t, cases, checkItemBin, "written in binary")
}

func TestItemBinRefusesWhatItDidNotWrite(t *testing.T) {
	for name, bad := range map[string][]byte{
		"an unknown tag":                    {binMark, 0xff},
		"a string longer than the item":     {binMark, opID, 9, 'a'},
		"a time cut short":                  {binMark, opCreatedAt, 0x80},
		"a target's field outside a target": {binMark, opTargetPlanID, 1, 'p'},
		"a UUID cut short":                  {binMark, opID | formUUID, 1, 2, 3},
		"hex shorter than a fingerprint":    {binMark, opID | formHex, 2, 0xab, 0xcd},
		"a time in a string's form":         {binMark, opCreatedAt | formUUID, 2},
		"an integer in a string's form":     {binMark, opRetryAfter | formHex, 2},
		"a flag in a string's form":         {binMark, opInstanceUsable | formHex, 1},
		"raw JSON in a string's form":       {binMark, opTarget, opTargetParameters | formUUID, 2, '{', '}'},
		"a mark in a string's form":         {binMark, opAsync | formUUID},
		"a sealed value cut short":          {binMark, opTarget, opTargetParameters | formSealed, 3, 1, 1, 0},
		"a string in a sealed value's form": {binMark, opID | formSealed, 1, 'a'},
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
	f.Add("01936f7e-0000-7000-8000-000000000001", strings.Repeat("0956781685a518cf", 4), []byte(`{}`), int64(1764349200), int64(0), int64(1), false)
	f.Fuzz(func(t *testing.T, s, u string, raw []byte, sec, nsec, n int64, flag bool) {
		for _, at := range []time.Time{time.Unix(sec, nsec).UTC(), time.Unix(sec, nsec)} {
			for _, it := range items(s, u, raw, at, n, flag) {
				checkItemBin(t, it)
			}
		}
	})
}

// FuzzItemBinRead reads any bytes after the binary form's mark as each
// kind of item: an error or an item, never a panic (a damaged file).
func FuzzItemBinRead(f *testing.F) {
	at := time.Date(2026, 11, 28, 17, 0, 0, 1, time.UTC)
	for _, it := range items("x", "y", []byte(`{"a":1}`), at, 3, true) {
		if w, ok := it.(itemBin); ok {
			if b, ok := w.appendBin(nil); ok {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		data = append([]byte{binMark}, data...)
		key := []byte("k")
		_, _ = decode(key, data, operationItem.operation)
		_, _ = decode(key, data, instanceItem.instance)
		_, _ = decode(key, data, bindingItem.binding)
		_, _ = decode(key, data, resourceItem.resource)
	})
}

// FuzzValidCompact: the items' writers take a raw value only when it is
// valid and compact JSON (as compact and json.Valid say), and take every
// such value that is not nested deep (a deep one goes to jsonenc.Marshal).
func FuzzValidCompact(f *testing.F) {
	for _, v := range []string{`{"a":[1,2,{"b":"c\"d\u00e9"}]}`, `{"a": 1}`, `[1,2`, `"\ud800"`, `1e5`, `{"a":1}x`, "\"\x01\"", `{}`, `null`} {
		f.Add([]byte(v))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		want := compact(v) && json.Valid(v)
		got := validCompact(v)
		if got && !want {
			t.Fatalf("%q taken: it is not valid and compact JSON", v)
		}
		if want && !got && bytes.Count(v, []byte("["))+bytes.Count(v, []byte("{")) < 100 {
			t.Fatalf("%q, valid and compact, not taken", v)
		}
	})
}

// compact reports whether v has no whitespace outside its strings (when
// it is valid JSON: json.Valid checks that): with json.Valid, the
// reference validCompact is held to.
func compact(v []byte) bool {
	inString := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case inString && c == '\\':
			i++
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return false
		}
	}
	return true
}

// TestItemsKeepTheirShortForms: a record's sealed value is kept in its
// binary form, and an operation's UUIDs and fingerprint in theirs, so that
// each item is smaller than with the text (layout 5).
func TestItemsKeepTheirShortForms(t *testing.T) {
	sealed := json.RawMessage(`{"v":1,"alg":"A256GCM","kid":"k20261128T212712.353951045Z-14d3626e","ctx":"5MEBTXF0ZLw=","nonce":"9zItlJLuBIz9IfeC","ct":"` +
		strings.Repeat("twka/vJLJvEG+zrNGhHf", 8) + `"}`)
	rec, _ := resourceItem{InstanceID: "i-1", Name: "instance", Data: sealed}.appendBin(nil)
	if !bytes.Contains(rec, []byte{resData | formSealed}) || len(rec) > len(sealed)*3/4 {
		t.Errorf("a record of %d bytes of sealed JSON: % x (%d bytes), want its value in the binary form", len(sealed), rec, len(rec))
	}
	id, fp := "01936f7e-0000-7000-8000-000000000001", strings.Repeat("0956781685a518cf", 4)
	op, _ := operationItem{ID: id, Fingerprint: fp, PlanID: id}.appendBin(nil)
	if want := 1 + (1 + 16) + (2 + 32) + (1 + 16); len(op) != want {
		t.Errorf("an operation with two UUIDs and a fingerprint: % x (%d bytes), want %d", op, len(op), want)
	}
}
