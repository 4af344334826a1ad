// Package envelope reads and writes the JSON text of a sealed value's
// envelope (package sealing's Sealed) as the sealing store writes it, and
// its binary form, which a store of bytes keeps in its place. It depends on
// nothing of the broker's, so that a store (the local broker's bolt file)
// and package sealing both use it.
package envelope

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
)

// The algorithms a sealed value records (sealing.AlgLocal, sealing.AlgKMS).
const (
	// AlgLocal: AES-256-GCM under a key of a local keyring.
	AlgLocal = "A256GCM"
	// AlgKMS: AES-256-GCM under a data key that KMS generated and
	// encrypted; the envelope carries the encrypted data key.
	AlgKMS = "KMS+A256GCM"
)

// Fields are the parts of an envelope's JSON as Scan finds them: the
// version, the algorithm's and key id's text, and each byte field's
// base64 text, not decoded.
type Fields struct {
	Version    int
	Alg, KeyID []byte
	// DataKey is nil when the envelope has none ("dk" absent).
	DataKey []byte
	// Context is nil, with ContextNull, for "ctx":null.
	Context     []byte
	ContextNull bool
	Nonce       []byte
	Ciphertext  []byte
}

// Scan reads data only if it is in the form the sealing store writes
// (with a version of at most nine digits, an algorithm and a key id of
// printable ASCII without escapes, no KMS context):
//
//	{"v":1,"alg":"…","kid":"…"[,"dk":"…"],"ctx":"…"|null,"nonce":"…","ct":"…"}
//
// and says false for anything else.
func Scan(data []byte) (Fields, bool) {
	r := reader{data: data}
	var f Fields
	var ok bool
	if !r.expect(`{"v":`) {
		return f, false
	}
	if f.Version, ok = r.version(); !ok || !r.expect(`,"alg":`) {
		return f, false
	}
	if f.Alg, ok = r.text(); !ok || !r.expect(`,"kid":`) {
		return f, false
	}
	if f.KeyID, ok = r.text(); !ok {
		return f, false
	}
	if r.expect(`,"dk":`) {
		var null bool
		if f.DataKey, null, ok = r.quoted(); !ok || null {
			return f, false
		}
	}
	if !r.expect(`,"ctx":`) {
		return f, false
	}
	if f.Context, f.ContextNull, ok = r.quoted(); !ok || !r.expect(`,"nonce":`) {
		return f, false
	}
	var null bool
	if f.Nonce, null, ok = r.quoted(); !ok || null || !r.expect(`,"ct":`) {
		return f, false
	}
	if f.Ciphertext, null, ok = r.quoted(); !ok || null || !r.expect(`}`) || r.i != len(data) {
		return f, false
	}
	return f, true
}

// PlainText says whether json.Marshal writes s as it is between quotes:
// printable ASCII that it neither escapes nor replaces.
func PlainText[T string | []byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

func Base64Len(v []byte) int {
	if v == nil {
		return len("null")
	}
	return base64.StdEncoding.EncodedLen(len(v)) + 2
}

// AppendBase64 appends v as json.Marshal writes a []byte: null when nil.
func AppendBase64(b, v []byte) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

type reader struct {
	data []byte
	i    int
}

func (r *reader) expect(lit string) bool {
	if len(r.data)-r.i < len(lit) || string(r.data[r.i:r.i+len(lit)]) != lit {
		return false
	}
	r.i += len(lit)
	return true
}

// version reads a non-negative integer as marshalSealed writes it: no
// sign, no leading zero, no fraction or exponent.
func (r *reader) version() (int, bool) {
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

// text reads a quoted string of PlainText's characters, which JSON reads
// as they are, and returns what is between the quotes.
func (r *reader) text() ([]byte, bool) {
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
func (r *reader) quoted() (_ []byte, null, ok bool) {
	if r.expect("null") {
		return nil, true, true
	}
	v, ok := r.text()
	if v == nil && ok {
		v = []byte{}
	}
	return v, false, ok
}

// The binary form of a sealed value, for a store that keeps bytes rather
// than JSON (the local broker's bolt file): AppendBinary takes a sealed
// value's JSON in the form the sealing store writes (package sealing's marshalSealed) and
// FromBinary gives that JSON back, byte for byte, from about two thirds of
// the bytes (no field names, no base64):
//
//	uvarint version
//	byte    algorithm: 1 AlgLocal, 2 AlgKMS
//	uvarint length, key id
//	byte    flags: 1 a data key follows, 2 the context digest is null
//	[uvarint length, data key]
//	[uvarint length, context digest]
//	uvarint length, nonce
//	uvarint length, ciphertext
//
// Anything else (another algorithm, a KMS context, base64 that does not
// encode back the same, any other JSON) is not taken: the store keeps it
// as it is.

const (
	binAlgLocal = 1
	binAlgKMS   = 2
	binDataKey  = 1
	binCtxNull  = 2
)

// strictBase64 refuses the encodings whose padding bits are not zero,
// which another text would give back: every one it takes encodes back to
// itself.
var strictBase64 = base64.StdEncoding.Strict()

// AppendBinary appends data's binary form to b when data is a sealed
// value's JSON as the sealing store writes it; ok is false, with b as it
// was, for any other data.
func AppendBinary(b, data []byte) (_ []byte, ok bool) {
	f, ok := Scan(data)
	var code byte
	switch {
	case !ok || !PlainText(f.KeyID):
		return b, false
	case string(f.Alg) == AlgLocal:
		code = binAlgLocal
	case string(f.Alg) == AlgKMS:
		code = binAlgKMS
	default:
		return b, false
	}
	flags := byte(0)
	if f.DataKey != nil {
		flags |= binDataKey
	}
	if f.ContextNull {
		flags |= binCtxNull
	}
	start := len(b)
	b = binary.AppendUvarint(b, uint64(f.Version))
	b = append(b, code)
	b = binary.AppendUvarint(b, uint64(len(f.KeyID)))
	b = append(append(b, f.KeyID...), flags)
	for i, v := range [][]byte{f.DataKey, f.Context, f.Nonce, f.Ciphertext} {
		if (i == 0 && f.DataKey == nil) || (i == 1 && f.ContextNull) {
			continue
		}
		if b, ok = appendDecoded(b, v); !ok {
			return b[:start], false
		}
	}
	return b, true
}

// appendDecoded appends the length and bytes that f, standard base64
// with padding, decodes to, if it encodes back to f.
func appendDecoded(b, f []byte) ([]byte, bool) {
	if len(f)%4 != 0 {
		return b, false
	}
	n := len(f) / 4 * 3
	for i := len(f) - 1; i >= len(f)-2 && i >= 0 && f[i] == '='; i-- {
		n--
	}
	b = binary.AppendUvarint(b, uint64(n))
	at := len(b)
	b, err := strictBase64.AppendDecode(b, f)
	return b, err == nil && len(b)-at == n
}

var errBinary = errors.New("sealed value: a binary form cut short or altered")

// FromBinary reads a sealed value's binary form from bin and appends its
// JSON, as AppendBinary was given it, to dst, which it grows once, to the
// JSON's length.
func FromBinary(dst, bin []byte) ([]byte, error) {
	r := binReader{b: bin}
	v := r.uvarint()
	code := r.byte()
	kid := r.bytes()
	flags := r.byte()
	var dk, ctx []byte
	if flags&binDataKey != 0 {
		dk = r.bytes()
	}
	if flags&binCtxNull == 0 {
		ctx = r.bytes()
	}
	nonce, ct := r.bytes(), r.bytes()
	var alg string
	switch code {
	case binAlgLocal:
		alg = AlgLocal
	case binAlgKMS:
		alg = AlgKMS
	}
	if r.bad || len(r.b) != 0 || alg == "" || flags&^(binDataKey|binCtxNull) != 0 || v > 999999999 || !PlainText(kid) {
		return dst, errBinary
	}
	n := len(`{"v":,"alg":"","kid":"","ctx":,"nonce":,"ct":}`) + len(alg) + len(kid) + Base64Len(nonce) + Base64Len(ct)
	for d := v; ; d /= 10 { // the version's digits
		n++
		if d < 10 {
			break
		}
	}
	if flags&binDataKey != 0 {
		n += len(`,"dk":`) + Base64Len(dk)
	}
	if flags&binCtxNull != 0 {
		n += len("null")
	} else {
		n += Base64Len(ctx)
	}
	dst = slices.Grow(dst, n)
	dst = append(dst, `{"v":`...)
	dst = strconv.AppendUint(dst, v, 10)
	dst = append(append(dst, `,"alg":"`...), alg...)
	dst = append(append(dst, `","kid":"`...), kid...)
	dst = append(dst, '"')
	if flags&binDataKey != 0 {
		dst = AppendBase64(append(dst, `,"dk":`...), dk)
	}
	dst = append(dst, `,"ctx":`...)
	if flags&binCtxNull != 0 {
		dst = append(dst, "null"...)
	} else {
		dst = AppendBase64(dst, ctx)
	}
	dst = AppendBase64(append(dst, `,"nonce":`...), nonce)
	dst = AppendBase64(append(dst, `,"ct":`...), ct)
	return append(dst, '}'), nil
}

type binReader struct {
	b   []byte
	bad bool
}

func (r *binReader) uvarint() uint64 {
	v, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[k:]
	return v
}

func (r *binReader) byte() byte {
	if len(r.b) == 0 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// bytes reads a length and that many bytes, never nil unless bad.
func (r *binReader) bytes() []byte {
	n := r.uvarint()
	if r.bad || uint64(len(r.b)) < n {
		r.bad = true
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}
