package sealing

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
)

// The envelope's JSON is read and written on every sealed value a request
// stores or loads (a binding's credentials: twice per bind). encoding/json
// does it with reflection, five to nine allocations each way; the form
// json.Marshal gives a Sealed without a KMS context is fixed, so
// marshalSealed writes it and parseSealedJSON reads it directly, in one or
// two allocations, and hand anything else to encoding/json. Each gives
// exactly what encoding/json gives (TestEnvelopeMatchesEncodingJSON).

// marshalSealed is json.Marshal(s).
func marshalSealed(s Sealed) ([]byte, error) {
	if s.KMSContext != nil || !plainText(s.Alg) || !plainText(s.KeyID) {
		return json.Marshal(s)
	}
	n := len(`{"v":,"alg":"","kid":"","ctx":,"nonce":,"ct":}`) + 20 + len(s.Alg) + len(s.KeyID) +
		base64Len(s.ContextDigest) + base64Len(s.Nonce) + base64Len(s.Ciphertext)
	if len(s.DataKey) > 0 {
		n += len(`,"dk":`) + base64Len(s.DataKey)
	}
	b := make([]byte, 0, n)
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(s.Version), 10)
	b = append(b, `,"alg":"`...)
	b = append(b, s.Alg...)
	b = append(b, `","kid":"`...)
	b = append(b, s.KeyID...)
	b = append(b, '"')
	if len(s.DataKey) > 0 {
		b = appendBase64(append(b, `,"dk":`...), s.DataKey)
	}
	b = appendBase64(append(b, `,"ctx":`...), s.ContextDigest)
	b = appendBase64(append(b, `,"nonce":`...), s.Nonce)
	b = appendBase64(append(b, `,"ct":`...), s.Ciphertext)
	return append(b, '}'), nil
}

// plainText says whether json.Marshal writes s as it is between quotes:
// printable ASCII that it neither escapes nor replaces.
func plainText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

func base64Len(v []byte) int {
	if v == nil {
		return len("null")
	}
	return base64.StdEncoding.EncodedLen(len(v)) + 2
}

// appendBase64 appends v as json.Marshal writes a []byte: null when nil.
func appendBase64(b, v []byte) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

// unmarshalSealed is json.Unmarshal(data, &s) for a Sealed, reporting
// only whether it succeeded.
func unmarshalSealed(data []byte) (Sealed, bool) {
	if s, ok := readEnvelope(data); ok {
		return s, true
	}
	var s Sealed
	if json.Unmarshal(data, &s) != nil {
		return Sealed{}, false
	}
	return s, true
}

// readEnvelope reads data only if it is in the form marshalSealed writes
// without falling back (and with a version of at most nine digits); it says
// false for anything else, which encoding/json then reads.
func readEnvelope(data []byte) (Sealed, bool) {
	r := envelopeReader{data: data}
	var s Sealed
	if !r.expect(`{"v":`) {
		return Sealed{}, false
	}
	v, ok := r.version()
	if !ok || !r.expect(`,"alg":`) {
		return Sealed{}, false
	}
	alg, ok := r.text()
	if !ok || !r.expect(`,"kid":`) {
		return Sealed{}, false
	}
	kid, ok := r.text()
	if !ok || len(kid) == 0 {
		return Sealed{}, false
	}
	var dk, ctx, nonce, ct []byte
	var dkNull, ctxNull bool
	if r.expect(`,"dk":`) {
		if dk, dkNull, ok = r.quoted(); !ok || dkNull {
			return Sealed{}, false
		}
	}
	if !r.expect(`,"ctx":`) {
		return Sealed{}, false
	}
	if ctx, ctxNull, ok = r.quoted(); !ok || !r.expect(`,"nonce":`) {
		return Sealed{}, false
	}
	nonce, nonceNull, ok := r.quoted()
	if !ok || nonceNull || !r.expect(`,"ct":`) {
		return Sealed{}, false
	}
	ct, ctNull, ok := r.quoted()
	if !ok || ctNull || !r.expect(`}`) || r.i != len(data) {
		return Sealed{}, false
	}
	// One buffer for the four byte fields, each capped at its own length
	// so that appending to one cannot overwrite the next.
	size := 0
	for _, f := range [...][]byte{dk, ctx, nonce, ct} {
		size += base64.StdEncoding.DecodedLen(len(f))
	}
	buf := make([]byte, size)
	decode := func(f []byte, null bool) ([]byte, bool) {
		if null {
			return nil, true
		}
		n, err := base64.StdEncoding.Decode(buf, f)
		if err != nil {
			return nil, false
		}
		out := buf[:n:n]
		buf = buf[base64.StdEncoding.DecodedLen(len(f)):]
		return out, true
	}
	if dk != nil {
		if s.DataKey, ok = decode(dk, false); !ok {
			return Sealed{}, false
		}
	}
	if s.ContextDigest, ok = decode(ctx, ctxNull); !ok {
		return Sealed{}, false
	}
	if s.Nonce, ok = decode(nonce, false); !ok {
		return Sealed{}, false
	}
	if s.Ciphertext, ok = decode(ct, false); !ok {
		return Sealed{}, false
	}
	s.Version = v
	switch string(alg) {
	case AlgLocal:
		s.Alg = AlgLocal
	case AlgKMS:
		s.Alg = AlgKMS
	default:
		s.Alg = string(alg)
	}
	s.KeyID = string(kid)
	return s, true
}

type envelopeReader struct {
	data []byte
	i    int
}

func (r *envelopeReader) expect(lit string) bool {
	if len(r.data)-r.i < len(lit) || string(r.data[r.i:r.i+len(lit)]) != lit {
		return false
	}
	r.i += len(lit)
	return true
}

// version reads a non-negative integer as marshalSealed writes it: no
// sign, no leading zero, no fraction or exponent.
func (r *envelopeReader) version() (int, bool) {
	start := r.i
	for r.i < len(r.data) && r.data[r.i] >= '0' && r.data[r.i] <= '9' {
		r.i++
	}
	digits := r.data[start:r.i]
	if len(digits) == 0 || len(digits) > 9 || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	v := 0
	for _, c := range digits {
		v = v*10 + int(c-'0')
	}
	return v, true
}

// text reads a quoted string of plainText's characters, which JSON reads
// as they are, and returns what is between the quotes.
func (r *envelopeReader) text() ([]byte, bool) {
	if !r.expect(`"`) {
		return nil, false
	}
	start := r.i
	for r.i < len(r.data) && r.data[r.i] != '"' {
		if c := r.data[r.i]; c < 0x20 || c > 0x7e || c == '\\' {
			return nil, false
		}
		r.i++
	}
	if r.i == len(r.data) {
		return nil, false
	}
	r.i++
	return r.data[start : r.i-1], true
}

// quoted reads a []byte field's value: null, or a quoted string (returned
// non-nil, if empty) that base64 decodes later.
func (r *envelopeReader) quoted() (_ []byte, null, ok bool) {
	if r.expect("null") {
		return nil, true, true
	}
	v, ok := r.text()
	if v == nil && ok {
		v = []byte{}
	}
	return v, false, ok
}
