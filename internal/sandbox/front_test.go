package sandbox

import (
	"encoding/base64"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestTheFrontSendsTheEventAPIGatewaySends(t *testing.T) {
	sb := &Sandbox{account: "123456789012", routes: []route{{key: "ANY /v2/{proxy+}", integration: "i"}}}
	r := httptest.NewRequest("PUT", "http://127.0.0.1:8080/v2/service_instances/a%2Fb%0A?accepts_incomplete=true&x=1&x=2", strings.NewReader("\x00\x01binary"))
	r.Header.Set("Content-Type", "application/octet-stream")
	r.Header.Add("Cookie", "a=1; b=2")
	r.Header.Add("X-Broker-API-Version", "2.17")
	r.Header.Add("X-Many", "one")
	r.Header.Add("X-Many", "two")
	rt, params, ok := sb.match(r.Method, r.URL.Path)
	if !ok || rt.key != "ANY /v2/{proxy+}" {
		t.Fatalf("route %+v %v", rt, ok)
	}
	e := sb.event(r, r.URL.Path, rt.key, params, []byte("\x00\x01binary"))
	if e.RawPath != "/v2/service_instances/a/b\n" || e.RequestContext.HTTP.Path != e.RawPath {
		t.Errorf("rawPath %q: API Gateway delivers it percent-decoded", e.RawPath)
	}
	if e.PathParameters["proxy"] != "service_instances/a/b\n" {
		t.Errorf("proxy %q", e.PathParameters["proxy"])
	}
	if e.RawQueryString != "accepts_incomplete=true&x=1&x=2" || e.QueryStringParameters["x"] != "1,2" {
		t.Errorf("query %q %v", e.RawQueryString, e.QueryStringParameters)
	}
	if len(e.Cookies) != 2 || e.Cookies[0] != "a=1" || e.Cookies[1] != "b=2" || e.Headers["cookie"] != "" {
		t.Errorf("cookies %v, cookie header %q: want the cookies apart", e.Cookies, e.Headers["cookie"])
	}
	if e.Headers["x-broker-api-version"] != "2.17" || e.Headers["x-many"] != "one,two" {
		t.Errorf("headers %v: want lower-case names, repeated values joined", e.Headers)
	}
	if body, err := base64.StdEncoding.DecodeString(e.Body); !e.IsBase64Encoded || err != nil || string(body) != "\x00\x01binary" {
		t.Errorf("a binary body %q (base64 %v)", e.Body, e.IsBase64Encoded)
	}
	r.Header.Set("Content-Type", "application/json")
	if e := sb.event(r, r.URL.Path, rt.key, params, []byte(`{}`)); e.IsBase64Encoded || e.Body != "{}" {
		t.Errorf("a JSON body %q (base64 %v): want it as text", e.Body, e.IsBase64Encoded)
	}
	if _, _, ok := sb.match("GET", "/v3/catalog"); ok {
		t.Error("a path no route matches was routed")
	}
}

func TestTheFrontWritesTheFunctionsAnswer(t *testing.T) {
	w := httptest.NewRecorder()
	writeResponse(w, []byte(`{"statusCode":201,"headers":{"Content-Type":"application/json"},"cookies":["c=1"],"body":"eyJvayI6dHJ1ZX0=","isBase64Encoded":true}`))
	if w.Code != 201 || w.Body.String() != `{"ok":true}` || w.Header().Get("Set-Cookie") != "c=1" {
		t.Errorf("got %d %q %v", w.Code, w.Body.String(), w.Header())
	}
	w = httptest.NewRecorder()
	writeResponse(w, []byte(`{"plain":"json"}`))
	if w.Code != 200 || w.Body.String() != `{"plain":"json"}` || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("an answer that is no response object: got %d %q, want it as a 200 JSON body", w.Code, w.Body.String())
	}
}
