// Package api owns the broker's HTTP surface: routes, authentication,
// headers, request decoding and validation, the request and answer bodies,
// and the mapping of broker errors to HTTP statuses (in ONE function,
// writeError).
//
// The rules that keep it so:
//
//   - Every endpoint is serve (serve.go) with the endpoint's decode, the
//     broker's method, and the endpoint's encode: one line in New's routes.
//     A decode reads the request (readRequest: the path's ids, the query,
//     the body) into the broker's details type; an encode turns the
//     broker's result into a status, the body and any header beyond
//     Content-Type. No endpoint writes an answer or an error itself.
//   - Bodies live here and only here, next to their endpoint's decode and
//     encode (instances.go, bindings.go, lastop.go, catalog.go). The broker
//     returns domain values (an Instance, a Binding, a result type without
//     JSON tags), and no answer marshals a domain struct (only the state
//     strings and the credentials map), so neither the domain nor the
//     stores' encoding can change what a platform reads.
//   - A new field of an OSB request goes in the endpoint's request body and
//     decode, in the broker's details type (broker.InstanceRequest for a
//     provision field the instance keeps, broker.BindingRequest for a bind
//     field the binding keeps), in each store's storage type,
//     and, where GET returns it, in the answer body. contract_test.go
//     has a row for every field of ProvisionDetails, UpdateDetails and
//     BindDetails and fails, naming the places, for a field that does not
//     make the trip; internal/broker's fingerprint_test.go for a field the
//     request's fingerprint neither hashes nor lists as left out.
package api

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
)

// Credential is one username/password pair the platform may authenticate
// with. Several pairs allow rotation.
type Credential struct {
	Username string
	Password string
}

// CredentialSet is credential pairs ready to check requests against:
// their SHA-256 digests, computed once when the set is made rather than
// on every request.
type CredentialSet struct {
	digests [][2][32]byte
}

// NewCredentialSet returns the set of creds.
func NewCredentialSet(creds []Credential) *CredentialSet {
	s := &CredentialSet{digests: make([][2][32]byte, 0, len(creds))}
	for _, c := range creds {
		s.digests = append(s.digests, [2][32]byte{sha256.Sum256([]byte(c.Username)), sha256.Sum256([]byte(c.Password))})
	}
	return s
}

// Len is the number of pairs in s.
func (s *CredentialSet) Len() int { return len(s.digests) }

// CredentialSource gives the credential pairs a request is checked against
// now: the deployed api re-reads them from Secrets Manager, so that a
// revoked password stops working in minutes. It is called by concurrent
// requests.
type CredentialSource interface {
	// Credentials returns the pairs to accept. retry says that a request
	// failed against the pairs last returned: a source may read them again
	// sooner than it otherwise would (a password added for rotation), as
	// long as a flood of bad passwords cannot make it read on each.
	Credentials(ctx context.Context, retry bool) *CredentialSet
}

// fixedCredentials is a CredentialSource that never changes.
type fixedCredentials struct{ set *CredentialSet }

func (c fixedCredentials) Credentials(context.Context, bool) *CredentialSet { return c.set }

// Config is what the HTTP surface needs.
type Config struct {
	Broker  *broker.Broker
	Catalog *catalog.Catalog
	// Credentials are the pairs accepted when CredentialSource is nil.
	Credentials      []Credential
	CredentialSource CredentialSource
	Logger           *slog.Logger
	// OriginSecret, when set, is the value every request must carry in
	// deploy.HeaderOriginVerify: the deployed stack's front door (CloudFront) adds
	// it, so that a request sent to the HTTP API's own URL, around the
	// front door's WAF rules, is refused (403). Empty accepts every request.
	OriginSecret string
}

// MaxBodyBytes bounds request bodies: the same limit for every store (see
// broker.MaxRequestBytes).
const MaxBodyBytes = broker.MaxRequestBytes

// New returns the broker's HTTP handler.
func New(c Config) http.Handler {
	h := &handlers{catalog: c.Catalog, logger: c.Logger}
	b := c.Broker
	mux := http.NewServeMux()
	route := func(pattern string, m map[string]http.HandlerFunc) { mux.Handle(pattern, methods{h, m}) }
	// Every endpoint is serve with the endpoint's decode, its call and its
	// encode: see serve.
	route("/v2/catalog", map[string]http.HandlerFunc{
		http.MethodGet: serve(h, decodeCatalog, h.readCatalog, encodeCatalog),
	})
	route("/v2/service_instances/{instance_id}", map[string]http.HandlerFunc{
		http.MethodPut:    serve(h, decodeProvision, b.Provision, encodeProvision),
		http.MethodPatch:  serve(h, decodeUpdate, b.Update, encodeUpdate),
		http.MethodDelete: serve(h, decodeDeprovision, b.Deprovision, encodeDeprovision),
		http.MethodGet:    serve(h, decodeFetchInstance, b.FetchInstance, encodeFetchInstance),
	})
	route("/v2/service_instances/{instance_id}/last_operation", map[string]http.HandlerFunc{
		http.MethodGet: serve(h, decodeLastOperation, b.LastOperation, encodeLastOperation),
	})
	route("/v2/service_instances/{instance_id}/service_bindings/{binding_id}", map[string]http.HandlerFunc{
		http.MethodPut:    serve(h, decodeBind, b.Bind, encodeBind),
		http.MethodDelete: serve(h, decodeUnbind, b.Unbind, encodeUnbind),
		http.MethodGet:    serve(h, decodeFetchBinding, b.FetchBinding, encodeFetchBinding),
	})
	route("/v2/service_instances/{instance_id}/service_bindings/{binding_id}/last_operation", map[string]http.HandlerFunc{
		http.MethodGet: serve(h, decodeLastOperation, b.LastBindingOperation, encodeLastOperation),
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.writeError(w, r, broker.Errorf(broker.CodeNotFound,
			"There is no endpoint %s %s; the OSB API lives under /v2.", r.Method, r.URL.Path))
	})

	var handler http.Handler = canonicalPaths(h, mux)
	handler = originatingIdentity(h, handler)
	handler = apiVersion(h, handler)
	var creds CredentialSource = fixedCredentials{NewCredentialSet(c.Credentials)}
	if c.CredentialSource != nil {
		creds = c.CredentialSource
	}
	handler = authenticate(h, creds, handler)
	if c.OriginSecret != "" {
		handler = verifyOrigin(h, c.OriginSecret, handler)
	}
	handler = recoverPanics(h, handler)
	handler = requestLog(c.Logger, handler)
	return handler
}

type handlers struct {
	catalog *catalog.Catalog
	logger  *slog.Logger
}

// methods routes one path by method; any other method gets a JSON 405.
type methods struct {
	h *handlers
	m map[string]http.HandlerFunc
}

func (m methods) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	info(r).route = r.Pattern
	if f, ok := m.m[r.Method]; ok {
		f(w, r)
		return
	}
	allowed := make([]string, 0, len(m.m))
	for method := range m.m {
		allowed = append(allowed, method)
	}
	slices.Sort(allowed)
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	m.h.writeJSON(r.Context(), w, http.StatusMethodNotAllowed, errorBody{
		Description: fmt.Sprintf("%s is not allowed on %s; use %s.", r.Method, r.URL.Path, strings.Join(allowed, " or "))})
}

// canonicalPaths answers, as JSON, the requests that ServeMux would answer
// by itself instead of calling a route: a path that is not clean (with
// empty, "." or ".." segments), which it redirects (307, keeping the method
// and body: a platform following PUT /v2/service_instances/x/../y would
// provision y), the asterisk-form target, and CONNECT.
func canonicalPaths(h *handlers, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.EscapedPath()
		if r.Method != http.MethodConnect && p != "" && p[0] == '/' && cleanPath(p) == p {
			next.ServeHTTP(w, r)
			return
		}
		h.writeError(w, r, broker.Errorf(broker.CodeNotFound,
			"There is no endpoint %s %s: the OSB API lives under /v2, at paths without empty, \".\" or \"..\" segments.",
			truncate(r.Method, 16), truncate(p, maxLoggedBytes)))
	})
}

// cleanPath is p without empty, "." and ".." segments, keeping a trailing
// slash, as ServeMux cleans paths.
func cleanPath(p string) string {
	np := path.Clean(p)
	if strings.HasSuffix(p, "/") && np != "/" {
		np += "/"
	}
	return np
}
