package local_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/engine/local"
)

// namedError is a worker error with an ErrorName, like the ones the steps
// return.
type namedError struct{ name, msg string }

func (e *namedError) Error() string     { return e.msg }
func (e *namedError) ErrorName() string { return e.name }

// typedError has no ErrorName: it is named after its type.
type typedError struct{}

func (*typedError) Error() string { return "typed" }

// Invokers for the cases below.
func echo(_ context.Context, p json.RawMessage) (json.RawMessage, error) { return p, nil }

func answer(result string) local.Invoker {
	return func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(result), nil }
}

func failWith(err error) local.Invoker {
	return func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, err }
}

func block(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// task is a Task state's fields before Next/End.
func task(payload string) string {
	return `"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Parameters":{"FunctionName":"f","Payload":` + payload + `}`
}

type runCase struct {
	name    string
	asl     string
	input   string
	invoke  local.Invoker // default: echo
	status  broker.ExecutionStatus
	errName string
	cause   string // contained in the Cause
	output  string // compared as JSON, when SUCCEEDED
	states  []string
	noCall  bool
}

// runCases runs each case in its own engine, as execution "exec-1".
func runCases(t *testing.T, cases []runCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			calls := 0
			invoke := c.invoke
			if invoke == nil {
				invoke = echo
			}
			counted := func(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
				mu.Lock()
				calls++
				mu.Unlock()
				return invoke(ctx, p)
			}
			e := newEngine(t, local.Options{Definitions: definitions(t, map[broker.Workflow]string{"w": c.asl}), Invoke: counted})
			input := c.input
			if input == "" {
				input = "{}"
			}
			start(t, e, "w", "exec-1", input)
			x := waitEnded(t, e, "exec-1")
			checkExecution(t, x, c.status, c.errName, c.cause, c.output)
			if c.states != nil {
				if got := history(t, e, "exec-1"); !reflect.DeepEqual(got, c.states) {
					t.Errorf("states entered = %q, want %q", got, c.states)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if c.noCall && calls != 0 {
				t.Errorf("worker called %d times, want never", calls)
			}
		})
	}
}

func checkExecution(t *testing.T, x broker.Execution, status broker.ExecutionStatus, errName, cause, output string) {
	t.Helper()
	if x.Status != status {
		t.Fatalf("status = %s (error %q, cause %q), want %s", x.Status, x.Error, x.Cause, status)
	}
	if x.Error != errName {
		t.Errorf("error = %q (cause %q), want %q", x.Error, x.Cause, errName)
	}
	if !strings.Contains(x.Cause, cause) {
		t.Errorf("cause = %q, want it to contain %q", x.Cause, cause)
	}
	if output != "" && !jsonEqual(t, x.Output, output) {
		t.Errorf("output = %s, want %s", x.Output, output)
	}
}

func jsonEqual(t *testing.T, got json.RawMessage, want string) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Errorf("output %q is not JSON: %v", got, err)
		return false
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatalf("bad expected JSON %q: %v", want, err)
	}
	return reflect.DeepEqual(a, b)
}

func TestInputAndOutputProcessing(t *testing.T) {
	t.Parallel()
	runCases(t, []runCase{
		{
			name:   "a Pass state puts its Result where ResultPath says",
			asl:    `{"StartAt":"P","States":{"P":{"Type":"Pass","Result":{"x":true},"ResultPath":"$.r","End":true}}}`,
			input:  `{"a":1}`,
			status: broker.ExecutionSucceeded,
			output: `{"a":1,"r":{"x":true}}`,
		},
		{
			name: "Parameters resolve paths against the input and the context object",
			asl: `{"StartAt":"P","States":{"P":{"Type":"Pass","End":true,"Parameters":{
				"name.$":"$$.Execution.Name","state.$":"$$.State.Name","machine.$":"$$.StateMachine.Name",
				"id.$":"$$.Execution.Id","retries.$":"$$.State.RetryCount",
				"v.$":"$.a","first.$":"$.list[1]","quoted.$":"$['odd key']","lit":"x",
				"nested":{"in.$":"$$.Execution.Input.a"},"arr":[{"z.$":"$.a"},2]}}}}`,
			input:  `{"a":1,"list":["p","q"],"odd key":"k"}`,
			status: broker.ExecutionSucceeded,
			output: `{"name":"exec-1","state":"P","machine":"w","id":"arn:aws:states:local:000000000000:execution:w:exec-1","retries":0,
				"v":1,"first":"q","quoted":"k","lit":"x","nested":{"in":1},"arr":[{"z":1},2]}`,
		},
		{
			name:   "InputPath selects the effective input and OutputPath the output",
			asl:    `{"StartAt":"P","States":{"P":{"Type":"Pass","InputPath":"$.in","ResultPath":"$.copy","OutputPath":"$.copy","End":true}}}`,
			input:  `{"in":{"k":"v"},"other":1}`,
			status: broker.ExecutionSucceeded,
			output: `{"k":"v"}`,
		},
		{
			name:   "a null InputPath gives the state an empty object",
			asl:    `{"StartAt":"P","States":{"P":{"Type":"Pass","InputPath":null,"ResultPath":"$.seen","End":true}}}`,
			input:  `{"a":1}`,
			status: broker.ExecutionSucceeded,
			output: `{"a":1,"seen":{}}`,
		},
		{
			name:   "a null OutputPath gives an empty object",
			asl:    `{"StartAt":"P","States":{"P":{"Type":"Pass","OutputPath":null,"End":true}}}`,
			input:  `{"a":1}`,
			status: broker.ExecutionSucceeded,
			output: `{}`,
		},
		{
			name:   "a null ResultPath discards the result and keeps the input",
			asl:    `{"StartAt":"P","States":{"P":{"Type":"Pass","Result":{"x":1},"ResultPath":null,"End":true}}}`,
			input:  `{"a":1}`,
			status: broker.ExecutionSucceeded,
			output: `{"a":1}`,
		},
		{
			name:   "the default ResultPath replaces the input with the result",
			asl:    `{"StartAt":"P","States":{"P":{"Type":"Pass","Result":"r","End":true}}}`,
			input:  `{"a":1}`,
			status: broker.ExecutionSucceeded,
			output: `"r"`,
		},
		{
			name:   "ResultPath creates the objects missing on its way",
			asl:    `{"StartAt":"P","States":{"P":{"Type":"Pass","Result":1,"ResultPath":"$.a.b.c","End":true}}}`,
			input:  `{"a":{"z":0}}`,
			status: broker.ExecutionSucceeded,
			output: `{"a":{"z":0,"b":{"c":1}}}`,
		},
		{
			name:    "ResultPath through a value that is not an object fails with States.ResultPathMatchFailure",
			asl:     `{"StartAt":"P","States":{"P":{"Type":"Pass","Result":1,"ResultPath":"$.a.b","End":true}}}`,
			input:   `{"a":"text"}`,
			status:  broker.ExecutionFailed,
			errName: "States.ResultPathMatchFailure",
		},
		{
			name:    "an InputPath that selects nothing fails with States.Runtime",
			asl:     `{"StartAt":"P","States":{"P":{"Type":"Pass","InputPath":"$.missing","End":true}}}`,
			status:  broker.ExecutionFailed,
			errName: "States.Runtime",
			cause:   "$.missing",
		},
		{
			name:    "a Parameters path that selects nothing fails with States.Runtime",
			asl:     `{"StartAt":"P","States":{"P":{"Type":"Pass","Parameters":{"x.$":"$.missing"},"End":true}}}`,
			status:  broker.ExecutionFailed,
			errName: "States.Runtime",
			cause:   "The JSONPath '$.missing' specified for the field 'x.$' could not be found in the input",
		},
		{
			name:   "Parameters then Result: the Result wins",
			asl:    `{"StartAt":"P","States":{"P":{"Type":"Pass","Parameters":{"x.$":"$.a"},"Result":"fixed","ResultPath":"$.r","End":true}}}`,
			input:  `{"a":1}`,
			status: broker.ExecutionSucceeded,
			output: `{"a":1,"r":"fixed"}`,
		},
		{
			name:   "numbers keep their exact text",
			asl:    `{"StartAt":"P","States":{"P":{"Type":"Pass","End":true}}}`,
			input:  `{"big":12345678901234567890,"f":1.50}`,
			status: broker.ExecutionSucceeded,
			output: `{"big":12345678901234567890,"f":1.50}`,
		},
		{
			name:    "a Fail state fails the execution with its Error and Cause",
			asl:     `{"StartAt":"P","States":{"P":{"Type":"Pass","Next":"F"},"F":{"Type":"Fail","Error":"Nope","Cause":"because"}}}`,
			status:  broker.ExecutionFailed,
			errName: "Nope",
			cause:   "because",
			states:  []string{"P", "F"},
		},
		{
			name:   "a Succeed state ends the execution with its paths applied",
			asl:    `{"StartAt":"S","States":{"S":{"Type":"Succeed","InputPath":"$.a","OutputPath":"$.b"}}}`,
			input:  `{"a":{"b":[1,2]}}`,
			status: broker.ExecutionSucceeded,
			output: `[1,2]`,
		},
	})
}

func TestTask(t *testing.T) {
	t.Parallel()
	caught := `"Caught":{"Type":"Pass","End":true}`
	runCases(t, []runCase{
		{
			name:   "a Task sends the resolved Payload to the worker and wraps its result like Lambda",
			asl:    `{"StartAt":"T","States":{"T":{` + task(`{"id.$":"$.id","exec.$":"$$.Execution.Name","fixed":1}`) + `,"End":true}}}`,
			input:  `{"id":"x"}`,
			status: broker.ExecutionSucceeded,
			output: `{"ExecutedVersion":"$LATEST","Payload":{"id":"x","exec":"exec-1","fixed":1},"StatusCode":200}`,
		},
		{
			name:   "Payload.$ sends a part of the input as it is",
			asl:    `{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Parameters":{"FunctionName":"f","Payload.$":"$.body"},"ResultSelector":{"p.$":"$.Payload"},"End":true}}}`,
			input:  `{"body":[1,{"k":"v"}],"other":true}`,
			status: broker.ExecutionSucceeded,
			output: `{"p":[1,{"k":"v"}]}`,
		},
		{
			name:   "ResultSelector, ResultPath and OutputPath shape a Task's output",
			asl:    `{"StartAt":"T","States":{"T":{` + task(`{}`) + `,"ResultSelector":{"value.$":"$.Payload.v","code.$":"$.StatusCode"},"ResultPath":"$.res","OutputPath":"$.res","End":true}}}`,
			invoke: answer(`{"v":7}`),
			status: broker.ExecutionSucceeded,
			output: `{"value":7,"code":200}`,
		},
		{
			name:   "a null ResultPath keeps the Task's input",
			asl:    `{"StartAt":"T","States":{"T":{` + task(`{}`) + `,"ResultPath":null,"End":true}}}`,
			input:  `{"a":1}`,
			status: broker.ExecutionSucceeded,
			output: `{"a":1}`,
		},
		{
			name:   "an empty worker result is a null Payload",
			asl:    `{"StartAt":"T","States":{"T":{` + task(`{}`) + `,"End":true}}}`,
			invoke: answer(``),
			status: broker.ExecutionSucceeded,
			output: `{"ExecutedVersion":"$LATEST","Payload":null,"StatusCode":200}`,
		},
		{
			name:    "a ResultSelector path the result lacks fails with States.Runtime",
			asl:     `{"StartAt":"T","States":{"T":{` + task(`{}`) + `,"ResultSelector":{"v.$":"$.Payload.v"},"Catch":[{"ErrorEquals":["States.ALL"],"Next":"Caught"}],"End":true},` + caught + `}}`,
			invoke:  answer(`{}`),
			status:  broker.ExecutionFailed,
			errName: "States.Runtime",
			cause:   "$.Payload.v",
		},
		{
			name:    "a Parameters path that selects nothing fails with States.Runtime, which States.ALL does not catch",
			asl:     `{"StartAt":"T","States":{"T":{` + task(`{"x.$":"$.missing"}`) + `,"Retry":[{"ErrorEquals":["States.ALL"]}],"Catch":[{"ErrorEquals":["States.ALL"],"Next":"Caught"}],"End":true},` + caught + `}}`,
			status:  broker.ExecutionFailed,
			errName: "States.Runtime",
			noCall:  true,
		},
		{
			name:   "a Task error caught by name goes to the catcher's Next, with Error and Cause at its ResultPath",
			asl:    `{"StartAt":"T","States":{"T":{` + task(`{}`) + `,"Catch":[{"ErrorEquals":["Other"],"Next":"T"},{"ErrorEquals":["MyError"],"ResultPath":"$.err","Next":"Caught"}],"End":true},` + caught + `}}`,
			input:  `{"a":1}`,
			invoke: failWith(&namedError{"MyError", "boom"}),
			status: broker.ExecutionSucceeded,
			output: `{"a":1,"err":{"Error":"MyError","Cause":"boom"}}`,
			states: []string{"T", "Caught"},
		},
		{
			name:   "a catcher's default ResultPath replaces the input with the error",
			asl:    `{"StartAt":"T","States":{"T":{` + task(`{}`) + `,"Catch":[{"ErrorEquals":["MyError"],"Next":"Caught"}],"End":true},` + caught + `}}`,
			input:  `{"a":1}`,
			invoke: failWith(&namedError{"MyError", "boom"}),
			status: broker.ExecutionSucceeded,
			output: `{"Error":"MyError","Cause":"boom"}`,
		},
		{
			name:    "an error without ErrorName is named after its Go type",
			asl:     `{"StartAt":"T","States":{"T":{` + task(`{}`) + `,"End":true}}}`,
			invoke:  failWith(&typedError{}),
			status:  broker.ExecutionFailed,
			errName: "typedError",
			cause:   "typed",
		},
		{
			name:    "errors.New is named errorString, as aws-lambda-go names it",
			asl:     `{"StartAt":"T","States":{"T":{` + task(`{}`) + `,"End":true}}}`,
			invoke:  failWith(errors.New("plain")),
			status:  broker.ExecutionFailed,
			errName: "errorString",
			cause:   "plain",
		},
		{
			name:    "an ErrorName is found through wrapping",
			asl:     `{"StartAt":"T","States":{"T":{` + task(`{}`) + `,"End":true}}}`,
			invoke:  failWith(fmt.Errorf("begin: %w", &namedError{"TransientError", "busy"})),
			status:  broker.ExecutionFailed,
			errName: "TransientError",
			cause:   "begin: busy",
		},
		{
			name:   "States.TaskFailed catches a worker error",
			asl:    `{"StartAt":"T","States":{"T":{` + task(`{}`) + `,"Catch":[{"ErrorEquals":["States.TaskFailed"],"Next":"Caught"}],"End":true},` + caught + `}}`,
			invoke: failWith(&namedError{"MyError", "boom"}),
			status: broker.ExecutionSucceeded,
			states: []string{"T", "Caught"},
		},
		{
			name: "a Task that outlives TimeoutSeconds fails with States.Timeout, which States.TaskFailed does not catch but States.ALL does",
			asl: `{"StartAt":"T","States":{"T":{` + task(`{}`) + `,"TimeoutSeconds":1,"Catch":[
				{"ErrorEquals":["States.TaskFailed"],"Next":"Wrong"},{"ErrorEquals":["States.ALL"],"Next":"Caught"}],"End":true},
				"Wrong":{"Type":"Fail"},` + caught + `}}`,
			invoke: block,
			status: broker.ExecutionSucceeded,
			output: `{"Error":"States.Timeout","Cause":"the task ran longer than its TimeoutSeconds (1s)"}`,
			states: []string{"T", "Caught"},
		},
		{
			name:    "an uncaught timeout fails the execution with States.Timeout",
			asl:     `{"StartAt":"T","States":{"T":{` + task(`{}`) + `,"TimeoutSeconds":1,"End":true}}}`,
			invoke:  block,
			status:  broker.ExecutionFailed,
			errName: "States.Timeout",
		},
		{
			name: "a worker that panics fails the Task, named after the panic value's type",
			asl:  `{"StartAt":"T","States":{"T":{` + task(`{}`) + `,"End":true}}}`,
			invoke: func(context.Context, json.RawMessage) (json.RawMessage, error) {
				panic("kaboom")
			},
			status:  broker.ExecutionFailed,
			errName: "string",
			cause:   "kaboom",
		},
		{
			name:    "a worker result that is not JSON fails with States.Runtime",
			asl:     `{"StartAt":"T","States":{"T":{` + task(`{}`) + `,"End":true}}}`,
			invoke:  answer(`{not json`),
			status:  broker.ExecutionFailed,
			errName: "States.Runtime",
		},
		{
			name:    "an execution that outlives its TimeoutSeconds is TIMED_OUT",
			asl:     `{"StartAt":"W","TimeoutSeconds":1,"States":{"W":{"Type":"Wait","Seconds":30,"End":true}}}`,
			status:  broker.ExecutionTimedOut,
			errName: "States.Timeout",
		},
	})
}

func TestChoiceOperators(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		rule  string
		input string
		want  string // Yes, No, or the error name
	}{
		{"BooleanEquals matches an equal boolean", `"Variable":"$.v","BooleanEquals":true`, `{"v":true}`, "Yes"},
		{"BooleanEquals does not match another boolean", `"Variable":"$.v","BooleanEquals":true`, `{"v":false}`, "No"},
		{"BooleanEquals does not match a string", `"Variable":"$.v","BooleanEquals":true`, `{"v":"true"}`, "No"},
		{"StringEquals matches an equal string", `"Variable":"$.v","StringEquals":"a"`, `{"v":"a"}`, "Yes"},
		{"StringEquals does not match another string", `"Variable":"$.v","StringEquals":"a"`, `{"v":"b"}`, "No"},
		{"NumericEquals compares values, not text", `"Variable":"$.v","NumericEquals":3`, `{"v":3.0}`, "Yes"},
		{"NumericEquals does not match a string", `"Variable":"$.v","NumericEquals":3`, `{"v":"3"}`, "No"},
		{"NumericLessThan matches a smaller number", `"Variable":"$.v","NumericLessThan":3`, `{"v":2.5}`, "Yes"},
		{"NumericLessThan does not match an equal number", `"Variable":"$.v","NumericLessThan":3`, `{"v":3}`, "No"},
		{"NumericGreaterThan matches a larger number", `"Variable":"$.v","NumericGreaterThan":3`, `{"v":4}`, "Yes"},
		{"NumericGreaterThan does not match an equal number", `"Variable":"$.v","NumericGreaterThan":3`, `{"v":3}`, "No"},
		{"NumericLessThanEquals matches an equal number", `"Variable":"$.v","NumericLessThanEquals":3`, `{"v":3}`, "Yes"},
		{"NumericLessThanEquals does not match a larger number", `"Variable":"$.v","NumericLessThanEquals":3`, `{"v":4}`, "No"},
		{"NumericGreaterThanEquals matches an equal number", `"Variable":"$.v","NumericGreaterThanEquals":3`, `{"v":3}`, "Yes"},
		{"NumericGreaterThanEquals does not match a smaller number", `"Variable":"$.v","NumericGreaterThanEquals":3`, `{"v":-1}`, "No"},
		{"IsPresent true matches a present field, even null", `"Variable":"$.v","IsPresent":true`, `{"v":null}`, "Yes"},
		{"IsPresent true does not match a missing field", `"Variable":"$.v","IsPresent":true`, `{}`, "No"},
		{"IsPresent false matches a missing field", `"Variable":"$.v","IsPresent":false`, `{}`, "Yes"},
		{"IsNull matches null", `"Variable":"$.v","IsNull":true`, `{"v":null}`, "Yes"},
		{"IsNull does not match a value", `"Variable":"$.v","IsNull":true`, `{"v":0}`, "No"},
		{"IsBoolean matches a boolean", `"Variable":"$.v","IsBoolean":true`, `{"v":false}`, "Yes"},
		{"IsNumeric false matches a string", `"Variable":"$.v","IsNumeric":false`, `{"v":"1"}`, "Yes"},
		{"IsNumeric matches a number", `"Variable":"$.v","IsNumeric":true`, `{"v":1}`, "Yes"},
		{"IsString does not match a number", `"Variable":"$.v","IsString":true`, `{"v":1}`, "No"},
		{"And matches when every rule does", `"And":[{"Variable":"$.a","IsPresent":true},{"Variable":"$.a","NumericEquals":1}]`, `{"a":1}`, "Yes"},
		{"And stops at the first rule that fails", `"And":[{"Variable":"$.a","IsPresent":true},{"Variable":"$.a","StringEquals":"x"}]`, `{}`, "No"},
		{"Or matches when one rule does", `"Or":[{"Variable":"$.a","StringEquals":"x"},{"Variable":"$.a","StringEquals":"y"}]`, `{"a":"y"}`, "Yes"},
		{"Or does not match when no rule does", `"Or":[{"Variable":"$.a","StringEquals":"x"},{"Variable":"$.a","StringEquals":"y"}]`, `{"a":"z"}`, "No"},
		{"Not inverts its rule", `"Not":{"Variable":"$.a","StringEquals":"x"}`, `{"a":"y"}`, "Yes"},
		{"a Variable can read the context object", `"Variable":"$$.Execution.Name","StringEquals":"exec-1"`, `{}`, "Yes"},
		{"a Variable can index an array", `"Variable":"$.list[1].k","BooleanEquals":true`, `{"list":[{},{"k":true}]}`, "Yes"},
		{"a missing Variable fails the execution with States.Runtime", `"Variable":"$.v","StringEquals":"a"`, `{}`, "States.Runtime"},
		{"a missing Variable fails IsNull too", `"Variable":"$.v","IsNull":false`, `{}`, "States.Runtime"},
	}
	var rc []runCase
	for _, c := range cases {
		asl := `{"StartAt":"C","States":{"C":{"Type":"Choice","Choices":[{` + c.rule + `,"Next":"Yes"}],"Default":"No"},
			"Yes":{"Type":"Succeed"},"No":{"Type":"Succeed"}}}`
		r := runCase{name: c.name, asl: asl, input: c.input, status: broker.ExecutionSucceeded, states: []string{"C", c.want}, output: c.input}
		if c.want != "Yes" && c.want != "No" {
			r = runCase{name: c.name, asl: asl, input: c.input, status: broker.ExecutionFailed, errName: c.want, states: []string{"C"}}
		}
		rc = append(rc, r)
	}
	rc = append(rc,
		runCase{
			name:    "no matching rule and no Default fails with States.NoChoiceMatched",
			asl:     `{"StartAt":"C","States":{"C":{"Type":"Choice","Choices":[{"Variable":"$.v","StringEquals":"a","Next":"Yes"}]},"Yes":{"Type":"Succeed"}}}`,
			input:   `{"v":"b"}`,
			status:  broker.ExecutionFailed,
			errName: "States.NoChoiceMatched",
		},
		runCase{
			name:   "the first matching rule wins and the paths apply",
			asl:    `{"StartAt":"C","States":{"C":{"Type":"Choice","InputPath":"$.in","OutputPath":"$.out","Choices":[{"Variable":"$.v","IsPresent":true,"Next":"A"},{"Variable":"$.v","IsPresent":true,"Next":"B"}]},"A":{"Type":"Succeed"},"B":{"Type":"Succeed"}}}`,
			input:  `{"in":{"v":1,"out":"o"}}`,
			status: broker.ExecutionSucceeded,
			output: `"o"`,
			states: []string{"C", "A"},
		},
	)
	runCases(t, rc)
}

// sleepRecorder is an Options.Sleep that returns at once and records what
// it was asked to wait.
type sleepRecorder struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (s *sleepRecorder) Sleep(_ context.Context, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delays = append(s.delays, d)
}

func (s *sleepRecorder) Delays() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.delays...)
}

func TestWait(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name    string
		wait    string
		input   string
		delays  []time.Duration
		errName string
	}{
		{"Seconds waits that many seconds", `"Seconds":2`, `{}`, []time.Duration{2 * time.Second}, ""},
		{"SecondsPath waits the seconds found in the input", `"SecondsPath":"$.s"`, `{"s":1}`, []time.Duration{time.Second}, ""},
		{"SecondsPath 0 does not wait", `"SecondsPath":"$.s"`, `{"s":0}`, []time.Duration{0}, ""},
		{"SecondsPath may read the context object", `"SecondsPath":"$$.Execution.Input.s"`, `{"s":3}`, []time.Duration{3 * time.Second}, ""},
		{"Timestamp waits until that time", `"Timestamp":"2030-01-02T03:04:15Z"`, `{}`, []time.Duration{10 * time.Second}, ""},
		{"TimestampPath waits until the time found in the input", `"TimestampPath":"$.t"`, `{"t":"2030-01-02T03:05:05Z"}`, []time.Duration{time.Minute}, ""},
		{"a negative SecondsPath fails with States.Runtime", `"SecondsPath":"$.s"`, `{"s":-1}`, nil, "States.Runtime"},
		{"a fractional SecondsPath fails with States.Runtime", `"SecondsPath":"$.s"`, `{"s":1.5}`, nil, "States.Runtime"},
		{"a string SecondsPath fails with States.Runtime", `"SecondsPath":"$.s"`, `{"s":"1"}`, nil, "States.Runtime"},
		{"a missing SecondsPath fails with States.Runtime", `"SecondsPath":"$.s"`, `{}`, nil, "States.Runtime"},
		{"a TimestampPath that is no timestamp fails with States.Runtime", `"TimestampPath":"$.t"`, `{"t":"tomorrow"}`, nil, "States.Runtime"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rec := &sleepRecorder{}
			asl := `{"StartAt":"W","States":{"W":{"Type":"Wait",` + c.wait + `,"OutputPath":"$","End":true}}}`
			e := newEngine(t, local.Options{
				Definitions: definitions(t, map[broker.Workflow]string{"w": asl}),
				Invoke:      echo,
				Now:         func() time.Time { return now },
				Sleep:       rec.Sleep,
			})
			start(t, e, "w", "exec-1", c.input)
			x := waitEnded(t, e, "exec-1")
			if c.errName != "" {
				checkExecution(t, x, broker.ExecutionFailed, c.errName, "", "")
			} else {
				checkExecution(t, x, broker.ExecutionSucceeded, "", "", c.input)
			}
			if got := rec.Delays(); !reflect.DeepEqual(got, c.delays) {
				t.Errorf("waited %v, want %v", got, c.delays)
			}
		})
	}

	t.Run("a Wait really waits, with the real clock", func(t *testing.T) {
		t.Parallel()
		e := newEngine(t, local.Options{
			Definitions: definitions(t, map[broker.Workflow]string{"w": `{"StartAt":"W","States":{"W":{"Type":"Wait","SecondsPath":"$.s","End":true}}}`}),
			Invoke:      echo,
		})
		began := time.Now()
		start(t, e, "w", "exec-1", `{"s":1}`)
		waitEnded(t, e, "exec-1")
		if d := time.Since(began); d < time.Second {
			t.Errorf("ended after %s, want at least 1s", d)
		}
	})
}

func TestRetry(t *testing.T) {
	t.Parallel()
	const s = time.Second
	cases := []struct {
		name     string
		retry    string
		catch    bool
		failures int   // the worker fails this many times, then answers
		err      error // with this error
		calls    int
		delays   []time.Duration
		status   broker.ExecutionStatus
		errName  string
	}{
		{
			name:     "retries back off by BackoffRate up to MaxDelaySeconds, then the error is caught",
			retry:    `[{"ErrorEquals":["Flaky"],"IntervalSeconds":1,"MaxAttempts":4,"BackoffRate":2,"MaxDelaySeconds":5}]`,
			catch:    true,
			failures: 100, err: &namedError{"Flaky", "again"},
			calls: 5, delays: []time.Duration{s, 2 * s, 4 * s, 5 * s},
			status: broker.ExecutionSucceeded,
		},
		{
			name:     "the defaults are 1 second, 3 attempts and a rate of 2",
			retry:    `[{"ErrorEquals":["Flaky"]}]`,
			failures: 100, err: &namedError{"Flaky", "again"},
			calls: 4, delays: []time.Duration{s, 2 * s, 4 * s},
			status: broker.ExecutionFailed, errName: "Flaky",
		},
		{
			name:     "a fractional BackoffRate multiplies the interval",
			retry:    `[{"ErrorEquals":["Flaky"],"IntervalSeconds":2,"MaxAttempts":2,"BackoffRate":1.5}]`,
			failures: 100, err: &namedError{"Flaky", "again"},
			calls: 3, delays: []time.Duration{2 * s, 3 * s},
			status: broker.ExecutionFailed, errName: "Flaky",
		},
		{
			name:     "MaxAttempts 0 never retries",
			retry:    `[{"ErrorEquals":["Flaky"],"MaxAttempts":0}]`,
			failures: 100, err: &namedError{"Flaky", "again"},
			calls:  1,
			status: broker.ExecutionFailed, errName: "Flaky",
		},
		{
			name:     "only the first retrier that matches counts, even when it is spent",
			retry:    `[{"ErrorEquals":["Flaky"],"MaxAttempts":1},{"ErrorEquals":["States.ALL"],"MaxAttempts":5}]`,
			failures: 100, err: &namedError{"Flaky", "again"},
			calls: 2, delays: []time.Duration{s},
			status: broker.ExecutionFailed, errName: "Flaky",
		},
		{
			name:     "an error no retrier names is not retried",
			retry:    `[{"ErrorEquals":["Other"]}]`,
			failures: 100, err: &namedError{"Flaky", "again"},
			calls:  1,
			status: broker.ExecutionFailed, errName: "Flaky",
		},
		{
			name:     "a retry that succeeds goes on",
			retry:    `[{"ErrorEquals":["States.ALL"]}]`,
			failures: 2, err: &namedError{"Flaky", "again"},
			calls: 3, delays: []time.Duration{s, 2 * s},
			status: broker.ExecutionSucceeded,
		},
		{
			name:     "a timeout is retried when named",
			retry:    `[{"ErrorEquals":["States.Timeout"],"MaxAttempts":1}]`,
			failures: 100, err: context.DeadlineExceeded, // see below: the worker blocks
			calls: 2, delays: []time.Duration{s},
			status: broker.ExecutionFailed, errName: "States.Timeout",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rec := &sleepRecorder{}
			var mu sync.Mutex
			var counts []string
			invoke := func(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
				mu.Lock()
				n := len(counts)
				var payload struct {
					N json.Number `json:"n"`
				}
				_ = json.Unmarshal(p, &payload)
				counts = append(counts, payload.N.String())
				mu.Unlock()
				if n >= c.failures {
					return p, nil
				}
				if errors.Is(c.err, context.DeadlineExceeded) {
					<-ctx.Done()
					return nil, ctx.Err()
				}
				return nil, c.err
			}
			// Only the case about timeouts has one: a worker that answers at
			// once must not race a deadline on a busy machine.
			timeout := ""
			if errors.Is(c.err, context.DeadlineExceeded) {
				timeout = `,"TimeoutSeconds":1`
			}
			catch, caught := "", ""
			if c.catch {
				catch = `,"Catch":[{"ErrorEquals":["States.ALL"],"Next":"Caught"}]`
				caught = `,"Caught":{"Type":"Pass","End":true}`
			}
			asl := `{"StartAt":"T","States":{"T":{` + task(`{"n.$":"$$.State.RetryCount"}`) +
				timeout + `,"Retry":` + c.retry + catch + `,"End":true}` + caught + `}}`
			e := newEngine(t, local.Options{Definitions: definitions(t, map[broker.Workflow]string{"w": asl}), Invoke: invoke, Sleep: rec.Sleep})
			start(t, e, "w", "exec-1", `{}`)
			x := waitEnded(t, e, "exec-1")
			checkExecution(t, x, c.status, c.errName, "", "")
			mu.Lock()
			defer mu.Unlock()
			if len(counts) != c.calls {
				t.Errorf("worker called %d times, want %d", len(counts), c.calls)
			}
			for i, n := range counts {
				if n != fmt.Sprint(i) {
					t.Errorf("call %d saw $$.State.RetryCount %s, want %d", i, n, i)
				}
			}
			if got := rec.Delays(); !reflect.DeepEqual(got, c.delays) && (len(got) != 0 || len(c.delays) != 0) {
				t.Errorf("waited %v between attempts, want %v", got, c.delays)
			}
		})
	}
}

// TestRetryWithFullJitter: JitterStrategy FULL waits a random time between
// none and the backoff's delay, as Step Functions does, so that the
// retries of a burst (throttled Tasks) spread out instead of coming back
// together.
func TestRetryWithFullJitter(t *testing.T) {
	t.Parallel()
	rec := &sleepRecorder{}
	var calls atomic.Int32
	invoke := func(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
		calls.Add(1)
		return nil, &namedError{"Flaky", "again"}
	}
	asl := `{"StartAt":"T","States":{"T":{` + task(`{}`) +
		`,"Retry":[{"ErrorEquals":["Flaky"],"IntervalSeconds":1,"MaxAttempts":20,"BackoffRate":2,"MaxDelaySeconds":300,"JitterStrategy":"FULL"}],"End":true}}}`
	e := newEngine(t, local.Options{Definitions: definitions(t, map[broker.Workflow]string{"w": asl}), Invoke: invoke, Sleep: rec.Sleep})
	start(t, e, "w", "exec-1", `{}`)
	checkExecution(t, waitEnded(t, e, "exec-1"), broker.ExecutionFailed, "Flaky", "", "")
	if n := calls.Load(); n != 21 {
		t.Errorf("worker called %d times, want 21", n)
	}
	delays := rec.Delays()
	if len(delays) != 20 {
		t.Fatalf("waited %d times, want 20", len(delays))
	}
	var whole int
	for i, d := range delays {
		ceiling := min(time.Duration(1<<i)*time.Second, 300*time.Second)
		if d < 0 || d > ceiling {
			t.Errorf("wait %d: %s, want between 0 and %s", i, d, ceiling)
		}
		if d == ceiling {
			whole++
		}
	}
	if whole == len(delays) {
		t.Error("every wait was the backoff's full delay: no jitter")
	}
}
