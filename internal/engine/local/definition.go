package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// Definition is a state machine read from Amazon States Language (JSONPath
// flavour) and checked: it holds only what this engine runs.
type Definition struct {
	startAt string
	timeout time.Duration // 0: none
	states  map[string]*state
}

// State types this engine runs.
const (
	typeTask    = "Task"
	typePass    = "Pass"
	typeChoice  = "Choice"
	typeWait    = "Wait"
	typeSucceed = "Succeed"
	typeFail    = "Fail"
	typeMap     = "Map"
)

// inlineMapMaxConcurrency is how many iterations of an inline Map Step
// Functions runs at once at most: a MaxConcurrency of 0 (no limit) or above
// it means this many, here too, which also bounds the goroutines a Map
// starts.
const inlineMapMaxConcurrency = 40

// ResourceLambdaInvoke is the only Task resource this engine runs: the
// optimized Lambda integration. Its Parameters.Payload goes to the Invoker.
const ResourceLambdaInvoke = "arn:aws:states:::lambda:invoke"

// maxSeconds is the largest number of seconds the States Language accepts
// for TimeoutSeconds, IntervalSeconds and Wait's Seconds.
const maxSeconds = 99999999

type state struct {
	name string
	typ  string
	next string // "" for a terminal state

	inputPath  optionalPath
	outputPath optionalPath
	resultPath optionalPath
	parameters *template
	// payload is the Payload of a Task's Parameters whose other fields
	// are literal (payloadOf); nil otherwise.
	payload        *template
	resultSelector *template
	// payloadSelector is a Task's resultSelector reading the worker's
	// answer itself (overPayload); nil when it reads more of the result.
	payloadSelector *template
	result          any
	hasResult       bool

	timeout time.Duration // Task; 0: none
	retry   []retrier
	catch   []catcher

	choices     []*rule // Choice
	defaultNext string

	wait waitSpec

	failError string // Fail
	failCause string

	// Map: the items at itemsPath (of the effective input) each run
	// processor, with the input itemSelector builds (Parameters, in older
	// definitions), at most maxConcurrency at once (0: no limit).
	itemsPath      path
	itemSelector   *template
	processor      *Definition
	maxConcurrency int
}

// optionalPath is an InputPath, OutputPath or ResultPath: absent means "$",
// null means "discard" (the input for InputPath/OutputPath, the result for
// ResultPath).
type optionalPath struct {
	null bool
	path path
}

var defaultPath = optionalPath{path: rootPath}

type retrier struct {
	errorEquals []string
	interval    time.Duration
	maxAttempts int
	backoffRate float64
	maxDelay    time.Duration // 0: none
	fullJitter  bool
}

type catcher struct {
	errorEquals []string
	next        string
	resultPath  optionalPath
}

type waitSpec struct {
	seconds       time.Duration
	hasSeconds    bool
	secondsPath   *path
	timestamp     time.Time
	hasTimestamp  bool
	timestampPath *path
}

// fieldsByType lists the fields each state type may have, beyond Type,
// Comment and QueryLanguage.
var fieldsByType = map[string][]string{
	typeTask:    {"Next", "End", "InputPath", "OutputPath", "Parameters", "ResultSelector", "ResultPath", "Resource", "TimeoutSeconds", "Retry", "Catch"},
	typePass:    {"Next", "End", "InputPath", "OutputPath", "Parameters", "Result", "ResultPath"},
	typeChoice:  {"InputPath", "OutputPath", "Choices", "Default"},
	typeWait:    {"Next", "End", "InputPath", "OutputPath", "Seconds", "SecondsPath", "Timestamp", "TimestampPath"},
	typeSucceed: {"InputPath", "OutputPath"},
	typeFail:    {"Error", "Cause"},
	typeMap: {"Next", "End", "InputPath", "OutputPath", "ItemsPath", "ItemSelector", "Parameters", "ItemProcessor", "Iterator",
		"MaxConcurrency", "ResultSelector", "ResultPath", "Retry", "Catch"},
}

// notSupported explains why some well-known fields are refused.
var notSupported = map[string]string{
	"Arguments":            "is JSONata, which is not supported (JSONPath only)",
	"Output":               "is JSONata, which is not supported (JSONPath only)",
	"Assign":               "variables are not supported",
	"HeartbeatSeconds":     "is not supported (no callback tasks)",
	"HeartbeatSecondsPath": "is not supported (no callback tasks)",
	"TimeoutSecondsPath":   "is not supported (use TimeoutSeconds)",
	"Credentials":          "is not supported",
	"ErrorPath":            "is not supported (use Error)",
	"CausePath":            "is not supported (use Cause)",
	// Distributed Map and its companions: only the inline Map runs here.
	"ItemReader":                     "is not supported (inline Map only: the items come from ItemsPath)",
	"ResultWriter":                   "is not supported (inline Map only: the results are the state's output)",
	"ItemBatcher":                    "is not supported (inline Map only: one item per iteration)",
	"ToleratedFailureCount":          "is not supported (inline Map only: an iteration's failure fails the Map)",
	"ToleratedFailureCountPath":      "is not supported (inline Map only: an iteration's failure fails the Map)",
	"ToleratedFailurePercentage":     "is not supported (inline Map only: an iteration's failure fails the Map)",
	"ToleratedFailurePercentagePath": "is not supported (inline Map only: an iteration's failure fails the Map)",
	"Label":                          "is not supported (inline Map only)",
	"MaxConcurrencyPath":             "is not supported (use MaxConcurrency; moto 5.2.1 does not run it in JSONPath)",
	"Items":                          "is JSONata, which is not supported (use ItemsPath)",
}

// Parse reads a definition. file names it in error messages. Every problem
// found is reported, each as a *LoadError, joined.
func Parse(file string, data []byte) (*Definition, error) {
	l := &loader{file: file}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, &LoadError{File: file, Problem: "not a JSON object: " + err.Error()}
	}
	d := &Definition{states: map[string]*state{}}
	for _, key := range sortedKeys(top) {
		raw := top[key]
		switch key {
		case "Comment", "Version":
			l.str("", key, raw)
		case "StartAt":
			d.startAt = l.str("", key, raw)
		case "TimeoutSeconds":
			d.timeout = time.Duration(l.integer("", key, raw, 1, maxSeconds)) * time.Second
		case "QueryLanguage":
			l.queryLanguage("", raw)
		case "States":
			l.states(d, "", key, raw)
		default:
			l.unsupported("", key)
		}
	}
	_, hasStates := top["States"]
	l.checkMachine(d, "", "", hasStates)
	if len(l.errs) > 0 {
		return nil, errors.Join(l.errs...)
	}
	return d, nil
}

// states parses the States of a state machine, or of a Map's iterations,
// into d; owner and field name where they are.
func (l *loader) states(d *Definition, owner, field string, raw json.RawMessage) {
	var states map[string]json.RawMessage
	if err := json.Unmarshal(raw, &states); err != nil || len(states) == 0 {
		l.fail(owner, field, "must be a non-empty object of states")
		return
	}
	for _, name := range sortedKeys(states) {
		// The States Language wants names unique in the whole machine,
		// iterations included, so that a name says which state it is.
		if l.names[name] {
			l.fail(name, "", "is defined twice: state names are unique in the whole state machine, Map iterations included")
			continue
		}
		if l.names == nil {
			l.names = map[string]bool{}
		}
		l.names[name] = true
		if st := l.state(name, states[name]); st != nil {
			d.states[name] = st
		}
	}
}

// checkMachine checks that d has a StartAt naming one of its states, and
// its transitions; owner and prefix name where d is ("" for the top).
func (l *loader) checkMachine(d *Definition, owner, prefix string, hasStates bool) {
	before := len(l.errs)
	switch {
	case !hasStates:
		l.fail(owner, prefix+"States", "is required")
	case d.startAt == "":
		l.fail(owner, prefix+"StartAt", "is required")
	case d.states[d.startAt] == nil:
		l.fail(owner, prefix+"StartAt", "names no state: %q", d.startAt)
	}
	if len(l.errs) == before {
		l.checkTransitions(d)
	}
}

// LoadDir parses every <workflow>.asl.json file in dir.
func LoadDir(dir string) (map[broker.Workflow]*Definition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.asl.json"))
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("load %s: no *.asl.json file", dir)
	}
	defs := make(map[broker.Workflow]*Definition, len(files))
	var errs []error
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d, err := Parse(filepath.Base(f), data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		defs[broker.Workflow(strings.TrimSuffix(filepath.Base(f), ".asl.json"))] = d
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return defs, nil
}

// loader collects the problems of one definition.
type loader struct {
	file string
	errs []error
	// names are the state names seen so far, in the whole definition.
	names map[string]bool
	// mapItem is set while a Map's ItemSelector is compiled: only there
	// does the context object have $$.Map.Item.
	mapItem bool
}

func (l *loader) fail(state, field, format string, args ...any) {
	l.errs = append(l.errs, &LoadError{File: l.file, State: state, Field: field, Problem: fmt.Sprintf(format, args...)})
}

func (l *loader) unsupported(state, field string) {
	if why, ok := notSupported[field]; ok {
		l.fail(state, field, "%s", why)
		return
	}
	l.fail(state, field, "unknown or unsupported field")
}

func (l *loader) value(state, field string, raw json.RawMessage) (any, bool) {
	v, err := decodeValue(raw)
	if err != nil {
		l.fail(state, field, "invalid JSON: %v", err)
		return nil, false
	}
	return v, true
}

func (l *loader) str(state, field string, raw json.RawMessage) string {
	v, _ := l.value(state, field, raw)
	return l.strValue(state, field, v)
}

func (l *loader) strValue(state, field string, v any) string {
	s, ok := v.(string)
	if !ok {
		l.fail(state, field, "must be a string")
	}
	return s
}

func (l *loader) integer(state, field string, raw json.RawMessage, lo, hi int64) int64 {
	v, _ := l.value(state, field, raw)
	return l.integerValue(state, field, v, lo, hi)
}

func (l *loader) integerValue(state, field string, v any, lo, hi int64) int64 {
	n, ok := v.(json.Number)
	i, err := n.Int64()
	if !ok || err != nil || i < lo || i > hi {
		l.fail(state, field, "must be an integer from %d to %d", lo, hi)
		return lo
	}
	return i
}

func (l *loader) queryLanguage(state string, raw json.RawMessage) {
	if ql := l.str(state, "QueryLanguage", raw); ql != "JSONPath" {
		l.fail(state, "QueryLanguage", "%q is not supported (JSONPath only)", ql)
	}
}

// pathValue parses a path found in a definition. Context paths ("$$") are
// allowed only where withContext is set.
func (l *loader) pathValue(state, field string, v any, withContext bool) (path, bool) {
	s, ok := v.(string)
	if !ok {
		l.fail(state, field, "must be a path string")
		return path{}, false
	}
	if strings.HasPrefix(s, "States.") {
		l.fail(state, field, "intrinsic function %q is not supported", s)
		return path{}, false
	}
	p, err := parsePath(s)
	if err == nil && p.context && !withContext {
		err = fmt.Errorf("context path %q is not allowed here", s)
	}
	if err == nil {
		err = p.checkContext(l.mapItem)
	}
	if err != nil {
		l.fail(state, field, "%v", err)
		return path{}, false
	}
	return p, true
}

func (l *loader) optionalPath(state, field string, raw json.RawMessage) optionalPath {
	v, ok := l.value(state, field, raw)
	if !ok {
		return defaultPath
	}
	return l.optionalPathValue(state, field, v)
}

func (l *loader) optionalPathValue(state, field string, v any) optionalPath {
	if v == nil {
		return optionalPath{null: true}
	}
	p, ok := l.pathValue(state, field, v, false)
	if !ok {
		return defaultPath
	}
	return optionalPath{path: p}
}

// template compiles a Payload Template, which must be a JSON object.
func (l *loader) template(state, field string, raw json.RawMessage) *template {
	v, ok := l.value(state, field, raw)
	if !ok {
		return nil
	}
	if _, ok := v.(map[string]any); !ok {
		l.fail(state, field, "must be a JSON object")
		return nil
	}
	return l.compile(state, field, v)
}

func (l *loader) compile(state, field string, v any) *template {
	switch v := v.(type) {
	case map[string]any:
		t := &template{kind: templateObject}
		seen := map[string]bool{}
		for _, key := range sortedKeys(v) {
			sub := field + "." + key
			name, isPath := strings.CutSuffix(key, ".$")
			var value *template
			if isPath {
				p, ok := l.pathValue(state, sub, v[key], true)
				if !ok {
					continue
				}
				value = &template{kind: templatePath, path: p, field: key}
			} else {
				value = l.compile(state, sub, v[key])
			}
			if seen[name] {
				l.fail(state, sub, "field %q is given twice", name)
			}
			seen[name] = true
			t.object = append(t.object, templateField{name: name, value: value})
		}
		t.sortFields()
		return t
	case []any:
		t := &template{kind: templateArray}
		for i, item := range v {
			t.array = append(t.array, l.compile(state, fmt.Sprintf("%s[%d]", field, i), item))
		}
		return t
	}
	return &template{literal: v}
}

func (l *loader) state(name string, raw json.RawMessage) *state {
	if len([]rune(name)) > 80 {
		l.fail(name, "", "state names are at most 80 characters")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		l.fail(name, "", "must be a JSON object")
		return nil
	}
	typeRaw, ok := fields["Type"]
	if !ok {
		l.fail(name, "Type", "is required")
		return nil
	}
	st := &state{name: name, typ: l.str(name, "Type", typeRaw), inputPath: defaultPath, outputPath: defaultPath, resultPath: defaultPath, itemsPath: rootPath}
	allowed, ok := fieldsByType[st.typ]
	if !ok {
		l.fail(name, "Type", "state type %q is not supported (supported: Task, Pass, Choice, Wait, Succeed, Fail, Map)", st.typ)
		return nil
	}
	end := false
	for _, key := range sortedKeys(fields) {
		raw := fields[key]
		if key != "Type" && key != "Comment" && key != "QueryLanguage" && !slices.Contains(allowed, key) {
			l.unsupported(name, key)
			continue
		}
		switch key {
		case "Comment":
			l.str(name, key, raw)
		case "QueryLanguage":
			l.queryLanguage(name, raw)
		case "Next":
			st.next = l.str(name, key, raw)
		case "End":
			v, _ := l.value(name, key, raw)
			b, ok := v.(bool)
			if !ok {
				l.fail(name, key, "must be true or false")
			}
			end = b
		case "InputPath":
			st.inputPath = l.optionalPath(name, key, raw)
		case "OutputPath":
			st.outputPath = l.optionalPath(name, key, raw)
		case "ResultPath":
			st.resultPath = l.optionalPath(name, key, raw)
		case "Parameters":
			if st.typ == typeMap {
				// A Map's Parameters is its ItemSelector's older name.
				st.itemSelector = l.itemSelector(name, key, raw)
				continue
			}
			st.parameters = l.template(name, key, raw)
		case "ItemSelector":
			st.itemSelector = l.itemSelector(name, key, raw)
		case "ItemsPath":
			v, _ := l.value(name, key, raw)
			if p, ok := l.pathValue(name, key, v, false); ok {
				st.itemsPath = p
			}
		case "ItemProcessor", "Iterator":
			st.processor = l.processor(name, key, raw)
		case "MaxConcurrency":
			st.maxConcurrency = int(l.integer(name, key, raw, 0, math.MaxInt32))
		case "ResultSelector":
			st.resultSelector = l.template(name, key, raw)
		case "Result":
			st.result, st.hasResult = l.value(name, key, raw)
		case "Resource":
			if r := l.str(name, key, raw); r != ResourceLambdaInvoke {
				l.fail(name, key, "resource %q is not supported (only %s)", r, ResourceLambdaInvoke)
			}
		case "TimeoutSeconds":
			st.timeout = time.Duration(l.integer(name, key, raw, 1, maxSeconds)) * time.Second
		case "Retry":
			st.retry = l.retriers(name, raw)
		case "Catch":
			st.catch = l.catchers(name, raw)
		case "Choices":
			st.choices = l.choices(name, raw)
		case "Default":
			st.defaultNext = l.str(name, key, raw)
		case "Seconds":
			st.wait.seconds = time.Duration(l.integer(name, key, raw, 0, maxSeconds)) * time.Second
			st.wait.hasSeconds = true
		case "SecondsPath", "TimestampPath":
			v, _ := l.value(name, key, raw)
			if p, ok := l.pathValue(name, key, v, true); ok {
				if key == "SecondsPath" {
					st.wait.secondsPath = &p
				} else {
					st.wait.timestampPath = &p
				}
			}
		case "Timestamp":
			t, err := time.Parse(time.RFC3339, l.str(name, key, raw))
			if err != nil {
				l.fail(name, key, "must be an RFC 3339 timestamp")
			}
			st.wait.timestamp, st.wait.hasTimestamp = t, true
		case "Error":
			st.failError = l.str(name, key, raw)
		case "Cause":
			st.failCause = l.str(name, key, raw)
		}
	}
	l.checkState(st, fields, end)
	return st
}

// checkState checks what a state needs beyond the form of its fields.
func (l *loader) checkState(st *state, fields map[string]json.RawMessage, end bool) {
	name := st.name
	switch st.typ {
	case typeTask, typePass, typeWait, typeMap:
		switch {
		case end && st.next != "":
			l.fail(name, "End", "a state has Next or End: true, not both")
		case !end && st.next == "":
			l.fail(name, "Next", "is required (or End: true)")
		}
	case typeChoice:
		if _, ok := fields["Choices"]; !ok {
			l.fail(name, "Choices", "is required")
		}
	}
	switch st.typ {
	case typeTask:
		if _, ok := fields["Resource"]; !ok {
			l.fail(name, "Resource", "is required")
		}
		l.checkLambdaParameters(st, fields)
	case typeMap:
		_, processor := fields["ItemProcessor"]
		_, iterator := fields["Iterator"]
		switch {
		case processor && iterator:
			l.fail(name, "Iterator", "a Map has ItemProcessor or its older name Iterator, not both")
		case !processor && !iterator:
			l.fail(name, "ItemProcessor", "is required")
		}
		_, selector := fields["ItemSelector"]
		if _, params := fields["Parameters"]; selector && params {
			l.fail(name, "Parameters", "a Map has ItemSelector or its older name Parameters, not both")
		}
	case typeWait:
		n := 0
		for _, f := range []string{"Seconds", "SecondsPath", "Timestamp", "TimestampPath"} {
			if _, ok := fields[f]; ok {
				n++
			}
		}
		if n != 1 {
			l.fail(name, "Seconds", "a Wait state has exactly one of Seconds, SecondsPath, Timestamp, TimestampPath")
		}
	}
}

// itemSelector compiles a Map's ItemSelector (or Parameters), in which
// $$.Map.Item.Index and $$.Map.Item.Value name the iteration's item.
func (l *loader) itemSelector(state, field string, raw json.RawMessage) *template {
	l.mapItem = true
	defer func() { l.mapItem = false }()
	return l.template(state, field, raw)
}

// processor reads a Map's ItemProcessor (or Iterator): the state machine
// each item runs, inline (in this execution), which is the only mode here.
func (l *loader) processor(owner, field string, raw json.RawMessage) *Definition {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		l.fail(owner, field, "must be a JSON object")
		return nil
	}
	d := &Definition{states: map[string]*state{}}
	for _, key := range sortedKeys(fields) {
		raw, sub := fields[key], field+"."+key
		switch key {
		case "Comment":
			l.str(owner, sub, raw)
		case "StartAt":
			d.startAt = l.str(owner, sub, raw)
		case "States":
			l.states(d, owner, sub, raw)
		case "ProcessorConfig":
			if field == "Iterator" {
				l.fail(owner, sub, "is not part of Iterator (use ItemProcessor)")
				continue
			}
			l.processorConfig(owner, sub, raw)
		default:
			l.unsupported(owner, sub)
		}
	}
	_, hasStates := fields["States"]
	l.checkMachine(d, owner, field+".", hasStates)
	return d
}

// processorConfig accepts only the inline mode, the default.
func (l *loader) processorConfig(state, field string, raw json.RawMessage) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		l.fail(state, field, "must be a JSON object")
		return
	}
	for _, key := range sortedKeys(fields) {
		sub := field + "." + key
		switch key {
		case "Mode":
			if m := l.str(state, sub, fields[key]); m != "INLINE" {
				l.fail(state, sub, "%q is not supported (INLINE only: no Distributed Map)", m)
			}
		case "ExecutionType":
			l.fail(state, sub, "is not supported (INLINE only: no Distributed Map)")
		default:
			l.unsupported(state, sub)
		}
	}
}

// checkLambdaParameters requires the Parameters of lambda:invoke to be the
// function and its payload, nothing else: other Invoke options would change
// what the Task means, and this engine would ignore them.
func (l *loader) checkLambdaParameters(st *state, fields map[string]json.RawMessage) {
	if _, ok := fields["Parameters"]; !ok {
		l.fail(st.name, "Parameters", "is required (with FunctionName and Payload)")
		return
	}
	if st.parameters == nil {
		return
	}
	names := st.parameters.fieldNames()
	for _, n := range names {
		if n != "FunctionName" && n != "Payload" {
			l.fail(st.name, "Parameters."+n, "is not supported (only FunctionName and Payload)")
		}
	}
	if !slices.Contains(names, "Payload") {
		l.fail(st.name, "Parameters.Payload", "is required: the worker's input must be explicit")
	}
	st.payload = payloadOf(st.parameters)
	if st.resultSelector != nil {
		st.payloadSelector = st.resultSelector.overPayload()
	}
}

// objects decodes a field holding an array of JSON objects.
func (l *loader) objects(state, field string, raw json.RawMessage) []map[string]any {
	v, ok := l.value(state, field, raw)
	if !ok {
		return nil
	}
	items, ok := v.([]any)
	if !ok || len(items) == 0 {
		l.fail(state, field, "must be a non-empty array of objects")
		return nil
	}
	out := make([]map[string]any, 0, len(items))
	for i, item := range items {
		m, ok := item.(map[string]any)
		if !ok {
			l.fail(state, fmt.Sprintf("%s[%d]", field, i), "must be an object")
			continue
		}
		out = append(out, m)
	}
	return out
}

// errorEquals checks an ErrorEquals list; States.ALL must be alone, in the
// last retrier or catcher.
func (l *loader) errorEquals(state, field string, v any, last bool) []string {
	items, ok := v.([]any)
	if !ok || len(items) == 0 {
		l.fail(state, field, "must be a non-empty array of error names")
		return nil
	}
	names := make([]string, 0, len(items))
	for _, item := range items {
		s, ok := item.(string)
		if !ok || s == "" {
			l.fail(state, field, "must be a non-empty array of error names")
			return nil
		}
		names = append(names, s)
	}
	if slices.Contains(names, errorAll) && (len(names) > 1 || !last) {
		l.fail(state, field, "States.ALL must appear alone, in the last element")
	}
	return names
}

func (l *loader) retriers(state string, raw json.RawMessage) []retrier {
	items := l.objects(state, "Retry", raw)
	out := make([]retrier, 0, len(items))
	for i, m := range items {
		r := retrier{interval: time.Second, maxAttempts: 3, backoffRate: 2}
		prefix := fmt.Sprintf("Retry[%d].", i)
		if _, ok := m["ErrorEquals"]; !ok {
			l.fail(state, prefix+"ErrorEquals", "is required")
		}
		for _, key := range sortedKeys(m) {
			v, field := m[key], prefix+key
			switch key {
			case "ErrorEquals":
				r.errorEquals = l.errorEquals(state, field, v, i == len(items)-1)
			case "IntervalSeconds":
				r.interval = time.Duration(l.integerValue(state, field, v, 1, maxSeconds)) * time.Second
			case "MaxAttempts":
				r.maxAttempts = int(l.integerValue(state, field, v, 0, maxSeconds))
			case "BackoffRate":
				n, ok := v.(json.Number)
				f, err := n.Float64()
				if !ok || err != nil || f < 1 {
					l.fail(state, field, "must be a number not less than 1.0")
				}
				r.backoffRate = f
			case "MaxDelaySeconds":
				r.maxDelay = time.Duration(l.integerValue(state, field, v, 1, 31622400)) * time.Second
			case "JitterStrategy":
				switch s := l.strValue(state, field, v); s {
				case "FULL":
					r.fullJitter = true
				case "NONE":
				default:
					l.fail(state, field, "must be FULL or NONE")
				}
			default:
				l.unsupported(state, field)
			}
		}
		out = append(out, r)
	}
	return out
}

func (l *loader) catchers(state string, raw json.RawMessage) []catcher {
	items := l.objects(state, "Catch", raw)
	out := make([]catcher, 0, len(items))
	for i, m := range items {
		c := catcher{resultPath: defaultPath}
		prefix := fmt.Sprintf("Catch[%d].", i)
		for _, req := range []string{"ErrorEquals", "Next"} {
			if _, ok := m[req]; !ok {
				l.fail(state, prefix+req, "is required")
			}
		}
		for _, key := range sortedKeys(m) {
			v, field := m[key], prefix+key
			switch key {
			case "ErrorEquals":
				c.errorEquals = l.errorEquals(state, field, v, i == len(items)-1)
			case "Next":
				c.next = l.strValue(state, field, v)
			case "ResultPath":
				c.resultPath = l.optionalPathValue(state, field, v)
			default:
				l.unsupported(state, field)
			}
		}
		out = append(out, c)
	}
	return out
}

// checkTransitions checks that every transition names a state and that
// every state can be reached from StartAt.
func (l *loader) checkTransitions(d *Definition) {
	type edge struct{ field, to string }
	edges := func(st *state) []edge {
		var out []edge
		if st.next != "" {
			out = append(out, edge{"Next", st.next})
		}
		if st.defaultNext != "" {
			out = append(out, edge{"Default", st.defaultNext})
		}
		for i, r := range st.choices {
			out = append(out, edge{fmt.Sprintf("Choices[%d].Next", i), r.next})
		}
		for i, c := range st.catch {
			out = append(out, edge{fmt.Sprintf("Catch[%d].Next", i), c.next})
		}
		return out
	}
	for _, name := range sortedKeys(d.states) {
		for _, e := range edges(d.states[name]) {
			if d.states[e.to] == nil {
				l.fail(name, e.field, "names no state: %q", e.to)
			}
		}
	}
	reached := map[string]bool{d.startAt: true}
	queue := []string{d.startAt}
	for len(queue) > 0 {
		st := d.states[queue[0]]
		queue = queue[1:]
		for _, e := range edges(st) {
			if d.states[e.to] != nil && !reached[e.to] {
				reached[e.to] = true
				queue = append(queue, e.to)
			}
		}
	}
	for _, name := range sortedKeys(d.states) {
		if !reached[name] {
			l.fail(name, "", "cannot be reached from StartAt %q", d.startAt)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// delay returns how long to wait before retry number n (0 for the first).
func (r retrier) delay(n int) time.Duration {
	d := float64(r.interval) * math.Pow(r.backoffRate, float64(n))
	if r.maxDelay > 0 && d > float64(r.maxDelay) {
		d = float64(r.maxDelay)
	}
	if d > float64(maxSeconds*time.Second) {
		d = float64(maxSeconds * time.Second)
	}
	return time.Duration(d)
}
