package local

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
