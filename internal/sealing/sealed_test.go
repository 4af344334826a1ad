package sealing

import (
	"bytes"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"
)

// clock is a time that tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func bindingContext(instance, binding string) map[string]string {
	return map[string]string{"instance_id": instance, "binding_id": binding}
}

// mustOpen opens s for ec and checks that it gives want.
func mustOpen(t *testing.T, s Sealer, v Sealed, ec map[string]string, want []byte) {
	t.Helper()
	got, err := s.Open(t.Context(), v, ec)
	if err != nil {
		t.Fatalf("open %v: %v", v, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("open %v: got %q, want %q", v, got, want)
	}
}

// mustFail opens s for ec and checks that it fails with want, and no plaintext.
func mustFail(t *testing.T, s Sealer, v Sealed, ec map[string]string, want error) {
	t.Helper()
	got, err := s.Open(t.Context(), v, ec)
	if !errors.Is(err, want) {
		t.Fatalf("open %v: got error %v, want %v", v, err, want)
	}
	if got != nil {
		t.Fatalf("open %v failed but returned %q", v, got)
	}
}

// roundTrip marshals v as a store would keep it and reads it back.
func roundTrip(t *testing.T, v Sealed) Sealed {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Parse(data)
	if err != nil {
		t.Fatalf("parse %s: %v", data, err)
	}
	return out
}

func TestCanonicalContextTellsContextsApart(t *testing.T) {
	contexts := []map[string]string{
		nil,
		{"a": "bc"},
		{"ab": "c"},
		{"a": "b", "c": ""},
		{"a": "b"},
		{"a": "b\x00c"},
		{"instance_id": "i", "binding_id": "b"},
		{"instance_id": "b", "binding_id": "i"},
	}
	seen := map[string]int{}
	for i, ec := range contexts {
		k := string(canonical(ec))
		if j, ok := seen[k]; ok {
			t.Errorf("contexts %v and %v encode the same", contexts[j], ec)
		}
		seen[k] = i
	}
	if !bytes.Equal(canonical(map[string]string{"x": "1", "y": "2"}), canonical(map[string]string{"y": "2", "x": "1"})) {
		t.Error("equal contexts encode differently")
	}
}

func TestParse(t *testing.T) {
	good := Sealed{Version: 1, Alg: AlgLocal, KeyID: "k", ContextDigest: make([]byte, 8), Nonce: make([]byte, 12), Ciphertext: make([]byte, 16)}
	cases := []struct {
		name   string
		change func(*Sealed)
	}{
		{"a newer format is refused", func(s *Sealed) { s.Version = 2 }},
		{"an unknown algorithm is refused", func(s *Sealed) { s.Alg = "ROT13" }},
		{"a value without a key id is refused", func(s *Sealed) { s.KeyID = "" }},
		{"a short nonce is refused", func(s *Sealed) { s.Nonce = s.Nonce[:8] }},
		{"a ciphertext shorter than its tag is refused", func(s *Sealed) { s.Ciphertext = s.Ciphertext[:15] }},
		{"a KMS value without a data key is refused", func(s *Sealed) { s.Alg = AlgKMS }},
		{"a local value with a data key is refused", func(s *Sealed) { s.DataKey = []byte{1} }},
	}
	if _, err := Parse(mustJSON(t, good)); err != nil {
		t.Fatalf("a well-formed value: %v", err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := good
			c.change(&s)
			if _, err := Parse(mustJSON(t, s)); !errors.Is(err, ErrFormat) {
				t.Fatalf("got %v, want ErrFormat", err)
			}
		})
	}
	t.Run("what is not JSON is refused", func(t *testing.T) {
		if _, err := Parse([]byte("password123")); !errors.Is(err, ErrFormat) {
			t.Fatalf("got %v, want ErrFormat", err)
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestTheShortestSealedValueIsNotTooShort: parseSealed refuses, without
// decoding, anything shorter than minSealedLen; the shortest text that is
// well formed has that length, and is accepted.
func TestTheShortestSealedValueIsNotTooShort(t *testing.T) {
	shortest := `{"v":1,"alg":"A256GCM","kid":"k","nonce":"AAAAAAAAAAAAAAAA","ct":"AAAAAAAAAAAAAAAAAAAAAA=="}`
	if len(shortest) != minSealedLen {
		t.Fatalf("minSealedLen is %d, the shortest well-formed value %d bytes", minSealedLen, len(shortest))
	}
	if _, ok := parseSealed([]byte(shortest)); !ok {
		t.Errorf("parseSealed(%s) = false, want true", shortest)
	}
	if _, ok := parseSealed([]byte(shortest[:len(shortest)-1])); ok {
		t.Errorf("parseSealed of a value cut short = true")
	}
}
