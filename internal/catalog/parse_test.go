package catalog

import (
	"strings"
	"testing"
	"time"
)

// TestBadCatalogs breaks one rule per case and checks that the error names
// the file, the field and the problem.
func TestBadCatalogs(t *testing.T) {
	type catalog = map[string]any
	type obj = map[string]any
	tests := []struct {
		name  string
		spoil func(c catalog) // breaks smallCatalog()
		want  string          // a line of the error, or the start of one
	}{
		// Uniqueness.
		{"a duplicate offering id is refused",
			func(c catalog) { service(c, 1)["id"] = "svc-1" },
			`bad.yaml: services[1].id: "svc-1" is already the id of services[0]; ids must be unique across the catalog`},
		{"a plan id used by a plan of another offering is refused",
			func(c catalog) { plan(c, 1, 0)["id"] = "plan-1" },
			`bad.yaml: services[1].plans[0].id: "plan-1" is already the id of services[0].plans[0]`},
		{"a plan id used by a plan of the same offering is refused",
			func(c catalog) { plan(c, 0, 1)["id"] = "plan-1" },
			`bad.yaml: services[0].plans[1].id: "plan-1" is already the id of services[0].plans[0]`},
		{"a plan id equal to an offering id is refused",
			func(c catalog) { plan(c, 1, 0)["id"] = "svc-1" },
			`bad.yaml: services[1].plans[0].id: "svc-1" is already the id of services[0]`},
		{"a duplicate offering name is refused",
			func(c catalog) { service(c, 1)["name"] = "svc-one" },
			`bad.yaml: services[1].name: "svc-one" is already the name of services[0]; offering names must be unique`},
		{"a duplicate plan name within an offering is refused",
			func(c catalog) { plan(c, 0, 1)["name"] = "small" },
			`bad.yaml: services[0].plans[1].name: "small" is already the name of services[0].plans[0]; plan names must be unique within their offering`},
		{"a duplicate dashboard client id is refused",
			func(c catalog) {
				service(c, 0)["dashboard_client"] = obj{"id": "dc", "secret": "s", "redirect_uri": "http://a"}
				service(c, 1)["dashboard_client"] = obj{"id": "dc", "secret": "s", "redirect_uri": "http://b"}
			},
			`bad.yaml: services[1].dashboard_client.id: "dc" is already the dashboard_client id of services[0]`},

		// Required fields.
		{"an offering without an id is refused",
			func(c catalog) { delete(service(c, 0), "id") },
			`bad.yaml: services[0].id: is required`},
		{"an offering with an empty name is refused",
			func(c catalog) { service(c, 0)["name"] = "" },
			`bad.yaml: services[0].name: must not be empty`},
		{"an offering with a blank description is refused",
			func(c catalog) { service(c, 0)["description"] = "   " },
			`bad.yaml: services[0].description: must not be empty`},
		{"an offering with a null description is refused",
			func(c catalog) { service(c, 0)["description"] = nil },
			`bad.yaml: services[0].description: is required`},
		{"an offering without bindable is refused",
			func(c catalog) { delete(service(c, 1), "bindable") },
			`bad.yaml: services[1].bindable: is required (true or false)`},
		{"an offering without plans is refused",
			func(c catalog) { delete(service(c, 0), "plans") },
			`bad.yaml: services[0].plans: is required (a list)`},
		{"an offering with an empty plan list is refused",
			func(c catalog) { service(c, 0)["plans"] = []any{} },
			`bad.yaml: services[0].plans: must list at least one plan`},
		{"a plan without an id is refused",
			func(c catalog) { delete(plan(c, 0, 1), "id") },
			`bad.yaml: services[0].plans[1].id: is required`},
		{"a plan without a name is refused",
			func(c catalog) { delete(plan(c, 0, 1), "name") },
			`bad.yaml: services[0].plans[1].name: is required`},
		{"a plan without a description is refused",
			func(c catalog) { delete(plan(c, 1, 0), "description") },
			`bad.yaml: services[1].plans[0].description: is required`},
		{"a dashboard client without a secret is refused",
			func(c catalog) { service(c, 0)["dashboard_client"] = obj{"id": "dc", "redirect_uri": "http://a"} },
			`bad.yaml: services[0].dashboard_client.secret: is required`},

		// Types.
		{"services that are not a list are refused",
			func(c catalog) { c["services"] = obj{"a": 1} },
			`bad.yaml: services: must be a list, got an object`},
		{"an offering that is not an object is refused",
			func(c catalog) { c["services"] = append(c["services"].([]any), "svc-3") },
			`bad.yaml: services[2]: must be an object (a service offering), got a string ("svc-3")`},
		{"an offering id that is a number is refused",
			func(c catalog) { service(c, 0)["id"] = 42 },
			`bad.yaml: services[0].id: must be a string, got a number (42)`},
		{"a bindable that is a string is refused",
			func(c catalog) { service(c, 0)["bindable"] = "yes" },
			`bad.yaml: services[0].bindable: must be a boolean (true or false), got a string ("yes")`},
		{"an instances_retrievable that is a string is refused",
			func(c catalog) { service(c, 0)["instances_retrievable"] = "true" },
			`bad.yaml: services[0].instances_retrievable: must be a boolean (true or false), got a string ("true")`},
		{"an offering plan_updateable that is a number is refused",
			func(c catalog) { service(c, 0)["plan_updateable"] = 1 },
			`bad.yaml: services[0].plan_updateable: must be a boolean (true or false), got a number (1)`},
		{"tags that are not a list are refused",
			func(c catalog) { service(c, 0)["tags"] = "mysql" },
			`bad.yaml: services[0].tags: must be a list, got a string ("mysql")`},
		{"a tag that is not a string is refused",
			func(c catalog) { service(c, 0)["tags"] = []any{"sql", 3} },
			`bad.yaml: services[0].tags[1]: must be a string, got a number (3)`},
		{"offering metadata that is not an object is refused",
			func(c catalog) { service(c, 0)["metadata"] = []any{"a"} },
			`bad.yaml: services[0].metadata: must be an object, got a list`},
		{"a dashboard client that is not an object is refused",
			func(c catalog) { service(c, 0)["dashboard_client"] = "dc" },
			`bad.yaml: services[0].dashboard_client: must be an object, got a string ("dc")`},
		{"plans that are not a list are refused",
			func(c catalog) { service(c, 0)["plans"] = obj{"id": "p"} },
			`bad.yaml: services[0].plans: must be a list, got an object`},
		{"a plan that is not an object is refused",
			func(c catalog) { service(c, 1)["plans"] = []any{"small"} },
			`bad.yaml: services[1].plans[0]: must be an object (a service plan), got a string ("small")`},
		{"plan metadata that is not an object is refused",
			func(c catalog) { plan(c, 0, 0)["metadata"] = "cheap" },
			`bad.yaml: services[0].plans[0].metadata: must be an object, got a string ("cheap")`},
		{"a free that is a string is refused",
			func(c catalog) { plan(c, 0, 0)["free"] = "no" },
			`bad.yaml: services[0].plans[0].free: must be a boolean (true or false), got a string ("no")`},
		{"a plan bindable that is null is refused",
			func(c catalog) { plan(c, 0, 0)["bindable"] = nil },
			`bad.yaml: services[0].plans[0].bindable: must be a boolean (true or false), got null`},
		{"a binding_rotatable that is a string is refused",
			func(c catalog) { plan(c, 0, 0)["binding_rotatable"] = "true" },
			`bad.yaml: services[0].plans[0].binding_rotatable: must be a boolean (true or false), got a string ("true")`},
		{"plan_updatable, spelt as in English, is refused",
			func(c catalog) { plan(c, 0, 1)["plan_updatable"] = true },
			`bad.yaml: services[0].plans[1].plan_updatable: the spec spells this field plan_updateable`},

		// requires.
		{"a requires that the spec does not define is refused",
			func(c catalog) { service(c, 0)["requires"] = []any{"route_forwarding", "syslog"} },
			`bad.yaml: services[0].requires[1]: "syslog" is not a permission the spec defines; use syslog_drain, route_forwarding, volume_mount`},
		{"a requires that is not a list is refused",
			func(c catalog) { service(c, 0)["requires"] = "syslog_drain" },
			`bad.yaml: services[0].requires: must be a list, got a string ("syslog_drain")`},

		// maintenance_info.
		{"a maintenance version that is not semver is refused",
			func(c catalog) { plan(c, 0, 0)["maintenance_info"] = obj{"version": "1.0"} },
			`bad.yaml: services[0].plans[0].maintenance_info.version: "1.0" is not a semantic version (semver 2.0), e.g. "1.0.0"`},
		{"a maintenance version with a leading zero is refused",
			func(c catalog) { plan(c, 0, 0)["maintenance_info"] = obj{"version": "1.02.0"} },
			`bad.yaml: services[0].plans[0].maintenance_info.version: "1.02.0" is not a semantic version`},
		{"a maintenance version with a v prefix is refused",
			func(c catalog) { plan(c, 0, 0)["maintenance_info"] = obj{"version": "v1.0.0"} },
			`bad.yaml: services[0].plans[0].maintenance_info.version: "v1.0.0" is not a semantic version`},
		{"a maintenance version that YAML reads as a number is refused with a hint",
			func(c catalog) { plan(c, 0, 0)["maintenance_info"] = obj{"version": 1.5} },
			`bad.yaml: services[0].plans[0].maintenance_info.version: must be a string, got a number (1.5); quote it, e.g. "1.0.0"`},
		{"maintenance info without a version is refused",
			func(c catalog) { plan(c, 0, 0)["maintenance_info"] = obj{"description": "x"} },
			`bad.yaml: services[0].plans[0].maintenance_info.version: is required`},
		{"maintenance info that is not an object is refused",
			func(c catalog) { plan(c, 0, 0)["maintenance_info"] = "1.0.0" },
			`bad.yaml: services[0].plans[0].maintenance_info: must be an object, got a string ("1.0.0")`},
		{"an empty maintenance description is refused",
			func(c catalog) { plan(c, 0, 0)["maintenance_info"] = obj{"version": "1.0.0", "description": ""} },
			`bad.yaml: services[0].plans[0].maintenance_info.description: must not be empty`},

		// maximum_polling_duration.
		{"a maximum polling duration of zero is refused",
			func(c catalog) { plan(c, 0, 0)["maximum_polling_duration"] = 0 },
			`bad.yaml: services[0].plans[0].maximum_polling_duration: must be a positive integer (seconds), got 0`},
		{"a negative maximum polling duration is refused",
			func(c catalog) { plan(c, 0, 0)["maximum_polling_duration"] = -60 },
			`bad.yaml: services[0].plans[0].maximum_polling_duration: must be a positive integer (seconds), got -60`},
		{"a fractional maximum polling duration is refused",
			func(c catalog) { plan(c, 0, 0)["maximum_polling_duration"] = 1.5 },
			`bad.yaml: services[0].plans[0].maximum_polling_duration: must be a positive integer (seconds), got a number (1.5)`},
		{"a maximum polling duration that is a string is refused",
			func(c catalog) { plan(c, 0, 0)["maximum_polling_duration"] = "7200" },
			`bad.yaml: services[0].plans[0].maximum_polling_duration: must be a positive integer (seconds), got a string ("7200")`},

		// schemas.
		{"a schema without $schema is refused",
			func(c catalog) { delete(demoSchemaOf(c), "$schema") },
			`bad.yaml: services[0].plans[0].schemas.service_instance.create.parameters: has no "$schema"; declare the JSON Schema draft`},
		{"a schema with an unknown $schema is refused",
			func(c catalog) { demoSchemaOf(c)["$schema"] = "http://example.com/my-meta#" },
			`bad.yaml: services[0].plans[0].schemas.service_instance.create.parameters.$schema: "http://example.com/my-meta#" is not a JSON Schema draft`},
		{"a schema with a remote $ref is refused",
			func(c catalog) {
				demoSchemaOf(c)["properties"].(obj)["fail"] = obj{"$ref": "https://example.com/bool.json"}
			},
			`bad.yaml: services[0].plans[0].schemas.service_instance.create.parameters.properties.fail.$ref: "https://example.com/bool.json" is an external reference; a schema may only refer to itself`},
		{"a schema with a relative file $ref is refused",
			func(c catalog) {
				demoSchemaOf(c)["properties"].(obj)["fail"] = obj{"$ref": "defs.json#/bool"}
			},
			`bad.yaml: services[0].plans[0].schemas.service_instance.create.parameters.properties.fail.$ref: "defs.json#/bool" is an external reference`},
		{"a remote $ref under a property named like a keyword is refused when compiling",
			func(c catalog) {
				demoSchemaOf(c)["properties"].(obj)["default"] = obj{"$ref": "https://example.com/any.json"}
			},
			`bad.yaml: services[0].plans[0].schemas.service_instance.create.parameters: is not a valid JSON Schema: failing loading "https://example.com/any.json": https://example.com/any.json is external; schemas must not load anything`},
		{"a schema with a local $ref to nothing is refused",
			func(c catalog) {
				demoSchemaOf(c)["properties"].(obj)["fail"] = obj{"$ref": "#/definitions/missing"}
			},
			`bad.yaml: services[0].plans[0].schemas.service_instance.create.parameters: is not a valid JSON Schema: json-pointer in "#/definitions/missing" not found`},
		{"a schema that does not compile is refused",
			func(c catalog) { demoSchemaOf(c)["properties"].(obj)["fail"] = obj{"type": "bool"} },
			`bad.yaml: services[0].plans[0].schemas.service_instance.create.parameters.properties.fail.type: does not match any of the allowed forms: must be one of "array", "boolean", "integer", "null", "number", "object", "string"; or must be an array, got a string (not a valid JSON Schema)`},
		{"a schema with a pattern Go cannot compile is refused",
			func(c catalog) {
				demoSchemaOf(c)["properties"].(obj)["fail_description"] = obj{"type": "string", "pattern": "(?=x)"}
			},
			`bad.yaml: services[0].plans[0].schemas.service_instance.create.parameters.properties.fail_description.pattern: must be a valid regex (not a valid JSON Schema)`},
		{"a schema larger than 64 kB is refused",
			func(c catalog) { demoSchemaOf(c)["description"] = strings.Repeat("x", 64<<10) },
			`bad.yaml: services[0].plans[0].schemas.service_instance.create.parameters: is 65`},
		{"a schema that is not an object is refused",
			func(c catalog) {
				plan(c, 0, 0)["schemas"] = obj{"service_binding": obj{"create": obj{"parameters": "any"}}}
			},
			`bad.yaml: services[0].plans[0].schemas.service_binding.create.parameters: must be an object, got a string ("any")`},
		{"a misspelt schema key is refused",
			func(c catalog) {
				plan(c, 0, 0)["schemas"] = obj{"service_instance": obj{"craete": obj{"parameters": demoSchema()}}}
			},
			`bad.yaml: services[0].plans[0].schemas.service_instance.craete: unknown key; the keys here are create and update`},
		{"an unknown key in the schemas object is refused",
			func(c catalog) { plan(c, 0, 0)["schemas"] = obj{"service_bindings": obj{}} },
			`bad.yaml: services[0].plans[0].schemas.service_bindings: unknown key; the keys here are service_instance and service_binding`},

		// broker settings.
		{"an unknown mode is refused",
			func(c catalog) { plan(c, 0, 0)["broker"] = obj{"driver": "demo", "mode": "asynchronous"} },
			`bad.yaml: services[0].plans[0].broker.mode: "asynchronous" is not a mode; use sync, async or async-only`},
		{"an unknown deprovision mode is refused",
			func(c catalog) { plan(c, 0, 0)["broker"] = obj{"deprovision": "later"} },
			`bad.yaml: services[0].plans[0].broker.deprovision: "later" is not a deprovision mode; use wait or detach`},
		{"sensitive_parameters that is not a boolean is refused",
			func(c catalog) { plan(c, 0, 0)["broker"] = obj{"sensitive_parameters": "yes"} },
			`bad.yaml: services[0].plans[0].broker.sensitive_parameters: must be a boolean (true or false), got a string ("yes")`},
		{"an outage budget that is not a duration is refused",
			func(c catalog) { plan(c, 0, 0)["broker"] = obj{"outage_budget": "soon"} },
			`bad.yaml: services[0].plans[0].broker.outage_budget: must be a duration of a minute or more, such as "720h" or "90m", got a string ("soon")`},
		{"an outage budget over 12 hours is refused",
			func(c catalog) { plan(c, 0, 0)["broker"] = obj{"outage_budget": "13h"} },
			`bad.yaml: services[0].plans[0].broker.outage_budget: must be at most 12h0m0s, got 13h0m0s`},
		{"an outage budget as long as the maximum polling duration is refused",
			func(c catalog) {
				plan(c, 0, 0)["broker"] = obj{"outage_budget": "2h"}
				plan(c, 0, 0)["maximum_polling_duration"] = 7200
			},
			`bad.yaml: services[0].plans[0].broker.outage_budget: must be shorter than the plan's maximum_polling_duration (2h0m0s), after which the operation is stopped; got 2h0m0s`},
		{"an empty driver is refused",
			func(c catalog) { plan(c, 0, 0)["broker"] = obj{"driver": "", "mode": "sync"} },
			`bad.yaml: services[0].plans[0].broker.driver: must not be empty`},
		{"a null driver is refused",
			func(c catalog) { plan(c, 0, 0)["broker"] = obj{"driver": nil} },
			`bad.yaml: services[0].plans[0].broker.driver: is required`},
		{"a broker block that is not an object is refused",
			func(c catalog) { plan(c, 0, 0)["broker"] = "demo" },
			`bad.yaml: services[0].plans[0].broker: must be an object, got a string ("demo")`},
		{"a broker block on an offering is refused",
			func(c catalog) { service(c, 0)["broker"] = obj{"driver": "demo"} },
			`bad.yaml: services[0].broker: broker settings belong in each plan, not in the offering`},

		// The file as a whole.
		{"a catalog without services is refused",
			func(c catalog) { delete(c, "services") },
			`bad.yaml: services: is required (a list)`},
		{"an unknown top-level key is refused",
			func(c catalog) { c["service"] = []any{} },
			`bad.yaml: service: unknown top-level key; the catalog has "services" and "networks"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := smallCatalog()
			tt.spoil(c)
			checkRefused(t, toYAML(t, c), tt.want)
		})
	}
}

// TestOutageBudgets: a plan's outage_budget, its default, and the default
// of a plan whose maximum_polling_duration is shorter.
func TestOutageBudgets(t *testing.T) {
	type obj = map[string]any
	tests := []struct {
		name  string
		build func(p map[string]any)
		want  time.Duration
	}{
		{"a plan that sets none waits out 30 minutes", func(map[string]any) {}, 30 * time.Minute},
		{"a plan's own budget is kept", func(p map[string]any) { p["broker"] = obj{"outage_budget": "2h"} }, 2 * time.Hour},
		{"a budget under the maximum polling duration is kept",
			func(p map[string]any) {
				p["broker"], p["maximum_polling_duration"] = obj{"outage_budget": "1h"}, 7200
			}, time.Hour},
		{"a short maximum polling duration halves the default",
			func(p map[string]any) { p["maximum_polling_duration"] = 600 }, 5 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := smallCatalog()
			tt.build(plan(c, 0, 1))
			cat, err := Parse("good.yaml", toYAML(t, c))
			if err != nil {
				t.Fatal(err)
			}
			if _, pl := cat.PlanByID("plan-2"); pl.Settings.OutageBudget != tt.want {
				t.Errorf("outage budget %s, want %s", pl.Settings.OutageBudget, tt.want)
			}
		})
	}
}

// TestBadCatalogFiles covers what a catalog built from Go values cannot
// express.
func TestBadCatalogFiles(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"a file that is not YAML is refused",
			"services: [\n", `bad.yaml: not valid YAML: line 1: did not find expected node content`},
		{"a file with a duplicate key is refused",
			"services:\n  - id: a\n    id: b\n", `bad.yaml: not valid YAML: line 3: mapping key "id" already defined at line 2`},
		{"an empty file is refused",
			"# nothing\n", `bad.yaml: is empty; a catalog is a mapping with a "services" list`},
		{"a file that is a list is refused",
			"- id: a\n", `bad.yaml: must be a mapping with a "services" list, got a list`},
		{"a mapping key that is not a string is refused",
			"services:\n  - id: a\n    metadata: {1: one}\n", `bad.yaml: services[0].metadata: mapping key 1 is not a string; JSON object keys are strings (quote it)`},
		{"a number JSON cannot hold is refused",
			"services:\n  - id: a\n    metadata: {cost: .nan}\n", `bad.yaml: services[0].metadata.cost: NaN cannot be written in JSON`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkRefused(t, []byte(tt.yaml), tt.want)
		})
	}
}

// checkRefused parses data as bad.yaml and checks that one line of the error
// starts with want, and that every line names the file.
func checkRefused(t *testing.T, data []byte, want string) {
	t.Helper()
	c, err := Parse("bad.yaml", data)
	if err == nil {
		t.Fatalf("Parse() accepted the catalog, want an error with %q", want)
	}
	if c != nil {
		t.Error("Parse() returned a catalog with its error")
	}
	found := false
	for _, line := range strings.Split(err.Error(), "\n") {
		if !strings.HasPrefix(line, "bad.yaml: ") {
			t.Errorf("error line %q does not name the file", line)
		}
		found = found || strings.HasPrefix(line, want)
	}
	if !found {
		t.Errorf("Parse() error =\n%s\nwant a line starting with\n%s", err, want)
	}
}

// demoSchemaOf returns the instance create schema of plan-1.
func demoSchemaOf(c map[string]any) map[string]any {
	schemas := plan(c, 0, 0)["schemas"].(map[string]any)
	return schemas["service_instance"].(map[string]any)["create"].(map[string]any)["parameters"].(map[string]any)
}

func TestEveryProblemIsReportedOnItsOwnLine(t *testing.T) {
	c := smallCatalog()
	service(c, 1)["id"] = "svc-1"
	plan(c, 0, 1)["maintenance_info"] = map[string]any{"version": "1"}
	plan(c, 1, 0)["broker"] = map[string]any{"mode": "later"}
	_, err := Parse("bad.yaml", toYAML(t, c))
	if err == nil {
		t.Fatal("Parse() accepted the catalog")
	}
	want := []string{
		`bad.yaml: services[0].plans[1].maintenance_info.version: "1" is not a semantic version (semver 2.0), e.g. "1.0.0"`,
		`bad.yaml: services[1].id: "svc-1" is already the id of services[0]; ids must be unique across the catalog`,
		`bad.yaml: services[1].plans[0].broker.mode: "later" is not a mode; use sync, async or async-only`,
	}
	if got := err.Error(); got != strings.Join(want, "\n") {
		t.Errorf("Parse() error =\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
}

func TestGoodCatalogs(t *testing.T) {
	type obj = map[string]any
	tests := []struct {
		name  string
		build func(c map[string]any)
	}{
		{"the small catalog is valid, plan names repeating across offerings", func(map[string]any) {}},
		{"an empty services list is valid", func(c map[string]any) { c["services"] = []any{} }},
		{"a prerelease and build maintenance version is valid",
			func(c map[string]any) { plan(c, 0, 0)["maintenance_info"] = obj{"version": "1.0.0-rc.1+build.5"} }},
		{"every requires the spec defines is valid",
			func(c map[string]any) {
				service(c, 0)["requires"] = []any{"syslog_drain", "route_forwarding", "volume_mount"}
			}},
		{"a complete dashboard client is valid",
			func(c map[string]any) {
				service(c, 0)["dashboard_client"] = obj{"id": "dc", "secret": "s", "redirect_uri": "http://a"}
			}},
		{"a draft-07 schema with a local $ref is valid",
			func(c map[string]any) {
				s := demoSchemaOf(c)
				s["$schema"] = "http://json-schema.org/draft-07/schema#"
				s["definitions"] = obj{"flag": obj{"type": "boolean"}}
				s["properties"].(obj)["fail"] = obj{"$ref": "#/definitions/flag"}
			}},
		{"a $ref-shaped default value is not taken for a reference",
			func(c map[string]any) {
				demoSchemaOf(c)["properties"].(obj)["extra"] = obj{"type": "object", "default": obj{"$ref": "http://example.com"}}
			}},
		{"vendor fields on offerings and plans are valid",
			func(c map[string]any) {
				service(c, 0)["x-vendor"] = obj{"anything": []any{1, "two"}}
				plan(c, 0, 0)["max_storage_tb"] = 5
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := smallCatalog()
			tt.build(c)
			if _, err := Parse("good.yaml", toYAML(t, c)); err != nil {
				t.Errorf("Parse() error = %v", err)
			}
		})
	}
}

// The validator compiles a draft's metaschema on its first use rather
// than at package init (internal/jsonschema): each draft the catalog
// allows must still check a schema against its own metaschema.
func TestEveryDraftChecksSchemasAgainstItsMetaschema(t *testing.T) {
	for _, draft := range []string{"http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-06/schema#",
		"http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2019-09/schema", "https://json-schema.org/draft/2020-12/schema"} {
		t.Run(draft, func(t *testing.T) {
			c := smallCatalog()
			demoSchemaOf(c)["$schema"] = draft
			if _, err := Parse("good.yaml", toYAML(t, c)); err != nil {
				t.Fatalf("Parse() error = %v", err)
			}
			demoSchemaOf(c)["properties"].(map[string]any)["fail"] = map[string]any{"type": "text"}
			_, err := Parse("bad.yaml", toYAML(t, c))
			want := "schemas.service_instance.create.parameters.properties.fail.type: "
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "(not a valid JSON Schema)") {
				t.Errorf("Parse() error = %v, want one at %s… (not a valid JSON Schema)", err, want)
			}
		})
	}
}
