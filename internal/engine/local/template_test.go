package local

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/jsonenc"
)

// TestAppendJSONIsMarshalValueOfEval checks that a Task's payload encoded
// straight from its template is what encoding the template's value makes,
// errors included.
func TestAppendJSONIsMarshalValueOfEval(t *testing.T) {
	input, err := decodeValue([]byte(`{"instance_id":"i-1","kind":"provision","n":[1,2.5,{"z":null,"a":true}],"s":"<a & b>\n","é":"ü"}`))
	if err != nil {
		t.Fatal(err)
	}
	x := &execution{name: "0193a0b1-0000-7000-8000-000000000001", workflow: "operation", input: input, started: time.Unix(1764378123, 0)}
	c := x.contextObject(&state{name: "Begin"}, time.Unix(1764378124, 0), 2)
	for _, tmpl := range []string{
		`{"step":"begin","operation_id.$":"$$.Execution.Name","instance_id.$":"$.instance_id","execution_input.$":"$$.Execution.Input"}`,
		`{"b":1,"a-b":2,"a.$":"$.kind","a_b":[3,{"y.$":"$.n[2]","x":"lit"}],"A":{},"é.$":"$.é","s.$":"$.s","retries.$":"$$.State.RetryCount","t.$":"$$.State.EnteredTime"}`,
		`{"whole.$":"$","empty":[],"nested":{"deep":{"deeper.$":"$.n"}}}`,
		`{"missing.$":"$.nothing"}`,
		`{"a":1,"missing.$":"$.n[7]"}`,
	} {
		var v any
		if err := json.Unmarshal([]byte(tmpl), &v); err != nil {
			t.Fatal(err)
		}
		l := &loader{}
		tp := l.compile("S", "Payload", v)
		if len(l.errs) > 0 {
			t.Fatal(l.errs)
		}
		want, wantErr := tp.eval(input, c)
		var wantJSON []byte
		if wantErr == nil {
			if wantJSON, err = jsonenc.MarshalValue(want); err != nil {
				t.Fatal(err)
			}
		}
		got, gotErr := tp.appendJSON(nil, input, c)
		switch {
		case (gotErr == nil) != (wantErr == nil):
			t.Errorf("%s: error %v, eval's %v", tmpl, gotErr, wantErr)
		case gotErr != nil && *gotErr != *wantErr:
			t.Errorf("%s: error %+v, eval's %+v", tmpl, *gotErr, *wantErr)
		case !bytes.Equal(got, wantJSON):
			t.Errorf("%s:\nappendJSON %s\nMarshalValue %s", tmpl, got, wantJSON)
		}
	}
}

// TestEveryTaskOfTheWorkflowsTakesTheShortWays checks that every Task
// of the workflows has its payload encoded from its template (payloadOf:
// their Parameters are a literal FunctionName and the Payload) and its
// ResultSelector, if any, reading the worker's answer alone (overPayload).
func TestEveryTaskOfTheWorkflowsTakesTheShortWays(t *testing.T) {
	defs, err := LoadDir("../../../statemachines")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for w, d := range defs {
		eachState(d, func(name string, st *state) {
			if st.typ == typeTask {
				n++
				if st.payload == nil {
					t.Errorf("%s: Task %s evaluates its Parameters whole", w, name)
				}
				if st.resultSelector != nil && st.payloadSelector == nil {
					t.Errorf("%s: Task %s builds the Lambda result for its ResultSelector", w, name)
				}
			}
		})
	}
	if n == 0 {
		t.Fatal("no Task found")
	}
}

// eachState calls visit with every state of d, those of its Maps' processors
// too.
func eachState(d *Definition, visit func(name string, st *state)) {
	for name, st := range d.states {
		visit(name, st)
		if st.processor != nil {
			eachState(st.processor, visit)
		}
	}
}

// TestAPayloadSelectorSelectsWhatItsResultSelectorDoes checks that a
// ResultSelector made to read the worker's answer (overPayload) selects
// what it selects from the Lambda result around that answer, errors
// included, and that one reading more of the result is left as it is.
func TestAPayloadSelectorSelectsWhatItsResultSelectorDoes(t *testing.T) {
	x := &execution{name: "e-1", workflow: "operation", started: time.Unix(1764378123, 0)}
	c := x.contextObject(&state{name: "Begin"}, time.Unix(1764378124, 0), 0)
	compile := func(text string) *template {
		var v any
		if err := json.Unmarshal([]byte(text), &v); err != nil {
			t.Fatal(err)
		}
		l := &loader{}
		tp := l.compile("S", "ResultSelector", v)
		if len(l.errs) > 0 {
			t.Fatal(l.errs)
		}
		return tp
	}
	selectors := []string{
		`{"done.$":"$.Payload.done","retry_after.$":"$.Payload.retry_after"}`,
		`{"all.$":"$.Payload","first.$":"$.Payload.list[0]","lit":[1,{"name.$":"$$.Execution.Name","x.$":"$.Payload.done"}]}`,
	}
	answers := []string{`{"done":false,"retry_after":5}`, `{"done":true,"list":["a"]}`, `{"list":[]}`, `"text"`, `null`}
	for _, sel := range selectors {
		rs := compile(sel)
		ps := rs.overPayload()
		if ps == nil {
			t.Fatalf("%s: no payload selector", sel)
		}
		for _, a := range answers {
			res, err := decodeValue([]byte(a))
			if err != nil {
				t.Fatal(err)
			}
			want, wantErr := rs.eval(map[string]any{"ExecutedVersion": "$LATEST", "Payload": res, "StatusCode": json.Number("200")}, c)
			got, gotErr := ps.eval(res, c)
			switch {
			case (gotErr == nil) != (wantErr == nil):
				t.Errorf("%s on %s: error %v, the ResultSelector's %v", sel, a, gotErr, wantErr)
			case gotErr != nil && *gotErr != *wantErr:
				t.Errorf("%s on %s: error %+v, the ResultSelector's %+v", sel, a, *gotErr, *wantErr)
			case !reflect.DeepEqual(got, want):
				t.Errorf("%s on %s: %v, the ResultSelector %v", sel, a, got, want)
			}
		}
	}
	for _, sel := range []string{`{"v.$":"$.ExecutedVersion"}`, `{"all.$":"$"}`, `{"p":{"code.$":"$.StatusCode"},"d.$":"$.Payload.done"}`} {
		if compile(sel).overPayload() != nil {
			t.Errorf("%s: made to read the answer alone", sel)
		}
	}
}

// TestSameValueIsIdentityNotEquality checks what lets a state that passes
// its input on hand the next state the same encoding: only the same object
// or list is the same.
func TestSameValueIsIdentityNotEquality(t *testing.T) {
	m, l := map[string]any{"a": "b"}, []any{"a"}
	for _, c := range []struct {
		a, b any
		same bool
	}{
		{m, m, true}, {l, l, true}, {nil, nil, true},
		{m, map[string]any{"a": "b"}, false}, {l, []any{"a"}, false}, {l[:0], l[:0], false},
		{map[string]any(nil), map[string]any(nil), false}, {m, l, false}, {"s", "s", false}, {nil, m, false},
	} {
		if got := sameValue(c.a, c.b); got != c.same {
			t.Errorf("sameValue(%v, %v) = %v, want %v", c.a, c.b, got, c.same)
		}
	}
}
