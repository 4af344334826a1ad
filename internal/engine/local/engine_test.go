package local_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/engine/enginetest"
	"github.com/serverless-osb/broker/internal/engine/local"
	"github.com/serverless-osb/broker/internal/groupcommit"
	"github.com/serverless-osb/broker/internal/waittest"
)

// statemachines is the folder of the real definitions.
const statemachines = "../../../statemachines"

func TestContract(t *testing.T) {
	enginetest.Run(t, enginetest.Harness{
		InProcess: true,
		New: func(t *testing.T, s *enginetest.Script) enginetest.Engine {
			return newEngine(t, local.Options{Dir: statemachines, Invoke: s.Invoke})
		},
		NewWorkflow: func(t *testing.T, w broker.Workflow, asl []byte, echo enginetest.Invoker) enginetest.Engine {
			return newEngine(t, local.Options{Definitions: definitions(t, map[broker.Workflow]string{w: string(asl)}), Invoke: local.Invoker(echo)})
		},
	})
}

func openDB(t *testing.T, file string) *bbolt.DB {
	t.Helper()
	db, err := bbolt.Open(file, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatalf("open %s: %v", file, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// newEngine returns an engine on a fresh database (unless opts has one),
// closed when the test ends.
func newEngine(t *testing.T, opts local.Options) *local.Engine {
	t.Helper()
	if opts.DB == nil {
		opts.DB = openDB(t, filepath.Join(t.TempDir(), "engine.db"))
	}
	e, err := local.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// definitions parses workflows given as ASL text, by workflow name.
func definitions(t *testing.T, asl map[broker.Workflow]string) map[broker.Workflow]*local.Definition {
	t.Helper()
	defs := map[broker.Workflow]*local.Definition{}
	for w, text := range asl {
		d, err := local.Parse(string(w)+".asl.json", []byte(text))
		if err != nil {
			t.Fatalf("Parse %s: %v", w, err)
		}
		defs[w] = d
	}
	return defs
}

func start(t *testing.T, e *local.Engine, w broker.Workflow, name, input string) {
	t.Helper()
	if err := e.Start(context.Background(), w, name, json.RawMessage(input)); err != nil {
		t.Fatalf("Start(%s) = %v", name, err)
	}
}

func waitEnded(t *testing.T, e *local.Engine, name string) broker.Execution {
	t.Helper()
	var x broker.Execution
	waittest.Until(t, func() error {
		var err error
		if x, err = e.Describe(context.Background(), name); err != nil {
			t.Fatalf("Describe(%s) = %v", name, err)
		}
		if x.Status == broker.ExecutionRunning {
			return fmt.Errorf("execution %s still RUNNING (states %q)", name, history(t, e, name))
		}
		return nil
	})
	return x
}

func waitInState(t *testing.T, e *local.Engine, name, state string) {
	t.Helper()
	waittest.Until(t, func() error {
		if states := history(t, e, name); len(states) == 0 || states[len(states)-1] != state {
			return fmt.Errorf("execution %s has not reached %s (states %q)", name, state, states)
		}
		return nil
	})
}

func history(t *testing.T, e *local.Engine, name string) []string {
	t.Helper()
	states, err := e.History(context.Background(), name)
	if err != nil {
		t.Fatalf("History(%s) = %v", name, err)
	}
	return states
}

// blockingInvoker blocks every call until its context is done, and reports
// calls and cancellations.
type blockingInvoker struct {
	entered   chan struct{}
	cancelled chan struct{}
}

func newBlockingInvoker() *blockingInvoker {
	return &blockingInvoker{entered: make(chan struct{}, 10), cancelled: make(chan struct{}, 10)}
}

func (b *blockingInvoker) Invoke(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
	b.entered <- struct{}{}
	<-ctx.Done()
	b.cancelled <- struct{}{}
	return nil, ctx.Err()
}

// countingInvoker answers {} and counts calls.
type countingInvoker struct{ n atomic.Int32 }

func (c *countingInvoker) Invoke(context.Context, json.RawMessage) (json.RawMessage, error) {
	c.n.Add(1)
	return json.RawMessage(`{}`), nil
}

const waitThenTask = `{
  "StartAt": "W",
  "States": {
    "W": {"Type": "Wait", "SecondsPath": "$.wait", "Next": "T"},
    "T": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
          "Parameters": {"FunctionName": "f", "Payload": {"step": "t"}}, "ResultPath": null, "Next": "Done"},
    "Done": {"Type": "Succeed"}
  }
}`

const taskOnly = `{
  "StartAt": "T",
  "States": {
    "T": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
          "Parameters": {"FunctionName": "f", "Payload": {"step": "t"}}, "Next": "Done"},
    "Done": {"Type": "Succeed"}
  }
}`

func TestResumeAfterRestart(t *testing.T) {
	t.Parallel()
	t.Run("an execution waiting when the engine closes continues after a restart and succeeds", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "engine.db")
		defs := definitions(t, map[broker.Workflow]string{"w": waitThenTask})

		db1 := openDB(t, file)
		first := &countingInvoker{}
		e1 := newEngine(t, local.Options{DB: db1, Definitions: defs, Invoke: first.Invoke})
		start(t, e1, "w", "run-1", `{"wait":3600}`)
		waitInState(t, e1, "run-1", "W")
		// Close ends the hour's Wait at once: it does not wait for it.
		closed := make(chan error, 1)
		go func() { closed <- e1.Close() }()
		if err := waittest.Recv(t, closed, "Close during a Wait of an hour"); err != nil {
			t.Fatalf("Close = %v", err)
		}
		if x, _ := e1.Describe(context.Background(), "run-1"); x.Status != broker.ExecutionRunning {
			t.Errorf("after Close: status %s, want RUNNING (not aborted)", x.Status)
		}
		if err := db1.Close(); err != nil {
			t.Fatalf("close db: %v", err)
		}

		second := &countingInvoker{}
		rec := &sleepRecorder{} // the rest of the hour passes at once
		e2 := newEngine(t, local.Options{DB: openDB(t, file), Definitions: defs, Invoke: second.Invoke, Sleep: rec.Sleep})
		if err := e2.Resume(context.Background()); err != nil {
			t.Fatalf("Resume = %v", err)
		}
		x := waitEnded(t, e2, "run-1")
		if x.Status != broker.ExecutionSucceeded {
			t.Fatalf("status %s (%s: %s), want SUCCEEDED", x.Status, x.Error, x.Cause)
		}
		if d := rec.Delays(); len(d) != 1 || d[0] <= 0 || d[0] > time.Hour {
			t.Errorf("after the restart the Wait waited %v, want what was left of the hour", d)
		}
		if got, want := history(t, e2, "run-1"), []string{"W", "T", "Done"}; !reflect.DeepEqual(got, want) {
			t.Errorf("states entered = %q, want %q", got, want)
		}
		if first.n.Load() != 0 || second.n.Load() != 1 {
			t.Errorf("worker calls: %d before the restart, %d after; want 0 and 1", first.n.Load(), second.n.Load())
		}
	})

	t.Run("a resumed Wait only waits for the time left", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "engine.db")
		defs := definitions(t, map[broker.Workflow]string{"w": waitThenTask})
		t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

		db1 := openDB(t, file)
		e1 := newEngine(t, local.Options{DB: db1, Definitions: defs, Invoke: (&countingInvoker{}).Invoke, Now: func() time.Time { return t0 }})
		start(t, e1, "w", "run-1", `{"wait":60}`)
		waitInState(t, e1, "run-1", "W")
		_ = e1.Close()
		_ = db1.Close()

		rec := &sleepRecorder{}
		e2 := newEngine(t, local.Options{
			DB: openDB(t, file), Definitions: defs, Invoke: (&countingInvoker{}).Invoke,
			Now: func() time.Time { return t0.Add(50 * time.Second) }, Sleep: rec.Sleep,
		})
		if err := e2.Resume(context.Background()); err != nil {
			t.Fatalf("Resume = %v", err)
		}
		waitEnded(t, e2, "run-1")
		if got, want := rec.Delays(), []time.Duration{10 * time.Second}; !reflect.DeepEqual(got, want) {
			t.Errorf("after the restart the Wait waited %v, want %v", got, want)
		}
	})

	t.Run("an execution interrupted inside a Task runs that Task again after a restart", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "engine.db")
		defs := definitions(t, map[broker.Workflow]string{"w": taskOnly})

		db1 := openDB(t, file)
		blocked := newBlockingInvoker()
		e1 := newEngine(t, local.Options{DB: db1, Definitions: defs, Invoke: blocked.Invoke})
		start(t, e1, "w", "run-1", `{}`)
		waittest.Recv(t, blocked.entered, "the first call")
		if err := e1.Close(); err != nil {
			t.Fatalf("Close = %v", err)
		}
		waittest.Recv(t, blocked.cancelled, "cancelling the call on Close")
		_ = db1.Close()

		second := &countingInvoker{}
		e2 := newEngine(t, local.Options{DB: openDB(t, file), Definitions: defs, Invoke: second.Invoke})
		if err := e2.Resume(context.Background()); err != nil {
			t.Fatalf("Resume = %v", err)
		}
		if x := waitEnded(t, e2, "run-1"); x.Status != broker.ExecutionSucceeded {
			t.Fatalf("status %s (%s: %s), want SUCCEEDED", x.Status, x.Error, x.Cause)
		}
		if got, want := history(t, e2, "run-1"), []string{"T", "Done"}; !reflect.DeepEqual(got, want) {
			t.Errorf("states entered = %q, want %q (the Task once)", got, want)
		}
		if second.n.Load() != 1 {
			t.Errorf("worker called %d times after the restart, want 1", second.n.Load())
		}
	})

	t.Run("Resume leaves ended executions alone", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "engine.db")
		defs := definitions(t, map[broker.Workflow]string{"w": taskOnly})
		db1 := openDB(t, file)
		e1 := newEngine(t, local.Options{DB: db1, Definitions: defs, Invoke: (&countingInvoker{}).Invoke})
		start(t, e1, "w", "run-1", `{}`)
		waitEnded(t, e1, "run-1")
		_ = e1.Close()
		_ = db1.Close()

		second := &countingInvoker{}
		e2 := newEngine(t, local.Options{DB: openDB(t, file), Definitions: defs, Invoke: second.Invoke})
		if err := e2.Resume(context.Background()); err != nil {
			t.Fatalf("Resume = %v", err)
		}
		_ = e2.Close()
		if second.n.Load() != 0 {
			t.Errorf("worker called %d times, want 0", second.n.Load())
		}
		if x, _ := e2.Describe(context.Background(), "run-1"); x.Status != broker.ExecutionSucceeded {
			t.Errorf("status %s, want SUCCEEDED", x.Status)
		}
	})

	t.Run("Resume reports an execution whose workflow is no longer defined", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "engine.db")
		db1 := openDB(t, file)
		e1 := newEngine(t, local.Options{DB: db1, Definitions: definitions(t, map[broker.Workflow]string{"w": waitThenTask}), Invoke: (&countingInvoker{}).Invoke})
		start(t, e1, "w", "run-1", `{"wait":60}`)
		waitInState(t, e1, "run-1", "W")
		_ = e1.Close()
		_ = db1.Close()

		e2 := newEngine(t, local.Options{DB: openDB(t, file), Definitions: definitions(t, map[broker.Workflow]string{"other": taskOnly}), Invoke: (&countingInvoker{}).Invoke})
		if err := e2.Resume(context.Background()); !errors.Is(err, local.ErrUnknownWorkflow) || !strings.Contains(err.Error(), "run-1") {
			t.Errorf("Resume = %v, want ErrUnknownWorkflow naming run-1", err)
		}
		if x, _ := e2.Describe(context.Background(), "run-1"); x.Status != broker.ExecutionRunning {
			t.Errorf("status %s, want it left RUNNING", x.Status)
		}
	})
}

func TestStopCancelsTheWorker(t *testing.T) {
	t.Parallel()
	blocked := newBlockingInvoker()
	e := newEngine(t, local.Options{Definitions: definitions(t, map[broker.Workflow]string{"w": taskOnly}), Invoke: blocked.Invoke})
	start(t, e, "w", "run-1", `{}`)
	waittest.Recv(t, blocked.entered, "the call")

	if err := e.Stop(context.Background(), "run-1", "user asked"); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	waittest.Recv(t, blocked.cancelled, "cancelling the worker's context")
	_ = e.Close() // the goroutine has ended: what it left is final
	x, err := e.Describe(context.Background(), "run-1")
	if err != nil {
		t.Fatalf("Describe = %v", err)
	}
	if x.Status != broker.ExecutionAborted || x.Error != local.ErrorAborted || x.Cause != "user asked" {
		t.Errorf("got %s %q %q, want ABORTED %q %q", x.Status, x.Error, x.Cause, local.ErrorAborted, "user asked")
	}
	if got := history(t, e, "run-1"); !reflect.DeepEqual(got, []string{"T"}) {
		t.Errorf("states entered = %q, want [T]", got)
	}
}

func TestStartRules(t *testing.T) {
	t.Parallel()
	defs := definitions(t, map[broker.Workflow]string{"w": waitThenTask})
	invalid := []struct{ why, name string }{
		{"is empty", ""},
		{"is longer than 80 characters", strings.Repeat("a", 81)},
		{"has a space", "op 1"},
		{"has a tab", "op\t1"},
		{"has a bracket", "op[1]"},
		{"has a brace", "op{1}"},
		{"has an angle bracket", "op<1"},
		{"has a wildcard", "op*"},
		{"has a question mark", "op?"},
		{"has a control character", "op\x01"},
		{"has a slash", "a/b"},
		{"has a dollar", "a$b"},
	}
	for _, c := range invalid {
		t.Run("a name that "+c.why+" is refused", func(t *testing.T) {
			t.Parallel()
			e := newEngine(t, local.Options{Definitions: defs, Invoke: (&countingInvoker{}).Invoke})
			if err := e.Start(context.Background(), "w", c.name, json.RawMessage(`{"wait":0}`)); !errors.Is(err, local.ErrInvalidName) {
				t.Errorf("Start(%q) = %v, want ErrInvalidName", c.name, err)
			}
		})
	}

	t.Run("a name of 80 letters, digits, dashes and underscores is accepted", func(t *testing.T) {
		t.Parallel()
		e := newEngine(t, local.Options{Definitions: defs, Invoke: (&countingInvoker{}).Invoke})
		name := strings.Repeat("a", 70) + "-_09AZ.xyz"
		start(t, e, "w", name, `{"wait":0}`)
		if x := waitEnded(t, e, name); x.Status != broker.ExecutionSucceeded {
			t.Errorf("status %s, want SUCCEEDED", x.Status)
		}
	})

	t.Run("an unknown workflow is refused", func(t *testing.T) {
		t.Parallel()
		e := newEngine(t, local.Options{Definitions: defs, Invoke: (&countingInvoker{}).Invoke})
		if err := e.Start(context.Background(), "nope", "run-1", nil); !errors.Is(err, local.ErrUnknownWorkflow) {
			t.Errorf("Start = %v, want ErrUnknownWorkflow", err)
		}
	})

	t.Run("an input that is not JSON is refused", func(t *testing.T) {
		t.Parallel()
		e := newEngine(t, local.Options{Definitions: defs, Invoke: (&countingInvoker{}).Invoke})
		if err := e.Start(context.Background(), "w", "run-1", json.RawMessage(`{"wait":`)); err == nil {
			t.Error("Start with broken JSON = nil, want an error")
		}
		if _, err := e.Describe(context.Background(), "run-1"); !errors.Is(err, broker.ErrExecutionNotFound) {
			t.Errorf("Describe after a refused Start = %v, want ErrExecutionNotFound", err)
		}
	})

	t.Run("the same input written differently is the same input", func(t *testing.T) {
		t.Parallel()
		e := newEngine(t, local.Options{Definitions: defs, Invoke: (&countingInvoker{}).Invoke})
		start(t, e, "w", "run-1", `{"wait":60,"b":[1,2]}`)
		if err := e.Start(context.Background(), "w", "run-1", json.RawMessage(" {\n \"b\": [1, 2], \"wait\": 60 }")); err != nil {
			t.Errorf("second Start = %v, want nil", err)
		}
	})

	t.Run("the same name in another workflow is another execution, refused", func(t *testing.T) {
		t.Parallel()
		both := definitions(t, map[broker.Workflow]string{"w": waitThenTask, "v": waitThenTask})
		e := newEngine(t, local.Options{Definitions: both, Invoke: (&countingInvoker{}).Invoke})
		start(t, e, "w", "run-1", `{"wait":60}`)
		if err := e.Start(context.Background(), "v", "run-1", json.RawMessage(`{"wait":60}`)); !errors.Is(err, broker.ErrExecutionExists) {
			t.Errorf("Start in another workflow = %v, want ErrExecutionExists", err)
		}
	})

	t.Run("an empty input starts with an empty object", func(t *testing.T) {
		t.Parallel()
		e := newEngine(t, local.Options{Definitions: definitions(t, map[broker.Workflow]string{"w": taskOnly}), Invoke: (&countingInvoker{}).Invoke})
		start(t, e, "w", "run-1", "")
		if x := waitEnded(t, e, "run-1"); string(x.Input) != `{}` {
			t.Errorf("input = %s, want {}", x.Input)
		}
	})

	t.Run("Start and Resume after Close are refused", func(t *testing.T) {
		t.Parallel()
		e := newEngine(t, local.Options{Definitions: defs, Invoke: (&countingInvoker{}).Invoke})
		_ = e.Close()
		if err := e.Start(context.Background(), "w", "run-1", nil); !errors.Is(err, local.ErrClosed) {
			t.Errorf("Start = %v, want ErrClosed", err)
		}
		if err := e.Resume(context.Background()); !errors.Is(err, local.ErrClosed) {
			t.Errorf("Resume = %v, want ErrClosed", err)
		}
	})
}

func TestNewRefusesADirectoryWithABadDefinition(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "good.asl.json"), taskOnly)
	writeFile(t, filepath.Join(dir, "bad.asl.json"), `{"StartAt":"M","States":{"M":{"Type":"Map","End":true}}}`)
	_, err := local.New(local.Options{Dir: dir, DB: openDB(t, filepath.Join(t.TempDir(), "db")), Invoke: (&countingInvoker{}).Invoke})
	if err == nil || !strings.Contains(err.Error(), "bad.asl.json") || !strings.Contains(err.Error(), `"M"`) {
		t.Errorf("New = %v, want an error naming bad.asl.json and state M", err)
	}
}

// TestCloseLeavesNoGoroutine is not parallel: it counts goroutines.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	blocked := newBlockingInvoker()
	defs := definitions(t, map[broker.Workflow]string{"w": waitThenTask, "t": taskOnly})
	db := openDB(t, filepath.Join(t.TempDir(), "engine.db"))
	e, err := local.New(local.Options{DB: db, Definitions: defs, Invoke: blocked.Invoke})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		start(t, e, "w", name, `{"wait":3600}`)
	}
	start(t, e, "t", "d", `{}`)
	waittest.Recv(t, blocked.entered, "the call")
	for _, name := range []string{"a", "b", "c"} {
		waitInState(t, e, name, "W")
	}

	closed := make(chan struct{})
	go func() { _ = e.Close(); close(closed) }()
	waittest.Recv(t, closed, "Close")

	waittest.Until(t, func() error {
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			return fmt.Errorf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
		}
		return nil
	})
}

func writeFile(t *testing.T, file, text string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestWorkerCallsRunOnKeptGoroutines: one Task after another, each runs
// on a goroutine a call before it ran on, whose stack has grown (run): on
// a new goroutine each, a call grew its stack through every doubling.
func TestWorkerCallsRunOnKeptGoroutines(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	ran := map[string]int{} // goroutine → calls
	invoke := func(context.Context, json.RawMessage) (json.RawMessage, error) {
		buf := make([]byte, 64)
		id, _, _ := strings.Cut(string(buf[:runtime.Stack(buf, false)]), " [") // "goroutine N"
		mu.Lock()
		ran[id]++
		mu.Unlock()
		return json.RawMessage(`{}`), nil
	}
	e := newEngine(t, local.Options{Invoke: invoke, Definitions: definitions(t, map[broker.Workflow]string{"w": taskOnly})})
	const calls = 10
	for i := range calls {
		name := fmt.Sprintf("run-%d", i)
		start(t, e, "w", name, `{}`)
		if x := waitEnded(t, e, name); x.Status != broker.ExecutionSucceeded {
			t.Fatalf("%s: %s %s %s, want SUCCEEDED", name, x.Status, x.Error, x.Cause)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// One runner takes them all unless a call came in the moment its
	// runner handed an answer over; a goroutine each would be ten.
	if len(ran) > 2 {
		t.Errorf("%d worker calls, one after another, ran on %d goroutines: %v; want them on one or two kept goroutines", calls, len(ran), ran)
	}
}

func TestMaxTasksBoundsTheWorkerCallsInFlight(t *testing.T) {
	t.Parallel()
	var inFlight, most atomic.Int32
	entered := make(chan string, 3)
	release := make(chan struct{})
	invoke := func(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		entered <- string(p)
		select {
		case <-release:
			return json.RawMessage(`{}`), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	const slowTask = `{
  "StartAt": "T",
  "States": {
    "T": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "TimeoutSeconds": 1,
          "Parameters": {"FunctionName": "f", "Payload.$": "$.name"}, "Next": "Done"},
    "Done": {"Type": "Succeed"}
  }
}`
	e := newEngine(t, local.Options{MaxTasks: 1, Invoke: invoke,
		Definitions: definitions(t, map[broker.Workflow]string{"w": taskOnly, "slow": slowTask})})
	start(t, e, "w", "run-1", `{}`)
	waittest.Recv(t, entered, "the first call")
	start(t, e, "w", "run-2", `{}`)
	// run-3's Task waits for the slot longer than its TimeoutSeconds: the
	// wait counts, and its worker is never called.
	start(t, e, "slow", "run-3", `{"name":"run-3"}`)
	if x := waitEnded(t, e, "run-3"); x.Status != broker.ExecutionFailed || x.Error != "States.Timeout" {
		t.Errorf("run-3: %s %s, want FAILED %q (its Task waited for a slot past its timeout)", x.Status, x.Error, "States.Timeout")
	}
	select {
	case p := <-entered:
		t.Fatalf("a second worker call (%s) began while the first held the only slot", p)
	default:
	}
	release <- struct{}{} // run-1's call returns; run-2's may begin
	waittest.Recv(t, entered, "run-2's call, once the slot is free")
	release <- struct{}{}
	for _, name := range []string{"run-1", "run-2"} {
		if x := waitEnded(t, e, name); x.Status != broker.ExecutionSucceeded {
			t.Errorf("%s: %s %s %s, want SUCCEEDED", name, x.Status, x.Error, x.Cause)
		}
	}
	if m := most.Load(); m != 1 {
		t.Errorf("%d worker calls were in flight at once, want at most 1", m)
	}
}

// TestAWaitingExecutionHoldsNoGoroutine is not parallel: it counts
// goroutines. An execution spends most of its life in a Wait (for a
// driver's change to be done); the broker under load holds thousands, and
// each held a goroutine, its stack and its contexts for the whole wait.
func TestAWaitingExecutionHoldsNoGoroutine(t *testing.T) {
	const n = 300
	defs := definitions(t, map[broker.Workflow]string{"w": waitThenTask})
	calls := &countingInvoker{}
	e := newEngine(t, local.Options{Definitions: defs, Invoke: calls.Invoke})
	before := runtime.NumGoroutine()
	for i := range n {
		start(t, e, "w", fmt.Sprintf("run-%d", i), `{"wait":3600}`)
	}
	for i := range n {
		waitInState(t, e, fmt.Sprintf("run-%d", i), "W")
	}
	waittest.Until(t, func() error {
		if g := runtime.NumGoroutine(); g > before+n/10 {
			return fmt.Errorf("%d goroutines with %d executions waiting, %d before they started", g, n, before)
		}
		return nil
	})

	// A parked execution is still RUNNING, stops as any other, and stays
	// stopped.
	if x, err := e.Describe(context.Background(), "run-0"); err != nil || x.Status != broker.ExecutionRunning {
		t.Fatalf("Describe(run-0) = %s, %v; want RUNNING", x.Status, err)
	}
	if err := e.Stop(context.Background(), "run-0", "user asked"); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	if x, _ := e.Describe(context.Background(), "run-0"); x.Status != broker.ExecutionAborted || x.Cause != "user asked" {
		t.Errorf("after Stop: %s %q, want ABORTED %q", x.Status, x.Cause, "user asked")
	}
	if got := calls.n.Load(); got != 0 {
		t.Errorf("%d worker calls while every execution waits an hour, want 0", got)
	}
}

func TestAParkedExecutionContinuesWhenItsWaitEnds(t *testing.T) {
	t.Parallel()
	calls := &countingInvoker{}
	e := newEngine(t, local.Options{Definitions: definitions(t, map[broker.Workflow]string{"w": waitThenTask}), Invoke: calls.Invoke})
	// One second is the shortest Wait that parks; the engine's own timer
	// ends it (no Sleep option).
	start(t, e, "w", "run-1", `{"wait":1}`)
	x := waitEnded(t, e, "run-1")
	if x.Status != broker.ExecutionSucceeded {
		t.Fatalf("status %s (%s: %s), want SUCCEEDED", x.Status, x.Error, x.Cause)
	}
	if got, want := history(t, e, "run-1"), []string{"W", "T", "Done"}; !reflect.DeepEqual(got, want) {
		t.Errorf("states entered = %q, want %q", got, want)
	}
	if got := calls.n.Load(); got != 1 {
		t.Errorf("%d worker calls, want 1", got)
	}
}

func TestStartKnowsTheNamesAnEarlierProcessStored(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "engine.db")
	defs := definitions(t, map[broker.Workflow]string{"w": taskOnly})
	// Names of several first bytes, each the greatest of its byte or not.
	names := []string{"0a", "0b", "01a22340-2cde-78bd-8266-14d070f20072", "d1-1", "d1-2", "z"}
	db1 := openDB(t, file)
	e1 := newEngine(t, local.Options{DB: db1, Definitions: defs, Invoke: (&countingInvoker{}).Invoke})
	for _, name := range names {
		start(t, e1, "w", name, `{"n":1}`)
		waitEnded(t, e1, name)
	}
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}
	_ = db1.Close()

	second := &countingInvoker{}
	e2 := newEngine(t, local.Options{DB: openDB(t, file), Definitions: defs, Invoke: second.Invoke})
	for _, name := range names {
		// Another input first: were the stored one not found, it would
		// start.
		if err := e2.Start(context.Background(), "w", name, json.RawMessage(`{"n":2}`)); !errors.Is(err, broker.ErrExecutionExists) {
			t.Errorf("Start(%s) again with another input = %v, want ErrExecutionExists", name, err)
		}
		if err := e2.Start(context.Background(), "w", name, json.RawMessage(`{"n":1}`)); err != nil {
			t.Errorf("Start(%s) again with its input = %v, want nil", name, err)
		}
	}
	if second.n.Load() != 0 {
		t.Errorf("the worker was called %d times: a stored execution ran again", second.n.Load())
	}
	start(t, e2, "w", "d1-3", `{}`)
	if x := waitEnded(t, e2, "d1-3"); x.Status != broker.ExecutionSucceeded {
		t.Errorf("a new name beside stored ones: status %s, want SUCCEEDED", x.Status)
	}
}

func TestDeleteEndedRemovesOnlyTheExecutionsThatEndedBefore(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "engine.db")
	db := openDB(t, file)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var now atomic.Pointer[time.Time]
	now.Store(&t0)
	commit := groupcommit.New(db)
	// A Task of workflow "run" runs until the engine closes.
	invoke := func(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
		if strings.Contains(string(p), "run-on") {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return json.RawMessage(`{}`), nil
	}
	e := newEngine(t, local.Options{DB: db, Committer: commit, Invoke: invoke,
		Definitions: definitions(t, map[broker.Workflow]string{"task": taskOnly, "run": strings.Replace(taskOnly, `"step": "t"`, `"step": "run-on"`, 1)}),
		Now:         func() time.Time { return *now.Load() }})
	ctx := context.Background()
	for _, name := range []string{"old-1", "old-2"} {
		start(t, e, "task", name, `{}`)
		waitEnded(t, e, name)
	}
	start(t, e, "run", "running", `{}`) // never removed, however old
	waitInState(t, e, "running", "T")
	later := t0.Add(40 * 24 * time.Hour)
	now.Store(&later)
	start(t, e, "task", "new", `{}`)
	waitEnded(t, e, "new")

	// An ended execution is written with the next commit, and leaves memory
	// once its goroutine is gone: until then it is held, and kept.
	deleted := 0
	waittest.Until(t, func() error {
		if err := commit.Flush(); err != nil {
			t.Fatalf("Flush = %v", err)
		}
		n, err := e.DeleteEnded(ctx, later.Add(-30*24*time.Hour))
		if err != nil {
			t.Fatalf("DeleteEnded = %v", err)
		}
		if deleted += n; deleted < 2 {
			return fmt.Errorf("deleted %d of the 2 executions that ended before", deleted)
		}
		return nil
	})
	if deleted != 2 {
		t.Errorf("deleted %d, want 2 (old-1, old-2)", deleted)
	}
	for _, name := range []string{"old-1", "old-2"} {
		if _, err := e.Describe(ctx, name); !errors.Is(err, broker.ErrExecutionNotFound) {
			t.Errorf("Describe(%s) after DeleteEnded = %v, want ErrExecutionNotFound", name, err)
		}
	}
	if x, err := e.Describe(ctx, "running"); err != nil || x.Status != broker.ExecutionRunning {
		t.Errorf("Describe(running) = %s, %v; want RUNNING, kept", x.Status, err)
	}
	if x, err := e.Describe(ctx, "new"); err != nil || x.Status != broker.ExecutionSucceeded {
		t.Errorf("Describe(new) = %s, %v; want SUCCEEDED, kept (it ended after)", x.Status, err)
	}
	if n, err := e.DeleteEnded(ctx, later.Add(-30*24*time.Hour)); n != 0 || err != nil {
		t.Errorf("DeleteEnded again = %d, %v; want 0, nil", n, err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	var stored []string
	if err := db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("executions")).ForEach(func(k, _ []byte) error {
			stored = append(stored, string(k))
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"new", "running"}; !reflect.DeepEqual(stored, want) {
		t.Errorf("the file holds %q, want %q", stored, want)
	}
	// The name is free again, as Step Functions' is once its execution's
	// history is gone.
	e2 := newEngine(t, local.Options{DB: db, Invoke: (&countingInvoker{}).Invoke,
		Definitions: definitions(t, map[broker.Workflow]string{"task": taskOnly})})
	start(t, e2, "task", "old-1", `{"another":"input"}`)
	if x := waitEnded(t, e2, "old-1"); x.Status != broker.ExecutionSucceeded {
		t.Errorf("old-1 started again: %s", x.Status)
	}
	// An execution an earlier process left running, not resumed yet, is
	// kept whatever the time; one that ended, not.
	if n, err := e2.DeleteEnded(ctx, later.Add(time.Hour)); n != 1 || err != nil {
		t.Errorf("DeleteEnded in a second process = %d, %v; want 1 (new), nil", n, err)
	}
	if x, err := e2.Describe(ctx, "running"); err != nil || x.Status != broker.ExecutionRunning {
		t.Errorf("Describe(running) in a second process = %s, %v; want RUNNING, kept", x.Status, err)
	}
}
