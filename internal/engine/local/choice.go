package local

import (
	"encoding/json"
	"fmt"
)

// rule is a Choice Rule: a boolean expression (And, Or, Not) or a
// comparison of the value at Variable. Only top-level rules have Next.
type rule struct {
	next string

	and []*rule
	or  []*rule
	not *rule

	variable path
	op       string
	operand  any // bool, string or float64, by operator
}

// operandKinds lists the supported comparison operators and what their
// operand must be.
var operandKinds = map[string]string{
	"BooleanEquals":            "boolean",
	"StringEquals":             "string",
	"NumericEquals":            "number",
	"NumericLessThan":          "number",
	"NumericGreaterThan":       "number",
	"NumericLessThanEquals":    "number",
	"NumericGreaterThanEquals": "number",
	"IsPresent":                "boolean",
	"IsNull":                   "boolean",
	"IsBoolean":                "boolean",
	"IsNumeric":                "boolean",
	"IsString":                 "boolean",
}

func (l *loader) choices(state string, raw json.RawMessage) []*rule {
	items := l.objects(state, "Choices", raw)
	out := make([]*rule, 0, len(items))
	for i, m := range items {
		if r := l.rule(state, fmt.Sprintf("Choices[%d]", i), m, true); r != nil {
			out = append(out, r)
		}
	}
	return out
}

func (l *loader) rule(state, field string, v any, top bool) *rule {
	m, ok := v.(map[string]any)
	if !ok {
		l.fail(state, field, "must be a Choice Rule object")
		return nil
	}
	r := &rule{}
	var operators []string
	hasVariable := false
	for _, key := range sortedKeys(m) {
		v, sub := m[key], field+"."+key
		switch key {
		case "Next":
			if !top {
				l.fail(state, sub, "only top-level Choice Rules have Next")
				continue
			}
			r.next = l.strValue(state, sub, v)
		case "Comment":
			l.strValue(state, sub, v)
		case "Variable":
			hasVariable = true
			r.variable, _ = l.pathValue(state, sub, v, true)
		case "And", "Or":
			operators = append(operators, key)
			items, ok := v.([]any)
			if !ok || len(items) == 0 {
				l.fail(state, sub, "must be a non-empty array of Choice Rules")
				continue
			}
			rules := make([]*rule, 0, len(items))
			for i, item := range items {
				if nested := l.rule(state, fmt.Sprintf("%s[%d]", sub, i), item, false); nested != nil {
					rules = append(rules, nested)
				}
			}
			if key == "And" {
				r.and = rules
			} else {
				r.or = rules
			}
		case "Not":
			operators = append(operators, key)
			r.not = l.rule(state, sub, v, false)
		default:
			kind, ok := operandKinds[key]
			if !ok {
				l.fail(state, sub, "comparison operator or field %q is not supported", key)
				continue
			}
			operators = append(operators, key)
			r.op = key
			r.operand = l.operand(state, sub, v, kind)
		}
	}
	switch {
	case len(operators) != 1:
		l.fail(state, field, "a Choice Rule needs exactly one of And, Or, Not or a comparison operator (found %d)", len(operators))
	case r.op != "" && !hasVariable:
		l.fail(state, field+".Variable", "is required with %s", r.op)
	case r.op == "" && hasVariable:
		l.fail(state, field+".Variable", "is not allowed with %s", operators[0])
	}
	if top && r.next == "" {
		l.fail(state, field+".Next", "is required")
	}
	return r
}

func (l *loader) operand(state, field string, v any, kind string) any {
	switch kind {
	case "boolean":
		if b, ok := v.(bool); ok {
			return b
		}
	case "string":
		if s, ok := v.(string); ok {
			return s
		}
	case "number":
		if n, ok := v.(json.Number); ok {
			if f, err := n.Float64(); err == nil {
				return f
			}
		}
	}
	l.fail(state, field, "must be a %s", kind)
	return nil
}

// eval evaluates the rule against the effective input. A Variable that
// selects nothing is a States.Runtime error, except for IsPresent; a value
// of the wrong type for the operator makes the comparison false.
func (r *rule) eval(input, contextObject any) (bool, *stateError) {
	switch {
	case r.and != nil:
		for _, n := range r.and {
			if ok, err := n.eval(input, contextObject); err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	case r.or != nil:
		for _, n := range r.or {
			if ok, err := n.eval(input, contextObject); err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	case r.not != nil:
		ok, err := r.not.eval(input, contextObject)
		return !ok && err == nil, err
	}
	v, present := r.variable.lookupIn(input, contextObject)
	if r.op == "IsPresent" {
		return present == r.operand.(bool), nil
	}
	if !present {
		return false, runtimeError("Invalid path '%s': The choice state's condition path references an invalid value.", r.variable.text)
	}
	switch r.op {
	case "IsNull":
		return (v == nil) == r.operand.(bool), nil
	case "IsBoolean":
		_, ok := v.(bool)
		return ok == r.operand.(bool), nil
	case "IsNumeric":
		_, ok := v.(json.Number)
		return ok == r.operand.(bool), nil
	case "IsString":
		_, ok := v.(string)
		return ok == r.operand.(bool), nil
	case "BooleanEquals":
		b, ok := v.(bool)
		return ok && b == r.operand.(bool), nil
	case "StringEquals":
		s, ok := v.(string)
		return ok && s == r.operand.(string), nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return false, nil
	}
	f, err := n.Float64()
	if err != nil {
		return false, nil
	}
	want := r.operand.(float64)
	switch r.op {
	case "NumericEquals":
		return f == want, nil
	case "NumericLessThan":
		return f < want, nil
	case "NumericGreaterThan":
		return f > want, nil
	case "NumericLessThanEquals":
		return f <= want, nil
	case "NumericGreaterThanEquals":
		return f >= want, nil
	}
	return false, runtimeError("operator %s is not supported", r.op)
}
