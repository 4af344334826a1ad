package sealing

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/serverless-osb/broker/internal/sealing/envelope"
)

// Version is the envelope format that Seal writes. Open refuses any other.
const Version = 1

// The algorithms a Sealed records.
const (
	// AlgLocal: AES-256-GCM under a key of a local keyring.
	AlgLocal = envelope.AlgLocal
	// AlgKMS: AES-256-GCM under a data key that KMS generated and
	// encrypted; the envelope carries the encrypted data key.
	AlgKMS = envelope.AlgKMS
)

// Errors that Open, and so Reseal, return (wrapped, with the key id and
// what failed): test them with errors.Is. Whatever the error, Open returns
// no plaintext.
var (
	// ErrWrongContext: the value was sealed for another item (another
	// encryption context than the one given to Open): it was copied.
	ErrWrongContext = errors.New("sealed for another context")
	// ErrUnknownKey: the key that sealed the value is not one this sealer
	// has (a local key missing from the keyring, a KMS key that does not
	// exist or refuses this data key), or another kind of sealer sealed it.
	ErrUnknownKey = errors.New("sealed with a key this sealer does not have")
	// ErrCorrupt: the value does not authenticate under its key and
	// context: its ciphertext, nonce or envelope was altered.
	ErrCorrupt = errors.New("sealed value altered or corrupt")
	// ErrFormat: not a sealed value of a format this package reads.
	ErrFormat = errors.New("not a sealed value of a known format")
)

// Sealer seals values for one item and opens them for that item only.
// The encryption context ec names the item (for example
// {"instance_id": ..., "binding_id": ...}); it is not secret and not
// stored, but bound to the ciphertext: Open must be given the same one.
type Sealer interface {
	// Seal encrypts plaintext under the current key, bound to ec.
	Seal(ctx context.Context, plaintext []byte, ec map[string]string) (Sealed, error)
	// Open decrypts s, sealed under any key this sealer has, if it was
	// sealed with ec; otherwise it returns one of the Err values above.
	Open(ctx context.Context, s Sealed, ec map[string]string) ([]byte, error)
	// CurrentKey names the key that Seal uses now, as a Sealed records
	// it: its algorithm and key id.
	CurrentKey(ctx context.Context) (alg, keyID string, err error)
}

// Sealed is the envelope of a sealed value. It marshals to a small JSON
// object (byte fields in standard base64):
//
//	{"v":1,"alg":"A256GCM","kid":"k20260101T000000.000000000Z-1a2b3c4d","ctx":"…","nonce":"…","ct":"…"}
//	{"v":1,"alg":"KMS+A256GCM","kid":"arn:aws:kms:…:key/…","dk":"…","ctx":"…","nonce":"…","ct":"…"}
//
// Nothing in it is secret: the plaintext is only in ct, encrypted.
type Sealed struct {
	// Version of the format: Version.
	Version int `json:"v"`
	// Alg is AlgLocal or AlgKMS.
	Alg string `json:"alg"`
	// KeyID names the key that sealed the value: a local key's id, or the
	// ARN of the KMS key that encrypted the data key.
	KeyID string `json:"kid"`
	// DataKey is the data key as KMS encrypted it (AlgKMS only).
	DataKey []byte `json:"dk,omitempty"`
	// KMSContext is the KMS encryption context of a data key shared by
	// many items (AlgKMS with SharedDataKeys only). Absent, the data key's
	// KMS encryption context is the item's own context.
	KMSContext map[string]string `json:"kec,omitempty"`
	// ContextDigest is a short digest of the item's encryption context,
	// so that a value opened for another item fails with ErrWrongContext
	// rather than ErrCorrupt. The context itself is bound by AES-GCM.
	ContextDigest []byte `json:"ctx"`
	// Nonce is AES-GCM's 12-byte nonce, random for each seal.
	Nonce []byte `json:"nonce"`
	// Ciphertext is the AES-GCM ciphertext with its 16-byte tag.
	Ciphertext []byte `json:"ct"`
}

// Parse reads a Sealed from its JSON form, refusing other formats.
func Parse(data []byte) (Sealed, error) {
	if s, ok := readEnvelope(data); ok {
		if err := s.check(); err != nil {
			return Sealed{}, fmt.Errorf("parse sealed value: %w", err)
		}
		return s, nil
	}
	var s Sealed
	if err := json.Unmarshal(data, &s); err != nil {
		return Sealed{}, fmt.Errorf("parse sealed value: %w: %v", ErrFormat, err)
	}
	if err := s.check(); err != nil {
		return Sealed{}, fmt.Errorf("parse sealed value: %w", err)
	}
	return s, nil
}

// isSealed says whether Parse reads data.
func isSealed(data []byte) bool {
	_, ok := parseSealed(data)
	return ok
}

// parseSealed is Parse without building the error that says why not: the
// store asks it of every value it reads or writes, and most are not
// sealed (a fingerprint, parameters in clear).
func parseSealed(data []byte) (Sealed, bool) {
	if len(data) < minSealedLen || !startsObject(data) || !mayHoldNonce(data) {
		return Sealed{}, false
	}
	s, ok := unmarshalSealed(data)
	if !ok || !s.wellFormed() {
		return Sealed{}, false
	}
	return s, true
}

// mayHoldNonce says whether data may have the key "nonce", which a
// well-formed Sealed needs: the five letters in any case (encoding/json
// matches keys so, and no other character folds to one of them), or an
// escape that may spell them. A larger object in clear (a record, the
// parameters) is then known not to be sealed without decoding it.
func mayHoldNonce(data []byte) bool {
	if bytes.IndexByte(data, '\\') >= 0 {
		return true
	}
	const nonce = "nonce"
	for i := 0; i+len(nonce) <= len(data); i++ {
		j := 0
		for j < len(nonce) && data[i+j]|0x20 == nonce[j] { // ASCII letters only
			j++
		}
		if j == len(nonce) {
			return true
		}
	}
	return false
}

// minSealedLen is the length of the shortest JSON text that wellFormed
// accepts: the fields it needs, each at its shortest (base64 of a 12-byte
// nonce, of a 16-byte tag). Anything shorter (parameters `{}`, a small
// object in clear) is not sealed, known without decoding it.
var minSealedLen = len(`{"v":1,"alg":"A256GCM","kid":"k","nonce":"AAAAAAAAAAAAAAAA","ct":"AAAAAAAAAAAAAAAAAAAAAA=="}`)

// isSealedString is isSealed for a value kept as a string (a fingerprint),
// copied to bytes only when it may be sealed.
func isSealedString(data string) bool { return startsObject(data) && isSealed([]byte(data)) }

// startsObject says whether data's first byte, after JSON's whitespace,
// opens an object: only a JSON object decodes into a Sealed, and anything
// else (a fingerprint's hex, null, a string) fails there.
func startsObject[T string | []byte](data T) bool {
	i := 0
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i < len(data) && data[i] == '{'
}

// wellFormed says whether check finds nothing wrong, without the error.
func (s Sealed) wellFormed() bool {
	return s.Version == Version && (s.Alg == AlgLocal || s.Alg == AlgKMS) && s.KeyID != "" &&
		!(s.Alg == AlgKMS && len(s.DataKey) == 0) &&
		!(s.Alg == AlgLocal && (len(s.DataKey) != 0 || s.KMSContext != nil)) &&
		len(s.Nonce) == nonceSize && len(s.Ciphertext) >= tagSize
}

// check verifies the shape of s, before any key is looked up.
func (s Sealed) check() error {
	switch {
	case s.Version != Version:
		return fmt.Errorf("%w: version %d, this broker reads %d", ErrFormat, s.Version, Version)
	case s.Alg != AlgLocal && s.Alg != AlgKMS:
		return fmt.Errorf("%w: algorithm %q", ErrFormat, s.Alg)
	case s.KeyID == "":
		return fmt.Errorf("%w: no key id", ErrFormat)
	case s.Alg == AlgKMS && len(s.DataKey) == 0:
		return fmt.Errorf("%w: no data key", ErrFormat)
	case s.Alg == AlgLocal && (len(s.DataKey) != 0 || s.KMSContext != nil):
		return fmt.Errorf("%w: a local key's value with a KMS data key", ErrFormat)
	case len(s.Nonce) != nonceSize:
		return fmt.Errorf("%w: nonce of %d bytes", ErrFormat, len(s.Nonce))
	case len(s.Ciphertext) < tagSize:
		return fmt.Errorf("%w: ciphertext of %d bytes", ErrFormat, len(s.Ciphertext))
	}
	return nil
}

// String describes s without its contents, for errors and logs.
func (s Sealed) String() string {
	return fmt.Sprintf("sealed(v%d %s key %s, %d bytes)", s.Version, s.Alg, s.KeyID, max(len(s.Ciphertext)-tagSize, 0))
}

// LogValue logs s as String does.
func (s Sealed) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Reseal opens s with whatever key sealed it and, unless the current key
// sealed it already, seals it again under the current key: changed says
// which. A value that does not open is returned as it was, with Open's
// error, so that the caller can count it and go on.
func Reseal(ctx context.Context, sealer Sealer, s Sealed, ec map[string]string) (_ Sealed, changed bool, _ error) {
	plaintext, err := sealer.Open(ctx, s, ec)
	if err != nil {
		return s, false, fmt.Errorf("reseal: %w", err)
	}
	alg, kid, err := sealer.CurrentKey(ctx)
	if err != nil {
		return s, false, fmt.Errorf("reseal: %w", err)
	}
	if s.Version == Version && s.Alg == alg && s.KeyID == kid {
		return s, false, nil
	}
	out, err := sealer.Seal(ctx, plaintext, ec)
	if err != nil {
		return s, false, fmt.Errorf("reseal: %w", err)
	}
	return out, true, nil
}

const (
	keySize   = 32 // AES-256
	nonceSize = 12 // AES-GCM's standard nonce
	tagSize   = 16
	// digestSize is enough to tell contexts apart when reporting an
	// error; the binding itself is AES-GCM's.
	digestSize = 8
)

// newAEAD returns AES-256-GCM under key.
func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != keySize {
		return nil, fmt.Errorf("a key of %d bytes, not %d", len(key), keySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// sealWith fills in s's context digest, nonce and ciphertext: s carries
// the header (version, algorithm, key id, data key), which the additional
// data authenticates with the context.
//
// The digest, the nonce, the additional data and the ciphertext share one
// allocation, in that order, where each was one of its own: the
// ciphertext keeps the others' few bytes alive.
func sealWith(aead cipher.AEAD, s Sealed, plaintext []byte, ec map[string]string) (Sealed, error) {
	s.Version = Version
	var onStack [adOnStack]byte
	ad := appendAdditionalData(onStack[:0], s, ec)
	buf := make([]byte, 0, digestSize+nonceSize+len(ad)+len(plaintext)+aead.Overhead())
	buf = appendContextDigest(buf, ec)
	s.ContextDigest = buf[:digestSize:digestSize]
	buf = buf[:digestSize+nonceSize]
	s.Nonce = buf[digestSize:len(buf):len(buf)]
	if _, err := rand.Read(s.Nonce); err != nil {
		return Sealed{}, fmt.Errorf("seal: nonce: %w", err)
	}
	buf = append(buf, ad...)
	s.Ciphertext = aead.Seal(buf[len(buf):], s.Nonce, plaintext, buf[digestSize+nonceSize:])
	return s, nil
}

// adOnStack is room for the additional data of a value the local sealer
// seals (about 80 bytes) and most of KMS's, built before it is copied
// where it is used.
const adOnStack = 384

// openWith decrypts s, sealed by sealWith with aead. The additional data
// and the plaintext share one allocation.
func openWith(aead cipher.AEAD, s Sealed, ec map[string]string) ([]byte, error) {
	var onStack [adOnStack]byte
	ad := appendAdditionalData(onStack[:0], s, ec)
	buf := append(make([]byte, 0, len(ad)+max(len(s.Ciphertext)-aead.Overhead(), 0)), ad...)
	plaintext, err := aead.Open(buf[len(buf):], s.Nonce, s.Ciphertext, buf)
	if err != nil {
		return nil, fmt.Errorf("open %v: %w", s, ErrCorrupt)
	}
	return plaintext, nil
}

// checkContext tells a value opened for another item from an altered one.
func checkContext(s Sealed, ec map[string]string) error {
	var digest [digestSize]byte
	if subtle.ConstantTimeCompare(s.ContextDigest, appendContextDigest(digest[:0], ec)) != 1 {
		return fmt.Errorf("open %v: %w (it was copied from another item)", s, ErrWrongContext)
	}
	return nil
}

// appendAdditionalData appends what AES-GCM authenticates besides the ciphertext:
// the envelope's header and the item's encryption context.
func appendAdditionalData(b []byte, s Sealed, ec map[string]string) []byte {
	b = appendField(b, []byte("serverless-osb/sealing"))
	b = binary.AppendUvarint(b, uint64(s.Version))
	b = appendField(b, []byte(s.Alg))
	b = appendField(b, []byte(s.KeyID))
	b = appendField(b, s.DataKey)
	b = appendCanonicalField(b, s.KMSContext)
	return appendCanonicalField(b, ec)
}

// canonical encodes an encryption context as one byte string, the same
// for equal maps and different for different ones: entries sorted by key,
// each string prefixed by its length.
func canonical(ec map[string]string) []byte {
	return appendCanonical(nil, ec)
}

// maxSortedOnStack covers every context the broker builds (at most four
// entries), so that sorting their keys allocates nothing.
const maxSortedOnStack = 8

func appendCanonical(b []byte, ec map[string]string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ec)))
	var onStack [maxSortedOnStack]string
	keys := onStack[:0]
	for k := range ec {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = appendString(b, k)
		b = appendString(b, ec[k])
	}
	return b
}

// appendCanonicalField appends canonical(ec) as appendField would, without
// building it apart first: its length prefix, then its bytes.
func appendCanonicalField(b []byte, ec map[string]string) []byte {
	var onStack [256]byte
	c := appendCanonical(onStack[:0], ec)
	return appendField(b, c)
}

func appendField(b, field []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(field)))
	return append(b, field...)
}

func appendString(b []byte, field string) []byte {
	b = binary.AppendUvarint(b, uint64(len(field)))
	return append(b, field...)
}

func contextDigest(ec map[string]string) []byte {
	return appendContextDigest(nil, ec)
}

func appendContextDigest(digest []byte, ec map[string]string) []byte {
	var onStack [256]byte
	b := append(onStack[:0], "serverless-osb/sealing context\x00"...)
	sum := sha256.Sum256(appendCanonical(b, ec))
	return append(digest, sum[:digestSize]...)
}
