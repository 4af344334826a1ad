package local

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/serverless-osb/broker/internal/jsonenc"
)

// path is a JSONPath of the subset this engine supports: "$" or "$$"
// followed by field names ("$.a", "$['a']") and array indexes ("$.a[0]").
// Anything else (wildcards, filters, slices, "..") is refused when a
// definition is loaded, so a path that loads is a path that runs.
type path struct {
	text    string
	context bool // "$$": resolved against the context object
	steps   []step
}

// step is one field name, or one array index when index >= 0.
type step struct {
	field string
	index int
}

// rootPath is "$", the default of InputPath, OutputPath and ResultPath.
var rootPath = path{text: "$"}

// parsePath parses a path of the supported subset.
func parsePath(s string) (path, error) {
	p := path{text: s}
	rest, ok := strings.CutPrefix(s, "$")
	if !ok {
		return p, fmt.Errorf("path %q must start with $", s)
	}
	if r, ok := strings.CutPrefix(rest, "$"); ok {
		p.context, rest = true, r
	}
	for rest != "" {
		switch rest[0] {
		case '.':
			rest = rest[1:]
			n := strings.IndexAny(rest, ".[")
			if n < 0 {
				n = len(rest)
			}
			name := rest[:n]
			if !plainFieldName(name) {
				return p, fmt.Errorf("path %q: unsupported syntax at %q (supported: $, $.a.b, $['a'], $.a[0])", s, "."+rest)
			}
			p.steps = append(p.steps, step{field: name, index: -1})
			rest = rest[n:]
		case '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return p, fmt.Errorf("path %q: unclosed [", s)
			}
			inner := rest[1:end]
			rest = rest[end+1:]
			if name, ok := quotedFieldName(inner); ok {
				p.steps = append(p.steps, step{field: name, index: -1})
				continue
			}
			i, ok := arrayIndex(inner)
			if !ok {
				return p, fmt.Errorf("path %q: unsupported syntax [%s] (supported: ['name'] and [0])", s, inner)
			}
			p.steps = append(p.steps, step{index: i})
		default:
			return p, fmt.Errorf("path %q: unsupported syntax at %q", s, rest)
		}
	}
	return p, nil
}

// plainFieldName reports whether a name may follow a dot. Characters that
// mean something in fuller JSONPath dialects are refused rather than read
// literally, so no path silently means something else here than on AWS.
func plainFieldName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune("$@*?()'\",:[]\\.", r) {
			return false
		}
	}
	return true
}

func quotedFieldName(inner string) (string, bool) {
	if len(inner) < 3 {
		return "", false
	}
	q := inner[0]
	if (q != '\'' && q != '"') || inner[len(inner)-1] != q {
		return "", false
	}
	name := inner[1 : len(inner)-1]
	if strings.ContainsAny(name, "'\"\\") {
		return "", false
	}
	return name, true
}

func arrayIndex(inner string) (int, bool) {
	if inner == "" || (len(inner) > 1 && inner[0] == '0') {
		return 0, false
	}
	for _, r := range inner {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	i, err := strconv.Atoi(inner)
	return i, err == nil
}

// contextFields is the part of the context object this engine provides;
// context paths are checked against it when a definition loads. Map is
// there only in a Map's ItemSelector.
var contextFields = map[string]map[string]bool{
	"Execution":    {"Id": true, "Name": true, "Input": true, "StartTime": true},
	"State":        {"Name": true, "EnteredTime": true, "RetryCount": true},
	"StateMachine": {"Id": true, "Name": true},
	"Map":          {"Item": true},
}

// checkContext refuses a "$$" path that names something the engine does not
// provide (Task.Token, ...), or $$.Map outside a Map's ItemSelector (mapItem
// unset). Below $$.Execution.Input and $$.Map.Item.Value anything goes.
func (p path) checkContext(mapItem bool) error {
	if !p.context {
		return nil
	}
	for i, s := range p.steps {
		switch {
		case s.index >= 0 && i < 2:
			return fmt.Errorf("context path %q: no array here", p.text)
		case i == 0 && s.field == "Map" && !mapItem:
			return fmt.Errorf("context path %q: $$.Map is only in a Map state's ItemSelector (or Parameters)", p.text)
		case i == 0 && contextFields[s.field] == nil:
			return fmt.Errorf("context path %q: $$.%s is not supported (supported: $$.Execution, $$.State, $$.StateMachine, and $$.Map.Item in a Map's ItemSelector)", p.text, s.field)
		case i == 1 && !contextFields[p.steps[0].field][s.field]:
			return fmt.Errorf("context path %q: $$.%s.%s is not supported", p.text, p.steps[0].field, s.field)
		case i == 2 && p.steps[0].field == "Map":
			if s.field != "Index" && s.field != "Value" {
				return fmt.Errorf("context path %q: $$.Map.Item has Index and Value only", p.text)
			}
		case i == 2 && (p.steps[0].field != "Execution" || p.steps[1].field != "Input"):
			return fmt.Errorf("context path %q: $$.%s.%s has no fields", p.text, p.steps[0].field, p.steps[1].field)
		case i == 3 && p.steps[0].field == "Map" && p.steps[2].field != "Value":
			return fmt.Errorf("context path %q: $$.Map.Item.Index has no fields", p.text)
		}
	}
	return nil
}

// lookup returns the value the path selects in doc, and whether there is one.
func (p path) lookup(doc any) (any, bool) {
	v := doc
	for _, s := range p.steps {
		if s.index >= 0 {
			a, ok := v.([]any)
			if !ok || s.index >= len(a) {
				return nil, false
			}
			v = a[s.index]
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[s.field]; !ok {
			return nil, false
		}
	}
	return v, true
}

// lookupIn resolves the path against the state's input, or against the
// context object for "$$" paths.
func (p path) lookupIn(input, contextObject any) (any, bool) {
	if p.context {
		if c, ok := contextObject.(*stateContext); ok {
			return c.lookup(p)
		}
		return p.lookup(contextObject)
	}
	return p.lookup(input)
}

// set returns a copy of doc with value placed where the path points, the
// way ResultPath does: missing fields on the way are created as objects,
// while a value on the way that is not an object (or an index past the end
// of an array) is an error. doc itself is never modified.
func (p path) set(doc, value any) (any, error) {
	return setSteps(p.text, doc, p.steps, value)
}

func setSteps(text string, doc any, steps []step, value any) (any, error) {
	if len(steps) == 0 {
		return value, nil
	}
	s := steps[0]
	if s.index >= 0 {
		a, ok := doc.([]any)
		if !ok || s.index >= len(a) {
			return nil, fmt.Errorf("cannot apply ResultPath %s: no array element [%d]", text, s.index)
		}
		v, err := setSteps(text, a[s.index], steps[1:], value)
		if err != nil {
			return nil, err
		}
		out := slices.Clone(a)
		out[s.index] = v
		return out, nil
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("cannot apply ResultPath %s: the value holding %q is not an object", text, s.field)
	}
	child, present := m[s.field]
	if !present {
		child = map[string]any{}
	}
	v, err := setSteps(text, child, steps[1:], value)
	if err != nil {
		return nil, err
	}
	out := maps.Clone(m)
	out[s.field] = v
	return out, nil
}

// decodeValue decodes one JSON value, numbers kept as json.Number so that
// they come out as they went in.
func decodeValue(data []byte) (any, error) {
	if v, ok := decodeCompact(data); ok {
		return v, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

// canonicalJSON re-encodes a JSON text with sorted keys and no spaces, so
// that two inputs can be compared.
func canonicalJSON(data []byte) ([]byte, error) {
	// An input already canonical (a workflow's, `{"instance_id":…}`) is
	// kept, copied: the caller may reuse its bytes.
	if jsonenc.Canonical(data, jsonenc.CanonicalOptions{EscapeHTML: true}) {
		return bytes.Clone(data), nil
	}
	v, err := decodeValue(data)
	if err != nil {
		return nil, err
	}
	return jsonenc.MarshalValue(v)
}
