package sfn_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/smithy-go/middleware"
	"github.com/google/uuid"
	"go.etcd.io/bbolt"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/engine/enginetest"
	"github.com/serverless-osb/broker/internal/engine/local"
	sfnengine "github.com/serverless-osb/broker/internal/engine/sfn"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/waittest"
)

func TestContract(t *testing.T) {
	mototest.Endpoint(t)
	enginetest.Run(t, motoHarness(func(_ *testing.T, r *motoRegion) *sfn.Client { return r.client }))
}

// motoHarness is the engine contract's harness on moto: each engine on a
// region of its own, its client from client (the region's, or another on
// the region).
func motoHarness(client func(*testing.T, *motoRegion) *sfn.Client) enginetest.Harness {
	return enginetest.Harness{
		New: func(t *testing.T, s *enginetest.Script) enginetest.Engine {
			if why := expressible(s.Answers()); why != "" {
				t.Skip(why)
			}
			r := leaseRegion(t)
			arn := r.createStateMachine(t, broker.WorkflowOperation)
			r.script(t, s.Answers())
			return sfnengine.New(client(t, r), map[broker.Workflow]string{broker.WorkflowOperation: arn})
		},
		// moto's Lambda stub echoes every payload: nothing is queued.
		NewWorkflow: func(t *testing.T, w broker.Workflow, asl []byte, _ enginetest.Invoker) enginetest.Engine {
			r := leaseRegion(t)
			arn := r.createStateMachineFrom(t, w, asl)
			return sfnengine.New(client(t, r), map[broker.Workflow]string{w: arn})
		},
		StopCauseLost: "moto 5.2.1's StopExecution drops error and cause; " +
			"TestStopSendsErrorAndCause checks what the engine sends",
	}
}

// The worker's answers of the operation workflow.
var (
	progressDone = json.RawMessage(`{"done":true,"retry_after":0}`)
	progressNow  = json.RawMessage(`{"done":false,"retry_after":0}`)
	recorded     = json.RawMessage(`{}`)
)

func ok(step string, result json.RawMessage) enginetest.Answer {
	return enginetest.Answer{Step: step, Result: result}
}

// alike is a run of a workflow that both engines must execute the same
// way. states and status are what both must show; the comparison itself
// is the test.
type alike struct {
	name    string
	answers []enginetest.Answer
	states  []string
	status  broker.ExecutionStatus
}

// workflowInputs are the inputs the broker gives each workflow.
var workflowInputs = map[broker.Workflow]json.RawMessage{
	broker.WorkflowOperation: json.RawMessage(`{"instance_id":"i-1"}`),
	broker.WorkflowCleanup:   json.RawMessage(`{"detached_id":"d0123456789abcdef0123456789abcdef"}`),
	broker.WorkflowUpgrade:   json.RawMessage(`{"campaign_id":"upg-1","part":1,"options":{"all":true,"max_in_flight":1,"max_failures":1,"skip":["i-8"],"defer":["i-9"]}}`),
}

// The steps of the upgrade workflow, and its worker's answers: one lane
// (the engines' iterations then run in one order), whose Tasks answer the
// lane's next move.
const (
	stepUpgradePlan       = "upgrade_plan"
	stepUpgradeClaim      = "upgrade_claim"
	stepUpgradeStart      = "upgrade_start"
	stepUpgradeCheck      = "upgrade_check"
	stepUpgradeItemFailed = "upgrade_item_failed"
	stepUpgradeContinue   = "upgrade_continue"
	stepUpgradeTally      = "upgrade_tally"
	stepUpgradeFinish     = "upgrade_finish"
)

func upgradePlan(canaries bool) json.RawMessage {
	lanes := `[]`
	if canaries {
		lanes = `[0]`
	}
	return json.RawMessage(fmt.Sprintf(`{"campaign_id":"upg-1","part":1,"dry_run":false,"has_canaries":%t,"canary_lanes":%s,"lanes":[0],"lane_steps":100}`, canaries, lanes))
}

func upgradeLane(action string, done bool, steps int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"action":%q,"instance_id":"i-1","retry_after":0,"done":%t,"yield":false,"steps":%d}`, action, done, steps))
}

var (
	notContinued = json.RawMessage(`{"continued":false}`)
	upgradeEnded = json.RawMessage(`{"campaign_id":"upg-1","state":"finished","tally":{"items":1},"ended":true}`)
	canaryFailed = json.RawMessage(`{"stop":true,"tally":{"items":2,"failed":1,"canary_failed":true}}`)
	// A canary blocked by its instance's own state (busy, or parameters
	// the new version refuses) is no failure: the rest go on.
	canaryBlocked = json.RawMessage(`{"stop":false,"tally":{"items":2,"upgraded":0,"blocked":1}}`)
)

// The steps of the cleanup workflow.
const (
	stepCleanupDelete  = "cleanup_delete"
	stepCleanupDeleted = "cleanup_deleted"
	stepCleanupGaveUp  = "cleanup_gave_up"
)

// alikeRuns lists, for every file of statemachines/, the runs compared.
var alikeRuns = map[broker.Workflow][]alike{
	broker.WorkflowCleanup: {
		{
			name:    "a resource deleted at once",
			answers: []enginetest.Answer{ok(stepCleanupDelete, progressDone), ok(stepCleanupDeleted, recorded)},
			states:  []string{"Delete", "Deleted?", "RecordDeleted", "Deleted"},
			status:  broker.ExecutionSucceeded,
		},
		{
			name: "a resource that takes two checks to go",
			answers: []enginetest.Answer{
				ok(stepCleanupDelete, progressNow), ok(stepCleanupDelete, progressNow), ok(stepCleanupDelete, progressDone),
				ok(stepCleanupDeleted, recorded),
			},
			states: []string{"Delete", "Deleted?", "Wait", "Check", "Deleted?", "Wait", "Check", "Deleted?", "RecordDeleted", "Deleted"},
			status: broker.ExecutionSucceeded,
		},
		{
			name:    "a resource that cannot be deleted is recorded and fails the execution (the alarm)",
			answers: []enginetest.Answer{tooLarge(stepCleanupDelete), ok(stepCleanupGaveUp, recorded)},
			states:  []string{"Delete", "RecordGaveUp", "GaveUp"},
			status:  broker.ExecutionFailed,
		},
		{
			name:    "a give-up that cannot be recorded still fails the execution",
			answers: []enginetest.Answer{ok(stepCleanupDelete, progressNow), tooLarge(stepCleanupDelete), tooLarge(stepCleanupGaveUp)},
			states:  []string{"Delete", "Deleted?", "Wait", "Check", "RecordGaveUp", "GaveUp"},
			status:  broker.ExecutionFailed,
		},
	},
	broker.WorkflowUpgrade: {
		{
			name: "one lane upgrades an instance that takes a check, then finds none left",
			answers: []enginetest.Answer{
				ok(stepUpgradePlan, upgradePlan(false)),
				ok(stepUpgradeClaim, upgradeLane("start", false, 1)),
				ok(stepUpgradeStart, upgradeLane("start", false, 2)),
				ok(stepUpgradeCheck, upgradeLane("start", true, 3)),
				ok(stepUpgradeClaim, upgradeLane("none", false, 4)),
				ok(stepUpgradeContinue, notContinued),
				ok(stepUpgradeFinish, upgradeEnded),
			},
			states: []string{"Plan", "Canaries?", "Rest", "RestClaim", "RestClaimed?", "RestStart", "RestItemEnded?",
				"RestWait", "RestCheck", "RestItemEnded?", "RestClaim", "RestClaimed?", "RestLaneDone",
				"RestLeft?", "RestContinued?", "Finish", "Done"},
			status: broker.ExecutionSucceeded,
		},
		{
			name: "a canary that fails permanently is recorded and stops the campaign before the rest",
			answers: []enginetest.Answer{
				ok(stepUpgradePlan, upgradePlan(true)),
				ok(stepUpgradeClaim, upgradeLane("start", false, 1)),
				tooLarge(stepUpgradeStart),
				ok(stepUpgradeItemFailed, recorded),
				ok(stepUpgradeClaim, upgradeLane("none", false, 3)),
				ok(stepUpgradeContinue, notContinued),
				ok(stepUpgradeTally, canaryFailed),
				ok(stepUpgradeFinish, upgradeEnded),
			},
			states: []string{"Plan", "Canaries?", "Canaries", "CanaryClaim", "CanaryClaimed?", "CanaryStart",
				"CanaryItemFailed", "CanaryClaim", "CanaryClaimed?", "CanaryLaneDone",
				"CanariesLeft?", "CanariesContinued?", "Tally", "Stop?", "Finish", "Done"},
			status: broker.ExecutionSucceeded,
		},
		{
			name: "a canary blocked by its own instance does not stop the campaign: the rest run",
			answers: []enginetest.Answer{
				ok(stepUpgradePlan, upgradePlan(true)),
				ok(stepUpgradeClaim, upgradeLane("start", false, 1)),
				ok(stepUpgradeStart, upgradeLane("start", true, 2)),
				ok(stepUpgradeClaim, upgradeLane("none", false, 3)),
				ok(stepUpgradeContinue, notContinued),
				ok(stepUpgradeTally, canaryBlocked),
				ok(stepUpgradeClaim, upgradeLane("none", false, 1)),
				ok(stepUpgradeContinue, notContinued),
				ok(stepUpgradeFinish, upgradeEnded),
			},
			states: []string{"Plan", "Canaries?", "Canaries", "CanaryClaim", "CanaryClaimed?", "CanaryStart",
				"CanaryItemEnded?", "CanaryClaim", "CanaryClaimed?", "CanaryLaneDone",
				"CanariesLeft?", "CanariesContinued?", "Tally", "Stop?", "Rest", "RestClaim", "RestClaimed?", "RestLaneDone",
				"RestLeft?", "RestContinued?", "Finish", "Done"},
			status: broker.ExecutionSucceeded,
		},
	},
	broker.WorkflowOperation: {
		{
			name:    "a change done at once",
			answers: []enginetest.Answer{ok(enginetest.StepBegin, progressDone), ok(enginetest.StepFinish, recorded)},
			states:  []string{"Begin", "Done?", "Finish", "Succeeded"},
			status:  broker.ExecutionSucceeded,
		},
		{
			name: "a change that needs three checks",
			answers: []enginetest.Answer{
				ok(enginetest.StepBegin, progressNow),
				ok(enginetest.StepCheck, progressNow), ok(enginetest.StepCheck, progressNow), ok(enginetest.StepCheck, progressDone),
				ok(enginetest.StepFinish, recorded),
			},
			states: []string{
				"Begin", "Done?", "Wait", "Check", "Done?", "Wait", "Check", "Done?", "Wait", "Check", "Done?",
				"Finish", "Succeeded",
			},
			status: broker.ExecutionSucceeded,
		},
		{
			name:    "a begin that fails permanently is recorded",
			answers: []enginetest.Answer{tooLarge(enginetest.StepBegin), ok(enginetest.StepRecordFailure, recorded)},
			states:  []string{"Begin", "RecordFailure", "FailureRecorded"},
			status:  broker.ExecutionSucceeded,
		},
		{
			name: "a check that fails permanently is recorded after the progress seen",
			answers: []enginetest.Answer{
				ok(enginetest.StepBegin, progressNow), tooLarge(enginetest.StepCheck), ok(enginetest.StepRecordFailure, recorded),
			},
			states: []string{"Begin", "Done?", "Wait", "Check", "RecordFailure", "FailureRecorded"},
			status: broker.ExecutionSucceeded,
		},
		{
			name: "a finish that fails permanently after begin reported done is recorded",
			answers: []enginetest.Answer{
				ok(enginetest.StepBegin, progressDone), tooLarge(enginetest.StepFinish), ok(enginetest.StepRecordFailure, recorded),
			},
			states: []string{"Begin", "Done?", "Finish", "RecordFailure", "FailureRecorded"},
			status: broker.ExecutionSucceeded,
		},
		{
			name:    "a failure that cannot be recorded fails the execution",
			answers: []enginetest.Answer{tooLarge(enginetest.StepBegin), tooLarge(enginetest.StepRecordFailure)},
			states:  []string{"Begin", "RecordFailure", "RecordFailureFailed"},
			status:  broker.ExecutionFailed,
		},
		{
			name: "a worker that errors transiently, then succeeds",
			answers: []enginetest.Answer{
				{Step: enginetest.StepBegin, Error: "TransientError", Cause: "throttled"},
				ok(enginetest.StepBegin, progressDone), ok(enginetest.StepFinish, recorded),
			},
			states: []string{"Begin", "Done?", "Finish", "Succeeded"},
			status: broker.ExecutionSucceeded,
		},
	},
}

// TestEnginesRunTheStateMachinesAlike runs each workflow of statemachines/
// on Step Functions (moto) and on the local engine, with the same worker
// answers, and requires the same states entered in the same order, the same
// worker payloads, the same status, error and cause, and the same output.
func TestEnginesRunTheStateMachinesAlike(t *testing.T) {
	mototest.Endpoint(t)
	files, err := filepath.Glob(filepath.Join(statemachines, "*.asl.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no state machine in %s (%v)", statemachines, err)
	}
	for _, f := range files {
		w := broker.Workflow(strings.TrimSuffix(filepath.Base(f), ".asl.json"))
		runs := alikeRuns[w]
		if len(runs) == 0 {
			t.Errorf("workflow %s has no runs to compare the engines with", w)
		}
		for _, run := range runs {
			t.Run(string(w)+": "+run.name, func(t *testing.T) {
				t.Parallel()
				compare(t, w, run)
			})
		}
	}
}

func compare(t *testing.T, w broker.Workflow, run alike) {
	if why := expressible(run.answers); why != "" {
		t.Skip(why)
	}
	name := "op-" + uuid.NewString()
	input := workflowInputs[w]

	worker := enginetest.NewScript(run.answers...)
	onLocal := newLocal(t, worker.Invoke)

	r := leaseRegion(t)
	arn := r.createStateMachine(t, w)
	r.script(t, run.answers)
	onMoto := sfnengine.New(r.client, map[broker.Workflow]string{w: arn})

	for _, e := range []broker.Engine{onLocal, onMoto} {
		if err := e.Start(t.Context(), w, name, input); err != nil {
			t.Fatalf("Start: %v", err)
		}
	}
	local, moto := waitEnded(t, onLocal, name), waitEnded(t, onMoto, name)

	localStates, motoStates := history(t, onLocal, name), history(t, onMoto, name)
	if !reflect.DeepEqual(localStates, motoStates) {
		t.Errorf("states entered:\nlocal %q\n moto %q", localStates, motoStates)
	}
	if !reflect.DeepEqual(localStates, run.states) {
		t.Errorf("states entered = %q, want %q", localStates, run.states)
	}
	if local.Status != moto.Status || local.Status != run.status {
		t.Errorf("status: local %s, moto %s, want %s", local.Status, moto.Status, run.status)
	}
	if local.Status != broker.ExecutionSucceeded && (local.Error != moto.Error || local.Cause != moto.Cause) {
		t.Errorf("error, cause:\nlocal %q, %q\n moto %q, %q", local.Error, local.Cause, moto.Error, moto.Cause)
	}
	if !sameJSON(local.Output, moto.Output) {
		t.Errorf("output:\nlocal %s\n moto %s", local.Output, moto.Output)
	}

	executionARN := strings.Replace(arn, ":stateMachine:", ":execution:", 1) + ":" + name
	localCalls, motoCalls := worker.Calls(), r.taskPayloads(t, executionARN)
	if len(localCalls) != len(motoCalls) {
		t.Errorf("worker called %d times by the local engine, %d times by moto", len(localCalls), len(motoCalls))
	}
	for i := range min(len(localCalls), len(motoCalls)) {
		if !sameJSON(localCalls[i], motoCalls[i]) {
			t.Errorf("call %d:\nlocal %s\n moto %s", i+1, localCalls[i], motoCalls[i])
		}
	}
	// Each engine asked for exactly the answers scripted, in that order.
	if len(localCalls) != len(run.answers) {
		t.Errorf("worker called %d times, want %d", len(localCalls), len(run.answers))
	}
	for i, c := range localCalls[:min(len(localCalls), len(run.answers))] {
		var p struct{ Step string }
		if err := json.Unmarshal(c, &p); err != nil || p.Step != run.answers[i].Step {
			t.Errorf("call %d asked for step %q, the script answers %q", i+1, p.Step, run.answers[i].Step)
		}
	}
	if left, err := r.drain(t.Context()); err != nil || left != 0 {
		t.Errorf("moto left %d of its %d results unused (%v)", left, len(run.answers), err)
	}
}

// TestStopSendsErrorAndCause checks what Stop asks of Step Functions: a
// running execution is aborted with error States.Aborted and the cause,
// cut to what the API accepts.
func TestStopSendsErrorAndCause(t *testing.T) {
	var rec recorder
	r := leaseRegion(t, rec.record)
	arn := r.createStateMachine(t, broker.WorkflowOperation)
	r.script(t, []enginetest.Answer{ok(enginetest.StepBegin, json.RawMessage(`{"done":false,"retry_after":30}`))})
	e := sfnengine.New(r.client, map[broker.Workflow]string{broker.WorkflowOperation: arn})
	name := "op-" + uuid.NewString()
	if err := e.Start(t.Context(), broker.WorkflowOperation, name, json.RawMessage(`{"instance_id":"i-1"}`)); err != nil {
		t.Fatalf("Start: %v", err)
	}
	waitInState(t, e, name, "Wait")

	// 20000 one-unit and 10000 two-unit characters: 40000 UTF-16 units,
	// of which 32768 fit.
	cause := strings.Repeat("é", 20000) + strings.Repeat("😀", 10000)
	want := strings.Repeat("é", 20000) + strings.Repeat("😀", 6384)
	rec.reset()
	if err := e.Stop(t.Context(), name, cause); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	calls := rec.reset()
	if len(calls) != 1 {
		t.Fatalf("Stop made calls %v, want one StopExecution", names(calls))
	}
	in, isStop := calls[0].(*sfn.StopExecutionInput)
	if !isStop {
		t.Fatalf("Stop called %T, want StopExecution", calls[0])
	}
	if got := *in.Error; got != sfnengine.ErrorAborted {
		t.Errorf("error sent = %q, want %q", got, sfnengine.ErrorAborted)
	}
	if got := *in.Cause; got != want {
		t.Errorf("cause sent: %d bytes starting %.20q, want the first 32768 UTF-16 units (%d bytes)", len(got), got, len(want))
	}
	x := waitEnded(t, e, name) // moto applies a stop asynchronously
	if x.Status != broker.ExecutionAborted || x.StoppedAt.IsZero() {
		t.Errorf("after Stop: status %s, stopped %v; want ABORTED and a stop date", x.Status, x.StoppedAt)
	}
	if err := e.Stop(t.Context(), name, "again"); err != nil {
		t.Errorf("Stop of an aborted execution = %v, want nil", err)
	}
}

// TestCallsPerMethod counts the Step Functions calls each method makes with
// two workflows configured, for an execution of the second one (Describe,
// Stop and History try the operation workflow's state machine first).
func TestCallsPerMethod(t *testing.T) {
	var rec recorder
	r := leaseRegion(t, rec.record)
	const repair broker.Workflow = "repair"
	e := sfnengine.New(r.client, map[broker.Workflow]string{
		repair:                   r.createStateMachine(t, broker.WorkflowOperation),
		broker.WorkflowOperation: r.createStateMachine(t, broker.WorkflowOperation),
	})
	r.script(t, []enginetest.Answer{ok(enginetest.StepBegin, progressDone), ok(enginetest.StepFinish, recorded)})
	name, unknown := "op-"+uuid.NewString(), "op-"+uuid.NewString()
	input := json.RawMessage(`{"instance_id":"i-1"}`)

	rec.reset()
	if err := e.Start(t.Context(), repair, name, input); err != nil {
		t.Fatalf("Start: %v", err)
	}
	rec.expect(t, "Start of a new execution", "StartExecution")
	waitEnded(t, e, name)

	steps := []struct {
		what  string
		call  func() error
		want  error
		calls []string
	}{
		{"Describe", func() error {
			x, err := e.Describe(t.Context(), name)
			if err == nil && (x.Workflow != repair || x.Status != broker.ExecutionSucceeded) {
				return fmt.Errorf("workflow %s, status %s; want %s, SUCCEEDED", x.Workflow, x.Status, repair)
			}
			return err
		}, nil, []string{"DescribeExecution", "DescribeExecution"}},
		{"Start of an ended execution with the same input", func() error {
			return e.Start(t.Context(), repair, name, json.RawMessage(`{ "instance_id" : "i-1" }`))
		}, nil, []string{"StartExecution", "DescribeExecution"}},
		{"Start of an ended execution with another input", func() error {
			return e.Start(t.Context(), repair, name, json.RawMessage(`{"instance_id":"i-2"}`))
		}, broker.ErrExecutionExists, []string{"StartExecution", "DescribeExecution"}},
		{"Stop of an ended execution", func() error {
			return e.Stop(t.Context(), name, "too late")
		}, nil, []string{"StopExecution", "StopExecution"}},
		{"History", func() error {
			states, err := e.History(t.Context(), name)
			if want := []string{"Begin", "Done?", "Finish", "Succeeded"}; err == nil && !reflect.DeepEqual(states, want) {
				return fmt.Errorf("states %q, want %q", states, want)
			}
			return err
		}, nil, []string{"GetExecutionHistory", "GetExecutionHistory"}},
		{"Describe of an unknown execution", func() error {
			_, err := e.Describe(t.Context(), unknown)
			return err
		}, broker.ErrExecutionNotFound, []string{"DescribeExecution", "DescribeExecution"}},
		{"Stop of an unknown execution", func() error {
			return e.Stop(t.Context(), unknown, "why")
		}, broker.ErrExecutionNotFound, []string{"StopExecution", "StopExecution"}},
		{"History of an unknown execution", func() error {
			_, err := e.History(t.Context(), unknown)
			return err
		}, broker.ErrExecutionNotFound, []string{"GetExecutionHistory", "GetExecutionHistory"}},
	}
	for _, s := range steps {
		rec.reset()
		if err := s.call(); !errors.Is(err, s.want) || (s.want == nil && err != nil) {
			t.Errorf("%s = %v, want %v", s.what, err, s.want)
		}
		rec.expect(t, s.what, s.calls...)
	}
	if x, err := e.Describe(t.Context(), name); err != nil || x.Status != broker.ExecutionSucceeded || x.Cause != "" {
		t.Errorf("in the end: %+v, %v; want it still SUCCEEDED, no cause", x, err)
	}
}

// recorder records the input of every Step Functions call.
type recorder struct {
	mu    sync.Mutex
	calls []any
}

// record is an sfn.Options function that adds the recording middleware.
func (r *recorder) record(o *sfn.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("RecordCall",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (
				middleware.InitializeOutput, middleware.Metadata, error,
			) {
				r.mu.Lock()
				r.calls = append(r.calls, in.Parameters)
				r.mu.Unlock()
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	})
}

// reset returns the calls recorded and forgets them.
func (r *recorder) reset() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	calls := r.calls
	r.calls = nil
	return calls
}

func (r *recorder) expect(t *testing.T, what string, want ...string) {
	t.Helper()
	if got := names(r.reset()); !reflect.DeepEqual(got, want) {
		t.Errorf("%s called %q, want %q", what, got, want)
	}
}

// names names calls by operation: *sfn.StartExecutionInput is
// StartExecution.
func names(calls []any) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf("%T", c), "*sfn."), "Input")
	}
	return out
}

// newLocal returns a local engine running statemachines/ on a fresh
// database, with invoke as its worker.
func newLocal(t *testing.T, invoke local.Invoker) *local.Engine {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "engine.db"), 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	e, err := local.New(local.Options{Dir: statemachines, DB: db, Invoke: invoke})
	if err != nil {
		t.Fatalf("local.New: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

type historian interface {
	broker.Engine
	History(ctx context.Context, name string) ([]string, error)
}

func history(t *testing.T, e historian, name string) []string {
	t.Helper()
	states, err := e.History(t.Context(), name)
	if err != nil {
		t.Fatalf("History(%s): %v", name, err)
	}
	return states
}

// waitEnded waits until the execution is no longer RUNNING.
func waitEnded(t *testing.T, e broker.Engine, name string) broker.Execution {
	t.Helper()
	var x broker.Execution
	waittest.Until(t, func() error {
		var err error
		if x, err = e.Describe(t.Context(), name); err != nil {
			t.Fatalf("Describe(%s): %v", name, err)
		}
		if x.Status == broker.ExecutionRunning {
			return fmt.Errorf("execution %s still RUNNING", name)
		}
		return nil
	})
	return x
}

// waitInState waits until the last state the execution entered is state.
func waitInState(t *testing.T, e historian, name, state string) {
	t.Helper()
	waittest.Until(t, func() error {
		if states := history(t, e, name); len(states) == 0 || states[len(states)-1] != state {
			return fmt.Errorf("execution %s has not reached state %s (states entered: %q)", name, state, states)
		}
		return nil
	})
}

// sameJSON reports whether two JSON texts hold the same value; moto writes
// JSON the way Python does (", " and ": "), the local engine compactly.
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// The engine keeps its contract when the first answer of each of its
// calls that changes something (StartExecution, StopExecution) is lost
// after moto carried the call out, and the SDK tries it again, as it does
// against AWS after a 500 or a reset connection: a retried start finds its
// own execution (the same input), a retried stop an ended one.
func TestContractWhenEveryCallLosesItsFirstAnswer(t *testing.T) {
	mototest.Endpoint(t)
	var lostInAll atomic.Int64
	t.Cleanup(func() { // once every subtest has ended
		if n := lostInAll.Load(); n < 10 {
			t.Errorf("%d answers lost in all; want at least 10 (the contract starts and stops executions)", n)
		}
	})
	lossy := func(t *testing.T, r *motoRegion) *sfn.Client {
		lost := &mototest.LostAnswers{}
		lost.LoseEvery("StartExecution", "StopExecution")
		t.Cleanup(func() { lostInAll.Add(int64(len(lost.Lost()))) })
		return sfn.NewFromConfig(mototest.Config(t, r.name), func(o *sfn.Options) {
			o.APIOptions = append(o.APIOptions, lost.Register)
			o.Retryer = mototest.RetryAtOnce()
		})
	}
	enginetest.Run(t, motoHarness(lossy))
}
