package api

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// TestBindAnswerIsJSONMarshal holds encodeBind's direct encoding to what
// json.Marshal gives the same body, byte for byte, for every shape of
// answer: accepted, with or without credentials, endpoints, expiry, and
// values that need escapes or that only encoding/json can write.
func TestBindAnswerIsJSONMarshal(t *testing.T) {
	expires := time.Date(2026, 11, 28, 21, 0, 0, 0, time.UTC)
	for _, res := range []broker.BindResult{
		{Result: broker.ResultCreated},
		{Result: broker.ResultOK, Credentials: broker.Credentials{}},
		{Result: broker.ResultCreated, Credentials: broker.Credentials{"user": "u", "password": "p<&>\u2028", "port": json.Number("5432")}},
		{Result: broker.ResultCreated, Credentials: broker.Credentials{"nested": map[string]any{"b": []any{1.5, true, nil, "x"}, "a": map[string]any{}}, "f": 1e21, "é\x01": "\xff"}},
		{Result: broker.ResultCreated, Credentials: broker.Credentials{"t": expires, "raw": json.RawMessage(` { "a" : 1 } `)}},
		{Result: broker.ResultCreated, Credentials: broker.Credentials{"u": "u"}, Endpoints: []broker.Endpoint{{Host: "h", Ports: []string{"1"}, Protocol: "tcp"}}},
		{Result: broker.ResultCreated, Credentials: broker.Credentials{"u": "u"}, ExpiresAt: expires, RenewBefore: expires.Add(-time.Hour)},
		{Result: broker.ResultCreated, Endpoints: []broker.Endpoint{{Host: "h"}}, ExpiresAt: expires, RenewBefore: expires},
		{Result: broker.ResultCreated, Endpoints: []broker.Endpoint{{Host: "h<&>\u2028\xff", Ports: []string{}}, {Host: "", Ports: []string{"1", "é\x01\"", ""}, Protocol: "t\\cp"}, {Host: "h", Protocol: "udp"}}},
		{Result: broker.ResultAccepted, Operation: "bind-<1>", Credentials: broker.Credentials{"u": "u"}},
		{Result: broker.ResultAccepted, Operation: "bind-1"},
		{Result: broker.ResultCreated, Credentials: broker.Credentials{"u": "u"}, ExpiresAt: time.Date(12026, 1, 2, 3, 4, 5, 678, time.FixedZone("x", -3600)), RenewBefore: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Result: broker.ResultAccepted, Operation: "bind-1", ExpiresAt: expires, RenewBefore: expires},
		{Result: broker.ResultCreated, Credentials: broker.Credentials{"c": make(chan int)}},
		{Result: broker.ResultCreated, Credentials: broker.Credentials{"c": make(chan int)}, ExpiresAt: expires, RenewBefore: expires},
	} {
		// The body as encodeBind built it before it encoded it itself.
		want := bindingBody{Operation: res.Operation}
		if res.Result != broker.ResultAccepted {
			want.Credentials, want.Endpoints = res.Credentials, endpoints(res.Endpoints)
			want.Metadata = bindingMetadata(res.ExpiresAt, res.RenewBefore)
		}
		wantJSON, wantErr := json.Marshal(want)
		code, got := encodeBind(res, nil)
		if code != statusOf(res.Result) {
			t.Errorf("encodeBind(%+v) answers %d, want %d", res, code, statusOf(res.Result))
		}
		raw, encoded := got.(json.RawMessage)
		switch {
		case wantErr != nil && encoded:
			t.Errorf("encodeBind(%+v) wrote %s, though json.Marshal fails (%v): writeJSON must see the body", res, raw, wantErr)
		case wantErr == nil && !encoded:
			t.Errorf("encodeBind(%+v) left %T to json.Marshal, want it written", res, got)
		case wantErr != nil && !reflect.DeepEqual(got, want):
			t.Errorf("encodeBind(%+v) leaves %+v to writeJSON, want %+v", res, got, want)
		case wantErr == nil && string(raw) != string(wantJSON):
			t.Errorf("encodeBind(%+v) wrote\n%s\njson.Marshal gives\n%s", res, raw, wantJSON)
		}
	}
}
