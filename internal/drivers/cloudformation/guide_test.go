package cloudformation

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestTheGuideAndTheCatalogMatchTheTemplates holds the shipped services'
// catalog, templates and guide (services/README.md) to each other, read
// as files rather than through the catalog's code: every property of a
// plan's schema is a parameter of the template it reaches, and the schema
// checks its values at least as strictly as the template does (so a user's
// mistake is a 400 naming the parameter, not a failed stack); every
// parameter and output of each template is named in its service's section
// of the guide; and every section says what the service needs of the
// network, what it costs and how long a create and a delete take.
func TestTheGuideAndTheCatalogMatchTheTemplates(t *testing.T) {
	const dir = "../../../services"
	text, err := os.ReadFile(filepath.Join(dir, "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cat struct {
		Services []struct {
			Name  string
			Plans []struct {
				Name    string
				Schemas struct {
					ServiceInstance struct{ Create, Update struct{ Parameters schema } } `yaml:"service_instance"`
					ServiceBinding  struct{ Create struct{ Parameters schema } }         `yaml:"service_binding"`
				}
				Broker struct {
					Template        string
					BindingTemplate string `yaml:"binding_template"`
				}
			}
		}
	}
	if err := yaml.Unmarshal(text, &cat); err != nil {
		t.Fatal(err)
	}
	guide, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	folders := map[string]bool{}
	for _, svc := range cat.Services {
		for _, p := range svc.Plans {
			if p.Broker.Template == "" {
				continue
			}
			folders[path.Dir(p.Broker.Template)] = true
			instance := readGuideTemplate(t, filepath.Join(dir, p.Broker.Template))
			binding := readGuideTemplate(t, filepath.Join(dir, p.Broker.BindingTemplate))
			for _, c := range []struct {
				request  string
				schema   schema
				template guideTemplate
			}{
				{"provision", p.Schemas.ServiceInstance.Create.Parameters, instance},
				{"update", p.Schemas.ServiceInstance.Update.Parameters, instance},
				{"bind", p.Schemas.ServiceBinding.Create.Parameters, binding},
			} {
				for name, prop := range c.schema.Properties {
					where := fmt.Sprintf("%s %s, %s schema, %s", svc.Name, p.Name, c.request, name)
					decl, ok := c.template.Parameters[name]
					if !ok {
						t.Errorf("%s: the template has no such parameter", where)
						continue
					}
					for _, problem := range prop.laxerThan(decl) {
						t.Errorf("%s: %s", where, problem)
					}
				}
			}
		}
	}
	for _, folder := range slices.Sorted(func(yield func(string) bool) {
		for f := range folders {
			if !yield(f) {
				return
			}
		}
	}) {
		section := guideSection(string(guide), folder)
		if section == "" {
			t.Errorf("services/README.md has no section ### %s", folder)
			continue
		}
		for _, file := range []string{"instance.yaml", "binding.yaml"} {
			tmpl := readGuideTemplate(t, filepath.Join(dir, folder, file))
			for name := range tmpl.Parameters {
				if name != BoundaryParameter && !strings.Contains(section, "`"+name+"`") {
					t.Errorf("services/README.md, ### %s, does not name %s's parameter %s", folder, file, name)
				}
			}
			for name := range tmpl.Outputs {
				if !strings.Contains(section, "`"+name+"`") {
					t.Errorf("services/README.md, ### %s, does not name %s's output %s", folder, file, name)
				}
			}
		}
		for _, label := range []string{"**Network**", "**Cost**", "**Time**"} {
			if !strings.Contains(section, label) {
				t.Errorf("services/README.md, ### %s, has no %s line", folder, label)
			}
		}
	}
	if len(folders) < 7 {
		t.Errorf("only %d services' templates checked", len(folders))
	}
}

// schema is what the test reads of a plan's JSON schema.
type schema struct {
	Properties map[string]property
}

type property struct {
	Type    string   `yaml:"type"`
	Enum    []any    `yaml:"enum"`
	Pattern string   `yaml:"pattern"`
	Minimum *float64 `yaml:"minimum"`
	Maximum *float64 `yaml:"maximum"`
}

// guideTemplate is what the test reads of a template.
type guideTemplate struct {
	Parameters map[string]guideParameter `yaml:"Parameters"`
	Outputs    map[string]any            `yaml:"Outputs"`
}

type guideParameter struct {
	Type           string   `yaml:"Type"`
	AllowedValues  []any    `yaml:"AllowedValues"`
	AllowedPattern string   `yaml:"AllowedPattern"`
	MinValue       *float64 `yaml:"MinValue"`
	MaxValue       *float64 `yaml:"MaxValue"`
}

func readGuideTemplate(t *testing.T, file string) guideTemplate {
	t.Helper()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var tmpl guideTemplate
	if err := yaml.Unmarshal(text, &tmpl); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return tmpl
}

// laxerThan lists where the property lets through a value the template
// parameter refuses.
func (p property) laxerThan(decl guideParameter) []string {
	var out []string
	allowed := map[string]bool{}
	for _, v := range decl.AllowedValues {
		allowed[fmt.Sprint(v)] = true
	}
	switch {
	case len(p.Enum) > 0:
		for _, v := range p.Enum {
			if len(allowed) > 0 && !allowed[fmt.Sprint(v)] {
				out = append(out, fmt.Sprintf("the schema allows %v, which the template's AllowedValues do not", v))
			}
		}
	case p.Type == "boolean":
		if len(allowed) > 0 && (len(allowed) != 2 || !allowed["true"] || !allowed["false"]) {
			out = append(out, "a boolean, for a parameter whose AllowedValues are not true and false")
		}
	case len(allowed) > 0:
		out = append(out, "the template allows only some values, the schema any (give it the enum)")
	}
	if decl.Type == "Number" && p.Type != "integer" && p.Type != "number" {
		out = append(out, fmt.Sprintf("a %s, for a Number parameter", p.Type))
	}
	if decl.MinValue != nil && (p.Minimum == nil || *p.Minimum < *decl.MinValue) {
		out = append(out, fmt.Sprintf("the template's MinValue is %v, the schema's minimum %v", *decl.MinValue, deref(p.Minimum)))
	}
	if decl.MaxValue != nil && (p.Maximum == nil || *p.Maximum > *decl.MaxValue) {
		out = append(out, fmt.Sprintf("the template's MaxValue is %v, the schema's maximum %v", *decl.MaxValue, deref(p.Maximum)))
	}
	if decl.AllowedPattern != "" && p.Pattern == "" && len(p.Enum) == 0 && p.Type == "string" {
		out = append(out, "the template has an AllowedPattern, the schema no pattern")
	}
	return out
}

func deref(f *float64) any {
	if f == nil {
		return "none"
	}
	return *f
}

// guideSection is the text of the guide's "### name" section.
func guideSection(guide, name string) string {
	start := regexp.MustCompile(`(?m)^### ` + regexp.QuoteMeta(name) + `\s*$`).FindStringIndex(guide)
	if start == nil {
		return ""
	}
	rest := guide[start[1]:]
	if end := regexp.MustCompile(`(?m)^##+ `).FindStringIndex(rest); end != nil {
		rest = rest[:end[0]]
	}
	return rest
}
