//go:build !osb_without_yaml

package catalog

import (
	"errors"
	"strings"

	"gopkg.in/yaml.v3"
)

// yamlValues decodes YAML, or lists why it cannot.
func yamlValues(data []byte) (any, []string) {
	var raw any
	err := yaml.Unmarshal(data, &raw)
	if err == nil {
		return raw, nil
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		var problems []string
		for _, e := range te.Errors {
			problems = append(problems, "not valid YAML: "+e)
		}
		return nil, problems
	}
	return nil, []string{"not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
}
