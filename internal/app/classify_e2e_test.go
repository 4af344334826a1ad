package app_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/drivers/function/functiontest"
)

// outageEnd is how last_operation's description begins once an
// asynchronous operation has waited out a transient failure for the plan's
// outage_budget (broker.outageFailure): it goes on with the time the outage
// began, the attempts and the budget.
func outageEnd(reason string) string {
	return "The provision failed: the service's backend has been unreachable (" + reason + ") since "
}

// describes reports whether desc is want, or, for a want that outageEnd
// made, an outage's failure that begins with it.
func describes(desc, want string) bool {
	if strings.HasSuffix(want, ") since ") {
		return strings.HasPrefix(desc, want) && strings.HasSuffix(desc, "the plan's limit); try again later.")
	}
	return desc == want
}

// malformed is the description users get for an answer that breaks the
// protocol (function.Classify).
func malformed(problem string) string {
	return "This service's backend sent the broker an answer that breaks the function protocol (" + problem +
		"); retrying cannot help. The service's owner must fix the backend."
}

// TestWhatUsersSeeOfEachAnswer is the classification's table, through the
// real OSB client: each class of a target's answer to a provision, on a
// synchronous plan (the status and description of the request's answer)
// and an asynchronous one (last_operation's state and description). The
// "What users see" table of docs/functions.md says the same.
func TestWhatUsersSeeOfEachAnswer(t *testing.T) {
	target := functiontest.Start(t, functionSecret)
	// A transient failure of an asynchronous plan is an outage, waited out
	// for the plan's outage_budget (30 minutes): on a clock the waits move
	// at once.
	clock := newOutageClock()
	o := functionOptions(t, target, functionSecret)
	o.Sleep, o.Now, o.ReapInterval = clock.Sleep, clock.Now, -1
	b := apptest.StartWith(t, o)
	e := newE2E(t, b)
	const refused = "This service's backend refused the broker's request (HTTP 400) without an answer of the function protocol. Ask the platform operator to check the plan's function settings."
	permanent := `{"version":2,"error":{"kind":"permanent","description":"The region has no capacity left.","instance_usable":false}}`
	for i, tc := range []struct {
		name       string
		answer     string
		status     int
		syncStatus int
		syncDesc   string
		asyncState osb.LastOperationState // "": not tried asynchronously
		asyncDesc  string
	}{
		{"a permanent error", permanent, 200, 422, "The region has no capacity left.", osb.StateFailed, "The region has no capacity left."},
		{"a permanent error sent with HTTP 422", permanent, 422, 422, "The region has no capacity left.", osb.StateFailed, "The region has no capacity left."},
		{"a transient error", `{"version":2,"error":{"kind":"transient","description":"Busy."}}`, 200,
			503, "This service's backend is unavailable (it reports a transient error), so the provision did not complete; try again later.", osb.StateFailed, outageEnd("it reports a transient error")},
		{"HTTP 503", `<html>down</html>`, 503,
			503, "This service's backend is unavailable (HTTP 503), so the provision did not complete; try again later.", osb.StateFailed, outageEnd("HTTP 503")},
		{"HTTP 429", ``, 429,
			503, "This service's backend is unavailable (HTTP 429), so the provision did not complete; try again later.", osb.StateFailed, outageEnd("HTTP 429")},
		{"HTTP 400 without an answer", `bad request`, 400, 422, refused, osb.StateFailed, refused},
		{"HTTP 401", `bad signature`, 401, 422, "This service's backend refused the broker's request (HTTP 401): the broker's credentials for it are not the ones it expects. Ask the platform operator to check the plan's secret.",
			osb.StateFailed, "This service's backend refused the broker's request (HTTP 401): the broker's credentials for it are not the ones it expects. Ask the platform operator to check the plan's secret."},
		{"done and error at once", `{"version":2,"done":true,"error":{"kind":"permanent","description":"No."}}`, 200,
			422, malformed("done and error at once"), osb.StateFailed, malformed("done and error at once")},
		{"results while not done", `{"version":2,"results":{"dashboard_url":"https://x.example"}}`, 200,
			422, malformed("results while not done"), osb.StateFailed, malformed("results while not done")},
		{"a bad dashboard URL", `{"version":2,"done":true,"results":{"dashboard_url":"ftp://x"}}`, 200,
			422, malformed("results.dashboard_url must be an http(s) URL"), osb.StateFailed, malformed("results.dashboard_url must be an http(s) URL")},
		{"no version", `{"done":true}`, 200, 422, malformed("version must be 1 or 2"), osb.StateFailed, malformed("version must be 1 or 2")},
		{"not JSON", `OK`, 200, 422, malformed("not a JSON object"), osb.StateFailed, malformed("not a JSON object")},
		{"credentials in a provision's answer", `{"version":2,"done":true,"results":{"credentials":{"password":"pw"}}}`, 200,
			422, malformed("results.credentials in the answer of a provision: only a bind's answer may hold credentials"),
			osb.StateFailed, malformed("results.credentials in the answer of a provision: only a bind's answer may hold credentials")},
		{"not done within the synchronous wait", `{"version":2,"retry_after":60,"description":"Working."}`, 200,
			503, "This service's backend did not complete the provision within 10s, the time a synchronous request may wait; what it began is being cleaned up. Try again later.", "", ""},
	} {
		params := map[string]any{"answer": tc.answer, "status": tc.status}
		t.Run(tc.name+" (sync)", func(t *testing.T) {
			_, err := e.c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: fmt.Sprintf("cs-%d", i), ServiceID: e.service, PlanID: e.sync,
				OrganizationGUID: "org", SpaceGUID: "space", Parameters: params})
			h, ok := osb.IsHTTPError(err)
			if !ok || h.StatusCode != tc.syncStatus || h.Description == nil || *h.Description != tc.syncDesc {
				t.Fatalf("provision: %v, want %d %q", err, tc.syncStatus, tc.syncDesc)
			}
			waitNothingLeft(t, b, fmt.Sprintf("cs-%d", i))
		})
		if tc.asyncState == "" {
			continue
		}
		t.Run(tc.name+" (async)", func(t *testing.T) {
			id := fmt.Sprintf("ca-%d", i)
			r := e.provision(id, e.async, true, params)
			if state, desc := e.poll(id, r.OperationKey); state != tc.asyncState || !describes(desc, tc.asyncDesc) {
				t.Fatalf("provision ended %s %q, want %s %q", state, desc, tc.asyncState, tc.asyncDesc)
			}
		})
	}
	if strings.Contains(b.Logs.String(), `"password":"pw"`) {
		t.Error("a log line quotes the answer's credentials")
	}
	t.Run("a provision's error carries no instance_usable, which the spec keeps for update and deprovision", func(t *testing.T) {
		r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/cs-raw", Body: map[string]any{
			"service_id": e.service, "plan_id": e.sync, "organization_guid": "org", "space_guid": "space",
			"parameters": map[string]any{"answer": permanent}}})
		if r.Status != http.StatusUnprocessableEntity || strings.Contains(string(r.Raw), "instance_usable") {
			t.Fatalf("%d %s", r.Status, r.Raw)
		}
	})
}
