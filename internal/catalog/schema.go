package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/serverless-osb/broker/internal/jsonschema"

	"github.com/serverless-osb/broker/internal/jsonenc"
)

// SchemaKind names one of the three parameter schemas a plan may have.
type SchemaKind int

const (
	// InstanceCreate is schemas.service_instance.create.parameters.
	InstanceCreate SchemaKind = iota
	// InstanceUpdate is schemas.service_instance.update.parameters.
	InstanceUpdate
	// BindingCreate is schemas.service_binding.create.parameters.
	BindingCreate

	numSchemaKinds
)

// schemaPlaces says where in a plan's schemas object each kind lives.
var schemaPlaces = [numSchemaKinds]struct{ object, action string }{
	InstanceCreate: {"service_instance", "create"},
	InstanceUpdate: {"service_instance", "update"},
	BindingCreate:  {"service_binding", "create"},
}

// String returns where the schema lives in the plan, e.g.
// "service_instance.create.parameters".
func (k SchemaKind) String() string {
	if k < 0 || k >= numSchemaKinds {
		return "SchemaKind(" + strconv.Itoa(int(k)) + ")"
	}
	return schemaPlaces[k].object + "." + schemaPlaces[k].action + ".parameters"
}

// knownDrafts are the JSON Schema drafts a schema may declare in $schema,
// without scheme and fragment. The spec requires platforms to support
// draft-04; Cloud Foundry's Cloud Controller accepts only draft-04, which is
// why the shipped catalog uses it.
var knownDrafts = []string{
	"json-schema.org/draft-04/schema",
	"json-schema.org/draft-06/schema",
	"json-schema.org/draft-07/schema",
	"json-schema.org/draft/2019-09/schema",
	"json-schema.org/draft/2020-12/schema",
}

// paramSchema is a parameters schema, compiled at load or, in a catalog
// loaded with LoadChecked, on its first use.
type paramSchema struct {
	url    string // the name it was compiled under
	doc    any    // the schema as JSON values, to list its properties in messages
	schema func() (*jsonschema.Schema, error)
}

// schemas checks a plan's schemas object and compiles the schemas in it.
// Unlike offerings and plans, the schemas object takes no vendor fields: a
// misspelt key would silently turn parameter validation off.
func (ck *checker) schemas(p string, obj map[string]any) [numSchemaKinds]*paramSchema {
	var out [numSchemaKinds]*paramSchema
	ck.onlyKeys(obj, p, "service_instance", "service_binding")
	if si, ok := ck.object(obj, p, "service_instance"); ok {
		ck.onlyKeys(si, field(p, "service_instance"), "create", "update")
	}
	if sb, ok := ck.object(obj, p, "service_binding"); ok {
		ck.onlyKeys(sb, field(p, "service_binding"), "create")
	}
	for k, place := range schemaPlaces {
		group, ok := obj[place.object].(map[string]any)
		if !ok {
			continue
		}
		gp := field(p, place.object)
		in, ok := ck.object(group, gp, place.action)
		if !ok {
			continue
		}
		ip := field(gp, place.action)
		ck.onlyKeys(in, ip, "parameters")
		if params, ok := ck.object(in, ip, "parameters"); ok {
			out[k] = ck.compile(field(ip, "parameters"), params)
		}
	}
	return out
}

// onlyKeys reports every key of obj that is not one of keys.
func (ck *checker) onlyKeys(obj map[string]any, p string, keys ...string) {
	for _, k := range sortedKeys(obj) {
		if !slices.Contains(keys, k) {
			ck.problem(field(p, k), "unknown key; the keys here are %s", strings.Join(keys, " and "))
		}
	}
}

// compile checks one parameters schema against the spec's rules ($schema
// present, no external references, at most 64 kB) and compiles it.
func (ck *checker) compile(p string, doc map[string]any) *paramSchema {
	before := len(ck.problems)
	if d, ok := doc["$schema"]; !ok {
		ck.problem(p, `has no "$schema"; declare the JSON Schema draft, e.g. $schema: "http://json-schema.org/draft-04/schema#"`)
	} else if s, ok := d.(string); !ok {
		ck.problem(field(p, "$schema"), "must be a string, got %s", Describe(d))
	} else if !knownDraft(s) {
		ck.problem(field(p, "$schema"), `%q is not a JSON Schema draft; use "http://json-schema.org/draft-04/schema#" (or draft-06, draft-07, 2019-09, 2020-12)`, s)
	}
	ck.localRefs(p, doc)
	if ck.lazy && len(ck.problems) == before {
		// The build checked the catalog (size, draft, a valid schema):
		// its JSON form is made at the schema's first use, as its
		// compilation is. Its properties are read from doc as it is.
		ck.compiled++
		url := fmt.Sprintf("mem:///schema-%d.json", ck.compiled)
		return &paramSchema{url: url, doc: doc, schema: sync.OnceValues(func() (*jsonschema.Schema, error) {
			body, err := jsonenc.Marshal(doc)
			if err != nil {
				return nil, err
			}
			jdoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
			if err != nil {
				return nil, err
			}
			return compileSchema(url, jdoc)
		})}
	}
	body, err := jsonenc.Marshal(doc)
	if err != nil {
		ck.problem(p, "cannot be encoded as JSON: %v", err)
		return nil
	}
	if len(body) > maxSchemaBytes {
		ck.problem(p, "is %d bytes as JSON; a schema may be at most %d bytes (64 kB)", len(body), maxSchemaBytes)
	}
	if len(ck.problems) > before {
		return nil
	}

	jdoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		ck.problem(p, "cannot be read back as JSON: %v", err)
		return nil
	}
	ck.compiled++
	url := fmt.Sprintf("mem:///schema-%d.json", ck.compiled)
	sch, err := compileSchema(url, jdoc)
	var re *resourceError
	if errors.As(err, &re) {
		ck.problem(p, "is not a valid JSON Schema: %v", re.err)
		return nil
	}
	if err != nil {
		var sve *jsonschema.SchemaValidationError
		var ve *jsonschema.ValidationError
		if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
			for _, v := range violations(ve, p, nil) {
				ck.problem(v.Field, "%s (not a valid JSON Schema)", v.Reason)
			}
			return nil
		}
		// Name places within the schema by their fragment alone: the
		// URL is the compiler's, not the catalog's.
		ck.problem(p, "is not a valid JSON Schema: %s", strings.ReplaceAll(err.Error(), url, ""))
		return nil
	}
	return &paramSchema{url: url, doc: jdoc, schema: func() (*jsonschema.Schema, error) { return sch, nil }}
}

// resourceError is a schema the compiler refused to take at all.
type resourceError struct{ err error }

func (e *resourceError) Error() string { return e.err.Error() }

// compileSchema compiles doc, named url, loading nothing else.
func compileSchema(url string, doc any) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(url, doc); err != nil {
		return nil, &resourceError{err}
	}
	return c.Compile(url)
}

// localRefs reports every reference that does not point into the schema
// itself. The spec forbids external references, and the broker must never
// fetch anything to validate parameters.
func (ck *checker) localRefs(p string, v any) {
	if !externalRef(v) {
		return // the usual case, without a path made for every node
	}
	ck.localRefsAt(p, v)
}

// refMember is what localRefs makes of a schema's member k: the external
// reference it holds ("" for none), and whether its value is a schema to
// look into (enum, const, default and examples hold values, not schemas).
func refMember(k string, e any) (external string, schema bool) {
	switch k {
	case "$ref", "$dynamicRef", "$recursiveRef":
		if s, ok := e.(string); ok && !strings.HasPrefix(s, "#") {
			return s, true
		}
	case "enum", "const", "default", "examples":
		return "", false
	}
	return "", true
}

// externalRef reports whether v holds a reference localRefs refuses.
func externalRef(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if external, schema := refMember(k, e); external != "" || schema && externalRef(e) {
				return true
			}
		}
	case []any:
		return slices.ContainsFunc(v, externalRef)
	}
	return false
}

// localRefsAt reports each external reference in v, at its path.
func (ck *checker) localRefsAt(p string, v any) {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(v) {
			external, schema := refMember(k, v[k])
			if external != "" {
				ck.problem(field(p, k), `%q is an external reference; a schema may only refer to itself (a reference starting with "#")`, external)
			}
			if schema {
				ck.localRefsAt(field(p, k), v[k])
			}
		}
	case []any:
		for i, e := range v {
			ck.localRefsAt(index(p, i), e)
		}
	}
}

// knownDraft says whether a $schema value names a known draft.
func knownDraft(s string) bool {
	u := strings.TrimSuffix(s, "#")
	u, ok := strings.CutPrefix(u, "http://")
	if !ok {
		u, ok = strings.CutPrefix(u, "https://")
	}
	return ok && slices.Contains(knownDrafts, u)
}

// noLoader refuses to load anything: every schema is compiled from the
// catalog alone. (localRefs already refuses external references; this makes
// sure that nothing slips through, e.g. a base URI set with $id.)
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s is external; schemas must not load anything", url)
}
