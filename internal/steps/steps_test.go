package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"go.etcd.io/bbolt"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/logging"
	"github.com/serverless-osb/broker/internal/store/bolt"
)

// onEmptyStore is a broker on a real store that holds nothing, so that
// every step finds nothing to do and answers what the workflow reads then.
func onEmptyStore(t *testing.T, logs *bytes.Buffer) *broker.Broker {
	t.Helper()
	cat, err := catalog.Load(filepath.Join("..", "..", "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "broker.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := bolt.New(db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return broker.New(cat, store, nil, nil, logging.New(logs, slog.LevelInfo))
}

// TestEveryStepAnswersWhatItsWorkflowReads runs every step of the table
// through the worker's handler: its output is the JSON the state machines'
// Choice and Wait states read. A step added to the table needs a case here.
func TestEveryStepAnswersWhatItsWorkflowReads(t *testing.T) {
	op := `"operation_id":"op-1","instance_id":"i-1"`
	emptyReport := `{"in_progress":0,"restarted":0,"failed":0,"timed_out":0,"detached":0,"cleanups_started":0,"cleanups_failed":0,"expired":0}`
	detached := `"detached_id":"d-1"`
	campaign := `"campaign_id":"upg-1"`
	noItems := `{"items":0,"pending":0,"running":0,"busy":0,"upgraded":0,"failed":0,"skipped":0,"not_attempted":0,"would_change":0,"would_refuse":0,"blocked":0}`
	tests := []struct {
		step, payload, want string
	}{
		{StepBegin, op, `{"done":true,"retry_after":0}`},
		{StepCheck, op, `{"done":true,"retry_after":0}`},
		{StepFinish, op, `{}`},
		{StepRecordFailure, op + `,"error":"PermanentError","cause":"The quota is exhausted."`, `{}`},
		{StepCleanupDelete, detached, `{"done":true,"retry_after":0}`},
		{StepCleanupDeleted, detached, `{}`},
		{StepCleanupGaveUp, detached + `,"error":"States.Timeout","cause":""`, `{}`},
		{StepReap, ``, emptyReport},
		// A fleet upgrade of a catalog whose plans have no instance: the
		// steps in their workflow's order, on the campaign the first makes.
		{StepUpgradePlan, campaign + `,"options":{"all":true,"max_in_flight":2,"max_failures":1}`,
			`{"campaign_id":"upg-1","part":1,"dry_run":false,"has_canaries":false,"canary_lanes":[],"lanes":[],"lane_steps":0}`},
		{StepUpgradeClaim, campaign + `,"phase":"rest","lane_index":0,"budget":10`,
			`{"action":"none","instance_id":"","retry_after":1,"done":false,"yield":false,"steps":1}`},
		{StepUpgradeItemFailed, campaign + `,"instance_id":"i-1","error":"States.Timeout","cause":""`, `{}`},
		{StepUpgradeContinue, campaign + `,"part":1,"phase":"rest"`, `{"continued":false}`},
		{StepUpgradeTally, campaign, `{"stop":false,"tally":` + noItems + `}`},
		{StepUpgradeFinish, campaign, `{"campaign_id":"upg-1","state":"finished","tally":` + noItems + `,"ended":true}`},
	}
	var logs bytes.Buffer
	b := onEmptyStore(t, &logs)
	b.Campaigns = b.Store.(broker.Campaigns)
	s := New(b)
	var reaped []broker.ReapReport
	s.Reaped = func(r broker.ReapReport) { reaped = append(reaped, r) }
	var upgraded []broker.UpgradeReport
	s.Upgraded = func(r broker.UpgradeReport) { upgraded = append(upgraded, r) }
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.step] = true
		t.Run(tt.step+" answers its output", func(t *testing.T) {
			payload := fmt.Sprintf(`{"step":%q`, tt.step)
			if tt.payload != "" {
				payload += "," + tt.payload
			}
			out, err := s.Lambda(t.Context(), json.RawMessage(payload+"}"))
			if err != nil || string(out) != tt.want {
				t.Fatalf("%s: output %s, error %v; want %s", payload, out, err, tt.want)
			}
		})
	}
	t.Run("the reap step gave its report to Reaped", func(t *testing.T) {
		if len(reaped) != 1 || reaped[0] != (broker.ReapReport{}) {
			t.Errorf("Reaped received %+v, want one empty report", reaped)
		}
	})
	t.Run("the upgrade_finish step gave its report to Upgraded", func(t *testing.T) {
		if len(upgraded) != 1 || upgraded[0].CampaignID != "upg-1" || !upgraded[0].Ended {
			t.Errorf("Upgraded received %+v, want the ended campaign's report", upgraded)
		}
	})
	// The item steps of a campaign that has no such item: only a payload
	// the campaign never made names one, which no retry mends.
	for _, step := range []string{StepUpgradeStart, StepUpgradeCheck} {
		covered[step] = true
		t.Run(step+" of an item the campaign does not have is permanent", func(t *testing.T) {
			_, err := s.Lambda(t.Context(), json.RawMessage(fmt.Sprintf(`{"step":%q,%s,"instance_id":"i-1","budget":10}`, step, campaign)))
			if _, ok := err.(*PermanentError); !ok || !strings.Contains(err.Error(), "has no item for service instance i-1") {
				t.Fatalf("error %v (%T), want a PermanentError naming the item", err, err)
			}
		})
	}
	for name := range s.steps {
		if !covered[name] {
			t.Errorf("step %q of the table has no case in this test", name)
		}
	}
}

// TestAPayloadNamesWhatItsStepNeeds: a payload the steps cannot use is a
// PermanentError (the workflow records it, never retries it) that says
// what is wrong, and the broker is never called.
func TestAPayloadNamesWhatItsStepNeeds(t *testing.T) {
	tests := []struct {
		name, payload, want string
	}{
		{"a step the workflows do not have", `{"step":"dance","operation_id":"o","instance_id":"i"}`, `unknown step "dance"`},
		{"no step at all", `{}`, `unknown step ""`},
		{"an operation's step without its operation", `{"step":"begin","instance_id":"i"}`, "task payload lacks operation_id or instance_id"},
		{"an operation's step without its instance", `{"step":"record_failure","operation_id":"o"}`, "task payload lacks operation_id or instance_id"},
		{"a cleanup's step without its detached resource", `{"step":"cleanup_delete","operation_id":"o"}`, "task payload lacks detached_id"},
		{"an upgrade's step without its campaign", `{"step":"upgrade_tally"}`, "task payload lacks campaign_id or options"},
		{"the upgrade's plan without its options", `{"step":"upgrade_plan","campaign_id":"c"}`, "task payload lacks campaign_id or options"},
		{"an upgrade item's step without its instance", `{"step":"upgrade_start","campaign_id":"c"}`, "task payload lacks campaign_id or instance_id"},
		{"the reap step where nothing receives its report (no workflows to restart)", `{"step":"reap"}`, `unknown step "reap"`},
		{"a payload that is not JSON", `{`, "malformed task payload"},
		{"a payload that is not an object", `[1,2]`, "malformed task payload"},
	}
	// A broker without a store: any call to it would panic.
	s := New(&broker.Broker{Logger: slog.New(slog.DiscardHandler)})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Handle(t.Context(), json.RawMessage(tt.payload))
			if _, ok := err.(*PermanentError); !ok || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v (%T), want a PermanentError saying %q", err, err, tt.want)
			}
		})
	}
}

// TestLambdaNamesErrorsAsTheWorkflowMatchesThem: aws-lambda-go names a
// function error after its Go type, and Step Functions' Retry and Catch
// match that name.
func TestLambdaNamesErrorsAsTheWorkflowMatchesThem(t *testing.T) {
	permanent := &PermanentError{broker.Failure{Description: "The plan is gone."}}
	cases := []struct {
		name      string
		err       error
		errorType string
		message   string
	}{
		{"a transient error stays TransientError", &TransientError{Err: errors.New("throttled")}, "TransientError", "throttled"},
		{"a permanent error stays PermanentError", permanent, "PermanentError", "The plan is gone."},
		{"a wrapped permanent error is unwrapped, so that its message is only the description",
			fmt.Errorf("step: %w", permanent), "PermanentError", "The plan is gone."},
		{"a wrapped transient error is a TransientError with the whole message",
			fmt.Errorf("step: %w", &TransientError{Err: errors.New("throttled")}), "TransientError", "step: throttled"},
		{"an unclassified error is retried as a TransientError", errors.New("connection reset"), "TransientError", "connection reset"},
		{"a deadline is retried as a TransientError", context.DeadlineExceeded, "TransientError", "context deadline exceeded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			s := withStep(&logs, StepBegin, func() (any, error) { return nil, c.err })
			ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
			_, err := lambda.NewHandler(s.Lambda).Invoke(ctx, []byte(`{"step":"begin","operation_id":"o","instance_id":"i"}`))
			if err == nil {
				t.Fatal("no error")
			}
			if got := lambdaErrorType(err); got != c.errorType || err.Error() != c.message {
				t.Errorf("errorType %s, message %q; want %s, %q", got, err, c.errorType, c.message)
			}
			line := logs.String()
			for _, want := range []string{`"msg":"step failed"`, `"error_type":"` + c.errorType + `"`, `"aws_request_id":"req-1"`, `"operation_id":"o"`} {
				if !strings.Contains(line, want) {
					t.Errorf("log %s lacks %s", line, want)
				}
			}
			if c.errorType == "PermanentError" && strings.Contains(line, "The plan is gone.") {
				t.Errorf("log %s repeats the description, which may repeat request input", line)
			}
		})
	}
	t.Run("a step's output passes through", func(t *testing.T) {
		s := withStep(&bytes.Buffer{}, StepBegin, func() (any, error) { return Progress{Done: true}, nil })
		out, err := lambda.NewHandler(s.Lambda).Invoke(t.Context(), []byte(`{"step":"begin","operation_id":"o","instance_id":"i"}`))
		if err != nil || string(out) != `{"done":true,"retry_after":0}` {
			t.Errorf("output %s, error %v", out, err)
		}
	})
	t.Run("a payload that is not JSON is a PermanentError, and no step sees it", func(t *testing.T) {
		s := withStep(&bytes.Buffer{}, StepBegin, func() (any, error) {
			t.Error("step called")
			return nil, nil
		})
		_, err := lambda.NewHandler(s.Lambda).Invoke(t.Context(), []byte(`[1,2]`))
		if got := lambdaErrorType(err); got != "PermanentError" {
			t.Errorf("errorType %s (%v), want PermanentError", got, err)
		}
	})
}

// withStep is Steps whose step name runs run, logging to logs.
func withStep(logs *bytes.Buffer, name string, run func() (any, error)) *Steps {
	s := New(&broker.Broker{Logger: logging.New(logs, slog.LevelInfo)})
	s.steps[name] = step{needsOperation, func(context.Context, *Steps, Payload) (any, error) { return run() }}
	return s
}

// lambdaErrorType is the errorType aws-lambda-go gives err: its type's
// name, a pointer's element's.
func lambdaErrorType(err error) string { return reflect.Indirect(reflect.ValueOf(err)).Type().Name() }

// TestTheDomainKeepsNoStepFunctionsVocabulary: the names of the workflows'
// errors, Lambda's error document and the Tasks' JSON are this package's;
// the domain's code names none of them, so that the Task contract has one
// place.
func TestTheDomainKeepsNoStepFunctionsVocabulary(t *testing.T) {
	fset := token.NewFileSet()
	dir := filepath.Join("..", "broker")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the domain's files: %v", err)
	}
	words := []string{ErrorTransient, ErrorPermanent, "States.", "errorMessage", "errorType"}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, _ := strconv.Unquote(lit.Value)
			for _, w := range words {
				if strings.Contains(s, w) {
					t.Errorf("%s names %q, which is package steps'", fset.Position(lit.Pos()), w)
				}
			}
			return true
		})
	}
	// What crosses a Task, the parameters and results of the broker's
	// calls that this package makes, carries no JSON of the domain's: its
	// JSON is this package's (Progress, Lane, Report...). The inputs of
	// executions are the Engine port's, which the broker starts (and
	// marshals: WorkflowInput, CleanupInput, CampaignInput).
	checked := map[reflect.Type]bool{}
	for _, m := range brokerCalls(t) {
		for _, typ := range m.types {
			for _, name := range taggedFields(typ, checked) {
				t.Errorf("%s, which %s passes, has a struct tag: a Task's JSON is package steps'", name, m.name)
			}
		}
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[broker.TaskProgress](), reflect.TypeFor[broker.UpgradeLane](),
		reflect.TypeFor[broker.CampaignOptions](), reflect.TypeFor[broker.Tally](), reflect.TypeFor[broker.UpgradeReport](),
		reflect.TypeFor[broker.ReapReport]()} {
		if !checked[typ] {
			t.Errorf("%s was not among the types the steps exchange with the broker: the test reads the calls wrong", typ)
		}
	}
}

// brokerCall is a method of *broker.Broker that steps.go calls, and the
// types of its parameters and results.
type brokerCall struct {
	name  string
	types []reflect.Type
}

// brokerCalls reads steps.go for the broker's methods it calls
// (s.Broker.X(...)).
func brokerCalls(t *testing.T) []brokerCall {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), "steps.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	bt := reflect.TypeFor[*broker.Broker]()
	seen := map[string]bool{}
	var calls []brokerCall
	ast.Inspect(file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if recv, ok := sel.X.(*ast.SelectorExpr); !ok || recv.Sel.Name != "Broker" || seen[sel.Sel.Name] {
			return true
		}
		m, ok := bt.MethodByName(sel.Sel.Name)
		if !ok {
			return true
		}
		seen[sel.Sel.Name] = true
		c := brokerCall{name: "Broker." + m.Name}
		for i := 1; i < m.Type.NumIn(); i++ {
			c.types = append(c.types, m.Type.In(i))
		}
		for i := range m.Type.NumOut() {
			c.types = append(c.types, m.Type.Out(i))
		}
		calls = append(calls, c)
		return true
	})
	if len(calls) < 10 {
		t.Fatalf("steps.go calls %d methods of the broker: the test reads it wrong", len(calls))
	}
	return calls
}

// taggedFields lists the fields with a struct tag of the broker's struct
// types that typ is or holds, each type looked at once (checked).
func taggedFields(typ reflect.Type, checked map[reflect.Type]bool) []string {
	switch typ.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return taggedFields(typ.Elem(), checked)
	case reflect.Map:
		return append(taggedFields(typ.Key(), checked), taggedFields(typ.Elem(), checked)...)
	case reflect.Struct:
	default:
		return nil
	}
	if checked[typ] || typ.PkgPath() != reflect.TypeFor[broker.Broker]().PkgPath() {
		return nil
	}
	checked[typ] = true
	var tagged []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Tag != "" {
			tagged = append(tagged, fmt.Sprintf("%s.%s (%s)", typ, f.Name, f.Tag))
		}
		tagged = append(tagged, taggedFields(f.Type, checked)...)
	}
	return tagged
}

// TestTheOperationWorkflowsInputReachesItsTasks: the input an operation's
// execution is started with names its binding and kind, every Task of
// statemachines/operation.asl.json passes it on, and the broker is given
// them, so that a Task reads in one round trip; a payload without them (a
// workflow or an execution from before) or with another instance's input
// gives the broker the operation alone, which it reads the old way.
func TestTheOperationWorkflowsInputReachesItsTasks(t *testing.T) {
	input, err := json.Marshal(broker.WorkflowInput{InstanceID: "i-1", BindingID: "b-1", Kind: broker.KindBind})
	const want = `{"instance_id":"i-1","binding_id":"b-1","kind":"bind"}`
	if err != nil || string(input) != want {
		t.Fatalf("input %s (%v), want %s", input, err, want)
	}
	def, err := os.ReadFile(filepath.Join("..", "..", "statemachines", "operation.asl.json"))
	if err != nil {
		t.Fatal(err)
	}
	var asl struct {
		States map[string]struct {
			Type       string
			Parameters struct{ Payload map[string]any }
		}
	}
	if err := json.Unmarshal(def, &asl); err != nil {
		t.Fatal(err)
	}
	for name, st := range asl.States {
		if st.Type == "Task" && st.Parameters.Payload["execution_input.$"] != "$$.Execution.Input" {
			t.Errorf("Task %s passes execution_input %v, want $$.Execution.Input", name, st.Parameters.Payload["execution_input.$"])
		}
	}
	for _, tt := range []struct {
		name, payload string
		want          broker.OperationTask
	}{
		{"the execution's input names the binding and kind", `{"step":"begin","operation_id":"op-1","instance_id":"i-1","execution_input":` + want + `}`,
			broker.OperationTask{InstanceID: "i-1", OperationID: "op-1", BindingID: "b-1", Kind: broker.KindBind}},
		{"an input from before it named them names neither", `{"step":"begin","operation_id":"op-1","instance_id":"i-1","execution_input":{"instance_id":"i-1"}}`,
			broker.OperationTask{InstanceID: "i-1", OperationID: "op-1"}},
		{"a payload without the input names neither", `{"step":"begin","operation_id":"op-1","instance_id":"i-1"}`,
			broker.OperationTask{InstanceID: "i-1", OperationID: "op-1"}},
		{"another instance's input names nothing of this one", `{"step":"begin","operation_id":"op-1","instance_id":"i-2","execution_input":` + want + `}`,
			broker.OperationTask{InstanceID: "i-2", OperationID: "op-1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var p Payload
			if err := json.Unmarshal([]byte(tt.payload), &p); err != nil {
				t.Fatal(err)
			}
			if got := p.operationTask(); got != tt.want {
				t.Errorf("the broker is given %+v, want %+v", got, tt.want)
			}
		})
	}
}
