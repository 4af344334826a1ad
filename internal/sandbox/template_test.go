package sandbox

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestIntrinsicsResolveAsCloudFormationDoes(t *testing.T) {
	var tmpl Template
	if err := json.Unmarshal([]byte(`{
		"Parameters": {"Size": {"Type": "Number", "Default": 3}},
		"Conditions": {
			"Big": {"Fn::Equals": [{"Ref": "Size"}, "3"]},
			"Small": {"Fn::Not": [{"Condition": "Big"}]},
			"Both": {"Fn::And": [{"Condition": "Big"}, {"Fn::Or": [{"Condition": "Small"}, {"Fn::Equals": ["a", "a"]}]}]}
		},
		"Resources": {"Table": {"Type": "AWS::DynamoDB::Table"}}
	}`), &tmpl); err != nil {
		t.Fatal(err)
	}
	s, err := newStack(&tmpl, "Stack", "eu-west-1", "111122223333")
	if err != nil {
		t.Fatal(err)
	}
	s.refs["Table"] = "Stack-Table-X"
	s.attrs["Table"] = map[string]string{"Arn": "arn:aws:dynamodb:eu-west-1:111122223333:table/Stack-Table-X"}
	for _, c := range []struct {
		name string
		in   string
		want any
	}{
		{"Ref of a resource", `{"Ref": "Table"}`, "Stack-Table-X"},
		{"Ref of a parameter takes its default", `{"Ref": "Size"}`, "3"},
		{"pseudo parameters", `{"Fn::Join": [":", [{"Ref": "AWS::Partition"}, {"Ref": "AWS::Region"}, {"Ref": "AWS::AccountId"}, {"Ref": "AWS::URLSuffix"}, {"Ref": "AWS::StackName"}]]}`,
			"aws:eu-west-1:111122223333:amazonaws.com:Stack"},
		{"Fn::GetAtt as a list and as a string", `[{"Fn::GetAtt": ["Table", "Arn"]}, {"Fn::GetAtt": "Table.Arn"}]`,
			[]any{"arn:aws:dynamodb:eu-west-1:111122223333:table/Stack-Table-X", "arn:aws:dynamodb:eu-west-1:111122223333:table/Stack-Table-X"}},
		{"Fn::Sub with references, attributes, its own variables and a literal", `{"Fn::Sub": ["${Table}/${Table.Arn}/${V}/${!Kept}", {"V": {"Ref": "AWS::Region"}}]}`,
			"Stack-Table-X/arn:aws:dynamodb:eu-west-1:111122223333:table/Stack-Table-X/eu-west-1/${Kept}"},
		{"Fn::Select of Fn::Split (the stack id's UUID)", `{"Fn::Select": [2, {"Fn::Split": ["/", {"Ref": "AWS::StackId"}]}]}`, "8d3f2a60-0000-4000-8000-5a4db0c5e001"},
		{"Fn::If on a condition, AWS::NoValue drops the property", `{"A": {"Fn::If": ["Big", "big", "small"]}, "B": {"Fn::If": ["Small", "x", {"Ref": "AWS::NoValue"}]}, "C": {"Fn::If": ["Both", 1, 2]}}`,
			map[string]any{"A": "big", "C": float64(1)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var in any
			if err := json.Unmarshal([]byte(c.in), &in); err != nil {
				t.Fatal(err)
			}
			got, err := s.eval(in)
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %#v, %v; want %#v", got, err, c.want)
			}
		})
	}
	t.Run("any attribute of a resource the sandbox does not make resolves", func(t *testing.T) {
		s.standIns["Alarm"], s.t.Resources["Alarm"] = true, Resource{Type: "AWS::CloudWatch::Alarm"}
		if got, err := s.eval(map[string]any{"Fn::GetAtt": []any{"Alarm", "Arn"}}); err != nil || got != "sandbox-Alarm-Arn" {
			t.Fatalf("got %v, %v", got, err)
		}
	})
	t.Run("a reference to nothing is an error that names it", func(t *testing.T) {
		if _, err := s.eval(map[string]any{"Ref": "Nothing"}); err == nil || !strings.Contains(err.Error(), "Nothing") {
			t.Fatalf("got %v", err)
		}
	})
}

func TestResourcesAreMadeAfterWhatTheyReferTo(t *testing.T) {
	var tmpl Template
	if err := json.Unmarshal([]byte(`{"Resources": {
		"Machine": {"Type": "AWS::StepFunctions::StateMachine", "Properties": {"DefinitionSubstitutions": {"F": {"Fn::GetAtt": ["Worker", "Arn"]}}}},
		"Worker": {"Type": "AWS::Lambda::Function", "Properties": {"Role": {"Fn::GetAtt": ["Role", "Arn"]}}, "DependsOn": ["Policy"]},
		"Policy": {"Type": "AWS::IAM::Policy", "Properties": {"Roles": [{"Ref": "Role"}], "X": {"Fn::Sub": "${Table.Arn}"}}},
		"Role": {"Type": "AWS::IAM::Role"},
		"Table": {"Type": "AWS::DynamoDB::Table"}
	}}`), &tmpl); err != nil {
		t.Fatal(err)
	}
	got, err := order(tmpl.Resources)
	if err != nil {
		t.Fatal(err)
	}
	before := func(a, b string) bool { return slices.Index(got, a) < slices.Index(got, b) }
	if !before("Role", "Policy") || !before("Table", "Policy") || !before("Policy", "Worker") || !before("Worker", "Machine") {
		t.Fatalf("order %v: a resource comes before what it refers to", got)
	}
	tmpl.Resources["Role"] = Resource{Type: "AWS::IAM::Role", DependsOn: "Machine"}
	if _, err := order(tmpl.Resources); err == nil || !strings.Contains(err.Error(), "refer to each other") {
		t.Fatalf("a cycle: %v", err)
	}
}
