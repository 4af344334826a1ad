package sealing

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/serverless-osb/broker/internal/sealing/envelope"
)

// TestBinaryGivesBackTheJSON: every envelope the sealing store writes
// (marshalSealed) of a known algorithm, without a KMS context, with a key
// id JSON writes as it is, is taken, and comes back byte for byte; the
// others are not taken.
func TestBinaryGivesBackTheJSON(t *testing.T) {
	taken := 0
	for _, s := range envelopes() {
		data, err := marshalSealed(s)
		if err != nil {
			continue
		}
		bin, ok := envelope.AppendBinary([]byte("prefix"), data)
		want := (s.Alg == AlgLocal || s.Alg == AlgKMS) && s.KMSContext == nil && envelope.PlainText(s.KeyID) &&
			s.Nonce != nil && s.Ciphertext != nil
		if ok != want {
			t.Errorf("%s: taken %v, want %v", data, ok, want)
		}
		if !ok {
			if string(bin) != "prefix" {
				t.Errorf("%s: not taken, and b is %q", data, bin)
			}
			continue
		}
		taken++
		if !bytes.HasPrefix(bin, []byte("prefix")) {
			t.Fatalf("%s: the prefix is gone", data)
		}
		bin = bin[len("prefix"):]
		got, err := envelope.FromBinary([]byte("x"), bin)
		if err != nil || string(got) != "x"+string(data) {
			t.Errorf("%s: gave back %s, %v", data, got, err)
		}
		if n := envelope.JSONLen(bin); n < len(data) {
			t.Errorf("%s: JSONLen %d, the JSON is %d", data, n, len(data))
		}
	}
	if taken == 0 {
		t.Fatal("no envelope taken")
	}
}

// A sealed value as the demo broker keeps it: the binary form is about
// two thirds of the JSON.
func TestBinaryIsSmaller(t *testing.T) {
	l := newLocal(t, "k20261128T212712.353951045Z-14d3626e")
	s, err := l.Seal(t.Context(), bytes.Repeat([]byte("x"), 100), map[string]string{"instance_id": "i"})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := marshalSealed(s)
	bin, ok := envelope.AppendBinary(nil, data)
	if !ok || len(bin)*3 > len(data)*2 {
		t.Errorf("the binary form of %d bytes of JSON: %d bytes (taken %v), want at most two thirds", len(data), len(bin), ok)
	}
	t.Logf("%d bytes of JSON, %d in binary", len(data), len(bin))
}

func TestBinaryRefusesWhatItCannotGiveBack(t *testing.T) {
	const good = `{"v":1,"alg":"A256GCM","kid":"k1","ctx":"5MEBTXF0ZLw=","nonce":"9zItlJLuBIz9IfeC","ct":"twka/vJLJvEG+zrNGhHfAA=="}`
	if _, ok := envelope.AppendBinary(nil, []byte(good)); !ok {
		t.Fatal("the good envelope is not taken")
	}
	for name, data := range map[string]string{
		"padding bits not zero":      `{"v":1,"alg":"A256GCM","kid":"k1","ctx":"5MEBTXF0ZLx=","nonce":"9zItlJLuBIz9IfeC","ct":"twka/vJLJvEG+zrNGhHfAA=="}`,
		"base64 without padding":     `{"v":1,"alg":"A256GCM","kid":"k1","ctx":"5MEBTXF0ZLw","nonce":"9zItlJLuBIz9IfeC","ct":"twka/vJLJvEG+zrNGhHfAA=="}`,
		"a version's leading zero":   `{"v":01,"alg":"A256GCM","kid":"k1","ctx":"5MEBTXF0ZLw=","nonce":"9zItlJLuBIz9IfeC","ct":"twka/vJLJvEG+zrNGhHfAA=="}`,
		"another algorithm":          `{"v":1,"alg":"A128GCM","kid":"k1","ctx":"5MEBTXF0ZLw=","nonce":"9zItlJLuBIz9IfeC","ct":"twka/vJLJvEG+zrNGhHfAA=="}`,
		"a space":                    `{"v":1, "alg":"A256GCM","kid":"k1","ctx":"5MEBTXF0ZLw=","nonce":"9zItlJLuBIz9IfeC","ct":"twka/vJLJvEG+zrNGhHfAA=="}`,
		"a key id JSON would escape": `{"v":1,"alg":"A256GCM","kid":"k<1","ctx":"5MEBTXF0ZLw=","nonce":"9zItlJLuBIz9IfeC","ct":"twka/vJLJvEG+zrNGhHfAA=="}`,
		"a KMS context":              `{"v":1,"alg":"KMS+A256GCM","kid":"k1","dk":"AA==","kec":{"a":"b"},"ctx":"5MEBTXF0ZLw=","nonce":"9zItlJLuBIz9IfeC","ct":"twka/vJLJvEG+zrNGhHfAA=="}`,
		"a null nonce":               `{"v":1,"alg":"A256GCM","kid":"k1","ctx":"5MEBTXF0ZLw=","nonce":null,"ct":"twka/vJLJvEG+zrNGhHfAA=="}`,
		"something after":            good + " ",
		"parameters in clear":        `{"size":3}`,
	} {
		if bin, ok := envelope.AppendBinary(nil, []byte(data)); ok {
			t.Errorf("%s: taken (% x)", name, bin)
		}
	}
	bin, _ := envelope.AppendBinary(nil, []byte(good))
	for name, bad := range map[string][]byte{
		"cut short":         bin[:len(bin)-1],
		"a byte after":      append(bytes.Clone(bin), 0),
		"another algorithm": append([]byte{1, 9}, bin[2:]...),
		"an unknown flag":   append(append(bytes.Clone(bin[:5]), 4), bin[6:]...),
		"nothing":           nil,
		"a length past it":  {1, 1, 200},
		"a key id with a <": append([]byte{1, 1, 2, 'k', '<'}, bin[5:]...),
	} {
		if out, err := envelope.FromBinary(nil, bad); err == nil {
			t.Errorf("%s: read as %s", name, out)
		}
	}
}

func FuzzBinary(f *testing.F) {
	for _, s := range envelopes() {
		if data, err := marshalSealed(s); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if bin, ok := envelope.AppendBinary(nil, data); ok {
			got, err := envelope.FromBinary(nil, bin)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%q: gave back %q, %v", data, got, err)
			}
			if n := envelope.JSONLen(bin); n < len(data) {
				t.Fatalf("%q: JSONLen %d", data, n)
			}
			var s Sealed
			if json.Unmarshal(data, &s) != nil {
				t.Fatalf("%q: taken, and not JSON encoding/json reads as a Sealed", data)
			}
		}
		if out, err := envelope.FromBinary(nil, data); err == nil {
			if again, ok := envelope.AppendBinary(nil, out); !ok || !bytes.Equal(again, data) {
				t.Fatalf("% x: read as %s, which gives % x (%v)", data, out, again, ok)
			}
		}
	})
}
