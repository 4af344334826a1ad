package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/logging"
)

// Header names of the OSB API.
const (
	HeaderAPIVersion          = "X-Broker-API-Version"
	HeaderRequestIdentity     = "X-Broker-API-Request-Identity"
	HeaderOriginatingIdentity = "X-Broker-API-Originating-Identity"
)

// The OSB headers as net/http keys them (canonical form). They are read
// and set through these, in the map, because Header.Get and Set would
// build the canonical form of "API" in each name again on every call: an
// allocation each.
var (
	keyAPIVersion          = http.CanonicalHeaderKey(HeaderAPIVersion)
	keyRequestIdentity     = http.CanonicalHeaderKey(HeaderRequestIdentity)
	keyOriginatingIdentity = http.CanonicalHeaderKey(HeaderOriginatingIdentity)
)

// header is h.Get(key) for a key in canonical form.
func header(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// MinMinorVersion is the oldest 2.x API version the broker accepts.
const MinMinorVersion = 9

// requestInfo collects what the request log line reports; handlers deeper
// in the chain fill it in.
type requestInfo struct {
	instanceID, bindingID, user string
	// authenticated is set once the request's credentials are checked:
	// until then nothing the client chose (path, request identity) is
	// logged.
	authenticated bool
	// route is the matched pattern, e.g. /v2/service_instances/{instance_id}.
	route string
}

type infoKey struct{}

// requestState is the request log's context, which carries the
// requestInfo, and its status recorder: one allocation for the three.
type requestState struct {
	context.Context
	info requestInfo
	rec  statusRecorder
}

func (s *requestState) Value(key any) any {
	if _, ok := key.(infoKey); ok {
		return &s.info
	}
	return s.Context.Value(key)
}

func info(r *http.Request) *requestInfo {
	if i, ok := r.Context().Value(infoKey{}).(*requestInfo); ok {
		return i
	}
	return &requestInfo{}
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// maxLoggedBytes caps what the log takes of a client-chosen string (a path
// that matched no route, the request identity).
const maxLoggedBytes = 256

// requestLog echoes the request identity and writes one JSON line per
// request: never its body, query values or credentials. Before a request
// is authenticated the line has only its method and status: an anonymous
// client cannot write into the log.
func requestLog(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		state := &requestState{Context: r.Context(), rec: statusRecorder{ResponseWriter: w}}
		ri, rec := &state.info, &state.rec
		id := header(r.Header, keyRequestIdentity)
		if id != "" {
			w.Header()[keyRequestIdentity] = []string{id}
		}
		next.ServeHTTP(rec, r.WithContext(state))
		attrs := make([]slog.Attr, 0, 8) // method, route or path, status, duration, the ids, the user, the identity
		attrs = append(attrs, slog.String("method", truncate(r.Method, 16)))
		switch {
		case ri.route != "":
			attrs = append(attrs, slog.String("route", ri.route))
		case ri.authenticated:
			attrs = append(attrs, slog.String("path", truncate(r.URL.Path, maxLoggedBytes)))
		}
		attrs = append(attrs, slog.Int("status", rec.status), slog.Int64("duration_ms", time.Since(start).Milliseconds()))
		if ri.authenticated {
			// These are in the context of later lines, not of this one.
			for _, a := range [...]slog.Attr{slog.String("instance_id", ri.instanceID), slog.String("binding_id", ri.bindingID), slog.String("user", ri.user)} {
				if a.Value.String() != "" {
					attrs = append(attrs, a)
				}
			}
			if id != "" {
				attrs = append(attrs, slog.String("request_identity", truncate(id, maxLoggedBytes)))
			}
		}
		logging.LogAttrs(r.Context(), logger, slog.LevelInfo, "request", attrs...)
	})
}

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// recoverPanics turns a panic into a logged 500, so no client sees a reset
// connection and the process keeps serving.
func recoverPanics(h *handlers, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				h.writeError(w, r, fmt.Errorf("panic: %v\n%s", p, debug.Stack()))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// ok checks HTTP basic auth against the set's pairs. It compares SHA-256
// digests in constant time and always checks every pair, so timing tells
// nothing about which part was wrong.
func (s *CredentialSet) ok(user, pass string) bool {
	if s == nil {
		return false
	}
	u, p := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
	match := 0
	for _, pair := range s.digests {
		match |= subtle.ConstantTimeCompare(u[:], pair[0][:]) & subtle.ConstantTimeCompare(p[:], pair[1][:])
	}
	return match == 1
}

// verifyOrigin refuses (403) a request that does not carry the origin
// secret in deploy.HeaderOriginVerify: one that reached the HTTP API around the
// front door, which adds it. It runs before authentication, so that such a
// request cannot even try credentials. It compares SHA-256 digests in
// constant time, and takes the header off the request, so that nothing
// after it can log the value.
func verifyOrigin(h *handlers, secret string, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(secret))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		values := r.Header.Values(deploy.HeaderOriginVerify)
		got := sha256.Sum256([]byte(strings.Join(values, ",")))
		if len(values) != 1 || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			h.writeError(w, r, broker.Errorf(broker.CodeForbidden,
				"This broker only answers through its front door: register and call it at the URL of the stack's BrokerUrl output, not at the HTTP API's own URL."))
			return
		}
		r.Header.Del(deploy.HeaderOriginVerify)
		next.ServeHTTP(w, r)
	})
}

// authenticate checks the request's basic auth against the source's
// pairs; on a failure it asks once more with retry, so that a password
// just added to the secret is accepted without waiting for the source's
// next read.
func authenticate(h *handlers, creds CredentialSource, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if ok && !creds.Credentials(r.Context(), false).ok(user, pass) {
			ok = creds.Credentials(r.Context(), true).ok(user, pass)
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="serverless-osb", charset="UTF-8"`)
			h.writeError(w, r, broker.Errorf(broker.CodeUnauthorized,
				"Authentication failed: send the broker's username and password with HTTP basic auth."))
			return
		}
		info(r).authenticated = true
		if id := header(r.Header, keyRequestIdentity); id != "" {
			r = annotate(r, slog.String("request_identity", truncate(id, maxLoggedBytes)))
		}
		next.ServeHTTP(w, r)
	})
}

// apiVersion accepts X-Broker-API-Version 2.x with x >= 9.
func apiVersion(h *handlers, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := header(r.Header, keyAPIVersion)
		if !supportedVersion(v) {
			what := fmt.Sprintf("The API version %q is not supported", v)
			if v == "" {
				what = "The " + HeaderAPIVersion + " header is missing"
			}
			h.writeError(w, r, broker.Errorf(broker.CodePreconditionFailed,
				"%s: this broker supports OSB API versions 2.%d and later 2.x (2.17 recommended); send e.g. %s: 2.17.",
				what, MinMinorVersion, HeaderAPIVersion))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func supportedVersion(v string) bool {
	major, minor, ok := strings.Cut(strings.TrimSpace(v), ".")
	if !ok || major != "2" {
		return false
	}
	n, err := strconv.Atoi(minor)
	return err == nil && n >= MinMinorVersion && !strings.HasPrefix(minor, "+")
}

// originatingIdentity parses X-Broker-API-Originating-Identity
// ("<platform> <base64 JSON object>") and logs the user it names.
func originatingIdentity(h *handlers, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := header(r.Header, keyOriginatingIdentity)
		if v == "" {
			next.ServeHTTP(w, r)
			return
		}
		user, err := parseOriginatingIdentity(v)
		if err != nil {
			h.writeError(w, r, badRequest("The %s header is malformed: %v. Expected \"<platform> <base64-encoded JSON object>\".",
				HeaderOriginatingIdentity, err))
			return
		}
		// The identity is the platform's, but its value is whatever the
		// caller put there: cut it like every other client-chosen string,
		// since it is repeated on every line of the request.
		user = truncate(user, maxLoggedBytes)
		info(r).user = user
		next.ServeHTTP(w, r.WithContext(logging.With(r.Context(), slog.String("user", user))))
	})
}

// parseOriginatingIdentity returns the user the identity names: user_id
// for Cloud Foundry, username for Kubernetes, or platform/unknown.
func parseOriginatingIdentity(v string) (string, error) {
	platform, encoded, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || platform == "" || strings.TrimSpace(encoded) == "" {
		return "", fmt.Errorf("it needs a platform and a value separated by a space")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		if raw, err = base64.RawStdEncoding.DecodeString(strings.TrimSpace(encoded)); err != nil {
			return "", fmt.Errorf("the value is not base64")
		}
	}
	var identity map[string]any
	if err := json.Unmarshal(raw, &identity); err != nil || identity == nil {
		return "", fmt.Errorf("the decoded value is not a JSON object")
	}
	for _, key := range []string{"user_id", "username", "uid"} {
		if s, ok := identity[key].(string); ok && s != "" {
			return platform + "/" + s, nil
		}
	}
	return platform + "/unknown", nil
}
