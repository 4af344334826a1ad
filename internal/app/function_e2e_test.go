package app_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/drivers/function/functiontest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// functionSecret is the secret the test target checks signatures with.
const functionSecret = "e2e-function-secret"

// functionCatalog writes a catalog whose plans, named as the demo's, all
// delegate to the target at url, and returns its path.
func functionCatalog(t *testing.T, url string) string {
	t.Helper()
	block := func(mode, deprovision string) string {
		b := "driver: function, mode: " + mode + ", url: '" + url + "', secret_env: TEST_FUNCTION_SECRET, timeout: 1, retry_after: 1, config: {tier: test}"
		if deprovision != "" {
			b += ", deprovision: " + deprovision
		}
		return "{" + b + "}"
	}
	cat := `services:
  - id: 6d1f7a52-0c53-4b51-9f0e-2f6b8a3d9c11
    name: function-service
    description: A service whose work a function does.
    bindable: true
    plan_updateable: true
    instances_retrievable: true
    bindings_retrievable: true
    plans:
      - id: 0b7c8e0e-5d4b-4a8f-8d51-1b9b8b1f6a01
        name: fake-plan
        description: Synchronous changes.
        broker: ` + block("sync", "") + `
      - id: 0b7c8e0e-5d4b-4a8f-8d51-1b9b8b1f6a02
        name: fake-async-plan
        description: Asynchronous changes when the platform accepts them.
        broker: ` + block("async", "") + `
      - id: 0b7c8e0e-5d4b-4a8f-8d51-1b9b8b1f6a03
        name: fake-async-only-plan
        description: Asynchronous changes only; deprovision detaches.
        broker: ` + block("async-only", "detach") + `
`
	path := filepath.Join(t.TempDir(), "function-catalog.yaml")
	if err := os.WriteFile(path, []byte(cat), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// functionOptions are the options of a broker whose plans delegate to
// target, with secret as the broker's secret for it.
func functionOptions(t *testing.T, target *functiontest.Target, secret string) apptest.Options {
	return apptest.Options{
		Catalog: functionCatalog(t, target.URL),
		Getenv: func(k string) string {
			if k == "TEST_FUNCTION_SECRET" {
				return secret
			}
			return ""
		},
		// The workflow's waits (retry_after, the Retry backoff) take no time.
		Sleep: noSleep,
	}
}

// TestClientDrivesTheFunctionDriver drives every lifecycle with the real
// OSB client through plans whose work an HTTP target written here does.
func TestClientDrivesTheFunctionDriver(t *testing.T) {
	target := functiontest.Start(t, functionSecret)
	b := apptest.StartWith(t, functionOptions(t, target, functionSecret))
	e := newE2E(t, b)

	t.Run("a synchronous plan goes through its whole lifecycle", func(t *testing.T) {
		if r := e.provision("fs-1", e.sync, false, map[string]any{"size": 1}); r.Async {
			t.Fatal("answered asynchronously")
		}
		inst, err := e.c.GetInstance(&osb.GetInstanceRequest{InstanceID: "fs-1"})
		if err != nil || inst.DashboardURL != "https://dashboard.example.test/fs-1" {
			t.Fatalf("get instance: %+v %v", inst, err)
		}
		bind, err := e.c.Bind(&osb.BindRequest{InstanceID: "fs-1", BindingID: "fsb-1", ServiceID: e.service, PlanID: e.sync,
			BindResource: &osb.BindResource{AppGUID: ptr("app")}})
		if err != nil || bind.Async || bind.Credentials["username"] != "u-fsb-1" || bind.Credentials["password"] != target.Password("fs-1", "fsb-1") {
			t.Fatalf("bind: %+v %v", bind, err)
		}
		got, err := e.c.GetBinding(&osb.GetBindingRequest{InstanceID: "fs-1", BindingID: "fsb-1"})
		if err != nil || got.Credentials["password"] != bind.Credentials["password"] {
			t.Fatalf("fetch binding: %+v %v", got, err)
		}
		if strings.Contains(b.Logs.String(), target.Password("fs-1", "fsb-1")) {
			t.Error("a log line holds the binding's password")
		}
		if _, err := e.c.Unbind(&osb.UnbindRequest{InstanceID: "fs-1", BindingID: "fsb-1", ServiceID: e.service, PlanID: e.sync}); err != nil {
			t.Fatalf("unbind: %v", err)
		}
		if ids := target.Bindings("fs-1"); len(ids) != 0 {
			t.Errorf("the target still holds bindings %v", ids)
		}
		if up, err := e.c.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: "fs-1", ServiceID: e.service,
			Parameters: map[string]any{"size": 2}}); err != nil || up.Async {
			t.Fatalf("update: %+v %v", up, err)
		}
		if _, err := e.c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "fs-1", ServiceID: e.service, PlanID: e.sync}); err != nil {
			t.Fatalf("deprovision: %v", err)
		}
		if slices.Contains(target.Instances(), "fs-1") {
			t.Error("the target still holds the instance")
		}
		waitNothingLeft(t, b, "fs-1")
	})

	t.Run("an asynchronous plan reports the target's progress and ends", func(t *testing.T) {
		r := e.provision("fa-1", e.async, true, map[string]any{"checks": 2})
		if !r.Async {
			t.Fatal("answered synchronously")
		}
		if state, desc := e.poll("fa-1", r.OperationKey); state != osb.StateSucceeded {
			t.Fatalf("provision ended %s: %s", state, desc)
		}
		bind, err := e.c.Bind(&osb.BindRequest{InstanceID: "fa-1", BindingID: "fab-1", ServiceID: e.service, PlanID: e.async,
			AcceptsIncomplete: true, BindResource: &osb.BindResource{AppGUID: ptr("app")}})
		if err != nil || !bind.Async {
			t.Fatalf("bind: %+v %v", bind, err)
		}
		if state := e.pollBinding("fa-1", "fab-1", bind.OperationKey); state != osb.StateSucceeded {
			t.Fatalf("bind ended %s", state)
		}
		if got, err := e.c.GetBinding(&osb.GetBindingRequest{InstanceID: "fa-1", BindingID: "fab-1"}); err != nil ||
			got.Credentials["password"] != target.Password("fa-1", "fab-1") {
			t.Fatalf("fetch binding: %+v %v", got, err)
		}
		// The client library reads endpoint ports as numbers (before OSB
		// 2.17); the broker sends strings, as the spec says. Raw HTTP here.
		path := "/v2/service_instances/fa-1/service_bindings/fab-2"
		if r := b.Do(apptest.Request{Method: http.MethodPut, Path: path, Body: map[string]any{"service_id": e.service, "plan_id": e.async,
			"parameters": map[string]any{"endpoints": true}}}); r.Status != http.StatusCreated {
			t.Fatalf("bind with endpoints: %d %s", r.Status, r.Raw)
		}
		if r := b.Do(apptest.Request{Method: http.MethodGet, Path: path}); !strings.Contains(string(r.Raw), `"endpoints":[{"host":"db.example.test","ports":["5432"],"protocol":"tcp"}]`) {
			t.Fatalf("fetch binding: %s", r.Raw)
		}
		if r := b.Do(apptest.Request{Method: http.MethodDelete, Path: path + "?service_id=" + e.service + "&plan_id=" + e.async}); r.Status != http.StatusOK {
			t.Fatalf("unbind: %d %s", r.Status, r.Raw)
		}
		up, err := e.c.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: "fa-1", ServiceID: e.service, AcceptsIncomplete: true,
			Parameters: map[string]any{"checks": 1}})
		if err != nil || !up.Async {
			t.Fatalf("update: %+v %v", up, err)
		}
		if state, desc := e.poll("fa-1", up.OperationKey); state != osb.StateSucceeded {
			t.Fatalf("update ended %s: %s", state, desc)
		}
		ub, err := e.c.Unbind(&osb.UnbindRequest{InstanceID: "fa-1", BindingID: "fab-1", ServiceID: e.service, PlanID: e.async, AcceptsIncomplete: true})
		if err != nil {
			t.Fatalf("unbind: %v", err)
		}
		if state := e.pollBinding("fa-1", "fab-1", ub.OperationKey); state != "gone" && state != osb.StateSucceeded {
			t.Fatalf("unbind ended %s", state)
		}
		dr, err := e.c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "fa-1", ServiceID: e.service, PlanID: e.async, AcceptsIncomplete: true})
		if err != nil {
			t.Fatalf("deprovision: %v", err)
		}
		if state, desc := e.poll("fa-1", dr.OperationKey); state != "gone" && state != osb.StateSucceeded {
			t.Fatalf("deprovision ended %s: %s", state, desc)
		}
		if slices.Contains(target.Instances(), "fa-1") {
			t.Error("the target still holds the instance")
		}
		waitNothingLeft(t, b, "fa-1")
	})

	t.Run("a permanent error fails the operation with the target's description", func(t *testing.T) {
		r := e.provision("fp-1", e.asyncOnly, true, map[string]any{"fail": "The region has no capacity left."})
		if state, desc := e.poll("fp-1", r.OperationKey); state != osb.StateFailed || desc != "The region has no capacity left." {
			t.Fatalf("provision ended %s %q", state, desc)
		}
		if _, err := e.c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "fp-1", ServiceID: e.service, PlanID: e.asyncOnly, AcceptsIncomplete: true}); err != nil {
			t.Fatalf("deprovision of the failed instance: %v", err)
		}
		waitNothingLeft(t, b, "fp-1")
		_, err := e.c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "fp-2", ServiceID: e.service, PlanID: e.sync,
			OrganizationGUID: "org", SpaceGUID: "space", Parameters: map[string]any{"fail": "No."}})
		if !isStatus(err, http.StatusUnprocessableEntity) {
			t.Fatalf("failing sync provision: %v, want 422", err)
		}
		waitNothingLeft(t, b, "fp-2")
	})

	// Each fault, once: the workflow (or, for a synchronous change, the
	// request) retries and the change completes; the target saw the
	// operation's begin twice.
	for _, fault := range []string{"transient", "timeout", "malformed", "oversized", "http500"} {
		for _, plan := range []string{"sync", "async"} {
			t.Run("a change completes after a "+fault+" answer ("+plan+")", func(t *testing.T) {
				id := "ff-" + fault + "-" + plan
				planID, async := e.sync, false
				if plan == "async" {
					planID, async = e.async, true
				}
				r := e.provision(id, planID, async, map[string]any{"fault": fault + "-once"})
				if async {
					if state, desc := e.poll(id, r.OperationKey); state != osb.StateSucceeded {
						t.Fatalf("provision ended %s: %s", state, desc)
					}
				}
				begins := 0
				for _, req := range target.Requests() {
					if req.Instance.ID == id && req.Call == "begin" {
						begins++
					}
				}
				if begins != 2 {
					t.Errorf("the target saw %d begin requests, want 2 (the faulty one and the retry)", begins)
				}
			})
		}
	}

	t.Run("an answer that stays malformed fails the operation, and the broker goes on", func(t *testing.T) {
		// A transient error is an outage, waited out for the plan's outage
		// budget (30 minutes): on a clock that the waits move at once.
		clock := newOutageClock(0)
		o := functionOptions(t, target, functionSecret)
		o.Sleep, o.Now, o.ReapInterval = clock.Sleep, clock.Now, -1
		e := newE2E(t, apptest.StartWith(t, o))
		r := e.provision("fm-1", e.async, true, map[string]any{"fault": "malformed"})
		if state, desc := e.poll("fm-1", r.OperationKey); state != osb.StateFailed || desc == "" {
			t.Fatalf("provision ended %s %q", state, desc)
		}
		if _, err := e.c.GetCatalog(); err != nil {
			t.Fatalf("the broker is down: %v", err)
		}
	})
}

// TestAFunctionThatRefusesTheSignatureFailsTheOperation: the broker's
// secret is not the target's, so the target refuses every request.
func TestAFunctionThatRefusesTheSignatureFailsTheOperation(t *testing.T) {
	target := functiontest.Start(t, functionSecret)
	b := apptest.StartWith(t, functionOptions(t, target, "not-the-targets-secret"))
	e := newE2E(t, b)
	r := e.provision("fw-1", e.async, true, nil)
	state, desc := e.poll("fw-1", r.OperationKey)
	if state != osb.StateFailed || !strings.Contains(desc, "HTTP 401") {
		t.Fatalf("provision ended %s %q, want failed naming HTTP 401", state, desc)
	}
	_, err := e.c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "fw-2", ServiceID: e.service, PlanID: e.sync,
		OrganizationGUID: "org", SpaceGUID: "space"})
	if !isStatus(err, http.StatusUnprocessableEntity) {
		t.Fatalf("sync provision: %v, want 422", err)
	}
	if target.Refused() == 0 || len(target.Requests()) != 0 {
		t.Fatalf("the target refused %d and accepted %d requests", target.Refused(), len(target.Requests()))
	}
	if strings.Contains(b.Logs.String(), "not-the-targets-secret") {
		t.Error("a log line holds the secret")
	}
	// Nothing stays in progress.
	waitExecutions(t, b)
}

// recorder is a reverse proxy in front of the broker that keeps the body of
// every answer: the OSB client (written for OSB 2.14) drops the instance
// metadata of OSB 2.17, which the broker's answers carry.
type recorder struct {
	URL string
	mu  sync.Mutex
	// bodies of the answers, by "METHOD PATH".
	bodies map[string][]byte
}

func startRecorder(t *testing.T, brokerURL string) *recorder {
	t.Helper()
	target, err := url.Parse(brokerURL)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{bodies: map[string][]byte{}}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		r.mu.Lock()
		r.bodies[resp.Request.Method+" "+resp.Request.URL.Path] = body
		r.mu.Unlock()
		return nil
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// metadata returns the metadata of the last answer to METHOD PATH.
func (r *recorder) metadata(t *testing.T, method, path string) map[string]any {
	t.Helper()
	r.mu.Lock()
	body, ok := r.bodies[method+" "+path]
	r.mu.Unlock()
	if !ok {
		t.Fatalf("no answer to %s %s went through", method, path)
	}
	var answer struct {
		Metadata map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		t.Fatalf("%s %s answered %s: %v", method, path, body, err)
	}
	return answer.Metadata
}

// TestClientSeesTheFunctionsMetadata: the labels and attributes a target
// answers a provision with reach the platform in the provision's answer and
// in a fetch of the instance; an update's answer replaces them.
func TestClientSeesTheFunctionsMetadata(t *testing.T) {
	target := functiontest.Start(t, functionSecret)
	b := apptest.StartWith(t, functionOptions(t, target, functionSecret))
	rec := startRecorder(t, b.URL)
	e := newE2E(t, b)
	e.c = client(t, rec.URL)
	const path = "/v2/service_instances/fmd-1"
	want := func(t *testing.T, method string, labels, attributes map[string]any) {
		t.Helper()
		w := map[string]any{"labels": labels}
		if attributes != nil {
			w["attributes"] = attributes
		}
		got, _ := json.Marshal(rec.metadata(t, method, path)) // keys sorted: comparable
		if wantJSON, _ := json.Marshal(w); !bytes.Equal(got, wantJSON) {
			t.Errorf("%s %s: metadata %s, want %s", method, path, got, wantJSON)
		}
	}

	gold := map[string]any{"labels": map[string]any{"tier": "gold"}, "attributes": map[string]any{"region": "eu-west-1", "nodes": 3}}
	r, err := e.c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "fmd-1", ServiceID: e.service, PlanID: e.sync,
		OrganizationGUID: "org", SpaceGUID: "space", Parameters: map[string]any{"metadata": gold}})
	if err != nil || r.Async {
		t.Fatalf("provision: %+v %v", r, err)
	}
	t.Run("the provision's 201 carries the target's metadata", func(t *testing.T) {
		want(t, http.MethodPut, gold["labels"].(map[string]any), gold["attributes"].(map[string]any))
	})
	t.Run("a fetch of the instance shows it", func(t *testing.T) {
		if _, err := e.c.GetInstance(&osb.GetInstanceRequest{InstanceID: "fmd-1"}); err != nil {
			t.Fatal(err)
		}
		want(t, http.MethodGet, gold["labels"].(map[string]any), gold["attributes"].(map[string]any))
	})
	t.Run("an update's answer replaces it", func(t *testing.T) {
		silver := map[string]any{"labels": map[string]any{"tier": "silver"}}
		if up, err := e.c.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: "fmd-1", ServiceID: e.service,
			Parameters: map[string]any{"metadata": silver}}); err != nil || up.Async {
			t.Fatalf("update: %+v %v", up, err)
		}
		want(t, http.MethodPatch, silver["labels"].(map[string]any), nil)
		if _, err := e.c.GetInstance(&osb.GetInstanceRequest{InstanceID: "fmd-1"}); err != nil {
			t.Fatal(err)
		}
		want(t, http.MethodGet, silver["labels"].(map[string]any), nil)
	})
	t.Run("an update whose answer has none keeps it", func(t *testing.T) {
		if _, err := e.c.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: "fmd-1", ServiceID: e.service,
			Parameters: map[string]any{"size": 2}}); err != nil {
			t.Fatalf("update: %v", err)
		}
		if _, err := e.c.GetInstance(&osb.GetInstanceRequest{InstanceID: "fmd-1"}); err != nil {
			t.Fatal(err)
		}
		want(t, http.MethodGet, map[string]any{"tier": "silver"}, nil)
	})
}

// TestACleanupGoesToThePlansCurrentTarget: between a failed provision and
// its cleanup the plan moved to another target. The cleanup goes to the
// target the catalog names now; the retired one gets nothing more.
func TestACleanupGoesToThePlansCurrentTarget(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	// The retired target refuses the broker's requests: the provision fails
	// and so does the cleanup, which gives up and waits for an operator.
	retired := functiontest.Start(t, "the-retired-targets-secret")
	o := functionOptions(t, retired, functionSecret)
	o.Dir = dir
	b := apptest.StartWith(t, o)
	e := newE2E(t, b)
	r := e.provision("fc-1", e.asyncOnly, true, nil)
	if state, desc := e.poll("fc-1", r.OperationKey); state != osb.StateFailed || !strings.Contains(desc, "HTTP 401") {
		t.Fatalf("provision ended %s %q, want failed naming HTTP 401", state, desc)
	}
	var det broker.Detached
	waittest.Until(t, func() error {
		ds, err := b.Local.Store.ListDetached(ctx)
		if err != nil {
			return err
		}
		for _, d := range ds {
			if d.InstanceID == "fc-1" && d.State == broker.DetachedFailed {
				det = d
				return nil
			}
		}
		return fmt.Errorf("no failed cleanup of fc-1 yet: %+v", ds)
	})
	b.Stop()
	refused := retired.Refused()

	moved := functiontest.Start(t, functionSecret)
	o = functionOptions(t, moved, functionSecret)
	o.Dir = dir
	b = apptest.StartWith(t, o)
	if _, err := b.Local.Broker.RetryCleanup(ctx, det.ID); err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, func() error {
		if _, err := b.Local.Store.GetDetached(ctx, det.ID); !errors.Is(err, broker.ErrNotFound) {
			return fmt.Errorf("the detached resource is still there (%v)", err)
		}
		return nil
	})
	reqs := moved.Requests()
	if len(reqs) != 1 || reqs[0].Call != "cleanup" || reqs[0].Instance.ID != "fc-1" {
		t.Errorf("the plan's target got %+v, want the cleanup of fc-1", reqs)
	}
	if retired.Refused() != refused || len(retired.Requests()) != 0 {
		t.Errorf("the retired target got %d more requests", retired.Refused()-refused+len(retired.Requests()))
	}
}
