package sandbox

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"
)

// route is an HTTP API route of the template: "ANY /v2/{proxy+}" or
// "$default", and the integration it goes to.
type route struct {
	key, integration string
}

// integration is a Lambda proxy integration of the template.
type integration struct {
	uri, payloadVersion string
}

// integrationTimeout is HTTP APIs' limit for an integration's answer.
const integrationTimeout = 30 * time.Second

// The limits of a request: an HTTP API takes a payload of at most 10 MB
// ("Payload size", not adjustable: Quotas for configuring and running an
// HTTP API in API Gateway), answering 413 itself beyond it; Lambda takes
// a synchronous invocation's payload (the event, the body in it, base64
// for a body that is not text) of at most 6 MB (Lambda quotas:
// "Invocation payload (request and response)", 6 MB each for synchronous
// invocations), which API Gateway answers 413 too.
const (
	maxPayload       = 10 << 20
	maxInvokePayload = 6 << 20
)

// front is the HTTP API: it turns each request into the payload 2.0 event
// API Gateway sends the route's function, and the function's answer back
// into HTTP, with API Gateway's own answers where it gives them (404 for
// no route, 500 for a function error, 503 for a timeout).
func (sb *Sandbox) front() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Path
		// An HTTP API's event is JSON: a path or a query parameter that
		// percent-decodes to bytes that are not UTF-8 cannot reach the
		// function as they are, and replaced (U+FFFD) two different ids
		// would name one instance. Refused, as the broker refuses them.
		if !utf8.ValidString(path) || !validQuery(r.URL.Query()) {
			gatewayError(w, http.StatusBadRequest, "Bad Request")
			return
		}
		if r.ContentLength > maxPayload {
			gatewayError(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
			return
		}
		if sb.stagePrefix != "" {
			p, ok := strings.CutPrefix(path, sb.stagePrefix)
			if !ok {
				gatewayError(w, http.StatusNotFound, "Not Found")
				return
			}
			path = p
		}
		rt, params, ok := sb.match(r.Method, path)
		if !ok {
			gatewayError(w, http.StatusNotFound, "Not Found")
			return
		}
		in, ok := sb.integrations[rt.integration]
		var f *Function
		if ok {
			f = sb.function(functionOfURI(in.uri))
		}
		if f == nil || (in.payloadVersion != "" && in.payloadVersion != "2.0") {
			sb.logf("route %q: its integration %q is not a Lambda proxy integration (payload 2.0) of a function of the stack", rt.key, rt.integration)
			gatewayError(w, http.StatusInternalServerError, "Internal Server Error")
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxPayload+1))
		if err != nil {
			gatewayError(w, http.StatusBadRequest, "Bad Request")
			return
		}
		if len(body) > maxPayload {
			gatewayError(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
			return
		}
		if sb.refuseUnrunnable(w, r, path, body) {
			return
		}
		event := sb.event(r, path, rt.key, params, body)
		payload, err := json.Marshal(event)
		if err != nil {
			gatewayError(w, http.StatusInternalServerError, "Internal Server Error")
			return
		}
		if len(payload) > maxInvokePayload {
			gatewayError(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
			return
		}
		ctx, cancel := contextWithTimeout(r, integrationTimeout)
		defer cancel()
		inv, err := f.Invoke(ctx, payload)
		if err != nil {
			if ctx.Err() != nil {
				gatewayError(w, http.StatusServiceUnavailable, "Service Unavailable")
				return
			}
			sb.logf("route %q: %v", rt.key, err)
			gatewayError(w, http.StatusInternalServerError, "Internal Server Error")
			return
		}
		if inv.FunctionError {
			gatewayError(w, http.StatusInternalServerError, "Internal Server Error")
			return
		}
		writeResponse(w, inv.Payload)
	})
}

// validQuery says whether every name and value of a query is UTF-8.
func validQuery(q map[string][]string) bool {
	for k, vs := range q {
		if !utf8.ValidString(k) {
			return false
		}
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return false
			}
		}
	}
	return true
}

func gatewayError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Apigw-Requestid", uuid.NewString())
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"message":%q}`, message)
}

// functionOfURI is the function of an integration's URI: the function's
// ARN, or API Gateway's invocation URI that holds it.
func functionOfURI(uri string) string {
	if i := strings.Index(uri, "/functions/"); i >= 0 {
		return strings.TrimSuffix(uri[i+len("/functions/"):], "/invocations")
	}
	return uri
}

// match finds the route of a request, as HTTP APIs do: the most specific
// one; $default when none other matches.
func (sb *Sandbox) match(method, path string) (route, map[string]string, bool) {
	var def *route
	type candidate struct {
		r      route
		params map[string]string
		score  int
	}
	var found []candidate
	for i, rt := range sb.routes {
		if rt.key == "$default" {
			def = &sb.routes[i]
			continue
		}
		m, p, ok := strings.Cut(rt.key, " ")
		if !ok || (m != "ANY" && m != method) {
			continue
		}
		params, score, ok := matchPath(p, path)
		if !ok {
			continue
		}
		if m != "ANY" {
			score++
		}
		found = append(found, candidate{rt, params, score})
	}
	if len(found) > 0 {
		sort.SliceStable(found, func(i, j int) bool { return found[i].score > found[j].score })
		return found[0].r, found[0].params, true
	}
	if def != nil {
		return *def, nil, true
	}
	return route{}, nil, false
}

// matchPath matches a route's path, with {name} for one segment and
// {name+} for the rest, against a request's; the score counts the literal
// segments.
func matchPath(pattern, path string) (map[string]string, int, bool) {
	ps := strings.Split(strings.Trim(pattern, "/"), "/")
	xs := strings.Split(strings.Trim(path, "/"), "/")
	params := map[string]string{}
	score := 0
	for i, p := range ps {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "+}") {
			if i >= len(xs) || xs[i] == "" {
				return nil, 0, false
			}
			params[p[1:len(p)-2]] = strings.Join(xs[i:], "/")
			return params, score, true
		}
		if i >= len(xs) {
			return nil, 0, false
		}
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			params[p[1:len(p)-1]] = xs[i]
			continue
		}
		if p != xs[i] {
			return nil, 0, false
		}
		score += 2
	}
	if len(ps) != len(xs) {
		return nil, 0, false
	}
	return params, score, true
}

// event is the payload 2.0 event of a request, as API Gateway sends it:
// header names in lower case with repeated values joined by commas, the
// Cookie header moved to cookies, the query string's parameters likewise
// joined, rawPath percent-decoded, and a body that is not text in base64.
func (sb *Sandbox) event(r *http.Request, path, routeKey string, params map[string]string, body []byte) events.APIGatewayV2HTTPRequest {
	headers := map[string]string{}
	var cookies []string
	for name, values := range r.Header {
		if strings.EqualFold(name, "Cookie") {
			for _, v := range values {
				for c := range strings.SplitSeq(v, ";") {
					if c = strings.TrimSpace(c); c != "" {
						cookies = append(cookies, c)
					}
				}
			}
			continue
		}
		headers[strings.ToLower(name)] = strings.Join(values, ",")
	}
	headers["host"] = r.Host
	if len(body) > 0 || r.ContentLength >= 0 {
		headers["content-length"] = fmt.Sprint(len(body))
	}
	ip, _, _ := net.SplitHostPort(r.RemoteAddr)
	headers["x-forwarded-for"] = ip
	headers["x-forwarded-proto"] = "http"
	_, port, _ := net.SplitHostPort(r.Host)
	headers["x-forwarded-port"] = port
	var query map[string]string
	for k, v := range r.URL.Query() {
		if query == nil {
			query = map[string]string{}
		}
		query[k] = strings.Join(v, ",")
	}
	now := time.Now().UTC()
	e := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: routeKey, RawPath: path, RawQueryString: r.URL.RawQuery,
		Cookies: cookies, Headers: headers, QueryStringParameters: query, PathParameters: params,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: routeKey, AccountID: sb.account, Stage: "$default", RequestID: uuid.NewString(),
			APIID: sb.apiID(), DomainName: r.Host, DomainPrefix: strings.Split(r.Host, ".")[0],
			Time: now.Format("02/Jan/2006:15:04:05 -0700"), TimeEpoch: now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: r.Method, Path: path,
				Protocol: r.Proto, SourceIP: ip, UserAgent: r.UserAgent()},
		},
	}
	if sb.stagePrefix != "" {
		e.RequestContext.Stage = strings.TrimPrefix(sb.stagePrefix, "/")
		e.RawPath = sb.stagePrefix + path
		e.RequestContext.HTTP.Path = e.RawPath
	}
	if len(body) > 0 {
		if isText(r.Header.Get("Content-Type")) {
			e.Body = string(body)
		} else {
			e.Body, e.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
	}
	return e
}

// apiID is the HTTP API's id, read once at start (a deploy changes
// sb.made).
func (sb *Sandbox) apiID() string {
	return sb.api
}

func (sb *Sandbox) findAPIID() string {
	for _, m := range sb.made {
		if id, ok := m.attrs["ApiId"]; ok {
			return id
		}
	}
	return ""
}

// isText says whether API Gateway passes a body of this type as text.
func isText(contentType string) bool {
	t, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return strings.HasPrefix(t, "text/") || strings.HasSuffix(t, "/json") || strings.HasSuffix(t, "+json") ||
		strings.HasSuffix(t, "/xml") || strings.HasSuffix(t, "+xml") || t == "application/x-www-form-urlencoded" ||
		t == "application/javascript"
}

// writeResponse writes a function's payload 2.0 answer: a response object,
// or any other JSON value, which API Gateway sends as a 200 JSON body.
func writeResponse(w http.ResponseWriter, payload []byte) {
	var probe map[string]json.RawMessage
	var resp events.APIGatewayV2HTTPResponse
	if json.Unmarshal(payload, &probe) != nil || probe["statusCode"] == nil || json.Unmarshal(payload, &resp) != nil {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(payload)
		return
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	for _, c := range resp.Cookies {
		w.Header().Add("Set-Cookie", c)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(resp.Body)
		if err != nil {
			gatewayError(w, http.StatusInternalServerError, "Internal Server Error")
			return
		}
		body = b
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}
