package app_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/drivers/function/functiontest"
)

// TestAmbiguousParametersAreRefusedAndTargetsGetWhatWasValidated: a key
// twice, or two keys differing only in case, in parameters or context, at
// any depth, is a 400 naming the key; a target receives the parameters
// re-encoded, one value per key.
func TestAmbiguousParametersAreRefusedAndTargetsGetWhatWasValidated(t *testing.T) {
	target := functiontest.Start(t, functionSecret)
	b := apptest.StartWith(t, functionOptions(t, target, functionSecret))
	service, plan := b.Plan("fake-plan")
	body := func(params, ctx string) string {
		return `{"service_id":"` + service + `","plan_id":"` + plan + `","organization_guid":"org","space_guid":"space","parameters":` +
			params + `,"context":` + ctx + `}`
	}
	for _, tc := range []struct{ name, params, ctx, want string }{
		{"a key twice", `{"size":"small","size":"huge"}`, `{}`, `"parameters" has the key "size" twice`},
		{"keys differing in case", `{"size":"small","Size":"huge"}`, `{}`, `"parameters" has the keys "size" and "Size"`},
		{"a key twice deeper down", `{"db":{"opts":[{"a":1,"a":2}]}}`, `{}`, `"parameters.db.opts[0]" has the key "a" twice`},
		{"a key twice in context", `{}`, `{"platform":"cf","platform":"k8s"}`, `"context" has the key "platform" twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/dup-1", Body: body(tc.params, tc.ctx)})
			if r.Status != http.StatusBadRequest || !strings.Contains(r.Str("description"), tc.want) {
				t.Fatalf("%d %s, want 400 naming %s", r.Status, r.Raw, tc.want)
			}
		})
	}
	if n := len(target.Requests()); n != 0 {
		t.Fatalf("the target got %d requests for refused provisions", n)
	}
	r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/dup-2", Body: body(`{ "size" : 1 ,"a":"x" }`, `{}`)})
	if r.Status != http.StatusCreated {
		t.Fatalf("provision: %d %s", r.Status, r.Raw)
	}
	reqs := target.Requests()
	if len(reqs) == 0 || string(reqs[0].Instance.Parameters) != `{"a":"x","size":1}` {
		t.Fatalf("the target received %s, want the validated parameters re-encoded", reqs[0].Instance.Parameters)
	}
}
