package enginetest

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/waittest"
)

// The Map workflows of the contract. make lint checks them with
// asl-validator.
var (
	//go:embed testdata/map.asl.json
	mapASL []byte
	//go:embed testdata/map_legacy.asl.json
	mapLegacyASL []byte
)

// WorkflowMap is the workflow name the Map cases run under.
const WorkflowMap broker.Workflow = "map"

// mapConcurrency is the MaxConcurrency of testdata/map.asl.json.
const mapConcurrency = 3

// mapRun is a run of a Map workflow from start to end.
type mapRun struct {
	name  string
	asl   []byte
	input string
	// output is the execution's output (SUCCEEDED); an error's Cause is
	// checked to contain cause.
	output string
	cause  string
	// states are the states entered outside the iterations, in order;
	// inner names the iterations' states, and iterations says how many
	// times some of them were entered.
	states     []string
	inner      []string
	iterations map[string]int
	// gated: every worker call is held until the suite releases it, one
	// at a time once as many are in flight as MaxConcurrency allows, so
	// that the most in flight at once must be mapConcurrency. Only an
	// in-process worker can be held.
	gated bool
}

// fleet is the input of testdata/map.asl.json: n instances, those at the
// indexes broken marked so.
func fleet(n int, broken ...int) string {
	instances := make([]map[string]any, n)
	for i := range instances {
		instances[i] = map[string]any{"id": fmt.Sprintf("i-%d", i)}
		if slices.Contains(broken, i) {
			instances[i]["broken"] = true
		}
	}
	data, _ := json.Marshal(map[string]any{"fleet": map[string]any{"plan": "p-2", "instances": instances}, "requested_by": "ops"})
	return string(data)
}

// upgraded is the output of testdata/map.asl.json for n instances.
func upgraded(n int) string {
	results := make([]map[string]any, n)
	for i := range results {
		results[i] = map[string]any{"upgraded": fmt.Sprintf("i-%d", i), "index": i, "plan": "p-2"}
	}
	data, _ := json.Marshal(map[string]any{"results": results})
	return string(data)
}

// fleetStates are the iteration states of testdata/map.asl.json.
var fleetStates = []string{"Broken?", "Upgrade", "Broken"}

var mapRuns = []mapRun{
	{
		name:       "a Map runs every item, at most MaxConcurrency at once, and outputs their results in item order",
		asl:        mapASL,
		input:      fleet(7),
		output:     upgraded(7),
		states:     []string{"Fleet", "Upgraded"},
		inner:      fleetStates,
		iterations: map[string]int{"Broken?": 7, "Upgrade": 7},
		gated:      true,
	},
	{
		name:   "an iteration that fails fails the Map with its error, which the Map's Catch handles",
		asl:    mapASL,
		input:  fleet(5, 1),
		output: `{"fleet":` + fleetOnly(fleet(5, 1)) + `,"requested_by":"ops","error":{"Error":"InstanceBroken"}}`,
		cause:  "this instance cannot be upgraded",
		states: []string{"Fleet", "Stopped"},
		inner:  fleetStates,
	},
	{
		name:       "a Map in its older form (Parameters, Iterator) runs the same way",
		asl:        mapLegacyASL,
		input:      `["a","b","c"]`,
		output:     `[{"id":"a","i":0},{"id":"b","i":1},{"id":"c","i":2}]`,
		states:     []string{"Each"},
		inner:      []string{"Call"},
		iterations: map[string]int{"Call": 3},
	},
}

// fleetOnly returns the "fleet" field of an input of fleet.
func fleetOnly(input string) string {
	var in map[string]json.RawMessage
	_ = json.Unmarshal([]byte(input), &in)
	return string(in["fleet"])
}

// runMap runs the Map cases.
func runMap(t *testing.T, h Harness) {
	for _, run := range mapRuns {
		t.Run(run.name, func(t *testing.T) {
			t.Parallel()
			if h.NewWorkflow == nil {
				t.Fatal("the harness has no NewWorkflow: every engine must run the Map cases")
			}
			g := &echoGate{held: run.gated && h.InProcess, release: make(chan struct{})}
			e := h.NewWorkflow(t, WorkflowMap, run.asl, g.Invoke)
			name := newName()
			if err := e.Start(context.Background(), WorkflowMap, name, json.RawMessage(run.input)); err != nil {
				t.Fatalf("Start(%s) = %v", name, err)
			}
			if g.held {
				calls := run.iterations["Upgrade"]
				for left := calls; left > 0; left-- {
					waittest.Until(t, func() error {
						n, _ := g.counts()
						if n > mapConcurrency {
							t.Fatalf("%d worker calls in flight, over MaxConcurrency (%d)", n, mapConcurrency)
						}
						if n != min(mapConcurrency, left) {
							return fmt.Errorf("%d worker calls in flight, want %d (MaxConcurrency %d, %d calls left)", n, min(mapConcurrency, left), mapConcurrency, left)
						}
						return nil
					})
					g.release <- struct{}{}
				}
			}
			x := waitEnded(t, e, name)
			if x.Status != broker.ExecutionSucceeded {
				t.Fatalf("status = %s (error %q, cause %q), want SUCCEEDED", x.Status, x.Error, x.Cause)
			}
			if run.cause == "" {
				if !jsonEqual(x.Output, run.output) {
					t.Errorf("output = %s, want %s", x.Output, run.output)
				}
			} else {
				checkOutput(t, x.Output, run.output, run.cause)
			}

			var top []string
			entered := map[string]int{}
			for _, s := range history(t, e, name) {
				if slices.Contains(run.inner, s) {
					entered[s]++
					continue
				}
				top = append(top, s)
			}
			if !reflect.DeepEqual(top, run.states) {
				t.Errorf("states entered outside the iterations = %q, want %q", top, run.states)
			}
			for s, n := range run.iterations {
				if entered[s] != n {
					t.Errorf("iteration state %s entered %d times, want %d", s, entered[s], n)
				}
			}
			if g.held {
				if _, most := g.counts(); most != mapConcurrency {
					t.Errorf("at most %d worker calls were in flight at once, want MaxConcurrency (%d)", most, mapConcurrency)
				}
			}
		})
	}
}

// echoGate is the Map cases' in-process worker: it answers each call with
// its payload, and, when held, only once the suite releases it. It counts
// the calls in flight.
type echoGate struct {
	held    bool
	release chan struct{}

	mu       sync.Mutex
	inFlight int
	most     int
}

func (g *echoGate) Invoke(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
	g.mu.Lock()
	g.inFlight++
	g.most = max(g.most, g.inFlight)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	if g.held {
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return payload, nil
}

func (g *echoGate) counts() (inFlight, most int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight, g.most
}
