package app_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app/apptest"
)

// A catalog whose one offering has two plans marked sensitive_parameters,
// one synchronous and one asynchronous, on the demo driver (which ignores
// parameters it does not know).
const (
	sensitiveServiceID = "0d7e3c55-8a0b-4f4e-9d2a-6c1b7e5f3a90"
	sensitiveSyncID    = "5a2f9e61-3c4d-4b8e-a7f0-1e9d2c6b4a83"
	sensitiveAsyncID   = "c81b4d27-6e5a-4f3c-9b1d-2a7e8f0c5d64"
	sensitiveCatalog   = `services:
  - id: ` + sensitiveServiceID + `
    name: secret-service
    description: An offering whose request parameters hold secrets.
    bindable: true
    plan_updateable: true
    instances_retrievable: true
    bindings_retrievable: true
    plans:
      - id: ` + sensitiveSyncID + `
        name: secret-sync
        description: Its synchronous plan.
        broker: {driver: demo, mode: sync, sensitive_parameters: true}
      - id: ` + sensitiveAsyncID + `
        name: secret-async
        description: Its asynchronous plan.
        broker: {driver: demo, mode: async, sensitive_parameters: true}
`
)

// TestSensitiveParametersEndToEnd drives a plan with sensitive_parameters
// through the HTTP API of the local broker: a request sent again gets the
// answer it got (the sealed fingerprint compares), a different one 409,
// and fetching an instance or a binding returns its parameters; yet the
// bolt file and the log hold none of the parameters' values.
func TestSensitiveParametersEndToEnd(t *testing.T) {
	catalog := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(catalog, []byte(sensitiveCatalog), 0o600); err != nil {
		t.Fatal(err)
	}
	b := apptest.StartWith(t, apptest.Options{Catalog: catalog})
	c := client(t, b.URL)
	// Every value below is a secret of the platform's user: none may be
	// stored or logged in clear.
	var secrets []string
	secret := func(v string) string { secrets = append(secrets, v); return v }
	params := func(key, value string) map[string]any { return map[string]any{key: secret(value)} }
	put := func(path string, body map[string]any) apptest.Response {
		t.Helper()
		return b.Do(apptest.Request{Method: http.MethodPut, Path: path, Body: body})
	}
	expect := func(what string, r apptest.Response, status int) apptest.Response {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d %s, want %d", what, r.Status, r.Raw, status)
		}
		return r
	}
	provisionOf := func(plan string, p map[string]any) map[string]any {
		return map[string]any{"service_id": sensitiveServiceID, "plan_id": plan, "organization_guid": "org", "space_guid": "space", "parameters": p}
	}

	t.Run("a synchronous provision sent again gets its answer, a different one 409", func(t *testing.T) {
		first := provisionOf(sensitiveSyncID, params("db_password", "pw-sync-Qx81vT"))
		created := expect("provision", put("/v2/service_instances/i-sync", first), http.StatusCreated)
		again := expect("the same provision again", put("/v2/service_instances/i-sync", first), http.StatusOK)
		if !bytes.Equal(again.Raw, created.Raw) {
			t.Errorf("the same provision again answered %s, the first %s", again.Raw, created.Raw)
		}
		other := provisionOf(sensitiveSyncID, params("db_password", "pw-other-Lk27sD"))
		expect("a provision with other parameters", put("/v2/service_instances/i-sync", other), http.StatusConflict)
	})

	t.Run("an asynchronous provision sent again while in progress gets its operation, a different one 409", func(t *testing.T) {
		b.Hold("i-async")
		first := provisionOf(sensitiveAsyncID, params("db_password", "pw-async-Rm53wE"))
		path := "/v2/service_instances/i-async?accepts_incomplete=true"
		started := expect("provision", put(path, first), http.StatusAccepted)
		again := expect("the same provision again", put(path, first), http.StatusAccepted)
		if again.Str("operation") == "" || again.Str("operation") != started.Str("operation") {
			t.Errorf("the same provision again answered operation %q, the first %q", again.Str("operation"), started.Str("operation"))
		}
		other := provisionOf(sensitiveAsyncID, params("db_password", "pw-async-other-Hn64xF"))
		expect("a provision with other parameters", put(path, other), http.StatusConflict)
		b.Release("i-async")
		done := b.WaitLastOperation("/v2/service_instances/i-async/last_operation?operation=" + started.Str("operation"))
		if done.Str("state") != "succeeded" {
			t.Fatalf("provision ended %s", done.Raw)
		}
		expect("the same provision once done", put(path, first), http.StatusOK)
	})

	t.Run("fetching an instance returns its parameters, an update's once it is done", func(t *testing.T) {
		inst, err := c.GetInstance(&osb.GetInstanceRequest{InstanceID: "i-sync"})
		if err != nil {
			t.Fatalf("fetch instance: %v", err)
		}
		if want := map[string]any{"db_password": "pw-sync-Qx81vT"}; !reflect.DeepEqual(inst.Parameters, want) {
			t.Errorf("fetched parameters %v, want %v", inst.Parameters, want)
		}
		update := params("db_password", "pw-update-Vc19yG")
		if _, err := c.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: "i-sync", ServiceID: sensitiveServiceID,
			PlanID: ptr(sensitiveSyncID), Parameters: update}); err != nil {
			t.Fatalf("update: %v", err)
		}
		inst, err = c.GetInstance(&osb.GetInstanceRequest{InstanceID: "i-sync"})
		if err != nil {
			t.Fatalf("fetch instance: %v", err)
		}
		if !reflect.DeepEqual(inst.Parameters, update) {
			t.Errorf("fetched parameters after the update %v, want %v", inst.Parameters, update)
		}
	})

	t.Run("a bind sent again gets its answer, a different one 409, and fetching the binding returns its parameters", func(t *testing.T) {
		bindOf := func(p map[string]any) map[string]any {
			return map[string]any{"service_id": sensitiveServiceID, "plan_id": sensitiveSyncID, "bind_resource": map[string]any{"app_guid": "app"}, "parameters": p}
		}
		path := "/v2/service_instances/i-sync/service_bindings/b-1"
		first := bindOf(params("api_token", "tok-bind-Pz42uJ"))
		created := expect("bind", put(path, first), http.StatusCreated)
		if created.Body["credentials"] == nil {
			t.Fatalf("bind answered no credentials: %s", created.Raw)
		}
		again := expect("the same bind again", put(path, first), http.StatusOK)
		if !reflect.DeepEqual(again.Body, created.Body) {
			t.Errorf("the same bind again answered %s, the first %s", again.Raw, created.Raw)
		}
		expect("a bind with other parameters", put(path, bindOf(params("api_token", "tok-other-Bw75kM"))), http.StatusConflict)
		got, err := c.GetBinding(&osb.GetBindingRequest{InstanceID: "i-sync", BindingID: "b-1"})
		if err != nil {
			t.Fatalf("fetch binding: %v", err)
		}
		if want := map[string]any{"api_token": "tok-bind-Pz42uJ"}; !reflect.DeepEqual(got.Parameters, want) {
			t.Errorf("fetched binding parameters %v, want %v", got.Parameters, want)
		}
	})

	t.Run("the bolt file and the log hold none of the parameters' values", func(t *testing.T) {
		b.Stop()
		data, err := os.ReadFile(filepath.Join(b.Config.DataDir, "broker.db"))
		if err != nil {
			t.Fatal(err)
		}
		// The file holds the items (a check that the search below can find
		// something), their parameters sealed.
		for _, id := range []string{"i-sync", "i-async", "b-1"} {
			if !bytes.Contains(data, []byte(id)) {
				t.Fatalf("the bolt file does not hold %q: is it the broker's?", id)
			}
		}
		logs := b.Logs.String()
		if !strings.Contains(logs, "i-sync") {
			t.Fatalf("the log does not name i-sync: is it the broker's?")
		}
		for _, v := range secrets {
			if bytes.Contains(data, []byte(v)) {
				t.Errorf("the bolt file holds %q in clear", v)
			}
			if strings.Contains(logs, v) {
				t.Errorf("the log holds %q", v)
			}
		}
	})
}
