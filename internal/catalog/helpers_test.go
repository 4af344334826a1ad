package catalog

import (
	"testing"

	"gopkg.in/yaml.v3"
)

// shippedCatalog is the default catalog at the root of the module.
const shippedCatalog = "../../catalog.yaml"

// demoSchema is a parameters schema like the shipped one.
func demoSchema() map[string]any {
	return map[string]any{
		"$schema":              "http://json-schema.org/draft-04/schema#",
		"title":                "demo parameters",
		"type":                 "object",
		"additionalProperties": false,
		"properties": map[string]any{
			"duration_seconds": map[string]any{"type": "integer", "minimum": 0, "maximum": 3600},
			"fail":             map[string]any{"type": "boolean"},
			"fail_description": map[string]any{"type": "string", "minLength": 1},
		},
	}
}

// smallCatalog returns a valid catalog with two offerings, as YAML values
// that a test may break before marshalling. Both offerings have a plan named
// "small": plan names need only be unique within their offering.
func smallCatalog() map[string]any {
	return map[string]any{"services": []any{
		map[string]any{
			"id": "svc-1", "name": "svc-one", "description": "first offering", "bindable": true,
			"plans": []any{
				map[string]any{
					"id": "plan-1", "name": "small", "description": "small plan",
					"maintenance_info": map[string]any{"version": "1.0.0"},
					"schemas": map[string]any{
						"service_instance": map[string]any{"create": map[string]any{"parameters": demoSchema()}},
					},
					"broker": map[string]any{"driver": "demo", "mode": "async"},
				},
				map[string]any{"id": "plan-2", "name": "large", "description": "large plan"},
			},
		},
		map[string]any{
			"id": "svc-2", "name": "svc-two", "description": "second offering", "bindable": false,
			"plans": []any{
				map[string]any{"id": "plan-3", "name": "small", "description": "small plan", "bindable": true},
			},
		},
	}}
}

// service returns offering i of a catalog built by smallCatalog.
func service(c map[string]any, i int) map[string]any {
	return c["services"].([]any)[i].(map[string]any)
}

// plan returns plan j of offering i of a catalog built by smallCatalog.
func plan(c map[string]any, i, j int) map[string]any {
	return service(c, i)["plans"].([]any)[j].(map[string]any)
}

// toYAML marshals catalog values.
func toYAML(t *testing.T, v any) []byte {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatalf("marshal test catalog: %v", err)
	}
	return b
}

// mustParse parses a catalog that must be valid.
func mustParse(t *testing.T, v any) *Catalog {
	t.Helper()
	c, err := Parse("test.yaml", toYAML(t, v))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}
