package app_test

import (
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/osbtest"
)

// The demo catalog with a second offering, for requests that name another
// offering than their instance's.
const (
	otherServiceID = "6f1c1c3e-2f8e-4d7a-9a59-0c3f1e2b7d41"
	otherPlanID    = "9b0d6a52-7c1e-4f43-8f0e-5d2a3c4b1e90"
	otherService   = `
  - id: ` + otherServiceID + `
    name: other-service
    description: A second offering, for requests that name another one.
    bindable: true
    plans:
      - id: ` + otherPlanID + `
        name: other-plan
        description: Its only plan.
        broker: {driver: demo, mode: sync}
`
)

// twoOfferings writes the demo catalog with otherService after its own.
func twoOfferings(t *testing.T) string {
	t.Helper()
	demo, err := os.ReadFile(filepath.Join(apptest.Root(), "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(path, append(demo, otherService...), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestClientRequestsNameTheInstancesOfferingAndPlan: through the real OSB
// client, on both stores, every route that names an instance or a binding
// and carries service_id and plan_id, sent with another plan, another
// offering, or both, is 400 with a description naming both sides, and
// changes nothing.
func TestClientRequestsNameTheInstancesOfferingAndPlan(t *testing.T) {
	catalog := twoOfferings(t)
	t.Run("bolt", func(t *testing.T) {
		testRequestsNameTheInstance(t, apptest.StartWith(t, apptest.Options{Catalog: catalog}))
	})
	t.Run("dynamodb", func(t *testing.T) {
		testRequestsNameTheInstance(t, apptest.StartWith(t, apptest.Options{Catalog: catalog, Store: dynamoStore(t)}))
	})
}

func testRequestsNameTheInstance(t *testing.T, b *apptest.Broker) {
	e := newE2E(t, b)
	// i-1 is on the synchronous plan, with binding b-1.
	e.provision("i-1", e.sync, false, nil)
	if _, err := e.c.Bind(&osb.BindRequest{InstanceID: "i-1", BindingID: "b-1", ServiceID: e.service, PlanID: e.sync}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	type ids struct{ service, plan string }
	mismatches := []struct {
		name string
		ids
		// named is what the description says the request named.
		named string
	}{
		{"another plan of the offering", ids{e.service, e.asyncOnly}, e.asyncOnly},
		{"another offering", ids{otherServiceID, e.sync}, otherServiceID},
		{"another offering and its plan", ids{otherServiceID, otherPlanID}, otherPlanID},
	}
	routes := []struct {
		name string
		call func(i ids) (status int, description string)
		// serviceOnly: the route checks the service_id alone.
		serviceOnly bool
	}{
		{"bind", func(i ids) (int, string) {
			_, err := e.c.Bind(&osb.BindRequest{InstanceID: "i-1", BindingID: "b-new", ServiceID: i.service, PlanID: i.plan})
			return clientError(t, err)
		}, false},
		{"bind (asynchronous)", func(i ids) (int, string) {
			_, err := e.c.Bind(&osb.BindRequest{InstanceID: "i-1", BindingID: "b-new", ServiceID: i.service, PlanID: i.plan, AcceptsIncomplete: true})
			return clientError(t, err)
		}, false},
		{"bind that rotates b-1", func(i ids) (int, string) {
			r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/i-1/service_bindings/b-new",
				Body: map[string]any{"service_id": i.service, "plan_id": i.plan, "predecessor_binding_id": "b-1"}})
			return r.Status, r.Str("description")
		}, false},
		{"unbind", func(i ids) (int, string) {
			_, err := e.c.Unbind(&osb.UnbindRequest{InstanceID: "i-1", BindingID: "b-1", ServiceID: i.service, PlanID: i.plan, AcceptsIncomplete: true})
			return clientError(t, err)
		}, false},
		{"deprovision", func(i ids) (int, string) {
			_, err := e.c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "i-1", ServiceID: i.service, PlanID: i.plan, AcceptsIncomplete: true})
			return clientError(t, err)
		}, false},
		{"update (its service_id: an update may change the plan)", func(i ids) (int, string) {
			_, err := e.c.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: "i-1", ServiceID: i.service,
				Parameters: map[string]any{"duration_seconds": 1}})
			return clientError(t, err)
		}, true},
		{"last_operation", func(i ids) (int, string) {
			_, err := e.c.PollLastOperation(&osb.LastOperationRequest{InstanceID: "i-1", ServiceID: &i.service, PlanID: &i.plan})
			return clientError(t, err)
		}, false},
		{"binding last_operation", func(i ids) (int, string) {
			_, err := e.c.PollBindingLastOperation(&osb.BindingLastOperationRequest{InstanceID: "i-1", BindingID: "b-1",
				ServiceID: &i.service, PlanID: &i.plan})
			return clientError(t, err)
		}, false},
		// The client sends no ids with fetches.
		{"fetch instance", func(i ids) (int, string) {
			r := b.Do(apptest.Request{Method: http.MethodGet, Path: "/v2/service_instances/i-1?" + query(i.service, i.plan)})
			return r.Status, r.Str("description")
		}, false},
		{"fetch binding", func(i ids) (int, string) {
			r := b.Do(apptest.Request{Method: http.MethodGet, Path: "/v2/service_instances/i-1/service_bindings/b-1?" + query(i.service, i.plan)})
			return r.Status, r.Str("description")
		}, false},
	}
	for _, route := range routes {
		for _, m := range mismatches {
			if route.serviceOnly && m.service == e.service {
				continue // another plan is what an update may ask for
			}
			t.Run(route.name+" naming "+m.name+" is 400", func(t *testing.T) {
				status, desc := route.call(m.ids)
				named := m.named
				if route.serviceOnly {
					named = m.service
				}
				if status != http.StatusBadRequest {
					t.Fatalf("status %d (%s), want 400", status, desc)
				}
				// Another offering with the instance's plan is, where the
				// request's ids are looked up first, a plan of no such
				// offering: that description names both too.
				if !strings.Contains(desc, named) || (!strings.Contains(desc, "but the request names") && !strings.Contains(desc, "belongs to")) {
					t.Fatalf("description %q does not name what the request named (%s) against the instance's", desc, named)
				}
			})
		}
	}
	// Nothing changed: the instance, its plan and its binding are as they
	// were, no binding was made, and no operation ran.
	inst, err := e.c.GetInstance(&osb.GetInstanceRequest{InstanceID: "i-1"})
	if err != nil || inst.PlanID != e.sync || inst.ServiceID != e.service {
		t.Fatalf("instance after the refusals: %+v %v", inst, err)
	}
	if _, err := e.c.GetBinding(&osb.GetBindingRequest{InstanceID: "i-1", BindingID: "b-1"}); err != nil {
		t.Fatalf("binding b-1 after the refusals: %v", err)
	}
	if _, err := e.c.GetBinding(&osb.GetBindingRequest{InstanceID: "i-1", BindingID: "b-new"}); !osbtest.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("binding b-new: %v, want 404", err)
	}
	// The instance's own ids still work, on every route.
	if _, err := e.c.PollBindingLastOperation(&osb.BindingLastOperationRequest{InstanceID: "i-1", BindingID: "b-1",
		ServiceID: &e.service, PlanID: &e.sync}); err != nil {
		t.Fatalf("binding last_operation: %v", err)
	}
	if _, err := e.c.Unbind(&osb.UnbindRequest{InstanceID: "i-1", BindingID: "b-1", ServiceID: e.service, PlanID: e.sync}); err != nil {
		t.Fatalf("unbind: %v", err)
	}
	if _, err := e.c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "i-1", ServiceID: e.service, PlanID: e.sync}); err != nil {
		t.Fatalf("deprovision: %v", err)
	}
}

// clientError is the status and description of the OSB client's error (0
// when the request succeeded).
func clientError(t *testing.T, err error) (int, string) {
	t.Helper()
	if err == nil {
		return 0, ""
	}
	var h osb.HTTPStatusCodeError
	if !errors.As(err, &h) {
		t.Fatalf("not an HTTP error: %v", err)
	}
	return h.StatusCode, deref(h.Description)
}

func query(service, plan string) string {
	return url.Values{"service_id": {service}, "plan_id": {plan}}.Encode()
}
