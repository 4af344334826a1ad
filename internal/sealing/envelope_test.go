package sealing

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// envelopes are Sealed values of every shape the codec must treat as
// encoding/json does: both algorithms, nil, empty and full byte fields,
// key ids that json.Marshal escapes, a KMS context.
func envelopes() []Sealed {
	rng := rand.New(rand.NewPCG(1, 2))
	bytesOf := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	}
	var out []Sealed
	for _, alg := range []string{AlgLocal, AlgKMS, "", "other"} {
		for _, kid := range []string{"k20260101T000000.000000000Z-1a2b3c4d", "arn:aws:kms:eu-west-1:1:key/x", "", `a"b`, `a\b`, "a<b&c>", "é", "\x01", "\x7f"} {
			for _, n := range []int{-1, 0, 1, 12, 45} {
				var f []byte
				if n >= 0 {
					f = bytesOf(n)
				}
				s := Sealed{Version: rng.IntN(3), Alg: alg, KeyID: kid, ContextDigest: f, Nonce: bytesOf(nonceSize), Ciphertext: bytesOf(tagSize + n + 1)}
				if alg == AlgKMS {
					s.DataKey = f
				}
				if n == 12 {
					s.KMSContext = map[string]string{"instance": "i<1>", "binding": "b"}
				}
				if n == 45 {
					s.Nonce, s.Ciphertext = nil, f
				}
				out = append(out, s)
			}
		}
	}
	return out
}

// variants are texts near data that the direct reader must leave to
// encoding/json (or read as it does): other spacing, case, order,
// escapes, duplicates, truncations, trailing bytes, wrong types.
func variants(data []byte) [][]byte {
	s := string(data)
	out := [][]byte{data, []byte(s + " "), []byte(" " + s), []byte(s + "x"), []byte(s + "{}"), []byte(`null`), []byte(`{}`)}
	for _, r := range []struct{ old, new string }{
		{`"v":1`, `"v":01`}, {`"v":1`, `"v":-1`}, {`"v":1`, `"v":1.0`}, {`"v":1`, `"v":1e0`}, {`"v":1`, `"v":"1"`},
		{`"v":1`, `"v":1234567890123`}, {`"v":1`, `"V":1`}, {`"alg"`, `"ALG"`}, {`"kid"`, `"Kid"`},
		{`,"ctx":`, `, "ctx":`}, {`"ctx":"`, `"ctx":"\u0041`}, {`"ct":"`, `"ct":"A`}, {`"ct":"`, `"ct":"====`},
		{`"nonce":"`, `"nonce":null,"nonce":"`}, {`"kid":"`, `"kid":"x","kid":"`}, {`A256GCM`, `A256GC\u004d`},
		{`"dk":`, `"dk":null,"dk":`}, {`"ctx":`, `"ctx":null,"x":`}, {`}`, `,"kec":{}}`}, {`}`, `,"kec":null}`},
		{`"ct":"`, `"ct":"AA\nAA`}, {`"nonce"`, `"nonce" `},
	} {
		if strings.Contains(s, r.old) {
			out = append(out, []byte(strings.Replace(s, r.old, r.new, 1)))
		}
	}
	for i := 0; i < len(data); i += 7 {
		out = append(out, data[:i])
	}
	return out
}

func TestEnvelopeMatchesEncodingJSON(t *testing.T) {
	for _, s := range envelopes() {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := marshalSealed(s)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("marshalSealed(%#v) = %s, %v; json.Marshal gives %s", s, got, err, want)
		}
		for _, text := range variants(want) {
			checkUnmarshal(t, text)
		}
	}
}

// checkUnmarshal fails unless unmarshalSealed and Parse read text as
// encoding/json does.
func checkUnmarshal(t *testing.T, text []byte) {
	t.Helper()
	var want Sealed
	wantOK := json.Unmarshal(text, &want) == nil
	if !wantOK {
		want = Sealed{}
	}
	got, ok := unmarshalSealed(text)
	if ok != wantOK || !reflect.DeepEqual(got, want) {
		t.Fatalf("unmarshalSealed(%s) = %#v, %v; json.Unmarshal gives %#v, %v", text, got, ok, want, wantOK)
	}
	if sealed := isSealed(text); sealed != (wantOK && want.wellFormed()) {
		t.Fatalf("isSealed(%s) = %v, json.Unmarshal and wellFormed say %v", text, sealed, !sealed)
	}
	if r, ok := readEnvelope(text); ok && (cap(r.Nonce) != len(r.Nonce) || cap(r.ContextDigest) != len(r.ContextDigest)) {
		t.Fatalf("readEnvelope(%s) shares capacity between fields: appending to one would overwrite another", text)
	}
}

// FuzzEnvelope holds the direct reader to encoding/json on any text.
func FuzzEnvelope(f *testing.F) {
	for _, s := range envelopes()[:40] {
		data, _ := json.Marshal(s)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, text []byte) { checkUnmarshal(t, text) })
}

// TestEnvelopeAllocations pins what reading and writing an envelope
// costs: encoding/json took 8 allocations to parse one and 4 to marshal.
func TestEnvelopeAllocations(t *testing.T) {
	keys := localSealer(t)
	sealed, err := keys.Seal(t.Context(), []byte(`{"user":"u","password":"p"}`), bindingContext("i", "b"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := marshalSealed(sealed)
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = Parse(data) }); n > 2 {
		t.Errorf("Parse allocates %.0f times, want at most 2 (the key id and one buffer)", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = marshalSealed(sealed) }); n > 1 {
		t.Errorf("marshalSealed allocates %.0f times, want 1", n)
	}
}

// TestLocalSealAndOpenAllocate pins what the local sealer allocates to seal
// a binding's credentials and to open them: the context's digest, the
// nonce, the additional data and the ciphertext in one allocation, the
// additional data and the plaintext in one (cb0ab17: 4 and 3).
func TestLocalSealAndOpenAllocate(t *testing.T) {
	keys := localSealer(t)
	plaintext, ec := []byte(`{"user":"u","password":"p"}`), bindingContext("i", "b")
	sealed, err := keys.Seal(t.Context(), plaintext, ec)
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = keys.Seal(t.Context(), plaintext, ec) }); n > 1 {
		t.Errorf("Seal allocates %.0f times, want 1", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = keys.Open(t.Context(), sealed, ec) }); n > 1 {
		t.Errorf("Open allocates %.0f times, want 1", n)
	}
}

// TestIsSealedIsAWellFormedUnmarshal holds isSealed to its definition, a
// text that json.Unmarshal reads into a well-formed Sealed, on texts that
// spell the key "nonce" in another case, with an escape or not at all, and
// pins that a larger object in clear is told apart without decoding it
// (cb0ab17: 3 allocations).
func TestIsSealedIsAWellFormedUnmarshal(t *testing.T) {
	keys := localSealer(t)
	sealed, err := keys.Seal(t.Context(), []byte(`{"user":"u","password":"p"}`), bindingContext("i", "b"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(sealed)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	clear := []byte(`{"database":"db-0123456789abcdef","host":"db.example.com","port":5432,"created_at":"2026-11-29T01:02:03Z"}`)
	for _, c := range []string{
		text,
		strings.Replace(text, `"nonce"`, `"NONCE"`, 1),
		strings.Replace(text, `"nonce"`, `"NoNcE"`, 1),
		strings.Replace(text, `"nonce"`, `"\u006eonce"`, 1),
		strings.Replace(text, `"nonce"`, `"non\u0063e"`, 1),
		strings.Replace(text, `"nonce"`, `"nonc"`, 1),
		strings.Replace(text, `"nonce"`, `"n0nce"`, 1),
		strings.Replace(text, `"nonce":`, `"x":"nonce","y":`, 1),
		string(clear),
		`{"note":"a nonce in a value","v":1,"alg":"A256GCM","kid":"k","ct":"AAAAAAAAAAAAAAAAAAAAAA=="}`,
	} {
		var s Sealed
		want := json.Unmarshal([]byte(c), &s) == nil && s.wellFormed()
		if got := isSealed([]byte(c)); got != want {
			t.Errorf("isSealed(%s) = %v, want %v", c, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = isSealed(clear) }); n != 0 {
		t.Errorf("isSealed of an object in clear allocates %.0f times, want 0", n)
	}
}
