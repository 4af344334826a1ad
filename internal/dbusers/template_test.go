package dbusers_test

import (
	"os"
	"slices"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/serverless-osb/broker/internal/dbusers"
)

// The binding templates that use the custom resource, from this folder.
var userTemplates = []string{"../../services/rds-postgresql/binding-user.yaml", "../../services/rds-mysql/binding-user.yaml",
	"../../services/aurora-postgresql/binding.yaml", "../../services/aurora-mysql/binding.yaml"}

// template is what the contract test reads of a template: its parameters'
// defaults, the custom resource, and the outputs' values.
type template struct {
	Parameters map[string]struct {
		Default       any      `yaml:"Default"`
		AllowedValues []string `yaml:"AllowedValues"`
	} `yaml:"Parameters"`
	Resources map[string]struct {
		Type       string               `yaml:"Type"`
		Properties map[string]yaml.Node `yaml:"Properties"`
	} `yaml:"Resources"`
	Outputs map[string]struct {
		Value yaml.Node `yaml:"Value"`
	} `yaml:"Outputs"`
}

func TestTheBindingTemplatesGiveTheHandlerWhatItReadsAndReadWhatItGives(t *testing.T) {
	for _, path := range userTemplates {
		t.Run(path, func(t *testing.T) {
			body, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var tpl template
			if err := yaml.Unmarshal(body, &tpl); err != nil {
				t.Fatal(err)
			}
			var logical string
			for id, r := range tpl.Resources {
				if r.Type == dbusers.ResourceType {
					logical = id
				}
			}
			if logical == "" {
				t.Fatalf("no %s in the template", dbusers.ResourceType)
			}
			// Each property as CloudFormation passes it: a Ref to a parameter
			// becomes each value the parameter allows (or its default, or a
			// stand-in), a literal stays.
			variants := []map[string]any{{}}
			for key, node := range tpl.Resources[logical].Properties {
				values := []string{"stand-in"}
				switch {
				case node.Tag == "!Ref" && len(tpl.Parameters[node.Value].AllowedValues) > 0:
					values = tpl.Parameters[node.Value].AllowedValues
				case node.Tag == "!Ref" && tpl.Parameters[node.Value].Default != nil:
					values = []string{yamlString(tpl.Parameters[node.Value].Default)}
				case node.Tag == "!!str":
					values = []string{node.Value}
				}
				if key == "Port" {
					values = []string{"5432"}
				}
				var next []map[string]any
				for _, v := range variants {
					for _, value := range values {
						m := clone(v)
						m[key] = value
						next = append(next, m)
					}
				}
				variants = next
			}
			for _, props := range variants {
				if _, err := dbusers.ParseProperties(props); err != nil {
					t.Errorf("the handler refuses the template's properties %v: %v", props, err)
				}
			}
			attrs := []string{dbusers.AttributeUsername, dbusers.AttributePassword, dbusers.AttributeURI}
			for name, o := range tpl.Outputs {
				if o.Value.Tag != "!GetAtt" {
					continue
				}
				if want := logical + "."; len(o.Value.Value) > len(want) && o.Value.Value[:len(want)] == want &&
					!slices.Contains(attrs, o.Value.Value[len(want):]) {
					t.Errorf("the output %s reads %s, which the handler does not return (it returns %v)", name, o.Value.Value, attrs)
				}
			}
		})
	}
}

func yamlString(v any) string {
	b, _ := yaml.Marshal(v)
	s := string(b)
	return s[:len(s)-1]
}
