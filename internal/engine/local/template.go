package local

import (
	"slices"
	"strings"

	"github.com/serverless-osb/broker/internal/jsonenc"
)

// template is a compiled Payload Template (Parameters, ResultSelector): a
// JSON value in which every object field named "x.$" is replaced, at run
// time, by field "x" holding the value its path selects.
type template struct {
	literal any // neither object, array nor path: used as is, never modified
	object  []templateField
	array   []*template
	kind    templateKind
	path    path
	field   string // the "x.$" field name, for error causes
	// byName are the indexes of object's fields in ascending order of
	// their names, which appendJSON writes them in (sortFields).
	byName []int
}

type templateKind int

const (
	templateLiteral templateKind = iota
	templateObject
	templateArray
	templatePath
)

type templateField struct {
	name  string
	value *template
	// key is name encoded, and a colon: what appendJSON writes before
	// the value.
	key []byte
}

// sortFields prepares an object template for appendJSON: its fields'
// order by name, and their keys encoded.
func (t *template) sortFields() {
	t.byName = make([]int, len(t.object))
	for i := range t.object {
		t.byName[i] = i
		key, _ := jsonenc.MarshalValue(t.object[i].name) // a string always encodes
		t.object[i].key = append(key, ':')
	}
	slices.SortFunc(t.byName, func(i, j int) int { return strings.Compare(t.object[i].name, t.object[j].name) })
}

// fieldNames returns the names of the fields of an object template, after
// ".$" is removed.
func (t *template) fieldNames() []string {
	names := make([]string, 0, len(t.object))
	for _, f := range t.object {
		names = append(names, f.name)
	}
	return names
}

// eval builds the value the template describes. A path that selects nothing
// is a States.Runtime error, as on AWS.
func (t *template) eval(input, contextObject any) (any, *stateError) {
	switch t.kind {
	case templatePath:
		v, ok := t.path.lookupIn(input, contextObject)
		if !ok {
			return nil, runtimeError("The JSONPath '%s' specified for the field '%s' could not be found in the input", t.path.text, t.field)
		}
		return v, nil
	case templateObject:
		out := make(map[string]any, len(t.object))
		for _, f := range t.object {
			v, err := f.value.eval(input, contextObject)
			if err != nil {
				return nil, err
			}
			out[f.name] = v
		}
		return out, nil
	case templateArray:
		out := make([]any, len(t.array))
		for i, item := range t.array {
			v, err := item.eval(input, contextObject)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	return t.literal, nil
}

// payloadOf is the Payload field of a lambda:invoke Task's Parameters when
// the rest is literal (FunctionName), so that a Task encodes its payload
// straight from the template (appendJSON) with nothing else to evaluate;
// nil otherwise.
func payloadOf(params *template) *template {
	if params == nil || params.kind != templateObject {
		return nil
	}
	var payload *template
	for _, f := range params.object {
		switch {
		case f.name == "Payload":
			payload = f.value
		case f.value.hasPaths():
			return nil
		}
	}
	return payload
}

// hasPaths says whether evaluating t looks anything up.
func (t *template) hasPaths() bool {
	switch t.kind {
	case templatePath:
		return true
	case templateObject:
		for _, f := range t.object {
			if f.value.hasPaths() {
				return true
			}
		}
	case templateArray:
		for _, item := range t.array {
			if item.hasPaths() {
				return true
			}
		}
	}
	return false
}

// appendJSON appends what jsonenc.MarshalValue makes of eval's value,
// without building its maps: an object's fields in ascending order of
// their names, as MarshalValue sorts a map's keys. A path that selects
// nothing is eval's error; a value that cannot be encoded, a
// States.Runtime error too.
func (t *template) appendJSON(b []byte, input, contextObject any) ([]byte, *stateError) {
	switch t.kind {
	case templatePath:
		v, ok := t.path.lookupIn(input, contextObject)
		if !ok {
			return nil, runtimeError("The JSONPath '%s' specified for the field '%s' could not be found in the input", t.path.text, t.field)
		}
		return appendPayloadValue(b, v)
	case templateObject:
		b = append(b, '{')
		for i, j := range t.byName {
			if i > 0 {
				b = append(b, ',')
			}
			f := &t.object[j]
			b = append(b, f.key...)
			var serr *stateError
			if b, serr = f.value.appendJSON(b, input, contextObject); serr != nil {
				return nil, serr
			}
		}
		return append(b, '}'), nil
	case templateArray:
		b = append(b, '[')
		for i, item := range t.array {
			if i > 0 {
				b = append(b, ',')
			}
			var serr *stateError
			if b, serr = item.appendJSON(b, input, contextObject); serr != nil {
				return nil, serr
			}
		}
		return append(b, ']'), nil
	}
	return appendPayloadValue(b, t.literal)
}

func appendPayloadValue(b []byte, v any) ([]byte, *stateError) {
	b, err := jsonenc.AppendValue(b, v)
	if err != nil {
		return nil, runtimeError("the Payload cannot be encoded: %v", err)
	}
	return b, nil
}

// overPayload is a Task's ResultSelector made to read the worker's answer
// itself rather than the Lambda result around it ({"ExecutedVersion",
// "Payload", "StatusCode"}): every path of t that reads the result starts
// with $.Payload, and loses that step. nil when a path reads anything else
// of the result, which is then built. Its paths keep their text, for
// their errors.
func (t *template) overPayload() *template {
	switch t.kind {
	case templatePath:
		p := t.path
		if p.context {
			return t
		}
		if len(p.steps) == 0 || p.steps[0].index >= 0 || p.steps[0].field != "Payload" {
			return nil
		}
		p.steps = p.steps[1:]
		return &template{kind: templatePath, path: p, field: t.field}
	case templateObject:
		out := &template{kind: templateObject, object: make([]templateField, len(t.object)), byName: t.byName}
		for i, f := range t.object {
			if f.value = f.value.overPayload(); f.value == nil {
				return nil
			}
			out.object[i] = f
		}
		return out
	case templateArray:
		out := &template{kind: templateArray, array: make([]*template, len(t.array))}
		for i, item := range t.array {
			if out.array[i] = item.overPayload(); out.array[i] == nil {
				return nil
			}
		}
		return out
	}
	return t
}
