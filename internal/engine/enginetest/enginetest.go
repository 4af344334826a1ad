// Package enginetest is the contract every broker.Engine must pass: it runs
// statemachines/operation.asl.json against a scripted worker and checks the
// outcome, the states entered, and the Start/Stop/Describe rules of the
// port; and it runs the inline Map of testdata/ against a worker that
// echoes its payload.
//
// The worker is a script of answers, one per Task call, so that an engine
// whose worker cannot be a Go function (Step Functions on moto, fed with
// canned Lambda responses) runs the same cases as the local engine, which
// calls Script.Invoke.
package enginetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/waittest"
)

// Engine is what the suite drives: the port, and the names of the states
// an execution entered, in order (from GetExecutionHistory's StateEntered
// events on Step Functions). A state retried appears once.
type Engine interface {
	broker.Engine
	History(ctx context.Context, name string) ([]string, error)
}

// Harness builds the engines under test.
type Harness struct {
	// New returns a fresh engine running the operation workflow whose
	// worker answers each Task call with the next answer of s, and
	// registers its cleanup with t. An engine with an in-process worker
	// passes s.Invoke; another loads s.Answers() into its fake worker, and
	// may t.Skip a script it cannot express.
	New func(t *testing.T, s *Script) Engine
	// InProcess is set when the engine calls s.Invoke: the suite then also
	// checks each payload the worker received.
	InProcess bool
	// NewWorkflow returns a fresh engine running workflow w, defined by
	// asl (in which "${WorkerFunctionArn}" stands for the worker), and
	// registers its cleanup with t. Its worker answers every Task call with
	// the payload it was sent, as moto's Lambda stub does when no result is
	// queued: an engine with an in-process worker calls echo, which the
	// suite gives it to watch the calls in flight.
	NewWorkflow func(t *testing.T, w broker.Workflow, asl []byte, echo Invoker) Engine
	// StopCauseLost, when set, is why the engine under test cannot report
	// the cause given to Stop (moto 5.2.1's StopExecution drops error and
	// cause). The stop case then checks everything else, and logs this
	// reason instead of failing on the cause.
	StopCauseLost string
}

// Invoker is an in-process worker: it answers one Task call.
type Invoker func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error)

// Steps of the operation workflow, as the worker receives them.
const (
	StepBegin         = "begin"
	StepCheck         = "check"
	StepFinish        = "finish"
	StepRecordFailure = "record_failure"
)

// Answer is the worker's answer to one Task call.
type Answer struct {
	// Step is the step the engine is expected to ask for.
	Step string
	// Result is the worker's result, when Error is empty.
	Result json.RawMessage
	// Error, when set, is the name of the error the worker fails with (the
	// Lambda errorType: "TransientError", "Failure", ...); Cause is its
	// message.
	Error string
	Cause string
}

// Answers of the operation worker.
var (
	progressDone = json.RawMessage(`{"done":true,"retry_after":0}`)
	progressNow  = json.RawMessage(`{"done":false,"retry_after":0}`)
	progressLong = json.RawMessage(`{"done":false,"retry_after":3600}`)
	recorded     = json.RawMessage(`{}`)
)

func ok(step string, result json.RawMessage) Answer { return Answer{Step: step, Result: result} }
func fail(step, name, cause string) Answer          { return Answer{Step: step, Error: name, Cause: cause} }

// Script is the worker of one test: its answers, in order, and the calls
// it received.
type Script struct {
	answers []Answer

	mu       sync.Mutex
	calls    []json.RawMessage
	problems []string
}

// NewScript returns a script that gives answers in order.
func NewScript(answers ...Answer) *Script { return &Script{answers: answers} }

// Answers returns the whole script.
func (s *Script) Answers() []Answer { return append([]Answer(nil), s.answers...) }

// Calls returns the payloads received by Invoke, in order.
func (s *Script) Calls() []json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]json.RawMessage(nil), s.calls...)
}

// WorkerError is an error the scripted worker fails with; its ErrorName is
// what Retry and Catch match on.
type WorkerError struct{ Name, Cause string }

func (e *WorkerError) Error() string     { return e.Cause }
func (e *WorkerError) ErrorName() string { return e.Name }

// Invoke answers one Task call with the next answer. A call for another
// step than scripted, or past the end of the script, fails the call (with
// error ScriptMismatch) and is reported by the suite.
func (s *Script) Invoke(_ context.Context, payload json.RawMessage) (json.RawMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.calls)
	s.calls = append(s.calls, append(json.RawMessage(nil), payload...))
	var got struct {
		Step string `json:"step"`
	}
	_ = json.Unmarshal(payload, &got)
	if n >= len(s.answers) {
		s.problems = append(s.problems, fmt.Sprintf("call %d (step %q) is past the end of the script", n+1, got.Step))
		return nil, &WorkerError{Name: "ScriptMismatch", Cause: "no answer left"}
	}
	a := s.answers[n]
	if got.Step != a.Step {
		s.problems = append(s.problems, fmt.Sprintf("call %d asked for step %q, the script answers %q", n+1, got.Step, a.Step))
		return nil, &WorkerError{Name: "ScriptMismatch", Cause: "unexpected step"}
	}
	if a.Error != "" {
		return nil, &WorkerError{Name: a.Error, Cause: a.Cause}
	}
	return a.Result, nil
}

func (s *Script) reportProblems(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.problems {
		t.Errorf("worker: %s", p)
	}
}

// operationInput is the input the broker gives the operation workflow.
const operationInput = `{"instance_id":"i-1"}`

// flow is a run of the operation workflow from start to end.
type flow struct {
	name    string
	answers []Answer
	status  broker.ExecutionStatus
	errName string   // Execution.Error when not SUCCEEDED
	states  []string // the states entered
	output  string   // Output when SUCCEEDED; the error's Cause is checked apart
}

var flows = []flow{
	{
		name:    "a change done at once is finished and succeeds",
		answers: []Answer{ok(StepBegin, progressDone), ok(StepFinish, recorded)},
		status:  broker.ExecutionSucceeded,
		states:  []string{"Begin", "Done?", "Finish", "Succeeded"},
		output:  `{"instance_id":"i-1","progress":{"done":true,"retry_after":0}}`,
	},
	{
		name: "a long change is checked until done, then finished",
		answers: []Answer{
			ok(StepBegin, progressNow),
			ok(StepCheck, progressNow), ok(StepCheck, progressNow), ok(StepCheck, progressDone),
			ok(StepFinish, recorded),
		},
		status: broker.ExecutionSucceeded,
		states: []string{
			"Begin", "Done?", "Wait", "Check", "Done?", "Wait", "Check", "Done?", "Wait", "Check", "Done?",
			"Finish", "Succeeded",
		},
		output: `{"instance_id":"i-1","progress":{"done":true,"retry_after":0}}`,
	},
	{
		name:    "a transient error of begin is retried in the same state",
		answers: []Answer{fail(StepBegin, "TransientError", "throttled"), ok(StepBegin, progressDone), ok(StepFinish, recorded)},
		status:  broker.ExecutionSucceeded,
		states:  []string{"Begin", "Done?", "Finish", "Succeeded"},
		output:  `{"instance_id":"i-1","progress":{"done":true,"retry_after":0}}`,
	},
	{
		name:    "a permanent failure of begin is recorded and the workflow succeeds",
		answers: []Answer{fail(StepBegin, "Failure", "plan not allowed"), ok(StepRecordFailure, recorded)},
		status:  broker.ExecutionSucceeded,
		states:  []string{"Begin", "RecordFailure", "FailureRecorded"},
		output:  `{"instance_id":"i-1","error":{"Error":"Failure"}}`,
	},
	{
		name: "a permanent failure of check is recorded after the progress seen so far",
		answers: []Answer{
			ok(StepBegin, progressNow), fail(StepCheck, "Failure", "quota exceeded"), ok(StepRecordFailure, recorded),
		},
		status: broker.ExecutionSucceeded,
		states: []string{"Begin", "Done?", "Wait", "Check", "RecordFailure", "FailureRecorded"},
		output: `{"instance_id":"i-1","progress":{"done":false,"retry_after":0},"error":{"Error":"Failure"}}`,
	},
	{
		name:    "a permanent failure of finish is recorded",
		answers: []Answer{ok(StepBegin, progressDone), fail(StepFinish, "Failure", "conflict"), ok(StepRecordFailure, recorded)},
		status:  broker.ExecutionSucceeded,
		states:  []string{"Begin", "Done?", "Finish", "RecordFailure", "FailureRecorded"},
		output:  `{"instance_id":"i-1","progress":{"done":true,"retry_after":0},"error":{"Error":"Failure"}}`,
	},
	{
		name:    "a failure that cannot be recorded fails the execution",
		answers: []Answer{fail(StepBegin, "Failure", "plan not allowed"), fail(StepRecordFailure, "Failure", "store down")},
		status:  broker.ExecutionFailed,
		errName: "RecordFailureFailed",
		states:  []string{"Begin", "RecordFailure", "RecordFailureFailed"},
	},
}

// Run runs the contract against engines built by h. Each case has its own
// engine and runs in parallel with the others.
func Run(t *testing.T, h Harness) {
	for _, f := range flows {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			s := NewScript(f.answers...)
			e := h.New(t, s)
			name := newName()
			start(t, e, name, operationInput)
			x := waitEnded(t, e, name)

			if x.Status != f.status {
				t.Fatalf("status = %s (error %q, cause %q), want %s", x.Status, x.Error, x.Cause, f.status)
			}
			if f.status != broker.ExecutionSucceeded && x.Error != f.errName {
				t.Errorf("error = %q, want %q", x.Error, f.errName)
			}
			checkDescription(t, x, name, operationInput)
			if got := history(t, e, name); !reflect.DeepEqual(got, f.states) {
				t.Errorf("states entered:\n got %q\nwant %q", got, f.states)
			}
			if f.output != "" {
				checkOutput(t, x.Output, f.output, lastCause(f.answers))
			}
			if h.InProcess {
				s.reportProblems(t)
				checkPayloads(t, s, name)
			}
		})
	}

	runMap(t, h)

	t.Run("starting a running execution again with the same input starts nothing new", func(t *testing.T) {
		t.Parallel()
		s := NewScript(ok(StepBegin, progressLong))
		e := h.New(t, s)
		name := newName()
		start(t, e, name, operationInput)
		waitInState(t, e, name, "Wait")
		before := describe(t, e, name)

		if err := e.Start(context.Background(), broker.WorkflowOperation, name, json.RawMessage(operationInput)); err != nil {
			t.Fatalf("second Start = %v, want nil", err)
		}
		after := describe(t, e, name)
		if after.Status != broker.ExecutionRunning || !after.StartedAt.Equal(before.StartedAt) {
			t.Errorf("after the second Start: status %s started %v, want RUNNING started %v", after.Status, after.StartedAt, before.StartedAt)
		}
		if got, want := history(t, e, name), []string{"Begin", "Done?", "Wait"}; !reflect.DeepEqual(got, want) {
			t.Errorf("states entered = %q, want %q", got, want)
		}
		if h.InProcess && len(s.Calls()) != 1 {
			t.Errorf("worker called %d times, want 1", len(s.Calls()))
		}
		stop(t, e, name)
	})

	t.Run("starting an execution again with another input fails with ErrExecutionExists", func(t *testing.T) {
		t.Parallel()
		e := h.New(t, NewScript(ok(StepBegin, progressLong)))
		name := newName()
		start(t, e, name, operationInput)
		waitInState(t, e, name, "Wait")

		err := e.Start(context.Background(), broker.WorkflowOperation, name, json.RawMessage(`{"instance_id":"i-2"}`))
		if !errors.Is(err, broker.ErrExecutionExists) {
			t.Errorf("Start with another input = %v, want ErrExecutionExists", err)
		}
		if x := describe(t, e, name); !jsonEqual(x.Input, operationInput) {
			t.Errorf("input = %s, want the first one %s", x.Input, operationInput)
		}
		stop(t, e, name)
	})

	t.Run("starting an ended execution again with the same input returns nil and runs nothing", func(t *testing.T) {
		t.Parallel()
		s := NewScript(ok(StepBegin, progressDone), ok(StepFinish, recorded))
		e := h.New(t, s)
		name := newName()
		start(t, e, name, operationInput)
		waitEnded(t, e, name)

		if err := e.Start(context.Background(), broker.WorkflowOperation, name, json.RawMessage(operationInput)); err != nil {
			t.Fatalf("Start of an ended execution with the same input = %v, want nil", err)
		}
		if x := describe(t, e, name); x.Status != broker.ExecutionSucceeded {
			t.Errorf("status = %s, want it still SUCCEEDED", x.Status)
		}
		if h.InProcess && len(s.Calls()) != 2 {
			t.Errorf("worker called %d times, want 2", len(s.Calls()))
		}
	})

	t.Run("stopping an execution that waits aborts it with the cause given", func(t *testing.T) {
		t.Parallel()
		s := NewScript(ok(StepBegin, progressLong))
		e := h.New(t, s)
		name := newName()
		start(t, e, name, operationInput)
		waitInState(t, e, name, "Wait")

		if err := e.Stop(context.Background(), name, "deprovision requested"); err != nil {
			t.Fatalf("Stop = %v", err)
		}
		// Step Functions (and moto) may report the stop a moment later.
		x := waitEnded(t, e, name)
		if x.Status != broker.ExecutionAborted {
			t.Errorf("after Stop: status %s, want ABORTED", x.Status)
		}
		if x.Cause != "deprovision requested" {
			if h.StopCauseLost == "" {
				t.Errorf("after Stop: cause %q, want the cause given", x.Cause)
			} else {
				t.Logf("cause after Stop is %q, not checked: %s", x.Cause, h.StopCauseLost)
			}
		}
		if x.StoppedAt.IsZero() {
			t.Error("StoppedAt is zero after Stop")
		}
		if got, want := history(t, e, name), []string{"Begin", "Done?", "Wait"}; !reflect.DeepEqual(got, want) {
			t.Errorf("states entered = %q, want %q", got, want)
		}
		if h.InProcess && len(s.Calls()) != 1 {
			t.Errorf("worker called %d times, want 1", len(s.Calls()))
		}
	})

	t.Run("stopping an ended execution is not an error and changes nothing", func(t *testing.T) {
		t.Parallel()
		e := h.New(t, NewScript(ok(StepBegin, progressDone), ok(StepFinish, recorded)))
		name := newName()
		start(t, e, name, operationInput)
		waitEnded(t, e, name)

		if err := e.Stop(context.Background(), name, "too late"); err != nil {
			t.Fatalf("Stop of an ended execution = %v, want nil", err)
		}
		if x := describe(t, e, name); x.Status != broker.ExecutionSucceeded || x.Cause != "" {
			t.Errorf("after Stop: status %s cause %q, want SUCCEEDED and no cause", x.Status, x.Cause)
		}
	})

	t.Run("stopping an unknown execution fails with ErrExecutionNotFound", func(t *testing.T) {
		t.Parallel()
		e := h.New(t, NewScript())
		if err := e.Stop(context.Background(), newName(), "why"); !errors.Is(err, broker.ErrExecutionNotFound) {
			t.Errorf("Stop = %v, want ErrExecutionNotFound", err)
		}
	})

	t.Run("describing an unknown execution fails with ErrExecutionNotFound", func(t *testing.T) {
		t.Parallel()
		e := h.New(t, NewScript())
		if _, err := e.Describe(context.Background(), newName()); !errors.Is(err, broker.ErrExecutionNotFound) {
			t.Errorf("Describe = %v, want ErrExecutionNotFound", err)
		}
	})
}

// newName returns a fresh execution name, the way the broker names them
// (by operation id).
func newName() string { return "op-" + uuid.NewString() }

func start(t *testing.T, e Engine, name, input string) {
	t.Helper()
	if err := e.Start(context.Background(), broker.WorkflowOperation, name, json.RawMessage(input)); err != nil {
		t.Fatalf("Start(%s) = %v", name, err)
	}
}

func stop(t *testing.T, e Engine, name string) {
	t.Helper()
	if err := e.Stop(context.Background(), name, "test over"); err != nil {
		t.Errorf("Stop(%s) = %v", name, err)
	}
}

func describe(t *testing.T, e Engine, name string) broker.Execution {
	t.Helper()
	x, err := e.Describe(context.Background(), name)
	if err != nil {
		t.Fatalf("Describe(%s) = %v", name, err)
	}
	return x
}

func history(t *testing.T, e Engine, name string) []string {
	t.Helper()
	states, err := e.History(context.Background(), name)
	if err != nil {
		t.Fatalf("History(%s) = %v", name, err)
	}
	return states
}

// waitEnded waits until the execution is no longer RUNNING.
func waitEnded(t *testing.T, e Engine, name string) broker.Execution {
	t.Helper()
	var x broker.Execution
	waittest.Until(t, func() error {
		if x = describe(t, e, name); x.Status == broker.ExecutionRunning {
			return fmt.Errorf("execution %s still RUNNING (states entered: %q)", name, history(t, e, name))
		}
		return nil
	})
	return x
}

// waitInState waits until the last state the execution entered is state.
func waitInState(t *testing.T, e Engine, name, state string) {
	t.Helper()
	waittest.Until(t, func() error {
		if states := history(t, e, name); len(states) == 0 || states[len(states)-1] != state {
			return fmt.Errorf("execution %s has not reached state %s (states entered: %q)", name, state, states)
		}
		return nil
	})
}

func checkDescription(t *testing.T, x broker.Execution, name, input string) {
	t.Helper()
	if x.Name != name || x.Workflow != broker.WorkflowOperation {
		t.Errorf("name, workflow = %q, %q; want %q, %q", x.Name, x.Workflow, name, broker.WorkflowOperation)
	}
	if !jsonEqual(x.Input, input) {
		t.Errorf("input = %s, want %s", x.Input, input)
	}
	if x.StartedAt.IsZero() || x.StoppedAt.Before(x.StartedAt) {
		t.Errorf("started %v, stopped %v: want both set, in that order", x.StartedAt, x.StoppedAt)
	}
}

// checkOutput compares the output with want, except for error.Cause, which
// must contain cause: Step Functions wraps a Lambda error's message in a
// JSON document, the local engine does not.
func checkOutput(t *testing.T, got json.RawMessage, want, cause string) {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(got, &out); err != nil {
		t.Fatalf("output %s is not a JSON object: %v", got, err)
	}
	if e, ok := out["error"].(map[string]any); ok {
		c, _ := e["Cause"].(string)
		if !strings.Contains(c, cause) {
			t.Errorf("error.Cause = %q, want it to contain %q", c, cause)
		}
		delete(e, "Cause")
	}
	data, _ := json.Marshal(out)
	if !jsonEqual(data, want) {
		t.Errorf("output (without error.Cause) = %s, want %s", data, want)
	}
}

// lastCause returns the cause of the last failing answer.
func lastCause(answers []Answer) string {
	cause := ""
	for _, a := range answers {
		if a.Error != "" {
			cause = a.Cause
		}
	}
	return cause
}

// checkPayloads checks what the worker received: the step, the operation
// (the execution name), the instance and, for record_failure, the error.
func checkPayloads(t *testing.T, s *Script, name string) {
	t.Helper()
	calls := s.Calls()
	if len(calls) != len(s.answers) {
		t.Errorf("worker called %d times, want %d", len(calls), len(s.answers))
	}
	var last Answer
	for i, c := range calls {
		if i >= len(s.answers) {
			break
		}
		a := s.answers[i]
		var got map[string]any
		if err := json.Unmarshal(c, &got); err != nil {
			t.Errorf("call %d: payload is not a JSON object: %v", i+1, err)
			continue
		}
		// Every Task also carries the execution's input (execution_input),
		// which names what its read needs (broker.WorkflowInput).
		var input map[string]any
		if err := json.Unmarshal([]byte(operationInput), &input); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"step": a.Step, "operation_id": name, "instance_id": "i-1", "execution_input": input}
		if a.Step == StepRecordFailure {
			want["error"] = last.Error
			cause, _ := got["cause"].(string)
			if !strings.Contains(cause, last.Cause) {
				t.Errorf("call %d: cause = %q, want it to contain %q", i+1, cause, last.Cause)
			}
			delete(got, "cause")
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("call %d: payload = %v, want %v", i+1, got, want)
		}
		if a.Error != "" {
			last = a
		}
	}
}

func jsonEqual(got json.RawMessage, want string) bool {
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}
