package cloudformation

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestARoleBindingMayDoWhatAKeyBindingMay: a plan's keyless bindings
// (binding-role.yaml) are a choice of credentials, not of access: for each
// value of the binding's parameters, the role's policies allow the same
// actions on the same resources as the key binding's user's policies.
func TestARoleBindingMayDoWhatAKeyBindingMay(t *testing.T) {
	for _, role := range roleTemplates(t) {
		dir := filepath.Dir(role)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			key := filepath.Join(dir, "binding.yaml")
			roleSide, keySide := side(t, role, nil), side(t, key, nil)
			// Each value of each parameter both templates allow, one at a
			// time, and optional ones empty or set.
			variants := []map[string]any{{}}
			for name, d := range keySide.doc["Parameters"].(map[string]any) {
				decl, _ := d.(map[string]any)
				if _, ok := roleSide.doc["Parameters"].(map[string]any)[name]; !ok {
					continue
				}
				allowed, _ := decl["AllowedValues"].([]any)
				for _, v := range allowed {
					variants = append(variants, map[string]any{name: scalar(v)})
				}
			}
			// A dead-letter queue (the SQS binding's optional parameters).
			variants = append(variants, map[string]any{"DeadLetterQueueArn": "arn:aws:sqs:us-east-1:123456789012:q-dlq",
				"DeadLetterQueueUrl": "https://sqs.us-east-1.amazonaws.com/123456789012/q-dlq"})
			for _, values := range variants {
				r, k := grantsOf(side(t, role, values)), grantsOf(side(t, key, values))
				if len(r) == 0 || !slices.Equal(r, k) {
					t.Errorf("with %v: the role may\n%v\nthe key binding's user\n%v", values, r, k)
				}
			}
		})
	}
}

// side reads a template with values for its parameters (the others at
// their Default, or an example value).
func side(t *testing.T, path string, values map[string]any) templateSide {
	t.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]any{"QueueArn": "arn:aws:sqs:us-east-1:123456789012:q", "TableArn": "arn:aws:dynamodb:us-east-1:123456789012:table/t",
		"BucketArn": "arn:aws:s3:::b"}
	for k, v := range values {
		all[k] = v
	}
	s, err := newSide(string(body), all)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// grantsOf are the Allow statements of the IAM policies a binding template
// makes (its user's AWS::IAM::Policy resources, its role's Policies), each
// action on each resource, sorted, as JSON.
func grantsOf(s templateSide) []string {
	var docs []any
	for _, r := range s.resources() {
		if !s.exists(r) {
			continue
		}
		props, _ := s.resolve(r.props, nil).(map[string]any)
		switch r.typ {
		case "AWS::IAM::Policy":
			docs = append(docs, props["PolicyDocument"])
		case "AWS::IAM::Role":
			policies, _ := props["Policies"].([]any)
			for _, p := range policies {
				if m, ok := p.(map[string]any); ok {
					docs = append(docs, m["PolicyDocument"])
				}
			}
		}
	}
	var out []string
	for _, d := range docs {
		doc, _ := d.(map[string]any)
		statements, _ := doc["Statement"].([]any)
		for _, st := range statements {
			m, _ := st.(map[string]any)
			if m["Effect"] != "Allow" {
				continue
			}
			for _, a := range oneOrMany(m["Action"]) {
				for _, res := range oneOrMany(m["Resource"]) {
					b, _ := json.Marshal([]any{a, res, m["Condition"]})
					out = append(out, string(b))
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func oneOrMany(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}
