package local_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/engine/local"
)

// loadErrors returns the *LoadError values in err.
func loadErrors(err error) []*local.LoadError {
	var out []*local.LoadError
	var le *local.LoadError
	if errors.As(err, &le) && le == err {
		return []*local.LoadError{le}
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, loadErrors(e)...)
		}
	}
	return out
}

// states wraps states in a definition that starts at the first of them.
func states(startAt, states string) string {
	return `{"StartAt":"` + startAt + `","States":{` + states + `}}`
}

// inner is an iteration of one Succeed state, named name.
func inner(name string) string {
	return `{"StartAt":"` + name + `","States":{"` + name + `":{"Type":"Succeed"}}}`
}

// mapWith is a definition of one Map state "M" with the fields given.
func mapWith(fields string) string {
	return states("M", `"M":{"Type":"Map",`+fields+`,"ItemProcessor":`+inner("A")+`,"End":true}`)
}

const lambda = `"Type":"Task","Resource":"arn:aws:states:::lambda:invoke"`
const params = `"Parameters":{"FunctionName":"f","Payload":{}}`

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		asl     string
		state   string
		field   string
		problem string
	}{
		{"a Map without ItemProcessor", states("M", `"M":{"Type":"Map","End":true}`), "M", "ItemProcessor", "is required"},
		{"a Map with both ItemProcessor and Iterator", states("M", `"M":{"Type":"Map","ItemProcessor":`+inner("A")+`,"Iterator":`+inner("B")+`,"End":true}`), "M", "Iterator", "not both"},
		{"a Map with both ItemSelector and Parameters", states("M", `"M":{"Type":"Map","ItemSelector":{},"Parameters":{},"ItemProcessor":`+inner("A")+`,"End":true}`), "M", "Parameters", "not both"},
		{"a Distributed Map", states("M", `"M":{"Type":"Map","ItemProcessor":{"ProcessorConfig":{"Mode":"DISTRIBUTED","ExecutionType":"STANDARD"},"StartAt":"A","States":{"A":{"Type":"Succeed"}}},"End":true}`), "M", "ItemProcessor.ProcessorConfig.Mode", `"DISTRIBUTED" is not supported`},
		{"a Map with an ExecutionType", states("M", `"M":{"Type":"Map","ItemProcessor":{"ProcessorConfig":{"Mode":"INLINE","ExecutionType":"EXPRESS"},"StartAt":"A","States":{"A":{"Type":"Succeed"}}},"End":true}`), "M", "ItemProcessor.ProcessorConfig.ExecutionType", "not supported"},
		{"an Iterator with a ProcessorConfig", states("M", `"M":{"Type":"Map","Iterator":{"ProcessorConfig":{"Mode":"INLINE"},"StartAt":"A","States":{"A":{"Type":"Succeed"}}},"End":true}`), "M", "Iterator.ProcessorConfig", "use ItemProcessor"},
		{"a Map with an ItemReader", mapWith(`"ItemReader":{"Resource":"arn:aws:states:::s3:getObject","Parameters":{}}`), "M", "ItemReader", "inline Map only"},
		{"a Map with a ResultWriter", mapWith(`"ResultWriter":{"Resource":"arn:aws:states:::s3:putObject","Parameters":{}}`), "M", "ResultWriter", "inline Map only"},
		{"a Map with an ItemBatcher", mapWith(`"ItemBatcher":{"MaxItemsPerBatch":2}`), "M", "ItemBatcher", "inline Map only"},
		{"a Map with a ToleratedFailureCount", mapWith(`"ToleratedFailureCount":1`), "M", "ToleratedFailureCount", "inline Map only"},
		{"a Map with a ToleratedFailurePercentage", mapWith(`"ToleratedFailurePercentage":10`), "M", "ToleratedFailurePercentage", "inline Map only"},
		{"a Map with a ToleratedFailureCountPath", mapWith(`"ToleratedFailureCountPath":"$.n"`), "M", "ToleratedFailureCountPath", "inline Map only"},
		{"a Map with a MaxConcurrencyPath", mapWith(`"MaxConcurrencyPath":"$.n"`), "M", "MaxConcurrencyPath", "use MaxConcurrency"},
		{"a Map with a Label", mapWith(`"Label":"fleet"`), "M", "Label", "inline Map only"},
		{"a Map with JSONata Items", mapWith(`"Items":[1,2]`), "M", "Items", "JSONata"},
		{"a negative MaxConcurrency", mapWith(`"MaxConcurrency":-1`), "M", "MaxConcurrency", "integer from 0"},
		{"a fractional MaxConcurrency", mapWith(`"MaxConcurrency":1.5`), "M", "MaxConcurrency", "integer from 0"},
		{"an ItemsPath that is a context path", mapWith(`"ItemsPath":"$$.Execution.Input.items"`), "M", "ItemsPath", "not allowed"},
		{"an ItemsPath that is not a path", mapWith(`"ItemsPath":"items"`), "M", "ItemsPath", "must start with $"},
		{"a $$.Map field that does not exist", mapWith(`"ItemSelector":{"x.$":"$$.Map.Item.Key"}`), "M", "ItemSelector.x.$", "Index and Value only"},
		{"a field below $$.Map.Item.Index", mapWith(`"ItemSelector":{"x.$":"$$.Map.Item.Index.a"}`), "M", "ItemSelector.x.$", "no fields"},
		{"a $$.Map path in a Map's ResultSelector", mapWith(`"ResultSelector":{"x.$":"$$.Map.Item.Value"}`), "M", "ResultSelector.x.$", "only in a Map state's ItemSelector"},
		{"a $$.Map path inside an iteration", states("M", `"M":{"Type":"Map","ItemProcessor":{"StartAt":"A","States":{"A":{"Type":"Pass","Parameters":{"v.$":"$$.Map.Item.Value"},"End":true}}},"End":true}`), "A", "Parameters.v.$", "only in a Map state's ItemSelector"},
		{"an unsupported state inside an iteration", states("M", `"M":{"Type":"Map","ItemProcessor":{"StartAt":"A","States":{"A":{"Type":"Parallel","Branches":[],"End":true}}},"End":true}`), "A", "Type", `"Parallel" is not supported`},
		{"an iteration state whose Next leaves the iteration", states("M", `"M":{"Type":"Map","ItemProcessor":{"StartAt":"A","States":{"A":{"Type":"Pass","Next":"After"}}},"Next":"After"},"After":{"Type":"Succeed"}`), "A", "Next", `names no state: "After"`},
		{"a Next into an iteration from outside it", states("P", `"P":{"Type":"Pass","Next":"M"},"M":{"Type":"Map","ItemProcessor":`+inner("A")+`,"Next":"A"}`), "M", "Next", `names no state: "A"`},
		{"an unreachable iteration state", states("M", `"M":{"Type":"Map","ItemProcessor":{"StartAt":"A","States":{"A":{"Type":"Succeed"},"B":{"Type":"Succeed"}}},"End":true}`), "B", "", "cannot be reached"},
		{"an iteration without StartAt", states("M", `"M":{"Type":"Map","ItemProcessor":{"States":{"A":{"Type":"Succeed"}}},"End":true}`), "M", "ItemProcessor.StartAt", "is required"},
		{"an iteration without States", states("M", `"M":{"Type":"Map","Iterator":{"StartAt":"A"},"End":true}`), "M", "Iterator.States", "is required"},
		{"an unknown field of ItemProcessor", states("M", `"M":{"Type":"Map","ItemProcessor":{"StartAt":"A","States":{"A":{"Type":"Succeed"}},"Extra":1},"End":true}`), "M", "ItemProcessor.Extra", "unknown"},
		{"a state name used inside and outside an iteration", states("M", `"M":{"Type":"Map","ItemProcessor":{"StartAt":"M","States":{"M":{"Type":"Succeed"}}},"End":true}`), "M", "", "defined twice"},
		{"a Map without Next or End", states("M", `"M":{"Type":"Map","ItemProcessor":`+inner("A")+`}`), "M", "Next", "is required"},
		{"a Parallel state", states("P", `"P":{"Type":"Parallel","Branches":[],"End":true}`), "P", "Type", `"Parallel" is not supported`},
		{"an unknown state type", states("X", `"X":{"Type":"Magic","End":true}`), "X", "Type", "not supported"},
		{"a state without Type", states("X", `"X":{"End":true}`), "X", "Type", "is required"},
		{"a Task with a plain Lambda ARN", states("T", `"T":{"Type":"Task","Resource":"arn:aws:lambda:us-east-1:123456789012:function:f",`+params+`,"End":true}`), "T", "Resource", "not supported"},
		{"a Task with another service integration", states("T", `"T":{"Type":"Task","Resource":"arn:aws:states:::dynamodb:putItem",`+params+`,"End":true}`), "T", "Resource", "not supported"},
		{"a callback Task", states("T", `"T":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke.waitForTaskToken",`+params+`,"End":true}`), "T", "Resource", "not supported"},
		{"a Task without Resource", states("T", `"T":{"Type":"Task",`+params+`,"End":true}`), "T", "Resource", "is required"},
		{"a Task without Parameters", states("T", `"T":{`+lambda+`,"End":true}`), "T", "Parameters", "is required"},
		{"a Task without Payload", states("T", `"T":{`+lambda+`,"Parameters":{"FunctionName":"f"},"End":true}`), "T", "Parameters.Payload", "is required"},
		{"a Task with other Invoke parameters", states("T", `"T":{`+lambda+`,"Parameters":{"FunctionName":"f","Payload":{},"InvocationType":"Event"},"End":true}`), "T", "Parameters.InvocationType", "not supported"},
		{"JSONata for the whole machine", `{"QueryLanguage":"JSONata","StartAt":"P","States":{"P":{"Type":"Pass","End":true}}}`, "", "QueryLanguage", "JSONata"},
		{"JSONata for one state", states("P", `"P":{"Type":"Pass","QueryLanguage":"JSONata","End":true}`), "P", "QueryLanguage", "JSONata"},
		{"Arguments", states("T", `"T":{`+lambda+`,`+params+`,"Arguments":{},"End":true}`), "T", "Arguments", "JSONata"},
		{"Output", states("P", `"P":{"Type":"Pass","Output":{},"End":true}`), "P", "Output", "JSONata"},
		{"Assign", states("P", `"P":{"Type":"Pass","Assign":{"x":1},"End":true}`), "P", "Assign", "variables"},
		{"an intrinsic function in Parameters", states("P", `"P":{"Type":"Pass","Parameters":{"s.$":"States.Format('{}', $.a)"},"End":true}`), "P", "Parameters.s.$", "intrinsic function"},
		{"an intrinsic function in a Task Payload", states("T", `"T":{`+lambda+`,"Parameters":{"FunctionName":"f","Payload":{"id.$":"States.UUID()"}},"End":true}`), "T", "Parameters.Payload.id.$", "intrinsic function"},
		{"an unknown field", states("P", `"P":{"Type":"Pass","Foo":1,"End":true}`), "P", "Foo", "unknown"},
		{"an unknown top-level field", `{"StartAt":"P","Extra":1,"States":{"P":{"Type":"Pass","End":true}}}`, "", "Extra", "unknown"},
		{"HeartbeatSeconds", states("T", `"T":{`+lambda+`,`+params+`,"HeartbeatSeconds":10,"End":true}`), "T", "HeartbeatSeconds", "not supported"},
		{"TimeoutSecondsPath", states("T", `"T":{`+lambda+`,`+params+`,"TimeoutSecondsPath":"$.t","End":true}`), "T", "TimeoutSecondsPath", "not supported"},
		{"a Fail with ErrorPath", states("F", `"F":{"Type":"Fail","ErrorPath":"$.e"}`), "F", "ErrorPath", "not supported"},
		{"a recursive-descent path", states("P", `"P":{"Type":"Pass","InputPath":"$..a","End":true}`), "P", "InputPath", "unsupported syntax"},
		{"a wildcard path", states("P", `"P":{"Type":"Pass","Parameters":{"a.$":"$.a[*]"},"End":true}`), "P", "Parameters.a.$", "unsupported syntax"},
		{"a filter path", states("P", `"P":{"Type":"Pass","OutputPath":"$.a[?(@.x)]","End":true}`), "P", "OutputPath", "unsupported syntax"},
		{"a negative index", states("P", `"P":{"Type":"Pass","InputPath":"$.a[-1]","End":true}`), "P", "InputPath", "unsupported syntax"},
		{"a path not starting with $", states("P", `"P":{"Type":"Pass","InputPath":"a.b","End":true}`), "P", "InputPath", "must start with $"},
		{"a task token context path", states("P", `"P":{"Type":"Pass","Parameters":{"t.$":"$$.Task.Token"},"End":true}`), "P", "Parameters.t.$", "$$.Task is not supported"},
		{"a Map context path outside a Map", states("P", `"P":{"Type":"Pass","Parameters":{"t.$":"$$.Map.Item.Value"},"End":true}`), "P", "Parameters.t.$", "$$.Map is only in a Map state's ItemSelector"},
		{"a context path in ResultPath", states("P", `"P":{"Type":"Pass","ResultPath":"$$.Execution.Name","End":true}`), "P", "ResultPath", "not allowed"},
		{"a .$ field that is not a string", states("P", `"P":{"Type":"Pass","Parameters":{"a.$":1},"End":true}`), "P", "Parameters.a.$", "path string"},
		{"a field given twice, with and without .$", states("P", `"P":{"Type":"Pass","Parameters":{"a":1,"a.$":"$.b"},"End":true}`), "P", "Parameters.a.$", "given twice"},
		{"a ResultSelector that is not an object", states("T", `"T":{`+lambda+`,`+params+`,"ResultSelector":"$.x","End":true}`), "T", "ResultSelector", "JSON object"},
		{"a StartAt that names no state", states("Nowhere", `"P":{"Type":"Pass","End":true}`), "", "StartAt", `names no state: "Nowhere"`},
		{"a missing StartAt", `{"States":{"P":{"Type":"Pass","End":true}}}`, "", "StartAt", "is required"},
		{"no States", `{"StartAt":"P"}`, "", "States", "is required"},
		{"a Next that names no state", states("P", `"P":{"Type":"Pass","Next":"Ghost"}`), "P", "Next", `names no state: "Ghost"`},
		{"a Catch Next that names no state", states("T", `"T":{`+lambda+`,`+params+`,"Catch":[{"ErrorEquals":["States.ALL"],"Next":"Ghost"}],"End":true}`), "T", "Catch[0].Next", "names no state"},
		{"a Default that names no state", states("C", `"C":{"Type":"Choice","Choices":[{"Variable":"$.a","IsPresent":true,"Next":"E"}],"Default":"Ghost"},"E":{"Type":"Succeed"}`), "C", "Default", "names no state"},
		{"a state that cannot be reached", states("P", `"P":{"Type":"Pass","End":true},"Orphan":{"Type":"Succeed"}`), "Orphan", "", "cannot be reached"},
		{"a non-terminal state without Next", states("P", `"P":{"Type":"Pass"}`), "P", "Next", "is required (or End: true)"},
		{"a state with both Next and End", states("P", `"P":{"Type":"Pass","Next":"S","End":true},"S":{"Type":"Succeed"}`), "P", "End", "not both"},
		{"a Succeed state with Next", states("S", `"S":{"Type":"Succeed","Next":"S"}`), "S", "Next", "unknown"},
		{"a Choice rule without Next", states("C", `"C":{"Type":"Choice","Choices":[{"Variable":"$.a","IsPresent":true}],"Default":"E"},"E":{"Type":"Succeed"}`), "C", "Choices[0].Next", "is required"},
		{"a nested Choice rule with Next", states("C", `"C":{"Type":"Choice","Choices":[{"Not":{"Variable":"$.a","IsPresent":true,"Next":"E"},"Next":"E"}]},"E":{"Type":"Succeed"}`), "C", "Choices[0].Not.Next", "only top-level"},
		{"an unsupported comparison operator", states("C", `"C":{"Type":"Choice","Choices":[{"Variable":"$.a","StringMatches":"x*","Next":"E"}]},"E":{"Type":"Succeed"}`), "C", "Choices[0].StringMatches", "not supported"},
		{"a comparison without Variable", states("C", `"C":{"Type":"Choice","Choices":[{"StringEquals":"x","Next":"E"}]},"E":{"Type":"Succeed"}`), "C", "Choices[0].Variable", "is required"},
		{"a rule with two operators", states("C", `"C":{"Type":"Choice","Choices":[{"Variable":"$.a","StringEquals":"x","IsPresent":true,"Next":"E"}]},"E":{"Type":"Succeed"}`), "C", "Choices[0]", "exactly one"},
		{"an operand of the wrong type", states("C", `"C":{"Type":"Choice","Choices":[{"Variable":"$.a","NumericEquals":"1","Next":"E"}]},"E":{"Type":"Succeed"}`), "C", "Choices[0].NumericEquals", "must be a number"},
		{"a Choice without Choices", states("C", `"C":{"Type":"Choice","Default":"E"},"E":{"Type":"Succeed"}`), "C", "Choices", "is required"},
		{"a Wait with two durations", states("W", `"W":{"Type":"Wait","Seconds":1,"SecondsPath":"$.s","End":true}`), "W", "Seconds", "exactly one"},
		{"a Wait with negative Seconds", states("W", `"W":{"Type":"Wait","Seconds":-1,"End":true}`), "W", "Seconds", "integer from 0"},
		{"a Wait with a bad Timestamp", states("W", `"W":{"Type":"Wait","Timestamp":"soon","End":true}`), "W", "Timestamp", "RFC 3339"},
		{"States.ALL with other names", states("T", `"T":{`+lambda+`,`+params+`,"Retry":[{"ErrorEquals":["States.ALL","X"]}],"End":true}`), "T", "Retry[0].ErrorEquals", "alone"},
		{"States.ALL before another retrier", states("T", `"T":{`+lambda+`,`+params+`,"Retry":[{"ErrorEquals":["States.ALL"]},{"ErrorEquals":["X"]}],"End":true}`), "T", "Retry[0].ErrorEquals", "last"},
		{"a retrier without ErrorEquals", states("T", `"T":{`+lambda+`,`+params+`,"Retry":[{"MaxAttempts":1}],"End":true}`), "T", "Retry[0].ErrorEquals", "is required"},
		{"a BackoffRate below 1", states("T", `"T":{`+lambda+`,`+params+`,"Retry":[{"ErrorEquals":["X"],"BackoffRate":0.5}],"End":true}`), "T", "Retry[0].BackoffRate", "not less than 1.0"},
		{"an IntervalSeconds of 0", states("T", `"T":{`+lambda+`,`+params+`,"Retry":[{"ErrorEquals":["X"],"IntervalSeconds":0}],"End":true}`), "T", "Retry[0].IntervalSeconds", "integer from 1"},
		{"an unknown retrier field", states("T", `"T":{`+lambda+`,`+params+`,"Retry":[{"ErrorEquals":["X"],"Tries":2}],"End":true}`), "T", "Retry[0].Tries", "unknown"},
		{"a catcher without Next", states("T", `"T":{`+lambda+`,`+params+`,"Catch":[{"ErrorEquals":["X"]}],"End":true}`), "T", "Catch[0].Next", "is required"},
		{"a fractional TimeoutSeconds", states("T", `"T":{`+lambda+`,`+params+`,"TimeoutSeconds":1.5,"End":true}`), "T", "TimeoutSeconds", "integer"},
		{"a state name longer than 80 characters", states(strings.Repeat("s", 81), `"`+strings.Repeat("s", 81)+`":{"Type":"Succeed"}`), strings.Repeat("s", 81), "", "80 characters"},
	}
	for _, c := range cases {
		t.Run("a definition with "+c.name+" is refused, naming file, state and field", func(t *testing.T) {
			t.Parallel()
			d, err := local.Parse("bad.asl.json", []byte(c.asl))
			if err == nil {
				t.Fatalf("Parse = %v, nil; want an error", d)
			}
			if !strings.Contains(err.Error(), "bad.asl.json") {
				t.Errorf("error %q does not name the file", err)
			}
			for _, le := range loadErrors(err) {
				if le.State == c.state && le.Field == c.field && strings.Contains(le.Problem, c.problem) {
					return
				}
			}
			t.Errorf("error %q has no problem at state %q field %q containing %q", err, c.state, c.field, c.problem)
		})
	}

	t.Run("a text that is not JSON is refused, naming the file", func(t *testing.T) {
		t.Parallel()
		if _, err := local.Parse("bad.asl.json", []byte(`{"StartAt":`)); err == nil || !strings.Contains(err.Error(), "bad.asl.json") {
			t.Errorf("Parse = %v, want an error naming the file", err)
		}
	})

	t.Run("every problem is reported, not just the first", func(t *testing.T) {
		t.Parallel()
		_, err := local.Parse("bad.asl.json", []byte(states("P", `"P":{"Type":"Pass","Foo":1,"Bar":2,"End":true}`)))
		if n := len(loadErrors(err)); n != 2 {
			t.Errorf("%d problems reported (%v), want 2", n, err)
		}
	})
}

func TestParseAccepts(t *testing.T) {
	t.Parallel()
	t.Run("the real definitions load", func(t *testing.T) {
		t.Parallel()
		defs, err := local.LoadDir(statemachines)
		if err != nil {
			t.Fatalf("LoadDir = %v", err)
		}
		if defs["operation"] == nil {
			t.Errorf("workflows loaded: %v; want operation", defs)
		}
	})

	t.Run("a definition using every supported feature loads", func(t *testing.T) {
		t.Parallel()
		asl := `{
		  "Comment": "all", "Version": "1.0", "QueryLanguage": "JSONPath", "TimeoutSeconds": 60,
		  "StartAt": "P",
		  "States": {
		    "P": {"Type": "Pass", "Comment": "c", "InputPath": "$", "Parameters": {"a.$": "$['x'].y[0]", "b": [1, {"c.$": "$$.State.EnteredTime"}]},
		          "Result": 1, "ResultPath": "$.r", "OutputPath": null, "Next": "T"},
		    "T": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
		          "Parameters": {"FunctionName.$": "$.fn", "Payload.$": "$"}, "ResultSelector": {"p.$": "$.Payload"},
		          "ResultPath": null, "TimeoutSeconds": 5, "QueryLanguage": "JSONPath",
		          "Retry": [{"ErrorEquals": ["A", "B"], "IntervalSeconds": 2, "MaxAttempts": 0, "BackoffRate": 1.5, "MaxDelaySeconds": 9, "JitterStrategy": "FULL"},
		                    {"ErrorEquals": ["States.ALL"]}],
		          "Catch": [{"ErrorEquals": ["States.TaskFailed"], "ResultPath": "$.e", "Next": "F"}, {"ErrorEquals": ["States.ALL"], "Next": "F"}],
		          "Next": "C"},
		    "C": {"Type": "Choice", "Choices": [
		            {"And": [{"Variable": "$.a", "IsPresent": true}, {"Not": {"Variable": "$.a", "IsNull": true}}], "Next": "W1", "Comment": "x"},
		            {"Or": [{"Variable": "$$.Execution.Input.k", "StringEquals": "v"}, {"Variable": "$.n", "NumericGreaterThanEquals": 1.5}], "Next": "W2"}],
		          "Default": "W3", "InputPath": "$.in", "OutputPath": "$.out"},
		    "W1": {"Type": "Wait", "Seconds": 0, "Next": "S"},
		    "W2": {"Type": "Wait", "Timestamp": "2030-01-01T00:00:00Z", "Next": "S"},
		    "W3": {"Type": "Wait", "TimestampPath": "$.t", "Next": "S"},
		    "S": {"Type": "Succeed"},
		    "F": {"Type": "Fail", "Error": "E", "Cause": "C"}
		  }
		}`
		if _, err := local.Parse("all.asl.json", []byte(asl)); err != nil {
			t.Errorf("Parse = %v", err)
		}
	})

	t.Run("a definition using every supported feature of Map loads", func(t *testing.T) {
		t.Parallel()
		asl := `{
		  "StartAt": "New",
		  "States": {
		    "New": {"Type": "Map", "Comment": "c", "QueryLanguage": "JSONPath", "InputPath": "$.in", "ItemsPath": "$.items",
		            "ItemSelector": {"value.$": "$$.Map.Item.Value.id", "index.$": "$$.Map.Item.Index", "all.$": "$$.Map.Item.Value", "name.$": "$$.Execution.Name", "plan.$": "$.plan"},
		            "MaxConcurrency": 0, "ResultSelector": {"r.$": "$"}, "ResultPath": "$.out", "OutputPath": "$",
		            "Retry": [{"ErrorEquals": ["States.ALL"], "MaxAttempts": 1}],
		            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.e", "Next": "Failed"}],
		            "ItemProcessor": {"Comment": "c", "ProcessorConfig": {"Mode": "INLINE"}, "StartAt": "T",
		              "States": {
		                "T": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "Parameters": {"FunctionName": "f", "Payload.$": "$"}, "Next": "C"},
		                "C": {"Type": "Choice", "Choices": [{"Variable": "$.Payload", "IsPresent": true, "Next": "W"}], "Default": "Bad"},
		                "W": {"Type": "Wait", "Seconds": 1, "Next": "Nested"},
		                "Nested": {"Type": "Map", "Iterator": {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": true}}}, "Next": "Ok"},
		                "Ok": {"Type": "Succeed"},
		                "Bad": {"Type": "Fail", "Error": "Bad"}
		              }},
		            "Next": "Old"},
		    "Old": {"Type": "Map", "Parameters": {"v.$": "$$.Map.Item.Value"}, "MaxConcurrency": 2,
		            "Iterator": {"StartAt": "Echo", "States": {"Echo": {"Type": "Pass", "End": true}}}, "End": true},
		    "Failed": {"Type": "Fail", "Error": "E"}
		  }
		}`
		if _, err := local.Parse("map.asl.json", []byte(asl)); err != nil {
			t.Errorf("Parse = %v", err)
		}
	})
}
