package sealing

import (
	"encoding/base64"
	"encoding/json"
	"strconv"

	"github.com/serverless-osb/broker/internal/sealing/envelope"
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
	if s.KMSContext != nil || !envelope.PlainText(s.Alg) || !envelope.PlainText(s.KeyID) {
		return json.Marshal(s)
	}
	n := len(`{"v":,"alg":"","kid":"","ctx":,"nonce":,"ct":}`) + 20 + len(s.Alg) + len(s.KeyID) +
		envelope.Base64Len(s.ContextDigest) + envelope.Base64Len(s.Nonce) + envelope.Base64Len(s.Ciphertext)
	if len(s.DataKey) > 0 {
		n += len(`,"dk":`) + envelope.Base64Len(s.DataKey)
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
		b = envelope.AppendBase64(append(b, `,"dk":`...), s.DataKey)
	}
	b = envelope.AppendBase64(append(b, `,"ctx":`...), s.ContextDigest)
	b = envelope.AppendBase64(append(b, `,"nonce":`...), s.Nonce)
	b = envelope.AppendBase64(append(b, `,"ct":`...), s.Ciphertext)
	return append(b, '}'), nil
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
	f, ok := envelope.Scan(data)
	if !ok || len(f.KeyID) == 0 {
		return Sealed{}, false
	}
	var s Sealed
	// One buffer for the four byte fields, each capped at its own length
	// so that appending to one cannot overwrite the next.
	size := 0
	for _, v := range [...][]byte{f.DataKey, f.Context, f.Nonce, f.Ciphertext} {
		size += base64.StdEncoding.DecodedLen(len(v))
	}
	buf := make([]byte, size)
	decode := func(v []byte, null bool) ([]byte, bool) {
		if null {
			return nil, true
		}
		n, err := base64.StdEncoding.Decode(buf, v)
		if err != nil {
			return nil, false
		}
		out := buf[:n:n]
		buf = buf[base64.StdEncoding.DecodedLen(len(v)):]
		return out, true
	}
	if f.DataKey != nil {
		if s.DataKey, ok = decode(f.DataKey, false); !ok {
			return Sealed{}, false
		}
	}
	if s.ContextDigest, ok = decode(f.Context, f.ContextNull); !ok {
		return Sealed{}, false
	}
	if s.Nonce, ok = decode(f.Nonce, false); !ok {
		return Sealed{}, false
	}
	if s.Ciphertext, ok = decode(f.Ciphertext, false); !ok {
		return Sealed{}, false
	}
	s.Version = f.Version
	switch string(f.Alg) {
	case AlgLocal:
		s.Alg = AlgLocal
	case AlgKMS:
		s.Alg = AlgKMS
	default:
		s.Alg = string(f.Alg)
	}
	s.KeyID = string(f.KeyID)
	return s, true
}
