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
		// FromBinary grows its buffer once, to the JSON's length: a buffer
		// with room for the JSON is not grown, and a nil one once.
		if again, _ := envelope.FromBinary(make([]byte, 0, len(data)), bin); cap(again) != len(data) {
			t.Errorf("%s: FromBinary grew a buffer of the JSON's length", data)
		}
		if n := testing.AllocsPerRun(10, func() { _, _ = envelope.FromBinary(nil, bin) }); !raceEnabled && n != 1 {
			t.Errorf("%s: FromBinary allocated %.0f times, want once", data, n)
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
			if again, _ := envelope.FromBinary(make([]byte, 0, len(data)), bin); cap(again) != len(data) {
				t.Fatalf("%q: FromBinary grew a buffer of the JSON's length (its own sizing is not the JSON's length)", data)
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
