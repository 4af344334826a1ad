package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/smithy-go/middleware"

	"github.com/serverless-osb/broker/internal/api"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/drivers"
	"github.com/serverless-osb/broker/internal/drivers/demo"
	"github.com/serverless-osb/broker/internal/engine/sfn"
	"github.com/serverless-osb/broker/internal/logging"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/steps"
	"github.com/serverless-osb/broker/internal/store/dynamo"
)

func format(calls map[string]int) string {
	if len(calls) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(calls)) {
		parts = append(parts, fmt.Sprintf("%s×%d", k, calls[k]))
	}
	return strings.Join(parts, " + ")
}

// callsBroker is a broker on the production backends (moto's DynamoDB and
// Step Functions) whose AWS API calls are counted.
type callsBroker struct {
	counter *mototest.Calls
	store   *dynamo.Store
	ddb     *dynamodb.Client
	table   string
	demo    *demo.Driver
	broker  *broker.Broker
	engine  *sfn.Engine
	handler http.Handler
	catalog *catalog.Catalog
}

func newCallsBroker(t *testing.T, also ...func(*middleware.Stack) error) callsBroker {
	ctx := context.Background()
	counter := &mototest.Calls{ByService: true}
	cfg := mototest.Config(t, "us-east-2")
	cfg.APIOptions = append(cfg.APIOptions, counter.Register)
	cfg.APIOptions = append(cfg.APIOptions, also...)

	ddb := dynamodb.NewFromConfig(cfg)
	table := mototest.Name("calls")
	if err := dynamo.CreateTable(ctx, ddb, table); err != nil {
		t.Fatal(err)
	}
	store := dynamo.New(ddb, table)

	sfnClient := awssfn.NewFromConfig(cfg)
	def, err := os.ReadFile(filepath.Join(apptest.Root(), "statemachines", "operation.asl.json"))
	if err != nil {
		t.Fatal(err)
	}
	sm, err := sfnClient.CreateStateMachine(ctx, &awssfn.CreateStateMachineInput{
		Name:       aws.String(mototest.Name("operation")),
		Definition: aws.String(strings.ReplaceAll(string(def), "${WorkerFunctionArn}", "arn:aws:lambda:us-east-2:123456789012:function:worker")),
		RoleArn:    aws.String("arn:aws:iam::123456789012:role/states"),
	})
	if err != nil {
		t.Fatal(err)
	}
	engine := sfn.New(sfnClient, map[broker.Workflow]string{broker.WorkflowOperation: *sm.StateMachineArn})

	cat, err := catalog.Load(filepath.Join(apptest.Root(), "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	logger := logging.New(os.Stderr, slog.LevelWarn)
	d := demo.New()
	b := broker.New(cat, store, engine, drivers.Single(cat, d), logger)
	handler := api.New(api.Config{Broker: b, Catalog: cat, Credentials: []api.Credential{{Username: "u", Password: "p"}}, Logger: logger})
	return callsBroker{counter: counter, store: store, ddb: ddb, table: table, demo: d, broker: b, engine: engine, handler: handler, catalog: cat}
}

// input is the input the engine holds for the execution of an operation.
func (c callsBroker) input(t *testing.T, operationID string) json.RawMessage {
	t.Helper()
	x, err := c.engine.Describe(context.Background(), operationID)
	if err != nil {
		t.Fatalf("describe %s: %v", operationID, err)
	}
	return x.Input
}

// task runs one Task of an operation's execution through the worker's
// handler, with the payload statemachines/operation.asl.json gives it:
// the step, the operation (the execution's name), its instance, and the
// execution's input (nil: a payload of a workflow that did not pass it).
func (c callsBroker) task(step, instanceID, operationID string, input json.RawMessage) (steps.Progress, error) {
	payload := map[string]any{"step": step, "operation_id": operationID, "instance_id": instanceID}
	if input != nil {
		payload["execution_input"] = input
	}
	in, err := json.Marshal(payload)
	if err != nil {
		return steps.Progress{}, err
	}
	out, err := steps.New(c.broker).Handle(context.Background(), in)
	var p steps.Progress
	if err == nil && step != steps.StepFinish && step != steps.StepRecordFailure {
		err = json.Unmarshal(out, &p)
	}
	return p, err
}

// do serves one request and returns its status, body and the calls it made.
func (c callsBroker) do(method, path, body string) (int, string, map[string]int) {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.SetBasicAuth("u", "p")
	req.Header.Set(api.HeaderAPIVersion, "2.17")
	rec := httptest.NewRecorder()
	c.counter.Take()
	c.handler.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String(), c.counter.Take()
}

// TestAPICallsPerEndpoint counts what each OSB endpoint costs in DynamoDB
// and Step Functions calls, on the production backends (moto). The
// workflow's own calls (its steps) are not the endpoint's and are not
// counted: only calls made while the request is served.
func TestAPICallsPerEndpoint(t *testing.T) {
	cb := newCallsBroker(t)
	cat := cb.catalog
	svc, syncPlan, asyncPlan := "", "", ""
	for _, s := range cat.Services() {
		svc = s.ID
		for _, p := range s.Plans {
			switch p.Name {
			case "fake-plan":
				syncPlan = p.ID
			case "fake-async-plan":
				asyncPlan = p.ID
			}
		}
	}
	provision := func(plan string) string {
		return fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"o","space_guid":"s","parameters":{"duration_seconds":3600}}`, svc, plan)
	}
	bind := func(plan string) string { return fmt.Sprintf(`{"service_id":%q,"plan_id":%q}`, svc, plan) }
	del := func(plan string) string { return "service_id=" + svc + "&plan_id=" + plan }

	var asyncOp string
	cases := []struct {
		name, method, path, body string
		want                     int
		// expect, when set, is the exact set of calls the endpoint must make.
		expect map[string]int
	}{
		{"catalog", http.MethodGet, "/v2/catalog", "", 200, map[string]int{}},
		// A synchronous change of a driver that works in memory (the demo's)
		// is settled before any hold: one write for a provision (a new
		// instance needs no read), a read and a write for a bind.
		{"provision (sync)", http.MethodPut, "/v2/service_instances/s1", provision(syncPlan), 201,
			map[string]int{"DynamoDB.TransactWriteItems": 1}},
		{"provision (async)", http.MethodPut, "/v2/service_instances/a1?accepts_incomplete=true", provision(asyncPlan), 202,
			map[string]int{"DynamoDB.TransactWriteItems": 1, "SFN.StartExecution": 1}},
		{"provision re-sent while running", http.MethodPut, "/v2/service_instances/a1?accepts_incomplete=true", provision(asyncPlan), 202,
			map[string]int{"DynamoDB.TransactWriteItems": 1}},
		{"last_operation (instance, with operation)", http.MethodGet, "/v2/service_instances/a1/last_operation?operation={op}", "", 200,
			map[string]int{"DynamoDB.GetItem": 1}},
		// Without an operation: the one the instance (or binding) names.
		{"last_operation (instance, without operation)", http.MethodGet, "/v2/service_instances/a1/last_operation", "", 200,
			map[string]int{"DynamoDB.GetItem": 2}},
		{"fetch instance", http.MethodGet, "/v2/service_instances/s1", "", 200, map[string]int{"DynamoDB.GetItem": 1}},
		// A change reads its instance (and binding) by key and the
		// instance's records from the key range above its bindings'
		// records: two calls made at once (Load), whose items do not grow
		// with the instance's bindings and operations.
		{"update (sync)", http.MethodPatch, "/v2/service_instances/s1", fmt.Sprintf(`{"service_id":%q,"parameters":{"duration_seconds":1}}`, svc), 200,
			map[string]int{"DynamoDB.GetItem": 1, "DynamoDB.Query": 1, "DynamoDB.TransactWriteItems": 2}},
		{"bind (sync)", http.MethodPut, "/v2/service_instances/s1/service_bindings/b1", bind(syncPlan), 201,
			map[string]int{"DynamoDB.BatchGetItem": 1, "DynamoDB.Query": 1, "DynamoDB.TransactWriteItems": 1}},
		{"fetch binding", http.MethodGet, "/v2/service_instances/s1/service_bindings/b1", "", 200, map[string]int{"DynamoDB.GetItem": 1}},
		{"last_operation (binding)", http.MethodGet, "/v2/service_instances/s1/service_bindings/b1/last_operation", "", 200,
			map[string]int{"DynamoDB.GetItem": 2}},
		{"unbind (sync)", http.MethodDelete, "/v2/service_instances/s1/service_bindings/b1?" + del(syncPlan), "", 200,
			map[string]int{"DynamoDB.BatchGetItem": 1, "DynamoDB.Query": 1, "DynamoDB.TransactWriteItems": 2}},
		// A deprovision reads the whole instance: its bindings' keys and
		// every record, two Queries.
		{"deprovision (sync)", http.MethodDelete, "/v2/service_instances/s1?" + del(syncPlan), "", 200,
			map[string]int{"DynamoDB.GetItem": 1, "DynamoDB.Query": 2, "DynamoDB.TransactWriteItems": 2}},
		{"deprovision during an async provision", http.MethodDelete, "/v2/service_instances/a1?accepts_incomplete=true&" + del(asyncPlan), "", 202, nil},
		{"deprovision of nothing (410)", http.MethodDelete, "/v2/service_instances/none?" + del(syncPlan), "", 410,
			map[string]int{"DynamoDB.GetItem": 1, "DynamoDB.Query": 2}},
	}
	var report strings.Builder
	for _, s := range cases {
		path := strings.ReplaceAll(s.path, "{op}", asyncOp)
		code, body, calls := cb.do(s.method, path, s.body)
		if code != s.want {
			t.Fatalf("%s: %d, want %d: %s", s.name, code, s.want, body)
		}
		if s.name == "provision (async)" {
			asyncOp = operationOf(body)
		}
		fmt.Fprintf(&report, "| %s | %s |\n", s.name, format(calls))
		if s.expect != nil && !maps.Equal(calls, s.expect) {
			t.Errorf("%s made %s, want %s", s.name, format(calls), format(s.expect))
		}
	}
	t.Logf("API calls per OSB endpoint (DynamoDB store, Step Functions engine, moto):\n| endpoint | calls |\n| --- | --- |\n%s", report.String())
}

// operationOf is the operation of a 202's body.
func operationOf(body string) string {
	var v struct {
		Operation string `json:"operation"`
	}
	_ = json.Unmarshal([]byte(body), &v)
	return v.Operation
}

// dynamoCalls keeps the DynamoDB calls of calls.
func dynamoCalls(calls map[string]int) map[string]int {
	out := map[string]int{}
	for k, n := range calls {
		if strings.HasPrefix(k, "DynamoDB.") {
			out[k] = n
		}
	}
	return out
}

// TestAPICallsPerTask counts the DynamoDB calls of each Task of the
// operation workflow, run through the worker's handler with the payload the
// workflow gives it: one read of what the step needs (Load: the operation,
// its instance and, for a binding operation, the binding that the
// execution's input names, by key, and the instance's records from the
// key range above its bindings' records, two calls made at once), and at most one conditional write or
// transaction. The Finish Task reads the operation alone, which the Check
// before it has normally finished. A Task of an execution started before
// its input named the binding reads the operation first: one BatchGetItem
// more.
func TestAPICallsPerTask(t *testing.T) {
	cb := newCallsBroker(t)
	var svc, plan string
	for _, s := range cb.catalog.Services() {
		for _, p := range s.Plans {
			if p.Name == "fake-async-plan" {
				svc, plan = s.ID, p.ID
			}
		}
	}
	clock := time.Now().UTC()
	cb.demo.Now = func() time.Time { return clock }
	accepted := func(method, path, body string) string {
		t.Helper()
		code, got, _ := cb.do(method, path, body)
		if code != http.StatusAccepted {
			t.Fatalf("%s %s: %d %s", method, path, code, got)
		}
		return operationOf(got)
	}
	provision := func(id, params string) string {
		return accepted(http.MethodPut, "/v2/service_instances/"+id+"?accepts_incomplete=true",
			fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"o","space_guid":"s","parameters":%s}`, svc, plan, params))
	}
	bind := func(id string) string {
		return accepted(http.MethodPut, "/v2/service_instances/t1/service_bindings/"+id+"?accepts_incomplete=true",
			fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"parameters":{"duration_seconds":60}}`, svc, plan))
	}
	read, readWrite, readTransact := map[string]int{"DynamoDB.BatchGetItem": 1, "DynamoDB.Query": 1},
		map[string]int{"DynamoDB.BatchGetItem": 1, "DynamoDB.Query": 1, "DynamoDB.PutItem": 1},
		map[string]int{"DynamoDB.BatchGetItem": 1, "DynamoDB.Query": 1, "DynamoDB.TransactWriteItems": 1}
	// A read that knows only the operation: its binding after it.
	readAfter := map[string]int{"DynamoDB.BatchGetItem": 2, "DynamoDB.Query": 1, "DynamoDB.TransactWriteItems": 1}
	// A deprovision's: the instance and its operation by key, its
	// bindings' keys and every record.
	readWhole := map[string]int{"DynamoDB.BatchGetItem": 1, "DynamoDB.Query": 2, "DynamoDB.TransactWriteItems": 1}

	op := provision("t1", `{"duration_seconds":60}`)
	failing := provision("t2", `{"duration_seconds":1,"fail":true}`)
	var bindOp, oldBindOp, deprovisionOp string
	type step struct {
		name string
		run  func() error
		want map[string]int
	}
	// run is a Task that must answer done (or not).
	run := func(name, stepName, instanceID string, opID *string, done bool, oldInput func() json.RawMessage, want map[string]int) step {
		return step{name, func() error {
			var input json.RawMessage
			if oldInput != nil {
				input = oldInput()
			} else {
				input = cb.input(t, *opID)
			}
			cb.counter.Take() // the engine's describe is the test's, not the Task's
			p, err := cb.task(stepName, instanceID, *opID, input)
			if err == nil && stepName != steps.StepFinish && p.Done != done {
				err = fmt.Errorf("done %v, want %v", p.Done, done)
			}
			return err
		}, want}
	}
	later := func() error { clock = clock.Add(time.Hour); return nil }
	start := func(id *string, f func() string) func() error { return func() error { *id = f(); return nil } }
	// An input as executions were started with before it named the
	// binding; and no input at all, as a workflow before this one passed.
	oldInput := func() json.RawMessage { return json.RawMessage(`{"instance_id":"t1"}`) }
	noInput := func() json.RawMessage { return nil }
	tasks := []step{
		run("begin (progress and the driver's record)", steps.StepBegin, "t1", &op, false, nil, readTransact),
		run("check, not done (progress)", steps.StepCheck, "t1", &op, false, nil, readWrite),
		{"", later, nil},
		run("check, done (the outcome)", steps.StepCheck, "t1", &op, true, nil, readTransact),
		run("finish of a finished operation", steps.StepFinish, "t1", &op, true, nil, map[string]int{"DynamoDB.GetItem": 1}),
		run("begin of a change that will fail", steps.StepBegin, "t2", &failing, false, nil, readTransact),
		{"", later, nil},
		{"check that fails", func() error {
			input := cb.input(t, failing)
			cb.counter.Take()
			if _, err := cb.task(steps.StepCheck, "t2", failing, input); !errors.As(err, new(*steps.PermanentError)) {
				return fmt.Errorf("got %v, want a permanent failure", err)
			}
			return nil
		}, read},
		{"record_failure (the outcome and the detached record)", func() error {
			input := cb.input(t, failing)
			cb.counter.Take()
			_, err := cb.task(steps.StepRecordFailure, "t2", failing, input)
			return err
		}, readTransact},
		// A binding operation's Tasks read the binding its input names
		// with the instance and the operation.
		{"", start(&bindOp, func() string { return bind("b1") }), nil},
		run("bind's begin", steps.StepBegin, "t1", &bindOp, false, nil, readTransact),
		{"", later, nil},
		run("bind's check, done", steps.StepCheck, "t1", &bindOp, true, nil, readTransact),
		{"", start(&oldBindOp, func() string { return bind("b2") }), nil},
		run("bind's begin, from an input without the binding", steps.StepBegin, "t1", &oldBindOp, false, oldInput, readAfter),
		{"", later, nil},
		run("bind's check, from a workflow that passed no input", steps.StepCheck, "t1", &oldBindOp, true, noInput, readAfter),
		{"", start(&deprovisionOp, func() string {
			return accepted(http.MethodDelete, "/v2/service_instances/t1?accepts_incomplete=true&service_id="+svc+"&plan_id="+plan, "")
		}), nil},
		run("deprovision's begin (the whole instance)", steps.StepBegin, "t1", &deprovisionOp, false, nil, readWhole),
	}
	var report strings.Builder
	for _, s := range tasks {
		if s.name == "" {
			if err := s.run(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		cb.counter.Take()
		if err := s.run(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		calls := dynamoCalls(cb.counter.Take())
		fmt.Fprintf(&report, "| %s | %s |\n", s.name, format(calls))
		if !maps.Equal(calls, s.want) {
			t.Errorf("%s made %s, want %s", s.name, format(calls), format(s.want))
		}
	}
	if lo, body, _ := cb.do(http.MethodGet, "/v2/service_instances/t1/service_bindings/b2/last_operation?operation="+oldBindOp, ""); lo != 200 || !strings.Contains(body, `"succeeded"`) {
		t.Errorf("last_operation of b2: %d %s", lo, body)
	}
	if lo, body, _ := cb.do(http.MethodGet, "/v2/service_instances/t2/last_operation?operation="+failing, ""); lo != 200 || !strings.Contains(body, `"failed"`) {
		t.Errorf("last_operation of t2: %d %s", lo, body)
	}
	t.Logf("DynamoDB calls per worker Task (moto):\n| task | calls |\n| --- | --- |\n%s", report.String())
}
