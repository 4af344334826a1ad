package function

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// HeaderSignature carries the signature of an HTTP request:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" under the secret>".
const HeaderSignature = "X-Broker-Signature"

// HeaderVersion carries the protocol's version, as the body does.
const HeaderVersion = "X-Broker-Protocol-Version"

// MaxClockSkew is how far a signature's time may be from the target's
// clock: older signed requests are refused (replay).
const MaxClockSkew = 5 * time.Minute

// Sign returns the signature header's value for body, sent at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + mac(secret, ts, body)
}

func mac(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Errors of Verify.
var (
	ErrNoSignature  = errors.New("no signature, or not one of the form t=<unix>,v1=<hex>")
	ErrBadSignature = errors.New("the signature does not match the body and time")
	ErrStale        = errors.New("the signature's time is too far from now")
)

// Verify checks a signature header's value, as a target written in Go
// would (the example targets do the same in Python and JavaScript): the
// MAC of the time and body, in constant time, and the time within
// MaxClockSkew of now.
func Verify(secret []byte, header string, body []byte, now time.Time) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return ErrNoSignature
	}
	if !hmac.Equal([]byte(sig), []byte(mac(secret, ts, body))) {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); d > MaxClockSkew || d < -MaxClockSkew {
		return ErrStale
	}
	return nil
}
