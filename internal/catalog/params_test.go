package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/serverless-osb/broker/internal/jsonenc"
)

func TestValidateParametersOfTheShippedPlans(t *testing.T) {
	c, err := Load(shippedCatalog)
	if err != nil {
		t.Fatal(err)
	}
	const allowed = " (allowed: duration_seconds, fail, fail_description)"
	tests := []struct {
		name   string
		params string
		want   string // Error(), or "" for valid
	}{
		{"nil parameters are valid", "", ""},
		{"blank parameters are valid", " \n", ""},
		{"null parameters are valid", "null", ""},
		{"an empty object is valid", "{}", ""},
		{"every parameter at its limits is valid", `{"duration_seconds": 3600, "fail": true, "fail_description": "x"}`, ""},
		{"a zero duration is valid", `{"duration_seconds": 0}`, ""},
		{"a duration above 3600 names the field and the limit", `{"duration_seconds": 3601}`,
			"parameters.duration_seconds: must be <= 3600"},
		{"a negative duration names the field and the limit", `{"duration_seconds": -1}`,
			"parameters.duration_seconds: must be >= 0"},
		{"a fractional duration says it must be an integer", `{"duration_seconds": 1.5}`,
			"parameters.duration_seconds: must be an integer, got a number"},
		{"a string fail says it must be a boolean", `{"fail": "yes"}`,
			"parameters.fail: must be a boolean, got a string"},
		{"an empty fail_description says so", `{"fail_description": ""}`,
			"parameters.fail_description: must not be empty"},
		{"a typo names the unknown property and the allowed ones", `{"durration": 5}`,
			`parameters: additional property "durration" is not allowed` + allowed},
		{"parameters that are not an object say so", `[1, 2]`,
			"parameters: must be an object, got an array"},
		{"parameters that are not JSON say so", `{"fail": tru}`,
			"parameters: must be a JSON object; this is not valid JSON"},
		{"every violation is listed, sorted by field", `{"fail": 1, "duration_seconds": 9999, "zz": 1, "aa": 2}`,
			`parameters: additional properties "aa" and "zz" are not allowed` + allowed +
				"; parameters.duration_seconds: must be <= 3600" +
				"; parameters.fail: must be a boolean, got a number"},
	}
	for _, s := range c.Services() {
		for _, p := range s.Plans {
			for _, k := range []SchemaKind{InstanceCreate, InstanceUpdate, BindingCreate} {
				for _, tt := range tests {
					t.Run(p.Name+" "+k.String()+": "+tt.name, func(t *testing.T) {
						err := p.ValidateParameters(k, json.RawMessage(tt.params))
						if tt.want == "" {
							if err != nil {
								t.Fatalf("ValidateParameters() = %v, want nil", err)
							}
							return
						}
						var pe *ParameterError
						if !errors.As(err, &pe) {
							t.Fatalf("ValidateParameters() = %v, want a *ParameterError", err)
						}
						if pe.Error() != tt.want {
							t.Errorf("ValidateParameters() =\n%s\nwant\n%s", pe, tt.want)
						}
						if first := pe.Violations[0]; pe.Field != first.Field || pe.Reason != first.Reason {
							t.Errorf("Field, Reason = %q, %q; want the first violation %v", pe.Field, pe.Reason, first)
						}
					})
				}
			}
		}
	}
}

func TestValidateParametersMessages(t *testing.T) {
	schema := map[string]any{
		"$schema":  "http://json-schema.org/draft-04/schema#",
		"type":     "object",
		"required": []any{"size"},
		"properties": map[string]any{
			"size":   map[string]any{"enum": []any{"small", "large"}},
			"name":   map[string]any{"type": "string", "pattern": "^[a-z]+$", "maxLength": 8},
			"email":  map[string]any{"type": "string", "format": "email"},
			"ratio":  map[string]any{"type": "number", "minimum": 0, "exclusiveMaximum": true, "maximum": 1},
			"tags":   map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "uniqueItems": true, "maxItems": 2},
			"port":   map[string]any{"anyOf": []any{map[string]any{"type": "integer"}, map[string]any{"type": "string", "pattern": "^[0-9]+-[0-9]+$"}}},
			"limits": map[string]any{"type": "object", "properties": map[string]any{"cpu": map[string]any{"type": "integer", "multipleOf": 2}}, "additionalProperties": false},
		},
		"dependencies": map[string]any{"email": []any{"name"}},
	}
	c := smallCatalog()
	plan(c, 0, 0)["schemas"] = map[string]any{
		"service_binding": map[string]any{"create": map[string]any{"parameters": schema}},
	}
	_, p := mustParse(t, c).PlanByID("plan-1")

	tests := []struct {
		name   string
		params string
		want   string
	}{
		{"a missing required property names the property", `{}`,
			"parameters.size: is required"},
		{"a value outside an enum lists the allowed values", `{"size": "medium"}`,
			`parameters.size: must be one of "small", "large"`},
		{"a string not matching its pattern quotes the pattern", `{"size": "small", "name": "Bob"}`,
			"parameters.name: must match the pattern ^[a-z]+$"},
		{"a string too long gives the limit", `{"size": "small", "name": "abcdefghij"}`,
			"parameters.name: must be at most 8 characters long"},
		{"a malformed email names the format", `{"size": "small", "name": "a", "email": "nope"}`,
			"parameters.email: must be a valid email"},
		{"a dependency names the missing property and why", `{"size": "small", "email": "a@example.com"}`,
			`parameters.name: is required when "email" is set`},
		{"an exclusive maximum says strictly less", `{"size": "small", "ratio": 1}`,
			"parameters.ratio: must be < 1"},
		{"an array item names its index", `{"size": "small", "tags": ["a", 2]}`,
			"parameters.tags[1]: must be a string, got a number"},
		{"duplicate items say which", `{"size": "small", "tags": ["a", "a"]}`,
			"parameters.tags: items 0 and 1 are equal; items must be unique"},
		{"too many items give the limit", `{"size": "small", "tags": ["a", "b", "c"]}`,
			"parameters.tags: must have at most 2 items"},
		{"anyOf lists why each form failed", `{"size": "small", "port": "http"}`,
			`parameters.port: does not match any of the allowed forms: must be an integer, got a string; or must match the pattern ^[0-9]+-[0-9]+$`},
		{"a nested property is named by its full path", `{"size": "small", "limits": {"cpu": 3}}`,
			"parameters.limits.cpu: must be a multiple of 2"},
		{"a nested additional property names its object and the allowed ones", `{"size": "small", "limits": {"ram": 3}}`,
			`parameters.limits: additional property "ram" is not allowed (allowed: cpu)`},
		{"a key that is not an identifier is quoted", `{"size": "small", "limits": {"a b": 1}}`,
			`parameters.limits: additional property "a b" is not allowed (allowed: cpu)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.ValidateParameters(BindingCreate, json.RawMessage(tt.params))
			if err == nil || err.Error() != tt.want {
				t.Errorf("ValidateParameters() =\n%v\nwant\n%s", err, tt.want)
			}
		})
	}
}

func TestValidateParametersWithoutASchema(t *testing.T) {
	c := mustParse(t, smallCatalog())
	_, withSchema := c.PlanByID("plan-1")
	_, without := c.PlanByID("plan-2")
	tests := []struct {
		name string
		plan *Plan
		kind SchemaKind
	}{
		{"a plan without schemas accepts anything", without, InstanceCreate},
		{"a plan with only a create schema accepts anything on update", withSchema, InstanceUpdate},
		{"a plan with only an instance schema accepts anything on bind", withSchema, BindingCreate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.plan.HasSchema(tt.kind) {
				t.Fatalf("the plan has a %s schema", tt.kind)
			}
			if err := tt.plan.ValidateParameters(tt.kind, json.RawMessage(`{"anything": [1]}`)); err != nil {
				t.Errorf("ValidateParameters() = %v, want nil", err)
			}
		})
	}
	t.Run("an unknown schema kind is an error, not a pass", func(t *testing.T) {
		if err := withSchema.ValidateParameters(SchemaKind(7), nil); err == nil {
			t.Error("ValidateParameters(SchemaKind(7)) = nil")
		}
	})
}

func TestValidateParametersIsSafeForConcurrentUse(t *testing.T) {
	c, err := Load(shippedCatalog)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Services()[0].Plans[1]
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 32 {
		wg.Go(func() {
			ok := p.ValidateParameters(InstanceCreate, json.RawMessage(`{"duration_seconds": 10}`))
			bad := p.ValidateParameters(InstanceCreate, json.RawMessage(`{"duration_seconds": 10000}`))
			if ok != nil || bad == nil {
				errs <- errors.New("goroutine " + string(rune('a'+i)) + " got a wrong answer")
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestSchemaKindNamesItsPlace(t *testing.T) {
	tests := []struct {
		kind SchemaKind
		want string
	}{
		{InstanceCreate, "service_instance.create.parameters"},
		{InstanceUpdate, "service_instance.update.parameters"},
		{BindingCreate, "service_binding.create.parameters"},
		{SchemaKind(9), "SchemaKind(9)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.kind.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSchemaProperties(t *testing.T) {
	c := mustParse(t, smallCatalog())
	_, withSchema := c.PlanByID("plan-1")
	_, without := c.PlanByID("plan-2")
	t.Run("a schema's top-level properties are listed, sorted", func(t *testing.T) {
		got := withSchema.SchemaProperties(InstanceCreate)
		if want := []string{"duration_seconds", "fail", "fail_description"}; !slices.Equal(got, want) {
			t.Errorf("SchemaProperties = %v, want %v", got, want)
		}
	})
	t.Run("a plan without that schema names none", func(t *testing.T) {
		if got := withSchema.SchemaProperties(InstanceUpdate); got != nil {
			t.Errorf("SchemaProperties(update) = %v, want nil", got)
		}
		if got := without.SchemaProperties(InstanceCreate); got != nil {
			t.Errorf("SchemaProperties(create) of a plan without schemas = %v, want nil", got)
		}
	})
}

// A catalog loaded with LoadChecked (the functions', which the build
// checked) compiles each parameters schema on its first use, and answers
// every parameters document exactly as Load's.
func TestLoadCheckedValidatesAsLoad(t *testing.T) {
	docs := []string{``, `{}`, `[]`, `{"x": 1}`, `not json`, `{"size": "huge", "name": 5, "tags": [1, 2], "enabled": "yes"}`}
	for _, path := range []string{shippedCatalog, "../../services/catalog.yaml"} {
		eager, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		lazy, err := LoadChecked(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(eager.JSON(), lazy.JSON()) || eager.ETag() != lazy.ETag() {
			t.Errorf("%s: LoadChecked serves another catalog (or tags it otherwise)", path)
		}
		checked, refused := 0, 0
		for i, s := range eager.Services() {
			for j, p := range s.Plans {
				lp := lazy.Services()[i].Plans[j]
				for k := range numSchemaKinds {
					if p.schemas[k] == nil {
						continue
					}
					checked++
					// Every property set to a value of each JSON type, too.
					ds := slices.Clone(docs)
					for _, name := range p.schemas[k].properties(p.schemas[k].url) {
						for _, v := range []string{`null`, `true`, `7`, `-1.5`, `"x"`, `[]`, `{}`} {
							ds = append(ds, fmt.Sprintf(`{%q: %s}`, name, v))
						}
					}
					for _, d := range ds {
						want, got := p.ValidateParameters(k, json.RawMessage(d)), lp.ValidateParameters(k, json.RawMessage(d))
						if want != nil {
							refused++
						}
						if fmt.Sprint(got) != fmt.Sprint(want) {
							t.Errorf("%s: plan %s, %s, parameters %s: LoadChecked's answer %v, Load's %v", path, p.ID, k, d, got, want)
						}
					}
				}
			}
		}
		if checked == 0 || refused == 0 {
			t.Errorf("%s: %d parameters schemas compared, %d documents refused: nothing to compare", path, checked, refused)
		}
	}
}

// LoadChecked leaves the compilation to the first use: a schema that does
// not compile (which Load refuses, and so the build) is found then.
func TestLoadCheckedCompilesOnFirstUse(t *testing.T) {
	c := smallCatalog()
	demoSchemaOf(c)["properties"].(map[string]any)["fail"] = map[string]any{"type": "text"}
	path := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(path, toYAML(t, c), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil {
		t.Fatal("Load() accepted a schema that does not compile")
	}
	cat, err := LoadChecked(path)
	if err != nil {
		t.Fatalf("LoadChecked() error = %v", err)
	}
	_, plan := cat.PlanByID(plan(c, 0, 0)["id"].(string))
	err = plan.ValidateParameters(InstanceCreate, json.RawMessage(`{}`))
	var pe *ParameterError
	if err == nil || errors.As(err, &pe) || !strings.Contains(err.Error(), "the catalog's schema does not compile") {
		t.Errorf("ValidateParameters() error = %v, want the schema's compile error", err)
	}
}

// The pre-parsed catalog make build bundles (Preparse) is the YAML's: the
// functions read it (LoadChecked) and get the catalog Load makes of the
// YAML; one made from another YAML is not read.
func TestThePreparsedCatalogIsTheYAMLs(t *testing.T) {
	for _, src := range []string{shippedCatalog, "../../services/catalog.yaml"} {
		data, pre := preparseFile(t, src)
		path := filepath.Join(t.TempDir(), "catalog.yaml")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path+PreparsedSuffix, pre, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, ok := readPreparsed(path+PreparsedSuffix, data); !ok {
			t.Fatalf("%s: LoadChecked would not read the pre-parsed catalog", src)
		}
		if _, ok := readPreparsed(path+PreparsedSuffix, append(slices.Clone(data), '\n')); ok {
			t.Errorf("%s: a pre-parsed catalog made from another YAML would be read", src)
		}
		want, err := Load(src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := LoadChecked(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.JSON(), want.JSON()) || got.ETag() != want.ETag() {
			t.Errorf("%s: the pre-parsed catalog serves another catalog", src)
		}
		if len(got.Services()) != len(want.Services()) {
			t.Fatalf("%s: %d services, want %d", src, len(got.Services()), len(want.Services()))
		}
		for i, s := range want.Services() {
			gs := got.Services()[i]
			if len(gs.Plans) != len(s.Plans) {
				t.Fatalf("%s: service %s has %d plans, want %d", src, s.ID, len(gs.Plans), len(s.Plans))
			}
			for j, p := range s.Plans {
				a, b := *p, *gs.Plans[j]
				a.schemas, b.schemas = [numSchemaKinds]*paramSchema{}, [numSchemaKinds]*paramSchema{}
				if !reflect.DeepEqual(a, b) {
					t.Errorf("%s: plan %s is\n%+v\nfrom the pre-parsed catalog, want\n%+v", src, p.ID, b, a)
				}
			}
			a, b := *s, *gs
			a.Plans, b.Plans = nil, nil
			if !reflect.DeepEqual(a, b) {
				t.Errorf("%s: service %s is %+v from the pre-parsed catalog, want %+v", src, s.ID, b, a)
			}
		}
	}
}

// TestLoadCheckedReadsThePreparsedCatalogAlone: the bundles ship the
// catalog pre-parsed, without its YAML (make build); LoadChecked serves
// from it the catalog Load serves from the YAML, and says what to do when
// neither is there or the pre-parsed form is not one.
func TestLoadCheckedReadsThePreparsedCatalogAlone(t *testing.T) {
	data, pre := preparseFile(t, "../../services/catalog.yaml")
	dir := t.TempDir()
	path := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(path+PreparsedSuffix, pre, 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := Load("../../services/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := LoadChecked(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.JSON(), want.JSON()) || got.ETag() != want.ETag() || got.Dir != dir {
		t.Errorf("the pre-parsed catalog alone serves another catalog (dir %s)", got.Dir)
	}
	if d, err := PreparsedDigest(path + PreparsedSuffix); err != nil || d != Digest(data) {
		t.Errorf("PreparsedDigest = %q, %v; want the YAML's %q", d, err, Digest(data))
	}
	// The form as make build writes it is read the short way (at every
	// cold start); one with an escape, which that does not take, is read
	// by encoding/json into the same catalog.
	if _, ok := jsonenc.DecodeAny(pre); !ok {
		t.Error("the pre-parsed form make build writes is not read the short way (jsonenc.DecodeAny)")
	}
	escaped := bytes.Replace(pre, []byte(`"services"`), []byte(`"servic\u0065s"`), 1)
	if _, ok := jsonenc.DecodeAny(escaped); ok || bytes.Equal(escaped, pre) {
		t.Fatal("the escaped form is read the short way, or has no escape")
	}
	if err := os.WriteFile(path+PreparsedSuffix, escaped, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := LoadChecked(path); err != nil || !bytes.Equal(got.JSON(), want.JSON()) || got.ETag() != want.ETag() {
		t.Errorf("the pre-parsed form with an escape: %v, or another catalog", err)
	}

	if err := os.WriteFile(path+PreparsedSuffix, []byte("services: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadChecked(path); err == nil || !strings.Contains(err.Error(), "catalog.yaml.json is no pre-parsed catalog: build the bundles") {
		t.Errorf("a catalog.yaml.json that is not one: error %v", err)
	}
	if _, err := Load(path); err == nil {
		t.Error("Load, which reads the YAML, served a catalog without it")
	}
	if err := os.Remove(path + PreparsedSuffix); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadChecked(path); err == nil || !strings.Contains(err.Error(), "nor its pre-parsed form catalog.yaml.json is there: build the bundles") {
		t.Errorf("neither file: error %v", err)
	}
}

// TestPreparsedYAMLIsTheCatalog: the YAML made from a pre-parsed catalog
// (what the sandbox rebuilds a bundle from) is the catalog it was made from.
func TestPreparsedYAMLIsTheCatalog(t *testing.T) {
	for _, src := range []string{shippedCatalog, "../../services/catalog.yaml"} {
		_, pre := preparseFile(t, src)
		path := filepath.Join(t.TempDir(), "catalog.yaml.json")
		if err := os.WriteFile(path, pre, 0o644); err != nil {
			t.Fatal(err)
		}
		text, err := PreparsedYAML(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse("catalog.yaml", text)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Load(src)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.JSON(), want.JSON()) || got.ETag() != want.ETag() || !reflect.DeepEqual(got.SensitivePlanIDs(), want.SensitivePlanIDs()) {
			t.Errorf("%s: the YAML made from its pre-parsed form is another catalog", src)
		}
	}
}

// preparseFile reads the catalog at src and pre-parses it as make build does.
func preparseFile(t *testing.T, src string) (data, pre []byte) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	pre, err = Preparse("catalog.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	return data, pre
}

// TestPreparsedKeysReadAsEncodingJSON: the short way takes a pre-parsed
// form only with the keys Preparse writes, as it writes them, and reads
// them as encoding/json reads them into a preparsed; any other form is
// left to encoding/json.
func TestPreparsedKeysReadAsEncodingJSON(t *testing.T) {
	for form, short := range map[string]bool{
		`{"source_sha256":"d","catalog":{"services":[{"id":"s","n":1}]}}`: true,
		`{"source_sha256":null,"catalog":{}}`:                             true,
		`{"catalog":{}}`:                                                  true,
		`{}`:                                                              true,
		`{"Catalog":{}}`:                                                  false,
		`{"source_sha256":5,"catalog":{}}`:                                false,
		`{"other":1,"catalog":{}}`:                                        false,
		`{"catalog":{"a":"\u00e9"},"source_sha256":"d"}`:                  true,
		`{"c\u0061talog":{}}`:                                             false,
		`[]`:                                                              false,
		`not json`:                                                        false,
	} {
		m, ok := preparsedKeys([]byte(form))
		if ok != short {
			t.Errorf("%s: taken the short way %v, want %v", form, ok, short)
		}
		if !ok {
			continue
		}
		var want preparsed
		d := json.NewDecoder(strings.NewReader(form))
		d.UseNumber()
		if err := d.Decode(&want); err != nil {
			t.Fatalf("%s: encoding/json: %v", form, err)
		}
		got := preparsed{Catalog: m["catalog"]}
		got.Source, _ = m["source_sha256"].(string)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, encoding/json %+v", form, got, want)
		}
	}
}
