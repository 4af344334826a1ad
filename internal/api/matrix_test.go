package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/store/storetest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// expect is what one request must get.
type expect struct {
	status int
	error  string // the OSB error code, when there is one
	// contains must appear in the description (case-sensitive).
	contains string
}

func check(t *testing.T, what string, r apptest.Response, want expect) {
	t.Helper()
	if r.Status != want.status {
		t.Fatalf("%s: status %d, want %d; body %s", what, r.Status, want.status, r.Raw)
	}
	if want.error != "" && r.Str("error") != want.error {
		t.Fatalf("%s: error %q, want %q; body %s", what, r.Str("error"), want.error, r.Raw)
	}
	if want.contains != "" && !strings.Contains(r.Str("description"), want.contains) {
		t.Fatalf("%s: description %q lacks %q", what, r.Str("description"), want.contains)
	}
	if r.Status >= 400 && r.Status != http.StatusGone && r.Str("description") == "" {
		t.Fatalf("%s: error answer without a description: %s", what, r.Raw)
	}
	if r.Status >= 500 {
		t.Fatalf("%s: a 5xx reached the client: %s", what, r.Raw)
	}
	if code, present := r.Body["error"]; present && !osbErrorCodes[fmt.Sprint(code)] {
		t.Fatalf("%s: error %q is not one of the spec's error codes: %s", what, code, r.Raw)
	}
}

// osbErrorCodes are the spec's Service Broker Errors: the only values the
// broker sends as "error".
var osbErrorCodes = map[string]bool{"AsyncRequired": true, "ConcurrencyError": true, "RequiresApp": true, "MaintenanceInfoConflict": true}

// fixture names plans and builds request bodies.
type fixture struct {
	b                                  *apptest.Broker
	service, syncPlan, asyncPlan, only string
	n                                  int
}

func newFixture(t *testing.T) *fixture {
	b := apptest.Start(t, "")
	f := &fixture{b: b}
	f.service, f.syncPlan = b.Plan("fake-plan")
	_, f.asyncPlan = b.Plan("fake-async-plan")
	_, f.only = b.Plan("fake-async-only-plan")
	return f
}

func (f *fixture) id(prefix string) string {
	f.n++
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), f.n)
}

func (f *fixture) provisionBody(plan string, params map[string]any) map[string]any {
	body := map[string]any{"service_id": f.service, "plan_id": plan,
		"organization_guid": "org-1", "space_guid": "space-1",
		"context": map[string]any{"platform": "cloudfoundry"}}
	if params != nil {
		body["parameters"] = params
	}
	return body
}

func (f *fixture) do(method, path string, body any) apptest.Response {
	return f.b.Do(apptest.Request{Method: method, Path: path, Body: body})
}

func instancePath(id string) string { return "/v2/service_instances/" + id }

func bindingPath(iid, bid string) string { return instancePath(iid) + "/service_bindings/" + bid }

// provision creates a ready instance on plan (synchronously).
func (f *fixture) provision(t *testing.T, plan string, params map[string]any) string {
	t.Helper()
	id := f.id("inst")
	check(t, "provision", f.do(http.MethodPut, instancePath(id), f.provisionBody(plan, params)), expect{status: http.StatusCreated})
	return id
}

// provisionAsync starts an asynchronous provision and returns the instance
// id and the operation.
func (f *fixture) provisionAsync(t *testing.T, plan string, params map[string]any) (string, string) {
	t.Helper()
	id := f.id("inst")
	r := f.do(http.MethodPut, instancePath(id)+"?accepts_incomplete=true", f.provisionBody(plan, params))
	check(t, "async provision", r, expect{status: http.StatusAccepted})
	if r.Str("operation") == "" {
		t.Fatalf("202 without an operation: %s", r.Raw)
	}
	return id, r.Str("operation")
}

func (f *fixture) deleteQuery(plan string) string {
	return "service_id=" + f.service + "&plan_id=" + plan
}

func (f *fixture) waitInstance(t *testing.T, id, op string) apptest.Response {
	t.Helper()
	return f.b.WaitLastOperation(instancePath(id) + "/last_operation?operation=" + op)
}

func TestProvisionStatusCodes(t *testing.T) {
	f := newFixture(t)
	long := map[string]any{"duration_seconds": 60}
	cases := []struct {
		name  string
		setup func(t *testing.T) (id string) // an existing state; "" means a fresh id
		path  string                         // suffix after the instance path
		body  func() any
		want  expect
	}{
		{name: "a new instance on a sync plan is created (201)",
			body: func() any { return f.provisionBody(f.syncPlan, nil) }, want: expect{status: 201}},
		{name: "an async plan without accepts_incomplete completes synchronously (201)",
			body: func() any { return f.provisionBody(f.asyncPlan, nil) }, want: expect{status: 201}},
		{name: "an async plan with accepts_incomplete is accepted (202)", path: "?accepts_incomplete=true",
			body: func() any { return f.provisionBody(f.asyncPlan, nil) }, want: expect{status: 202}},
		{name: "an async-only plan without accepts_incomplete is refused with AsyncRequired",
			body: func() any { return f.provisionBody(f.only, nil) }, want: expect{status: 422, error: "AsyncRequired", contains: "accepts_incomplete=true"}},
		{name: "an identical request for a finished instance gets 200",
			setup: func(t *testing.T) string { return f.provision(t, f.syncPlan, map[string]any{"duration_seconds": 1}) },
			body:  func() any { return f.provisionBody(f.syncPlan, map[string]any{"duration_seconds": 1}) }, want: expect{status: 200}},
		{name: "the same id with other parameters is a conflict (409)",
			setup: func(t *testing.T) string { return f.provision(t, f.syncPlan, nil) },
			body:  func() any { return f.provisionBody(f.syncPlan, map[string]any{"duration_seconds": 2}) }, want: expect{status: 409, contains: "different attributes"}},
		{name: "the same id being provisioned with other attributes is a conflict (409)",
			setup: func(t *testing.T) string { id, _ := f.provisionAsync(t, f.asyncPlan, long); return id },
			path:  "?accepts_incomplete=true",
			body:  func() any { return f.provisionBody(f.asyncPlan, nil) }, want: expect{status: 409}},
		{name: "a maintenance_info version other than the catalog's is MaintenanceInfoConflict",
			body: func() any {
				b := f.provisionBody(f.syncPlan, nil)
				b["maintenance_info"] = map[string]any{"version": "0.9.0"}
				return b
			}, want: expect{status: 422, error: "MaintenanceInfoConflict", contains: "1.0.0"}},
		{name: "the catalog's maintenance_info version is accepted",
			body: func() any {
				b := f.provisionBody(f.syncPlan, nil)
				b["maintenance_info"] = map[string]any{"version": "1.0.0"}
				return b
			}, want: expect{status: 201}},
		{name: "an unknown service id is a bad request",
			body: func() any { b := f.provisionBody(f.syncPlan, nil); b["service_id"] = "nope"; return b },
			want: expect{status: 400, contains: "nope"}},
		{name: "an unknown plan id is a bad request",
			body: func() any { return f.provisionBody("no-such-plan", nil) }, want: expect{status: 400, contains: "no-such-plan"}},
		{name: "a missing organization_guid is a bad request",
			body: func() any { b := f.provisionBody(f.syncPlan, nil); delete(b, "organization_guid"); return b },
			want: expect{status: 400, contains: "organization_guid"}},
		{name: "an empty service_id is a bad request",
			body: func() any { b := f.provisionBody(f.syncPlan, nil); b["service_id"] = ""; return b },
			want: expect{status: 400, contains: "non-empty"}},
		{name: "a service_id of the wrong type is a bad request",
			body: func() any { b := f.provisionBody(f.syncPlan, nil); b["service_id"] = 42; return b },
			want: expect{status: 400, contains: "service_id"}},
		{name: "parameters that are not an object are a bad request",
			body: func() any { b := f.provisionBody(f.syncPlan, nil); b["parameters"] = "x"; return b },
			want: expect{status: 400, contains: "parameters"}},
		{name: "parameters that break the plan's schema name the field",
			body: func() any { return f.provisionBody(f.syncPlan, map[string]any{"duration_seconds": 4000}) },
			want: expect{status: 400, contains: "duration_seconds"}},
		{name: "an unknown parameter is named",
			body: func() any { return f.provisionBody(f.syncPlan, map[string]any{"durration": 1}) },
			want: expect{status: 400, contains: "durration"}},
		{name: "malformed JSON is a bad request", body: func() any { return `{"service_id": ` },
			want: expect{status: 400, contains: "JSON"}},
		{name: "an empty body is a bad request", body: func() any { return "" },
			want: expect{status: 400, contains: "empty"}},
		{name: "a body over 256 KiB (what every store keeps) is a bad request that names the limit",
			body: func() any {
				b := f.provisionBody(f.syncPlan, nil)
				b["context"] = map[string]any{"pad": strings.Repeat("x", 900<<10)}
				return b
			}, want: expect{status: 400, contains: "larger than 262144 bytes (256 KiB)"}},
		{name: "a body just under 256 KiB is accepted",
			body: func() any {
				b := f.provisionBody(f.syncPlan, nil)
				b["context"] = map[string]any{"platform": "cloudfoundry", "pad": strings.Repeat("x", 250<<10)}
				return b
			}, want: expect{status: 201}},
		{name: "unknown fields are ignored",
			body: func() any {
				b := f.provisionBody(f.syncPlan, nil)
				b["vendor_extension"] = map[string]any{"a": 1}
				return b
			},
			want: expect{status: 201}},
		{name: "accepts_incomplete other than true or false is a bad request", path: "?accepts_incomplete=yes",
			body: func() any { return f.provisionBody(f.asyncPlan, nil) }, want: expect{status: 400, contains: "accepts_incomplete"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := f.id("inst")
			if c.setup != nil {
				id = c.setup(t)
			}
			r := f.do(http.MethodPut, instancePath(id)+c.path, c.body())
			check(t, "provision", r, c.want)
			if c.want.status >= 400 && c.setup == nil {
				// A 4xx changes nothing: the instance does not exist.
				check(t, "fetch after 4xx", f.do(http.MethodGet, instancePath(id), nil), expect{status: 404})
			}
		})
	}

	t.Run("a re-sent provision while running gets 202 with the same operation", func(t *testing.T) {
		id, op := f.provisionAsync(t, f.asyncPlan, long)
		r := f.do(http.MethodPut, instancePath(id)+"?accepts_incomplete=true", f.provisionBody(f.asyncPlan, long))
		check(t, "re-send", r, expect{status: 202})
		if r.Str("operation") != op {
			t.Fatalf("operation %q, want the original %q", r.Str("operation"), op)
		}
	})
	t.Run("a 409 leaves the existing instance as it was", func(t *testing.T) {
		id := f.provision(t, f.syncPlan, map[string]any{"duration_seconds": 7})
		check(t, "conflict", f.do(http.MethodPut, instancePath(id), f.provisionBody(f.syncPlan, nil)), expect{status: 409})
		r := f.do(http.MethodGet, instancePath(id), nil)
		check(t, "fetch", r, expect{status: 200})
		if p, _ := r.Body["parameters"].(map[string]any); p["duration_seconds"] != float64(7) {
			t.Fatalf("parameters changed: %s", r.Raw)
		}
	})
}

func TestUpdateStatusCodes(t *testing.T) {
	f := newFixture(t)
	update := func(plan string, params map[string]any) map[string]any {
		b := map[string]any{"service_id": f.service}
		if plan != "" {
			b["plan_id"] = plan
		}
		if params != nil {
			b["parameters"] = params
		}
		return b
	}
	params := func(r apptest.Response) map[string]any { p, _ := r.Body["parameters"].(map[string]any); return p }

	t.Run("a sync update applies the parameters (200)", func(t *testing.T) {
		id := f.provision(t, f.syncPlan, map[string]any{"duration_seconds": 1})
		check(t, "update", f.do(http.MethodPatch, instancePath(id), update("", map[string]any{"duration_seconds": 2})), expect{status: 200})
		if p := params(f.do(http.MethodGet, instancePath(id), nil)); p["duration_seconds"] != float64(2) {
			t.Fatalf("parameters after update: %v", p)
		}
	})
	t.Run("an update without parameters keeps them", func(t *testing.T) {
		id := f.provision(t, f.syncPlan, map[string]any{"duration_seconds": 3})
		check(t, "update", f.do(http.MethodPatch, instancePath(id), update(f.asyncPlan, nil)), expect{status: 200})
		r := f.do(http.MethodGet, instancePath(id), nil)
		if params(r)["duration_seconds"] != float64(3) || r.Str("plan_id") != f.asyncPlan {
			t.Fatalf("after a plan change without parameters: %s", r.Raw)
		}
	})
	t.Run("a no-op update gets 200", func(t *testing.T) {
		id := f.provision(t, f.syncPlan, nil)
		check(t, "update", f.do(http.MethodPatch, instancePath(id), update(f.syncPlan, nil)), expect{status: 200})
	})
	t.Run("an unknown instance is not found (404)", func(t *testing.T) {
		check(t, "update", f.do(http.MethodPatch, instancePath("nope"), update("", nil)), expect{status: 404})
	})
	t.Run("a missing service_id is a bad request", func(t *testing.T) {
		id := f.provision(t, f.syncPlan, nil)
		check(t, "update", f.do(http.MethodPatch, instancePath(id), map[string]any{}), expect{status: 400, contains: "service_id"})
	})
	t.Run("a maintenance_info mismatch is MaintenanceInfoConflict and changes nothing", func(t *testing.T) {
		id := f.provision(t, f.syncPlan, map[string]any{"duration_seconds": 1})
		body := update("", map[string]any{"duration_seconds": 9})
		body["maintenance_info"] = map[string]any{"version": "2.0.0"}
		check(t, "update", f.do(http.MethodPatch, instancePath(id), body), expect{status: 422, error: "MaintenanceInfoConflict"})
		if p := params(f.do(http.MethodGet, instancePath(id), nil)); p["duration_seconds"] != float64(1) {
			t.Fatalf("a 422 changed the parameters: %v", p)
		}
	})
	t.Run("parameters that break the schema are a bad request and change nothing", func(t *testing.T) {
		id := f.provision(t, f.syncPlan, map[string]any{"duration_seconds": 1})
		check(t, "update", f.do(http.MethodPatch, instancePath(id), update("", map[string]any{"fail": "yes"})), expect{status: 400, contains: "fail"})
		if p := params(f.do(http.MethodGet, instancePath(id), nil)); p["duration_seconds"] != float64(1) {
			t.Fatalf("a 400 changed the parameters: %v", p)
		}
	})
	t.Run("an update of an instance being provisioned is a ConcurrencyError", func(t *testing.T) {
		id, _ := f.provisionAsync(t, f.asyncPlan, map[string]any{"duration_seconds": 60})
		check(t, "update", f.do(http.MethodPatch, instancePath(id)+"?accepts_incomplete=true", update("", map[string]any{"duration_seconds": 1})),
			expect{status: 422, error: "ConcurrencyError"})
	})
	t.Run("an async update is accepted, a re-send gets the same operation, another update is refused", func(t *testing.T) {
		id := f.provision(t, f.asyncPlan, nil)
		body := update("", map[string]any{"duration_seconds": 60})
		r := f.do(http.MethodPatch, instancePath(id)+"?accepts_incomplete=true", body)
		check(t, "update", r, expect{status: 202})
		again := f.do(http.MethodPatch, instancePath(id)+"?accepts_incomplete=true", body)
		check(t, "re-send", again, expect{status: 202})
		if again.Str("operation") != r.Str("operation") {
			t.Fatalf("re-sent update got operation %q, want %q", again.Str("operation"), r.Str("operation"))
		}
		check(t, "other update", f.do(http.MethodPatch, instancePath(id)+"?accepts_incomplete=true", update("", map[string]any{"duration_seconds": 5})),
			expect{status: 422, error: "ConcurrencyError"})
		check(t, "fetch while updating", f.do(http.MethodGet, instancePath(id), nil), expect{status: 422, error: "ConcurrencyError"})
		check(t, "bind while updating", f.do(http.MethodPut, bindingPath(id, f.id("b")), map[string]any{"service_id": f.service, "plan_id": f.asyncPlan}),
			expect{status: 422, error: "ConcurrencyError"})
		check(t, "deprovision while updating", f.do(http.MethodDelete, instancePath(id)+"?"+f.deleteQuery(f.asyncPlan), nil),
			expect{status: 422, error: "ConcurrencyError"})
	})
	t.Run("an async-only plan refuses a sync update with AsyncRequired", func(t *testing.T) {
		id, op := f.provisionAsync(t, f.only, nil)
		f.waitInstance(t, id, op)
		check(t, "update", f.do(http.MethodPatch, instancePath(id), update("", map[string]any{"duration_seconds": 1})),
			expect{status: 422, error: "AsyncRequired"})
	})
}

func TestDeprovisionStatusCodes(t *testing.T) {
	f := newFixture(t)
	t.Run("an instance that does not exist is gone (410) with an empty body", func(t *testing.T) {
		r := f.do(http.MethodDelete, instancePath(f.id("never"))+"?"+f.deleteQuery(f.syncPlan), nil)
		check(t, "deprovision", r, expect{status: 410})
		if string(r.Raw) != "{}" {
			t.Fatalf("410 body %s, want {}", r.Raw)
		}
	})
	t.Run("missing service_id or plan_id is a bad request", func(t *testing.T) {
		id := f.provision(t, f.syncPlan, nil)
		check(t, "no service_id", f.do(http.MethodDelete, instancePath(id)+"?plan_id="+f.syncPlan, nil), expect{status: 400, contains: "service_id"})
		check(t, "no plan_id", f.do(http.MethodDelete, instancePath(id)+"?service_id="+f.service, nil), expect{status: 400, contains: "plan_id"})
	})
	t.Run("a sync deprovision deletes (200), then the instance is gone", func(t *testing.T) {
		id := f.provision(t, f.syncPlan, nil)
		r := f.do(http.MethodDelete, instancePath(id)+"?"+f.deleteQuery(f.syncPlan), nil)
		check(t, "deprovision", r, expect{status: 200})
		if string(r.Raw) != "{}" {
			t.Fatalf("200 body %s, want {}", r.Raw)
		}
		check(t, "fetch", f.do(http.MethodGet, instancePath(id), nil), expect{status: 404})
		check(t, "again", f.do(http.MethodDelete, instancePath(id)+"?"+f.deleteQuery(f.syncPlan), nil), expect{status: 410})
	})
	t.Run("a plan that deprovisions by detaching answers at once (200), and the cleanup deletes the resource", func(t *testing.T) {
		id, op := f.provisionAsync(t, f.only, map[string]any{"duration_seconds": 0})
		f.waitInstance(t, id, op)
		r := f.do(http.MethodDelete, instancePath(id)+"?"+f.deleteQuery(f.only), nil)
		check(t, "deprovision without accepts_incomplete", r, expect{status: 200})
		check(t, "fetch", f.do(http.MethodGet, instancePath(id), nil), expect{status: 404})
		ctx := t.Context()
		waittest.Until(t, func() error {
			records, _ := storetest.Records(ctx, f.b.Local.Store, id)
			detached, _ := f.b.Local.Store.ListDetached(ctx)
			mine := 0
			for _, d := range detached {
				if d.InstanceID == id {
					mine++
				}
			}
			if len(records) != 0 || mine != 0 {
				return fmt.Errorf("the instance still has %d resource records and %d detached", len(records), mine)
			}
			return nil
		})
	})
	t.Run("an async deprovision is accepted, re-sent gets the same operation, and ends gone", func(t *testing.T) {
		id := f.provision(t, f.asyncPlan, map[string]any{"duration_seconds": 1})
		f.b.Hold(id) // the re-send must find the deprovision in progress
		r := f.do(http.MethodDelete, instancePath(id)+"?accepts_incomplete=true&"+f.deleteQuery(f.asyncPlan), nil)
		check(t, "deprovision", r, expect{status: 202})
		again := f.do(http.MethodDelete, instancePath(id)+"?accepts_incomplete=true&"+f.deleteQuery(f.asyncPlan), nil)
		check(t, "re-send", again, expect{status: 202})
		if again.Str("operation") != r.Str("operation") {
			t.Fatalf("re-sent deprovision got %q, want %q", again.Str("operation"), r.Str("operation"))
		}
		f.b.Release(id)
		check(t, "last_operation", f.waitInstance(t, id, r.Str("operation")), expect{status: 410})
	})
	t.Run("a deprovision during an async provision halts it and reports the deprovision", func(t *testing.T) {
		id, prov := f.provisionAsync(t, f.asyncPlan, map[string]any{"duration_seconds": 60})
		r := f.do(http.MethodDelete, instancePath(id)+"?accepts_incomplete=true&"+f.deleteQuery(f.asyncPlan), nil)
		check(t, "deprovision", r, expect{status: 202})
		if r.Str("operation") == prov {
			t.Fatal("the deprovision reused the provision's operation")
		}
		p := f.do(http.MethodGet, instancePath(id)+"/last_operation?operation="+prov, nil)
		check(t, "provision's last_operation", p, expect{status: 200})
		if p.Str("state") != "failed" || !strings.Contains(p.Str("description"), "halted") {
			t.Fatalf("the halted provision reads %s", p.Raw)
		}
		exec, err := f.b.Local.Engine.Describe(t.Context(), prov)
		if err != nil || exec.Status != "ABORTED" {
			t.Fatalf("the provision's execution is %+v (%v), want ABORTED", exec, err)
		}
		// The deprovision waits the instance's duration (60 s) to delete;
		// a new deprovision poll shows it in progress, not the provision.
		lo := f.do(http.MethodGet, instancePath(id)+"/last_operation", nil)
		if lo.Str("state") != "in progress" || !strings.Contains(lo.Str("description"), "deprovision") {
			t.Fatalf("last_operation without operation reads %s, want the deprovision in progress", lo.Raw)
		}
	})
	t.Run("a deprovision while another operation runs is a ConcurrencyError", func(t *testing.T) {
		id := f.provision(t, f.asyncPlan, nil)
		check(t, "update", f.do(http.MethodPatch, instancePath(id)+"?accepts_incomplete=true",
			map[string]any{"service_id": f.service, "parameters": map[string]any{"duration_seconds": 60}}), expect{status: 202})
		check(t, "deprovision", f.do(http.MethodDelete, instancePath(id)+"?accepts_incomplete=true&"+f.deleteQuery(f.asyncPlan), nil),
			expect{status: 422, error: "ConcurrencyError"})
	})
}

func TestBindingStatusCodes(t *testing.T) {
	f := newFixture(t)
	bindBody := func(plan string, params map[string]any) map[string]any {
		b := map[string]any{"service_id": f.service, "plan_id": plan, "bind_resource": map[string]any{"app_guid": "app-1"}}
		if params != nil {
			b["parameters"] = params
		}
		return b
	}
	del := func(plan string) string { return "?" + f.deleteQuery(plan) }

	t.Run("a sync bind returns credentials (201); the same again gets 200 with the same credentials", func(t *testing.T) {
		id := f.provision(t, f.syncPlan, nil)
		bid := f.id("b")
		r := f.do(http.MethodPut, bindingPath(id, bid), bindBody(f.syncPlan, nil))
		check(t, "bind", r, expect{status: 201})
		creds, _ := r.Body["credentials"].(map[string]any)
		if creds["password"] == nil || creds["uri"] == nil || creds["host"] == nil || creds["port"] == nil || creds["username"] == nil {
			t.Fatalf("credentials lack fields: %s", r.Raw)
		}
		again := f.do(http.MethodPut, bindingPath(id, bid), bindBody(f.syncPlan, nil))
		check(t, "again", again, expect{status: 200})
		if c2, _ := again.Body["credentials"].(map[string]any); c2["password"] != creds["password"] {
			t.Fatal("a re-sent bind returned other credentials")
		}
		other := f.do(http.MethodPut, bindingPath(id, f.id("b")), bindBody(f.syncPlan, nil))
		if c3, _ := other.Body["credentials"].(map[string]any); c3["password"] == creds["password"] {
			t.Fatal("two bindings share a password")
		}
	})
	t.Run("the same binding id with other parameters is a conflict (409)", func(t *testing.T) {
		id := f.provision(t, f.syncPlan, nil)
		bid := f.id("b")
		check(t, "bind", f.do(http.MethodPut, bindingPath(id, bid), bindBody(f.syncPlan, nil)), expect{status: 201})
		check(t, "other", f.do(http.MethodPut, bindingPath(id, bid), bindBody(f.syncPlan, map[string]any{"duration_seconds": 1})), expect{status: 409})
	})
	t.Run("a bind on an instance that does not exist is not found (404)", func(t *testing.T) {
		check(t, "bind", f.do(http.MethodPut, bindingPath(f.id("never"), "b"), bindBody(f.syncPlan, nil)), expect{status: 404})
	})
	t.Run("a bind with a bad body is a bad request", func(t *testing.T) {
		id := f.provision(t, f.syncPlan, nil)
		check(t, "no plan", f.do(http.MethodPut, bindingPath(id, "b"), map[string]any{"service_id": f.service}), expect{status: 400, contains: "plan_id"})
		check(t, "schema", f.do(http.MethodPut, bindingPath(id, "b"), bindBody(f.syncPlan, map[string]any{"duration_seconds": -1})), expect{status: 400, contains: "duration_seconds"})
		check(t, "rotation of a binding that does not exist", f.do(http.MethodPut, bindingPath(id, "b"), func() any {
			b := bindBody(f.syncPlan, nil)
			b["predecessor_binding_id"] = "old"
			return b
		}()), expect{status: 400, contains: "predecessor_binding_id old is not a binding"})
		check(t, "after 4xx", f.do(http.MethodGet, bindingPath(id, "b"), nil), expect{status: 404})
	})
	t.Run("an async-only plan refuses a sync bind with AsyncRequired", func(t *testing.T) {
		id, op := f.provisionAsync(t, f.only, nil)
		f.waitInstance(t, id, op)
		check(t, "bind", f.do(http.MethodPut, bindingPath(id, "b"), bindBody(f.only, nil)), expect{status: 422, error: "AsyncRequired"})
	})
	t.Run("an async bind is accepted without credentials, fetch is 404 until it succeeds", func(t *testing.T) {
		id := f.provision(t, f.asyncPlan, nil)
		bid := f.id("b")
		f.b.Hold(id) // the re-send and the fetch must find the bind in progress
		r := f.do(http.MethodPut, bindingPath(id, bid)+"?accepts_incomplete=true", bindBody(f.asyncPlan, map[string]any{"duration_seconds": 1}))
		check(t, "bind", r, expect{status: 202})
		if _, has := r.Body["credentials"]; has {
			t.Fatalf("a 202 carried credentials: %s", r.Raw)
		}
		again := f.do(http.MethodPut, bindingPath(id, bid)+"?accepts_incomplete=true", bindBody(f.asyncPlan, map[string]any{"duration_seconds": 1}))
		check(t, "re-send", again, expect{status: 202})
		if again.Str("operation") != r.Str("operation") {
			t.Fatal("a re-sent bind got another operation")
		}
		check(t, "fetch while creating", f.do(http.MethodGet, bindingPath(id, bid), nil), expect{status: 404})
		f.b.Release(id)
		lo := f.b.WaitLastOperation(bindingPath(id, bid) + "/last_operation?operation=" + r.Str("operation"))
		if lo.Str("state") != "succeeded" {
			t.Fatalf("binding last_operation: %s", lo.Raw)
		}
		got := f.do(http.MethodGet, bindingPath(id, bid), nil)
		check(t, "fetch", got, expect{status: 200})
		if c, _ := got.Body["credentials"].(map[string]any); c["password"] == nil {
			t.Fatalf("fetched binding lacks credentials: %s", got.Raw)
		}
	})
	t.Run("an unbind of a binding that does not exist is gone (410)", func(t *testing.T) {
		id := f.provision(t, f.syncPlan, nil)
		check(t, "unbind", f.do(http.MethodDelete, bindingPath(id, "never")+del(f.syncPlan), nil), expect{status: 410})
	})
	t.Run("a sync unbind deletes (200), then the binding is gone", func(t *testing.T) {
		id := f.provision(t, f.syncPlan, nil)
		bid := f.id("b")
		check(t, "bind", f.do(http.MethodPut, bindingPath(id, bid), bindBody(f.syncPlan, nil)), expect{status: 201})
		check(t, "unbind", f.do(http.MethodDelete, bindingPath(id, bid)+del(f.syncPlan), nil), expect{status: 200})
		check(t, "fetch", f.do(http.MethodGet, bindingPath(id, bid), nil), expect{status: 404})
		check(t, "again", f.do(http.MethodDelete, bindingPath(id, bid)+del(f.syncPlan), nil), expect{status: 410})
	})
	t.Run("an async unbind is accepted and its last_operation ends gone (410)", func(t *testing.T) {
		id := f.provision(t, f.asyncPlan, nil)
		bid := f.id("b")
		check(t, "bind", f.do(http.MethodPut, bindingPath(id, bid), bindBody(f.asyncPlan, nil)), expect{status: 201})
		r := f.do(http.MethodDelete, bindingPath(id, bid)+"?accepts_incomplete=true&"+f.deleteQuery(f.asyncPlan), nil)
		check(t, "unbind", r, expect{status: 202})
		lo := f.b.WaitLastOperation(bindingPath(id, bid) + "/last_operation?operation=" + r.Str("operation"))
		check(t, "last_operation", lo, expect{status: 410})
	})
	t.Run("an unbind during an async bind halts the bind and reports the unbind", func(t *testing.T) {
		id := f.provision(t, f.asyncPlan, nil)
		bid := f.id("b")
		bind := f.do(http.MethodPut, bindingPath(id, bid)+"?accepts_incomplete=true", bindBody(f.asyncPlan, map[string]any{"duration_seconds": 60}))
		check(t, "bind", bind, expect{status: 202})
		// The bind's first Task has made its credentials (the demo's record):
		// the unbind then has something to delete, which takes the binding's
		// 60 s, rather than nothing, which it would finish at once.
		waittest.Until(t, func() error {
			snap, err := f.b.Local.Store.Load(t.Context(), id, "", bid)
			if err != nil {
				return err
			}
			for _, r := range snap.Records {
				if r.Name == broker.BindingRecord(bid) {
					return nil
				}
			}
			return fmt.Errorf("the bind of %s has not begun", bid)
		})
		unbind := f.do(http.MethodDelete, bindingPath(id, bid)+"?accepts_incomplete=true&"+f.deleteQuery(f.asyncPlan), nil)
		check(t, "unbind", unbind, expect{status: 202})
		halted := f.do(http.MethodGet, bindingPath(id, bid)+"/last_operation?operation="+bind.Str("operation"), nil)
		if halted.Str("state") != "failed" || !strings.Contains(halted.Str("description"), "halted") {
			t.Fatalf("the halted bind reads %s", halted.Raw)
		}
		latest := f.do(http.MethodGet, bindingPath(id, bid)+"/last_operation", nil)
		if latest.Str("state") != "in progress" || !strings.Contains(latest.Str("description"), "unbind") {
			t.Fatalf("the binding's last operation reads %s, want the unbind in progress", latest.Raw)
		}
		check(t, "a second deprovision of the instance waits for the unbind",
			f.do(http.MethodDelete, instancePath(id)+"?accepts_incomplete=true&"+f.deleteQuery(f.asyncPlan), nil),
			expect{status: 422, error: "ConcurrencyError"})
	})
	t.Run("binds of different bindings on one idle instance run together", func(t *testing.T) {
		id := f.provision(t, f.asyncPlan, nil)
		ops := map[string]string{}
		for range 5 {
			bid := f.id("b")
			r := f.do(http.MethodPut, bindingPath(id, bid)+"?accepts_incomplete=true", bindBody(f.asyncPlan, map[string]any{"duration_seconds": 1}))
			check(t, "bind", r, expect{status: 202})
			ops[bid] = r.Str("operation")
		}
		for bid, op := range ops {
			lo := f.b.WaitLastOperation(bindingPath(id, bid) + "/last_operation?operation=" + op)
			if lo.Str("state") != "succeeded" {
				t.Fatalf("bind %s: %s", bid, lo.Raw)
			}
		}
	})
}

func TestFetchAndLastOperationStatusCodes(t *testing.T) {
	f := newFixture(t)
	t.Run("fetching an unknown instance or binding is 404", func(t *testing.T) {
		check(t, "instance", f.do(http.MethodGet, instancePath("nope"), nil), expect{status: 404})
		check(t, "binding", f.do(http.MethodGet, bindingPath("nope", "b"), nil), expect{status: 404})
	})
	t.Run("an instance being provisioned is 404 to fetch; its last_operation is in progress with Retry-After", func(t *testing.T) {
		id, op := f.provisionAsync(t, f.asyncPlan, map[string]any{"duration_seconds": 30})
		check(t, "fetch", f.do(http.MethodGet, instancePath(id), nil), expect{status: 404, contains: "being provisioned"})
		r := f.do(http.MethodGet, instancePath(id)+"/last_operation?operation="+op, nil)
		check(t, "last_operation", r, expect{status: 200})
		if r.Str("state") != "in progress" {
			t.Fatalf("state %q", r.Str("state"))
		}
		var secs int
		if _, err := fmt.Sscan(r.Header.Get("Retry-After"), &secs); err != nil || secs < 1 || secs > 30 {
			t.Fatalf("Retry-After %q, want 1..30 seconds", r.Header.Get("Retry-After"))
		}
		// Without the operation parameter, the newest operation answers.
		check(t, "without operation", f.do(http.MethodGet, instancePath(id)+"/last_operation", nil), expect{status: 200})
	})
	t.Run("last_operation of an unknown instance or operation is 404", func(t *testing.T) {
		check(t, "instance", f.do(http.MethodGet, instancePath("nope")+"/last_operation", nil), expect{status: 404})
		id := f.provision(t, f.syncPlan, nil)
		check(t, "operation", f.do(http.MethodGet, instancePath(id)+"/last_operation?operation=nope", nil), expect{status: 404})
		check(t, "binding", f.do(http.MethodGet, bindingPath(id, "nope")+"/last_operation", nil), expect{status: 404})
	})
	t.Run("a failed async provision reports failed with the driver's description", func(t *testing.T) {
		id, op := f.provisionAsync(t, f.asyncPlan, map[string]any{"fail": true, "fail_description": "quota exceeded in the demo"})
		r := f.waitInstance(t, id, op)
		if r.Str("state") != "failed" || r.Str("description") != "quota exceeded in the demo" {
			t.Fatalf("last_operation %s", r.Raw)
		}
		check(t, "fetch failed instance", f.do(http.MethodGet, instancePath(id), nil), expect{status: 404})
		check(t, "deprovision failed instance", f.do(http.MethodDelete, instancePath(id)+"?accepts_incomplete=true&"+f.deleteQuery(f.asyncPlan), nil), expect{status: 200})
	})
	t.Run("a failed sync provision is a 422 with the description and leaves nothing", func(t *testing.T) {
		id := f.id("inst")
		r := f.do(http.MethodPut, instancePath(id), f.provisionBody(f.syncPlan, map[string]any{"fail": true, "fail_description": "no capacity"}))
		check(t, "provision", r, expect{status: 422, contains: "no capacity"})
		check(t, "fetch", f.do(http.MethodGet, instancePath(id), nil), expect{status: 404})
		check(t, "provision again", f.do(http.MethodPut, instancePath(id), f.provisionBody(f.syncPlan, nil)), expect{status: 201})
	})
	t.Run("a failed async update reports instance_usable and update_repeatable", func(t *testing.T) {
		id := f.provision(t, f.asyncPlan, nil)
		r := f.do(http.MethodPatch, instancePath(id)+"?accepts_incomplete=true",
			map[string]any{"service_id": f.service, "parameters": map[string]any{"fail": true}})
		check(t, "update", r, expect{status: 202})
		lo := f.waitInstance(t, id, r.Str("operation"))
		if lo.Str("state") != "failed" || lo.Body["instance_usable"] != true || lo.Body["update_repeatable"] != true {
			t.Fatalf("failed update reads %s", lo.Raw)
		}
		got := f.do(http.MethodGet, instancePath(id), nil)
		if p, _ := got.Body["parameters"].(map[string]any); p["fail"] != nil {
			t.Fatalf("a failed update changed the parameters: %s", got.Raw)
		}
	})
}

func TestHeadersAndAuth(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name string
		req  apptest.Request
		want expect
	}{
		{"no credentials are refused (401)", apptest.Request{NoAuth: true}, expect{status: 401, contains: "basic auth"}},
		{"a wrong password is refused (401)", apptest.Request{NoAuth: true, Header: map[string]string{"Authorization": "Basic YWRtaW46d3Jvbmc="}}, expect{status: 401}},
		{"a missing API version is refused (412)", apptest.Request{Version: "-"}, expect{status: 412, contains: "2.9"}},
		{"API version 2.8 is refused (412)", apptest.Request{Version: "2.8"}, expect{status: 412, contains: "2.8"}},
		{"API version 3.0 is refused (412)", apptest.Request{Version: "3.0"}, expect{status: 412}},
		{"API version 2.9 is accepted", apptest.Request{Version: "2.9"}, expect{status: 200}},
		{"API version 2.18 is accepted", apptest.Request{Version: "2.18"}, expect{status: 200}},
		{"a malformed originating identity is a bad request",
			apptest.Request{Header: map[string]string{"X-Broker-API-Originating-Identity": "cloudfoundry !!!"}}, expect{status: 400, contains: "Originating-Identity"}},
		{"an originating identity without a value is a bad request",
			apptest.Request{Header: map[string]string{"X-Broker-API-Originating-Identity": "cloudfoundry"}}, expect{status: 400}},
		{"a well-formed originating identity is accepted",
			apptest.Request{Header: map[string]string{"X-Broker-API-Originating-Identity": "cloudfoundry eyJ1c2VyX2lkIjoiYWxpY2UifQ=="}}, expect{status: 200}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.req.Method, c.req.Path = http.MethodGet, "/v2/catalog"
			r := f.b.Do(c.req)
			check(t, "catalog", r, c.want)
			if c.want.status == 401 && r.Header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		})
	}
	t.Run("the rotated credential pair is accepted too", func(t *testing.T) {
		r := f.b.Do(apptest.Request{Method: http.MethodGet, Path: "/v2/catalog", NoAuth: true,
			Header: map[string]string{"Authorization": "Basic " + basic(apptest.OtherUsername, apptest.OtherPasswd)}})
		check(t, "catalog", r, expect{status: 200})
	})
	t.Run("the request identity is echoed and logged; the user is logged", func(t *testing.T) {
		r := f.b.Do(apptest.Request{Method: http.MethodGet, Path: "/v2/catalog", Header: map[string]string{
			"X-Broker-API-Request-Identity":     "e26cea74-2d9c-4a38-8b6a-0a3e0c3a3f41",
			"X-Broker-API-Originating-Identity": "cloudfoundry eyJ1c2VyX2lkIjoiYWxpY2UifQ=="}})
		if r.Header.Get("X-Broker-API-Request-Identity") != "e26cea74-2d9c-4a38-8b6a-0a3e0c3a3f41" {
			t.Fatalf("request identity not echoed: %v", r.Header)
		}
		logs := f.b.Logs.String()
		if !strings.Contains(logs, `"request_identity":"e26cea74-2d9c-4a38-8b6a-0a3e0c3a3f41"`) || !strings.Contains(logs, `"user":"cloudfoundry/alice"`) {
			t.Fatalf("log lacks the request identity or user:\n%s", logs)
		}
	})
	t.Run("the catalog has an ETag and answers If-None-Match with 304", func(t *testing.T) {
		r := f.b.Do(apptest.Request{Method: http.MethodGet, Path: "/v2/catalog"})
		check(t, "catalog", r, expect{status: 200})
		etag := r.Header.Get("ETag")
		if etag == "" || r.Body["services"] == nil {
			t.Fatalf("catalog answer: %v %s", r.Header, r.Raw)
		}
		if strings.Contains(string(r.Raw), `"broker"`) {
			t.Fatal("the catalog serves the broker settings")
		}
		again := f.b.Do(apptest.Request{Method: http.MethodGet, Path: "/v2/catalog", Header: map[string]string{"If-None-Match": etag}})
		if again.Status != http.StatusNotModified || len(again.Raw) != 0 {
			t.Fatalf("If-None-Match: %d %s", again.Status, again.Raw)
		}
		other := f.b.Do(apptest.Request{Method: http.MethodGet, Path: "/v2/catalog", Header: map[string]string{"If-None-Match": `"other"`}})
		check(t, "other etag", other, expect{status: 200})
	})
	t.Run("an unknown endpoint is a JSON 404 and a wrong method a JSON 405", func(t *testing.T) {
		check(t, "unknown", f.b.Do(apptest.Request{Method: http.MethodGet, Path: "/v3/catalog"}), expect{status: 404, contains: "/v2"})
		r := f.b.Do(apptest.Request{Method: http.MethodPost, Path: "/v2/catalog"})
		if r.Status != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "GET" || r.Str("description") == "" {
			t.Fatalf("POST /v2/catalog: %d %v %s", r.Status, r.Header, r.Raw)
		}
	})
}

func basic(user, pass string) string {
	return base64Encode(user + ":" + pass)
}
