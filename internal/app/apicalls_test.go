package app_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
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

// callCounter counts AWS API calls by service and operation, once per
// logical call (retries are below the Initialize step).
type callCounter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *callCounter) register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("CountCalls",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			c.mu.Lock()
			c.calls[awsmiddleware.GetServiceID(ctx)+"."+awsmiddleware.GetOperationName(ctx)]++
			c.mu.Unlock()
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}

func (c *callCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = map[string]int{}
	return out
}

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

// TestAPICallsPerEndpoint counts what each OSB endpoint costs in DynamoDB
// and Step Functions calls, on the production backends (moto). The
// workflow's own calls (its steps) are not the endpoint's and are not
// counted: only calls made while the request is served.
func TestAPICallsPerEndpoint(t *testing.T) {
	ctx := context.Background()
	counter := &callCounter{calls: map[string]int{}}
	cfg := mototest.Config(t, "us-east-2")
	cfg.APIOptions = append(cfg.APIOptions, counter.register)

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
	st := steps.New(store, cat, drivers.Single(cat, demo.New(store)), logger)
	b := broker.New(cat, store, engine, st, logger)
	handler := api.New(api.Config{Broker: b, Catalog: cat, Credentials: []api.Credential{{Username: "u", Password: "p"}}, Logger: logger})

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
		{"provision (sync)", http.MethodPut, "/v2/service_instances/s1", provision(syncPlan), 201, nil},
		{"provision (async)", http.MethodPut, "/v2/service_instances/a1?accepts_incomplete=true", provision(asyncPlan), 202,
			map[string]int{"DynamoDB.TransactWriteItems": 1, "SFN.StartExecution": 1}},
		{"provision re-sent while running", http.MethodPut, "/v2/service_instances/a1?accepts_incomplete=true", provision(asyncPlan), 202,
			map[string]int{"DynamoDB.TransactWriteItems": 1}},
		{"last_operation (instance, with operation)", http.MethodGet, "/v2/service_instances/a1/last_operation?operation={op}", "", 200,
			map[string]int{"DynamoDB.GetItem": 1}},
		{"last_operation (instance, without operation)", http.MethodGet, "/v2/service_instances/a1/last_operation", "", 200,
			map[string]int{"DynamoDB.Query": 1}},
		{"fetch instance", http.MethodGet, "/v2/service_instances/s1", "", 200, map[string]int{"DynamoDB.GetItem": 1}},
		{"update (sync)", http.MethodPatch, "/v2/service_instances/s1", fmt.Sprintf(`{"service_id":%q,"parameters":{"duration_seconds":1}}`, svc), 200, nil},
		{"bind (sync)", http.MethodPut, "/v2/service_instances/s1/service_bindings/b1", bind(syncPlan), 201, nil},
		{"fetch binding", http.MethodGet, "/v2/service_instances/s1/service_bindings/b1", "", 200, map[string]int{"DynamoDB.GetItem": 1}},
		{"last_operation (binding)", http.MethodGet, "/v2/service_instances/s1/service_bindings/b1/last_operation", "", 200,
			map[string]int{"DynamoDB.Query": 1}},
		{"unbind (sync)", http.MethodDelete, "/v2/service_instances/s1/service_bindings/b1?" + del(syncPlan), "", 200, nil},
		{"deprovision (sync)", http.MethodDelete, "/v2/service_instances/s1?" + del(syncPlan), "", 200, nil},
		{"deprovision during an async provision", http.MethodDelete, "/v2/service_instances/a1?accepts_incomplete=true&" + del(asyncPlan), "", 202, nil},
		{"deprovision of nothing (410)", http.MethodDelete, "/v2/service_instances/none?" + del(syncPlan), "", 410, map[string]int{"DynamoDB.GetItem": 1}},
	}
	var report strings.Builder
	for _, s := range cases {
		path := strings.ReplaceAll(s.path, "{op}", asyncOp)
		req := httptest.NewRequest(s.method, path, strings.NewReader(s.body))
		req.SetBasicAuth("u", "p")
		req.Header.Set(api.HeaderAPIVersion, "2.17")
		rec := httptest.NewRecorder()
		counter.take()
		handler.ServeHTTP(rec, req)
		calls := counter.take()
		if rec.Code != s.want {
			t.Fatalf("%s: %d, want %d: %s", s.name, rec.Code, s.want, rec.Body)
		}
		if s.name == "provision (async)" {
			asyncOp = strings.Split(strings.Split(rec.Body.String(), `"operation":"`)[1], `"`)[0]
		}
		fmt.Fprintf(&report, "| %s | %s |\n", s.name, format(calls))
		if s.expect != nil && !maps.Equal(calls, s.expect) {
			t.Errorf("%s made %s, want %s", s.name, format(calls), format(s.expect))
		}
	}
	t.Logf("API calls per OSB endpoint (DynamoDB store, Step Functions engine, moto):\n| endpoint | calls |\n| --- | --- |\n%s", report.String())
}
