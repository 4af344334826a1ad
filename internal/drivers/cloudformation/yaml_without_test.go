//go:build osb_without_yaml

package cloudformation

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestReadTemplateWithoutYAML runs in the api's build without yaml.v3
// (make build's osb_without_yaml; TestTheBootstrapsBuiltWithoutLeaveItOut
// in internal/tools/build runs it): a YAML template is read from its
// pre-parsed form, refused with what to do when it has none made from it,
// and a JSON one is read as it is.
func TestReadTemplateWithoutYAML(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "instance.yaml"), []byte(instanceTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := readTemplate(KeyTemplate, "instance.yaml", dir)
	if err == nil || !strings.Contains(err.Error(), "reads templates pre-parsed only") || !strings.Contains(err.Error(), "make build") {
		t.Errorf("a YAML template without its pre-parsed form: error %v, want one saying to build the bundles", err)
	}

	asJSON := []byte(`{"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}, "Outputs": {"TopicArn": {"Value": {"Ref": "Topic"}}}}`)
	if err := os.WriteFile(filepath.Join(dir, "topic.json"), asJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	tpl, err := readTemplate(KeyTemplate, "topic.json", dir)
	if err != nil || tpl.Resources != 1 {
		t.Fatalf("a JSON template: %+v, %v", tpl, err)
	}

	// The pre-parsed form make build writes beside a YAML template (made
	// here from the JSON template's values, as Preparse parses no YAML in
	// this build).
	yamlBody := []byte("Resources:\n  Topic:\n    Type: AWS::SNS::Topic\nOutputs:\n  TopicArn:\n    Value: !Ref Topic\n")
	tpl.Body, tpl.Path = "", ""
	pre, err := json.Marshal(preparsed{Source: templateDigest(yamlBody), Template: tpl})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "topic.yaml"), yamlBody, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "topic.yaml"+PreparsedSuffix), pre, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readTemplate(KeyTemplate, "topic.yaml", dir)
	if err != nil || got.Body != string(yamlBody) || got.Resources != 1 {
		t.Errorf("a YAML template with its pre-parsed form: %+v, %v", got, err)
	}

	// The template a stack runs, as CloudFormation gives it back (YAML as
	// written), is read with the subset reader: the worker's, to judge
	// an update's change set.
	live, err := parseTemplateWith(yamlBody, liveYAMLTemplate)
	if err != nil || live.Resources != 1 || !slices.Equal(live.Outputs, []string{"TopicArn"}) {
		t.Errorf("a stack's YAML template: %+v, %v", live, err)
	}
	doc, err := templateDocument(yamlBody)
	if want := map[string]any{"Value": map[string]any{"Ref": "Topic"}}; err != nil || !reflect.DeepEqual(doc["Outputs"].(map[string]any)["TopicArn"], want) {
		t.Errorf("a stack's YAML template in long form: %v, %v; want the output %v", doc, err, want)
	}
}
