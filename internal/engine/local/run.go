package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/jsonenc"
)

// execution is what a running execution's goroutine knows about it.
type execution struct {
	e        *Engine
	def      *Definition
	name     string
	workflow broker.Workflow
	input    any // the execution's input, for $$.Execution.Input
	started  time.Time
	// log is logger's, made once.
	log     *slog.Logger
	logOnce sync.Once
	// state is the state the execution is in, or ended in.
	state string

	// mu guards caught, which a Map's iterations set too.
	mu sync.Mutex
	// caught is the name of the last error a Catch handled (record.Caught).
	caught string
}

// logger is the execution's logger, which names it on every line, made on
// first use: most runs of an execution log debug lines alone, which debug
// writes without it.
func (x *execution) logger() *slog.Logger {
	x.logOnce.Do(func() {
		// The handler's WithAttrs rather than Logger.With: the same
		// attributes without boxing each in an interface first.
		x.log = slog.New(x.e.log.Handler().WithAttrs([]slog.Attr{slog.String("execution", x.name), slog.String("workflow", string(x.workflow))}))
	})
	return x.log
}

func (x *execution) setCaught(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.caught = name
}

func (x *execution) lastCaught() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.caught
}

// stepResult is what running one state gives: the next state ("" when the
// execution ends) and the state's output, or an error that fails the
// execution. caught names the error a Catch handled to get there.
type stepResult struct {
	next   string
	output any
	err    *stateError
	caught string
}

// execute runs an execution from the state recorded in r until it ends, ctx
// is cancelled, or it enters a Wait it parks for (see parkFor): then it returns
// how long the Wait has left. Each transition is made only if the execution
// is still RUNNING in its live record, so nothing is recorded after Stop.
func (e *Engine) execute(ctx context.Context, def *Definition, r record) (parkFor time.Duration) {
	x := &execution{
		e:        e,
		def:      def,
		name:     r.Name,
		workflow: r.Workflow,
		started:  r.StartedAt,
		state:    r.State,
		caught:   r.Caught,
	}
	var err error
	x.input, err = decodeValue(r.Input)
	if err != nil {
		x.end(broker.ExecutionFailed, nil, errorRuntime, "stored input is not JSON")
		return 0
	}
	// A new execution's state input is its input: decoded once, the one
	// value shared, as every state treats its values as immutable (a
	// ResultPath copies what it changes).
	input := x.input
	if !bytes.Equal(r.StateInput, r.Input) {
		if input, err = decodeValue(r.StateInput); err != nil {
			x.end(broker.ExecutionFailed, nil, errorRuntime, "stored state input is not JSON")
			return 0
		}
	}
	name, entered := r.State, r.StateEnteredAt
	// inputData is input encoded: a state that passes its input on as it
	// is (a Choice) hands the next the same bytes, not a new encoding.
	inputData := r.StateInput
	for {
		st := def.states[name]
		if st == nil {
			// Only a definition changed under a resumed execution gets here.
			x.end(broker.ExecutionFailed, nil, errorRuntime, "state "+strconv.Quote(name)+" is not in the definition")
			return 0
		}
		x.debug("state running", name)
		x.state = name
		if st.typ == typeWait {
			if d := x.parkFor(ctx, st, input, entered); d > 0 {
				return d
			}
		}
		res := x.runState(ctx, st, input, entered)
		if ctx.Err() != nil {
			x.interrupted(ctx)
			return 0
		}
		if res.caught != "" {
			x.setCaught(res.caught)
		}
		switch {
		case res.err != nil:
			x.end(broker.ExecutionFailed, nil, res.err.name, res.err.cause)
			return 0
		case res.next == "":
			x.end(broker.ExecutionSucceeded, res.output, "", "")
			return 0
		}
		entered = e.now()
		data := inputData
		if !sameValue(res.output, input) {
			var err error
			if data, err = jsonenc.MarshalValue(res.output); err != nil {
				x.end(broker.ExecutionFailed, nil, errorRuntime, "state output cannot be encoded: "+err.Error())
				return 0
			}
		}
		if !x.transition(res.next, data, entered) {
			return 0
		}
		name, input, inputData = res.next, res.output, data
	}
}

// sameValue says a and b are the same object or list (not equal: the
// same), or both nil: values are never changed once made, so the same one
// encodes the same. Anything else is not known to be the same.
func sameValue(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		return ok && a != nil && b != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	case []any:
		b, ok := b.([]any)
		return ok && len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
	case nil:
		return b == nil
	}
	return false
}

// parkAfter is the shortest Wait an execution parks for: a shorter one
// costs less in its goroutine than in a timer and a read of its record.
const parkAfter = time.Second

// parkFor is how long the execution would wait in Wait state st, if it is
// to park rather than wait in its goroutine: when the engine waits with its
// own timers (Options.Sleep unset) and the wait is at least parkAfter. A
// parked execution holds no goroutine, stack or context while it waits (an
// execution waits for most of its life: for a driver's change to be done),
// and its record leaves memory once written; a timer runs it again from
// that record (spawnLocked). The wait ends early at the execution's
// timeout, which the execution then meets as it would have in its Wait.
func (x *execution) parkFor(ctx context.Context, st *state, input any, entered time.Time) time.Duration {
	if !x.e.parks || ctx.Err() != nil {
		return 0
	}
	_, until, serr := x.waitUntil(st, input, entered)
	if serr != nil {
		return 0 // runWait reports it
	}
	d := until.Sub(x.e.now())
	if deadline, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(deadline))
	}
	if d < parkAfter {
		return 0
	}
	return d
}

// interrupted handles a cancelled context: a timed-out execution is
// recorded TIMED_OUT; a stopped one was recorded by Stop; on Close nothing
// is recorded, so that Resume continues it.
func (x *execution) interrupted(ctx context.Context) {
	if errors.Is(context.Cause(ctx), errExecutionTimeout) {
		x.end(broker.ExecutionTimedOut, nil, errorTimeout, "the execution ran longer than its TimeoutSeconds ("+x.def.timeout.String()+")")
	}
}

// transition records that the execution entered state next with input,
// encoded as data.
func (x *execution) transition(next string, data json.RawMessage, at time.Time) bool {
	err := x.e.change(x.name, func(r *record) error {
		if r.Status != broker.ExecutionRunning {
			return errEnded
		}
		r.State, r.StateEnteredAt, r.StateInput = next, at, data
		r.History = append(r.History, next)
		r.Caught = x.lastCaught()
		return nil
	})
	switch {
	case errors.Is(err, errEnded):
		return false
	case err != nil:
		// The execution stays RUNNING at its previous state; Resume in the
		// next process runs that state again.
		x.logger().Error("cannot record transition; execution paused until resumed", "state", next, "error", err.Error())
		return false
	}
	x.debug("state entered", next)
	return true
}

// debug logs msg with the execution's and the state's names at debug
// level, building nothing when that level is off, nor the execution's
// logger when it is on: the same line.
func (x *execution) debug(msg, state string) {
	// Asked first: LogAttrs's attributes escape, so building them costs an
	// allocation even when the level is off.
	if !x.e.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	x.e.log.LogAttrs(context.Background(), slog.LevelDebug, msg,
		slog.String("execution", x.name), slog.String("workflow", string(x.workflow)), slog.String("state", state))
}

// end records the end of the execution, if it is still running. Its log
// line names the state it ended in and, when a Catch handled an error on the
// way, that error: SUCCEEDED then means the failure was handled (an
// operation workflow recorded its operation's failure), not that all went
// well.
func (x *execution) end(status broker.ExecutionStatus, output any, errName, cause string) {
	var data json.RawMessage
	if status == broker.ExecutionSucceeded {
		var err error
		if data, err = jsonenc.MarshalValue(output); err != nil {
			status, errName, cause = broker.ExecutionFailed, errorRuntime, "output cannot be encoded: "+err.Error()
		}
	}
	err := x.e.change(x.name, func(r *record) error {
		if r.Status != broker.ExecutionRunning {
			return errEnded
		}
		r.Status, r.Output, r.Error, r.Cause, r.StoppedAt = status, data, errName, cause, x.e.now()
		r.State, r.StateInput, r.StateEnteredAt = "", nil, time.Time{}
		return nil
	})
	switch {
	case errors.Is(err, errEnded):
	case err != nil:
		x.logger().Error("cannot record the end of the execution", "status", string(status), "error", err.Error())
	default:
		attrs := []slog.Attr{slog.String("status", string(status)), slog.String("end_state", x.state)}
		level := slog.LevelInfo
		if errName != "" {
			attrs, level = append(attrs, slog.String("error_name", errName)), slog.LevelWarn
		}
		if caught := x.lastCaught(); caught != "" {
			attrs, level = append(attrs, slog.String("caught_error", caught)), slog.LevelWarn
		}
		x.logger().LogAttrs(context.Background(), level, "execution ended", attrs...)
	}
}

// contextObject is "$$" for a state. A Task's Parameters name one of its
// fields ($$.Execution.Name), so it builds a field only when a path asks
// for it, not the whole object for every state.
func (x *execution) contextObject(st *state, entered time.Time, retries int) *stateContext {
	return &stateContext{x: x, st: st, entered: entered, retries: retries}
}

// stateContext is the context object of one state.
type stateContext struct {
	x       *execution
	st      *state
	entered time.Time
	retries int
	// mapItem is $$.Map.Item in a Map's ItemSelector; nil elsewhere.
	mapItem map[string]any
}

// lookup resolves a "$$" path: the paths that load name a field of
// contextFields, so only that field is built.
func (c *stateContext) lookup(p path) (any, bool) {
	if len(p.steps) < 2 || p.steps[0].index >= 0 || p.steps[1].index >= 0 {
		return p.lookup(c.object())
	}
	v, ok := c.field(p.steps[0].field, p.steps[1].field)
	if !ok {
		return nil, false
	}
	return path{steps: p.steps[2:]}.lookup(v)
}

// field is $$.<group>.<name>.
func (c *stateContext) field(group, name string) (any, bool) {
	x := c.x
	switch group {
	case "Execution":
		switch name {
		case "Id":
			return "arn:aws:states:local:000000000000:execution:" + string(x.workflow) + ":" + x.name, true
		case "Name":
			return x.name, true
		case "Input":
			return x.input, true
		case "StartTime":
			return formatTime(x.started), true
		}
	case "State":
		switch name {
		case "Name":
			return c.st.name, true
		case "EnteredTime":
			return formatTime(c.entered), true
		case "RetryCount":
			return json.Number(strconv.Itoa(c.retries)), true
		}
	case "StateMachine":
		switch name {
		case "Id":
			return "arn:aws:states:local:000000000000:stateMachine:" + string(x.workflow), true
		case "Name":
			return string(x.workflow), true
		}
	case "Map":
		if name == "Item" && c.mapItem != nil {
			return c.mapItem, true
		}
	}
	return nil, false
}

// object is the whole context object, as maps.
func (c *stateContext) object() map[string]any {
	o := map[string]any{}
	for group, names := range contextFields {
		m := map[string]any{}
		for name := range names {
			if v, ok := c.field(group, name); ok {
				m[name] = v
			}
		}
		if len(m) > 0 {
			o[group] = m
		}
	}
	return o
}

// formatTime writes times the way the context object has them.
func formatTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func (x *execution) runState(ctx context.Context, st *state, input any, entered time.Time) stepResult {
	switch st.typ {
	case typeTask:
		return x.runTask(ctx, st, input, entered)
	case typeWait:
		return x.runWait(ctx, st, input, entered)
	case typeMap:
		return x.runRetrying(ctx, st, input, func(retries int) (any, *stateError) {
			return x.attemptMap(ctx, st, input, entered, retries)
		})
	case typeFail:
		return stepResult{err: &stateError{name: st.failError, cause: st.failCause}}
	}
	c := x.contextObject(st, entered, 0)
	eff, serr := st.inputPath.selectFrom(input)
	if serr != nil {
		return stepResult{err: serr}
	}
	var next string
	var result any
	switch st.typ {
	case typePass:
		if st.parameters != nil {
			if eff, serr = st.parameters.eval(eff, c); serr != nil {
				return stepResult{err: serr}
			}
		}
		result = eff
		if st.hasResult {
			result = st.result
		}
		if result, serr = st.resultPath.apply(input, result); serr != nil {
			return stepResult{err: serr}
		}
		next = st.next
	case typeChoice:
		if next, serr = x.choose(st, eff, c); serr != nil {
			return stepResult{err: serr}
		}
		result = eff
	case typeSucceed:
		result = eff
	}
	out, serr := st.outputPath.selectFrom(result)
	if serr != nil {
		return stepResult{err: serr}
	}
	return stepResult{next: next, output: out}
}

func (x *execution) choose(st *state, input any, c *stateContext) (string, *stateError) {
	for _, r := range st.choices {
		ok, err := r.eval(input, c)
		if err != nil {
			return "", err
		}
		if ok {
			return r.next, nil
		}
	}
	if st.defaultNext != "" {
		return st.defaultNext, nil
	}
	return "", &stateError{name: errorNoChoiceMatch, cause: "No Choice Rule matched and there is no Default in state " + strconv.Quote(st.name)}
}

// runWait waits until the time the state says, counted from when the state
// was entered, so that a resumed Wait only waits for what is left.
func (x *execution) runWait(ctx context.Context, st *state, input any, entered time.Time) stepResult {
	eff, until, serr := x.waitUntil(st, input, entered)
	if serr != nil {
		return stepResult{err: serr}
	}
	x.e.sleep(ctx, until.Sub(x.e.now()))
	if ctx.Err() != nil {
		return stepResult{}
	}
	out, serr := st.outputPath.selectFrom(eff)
	if serr != nil {
		return stepResult{err: serr}
	}
	return stepResult{next: st.next, output: out}
}

// waitUntil is a Wait state's effective input and the time it waits until.
func (x *execution) waitUntil(st *state, input any, entered time.Time) (eff any, until time.Time, serr *stateError) {
	eff, serr = st.inputPath.selectFrom(input)
	if serr != nil {
		return nil, until, serr
	}
	c := x.contextObject(st, entered, 0)
	switch w := st.wait; {
	case w.hasSeconds:
		until = entered.Add(w.seconds)
	case w.hasTimestamp:
		until = w.timestamp
	case w.secondsPath != nil:
		v, _ := w.secondsPath.lookupIn(eff, c)
		n, ok := v.(json.Number)
		s, err := n.Int64()
		if !ok || err != nil || s < 0 || s > maxSeconds {
			return nil, until, runtimeError("The SecondsPath parameter does not reference a valid integer: %s", w.secondsPath.text)
		}
		until = entered.Add(time.Duration(s) * time.Second)
	case w.timestampPath != nil:
		v, _ := w.timestampPath.lookupIn(eff, c)
		s, _ := v.(string)
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return nil, until, runtimeError("The TimestampPath parameter does not reference a valid ISO-8601 timestamp: %s", w.timestampPath.text)
		}
		until = t
	}
	return eff, until, nil
}

// runTask runs a Task: it calls the worker, retries as Retry says, and
// hands an error that is left to the first Catch that matches it.
func (x *execution) runTask(ctx context.Context, st *state, input any, entered time.Time) stepResult {
	return x.runRetrying(ctx, st, input, func(retries int) (any, *stateError) {
		return x.attemptTask(ctx, st, input, entered, retries)
	})
}

// runRetrying runs the attempts of a Task or Map, retries as Retry says,
// and hands an error that is left to the first Catch that matches it.
func (x *execution) runRetrying(ctx context.Context, st *state, input any, attempt func(retries int) (any, *stateError)) stepResult {
	attempts := make([]int, len(st.retry))
	retries := 0
	for {
		out, serr := attempt(retries)
		if ctx.Err() != nil {
			return stepResult{}
		}
		if serr == nil {
			return stepResult{next: st.next, output: out}
		}
		x.logger().Warn("state failed", "state", st.name, "error_name", serr.name, "retries", retries)
		if serr.name == errorRuntime {
			return stepResult{err: serr}
		}
		if i := matchRetrier(st.retry, serr.name); i >= 0 && attempts[i] < st.retry[i].maxAttempts {
			d := st.retry[i].delay(attempts[i])
			if st.retry[i].fullJitter {
				d = time.Duration(rand.Int64N(int64(d) + 1))
			}
			attempts[i]++
			retries++
			x.e.sleep(ctx, d)
			if ctx.Err() != nil {
				return stepResult{}
			}
			continue
		}
		for _, c := range st.catch {
			if matches(c.errorEquals, serr.name) {
				out, perr := c.resultPath.apply(input, map[string]any{"Error": serr.name, "Cause": serr.cause})
				if perr != nil {
					return stepResult{err: perr}
				}
				return stepResult{next: c.next, output: out, caught: serr.name}
			}
		}
		return stepResult{err: serr}
	}
}

// matchRetrier returns the index of the first retrier whose ErrorEquals
// matches name, or -1. Only that retrier counts, even when it is spent.
func matchRetrier(rs []retrier, name string) int {
	for i, r := range rs {
		if matches(r.errorEquals, name) {
			return i
		}
	}
	return -1
}

// attemptTask runs one attempt of a Task: InputPath, Parameters, the
// worker, ResultSelector, ResultPath, OutputPath.
func (x *execution) attemptTask(ctx context.Context, st *state, input any, entered time.Time, retries int) (any, *stateError) {
	c := x.contextObject(st, entered, retries)
	eff, serr := st.inputPath.selectFrom(input)
	if serr != nil {
		return nil, serr
	}
	var payload []byte
	if st.payload != nil {
		// Encoded straight from the template, without its maps.
		if payload, serr = st.payload.appendJSON(make([]byte, 0, 256), eff, c); serr != nil {
			return nil, serr
		}
	} else {
		params, serr := st.parameters.eval(eff, c)
		if serr != nil {
			return nil, serr
		}
		var err error
		if payload, err = jsonenc.MarshalValue(params.(map[string]any)["Payload"]); err != nil {
			return nil, runtimeError("the Payload cannot be encoded: %v", err)
		}
	}
	res, serr := x.invoke(ctx, st, payload)
	if serr != nil {
		return nil, serr
	}
	if st.payloadSelector != nil {
		// The selector reads the answer alone: no Lambda result around it.
		result, serr := st.payloadSelector.eval(res, c)
		if serr != nil {
			return nil, serr
		}
		out, serr := st.resultPath.apply(input, result)
		if serr != nil {
			return nil, serr
		}
		return st.outputPath.selectFrom(out)
	}
	return st.output(input, map[string]any{
		"ExecutedVersion": "$LATEST",
		"Payload":         res,
		"StatusCode":      json.Number("200"),
	}, c)
}

// output is the output of a Task or a Map state from its input and its
// result: ResultSelector (with the context object c), ResultPath,
// OutputPath.
func (st *state) output(input, result any, c *stateContext) (any, *stateError) {
	if st.resultSelector != nil {
		var serr *stateError
		if result, serr = st.resultSelector.eval(result, c); serr != nil {
			return nil, serr
		}
	}
	out, serr := st.resultPath.apply(input, result)
	if serr != nil {
		return nil, serr
	}
	return st.outputPath.selectFrom(out)
}

// invoke calls the worker under the Task's timeout, once a slot is free
// (Options.MaxTasks). The call runs in another goroutine (a runner: run)
// so that a timeout or a stop takes effect at once even if the worker is
// slow to notice; Close still waits for it. It is handed over only with
// its slot: a burst's queued Tasks hold one goroutine each, not two.
func (x *execution) invoke(ctx context.Context, st *state, payload json.RawMessage) (any, *stateError) {
	tctx, cancel := ctx, context.CancelFunc(func() {})
	if st.timeout > 0 {
		tctx, cancel = context.WithTimeoutCause(ctx, st.timeout, errTaskTimeout)
	}
	defer cancel()
	// Built only when the Task times out: most never do.
	timedOut := func() *stateError {
		return &stateError{name: errorTimeout, cause: "the task ran longer than its TimeoutSeconds (" + st.timeout.String() + ")"}
	}
	select {
	case x.e.tasks <- struct{}{}:
	case <-tctx.Done():
		if ctx.Err() != nil {
			return nil, nil // the caller sees ctx and stops
		}
		return nil, timedOut()
	}
	type answer struct {
		out json.RawMessage
		err error
	}
	// Unbuffered (one allocation, not two): the call hands its answer over
	// unless tctx is done, when nothing waits for it any more.
	answers := make(chan answer)
	x.e.run(func() {
		out, err := x.callWorker(tctx, st, payload)
		<-x.e.tasks
		select {
		case answers <- answer{out, err}:
		case <-tctx.Done():
		}
	})
	select {
	case <-tctx.Done():
		if ctx.Err() != nil {
			return nil, nil // the caller sees ctx and stops
		}
		return nil, timedOut()
	case a := <-answers:
		if a.err != nil {
			if ctx.Err() == nil && errors.Is(context.Cause(tctx), errTaskTimeout) {
				return nil, timedOut()
			}
			return nil, &stateError{name: errorName(a.err), cause: a.err.Error()}
		}
		if len(a.out) == 0 {
			return nil, nil
		}
		v, err := decodeValue(a.out)
		if err != nil {
			return nil, runtimeError("the worker's result is not JSON: %v", err)
		}
		return v, nil
	}
}

// callWorker calls the Invoker, turning a panic into a task failure.
func (x *execution) callWorker(ctx context.Context, st *state, payload json.RawMessage) (out json.RawMessage, err error) {
	defer func() {
		if v := recover(); v != nil {
			x.logger().Error("worker panicked", "state", st.name)
			out, err = nil, &panicError{value: v}
		}
	}()
	return x.e.invoke(ctx, payload)
}

// selectFrom applies an InputPath or OutputPath.
func (o optionalPath) selectFrom(v any) (any, *stateError) {
	if o.null {
		return map[string]any{}, nil
	}
	out, ok := o.path.lookup(v)
	if !ok {
		return nil, runtimeError("Invalid path '%s': no value at this path in the input", o.path.text)
	}
	return out, nil
}

// apply applies a ResultPath: result placed into the state's raw input.
func (o optionalPath) apply(input, result any) (any, *stateError) {
	if o.null {
		return input, nil
	}
	out, err := o.path.set(input, result)
	if err != nil {
		return nil, &stateError{name: errorResultPath, cause: err.Error()}
	}
	return out, nil
}
