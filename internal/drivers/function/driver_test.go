package function_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/jsonschema"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/drivers/function"
	"github.com/serverless-osb/broker/internal/drivers/function/functiontest"
	"github.com/serverless-osb/broker/internal/logging/logtest"
	"github.com/serverless-osb/broker/internal/store/bolt"
	"github.com/serverless-osb/broker/internal/store/storetest"
)

const secret = "test-shared-secret"

// fixture is a driver on a bolt store, pointed at a test target.
type fixture struct {
	t      *testing.T
	d      *function.Driver
	store  broker.Store
	target *functiontest.Target
	s      *function.Settings
	logs   *bytes.Buffer
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	store, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	target := functiontest.Start(t, secret)
	logs := &bytes.Buffer{}
	getenv := func(k string) string {
		if k == "FN_SECRET" {
			return secret
		}
		return ""
	}
	d := function.New(store, nil, getenv, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	s, err := function.Configure(nil, map[string]any{"url": target.URL, "secret_env": "FN_SECRET", "timeout": 1,
		"config": map[string]any{"tier": "small"}}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, d: d, store: store, target: target, s: s, logs: logs}
}

var (
	svc  = &catalog.Service{ID: "svc-1", Name: "things"}
	plan = &catalog.Plan{ID: "plan-1", Name: "small"}
)

func (f *fixture) change(kind broker.OperationKind, opID string, async bool, params string) broker.Change {
	c := broker.Change{
		Operation: broker.Operation{ID: opID, InstanceID: "i-1", Kind: kind, Async: async},
		Instance:  broker.Instance{ID: "i-1", InstanceRequest: broker.InstanceRequest{ServiceID: svc.ID, PlanID: plan.ID, Parameters: json.RawMessage(`{}`)}},
		Plan:      plan, Service: svc, Settings: f.s,
	}
	switch kind {
	case broker.KindProvision:
		c.Instance.Parameters = json.RawMessage(params)
	case broker.KindUpdate:
		c.Operation.Target = &broker.Target{Parameters: json.RawMessage(params)}
	case broker.KindBind, broker.KindUnbind:
		c.Operation.BindingID = "b-1"
		c.Binding = &broker.Binding{InstanceID: "i-1", ID: "b-1", BindingRequest: broker.BindingRequest{AppGUID: "app-1", Parameters: json.RawMessage(params)}}
	}
	return c
}

// fresh is c with the instance's records as they are stored (for a
// binding's change, that binding's and the instance's; for a
// deprovision's, every one), as the broker hands a change to its driver.
func (f *fixture) fresh(c broker.Change) broker.Change {
	f.t.Helper()
	records, err := storetest.Records(context.Background(), f.store, c.Instance.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	c.Records = nil
	for _, r := range records {
		if broker.Whole(&c.Operation) || broker.RecordFor(r.Name, c.BindingID()) {
			c.Records = append(c.Records, r)
		}
	}
	return c
}

// apply writes the record changes of p, as the broker does with the
// step's outcome.
func (f *fixture) apply(p broker.Progress, err error) (broker.Progress, error) {
	f.t.Helper()
	if err != nil {
		return p, err
	}
	ctx := context.Background()
	for _, r := range p.Records.Save {
		if perr := f.store.PutResource(ctx, r); perr != nil {
			f.t.Fatal(perr)
		}
	}
	for _, n := range p.Records.Remove {
		if derr := f.store.DeleteResource(ctx, "i-1", n); derr != nil && !errors.Is(derr, broker.ErrNotFound) {
			f.t.Fatal(derr)
		}
	}
	return p, nil
}

// begin and check call the driver as a workflow step does: with the
// records as stored, writing the record changes it returns.
func (f *fixture) begin(c broker.Change) (broker.Progress, error) {
	f.t.Helper()
	return f.apply(f.d.Begin(context.Background(), f.fresh(c)))
}

func (f *fixture) check(c broker.Change) (broker.Progress, error) {
	f.t.Helper()
	return f.apply(f.d.Check(context.Background(), f.fresh(c)))
}

// run begins a change and checks it until it is done, as the workflow does.
func (f *fixture) run(c broker.Change) (broker.Progress, error) {
	f.t.Helper()
	p, err := f.begin(c)
	for i := 0; err == nil && !p.Done; i++ {
		if i > 20 {
			f.t.Fatal("the change never ends")
		}
		p, err = f.check(c)
	}
	return p, err
}

func (f *fixture) records() []string {
	f.t.Helper()
	rs, err := storetest.Records(context.Background(), f.store, "i-1")
	if err != nil {
		f.t.Fatal(err)
	}
	var names []string
	for _, r := range rs {
		names = append(names, r.Name)
	}
	return names
}

func TestDriverRunsEveryLifecycleAgainstAnHTTPTarget(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()

	t.Run("an asynchronous provision reports progress, then its dashboard", func(t *testing.T) {
		c := f.change(broker.KindProvision, "op-1", true, `{"checks": 2}`)
		p, err := f.begin(c)
		if err != nil || p.Done || p.RetryAfter != time.Second || p.Description != "2 checks to go." {
			t.Fatalf("begin: %+v %v, want not done, retry after 1s, the target's description", p, err)
		}
		if p, err = f.run(c); err != nil || p.DashboardURL != "https://dashboard.example.test/i-1" {
			t.Fatalf("%+v %v", p, err)
		}
		// Finish checks once more: the results again.
		if p, err = f.check(c); err != nil || !p.Done || p.DashboardURL == "" {
			t.Fatalf("check after done: %+v %v", p, err)
		}
		if got := f.records(); len(got) != 1 || got[0] != "instance" {
			t.Fatalf("records %v, want the instance's", got)
		}
		r, _ := storetest.Record(ctx, f.store, "i-1", "instance")
		if !strings.Contains(string(r.Data), `"state":{"made_by":"op-1"}`) {
			t.Errorf("the target's state is not kept: %s", r.Data)
		}
	})
	t.Run("the requests carry the operation, the plan's config and the state", func(t *testing.T) {
		reqs := f.target.Requests()
		first, last := reqs[0], reqs[len(reqs)-1]
		if first.Call != function.CallBegin || first.Operation.Kind != broker.KindProvision || !first.Operation.Async ||
			first.Operation.Attempt != 1 || first.Plan == nil || first.Plan.Config["tier"] != "small" || first.Service.Name != "things" {
			t.Errorf("first request %+v", first)
		}
		if first.State != nil || string(last.State) != `{"made_by":"op-1"}` || last.Call != function.CallCheck {
			t.Errorf("state: first %s, last %s (%s)", first.State, last.State, last.Call)
		}
	})
	t.Run("an update sends what it asks for", func(t *testing.T) {
		c := f.change(broker.KindUpdate, "op-2", false, `{"size": 2}`)
		if p, err := f.run(c); err != nil || !p.Done {
			t.Fatalf("%+v %v", p, err)
		}
		reqs := f.target.Requests()
		if u := reqs[len(reqs)-1].Update; u == nil || string(u.Parameters) != `{"size":2}` {
			t.Errorf("update %+v", u)
		}
	})
	t.Run("a bind hands out the target's credentials and endpoints, which no log line holds", func(t *testing.T) {
		p, err := f.run(f.change(broker.KindBind, "op-3", false, `{"endpoints": true}`))
		if err != nil || p.Credentials["username"] != "u-b-1" || len(p.Endpoints) != 1 || p.Endpoints[0].Ports[0] != "5432" {
			t.Fatalf("%+v %v", p, err)
		}
		pw := f.target.Password("i-1", "b-1")
		if pw == "" || p.Credentials["password"] != pw {
			t.Fatalf("password %v, target made %q", p.Credentials["password"], pw)
		}
		if strings.Contains(f.logs.String(), pw) || strings.Contains(f.logs.String(), secret) {
			t.Errorf("a log line holds the password or the secret:\n%s", f.logs)
		}
	})
	t.Run("an unbind removes the binding and its record", func(t *testing.T) {
		if p, err := f.run(f.change(broker.KindUnbind, "op-4", false, `{}`)); err != nil || !p.Done {
			t.Fatalf("%+v %v", p, err)
		}
		if b := f.target.Bindings("i-1"); len(b) != 0 {
			t.Errorf("target still has bindings %v", b)
		}
		if got := f.records(); len(got) != 1 {
			t.Errorf("records %v, want the instance's only", got)
		}
	})
	t.Run("a deprovision removes the instance and every record of it", func(t *testing.T) {
		if _, err := f.run(f.change(broker.KindBind, "op-5", false, `{}`)); err != nil {
			t.Fatal(err)
		}
		c := f.change(broker.KindDeprovision, "op-6", true, `{}`)
		if p, err := f.run(c); err != nil || !p.Done {
			t.Fatalf("%+v %v", p, err)
		}
		if got := f.records(); len(got) != 0 {
			t.Errorf("records %v outlived the deprovision", got)
		}
		if ids := f.target.Instances(); len(ids) != 0 {
			t.Errorf("target still has %v", ids)
		}
		n := len(f.target.Requests())
		if p, err := f.check(c); err != nil || !p.Done || len(f.target.Requests()) != n {
			t.Errorf("a check after the deprovision: %+v %v, and %d requests, want done with no request", p, err, len(f.target.Requests())-n)
		}
	})
	t.Run("every request and answer follows protocol.schema.json", func(t *testing.T) {
		schema := compile(t, "request")
		for _, r := range f.target.Requests() {
			raw, _ := json.Marshal(r)
			v, _ := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
			if err := schema.Validate(v); err != nil {
				t.Errorf("request %s: %v", raw, err)
			}
		}
	})
}

func compile(t *testing.T, def string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(function.Schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("protocol.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("protocol.schema.json#/$defs/" + def)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDriverReportsTheTargetsFailures(t *testing.T) {
	for _, tc := range []struct {
		name      string
		params    string
		permanent string // the description of a permanent failure; "" means transient
		reason    string // a transient error's reason
	}{
		{"a permanent error fails the change with the target's description", `{"fail": "No capacity left in region 7."}`, "No capacity left in region 7.", ""},
		{"a permanent error sent with HTTP 422 keeps its description", `{"status": 422, "answer": "{\"version\":2,\"error\":{\"kind\":\"permanent\",\"description\":\"Quota exceeded.\"}}"}`, "Quota exceeded.", ""},
		{"a transient error is retried", `{"fault": "transient"}`, "", "it reports a transient error"},
		{"a transient error sent with HTTP 409 is retried", `{"status": 409, "answer": "{\"version\":2,\"error\":{\"kind\":\"transient\",\"description\":\"Busy.\"}}"}`, "", "it reports a transient error"},
		{"a timeout is transient", `{"fault": "timeout"}`, "", "no answer within 1s"},
		{"an HTTP 500 is transient", `{"fault": "http500"}`, "", "HTTP 500"},
		{"an HTTP 429 is transient", `{"status": 429, "answer": "slow down"}`, "", "HTTP 429"},
		{"an HTTP 408 is transient", `{"status": 408, "answer": ""}`, "", "HTTP 408"},
		{"an HTTP 503 with a permanent error is transient", `{"status": 503, "answer": "{\"version\":2,\"error\":{\"kind\":\"permanent\",\"description\":\"No.\"}}"}`, "", "HTTP 503"},
		{"an HTTP 400 without an answer is permanent", `{"status": 400, "answer": "bad"}`, "This service's backend refused the broker's request (HTTP 400) without an answer of the function protocol. Ask the platform operator to check the plan's function settings.", ""},
		{"an HTTP 404 with a done answer is permanent", `{"status": 404, "answer": "{\"version\":2,\"done\":true}"}`, "This service's backend refused the broker's request (HTTP 404) without an answer of the function protocol. Ask the platform operator to check the plan's function settings.", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			_, err := f.begin(f.change(broker.KindProvision, "op-1", true, tc.params))
			var fail *broker.Failure
			var transient *function.TransientError
			switch {
			case err == nil:
				t.Fatal("no error")
			case tc.permanent != "" && (!errors.As(err, &fail) || fail.Description != tc.permanent):
				t.Fatalf("error %v, want the permanent failure %q", err, tc.permanent)
			case tc.permanent == "" && (!errors.As(err, &transient) || transient.Reason != tc.reason):
				t.Fatalf("error %v, want transient: %q", err, tc.reason)
			}
			if got := f.records(); len(got) != 1 {
				t.Errorf("records %v: the record must precede the request, for the cleanup", got)
			}
		})
	}
	for _, tc := range []struct {
		name, answer, kind, problem string
	}{
		{"not JSON", `Internal Server Error`, "provision", "not a JSON object"},
		{"no version", `{"done":true}`, "provision", "version must be 1 or 2"},
		{"done and error at once", `{"version":2,"done":true,"error":{"kind":"permanent","description":"No."}}`, "provision", "done and error at once"},
		{"results while not done", `{"version":2,"results":{"dashboard_url":"https://x"}}`, "provision", "results while not done"},
		{"a bad dashboard URL", `{"version":2,"done":true,"results":{"dashboard_url":"javascript:x"}}`, "provision", "results.dashboard_url must be an http(s) URL"},
		{"a string for done", `{"version":2,"done":"yes"}`, "provision", "done must be of type bool"},
		{"an unknown error kind", `{"version":2,"error":{"kind":"fatal","description":"No."}}`, "provision", `error.kind must be "permanent" or "transient"`},
		{"credentials in a provision's answer", `{"version":2,"done":true,"results":{"credentials":{"k":"v"}}}`, "provision", "results.credentials in the answer of a provision: only a bind's answer may hold credentials"},
		{"endpoints in an update's answer", `{"version":2,"done":true,"results":{"endpoints":[{"host":"h","ports":["1"]}]}}`, "update", "results.endpoints in the answer of a update: only a bind's answer may hold endpoints"},
	} {
		t.Run("a malformed answer is permanent and names the violation: "+tc.name, func(t *testing.T) {
			f := newFixture(t)
			params, _ := json.Marshal(map[string]any{"answer": tc.answer})
			c := f.change(broker.KindProvision, "op-1", true, string(params))
			if tc.kind == "update" {
				c.Operation.Kind = broker.KindUpdate
				c.Operation.Target = &broker.Target{Parameters: params}
			}
			_, err := f.begin(c)
			want := "This service's backend sent the broker an answer that breaks the function protocol (" + tc.problem + "); retrying cannot help. The service's owner must fix the backend."
			var fail *broker.Failure
			if !errors.As(err, &fail) || fail.Description != want {
				t.Fatalf("error %v, want the permanent failure %q", err, want)
			}
			if logs := f.logs.String(); !strings.Contains(logs, "breaks the protocol") || !strings.Contains(logs, tc.problem[:10]) || strings.Contains(logs, `"k":"v"`) {
				t.Errorf("the log does not name the violation (or quotes the answer): %s", logs)
			}
		})
	}
	t.Run("an answer over the size limit is permanent", func(t *testing.T) {
		f := newFixture(t)
		_, err := f.begin(f.change(broker.KindProvision, "op-1", true, `{"fault": "oversized"}`))
		var fail *broker.Failure
		if !errors.As(err, &fail) || !strings.Contains(fail.Description, "over the limit of 65536 bytes") {
			t.Fatalf("error %v, want a permanent failure naming the limit", err)
		}
	})
	t.Run("a target that refuses the signature fails the change, and says so", func(t *testing.T) {
		f := newFixture(t)
		f.target.Secret = "another-secret"
		_, err := f.begin(f.change(broker.KindProvision, "op-1", false, `{}`))
		var fail *broker.Failure
		if !errors.As(err, &fail) || !strings.Contains(fail.Description, "HTTP 401") {
			t.Fatalf("error %v, want a permanent failure naming HTTP 401", err)
		}
		if f.target.Refused() != 1 {
			t.Errorf("refused %d requests, want 1", f.target.Refused())
		}
	})
	t.Run("a missing secret fails the change without a request", func(t *testing.T) {
		f := newFixture(t)
		f.d.Getenv = func(string) string { return "" }
		_, err := f.begin(f.change(broker.KindProvision, "op-1", false, `{}`))
		var fail *broker.Failure
		if !errors.As(err, &fail) || len(f.target.Requests())+f.target.Refused() != 0 {
			t.Fatalf("error %v after %d requests, want a permanent failure and none", err, len(f.target.Requests()))
		}
	})
	t.Run("a retried begin is the same operation's next attempt", func(t *testing.T) {
		f := newFixture(t)
		c := f.change(broker.KindProvision, "op-1", true, `{"fault": "timeout-once"}`)
		if _, err := f.begin(c); err == nil {
			t.Fatal("the first begin did not time out")
		}
		if p, err := f.run(c); err != nil || !p.Done {
			t.Fatalf("%+v %v", p, err)
		}
		reqs := f.target.Requests()
		if reqs[0].Operation.Attempt != 1 || reqs[1].Operation.Attempt != 2 || reqs[1].Call != function.CallBegin {
			t.Errorf("attempts %d, %d (%s), want 1 then begin 2", reqs[0].Operation.Attempt, reqs[1].Operation.Attempt, reqs[1].Call)
		}
	})
}

// detachedProvision begins a provision on the fixture's target, as the
// plan named it then, and returns its record as the broker detaches it.
func (f *fixture) detachedProvision() broker.Detached {
	f.t.Helper()
	ctx := context.Background()
	c := f.change(broker.KindProvision, "op-1", true, `{"checks": 1}`)
	if _, err := f.begin(c); err != nil {
		f.t.Fatal(err)
	}
	names, err := f.d.Leftovers(ctx, f.fresh(c))
	if err != nil || len(names) != 1 || names[0] != "instance" {
		f.t.Fatalf("leftovers %v %v", names, err)
	}
	r, err := storetest.Record(ctx, f.store, "i-1", "instance")
	if err != nil {
		f.t.Fatal(err)
	}
	return broker.Detached{ID: "d-1", InstanceID: "i-1", Name: r.Name, Data: r.Data, PlanID: plan.ID, OperationID: "op-1",
		Reason: "The provision failed.", Attempts: 1}
}

// catalogHas makes the fixture's driver see the catalog's plans as
// settings, by id: the plans it does not list are gone.
func (f *fixture) catalogHas(settings map[string]*function.Settings) {
	f.d.PlanSettings = func(id string) (*function.Settings, bool) {
		s, ok := settings[id]
		return s, ok
	}
}

func TestCleanupGoesToThePlansCurrentTarget(t *testing.T) {
	ctx := context.Background()
	t.Run("the plan's target, with the state the record keeps", func(t *testing.T) {
		f := newFixture(t)
		det := f.detachedProvision()
		f.catalogHas(map[string]*function.Settings{plan.ID: f.s})
		if p, err := f.d.Cleanup(ctx, det); err != nil || !p.Done {
			t.Fatalf("cleanup: %+v %v", p, err)
		}
		if len(f.target.Instances()) != 0 || f.target.Cleanups() != 1 {
			t.Errorf("target holds %v after %d cleanups", f.target.Instances(), f.target.Cleanups())
		}
		reqs := f.target.Requests()
		last := reqs[len(reqs)-1]
		if last.Call != function.CallCleanup || string(last.State) != `{"made_by":"op-1"}` || last.Cleanup.Reason != "The provision failed." {
			t.Errorf("cleanup request %+v", last)
		}
	})
	t.Run("a plan that moved to another target: the new one, and the retired one gets nothing", func(t *testing.T) {
		f := newFixture(t)
		det := f.detachedProvision()
		retired := len(f.target.Requests())
		moved := functiontest.Start(t, secret)
		s, err := function.Configure(nil, map[string]any{"url": moved.URL, "secret_env": "FN_SECRET", "protocol": 2}, "")
		if err != nil {
			t.Fatal(err)
		}
		f.catalogHas(map[string]*function.Settings{plan.ID: s})
		if p, err := f.d.Cleanup(ctx, det); err != nil || !p.Done {
			t.Fatalf("cleanup: %+v %v", p, err)
		}
		if got := len(f.target.Requests()) + f.target.Refused(); got != retired {
			t.Errorf("the retired target got %d more requests, want none", got-retired)
		}
		reqs := moved.Requests()
		if len(reqs) != 1 || reqs[0].Call != function.CallCleanup || reqs[0].Version != 2 || string(reqs[0].State) != `{"made_by":"op-1"}` {
			t.Errorf("the plan's target got %+v, want the cleanup in its protocol's version, with the state", reqs)
		}
		if !strings.Contains(f.logs.String(), "cleanup goes to the plan's current target") {
			t.Errorf("no log line says where the cleanup went:\n%s", f.logs)
		}
	})
	t.Run("a plan that is gone: the record's target, which still passes the catalog's checks", func(t *testing.T) {
		f := newFixture(t)
		det := f.detachedProvision()
		f.catalogHas(nil)
		if p, err := f.d.Cleanup(ctx, det); err != nil || !p.Done || f.target.Cleanups() != 1 {
			t.Fatalf("cleanup: %+v %v after %d cleanups", p, err, f.target.Cleanups())
		}
	})
	for _, tc := range []struct{ name, target, want string }{
		{"a password in its URL", `{"url": "http://osb:hunter2@TARGET/", "secret_env": "FN_SECRET"}`, "without user information"},
		{"plain HTTP to another host", `{"url": "http://fn.example.invalid/", "secret_env": "FN_SECRET"}`, "only to a loopback address"},
		{"no secret", `{"url": "http://TARGET/"}`, "secret_env: is missing"},
	} {
		t.Run("a plan that is gone, and a record's target with "+tc.name+": refused, sending nothing", func(t *testing.T) {
			f := newFixture(t)
			f.catalogHas(nil)
			host := strings.TrimPrefix(f.target.URL, "http://")
			det := broker.Detached{ID: "d-1", InstanceID: "i-1", Name: "instance", PlanID: "plan-gone", OperationID: "op-1", Attempts: 1,
				Data: json.RawMessage(`{"created_by":"op-1","op":"op-1","kind":"provision","attempt":1,"state":{"made_by":"op-1"},"target":` +
					strings.ReplaceAll(tc.target, "TARGET", host) + `}`)}
			_, err := f.d.Cleanup(ctx, det)
			var fail *broker.Failure
			if !errors.As(err, &fail) || !strings.Contains(fail.Description, "no longer in the catalog") || !strings.Contains(fail.Description, tc.want) {
				t.Fatalf("cleanup: %v, want a permanent failure saying the plan is gone and %q", err, tc.want)
			}
			if strings.Contains(fail.Description, "hunter2") || strings.Contains(f.logs.String(), "hunter2") {
				t.Errorf("the description or a log line holds the URL's password: %s\n%s", fail.Description, f.logs)
			}
			if n := len(f.target.Requests()) + f.target.Refused(); n != 0 {
				t.Errorf("the target got %d requests, want none", n)
			}
		})
	}
}

func TestDecodeAnswer(t *testing.T) {
	schema := compile(t, "answer")
	for _, tc := range []struct {
		name, raw string
		ok        bool
	}{
		{"a done answer with results", `{"version":1,"done":true,"results":{"dashboard_url":"https://x","credentials":{"k":"v"},"endpoints":[{"host":"h","ports":["1"]}]}}`, true},
		{"a progress answer", `{"version":1,"retry_after":2.5,"description":"Half way.","state":{"n":1}}`, true},
		{"a permanent error", `{"version":1,"error":{"kind":"permanent","description":"No."}}`, true},
		{"a version 2 answer", `{"version":2,"done":true}`, true},
		{"another version", `{"version":3,"done":true}`, false},
		{"no version", `{"done":true}`, false},
		{"done and an error", `{"version":1,"done":true,"error":{"kind":"permanent","description":"No."}}`, false},
		{"an unknown error kind", `{"version":1,"error":{"kind":"fatal","description":"No."}}`, false},
		{"an error without description", `{"version":1,"error":{"kind":"permanent","description":""}}`, false},
		{"a negative retry_after", `{"version":1,"retry_after":-1}`, false},
		{"results while not done", `{"version":1,"results":{"dashboard_url":"https://x"}}`, false},
		{"a dashboard that is not a URL", `{"version":1,"done":true,"results":{"dashboard_url":"javascript:x"}}`, false},
		{"an endpoint without ports", `{"version":1,"done":true,"results":{"endpoints":[{"host":"h","ports":[]}]}}`, false},
		{"a string for done", `{"version":1,"done":"yes"}`, false},
		{"a done answer with metadata", `{"version":1,"done":true,"results":{"metadata":{"labels":{"tier":"gold"},"attributes":{"region":"eu","size":3}}}}`, true},
		{"metadata with labels only", `{"version":1,"done":true,"results":{"metadata":{"labels":{}}}}`, true},
		{"metadata that is not an object", `{"version":1,"done":true,"results":{"metadata":["tier"]}}`, false},
		{"metadata that is null", `{"version":1,"done":true,"results":{"metadata":null}}`, false},
		{"labels that are not an object", `{"version":1,"done":true,"results":{"metadata":{"labels":"tier=gold"}}}`, false},
		{"labels that are null", `{"version":1,"done":true,"results":{"metadata":{"labels":null}}}`, false},
		{"attributes that are not an object", `{"version":1,"done":true,"results":{"metadata":{"attributes":[1]}}}`, false},
		{"not JSON", `Internal Server Error`, false},
		{"two values", `{"version":1}{"version":1}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := function.DecodeAnswer([]byte(tc.raw))
			if (err == nil) != tc.ok {
				t.Fatalf("DecodeAnswer: %v, want ok %v", err, tc.ok)
			}
			if err != nil && strings.Contains(err.Error(), `"k":"v"`) {
				t.Errorf("the error quotes the answer: %v", err)
			}
			if v, jerr := jsonschema.UnmarshalJSON(strings.NewReader(tc.raw)); jerr == nil && !strings.Contains(tc.name, "two values") {
				if serr := schema.Validate(v); (serr == nil) != tc.ok {
					t.Errorf("the schema says %v, the driver %v", serr, err)
				}
			}
		})
	}
	t.Run("an answer over the limit is refused", func(t *testing.T) {
		raw := `{"version":1,"description":"` + strings.Repeat("x", function.MaxAnswerBytes) + `"}`
		if _, err := function.DecodeAnswer([]byte(raw)); err == nil {
			t.Fatal("accepted")
		}
	})
}

func TestDriverReturnsTheTargetsMetadata(t *testing.T) {
	f := newFixture(t)
	gold := map[string]any{"labels": map[string]any{"tier": "gold"}, "attributes": map[string]any{"region": "eu-west-1", "size": 3}}
	params, _ := json.Marshal(map[string]any{"checks": 1, "metadata": gold})

	t.Run("a provision's answer carries the instance's labels and attributes", func(t *testing.T) {
		p, err := f.run(f.change(broker.KindProvision, "op-1", true, string(params)))
		if err != nil || p.Metadata == nil || p.Metadata.Labels["tier"] != "gold" ||
			p.Metadata.Attributes["region"] != "eu-west-1" || p.Metadata.Attributes["size"] != 3.0 {
			t.Fatalf("%+v %v", p, err)
		}
	})
	t.Run("an update's answer replaces them", func(t *testing.T) {
		p, err := f.run(f.change(broker.KindUpdate, "op-2", false, `{"metadata": {"labels": {"tier": "silver"}}}`))
		if err != nil || p.Metadata == nil || p.Metadata.Labels["tier"] != "silver" || p.Metadata.Attributes != nil {
			t.Fatalf("%+v %v", p, err)
		}
	})
	t.Run("an answer without metadata leaves them as they are", func(t *testing.T) {
		p, err := f.run(f.change(broker.KindUpdate, "op-3", false, `{}`))
		if err != nil || !p.Done || p.Metadata != nil {
			t.Fatalf("%+v %v, want done without metadata", p, err)
		}
	})
}

func TestDriverReadsItsRecordsFromTheChange(t *testing.T) {
	ctx := context.Background()
	t.Run("a check sees the record the change holds, not the store's", func(t *testing.T) {
		f := newFixture(t)
		c := f.change(broker.KindProvision, "op-1", true, `{"checks": 2}`)
		if _, err := f.begin(c); err != nil {
			t.Fatal(err)
		}
		// The store has the record; a change read before it was written
		// does not: the driver goes by the change.
		_, err := f.d.Check(ctx, c)
		var fail *broker.Failure
		if !errors.As(err, &fail) || !strings.Contains(fail.Description, "record of it is gone") {
			t.Fatalf("check without the record: %v, want the failure of a record that is gone", err)
		}
		if p, err := f.check(c); err != nil || p.Done {
			t.Fatalf("check with the record: %+v %v", p, err)
		}
	})
	t.Run("a deprovision hands the removal of every record to the broker", func(t *testing.T) {
		f := newFixture(t)
		if _, err := f.run(f.change(broker.KindProvision, "op-1", false, `{}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := f.run(f.change(broker.KindBind, "op-2", false, `{}`)); err != nil {
			t.Fatal(err)
		}
		p, err := f.d.Begin(ctx, f.fresh(f.change(broker.KindDeprovision, "op-3", false, `{}`)))
		if err != nil || !p.Done {
			t.Fatalf("%+v %v", p, err)
		}
		if got := p.Records.Remove; len(got) != 2 || !slices.Contains(got, "instance") || !slices.Contains(got, "binding-b-1") {
			t.Errorf("removes %v, want the instance's and the binding's records", got)
		}
		if got := f.records(); len(got) != 2 {
			t.Errorf("records %v: the driver removed some itself, before the broker recorded the outcome", got)
		}
	})
	t.Run("an unbind hands the removal of its binding's record to the broker", func(t *testing.T) {
		f := newFixture(t)
		if _, err := f.run(f.change(broker.KindProvision, "op-1", false, `{}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := f.run(f.change(broker.KindBind, "op-2", false, `{}`)); err != nil {
			t.Fatal(err)
		}
		p, err := f.d.Begin(ctx, f.fresh(f.change(broker.KindUnbind, "op-3", false, `{}`)))
		if err != nil || !p.Done || len(p.Records.Remove) != 1 || p.Records.Remove[0] != "binding-b-1" {
			t.Fatalf("%+v %v, want done, removing binding-b-1", p, err)
		}
		if got := f.records(); len(got) != 2 {
			t.Errorf("records %v: the driver removed the binding's record itself", got)
		}
	})
	t.Run("a bind goes by its own binding's record, not another binding's", func(t *testing.T) {
		f := newFixture(t)
		if _, err := f.run(f.change(broker.KindProvision, "op-1", false, `{}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := f.run(f.change(broker.KindBind, "op-2", false, `{}`)); err != nil {
			t.Fatal(err)
		}
		c := f.change(broker.KindBind, "op-3", false, `{}`)
		c.Operation.BindingID, c.Binding.ID = "b-2", "b-2"
		if p, err := f.run(c); err != nil || !p.Done || p.Credentials["username"] != "u-b-2" {
			t.Fatalf("a second binding: %+v %v", p, err)
		}
		if got := f.records(); len(got) != 3 {
			t.Errorf("records %v, want the instance's and two bindings'", got)
		}
	})
}

// versionOneTarget is a target of the previous release: it checks the
// version 1 MAC, of "<t>.<body>", and answers version 1.
func versionOneTarget(t *testing.T) (url string, refused *atomic.Int32) {
	refused = &atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ts, sig string
		for _, part := range strings.Split(r.Header.Get(function.HeaderSignature), ",") {
			k, v, _ := strings.Cut(part, "=")
			switch k {
			case "t":
				ts = v
			case "v1":
				sig = v
			}
		}
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + "."))
		mac.Write(body)
		if sig == "" || !hmac.Equal([]byte(sig), []byte(hex.EncodeToString(mac.Sum(nil)))) {
			refused.Add(1)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, `{"version": 1, "done": true}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, refused
}

func TestTheSignatureCoversTheWholeRequest(t *testing.T) {
	f := newFixture(t)
	if p, err := f.run(f.change(broker.KindProvision, "op-1", false, `{}`)); err != nil || !p.Done {
		t.Fatalf("%+v %v", p, err)
	}

	t.Run("a request sent again as it was is refused: its id was taken", func(t *testing.T) {
		if status := f.target.Replay(t, 0, f.target.URL); status != http.StatusUnauthorized {
			t.Fatalf("the replayed request got HTTP %d, want 401", status)
		}
	})
	t.Run("a request signed for one target is refused by another that shares its secret", func(t *testing.T) {
		other := functiontest.Start(t, secret)
		if status := f.target.Replay(t, 0, other.URL); status != http.StatusUnauthorized || other.Refused() != 1 {
			t.Fatalf("the request replayed to another target got HTTP %d, want 401", status)
		}
	})
	t.Run("each request has an id of its own", func(t *testing.T) {
		if _, err := f.run(f.change(broker.KindUpdate, "op-2", false, `{}`)); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, h := range f.target.Headers() {
			id := h.Get(function.HeaderRequestID)
			if id == "" || seen[id] {
				t.Fatalf("request id %q empty or seen before", id)
			}
			seen[id] = true
		}
	})
	t.Run("a plan that names no protocol speaks version 2 and sends no version 1 MAC", func(t *testing.T) {
		h, req := f.target.Headers()[0], f.target.Requests()[0]
		if sig := h.Get(function.HeaderSignature); strings.Contains(sig, "v1=") || !strings.Contains(sig, ",v2=") ||
			h.Get(function.HeaderVersion) != "2" || req.Version != 2 {
			t.Errorf("signature %q, header version %q, body version %d; want the v2 MAC only, version 2", sig, h.Get(function.HeaderVersion), req.Version)
		}
	})
	t.Run("a plan that opts into version 1 signs with both versions' MACs", func(t *testing.T) {
		g := newFixture(t)
		s, err := function.Configure(nil, map[string]any{"url": g.target.URL, "secret_env": "FN_SECRET", "protocol": 1}, "")
		if err != nil {
			t.Fatal(err)
		}
		g.s = s
		if p, err := g.run(g.change(broker.KindProvision, "op-1", false, `{}`)); err != nil || !p.Done {
			t.Fatalf("%+v %v", p, err)
		}
		h, req := g.target.Headers()[0], g.target.Requests()[0]
		if sig := h.Get(function.HeaderSignature); !strings.Contains(sig, ",v1=") || !strings.Contains(sig, ",v2=") ||
			h.Get(function.HeaderVersion) != "1" || req.Version != 1 {
			t.Errorf("signature %q, header version %q, body version %d; want v1 and v2 MACs, version 1", sig, h.Get(function.HeaderVersion), req.Version)
		}
	})
	t.Run("a target that knows only version 1 keeps working while its plan is on version 1", func(t *testing.T) {
		url, refused := versionOneTarget(t)
		for _, tc := range []struct {
			protocol int
			works    bool
		}{{1, true}, {2, false}} {
			g := newFixture(t)
			s, err := function.Configure(nil, map[string]any{"url": url, "secret_env": "FN_SECRET", "protocol": tc.protocol}, "")
			if err != nil {
				t.Fatal(err)
			}
			g.s = s
			before := refused.Load()
			p, err := g.run(g.change(broker.KindProvision, "op-1", false, `{}`))
			if works := err == nil && p.Done; works != tc.works || (refused.Load() > before) == tc.works {
				t.Errorf("protocol %d: %+v %v (%d refused), want working %v", tc.protocol, p, err, refused.Load()-before, tc.works)
			}
		}
	})
}

// TestATargetURLsQueryNeverReachesALogOrAnError: a target published with a
// function key in its query (Azure Functions' ?code=…) is named without it
// in every log line and every error the driver gives, whether the target
// answers, refuses the signature, fails or cannot be reached.
func TestATargetURLsQueryNeverReachesALogOrAnError(t *testing.T) {
	const key = "code=fn-key-secret"
	f := newFixture(t)
	f.target.URL += "/osb?" + key // the target checks signatures at its own URL, query and all
	configure := func(url string) *function.Settings {
		t.Helper()
		s, err := function.Configure(nil, map[string]any{"url": url, "secret_env": "FN_SECRET", "timeout": 1}, "")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var errs []error
	f.s = configure(f.target.URL)
	if p, err := f.run(f.change(broker.KindProvision, "op-1", false, `{}`)); err != nil || !p.Done {
		t.Fatalf("a target with a key in its query: %+v %v", p, err)
	}
	_, err := f.run(f.change(broker.KindUpdate, "op-2", false, `{"fault":"http500"}`))
	errs = append(errs, err)
	f.target.SetSecret("another-secret")
	_, err = f.run(f.change(broker.KindUpdate, "op-3", false, `{}`))
	errs = append(errs, err)
	unreachable := httptest.NewServer(http.NotFoundHandler())
	unreachable.Close()
	f.s = configure(unreachable.URL + "/osb?" + key)
	_, err = f.run(f.change(broker.KindUpdate, "op-4", false, `{}`))
	errs = append(errs, err)

	for i, err := range errs {
		if err == nil {
			t.Fatalf("case %d: no error", i)
		}
		if strings.Contains(err.Error(), key) {
			t.Errorf("the error %q holds the URL's query", err)
		}
	}
	lines, err := logtest.Lines(f.logs.String())
	if err != nil {
		t.Fatal(err)
	}
	targets := 0
	for _, l := range lines {
		if _, ok := l["target"]; ok {
			targets++
		}
	}
	if targets == 0 {
		t.Fatalf("no log line names the target: %s", f.logs)
	}
	if strings.Contains(f.logs.String(), key) {
		t.Errorf("a log line holds the URL's query: %s", f.logs)
	}
	if shown := configure(f.target.URL).Target.String(); strings.Contains(shown, key) || !strings.HasSuffix(shown, "/osb?[REDACTED]") {
		t.Errorf("the target is shown as %q, want its URL without the query", shown)
	}
}
