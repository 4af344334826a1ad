package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/serverless-osb/broker/internal/api"
	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/logging"
	"github.com/serverless-osb/broker/internal/steps"
)

// The sample credentials of events/ (see events/README.md).
const sampleUsername, samplePassword = "broker", "sample-password"

// The ids the sample events use (see events/README.md).
const (
	sampleService        = "4618c717-e0da-4a48-8d9c-b1f789bf2f5e"
	sampleSyncPlan       = "e3daf424-4de7-4619-b0ff-5de8cd16cc5e"
	sampleAsyncPlan      = "c52e2627-5352-4580-9094-a22ec37edd8e"
	sampleInstance       = "6b1f3c2e-8d4a-4f7b-9e1c-2a5d7f9b3c10"
	sampleAsyncInstance  = "0d8e4a6c-3b2f-4c1e-8a7d-5f9b1e2c4d60"
	sampleBinding        = "9c2e5f1a-7b3d-4e8f-a6c1-3d5b7e9f1a20"
	sampleUnknownPlan    = "0f9e8d7c-6b5a-4c3d-9e2f-1a0b9c8d7e60"
	sampleFailureMessage = "The demo database could not be created: the disk quota is exhausted."
)

func eventsDir() string { return filepath.Join(apptest.Root(), "events") }

// eventFiles lists the JSON files of events/.
func eventFiles(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(eventsDir(), "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no events/*.json (%v)", err)
	}
	files := make([]string, len(paths))
	for i, p := range paths {
		files[i] = filepath.Base(p)
	}
	return files
}

func isWorkerEvent(file string) bool { return strings.HasPrefix(file, "worker-") }

// reply is what a Lambda handler answered to an event: for the api
// function the HTTP response, for the worker its output or error.
type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
	err    error
}

// eventFlow runs the sample events through the real Lambda handlers,
// built on the local backends, and keeps what later events need.
type eventFlow struct {
	api, worker lambda.Handler
	logs        *apptest.SyncBuffer
	invocations int
	// operation is the asynchronous provision's operation, which the
	// worker events are sent for.
	operation string
	// credentials are the binding's, as bind returned them.
	credentials map[string]any
	// password, when set, replaces the sample password in api events.
	password string
}

func newEventFlow(t *testing.T) *eventFlow {
	t.Helper()
	root := apptest.Root()
	logs := &apptest.SyncBuffer{}
	logger := logging.New(logs, slog.LevelDebug)
	l, err := app.OpenLocal(context.Background(), app.LocalConfig{
		DataDir:       t.TempDir(),
		CatalogPath:   filepath.Join(root, "catalog.yaml"),
		StateMachines: filepath.Join(root, "statemachines"),
		Credentials:   []api.Credential{{Username: sampleUsername, Password: samplePassword}},
	}, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close the broker: %v", err)
		}
	})
	return &eventFlow{
		api:    app.LambdaHTTP(l.Handler),
		worker: lambda.NewHandler(l.Steps.Lambda),
		logs:   logs,
	}
}

// send feeds one events/ file to its function's handler.
func (f *eventFlow) send(t *testing.T, file string) reply {
	t.Helper()
	payload, err := os.ReadFile(filepath.Join(eventsDir(), file))
	if err != nil {
		t.Fatal(err)
	}
	f.invocations++
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{
		AwsRequestID: fmt.Sprintf("8f3c2a1e-0000-4000-8000-%012d", f.invocations)})
	if isWorkerEvent(file) {
		return f.sendWorker(t, ctx, payload)
	}
	if f.password != "" {
		payload = withPassword(t, payload, sampleUsername, f.password)
	}
	out, err := f.api.Invoke(ctx, payload)
	if err != nil {
		t.Fatalf("the api handler failed: %v", err)
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("the api handler's answer is not an HTTP API response: %v: %s", err, out)
	}
	if resp.IsBase64Encoded {
		t.Fatalf("a JSON answer came back base64-encoded: %s", out)
	}
	r := reply{status: resp.StatusCode, header: http.Header{}, raw: resp.Body}
	for k, v := range resp.Headers {
		r.header.Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		r.header[http.CanonicalHeaderKey(k)] = vs
	}
	if resp.Body != "" {
		if err := json.Unmarshal([]byte(resp.Body), &r.body); err != nil {
			t.Fatalf("the body is not a JSON object: %v: %s", err, resp.Body)
		}
	}
	return r
}

// withPassword returns an api event that authenticates as user/password.
func withPassword(t *testing.T, payload []byte, user, password string) []byte {
	t.Helper()
	var e events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(payload, &e); err != nil {
		t.Fatal(err)
	}
	req := http.Request{Header: http.Header{}}
	req.SetBasicAuth(user, password)
	e.Headers["authorization"] = req.Header.Get("Authorization")
	out, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sendWorker sends a worker event for the operation the flow created: the
// samples name an operation id that only a real deployment would have.
func (f *eventFlow) sendWorker(t *testing.T, ctx context.Context, payload []byte) reply {
	t.Helper()
	var task map[string]any
	if err := json.Unmarshal(payload, &task); err != nil {
		t.Fatal(err)
	}
	if task["instance_id"] != sampleAsyncInstance {
		t.Fatalf("a worker event is for instance %v, not the asynchronous sample instance %s", task["instance_id"], sampleAsyncInstance)
	}
	if f.operation == "" {
		t.Fatal("no asynchronous operation to send a worker event for")
	}
	task["operation_id"] = f.operation
	payload, _ = json.Marshal(task)
	out, err := f.worker.Invoke(ctx, payload)
	r := reply{raw: string(out), err: err}
	if err == nil {
		if err := json.Unmarshal(out, &r.body); err != nil {
			t.Fatalf("the worker's output is not a JSON object: %v: %s", err, out)
		}
	}
	return r
}

// lambdaErrorType is the errorType aws-lambda-go v1.47.0 reports for a
// function error (lambda/errors.go, lambdaErrorResponse): the name of its
// type, of the element type for a pointer. Step Functions' Retry and Catch
// match on it; the bundle test checks it on the wire.
func lambdaErrorType(err error) string {
	t := reflect.TypeOf(err)
	if t.Kind() == reflect.Pointer {
		return t.Elem().Name()
	}
	return t.Name()
}

// eventStep is one event of the flow and what must come back.
type eventStep struct {
	name string
	file string
	// status is what an api event must answer.
	status int
	// errorType is what a worker event must fail with ("" for success).
	errorType string
	check     func(t *testing.T, f *eventFlow, r reply)
}

func TestSampleEventsThroughTheLambdaHandlers(t *testing.T) {
	f := newEventFlow(t)
	flow := []eventStep{
		{name: "the catalog lists the sample service and its plans", file: "catalog.json", status: http.StatusOK,
			check: func(t *testing.T, f *eventFlow, r reply) {
				services, _ := r.body["services"].([]any)
				if len(services) != 1 {
					t.Fatalf("services = %v, want the one sample service", r.body["services"])
				}
				s, _ := services[0].(map[string]any)
				var plans []string
				for _, p := range s["plans"].([]any) {
					plans = append(plans, p.(map[string]any)["id"].(string))
				}
				if s["id"] != sampleService || !slices.Contains(plans, sampleSyncPlan) || !slices.Contains(plans, sampleAsyncPlan) {
					t.Errorf("service %v with plans %v, want %s with %s and %s", s["id"], plans, sampleService, sampleSyncPlan, sampleAsyncPlan)
				}
				if got := r.header.Get(api.HeaderRequestIdentity); got == "" {
					t.Error("the request identity is not echoed")
				}
			}},
		{name: "wrong credentials are refused", file: "error-bad-auth.json", status: http.StatusUnauthorized,
			check: wantError("", "Authentication failed")},
		{name: "a request without X-Broker-API-Version is refused", file: "error-missing-version.json", status: http.StatusPreconditionFailed,
			check: wantError("", "X-Broker-API-Version header is missing")},
		{name: "a truncated body is a bad request", file: "error-malformed-body.json", status: http.StatusBadRequest,
			check: wantError("", "")},
		{name: "a plan that is not in the catalog is a bad request", file: "error-unknown-plan.json", status: http.StatusBadRequest,
			check: wantError("", sampleUnknownPlan)},
		{name: "a synchronous provision creates the instance", file: "provision-sync.json", status: http.StatusCreated,
			check: func(t *testing.T, f *eventFlow, r reply) {
				if url, _ := r.body["dashboard_url"].(string); !strings.Contains(url, sampleInstance) {
					t.Errorf("dashboard_url = %q, want one for %s", url, sampleInstance)
				}
			}},
		{name: "the instance can be fetched", file: "fetch-instance.json", status: http.StatusOK,
			check: func(t *testing.T, f *eventFlow, r reply) {
				if r.body["service_id"] != sampleService || r.body["plan_id"] != sampleSyncPlan {
					t.Errorf("fetched %s, want service %s plan %s", r.raw, sampleService, sampleSyncPlan)
				}
			}},
		{name: "a binding id with a control character (API Gateway delivers rawPath decoded) is a bad request",
			file: "error-invalid-binding-id.json", status: http.StatusBadRequest,
			check: wantError("", "binding_id in the URL is not valid: it contains the control character U+000A")},
		{name: "an update on the synchronous plan completes in the request", file: "update.json", status: http.StatusOK,
			check: func(t *testing.T, f *eventFlow, r reply) {
				if _, async := r.body["operation"]; async {
					t.Errorf("the update answered %s, want no operation", r.raw)
				}
			}},
		{name: "a bind returns credentials", file: "bind.json", status: http.StatusCreated,
			check: func(t *testing.T, f *eventFlow, r reply) {
				f.credentials, _ = r.body["credentials"].(map[string]any)
				if f.credentials["username"] != "u-"+sampleBinding || f.credentials["password"] == "" {
					t.Errorf("credentials = %v, want the demo's for binding %s", f.credentials, sampleBinding)
				}
			}},
		{name: "the binding can be fetched with the same credentials", file: "fetch-binding.json", status: http.StatusOK,
			check: func(t *testing.T, f *eventFlow, r reply) {
				if !reflect.DeepEqual(r.body["credentials"], f.credentials) {
					t.Errorf("credentials = %v, want %v as bind returned them", r.body["credentials"], f.credentials)
				}
			}},
		{name: "the binding's last operation succeeded", file: "binding-last-operation.json", status: http.StatusOK,
			check: wantState("succeeded", "The service binding was created.")},
		{name: "an unbind deletes the binding", file: "unbind.json", status: http.StatusOK, check: wantEmpty},
		{name: "a deprovision deletes the instance", file: "deprovision.json", status: http.StatusOK, check: wantEmpty},
		{name: "the deprovisioned instance is not found", file: "fetch-instance.json", status: http.StatusNotFound,
			check: wantError("", "")},
		{name: "an asynchronous provision answers with its operation", file: "provision-async.json", status: http.StatusAccepted,
			check: func(t *testing.T, f *eventFlow, r reply) {
				f.operation, _ = r.body["operation"].(string)
				if f.operation == "" {
					t.Errorf("no operation in %s", r.raw)
				}
			}},
		{name: "its last operation is in progress with a Retry-After", file: "instance-last-operation.json", status: http.StatusOK,
			check: func(t *testing.T, f *eventFlow, r reply) {
				wantState("in progress", "")(t, f, r)
				if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
					t.Errorf("Retry-After = %q, want a number of seconds", r.header.Get("Retry-After"))
				}
			}},
		{name: "the worker begins the change, which is not done yet", file: "worker-begin.json", check: wantProgress},
		{name: "the worker checks the change, which is still not done", file: "worker-check.json", check: wantProgress},
		{name: "finishing an unfinished change fails as TransientError, which the workflow retries", file: "worker-finish.json",
			errorType: "TransientError", check: func(t *testing.T, f *eventFlow, r reply) {
				if !strings.Contains(r.err.Error(), "not done yet") {
					t.Errorf("error = %q, want it to say the change is not done yet", r.err)
				}
			}},
		{name: "the worker records the failure the workflow caught", file: "worker-record-failure.json", check: wantEmpty},
		{name: "the last operation has failed with the caught error's message", file: "instance-last-operation.json", status: http.StatusOK,
			check: wantState("failed", sampleFailureMessage)},
	}

	exercised := map[string]bool{}
	for _, step := range flow {
		exercised[step.file] = true
	}
	for _, step := range flow {
		ok := t.Run(step.name, func(t *testing.T) {
			r := f.send(t, step.file)
			switch {
			case isWorkerEvent(step.file) && step.errorType == "" && r.err != nil:
				t.Fatalf("the worker failed: %v (errorType %s)", r.err, lambdaErrorType(r.err))
			case isWorkerEvent(step.file) && step.errorType != "":
				if r.err == nil {
					t.Fatalf("the worker answered %s, want a %s", r.raw, step.errorType)
				}
				if got := lambdaErrorType(r.err); got != step.errorType {
					t.Fatalf("errorType = %s (%v), want %s", got, r.err, step.errorType)
				}
			case !isWorkerEvent(step.file) && r.status != step.status:
				t.Fatalf("status = %d, want %d: %s", r.status, step.status, r.raw)
			}
			step.check(t, f, r)
		})
		if !ok {
			break // later events depend on this one
		}
	}

	t.Run("every sample event is part of the flow", func(t *testing.T) {
		for _, file := range eventFiles(t) {
			if !exercised[file] {
				t.Errorf("events/%s is not exercised by this test: add it to the flow", file)
			}
		}
	})
	t.Run("no log line holds a password", func(t *testing.T) {
		logs := f.logs.String()
		secrets := []string{samplePassword}
		if p, _ := f.credentials["password"].(string); p != "" {
			secrets = append(secrets, p)
		}
		for _, s := range secrets {
			if strings.Contains(logs, s) {
				t.Errorf("a log line holds the password %q", s)
			}
		}
		if !strings.Contains(logs, `"aws_request_id"`) {
			t.Error("the log lines do not carry the Lambda request id")
		}
	})
}

func wantError(code, description string) func(*testing.T, *eventFlow, reply) {
	return func(t *testing.T, _ *eventFlow, r reply) {
		t.Helper()
		d, _ := r.body["description"].(string)
		got, present := r.body["error"]
		if code == "" && present || code != "" && got != code || d == "" || !strings.Contains(d, description) {
			t.Errorf("body = %s, want error %q (none if empty) with a description containing %q", r.raw, code, description)
		}
	}
}

func wantState(state, description string) func(*testing.T, *eventFlow, reply) {
	return func(t *testing.T, _ *eventFlow, r reply) {
		t.Helper()
		if r.body["state"] != state || (description != "" && r.body["description"] != description) {
			t.Errorf("body = %s, want state %q and description %q", r.raw, state, description)
		}
	}
}

func wantEmpty(t *testing.T, _ *eventFlow, r reply) {
	t.Helper()
	if len(r.body) != 0 {
		t.Errorf("body = %s, want {}", r.raw)
	}
}

// wantProgress wants a change that is not done, to be checked again within
// the 600 s the sample asks for.
func wantProgress(t *testing.T, _ *eventFlow, r reply) {
	t.Helper()
	var p steps.Progress
	if err := json.Unmarshal([]byte(r.raw), &p); err != nil {
		t.Fatal(err)
	}
	if p.Done || p.RetryAfter < 1 || p.RetryAfter > 600 {
		t.Errorf("output = %s, want not done, to check again within 600 s", r.raw)
	}
}

// TestSampleEventsAreShapedAsAWSSendsThem holds every sample to what API
// Gateway (HTTP API, payload 2.0) and Step Functions really send, and to
// the catalog's real ids, so that they stay usable with sam local invoke.
func TestSampleEventsAreShapedAsAWSSendsThem(t *testing.T) {
	cat, err := catalog.Load(filepath.Join(apptest.Root(), "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(eventsDir(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range eventFiles(t) {
		t.Run(file+" is described in events/README.md", func(t *testing.T) {
			if !bytes.Contains(readme, []byte(file)) {
				t.Errorf("events/README.md does not mention %s", file)
			}
		})
		data, err := os.ReadFile(filepath.Join(eventsDir(), file))
		if err != nil {
			t.Fatal(err)
		}
		if isWorkerEvent(file) {
			t.Run(file+" is a task payload of the operation workflow", func(t *testing.T) {
				var p steps.Payload
				strictDecode(t, data, &p)
				step := strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(file, "worker-"), ".json"), "-", "_")
				if p.Step != step || p.OperationID == "" || p.InstanceID == "" {
					t.Errorf("payload %+v, want step %q with an operation_id and an instance_id", p, step)
				}
			})
			continue
		}
		t.Run(file+" is an HTTP API request as API Gateway sends it", func(t *testing.T) {
			var e events.APIGatewayV2HTTPRequest
			strictDecode(t, data, &e)
			checkHTTPAPIEvent(t, e)
			if file != "error-unknown-plan.json" {
				checkCatalogIDs(t, cat, e)
			}
		})
	}
}

func strictDecode(t *testing.T, data []byte, v any) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		t.Fatalf("not what AWS sends: %v", err)
	}
}

func checkHTTPAPIEvent(t *testing.T, e events.APIGatewayV2HTTPRequest) {
	t.Helper()
	const route = "ANY /v2/{proxy+}"
	if e.Version != "2.0" || e.RouteKey != route || e.RequestContext.RouteKey != route {
		t.Errorf("version %q, route keys %q and %q; want 2.0 and %s", e.Version, e.RouteKey, e.RequestContext.RouteKey, route)
	}
	if e.RawPath != e.RequestContext.HTTP.Path || e.PathParameters["proxy"] != strings.TrimPrefix(e.RawPath, "/v2/") {
		t.Errorf("rawPath %q, requestContext.http.path %q, proxy %q disagree", e.RawPath, e.RequestContext.HTTP.Path, e.PathParameters["proxy"])
	}
	if e.IsBase64Encoded || e.RequestContext.HTTP.Method == "" || e.RequestContext.DomainName != e.Headers["host"] ||
		e.RequestContext.Stage != "$default" || e.RequestContext.RequestID == "" {
		t.Errorf("requestContext %+v or isBase64Encoded %v is not as API Gateway sends it", e.RequestContext, e.IsBase64Encoded)
	}
	for k := range e.Headers {
		if k != strings.ToLower(k) {
			t.Errorf("header %q: API Gateway sends header names in lower case", k)
		}
	}
	query, err := url.ParseQuery(e.RawQueryString)
	if err != nil {
		t.Errorf("rawQueryString %q: %v", e.RawQueryString, err)
	}
	if len(query) != len(e.QueryStringParameters) {
		t.Errorf("rawQueryString %q and queryStringParameters %v disagree", e.RawQueryString, e.QueryStringParameters)
	}
	for k, v := range e.QueryStringParameters {
		if query.Get(k) != v {
			t.Errorf("queryStringParameters[%s] = %q, rawQueryString has %q", k, v, query.Get(k))
		}
	}
	if hasBody := e.Body != ""; hasBody != (e.Headers["content-type"] == "application/json") ||
		hasBody != (e.Headers["content-length"] == strconv.Itoa(len(e.Body))) {
		t.Errorf("body of %d bytes with content-type %q and content-length %q", len(e.Body), e.Headers["content-type"], e.Headers["content-length"])
	}
}

// checkCatalogIDs wants every service_id and plan_id of the event, in the
// query or the body, to be the catalog's.
func checkCatalogIDs(t *testing.T, cat *catalog.Catalog, e events.APIGatewayV2HTTPRequest) {
	t.Helper()
	ids := map[string]string{"service_id": e.QueryStringParameters["service_id"], "plan_id": e.QueryStringParameters["plan_id"]}
	var body map[string]any
	if json.Unmarshal([]byte(e.Body), &body) == nil {
		for k := range ids {
			if v, ok := body[k].(string); ok {
				ids[k] = v
			}
		}
	}
	if ids["service_id"] == "" && ids["plan_id"] == "" {
		return
	}
	if _, _, err := cat.Lookup(ids["service_id"], ids["plan_id"]); err != nil {
		t.Errorf("service_id %q, plan_id %q: %v", ids["service_id"], ids["plan_id"], err)
	}
}
