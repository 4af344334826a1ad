package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// badIDs are ids the broker refuses, as they appear in a URL. The first
// four wedged healthy instances before the broker checked for valid UTF-8:
// the key held the raw bytes while the stored JSON held U+FFFD.
var badIDs = map[string]string{
	"a lone continuation byte":      "%80",
	"a truncated two-byte sequence": "%C3%28",
	"bytes that are never UTF-8":    "%FF%FE-1",
	"an invalid byte inside":        "a%FFb",
	"a NUL":                         "a%00b",
	"a newline":                     "a%0Ab",
	"a DEL":                         "a%7Fb",
	"U+FFFD, what a proxy may make of invalid UTF-8": "a%EF%BF%BDb",
	"256 characters":                   strings.Repeat("x", 256),
	"256 bytes of two-byte characters": strings.Repeat("%C3%A9", 128),
}

func TestIDsTheBrokerWouldNotStoreFaithfullyAreBadRequests(t *testing.T) {
	f := newFixture(t)
	healthy := f.provision(t, f.syncPlan, nil)
	check(t, "bind a healthy binding", f.do(http.MethodPut, bindingPath(healthy, "b-ok"),
		map[string]any{"service_id": f.service, "plan_id": f.syncPlan}), expect{status: http.StatusCreated})
	bindBody := map[string]any{"service_id": f.service, "plan_id": f.syncPlan}
	q := "?" + f.deleteQuery(f.syncPlan)
	for what, bad := range badIDs {
		t.Run("an instance id with "+what, func(t *testing.T) {
			for _, req := range []struct {
				method, path string
				body         any
			}{
				{http.MethodPut, instancePath(bad), f.provisionBody(f.syncPlan, nil)},
				{http.MethodPut, instancePath(bad) + "?accepts_incomplete=true", f.provisionBody(f.asyncPlan, nil)},
				{http.MethodPatch, instancePath(bad), map[string]any{"service_id": f.service}},
				{http.MethodDelete, instancePath(bad) + q, nil},
				{http.MethodGet, instancePath(bad), nil},
				{http.MethodGet, instancePath(bad) + "/last_operation", nil},
				{http.MethodPut, bindingPath(bad, "b-1"), bindBody},
				{http.MethodDelete, bindingPath(bad, "b-1") + q, nil},
				{http.MethodGet, bindingPath(bad, "b-1"), nil},
				{http.MethodGet, bindingPath(bad, "b-1") + "/last_operation", nil},
			} {
				check(t, req.method+" "+req.path, f.do(req.method, req.path, req.body),
					expect{status: http.StatusBadRequest, contains: "instance_id in the URL is not valid"})
			}
		})
		t.Run("a binding id with "+what+" on a healthy instance", func(t *testing.T) {
			for _, req := range []struct {
				method, path string
				body         any
			}{
				{http.MethodPut, bindingPath(healthy, bad), bindBody},
				{http.MethodPut, bindingPath(healthy, bad) + "?accepts_incomplete=true", bindBody},
				{http.MethodDelete, bindingPath(healthy, bad) + q, nil},
				{http.MethodGet, bindingPath(healthy, bad), nil},
				{http.MethodGet, bindingPath(healthy, bad) + "/last_operation", nil},
			} {
				check(t, req.method+" "+req.path, f.do(req.method, req.path, req.body),
					expect{status: http.StatusBadRequest, contains: "binding_id in the URL is not valid"})
			}
		})
	}
	t.Run("a query value that is not valid UTF-8", func(t *testing.T) {
		check(t, "deprovision", f.do(http.MethodDelete, instancePath(healthy)+"?service_id=%FF&plan_id="+f.syncPlan, nil),
			expect{status: http.StatusBadRequest, contains: "service_id is not valid"})
	})
	t.Run("the healthy instance can still be updated, unbound and deleted", func(t *testing.T) {
		check(t, "update", f.do(http.MethodPatch, instancePath(healthy),
			map[string]any{"service_id": f.service, "parameters": map[string]any{"duration_seconds": 1}}), expect{status: http.StatusOK})
		check(t, "unbind", f.do(http.MethodDelete, bindingPath(healthy, "b-ok")+q, nil), expect{status: http.StatusOK})
		check(t, "deprovision", f.do(http.MethodDelete, instancePath(healthy)+q, nil), expect{status: http.StatusOK})
	})
}

func TestTheLongestValidIDsWork(t *testing.T) {
	f := newFixture(t)
	// 255 bytes, 63 four-byte characters and three more: the longest id
	// the rule allows, and the largest key it makes.
	id := strings.Repeat("%F0%9F%98%80", 63) + "abc"
	check(t, "provision", f.do(http.MethodPut, instancePath(id), f.provisionBody(f.syncPlan, nil)), expect{status: http.StatusCreated})
	check(t, "bind", f.do(http.MethodPut, bindingPath(id, id), map[string]any{"service_id": f.service, "plan_id": f.syncPlan}),
		expect{status: http.StatusCreated})
	check(t, "fetch binding", f.do(http.MethodGet, bindingPath(id, id), nil), expect{status: http.StatusOK})
	q := "?" + f.deleteQuery(f.syncPlan)
	check(t, "unbind", f.do(http.MethodDelete, bindingPath(id, id)+q, nil), expect{status: http.StatusOK})
	check(t, "deprovision", f.do(http.MethodDelete, instancePath(id)+q, nil), expect{status: http.StatusOK})
}

func TestPathsThatAreNotCleanAreNotFoundNotRedirected(t *testing.T) {
	f := newFixture(t)
	victim := f.provision(t, f.syncPlan, nil)
	for _, p := range []string{
		"/v2/service_instances/x/../" + victim,
		"/v2/service_instances/./" + victim,
		"//v2/service_instances/" + victim,
		"/v2/./catalog",
	} {
		for _, method := range []string{http.MethodGet, http.MethodPatch, http.MethodDelete} {
			r := f.do(method, p+"?"+f.deleteQuery(f.syncPlan), map[string]any{"service_id": f.service, "parameters": map[string]any{"duration_seconds": 1}})
			check(t, method+" "+p, r, expect{status: http.StatusNotFound, contains: "no endpoint"})
			if loc := r.Header.Get("Location"); loc != "" {
				t.Fatalf("%s %s redirected to %s", method, p, loc)
			}
		}
	}
	r := f.do(http.MethodGet, instancePath(victim), nil)
	check(t, "the instance the paths pointed at", r, expect{status: http.StatusOK})
	if params, _ := r.Body["parameters"].(map[string]any); len(params) != 0 {
		t.Errorf("the instance was changed through a path that is not clean: %s", r.Raw)
	}
}
