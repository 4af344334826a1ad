package api_test

import (
	"context"
	"errors"
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
	"github.com/serverless-osb/broker/internal/logging"
)

// brokenStore is a fake: a Store whose every call fails, standing in for a
// database outage that cannot be produced on demand here.
type brokenStore struct{ broker.Store }

func (brokenStore) GetInstance(context.Context, string) (broker.Instance, error) {
	return broker.Instance{}, errors.New("disk on fire at /var/lib/secret-path")
}

func TestAnInternalFailureIsAGeneric500AndAFullLogLine(t *testing.T) {
	cat, err := catalog.Load(filepath.Join(apptest.Root(), "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	logs := &apptest.SyncBuffer{}
	logger := logging.New(logs, slog.LevelInfo)
	b := broker.New(cat, brokenStore{}, nil, nil, logger)
	h := api.New(api.Config{Broker: b, Catalog: cat, Credentials: []api.Credential{{Username: "u", Password: "p"}}, Logger: logger})

	req := httptest.NewRequest(http.MethodGet, "/v2/service_instances/x", nil)
	req.SetBasicAuth("u", "p")
	req.Header.Set(api.HeaderAPIVersion, "2.17")
	req.Header.Set(api.HeaderRequestIdentity, "req-42")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)

	if rec.Code != http.StatusInternalServerError || strings.Contains(rec.Body.String(), "disk on fire") ||
		!strings.Contains(rec.Body.String(), `"description"`) {
		t.Fatalf("answer %d %s, want a generic 500", rec.Code, rec.Body)
	}
	if !strings.Contains(logs.String(), "disk on fire") || !strings.Contains(logs.String(), `"request_identity":"req-42"`) {
		t.Fatalf("the log lacks the failure or the request identity:\n%s", logs)
	}
}
