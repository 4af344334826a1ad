package api_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/api"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/logging"
)

// originSecret is what the front door would add to every request.
const originSecret = "Zq8vN3kW1pLr6TgY0bHc4JmX9sDf2AeU"

// originHandler is the broker's handler with an origin secret (empty:
// none), logging into logs. The catalog is all these requests reach.
func originHandler(t *testing.T, secret string, logs *bytes.Buffer) http.Handler {
	t.Helper()
	cat, err := catalog.Load(filepath.Join(apptest.Root(), "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return api.New(api.Config{Broker: (*broker.Broker)(nil), Catalog: cat, Logger: logging.New(logs, slog.LevelDebug),
		Credentials: []api.Credential{{Username: apptest.Username, Password: apptest.Password}}, OriginSecret: secret})
}

func TestOriginSecret(t *testing.T) {
	tests := []struct {
		name   string
		secret string
		// header is the X-Origin-Verify values sent (none when nil).
		header []string
		auth   bool
		want   int
	}{
		{"with an origin secret, a request without the header is refused", originSecret, nil, true, http.StatusForbidden},
		{"with an origin secret, a request with another value is refused", originSecret, []string{"not-the-secret"}, true, http.StatusForbidden},
		{"with an origin secret, a request with the value and more is refused", originSecret, []string{originSecret + "x"}, true, http.StatusForbidden},
		{"with an origin secret, a request with the header twice is refused", originSecret, []string{originSecret, originSecret}, true, http.StatusForbidden},
		{"with an origin secret, an empty header is refused", originSecret, []string{""}, true, http.StatusForbidden},
		{"with an origin secret, a request without credentials is refused before they are checked", originSecret, nil, false, http.StatusForbidden},
		{"with an origin secret, a request carrying it is served", originSecret, []string{originSecret}, true, http.StatusOK},
		{"with an origin secret, a request carrying it still needs credentials", originSecret, []string{originSecret}, false, http.StatusUnauthorized},
		{"without an origin secret, a request without the header is served", "", nil, true, http.StatusOK},
		{"without an origin secret, a request with any header is served", "", []string{"anything"}, true, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			h := originHandler(t, tt.secret, &logs)
			r := httptest.NewRequest(http.MethodGet, "/v2/catalog", nil)
			r.Header.Set(api.HeaderAPIVersion, "2.17")
			if tt.auth {
				r.SetBasicAuth(apptest.Username, apptest.Password)
			}
			for _, v := range tt.header {
				r.Header.Add(deploy.HeaderOriginVerify, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.want, w.Body)
			}
			if tt.want == http.StatusForbidden {
				var body struct {
					Description string `json:"description"`
				}
				if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || !strings.Contains(body.Description, "BrokerUrl") {
					t.Errorf("body %s: want a description naming the URL to use (BrokerUrl)", w.Body)
				}
			}
			if tt.secret != "" && strings.Contains(logs.String(), tt.secret) {
				t.Errorf("a log line holds the origin secret: %s", logs.String())
			}
		})
	}
}

// TestOriginSecretNeverLogged sends the secret, right and wrong (its first
// half), to requests that succeed, match nothing or fail inside (an error
// line), and looks for it in every line.
func TestOriginSecretNeverLogged(t *testing.T) {
	var logs bytes.Buffer
	h := originHandler(t, originSecret, &logs)
	for _, path := range []string{"/v2/catalog", "/v2/nothing-here", "/v2/service_instances/i-1/last_operation?operation=" + originSecret} {
		for _, value := range []string{originSecret, originSecret[:16]} {
			r := httptest.NewRequest(http.MethodGet, path, nil)
			r.Header.Set(api.HeaderAPIVersion, "2.17")
			r.Header.Set(api.HeaderRequestIdentity, "id-1")
			r.SetBasicAuth(apptest.Username, apptest.Password)
			r.Header.Set(deploy.HeaderOriginVerify, value)
			// The nil broker panics on last_operation: a logged 500.
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
	}
	if logs.Len() == 0 {
		t.Fatal("nothing was logged")
	}
	if strings.Contains(logs.String(), originSecret[:16]) {
		t.Errorf("a log line holds the origin secret:\n%s", logs.String())
	}
}
