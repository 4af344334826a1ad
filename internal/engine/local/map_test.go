package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/engine/local"
	"github.com/serverless-osb/broker/internal/waittest"
)

// echoItem is an iteration of one Task that sends its input to the worker.
const echoItem = `{"StartAt":"T","States":{"T":{` + `"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Parameters":{"FunctionName":"f","Payload.$":"$"},"ResultSelector":{"echo.$":"$.Payload"},"End":true}}}`

// failing fails the calls whose payload has "fail": true with the error
// named by its "error", and echoes the others.
func failing(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
	var in struct {
		Fail  bool   `json:"fail"`
		Error string `json:"error"`
	}
	_ = json.Unmarshal(p, &in)
	if in.Fail {
		return nil, &namedError{in.Error, "item failed"}
	}
	return p, nil
}

func TestMap(t *testing.T) {
	t.Parallel()
	runCases(t, []runCase{
		{
			name: "each item of ItemsPath runs the iteration with the input ItemSelector builds, and the outputs come in item order",
			asl: `{"StartAt":"M","States":{"M":{"Type":"Map","ItemsPath":"$.items",
			        "ItemSelector":{"value.$":"$$.Map.Item.Value","index.$":"$$.Map.Item.Index","plan.$":"$.plan","name.$":"$$.Execution.Name"},
			        "ItemProcessor":{"ProcessorConfig":{"Mode":"INLINE"},"StartAt":"T","States":{"T":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke",
			          "Parameters":{"FunctionName":"f","Payload.$":"$"},"ResultSelector":{"echo.$":"$.Payload"},"End":true}}},"End":true}}}`,
			input:  `{"items":["a","b","c"],"plan":"p"}`,
			status: broker.ExecutionSucceeded,
			output: `[{"echo":{"value":"a","index":0,"plan":"p","name":"exec-1"}},{"echo":{"value":"b","index":1,"plan":"p","name":"exec-1"}},{"echo":{"value":"c","index":2,"plan":"p","name":"exec-1"}}]`,
		},
		{
			name: "the older Parameters and Iterator of a Map mean ItemSelector and ItemProcessor",
			asl: `{"StartAt":"M","States":{"M":{"Type":"Map","ItemsPath":"$.items","Parameters":{"v.$":"$$.Map.Item.Value","i.$":"$$.Map.Item.Index"},
			        "Iterator":{"StartAt":"P","States":{"P":{"Type":"Pass","End":true}}},"End":true}}}`,
			input:  `{"items":[{"x":1},{"x":2}]}`,
			status: broker.ExecutionSucceeded,
			output: `[{"v":{"x":1},"i":0},{"v":{"x":2},"i":1}]`,
		},
		{
			name: "without ItemSelector each iteration gets its item; InputPath, ResultSelector, ResultPath and OutputPath apply as to a Task",
			asl: `{"StartAt":"M","States":{"M":{"Type":"Map","InputPath":"$.fleet","ItemsPath":"$.instances",
			        "ItemProcessor":` + echoItem + `,"ResultSelector":{"results.$":"$"},"ResultPath":"$.upgrade","OutputPath":"$.upgrade","End":true}}}`,
			input:  `{"fleet":{"instances":[{"id":"i-1"},{"id":"i-2"}]},"other":1}`,
			status: broker.ExecutionSucceeded,
			output: `{"results":[{"echo":{"id":"i-1"}},{"echo":{"id":"i-2"}}]}`,
		},
		{
			name: "ResultPath places the array in the Map's raw input",
			asl: `{"StartAt":"M","States":{"M":{"Type":"Map","InputPath":"$.fleet",
			        "ItemProcessor":{"StartAt":"P","States":{"P":{"Type":"Pass","Result":"done","End":true}}},"ResultPath":"$.results","End":true}}}`,
			input:  `{"fleet":[1,2],"other":1}`,
			status: broker.ExecutionSucceeded,
			output: `{"fleet":[1,2],"other":1,"results":["done","done"]}`,
		},
		{
			name:   "no items give an empty array",
			asl:    `{"StartAt":"M","States":{"M":{"Type":"Map","ItemProcessor":` + echoItem + `,"End":true}}}`,
			input:  `[]`,
			status: broker.ExecutionSucceeded,
			output: `[]`,
			noCall: true,
		},
		{
			name:    "ItemsPath that selects no array fails with States.Runtime",
			asl:     `{"StartAt":"M","States":{"M":{"Type":"Map","ItemsPath":"$.items","ItemProcessor":` + echoItem + `,"Catch":[{"ErrorEquals":["States.ALL"],"Next":"C"}],"End":true},"C":{"Type":"Succeed"}}}`,
			input:   `{"items":{"a":1}}`,
			status:  broker.ExecutionFailed,
			errName: "States.Runtime",
			cause:   "must be an array",
			noCall:  true,
		},
		{
			name:    "ItemsPath that selects nothing fails with States.Runtime",
			asl:     `{"StartAt":"M","States":{"M":{"Type":"Map","ItemsPath":"$.items","ItemProcessor":` + echoItem + `,"End":true}}}`,
			input:   `{}`,
			status:  broker.ExecutionFailed,
			errName: "States.Runtime",
			cause:   "ItemsPath",
			noCall:  true,
		},
		{
			name: "an iteration that fails fails the Map, and the execution, with its error and cause",
			asl: `{"StartAt":"M","States":{"M":{"Type":"Map","MaxConcurrency":1,"ItemProcessor":{"StartAt":"C","States":{
			        "C":{"Type":"Choice","Choices":[{"Variable":"$.broken","BooleanEquals":true,"Next":"Broken"}],"Default":"Ok"},
			        "Ok":{"Type":"Succeed"},"Broken":{"Type":"Fail","Error":"InstanceBroken","Cause":"cannot upgrade"}}},"Next":"After"},"After":{"Type":"Succeed"}}}`,
			input:   `[{"broken":false},{"broken":true},{"broken":false}]`,
			status:  broker.ExecutionFailed,
			errName: "InstanceBroken",
			cause:   "cannot upgrade",
			// One at a time: the third item never runs.
			states: []string{"M", "C", "Ok", "C", "Broken"},
		},
		{
			name: "a Catch of the Map handles an iteration's failure",
			asl: `{"StartAt":"M","States":{"M":{"Type":"Map","ItemsPath":"$.items","ItemProcessor":` + echoItem + `,
			        "Catch":[{"ErrorEquals":["ItemFailed"],"ResultPath":"$.error","Next":"Caught"}],"Next":"After"},
			        "Caught":{"Type":"Pass","End":true},"After":{"Type":"Succeed"}}}`,
			input:  `{"items":[{"n":1},{"fail":true,"error":"ItemFailed"},{"n":3}]}`,
			invoke: failing,
			status: broker.ExecutionSucceeded,
			output: `{"items":[{"n":1},{"fail":true,"error":"ItemFailed"},{"n":3}],"error":{"Error":"ItemFailed","Cause":"item failed"}}`,
		},
		{
			name: "a Catch inside an iteration handles the failure there and the Map goes on",
			asl: `{"StartAt":"M","States":{"M":{"Type":"Map","ItemProcessor":{"StartAt":"T","States":{
			        "T":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Parameters":{"FunctionName":"f","Payload.$":"$"},"ResultSelector":{"ok.$":"$.Payload"},
			             "Catch":[{"ErrorEquals":["ItemFailed"],"ResultPath":"$.error","Next":"Skipped"}],"End":true},
			        "Skipped":{"Type":"Pass","Parameters":{"skipped.$":"$.error.Error"},"End":true}}},"End":true}}}`,
			input:  `[{"n":1},{"fail":true,"error":"ItemFailed"}]`,
			invoke: failing,
			status: broker.ExecutionSucceeded,
			output: `[{"ok":{"n":1}},{"skipped":"ItemFailed"}]`,
		},
		{
			name: "a Map within an iteration runs its own items",
			asl: `{"StartAt":"Outer","States":{"Outer":{"Type":"Map","ItemsPath":"$.groups","ItemSelector":{"group.$":"$$.Map.Item.Index","members.$":"$$.Map.Item.Value"},
			        "ItemProcessor":{"StartAt":"Inner","States":{"Inner":{"Type":"Map","ItemsPath":"$.members","ItemSelector":{"g.$":"$.group","m.$":"$$.Map.Item.Value"},
			          "ItemProcessor":{"StartAt":"P","States":{"P":{"Type":"Pass","End":true}}},"End":true}}},"End":true}}}`,
			input:  `{"groups":[["a","b"],["c"]]}`,
			status: broker.ExecutionSucceeded,
			output: `[[{"g":0,"m":"a"},{"g":0,"m":"b"}],[{"g":1,"m":"c"}]]`,
		},
		{
			name: "the states iterations enter are in the execution's History",
			asl: `{"StartAt":"M","States":{"M":{"Type":"Map","MaxConcurrency":1,"ItemProcessor":{"StartAt":"A","States":{"A":{"Type":"Pass","Next":"B"},"B":{"Type":"Pass","End":true}}},
			        "Next":"After"},"After":{"Type":"Succeed"}}}`,
			input:  `[1,2]`,
			status: broker.ExecutionSucceeded,
			output: `[1,2]`,
			states: []string{"M", "A", "B", "A", "B", "After"},
		},
	})
}

func TestMapRetry(t *testing.T) {
	t.Parallel()
	// The first call of item 1 fails: the Map is retried, and runs every
	// item again, as on Step Functions.
	var mu sync.Mutex
	calls := map[string]int{}
	invoke := func(_ context.Context, p json.RawMessage) (json.RawMessage, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[string(p)]++
		if string(p) == `1` && calls[string(p)] == 1 {
			return nil, &namedError{"Busy", "instance busy"}
		}
		return p, nil
	}
	rec := &sleepRecorder{}
	asl := `{"StartAt":"M","States":{"M":{"Type":"Map","MaxConcurrency":1,"ItemProcessor":` + echoItem + `,
	          "Retry":[{"ErrorEquals":["Busy"],"IntervalSeconds":7,"MaxAttempts":1}],"End":true}}}`
	e := newEngine(t, local.Options{Definitions: definitions(t, map[broker.Workflow]string{"w": asl}), Invoke: invoke, Sleep: rec.Sleep})
	start(t, e, "w", "exec-1", `[0,1,2]`)
	x := waitEnded(t, e, "exec-1")
	checkExecution(t, x, broker.ExecutionSucceeded, "", "", `[{"echo":0},{"echo":1},{"echo":2}]`)
	if got, want := rec.Delays(), []time.Duration{7 * time.Second}; !reflect.DeepEqual(got, want) {
		t.Errorf("waited %v before the retry, want %v", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := map[string]int{"0": 2, "1": 2, "2": 1}; !reflect.DeepEqual(calls, want) {
		t.Errorf("calls per item = %v, want %v (item 0 again on the retry, item 2 only then)", calls, want)
	}
}

// gate is a worker that holds every call until the test releases one, and
// counts the calls in flight.
type gate struct {
	mu       sync.Mutex
	inFlight int
	most     int
	release  chan struct{}
}

func newGate() *gate { return &gate{release: make(chan struct{})} }

func (g *gate) Invoke(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
	g.mu.Lock()
	g.inFlight++
	g.most = max(g.most, g.inFlight)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	select {
	case <-g.release:
		return p, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (g *gate) counts() (inFlight, most int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight, g.most
}

func TestMapMaxConcurrency(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		field string
		items int
		want  int
	}{
		{"MaxConcurrency bounds the iterations running at once", `"MaxConcurrency":3,`, 10, 3},
		{"MaxConcurrency 1 runs the items one by one", `"MaxConcurrency":1,`, 4, 1},
		{"MaxConcurrency 0 runs at most 40 at once, as Step Functions' inline Map", `"MaxConcurrency":0,`, 45, 40},
		{"no MaxConcurrency runs at most 40 at once", ``, 45, 40},
		{"a MaxConcurrency over 40 runs at most 40 at once", `"MaxConcurrency":100,`, 45, 40},
		{"fewer items than MaxConcurrency all run at once", `"MaxConcurrency":5,`, 2, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := newGate()
			asl := `{"StartAt":"M","States":{"M":{"Type":"Map",` + c.field + `"ItemProcessor":` + echoItem + `,"End":true}}}`
			e := newEngine(t, local.Options{Definitions: definitions(t, map[broker.Workflow]string{"w": asl}), Invoke: g.Invoke, MaxTasks: 100})
			items := make([]int, c.items)
			for i := range items {
				items[i] = i
			}
			input, _ := json.Marshal(items)
			start(t, e, "w", "exec-1", string(input))
			// Release the calls one at a time, each once as many are in
			// flight as may be: a call beyond the bound would show in most.
			for left := c.items; left > 0; left-- {
				waittest.Until(t, func() error {
					n, _ := g.counts()
					if n > c.want {
						t.Fatalf("%d calls in flight, over the bound (%d)", n, c.want)
					}
					if n != min(c.want, left) {
						return fmt.Errorf("%d calls in flight, want %d", n, min(c.want, left))
					}
					return nil
				})
				g.release <- struct{}{}
			}
			x := waitEnded(t, e, "exec-1")
			var out []map[string]int
			if err := json.Unmarshal(x.Output, &out); err != nil || len(out) != c.items {
				t.Fatalf("output %s: want %d results (%v)", x.Output, c.items, err)
			}
			for i, r := range out {
				if r["echo"] != i {
					t.Fatalf("output %s is not in item order", x.Output)
				}
			}
			if _, most := g.counts(); most != c.want {
				t.Errorf("at most %d iterations ran at once, want %d", most, c.want)
			}
		})
	}
}

func TestMapFailureCancelsTheOtherIterations(t *testing.T) {
	t.Parallel()
	blocked := newBlockingInvoker()
	invoke := func(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
		if string(p) == `"fail"` {
			// Fail once the others are in their calls (not with
			// waittest.Recv: this is not the test's goroutine).
			for range 2 {
				select {
				case <-blocked.entered:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return nil, &namedError{"ItemFailed", "bad item"}
		}
		return blocked.Invoke(ctx, p)
	}
	asl := `{"StartAt":"M","States":{"M":{"Type":"Map","ItemProcessor":` + echoItem + `,"End":true}}}`
	e := newEngine(t, local.Options{Definitions: definitions(t, map[broker.Workflow]string{"w": asl}), Invoke: invoke})
	start(t, e, "w", "exec-1", `["a","fail","b"]`)
	x := waitEnded(t, e, "exec-1")
	checkExecution(t, x, broker.ExecutionFailed, "ItemFailed", "bad item", "")
	for range 2 {
		waittest.Recv(t, blocked.cancelled, "the cancellation of the other iterations' calls")
	}
}

func TestMapStopCancelsEveryIteration(t *testing.T) {
	t.Parallel()
	blocked := newBlockingInvoker()
	asl := `{"StartAt":"M","States":{"M":{"Type":"Map","ItemProcessor":` + echoItem + `,"End":true}}}`
	e := newEngine(t, local.Options{Definitions: definitions(t, map[broker.Workflow]string{"w": asl}), Invoke: blocked.Invoke})
	start(t, e, "w", "exec-1", `[1,2,3]`)
	for range 3 {
		waittest.Recv(t, blocked.entered, "the iterations' calls")
	}
	if err := e.Stop(context.Background(), "exec-1", "enough"); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	for range 3 {
		waittest.Recv(t, blocked.cancelled, "the cancellation of every iteration's call")
	}
	if x := waitEnded(t, e, "exec-1"); x.Status != broker.ExecutionAborted {
		t.Errorf("status %s, want ABORTED", x.Status)
	}
}

// pollUntilDone answers the "poll" step of item i with done once it was
// asked polls[i] times.
type pollUntilDone struct {
	mu    sync.Mutex
	polls map[string]int
	asked map[string]int
}

func (p *pollUntilDone) Invoke(_ context.Context, payload json.RawMessage) (json.RawMessage, error) {
	var in struct{ ID string }
	if err := json.Unmarshal(payload, &in); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked[in.ID]++
	return json.Marshal(map[string]any{"done": p.asked[in.ID] >= p.polls[in.ID], "retry_after": 3600})
}

func TestMapWaitUsesTheEngineClock(t *testing.T) {
	t.Parallel()
	// Each item polls its worker, waiting what the worker says between
	// polls (an hour): the engine's Sleep and Now, not the real clock.
	asl := `{"StartAt":"M","States":{"M":{"Type":"Map","ItemSelector":{"id.$":"$$.Map.Item.Value"},"ItemProcessor":{"StartAt":"Poll","States":{
	  "Poll":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Parameters":{"FunctionName":"f","Payload":{"id.$":"$.id"}},
	          "ResultSelector":{"done.$":"$.Payload.done","retry_after.$":"$.Payload.retry_after"},"ResultPath":"$.progress","Next":"Done?"},
	  "Done?":{"Type":"Choice","Choices":[{"Variable":"$.progress.done","BooleanEquals":true,"Next":"Upgraded"}],"Default":"Wait"},
	  "Wait":{"Type":"Wait","SecondsPath":"$.progress.retry_after","Next":"Poll"},
	  "Upgraded":{"Type":"Pass","InputPath":"$.id","End":true}}},"End":true}}}`
	worker := &pollUntilDone{polls: map[string]int{"a": 3, "b": 1, "c": 2}, asked: map[string]int{}}
	rec := &sleepRecorder{}
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	e := newEngine(t, local.Options{
		Definitions: definitions(t, map[broker.Workflow]string{"w": asl}), Invoke: worker.Invoke,
		Now: func() time.Time { return t0 }, Sleep: rec.Sleep,
	})
	start(t, e, "w", "exec-1", `["a","b","c"]`)
	x := waitEnded(t, e, "exec-1")
	checkExecution(t, x, broker.ExecutionSucceeded, "", "", `["a","b","c"]`)
	// a waits twice, c once, b never.
	if got, want := rec.Delays(), []time.Duration{time.Hour, time.Hour, time.Hour}; !reflect.DeepEqual(got, want) {
		t.Errorf("waited %v, want %v", got, want)
	}
}

func TestMapResumedAfterACrash(t *testing.T) {
	t.Parallel()
	// Items 0 and 1 are done and item 2 is in its call when the engine
	// stops; the next process runs the Map again from its input (every
	// Task is idempotent) and the execution ends with every item's output.
	file := filepath.Join(t.TempDir(), "engine.db")
	asl := `{"StartAt":"Before","States":{"Before":{"Type":"Pass","Next":"M"},
	  "M":{"Type":"Map","MaxConcurrency":1,"ItemsPath":"$.items","ItemProcessor":` + echoItem + `,"ResultPath":"$.results","Next":"Done"},
	  "Done":{"Type":"Succeed"}}}`
	defs := definitions(t, map[broker.Workflow]string{"w": asl})

	db1 := openDB(t, file)
	blocked := newBlockingInvoker()
	var mu sync.Mutex
	var first []string
	e1 := newEngine(t, local.Options{DB: db1, Definitions: defs, Invoke: func(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
		mu.Lock()
		first = append(first, string(p))
		mu.Unlock()
		if string(p) == `"c"` {
			return blocked.Invoke(ctx, p)
		}
		return p, nil
	}})
	start(t, e1, "w", "run-1", `{"items":["a","b","c","d"]}`)
	waittest.Recv(t, blocked.entered, "the call of item 2")
	if err := e1.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	waittest.Recv(t, blocked.cancelled, "cancelling item 2's call on Close")
	if x, _ := e1.Describe(context.Background(), "run-1"); x.Status != broker.ExecutionRunning {
		t.Fatalf("after Close: status %s, want RUNNING", x.Status)
	}
	_ = db1.Close()

	var second []string
	e2 := newEngine(t, local.Options{DB: openDB(t, file), Definitions: defs, Invoke: func(_ context.Context, p json.RawMessage) (json.RawMessage, error) {
		mu.Lock()
		second = append(second, string(p))
		mu.Unlock()
		return p, nil
	}})
	if err := e2.Resume(context.Background()); err != nil {
		t.Fatalf("Resume = %v", err)
	}
	x := waitEnded(t, e2, "run-1")
	checkExecution(t, x, broker.ExecutionSucceeded, "", "",
		`{"items":["a","b","c","d"],"results":[{"echo":"a"},{"echo":"b"},{"echo":"c"},{"echo":"d"}]}`)
	mu.Lock()
	defer mu.Unlock()
	if want := []string{`"a"`, `"b"`, `"c"`}; !reflect.DeepEqual(first, want) {
		t.Errorf("calls before the restart = %q, want %q", first, want)
	}
	if want := []string{`"a"`, `"b"`, `"c"`, `"d"`}; !reflect.DeepEqual(second, want) {
		t.Errorf("calls after the restart = %q, want %q: the Map runs again from its input", second, want)
	}
	h := history(t, e2, "run-1")
	count := func(name string) int {
		n := 0
		for _, s := range h {
			if s == name {
				n++
			}
		}
		return n
	}
	if !slices.Equal(h[:2], []string{"Before", "M"}) || h[len(h)-1] != "Done" || count("M") != 1 || count("T") < 4 {
		t.Errorf("states entered = %q, want Before and M once, the iterations' T, then Done", h)
	}
}
