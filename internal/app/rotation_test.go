package app_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/app/apptest"
)

// TestBindingRotation rotates a binding as OSB 2.17 describes
// (predecessor_binding_id) on the demo plans, which are binding_rotatable,
// over HTTP: the OSB client library predates the field.
func TestBindingRotation(t *testing.T) {
	b := apptest.Start(t, "")
	service, plan := b.Plan("fake-plan")
	_, asyncPlan := b.Plan("fake-async-plan")
	_, fixedPlan := b.Plan("fake-async-only-plan")
	bindPath := func(instance, binding string) string {
		return "/v2/service_instances/" + instance + "/service_bindings/" + binding
	}
	bind := func(instance, binding, plan string, body map[string]any) apptest.Response {
		t.Helper()
		full := map[string]any{"service_id": service, "plan_id": plan}
		for k, v := range body {
			full[k] = v
		}
		return b.Do(apptest.Request{Method: http.MethodPut, Path: bindPath(instance, binding), Body: full})
	}
	password := func(r apptest.Response) string {
		creds, _ := r.Body["credentials"].(map[string]any)
		p, _ := creds["password"].(string)
		return p
	}
	expect := func(r apptest.Response, status int, what string) apptest.Response {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d %s, want %d", what, r.Status, r.Raw, status)
		}
		return r
	}
	refused := func(r apptest.Response, status int, errorCode, mentions string) {
		t.Helper()
		if r.Status != status || r.Str("error") != errorCode || !strings.Contains(r.Str("description"), mentions) {
			t.Errorf("got %d %s, want %d %q with a description that mentions %q", r.Status, r.Raw, status, errorCode, mentions)
		}
	}
	for _, id := range []string{"i", "j"} {
		expect(b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/" + id, Body: provisionBody(service, plan, map[string]any{})}), 201, "provision "+id)
	}

	first := expect(bind("i", "b1", plan, map[string]any{"app_guid": "app-1", "parameters": map[string]any{"duration_seconds": 7}}), 201, "bind b1")
	meta, _ := first.Body["metadata"].(map[string]any)
	expires, _ := meta["expires_at"].(string)
	renew, _ := meta["renew_before"].(string)
	at, err := time.Parse("2006-01-02T15:04:05.0Z", expires)
	if err != nil || renew >= expires || time.Until(at) < 29*24*time.Hour || time.Until(at) > 31*24*time.Hour {
		t.Fatalf("a binding of a plan whose credentials last 30 days: metadata %v (%v), want expires_at in 30 days in the spec's format and renew_before earlier", meta, err)
	}

	t.Run("a successor gets credentials of its own and the predecessor's parameters; both work until the predecessor is unbound", func(t *testing.T) {
		second := expect(bind("i", "b2", plan, map[string]any{"predecessor_binding_id": "b1"}), 201, "rotate b1 into b2")
		if password(second) == "" || password(second) == password(first) {
			t.Fatalf("the successor's password %q, the predecessor's %q: want new credentials", password(second), password(first))
		}
		if again := expect(bind("i", "b2", plan, map[string]any{"predecessor_binding_id": "b1"}), 200, "the same rotation again"); password(again) != password(second) {
			t.Error("the same rotation sent again answered other credentials")
		}
		fetched := expect(b.Do(apptest.Request{Method: http.MethodGet, Path: bindPath("i", "b2")}), 200, "fetch b2")
		if params, _ := fetched.Body["parameters"].(map[string]any); params["duration_seconds"] != float64(7) {
			t.Errorf("the successor's parameters %v, want the predecessor's", fetched.Body["parameters"])
		}
		if m, _ := fetched.Body["metadata"].(map[string]any); m["expires_at"] == nil {
			t.Errorf("a fetch of the successor has no expires_at: %s", fetched.Raw)
		}
		if old := expect(b.Do(apptest.Request{Method: http.MethodGet, Path: bindPath("i", "b1")}), 200, "fetch b1"); password(old) != password(first) {
			t.Error("the predecessor's credentials changed")
		}
		expect(b.Do(apptest.Request{Method: http.MethodDelete, Path: bindPath("i", "b1") + "?service_id=" + service + "&plan_id=" + plan}), 200, "unbind b1")
		if still := expect(b.Do(apptest.Request{Method: http.MethodGet, Path: bindPath("i", "b2")}), 200, "fetch b2 after b1's unbind"); password(still) != password(second) {
			t.Error("the successor's credentials changed with its predecessor's unbind")
		}
		refused(bind("i", "b3", plan, map[string]any{"predecessor_binding_id": "b1"}), 400, "", "is not a binding of service instance i")
	})
	t.Run("bad predecessors are refused with a description", func(t *testing.T) {
		refused(bind("i", "x1", plan, map[string]any{"predecessor_binding_id": "nothing"}), 400, "", "predecessor_binding_id nothing is not a binding of service instance i")
		refused(bind("j", "x2", plan, map[string]any{"predecessor_binding_id": "b2"}), 400, "", "is not a binding of service instance j")
		refused(bind("i", "b2", plan, map[string]any{"predecessor_binding_id": "b2"}), 400, "", "cannot succeed itself")
		// A rotation runs under its instance's plan, whatever plan the
		// request names.
		refused(bind("i", "x3", fixedPlan, map[string]any{"predecessor_binding_id": "b2"}), 400, "", "but the request names plan")
		expect(b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/m?accepts_incomplete=true",
			Body: provisionBody(service, fixedPlan, map[string]any{"duration_seconds": 0})}), 202, "provision m")
		b.WaitLastOperation("/v2/service_instances/m/last_operation")
		refused(b.Do(apptest.Request{Method: http.MethodPut, Path: bindPath("m", "x3") + "?accepts_incomplete=true",
			Body: map[string]any{"service_id": service, "plan_id": fixedPlan, "predecessor_binding_id": "b2"}}),
			400, "", "does not support binding rotation")
	})
	t.Run("a predecessor being deleted, or that failed, is refused", func(t *testing.T) {
		expect(b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/k?accepts_incomplete=true",
			Body: provisionBody(service, asyncPlan, map[string]any{"duration_seconds": 0})}), 202, "provision k")
		b.WaitLastOperation("/v2/service_instances/k/last_operation")
		expect(bind("k", "ready", asyncPlan, map[string]any{}), 201, "bind k/ready")
		failed := b.Do(apptest.Request{Method: http.MethodPut, Path: bindPath("k", "failed") + "?accepts_incomplete=true",
			Body: map[string]any{"service_id": service, "plan_id": asyncPlan, "parameters": map[string]any{"fail": true}}})
		expect(failed, 202, "a bind that fails")
		b.WaitLastOperation(bindPath("k", "failed") + "/last_operation?operation=" + failed.Str("operation"))
		refused(bind("k", "x4", asyncPlan, map[string]any{"predecessor_binding_id": "failed"}), 422, "", "failed; it cannot be rotated")

		b.Hold("k")
		unbind := b.Do(apptest.Request{Method: http.MethodDelete,
			Path: bindPath("k", "ready") + "?accepts_incomplete=true&service_id=" + service + "&plan_id=" + asyncPlan})
		expect(unbind, 202, "unbind k/ready")
		refused(bind("k", "x5", asyncPlan, map[string]any{"predecessor_binding_id": "ready"}), 422, "ConcurrencyError", "is being deleted")
		b.Release("k")
		b.WaitLastOperation(bindPath("k", "ready") + "/last_operation?operation=" + unbind.Str("operation"))
	})
}

// TestAnExpiredBindingCannotBeRotated: a binding whose credentials have
// expired is no predecessor; the platform binds anew.
func TestAnExpiredBindingCannotBeRotated(t *testing.T) {
	// No reaper: nothing but this test reads the clock it moves.
	b := apptest.StartWith(t, apptest.Options{ReapInterval: -1})
	service, plan := b.Plan("fake-plan")
	if r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/i", Body: provisionBody(service, plan, map[string]any{})}); r.Status != 201 {
		t.Fatalf("provision: %d %s", r.Status, r.Raw)
	}
	body := map[string]any{"service_id": service, "plan_id": plan}
	if r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/i/service_bindings/old", Body: body}); r.Status != 201 {
		t.Fatalf("bind: %d %s", r.Status, r.Raw)
	}
	b.Local.Broker.Now = func() time.Time { return time.Now().UTC().Add(31 * 24 * time.Hour) }
	body["predecessor_binding_id"] = "old"
	r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/i/service_bindings/new", Body: body})
	if r.Status != 400 || !strings.Contains(r.Str("description"), "old expired at") {
		t.Fatalf("rotating an expired binding: %d %s, want 400 saying it expired", r.Status, r.Raw)
	}
}
