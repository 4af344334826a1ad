//go:build !osb_without_yaml

package cloudformation

import (
	"fmt"
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
