package catalog

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/serverless-osb/broker/internal/jsonschema"
	"github.com/serverless-osb/broker/internal/jsonschema/kind"
)

// Violation is one way parameters break a plan's schema.
type Violation struct {
	// Field is the path of the offending value, e.g.
	// "parameters.duration_seconds", or "parameters" for the object itself.
	Field string
	// Reason says what is wrong, e.g. "must be <= 3600".
	Reason string
}

// String returns "field: reason".
func (v Violation) String() string {
	return v.Field + ": " + v.Reason
}

// ParameterError says why parameters break a plan's schema. Its message is
// meant for the platform's end user, as the description of a 400 response.
type ParameterError struct {
	// Field and Reason describe the first violation.
	Field  string
	Reason string
	// Violations lists every violation, sorted by field; the first is the
	// one Field and Reason describe.
	Violations []Violation
}

// Error lists every violation, e.g.
// `parameters.duration_seconds: must be <= 3600; parameters.fail: must be a boolean, got a string`.
func (e *ParameterError) Error() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = v.String()
	}
	return strings.Join(parts, "; ")
}

// newParameterError returns the error for a non-empty list of violations.
func newParameterError(vs []Violation) *ParameterError {
	return &ParameterError{Field: vs[0].Field, Reason: vs[0].Reason, Violations: vs}
}

// ValidateParameters checks the parameters of a request against the plan's
// schema of that kind. Absent parameters (nil, empty or JSON null) are
// checked as {}. A plan without that schema accepts any parameters. Parameters
// that break the schema, or are not JSON, give a *ParameterError.
func (p *Plan) ValidateParameters(k SchemaKind, params json.RawMessage) error {
	if k < 0 || k >= numSchemaKinds {
		return fmt.Errorf("validate parameters: unknown schema kind %v", k)
	}
	ps := p.schemas[k]
	if ps == nil {
		return nil
	}
	params = bytes.TrimSpace(params)
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage("{}")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return newParameterError([]Violation{{Field: "parameters", Reason: "must be a JSON object; this is not valid JSON"}})
	}
	sch, err := ps.schema()
	if err != nil {
		// Only a catalog loaded with LoadChecked compiles here, and the
		// build compiled the same catalog: its bundle was changed since.
		return fmt.Errorf("validate parameters against %s: the catalog's schema does not compile: %w", k, err)
	}
	err = sch.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("validate parameters against %s: %w", k, err)
	}
	return newParameterError(violations(ve, "parameters", ps.properties))
}

// HasSchema says whether the plan has a parameters schema of that kind.
func (p *Plan) HasSchema(k SchemaKind) bool {
	return k >= 0 && k < numSchemaKinds && p.schemas[k] != nil
}

// SchemaProperties lists, sorted, the properties that the top level of the
// plan's schema of that kind declares: the parameters it names. It is nil
// when the plan has no such schema or the schema names none.
func (p *Plan) SchemaProperties(k SchemaKind) []string {
	if !p.HasSchema(k) {
		return nil
	}
	ps := p.schemas[k]
	return ps.properties(ps.url)
}

// violations turns a validation error into one violation per problem, each
// naming its field below base. properties, if not nil, lists the properties
// the schema at a schema URL declares, to say which ones are allowed.
func violations(ve *jsonschema.ValidationError, base string, properties func(schemaURL string) []string) []Violation {
	var out []Violation
	collect(ve, base, properties, &out)
	slices.SortFunc(out, func(a, b Violation) int {
		return cmp.Or(strings.Compare(a.Field, b.Field), strings.Compare(a.Reason, b.Reason))
	})
	return slices.Compact(out)
}

// collect appends the violations of e and its causes to out.
func collect(e *jsonschema.ValidationError, base string, properties func(string) []string, out *[]Violation) {
	at := locate(base, e.InstanceLocation)
	add := func(reason string, args ...any) {
		*out = append(*out, Violation{Field: at, Reason: fmt.Sprintf(reason, args...)})
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
		if len(e.Causes) == 0 {
			add("is not valid")
		}
		for _, c := range e.Causes {
			collect(c, base, properties, out)
		}
	case *kind.OneOf:
		if len(k.Subschemas) > 1 {
			add("matches more than one of the allowed forms; it must match exactly one")
			return
		}
		add("%s", alternatives(e, at, base, properties))
	case *kind.AnyOf:
		add("%s", alternatives(e, at, base, properties))
	case *kind.Not:
		add("matches a form that is not allowed")
	case *kind.FalseSchema:
		add("is not allowed")
	case *kind.Type:
		add("must be %s, got %s", typeList(k.Want), withArticle(k.Got))
	case *kind.Enum:
		if len(k.Want) == 1 {
			add("must be %s", jsonText(k.Want[0]))
		} else {
			want := make([]string, len(k.Want))
			for i, w := range k.Want {
				want[i] = jsonText(w)
			}
			add("must be one of %s", strings.Join(want, ", "))
		}
	case *kind.Const:
		add("must be %s", jsonText(k.Want))
	case *kind.Format:
		add("must be a valid %s", k.Want)
	case *kind.Required:
		for _, m := range k.Missing {
			*out = append(*out, Violation{Field: field(at, m), Reason: "is required"})
		}
	case *kind.Dependency:
		for _, m := range k.Missing {
			*out = append(*out, Violation{Field: field(at, m), Reason: fmt.Sprintf("is required when %q is set", k.Prop)})
		}
	case *kind.DependentRequired:
		for _, m := range k.Missing {
			*out = append(*out, Violation{Field: field(at, m), Reason: fmt.Sprintf("is required when %q is set", k.Prop)})
		}
	case *kind.AdditionalProperties:
		hint := ""
		if properties != nil {
			if allowed := properties(e.SchemaURL); len(allowed) > 0 {
				hint = " (allowed: " + strings.Join(allowed, ", ") + ")"
			}
		}
		props := slices.Sorted(slices.Values(k.Properties))
		if len(props) == 1 {
			add("additional property %q is not allowed%s", props[0], hint)
			break
		}
		quoted := make([]string, len(props))
		for i, prop := range props {
			quoted[i] = strconv.Quote(prop)
		}
		add("additional properties %s and %s are not allowed%s",
			strings.Join(quoted[:len(quoted)-1], ", "), quoted[len(quoted)-1], hint)
	case *kind.PropertyNames:
		add("property name %q is not allowed", k.Property)
	case *kind.MinProperties:
		add("must have at least %s", plural(k.Want, "property", "properties"))
	case *kind.MaxProperties:
		add("must have at most %s", plural(k.Want, "property", "properties"))
	case *kind.MinItems:
		add("must have at least %s", plural(k.Want, "item", "items"))
	case *kind.MaxItems:
		add("must have at most %s", plural(k.Want, "item", "items"))
	case *kind.AdditionalItems:
		add("has %s more than allowed", plural(k.Count, "item", "items"))
	case *kind.UniqueItems:
		add("items %d and %d are equal; items must be unique", k.Duplicates[0], k.Duplicates[1])
	case *kind.Contains:
		add("must contain an item that matches the schema")
	case *kind.MinContains:
		add("must contain at least %s that match the schema", plural(k.Want, "item", "items"))
	case *kind.MaxContains:
		add("must contain at most %s that match the schema", plural(k.Want, "item", "items"))
	case *kind.MinLength:
		if k.Want == 1 {
			add("must not be empty")
		} else {
			add("must be at least %s long", plural(k.Want, "character", "characters"))
		}
	case *kind.MaxLength:
		add("must be at most %s long", plural(k.Want, "character", "characters"))
	case *kind.Pattern:
		add("must match the pattern %s", k.Want)
	case *kind.Minimum:
		add("must be >= %s", ratText(k.Want))
	case *kind.Maximum:
		add("must be <= %s", ratText(k.Want))
	case *kind.ExclusiveMinimum:
		add("must be > %s", ratText(k.Want))
	case *kind.ExclusiveMaximum:
		add("must be < %s", ratText(k.Want))
	case *kind.MultipleOf:
		add("must be a multiple of %s", ratText(k.Want))
	case *kind.ContentEncoding:
		add("must be %s-encoded", k.Want)
	case *kind.ContentMediaType:
		add("must be %s", k.Want)
	case *kind.ContentSchema:
		add("has content that does not match its schema")
	default:
		add("is not valid")
	}
}

// alternatives explains why a value matches none of the forms of an anyOf
// or oneOf.
func alternatives(e *jsonschema.ValidationError, at, base string, properties func(string) []string) string {
	var alts []string
	for _, c := range e.Causes {
		var sub []Violation
		collect(c, base, properties, &sub)
		for _, v := range sub {
			if v.Field == at {
				alts = append(alts, v.Reason)
			} else {
				alts = append(alts, v.String())
			}
		}
	}
	if len(alts) == 0 {
		return "does not match any of the allowed forms"
	}
	return "does not match any of the allowed forms: " + strings.Join(alts, "; or ")
}

// properties lists the properties the schema at schemaURL (a location
// within this schema) declares.
func (ps *paramSchema) properties(schemaURL string) []string {
	u, frag, _ := strings.Cut(schemaURL, "#")
	if u != ps.url {
		return nil
	}
	v := ps.doc
	if frag = strings.TrimPrefix(frag, "/"); frag != "" {
		for _, tok := range strings.Split(frag, "/") {
			if t, err := url.PathUnescape(tok); err == nil {
				tok = t
			}
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch x := v.(type) {
			case map[string]any:
				v = x[tok]
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(x) {
					return nil
				}
				v = x[i]
			default:
				return nil
			}
		}
	}
	obj, _ := v.(map[string]any)
	props, _ := obj["properties"].(map[string]any)
	return sortedKeys(props)
}

// locate returns the path of the value at tokens (a JSON pointer's tokens)
// below base.
func locate(base string, tokens []string) string {
	p := base
	for _, tok := range tokens {
		if i, err := strconv.Atoi(tok); err == nil && i >= 0 && strconv.Itoa(i) == tok {
			p = index(p, i)
		} else {
			p = field(p, tok)
		}
	}
	return p
}

// withArticle returns a JSON type name as a noun: "an integer", "a string".
func withArticle(t string) string {
	switch t {
	case "null":
		return "null"
	case "integer", "object", "array":
		return "an " + t
	default:
		return "a " + t
	}
}

// typeList returns "an integer" or "a string or null".
func typeList(types []string) string {
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = withArticle(t)
	}
	return strings.Join(out, " or ")
}

// jsonText writes a JSON value as JSON.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// ratText writes a number as short as it can be.
func ratText(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// plural returns "1 item" or "2 items".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
