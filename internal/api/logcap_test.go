package api_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/app/apptest"
)

// requestLines returns the "request" log lines written since mark.
func requestLines(t *testing.T, b *apptest.Broker, mark int) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(b.Logs.String()[mark:], "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("a log line is not JSON: %v: %.200s", err, l)
		}
		if m["msg"] == "request" {
			lines = append(lines, m)
		}
	}
	return lines
}

func TestAnonymousRequestsCannotWriteIntoTheLog(t *testing.T) {
	f := newFixture(t)
	big := strings.Repeat("z", 200<<10)
	mark := len(f.b.Logs.String())
	for _, auth := range []bool{false, true} {
		r := f.b.Do(apptest.Request{Method: http.MethodGet, Path: "/v2/" + big, NoAuth: !auth,
			Header: map[string]string{"X-Broker-API-Request-Identity": "id-" + big}})
		if r.Status != http.StatusUnauthorized && r.Status != http.StatusNotFound {
			t.Fatalf("status %d: %s", r.Status, r.Raw)
		}
	}
	logged := f.b.Logs.String()[mark:]
	if len(logged) > 4<<10 {
		t.Fatalf("two requests with a 200 KiB path and header grew the log by %d bytes", len(logged))
	}
	lines := requestLines(t, f.b, mark)
	if len(lines) != 2 {
		t.Fatalf("got %d request lines, want 2", len(lines))
	}
	anon, authed := lines[0], lines[1]
	t.Run("before authentication only the method, status and duration are logged", func(t *testing.T) {
		for _, k := range []string{"path", "route", "request_identity"} {
			if _, ok := anon[k]; ok {
				t.Errorf("the anonymous request's line has %s: %.200v", k, anon[k])
			}
		}
		if anon["status"] != 401.0 || anon["method"] != "GET" {
			t.Errorf("line %v, want method GET and status 401", anon)
		}
		if _, ok := anon["duration_ms"]; !ok {
			t.Errorf("line %v has no duration_ms", anon)
		}
	})
	t.Run("after authentication the path and identity are logged, cut short", func(t *testing.T) {
		p, _ := authed["path"].(string)
		id, _ := authed["request_identity"].(string)
		if !strings.HasPrefix(p, "/v2/zzz") || len(p) > 300 || !strings.HasPrefix(id, "id-zzz") || len(id) > 300 {
			t.Errorf("path %.40q (%d bytes), identity %.40q (%d bytes): want both present and capped", p, len(p), id, len(id))
		}
	})
	t.Run("a matched route is logged by its shape, with the ids", func(t *testing.T) {
		mark := len(f.b.Logs.String())
		id := f.provision(t, f.syncPlan, nil)
		lines := requestLines(t, f.b, mark)
		if len(lines) != 1 || lines[0]["route"] != "/v2/service_instances/{instance_id}" || lines[0]["instance_id"] != id {
			t.Errorf("lines %v, want one with the route's pattern and instance_id %s", lines, id)
		}
	})
}

func TestTheOriginatingIdentityIsCutInTheLog(t *testing.T) {
	f := newFixture(t)
	user := strings.Repeat("u", 60<<10)
	identity := "cloudfoundry " + base64.StdEncoding.EncodeToString([]byte(`{"user_id":"`+user+`"}`))
	mark := len(f.b.Logs.String())
	r := f.b.Do(apptest.Request{Method: http.MethodGet, Path: "/v2/catalog",
		Header: map[string]string{"X-Broker-API-Originating-Identity": identity}})
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Raw)
	}
	if logged := f.b.Logs.String()[mark:]; len(logged) > 2<<10 {
		t.Fatalf("a request with a 60 KiB user_id grew the log by %d bytes", len(logged))
	}
	lines := requestLines(t, f.b, mark)
	if len(lines) != 1 {
		t.Fatalf("got %d request lines, want 1", len(lines))
	}
	if u, _ := lines[0]["user"].(string); !strings.HasPrefix(u, "cloudfoundry/uuu") || len(u) > 300 {
		t.Errorf("user %.40q (%d bytes): want it present and capped", u, len(u))
	}
}
