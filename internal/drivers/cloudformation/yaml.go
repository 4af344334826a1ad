//go:build !osb_without_yaml

package cloudformation

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/serverless-osb/broker/internal/catalog"
)

// yamlTemplate decodes a YAML template (CloudFormation's short-form tags
// such as !Ref read as plain values), and lists the macros its !Transform
// tags and Fn::Transform keys run (macros), which the plain values lose.
func yamlTemplate(body []byte) (map[string]any, []string, error) {
	// Parsed once, into nodes, then decoded from them: parsing is most of
	// a template's cost, and every template is read at the functions'
	// start.
	node := &yaml.Node{}
	err := yaml.Unmarshal(body, node)
	var v any
	if err == nil && node.Kind != 0 {
		err = node.Decode(&v)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("a template is a mapping with a Resources section, got %s", catalog.Describe(v))
	}
	return m, taggedMacros(node), nil
}

// taggedMacros lists the Fn::Transform of a YAML template's nodes, long
// form or !Transform tag, but for the top-level Transform section.
func taggedMacros(node *yaml.Node) []string {
	var out []string
	var tagged func(n *yaml.Node, at string)
	tagged = func(n *yaml.Node, at string) {
		if n.Tag == "!Transform" {
			out = append(out, "Fn::Transform at "+at)
			return
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				tagged(c, at)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				key, value := n.Content[i].Value, n.Content[i+1]
				path := key
				if at != "" {
					path = at + "/" + key
				}
				switch {
				case key == "Fn::Transform":
					out = append(out, "Fn::Transform at "+at)
				case at == "" && key == "Transform":
				default:
					tagged(value, path)
				}
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				tagged(c, fmt.Sprintf("%s/%d", at, i))
			}
		}
	}
	tagged(node, "")
	return out
}

// liveYAMLTemplate reads the YAML template a stack runs: with yaml.v3,
// in a build that has it.
func liveYAMLTemplate(body []byte) (map[string]any, []string, error) { return yamlTemplate(body) }

// yamlDocument reads a YAML template's document with its short-form tags
// as their long forms (templateDocument).
func yamlDocument(body []byte) (map[string]any, error) {
	var node yaml.Node
	if err := yaml.Unmarshal(body, &node); err != nil {
		return nil, fmt.Errorf("not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	v, err := longForm(&node)
	if err != nil {
		return nil, err
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("a template is a mapping with a Resources section")
	}
	return doc, nil
}

func longForm(n *yaml.Node) (any, error) {
	var v any
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return longForm(n.Content[0])
	case yaml.AliasNode:
		return longForm(n.Alias)
	case yaml.MappingNode:
		m := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			val, err := longForm(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[n.Content[i].Value] = val
		}
		v = m
	case yaml.SequenceNode:
		l := []any{}
		for _, c := range n.Content {
			val, err := longForm(c)
			if err != nil {
				return nil, err
			}
			l = append(l, val)
		}
		v = l
	case yaml.ScalarNode:
		if tag := n.ShortTag(); strings.HasPrefix(tag, "!") && !strings.HasPrefix(tag, "!!") {
			v = n.Value
		} else if err := n.Decode(&v); err != nil {
			return nil, err
		}
	}
	tag := n.Tag
	if !strings.HasPrefix(tag, "!") || strings.HasPrefix(tag, "!!") {
		return v, nil
	}
	return tagLongForm(tag[1:], v), nil
}

// ReadsWithoutYAML says whether the worker built without yaml.v3 reads
// body as the one with it does: a JSON body, or a YAML one the subset
// reader reads into the same values, macros and long form. make build
// leaves yaml.v3 out of the worker only when every template of the
// catalog does.
func ReadsWithoutYAML(body []byte) bool {
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '{' {
		return true
	}
	want, wantMacros, err := yamlTemplate(body)
	if err != nil {
		return false
	}
	got, gotMacros, err := subsetTemplate(body)
	if err != nil || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotMacros, wantMacros) {
		return false
	}
	wantDoc, err := yamlDocument(body)
	if err != nil {
		return false
	}
	gotDoc, err := subsetDocument(body)
	return err == nil && reflect.DeepEqual(gotDoc, wantDoc)
}
