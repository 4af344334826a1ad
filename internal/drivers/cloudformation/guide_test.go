package cloudformation

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestTheGuideAndTheCatalogMatchTheTemplates holds the shipped services'
// catalog, templates and guide (services/README.md) to each other, read
// as files rather than through the catalog's code: every property of a
// plan's schema is a parameter of the template it reaches, and the schema
// checks its values at least as strictly as the template does (so a user's
// mistake is a 400 naming the parameter, not a failed stack); every value a
// plan fixes (parameters, binding_parameters) is one its template accepts;
// every parameter and output of each template of a service's folder (the
// plans' and the others it offers) is named in its section of the guide; and every section says what the service needs of the
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
					Template          string
					BindingTemplate   string         `yaml:"binding_template"`
					Parameters        map[string]any `yaml:"parameters"`
					BindingParameters map[string]any `yaml:"binding_parameters"`
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
				fixed := p.Broker.Parameters
				if c.request == "bind" {
					fixed = p.Broker.BindingParameters
				}
				for name, value := range fixed {
					where := fmt.Sprintf("%s %s, fixed %s parameter %s", svc.Name, p.Name, c.request, name)
					decl, ok := c.template.Parameters[name]
					if !ok {
						t.Errorf("%s: the template has no such parameter", where)
						continue
					}
					if problem := decl.refuses(fmt.Sprint(value)); problem != "" {
						t.Errorf("%s: %s", where, problem)
					}
				}
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
		// Every template of the folder: the plans' own and the others
		// it offers (binding-user.yaml, binding-role.yaml).
		files, err := filepath.Glob(filepath.Join(dir, folder, "*.yaml"))
		if err != nil || len(files) < 2 {
			t.Fatalf("%s: templates %v %v", folder, files, err)
		}
		for _, path := range files {
			file := filepath.Base(path)
			tmpl := readGuideTemplate(t, path)
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

// refuses says why CloudFormation would refuse value for the parameter
// (its AllowedValues, bounds or pattern), or "".
func (decl guideParameter) refuses(value string) string {
	if len(decl.AllowedValues) > 0 && !slices.ContainsFunc(decl.AllowedValues, func(v any) bool { return fmt.Sprint(v) == value }) {
		return fmt.Sprintf("%q is not among the template's AllowedValues %v", value, decl.AllowedValues)
	}
	if decl.Type == "Number" {
		n, err := strconv.ParseFloat(value, 64)
		switch {
		case err != nil:
			return fmt.Sprintf("%q is not a number", value)
		case decl.MinValue != nil && n < *decl.MinValue:
			return fmt.Sprintf("%v is below the template's MinValue %v", n, *decl.MinValue)
		case decl.MaxValue != nil && n > *decl.MaxValue:
			return fmt.Sprintf("%v is above the template's MaxValue %v", n, *decl.MaxValue)
		}
	}
	if decl.AllowedPattern != "" && !regexp.MustCompile(`^(?:`+decl.AllowedPattern+`)$`).MatchString(value) {
		return fmt.Sprintf("%q does not match the template's AllowedPattern %s", value, decl.AllowedPattern)
	}
	return ""
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
