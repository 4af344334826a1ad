package local

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// attemptMap runs one attempt of a Map: InputPath, ItemsPath, then one
// iteration per item, at most MaxConcurrency at once, then ResultSelector
// on the array of their outputs (in item order), ResultPath, OutputPath.
// The first iteration to fail fails the attempt with its error, and the
// others are cancelled, as on Step Functions.
//
// Nothing of an attempt is recorded but the states its iterations enter
// (History): an execution resumed in a Map runs the Map again from its
// input, as a Retry of it does. Every Task is idempotent, so that is
// correct; a workflow whose iterations are long keeps their progress where
// its Tasks write (the broker's store).
func (x *execution) attemptMap(ctx context.Context, st *state, input any, entered time.Time, retries int) (any, *stateError) {
	c := x.contextObject(st, entered, retries)
	eff, serr := st.inputPath.selectFrom(input)
	if serr != nil {
		return nil, serr
	}
	v, ok := st.itemsPath.lookup(eff)
	if !ok {
		return nil, runtimeError("Invalid path '%s' for the field 'ItemsPath': no value at this path in the input", st.itemsPath.text)
	}
	items, ok := v.([]any)
	if !ok {
		return nil, runtimeError("The value at the ItemsPath '%s' must be an array (the items of the Map)", st.itemsPath.text)
	}
	inputs := make([]any, len(items))
	for i, item := range items {
		inputs[i] = item
		if st.itemSelector == nil {
			continue
		}
		ic := *c
		ic.mapItem = map[string]any{"Index": json.Number(strconv.Itoa(i)), "Value": item}
		if inputs[i], serr = st.itemSelector.eval(eff, &ic); serr != nil {
			return nil, serr
		}
	}
	outputs, serr := x.iterate(ctx, st, inputs)
	if serr != nil || ctx.Err() != nil {
		return nil, serr
	}
	return st.output(input, outputs, c)
}

// iterate runs st's processor once per input, at most MaxConcurrency (or
// inlineMapMaxConcurrency) at once, each in a goroutine of its own that
// takes the next input when it is done; it returns once all have returned.
// The first failure cancels the iterations still running and is the
// result.
func (x *execution) iterate(ctx context.Context, st *state, inputs []any) ([]any, *stateError) {
	workers := st.maxConcurrency
	if workers == 0 || workers > inlineMapMaxConcurrency {
		workers = inlineMapMaxConcurrency
	}
	workers = min(workers, len(inputs))
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	outputs := make([]any, len(inputs))
	var (
		mu     sync.Mutex
		next   int
		failed *stateError
		wg     sync.WaitGroup
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if failed != nil || ictx.Err() != nil || next == len(inputs) {
			return 0, false
		}
		next++
		return next - 1, true
	}
	for range workers {
		wg.Go(func() {
			for {
				i, ok := take()
				if !ok {
					return
				}
				out, serr := x.runIteration(ictx, st.processor, inputs[i])
				if serr != nil {
					mu.Lock()
					if failed == nil {
						failed = serr
						x.logger().Warn("map iteration failed", "state", st.name, "index", i, "error_name", serr.name)
					}
					mu.Unlock()
					cancel()
					return
				}
				outputs[i] = out
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, nil // the caller sees ctx and stops
	}
	return outputs, failed
}

// runIteration runs one iteration of a Map, from the processor's StartAt
// until it ends: its output, or the error that failed it. The states it
// enters are added to the execution's History, as Step Functions adds them
// to the execution's history; they are not recorded as the execution's
// state, which stays the Map.
func (x *execution) runIteration(ctx context.Context, def *Definition, input any) (any, *stateError) {
	name := def.startAt
	for {
		entered := x.e.now()
		x.enterInIteration(name)
		st := def.states[name]
		res := x.runState(ctx, st, input, entered)
		if ctx.Err() != nil {
			return nil, nil
		}
		if res.caught != "" {
			x.setCaught(res.caught)
		}
		switch {
		case res.err != nil:
			return nil, res.err
		case res.next == "":
			return res.output, nil
		}
		name, input = res.next, res.output
	}
}

// enterInIteration adds a state an iteration entered to the History of the
// execution, while it runs.
func (x *execution) enterInIteration(name string) {
	err := x.e.change(x.name, func(r *record) error {
		if r.Status != broker.ExecutionRunning {
			return errEnded
		}
		r.History = append(r.History, name)
		return nil
	})
	if err == nil {
		x.debug("state entered", name)
	}
}
