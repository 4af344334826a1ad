package function

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// HeaderSignature carries the signature of an HTTP request:
// "t=<unix seconds>,v2=<hex MAC>" (Sign says of what), and, for a plan on
// protocol version 1, also ",v1=<hex HMAC-SHA256 of "<t>.<body>">", the
// signature targets that know only version 1 check. A target checks the
// newest scheme it knows and ignores the others, as with Stripe's.
const HeaderSignature = "X-Broker-Signature"

// HeaderVersion carries the protocol's version, as the body does.
const HeaderVersion = "X-Broker-Protocol-Version"

// HeaderRequestID carries the request's id, unique to each HTTP request
// the broker sends (a request sent again gets a new one), and covered by
// the version 2 signature: a target that remembers the ids it took within
// MaxClockSkew refuses a replayed request.
const HeaderRequestID = "X-Broker-Request-Id"

// MaxClockSkew is how far a signature's time may be from the target's
// clock: older signed requests are refused (replay).
const MaxClockSkew = 5 * time.Minute

// Message is what a version 2 signature covers: the whole request.
type Message struct {
	Method string
	// URL is the target's URL as the plan's url setting spells it: a
	// target checks against the URL it is published at (its own setting),
	// never one rebuilt from the request's Host header, so that a request
	// signed for another target is refused even where the secret is shared.
	URL       string
	RequestID string
	Body      []byte
}

// Sign returns the signature header's value of m, sent at t: the version 2
// MAC, HMAC-SHA256 under the secret of
// "<t>\n<METHOD>\n<URL>\n<request id>\n<body>"; and, when v1 is set, the
// version 1 MAC of "<t>.<body>" as well, for the targets that know only it.
func Sign(secret []byte, t time.Time, m Message, v1 bool) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	s := "t=" + ts
	if v1 {
		s += ",v1=" + macV1(secret, ts, m.Body)
	}
	return s + ",v2=" + macV2(secret, ts, m)
}

func macV1(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts + "."))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func macV2(secret []byte, ts string, msg Message) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts + "\n" + msg.Method + "\n" + msg.URL + "\n" + msg.RequestID + "\n"))
	m.Write(msg.Body)
	return hex.EncodeToString(m.Sum(nil))
}

// Errors of Verify.
var (
	ErrNoSignature  = errors.New("no version 2 signature (t=<unix>,v2=<hex>); a version 1 signature alone covers too little")
	ErrNoRequestID  = errors.New("no request id (" + HeaderRequestID + ")")
	ErrBadSignature = errors.New("the signature does not match the request and time")
	ErrStale        = errors.New("the signature's time is too far from now")
)

// Verify checks a signature header's value, as a target written in Go
// would (the example targets do the same in Python and JavaScript): the
// version 2 MAC of the time and m, in constant time, and the time within
// MaxClockSkew of now. A version 1 MAC is ignored: it covers neither the
// method, nor the URL, nor the request id.
func Verify(secret []byte, header string, m Message, now time.Time) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v2":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return ErrNoSignature
	}
	if m.RequestID == "" {
		return ErrNoRequestID
	}
	if !hmac.Equal([]byte(sig), []byte(macV2(secret, ts, m))) {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); d > MaxClockSkew || d < -MaxClockSkew {
		return ErrStale
	}
	return nil
}

// VerifyRequest checks the signature of r, whose body is body, received at
// url: the target's own URL, as the plan's url setting spells it.
func VerifyRequest(secret []byte, r *http.Request, url string, body []byte, now time.Time) error {
	return Verify(secret, r.Header.Get(HeaderSignature),
		Message{Method: r.Method, URL: url, RequestID: r.Header.Get(HeaderRequestID), Body: body}, now)
}
