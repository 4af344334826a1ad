package cloudformation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/serverless-osb/broker/internal/cfnregistry"
)

// The second opinion on an update: what the two templates (the one the
// stack runs and the one the update moves it to) and their parameter
// values say it does to each resource that holds data, whatever the
// change set reports (moto never reports a replacement; CloudFormation
// reports Conditional for some properties). A resource the new template
// no longer makes, or makes with another type, is removed; one whose
// create-only or immutable property changes is replaced; one whose
// conditional property changes may be replaced.
//
// Values are compared after what can be worked out is: Refs to parameters
// (with the values each side gives), Fn::If on the conditions, Fn::Sub,
// Fn::Join, Fn::Select, Fn::Split and Fn::FindInMap of known values,
// AWS::NoValue. What
// cannot (a resource's Ref or GetAtt, a pseudo parameter, an import, a
// NoEcho parameter CloudFormation masks) stays as its expression, so two
// sides are equal only when they say the same thing: a changed expression
// counts as a changed value (conservative: an update may be refused that
// CloudFormation would carry out in place, never the other way round), and
// a resource referred to by a property that would itself be replaced
// changes that property too.

// templateSide is one side of an update: a template's document and the
// values of its parameters.
type templateSide struct {
	doc    map[string]any
	params map[string]any // a value, or an unknown (masked) one
	conds  map[string]any // each condition: true, false, or unknown
}

// unknown is a value the templates do not tell: kept as its expression.
type unknown struct{ expr any }

// replacementChange is one resource that holds data that the update would
// remove, replace or may replace.
type replacementChange struct {
	LogicalID, Type string
	// Removed: the new template no longer makes it (or makes it with
	// another type, NewType).
	Removed bool
	NewType string
	// Replaced and MayReplace are the property paths whose change
	// replaces it or may.
	Replaced, MayReplace []string
}

// templateReplacements compares old (with its parameters' values) and new
// (with the update's): the resources that hold data which the update would
// remove or replace, sorted by logical id. held says which of old's
// resources hold data; schemas are the types' (cfnregistry.Schemas).
func templateReplacements(old, new templateSide, schemas map[string]cfnregistry.Schema, held func(id, typ string) bool) []replacementChange {
	oldRes, newRes := old.resources(), new.resources()
	// replaced: every resource (data or not) that the update replaces, so
	// that a property referring to one changes too.
	replaced := map[string]bool{}
	var out []replacementChange
	for range 8 { // a chain of references is short; each pass may add one link
		out = out[:0]
		grew := false
		for _, id := range slices.Sorted(maps.Keys(oldRes)) {
			o := oldRes[id]
			if !old.exists(o) {
				continue
			}
			ch := replacementChange{LogicalID: id, Type: o.typ}
			n, ok := newRes[id]
			switch {
			case !ok || !new.exists(n):
				ch.Removed = true
			case n.typ != o.typ:
				ch.Removed, ch.NewType = true, n.typ
			default:
				s := schemas[o.typ]
				for _, path := range s.ReplacingPaths() {
					a := old.resolve(valueAt(o.props, path), nil) // the resources as they are
					b := new.resolve(valueAt(n.props, path), replaced)
					if sameValue(a, b) {
						continue
					}
					if s.UpdateOf(path) == cfnregistry.UpdateReplaces {
						ch.Replaced = append(ch.Replaced, path)
					} else {
						ch.MayReplace = append(ch.MayReplace, path)
					}
				}
			}
			if !ch.Removed && len(ch.Replaced)+len(ch.MayReplace) == 0 {
				continue
			}
			if !replaced[id] {
				replaced[id], grew = true, true
			}
			if held(id, o.typ) {
				out = append(out, ch)
			}
		}
		if !grew {
			break
		}
	}
	return out
}

type templateResource struct {
	typ       string
	props     map[string]any
	condition string
}

func (s templateSide) resources() map[string]templateResource {
	out := map[string]templateResource{}
	res, _ := s.doc["Resources"].(map[string]any)
	for id, v := range res {
		decl, _ := v.(map[string]any)
		typ, _ := decl["Type"].(string)
		props, _ := decl["Properties"].(map[string]any)
		cond, _ := decl["Condition"].(string)
		out[id] = templateResource{typ: typ, props: props, condition: cond}
	}
	return out
}

// exists says whether the side makes r: its condition holds, or cannot be
// told (then it may).
func (s templateSide) exists(r templateResource) bool {
	if r.condition == "" {
		return true
	}
	return s.conds[r.condition] != false
}

// valueAt is the value at path in props: names joined by "/", a list's
// items each followed (a list of what they hold); nil where there is none.
func valueAt(props map[string]any, path string) any {
	var at any = props
	for _, name := range strings.Split(path, "/") {
		at = child(at, name)
	}
	return at
}

func child(v any, name string) any {
	switch v := v.(type) {
	case map[string]any:
		if fn, args, ok := intrinsic(v); ok && fn == "Fn::If" {
			// Follow each branch, kept under the condition.
			if a, ok := args.([]any); ok && len(a) == 3 {
				return map[string]any{fn: []any{a[0], child(a[1], name), child(a[2], name)}}
			}
		}
		if _, _, ok := intrinsic(v); ok {
			return map[string]any{"Fn::GetProperty": []any{v, name}} // not worked out: kept as an expression
		}
		return v[name]
	case []any:
		out := make([]any, 0, len(v))
		for _, e := range v {
			out = append(out, child(e, name))
		}
		return out
	}
	return nil
}

// intrinsic says whether m is an intrinsic function: one key, Ref, Condition
// or Fn::*.
func intrinsic(m map[string]any) (fn string, args any, ok bool) {
	if len(m) != 1 {
		return "", nil, false
	}
	for k, v := range m {
		if k == "Ref" || k == "Condition" || strings.HasPrefix(k, "Fn::") {
			return k, v, true
		}
	}
	return "", nil, false
}

// noValue is AWS::NoValue: the property is not set.
type noValue struct{}

// resolve works out v as far as the side tells: replaced are the resources
// the update replaces, whose Ref and GetAtt change.
func (s templateSide) resolve(v any, replaced map[string]bool) any {
	switch v := v.(type) {
	case map[string]any:
		fn, args, ok := intrinsic(v)
		if !ok {
			out := map[string]any{}
			for k, e := range v {
				if r := s.resolve(e, replaced); r != (noValue{}) {
					out[k] = r
				}
			}
			return out
		}
		return s.call(fn, args, replaced)
	case []any:
		out := make([]any, 0, len(v))
		for _, e := range v {
			if r := s.resolve(e, replaced); r != (noValue{}) {
				out = append(out, r)
			}
		}
		return out
	case nil:
		return noValue{}
	}
	return scalar(v)
}

// scalar is a template's scalar as CloudFormation passes it on: a string.
func scalar(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

func (s templateSide) call(fn string, args any, replaced map[string]bool) any {
	switch fn {
	case "Ref":
		name, _ := args.(string)
		if name == "AWS::NoValue" {
			return noValue{}
		}
		if v, ok := s.params[name]; ok {
			return v
		}
		if replaced[name] {
			return unknown{expr: "a new " + name}
		}
		return unknown{expr: map[string]any{"Ref": name}} // a resource or a pseudo parameter: the same on both sides
	case "Fn::GetAtt":
		target := ""
		switch a := args.(type) {
		case []any:
			if len(a) > 0 {
				target, _ = a[0].(string)
			}
		case string:
			target, _, _ = strings.Cut(a, ".")
		}
		if replaced[target] {
			return unknown{expr: "a new " + target}
		}
		return unknown{expr: map[string]any{fn: args}}
	case "Fn::If":
		a, _ := args.([]any)
		if len(a) != 3 {
			return unknown{expr: map[string]any{fn: args}}
		}
		name, _ := a[0].(string)
		switch s.conds[name] {
		case true:
			return s.resolve(a[1], replaced)
		case false:
			return s.resolve(a[2], replaced)
		}
		return unknown{expr: map[string]any{fn: []any{name, s.resolve(a[1], replaced), s.resolve(a[2], replaced)}}}
	case "Fn::Sub":
		return s.sub(args, replaced)
	case "Fn::Join":
		a, _ := args.([]any)
		if len(a) == 2 {
			sep, sok := s.resolve(a[0], replaced).(string)
			items, lok := s.resolve(a[1], replaced).([]any)
			if sok && lok {
				var parts []string
				for _, it := range items {
					str, ok := it.(string)
					if !ok {
						return unknown{expr: map[string]any{fn: []any{sep, items}}}
					}
					parts = append(parts, str)
				}
				return strings.Join(parts, sep)
			}
		}
	case "Fn::Split":
		a, _ := args.([]any)
		if len(a) == 2 {
			sep, sok := s.resolve(a[0], replaced).(string)
			str, vok := s.resolve(a[1], replaced).(string)
			if sok && vok {
				var out []any
				for _, p := range strings.Split(str, sep) {
					out = append(out, p)
				}
				return out
			}
		}
	case "Fn::FindInMap":
		a, _ := args.([]any)
		if len(a) == 3 {
			mappings, _ := s.doc["Mappings"].(map[string]any)
			name, nok := s.resolve(a[0], replaced).(string)
			top, tok := s.resolve(a[1], replaced).(string)
			second, sok := s.resolve(a[2], replaced).(string)
			if m, _ := mappings[name].(map[string]any); nok && tok && sok && m != nil {
				if inner, _ := m[top].(map[string]any); inner != nil {
					if v, ok := inner[second]; ok {
						return s.resolve(v, replaced)
					}
				}
			}
		}
	case "Fn::Select":
		a, _ := args.([]any)
		if len(a) == 2 {
			i, iok := s.resolve(a[0], replaced).(string)
			items, lok := s.resolve(a[1], replaced).([]any)
			if n, err := strconv.Atoi(i); iok && lok && err == nil && n >= 0 && n < len(items) {
				return items[n]
			}
		}
	}
	return unknown{expr: map[string]any{fn: s.resolve(args, replaced)}}
}

// sub works out Fn::Sub: a string, or a string and its own variables.
func (s templateSide) sub(args any, replaced map[string]bool) any {
	text, vars := "", map[string]any{}
	switch a := args.(type) {
	case string:
		text = a
	case []any:
		if len(a) != 2 {
			return unknown{expr: map[string]any{"Fn::Sub": args}}
		}
		text, _ = a[0].(string)
		m, _ := a[1].(map[string]any)
		for k, v := range m {
			vars[k] = s.resolve(v, replaced)
		}
	default:
		return unknown{expr: map[string]any{"Fn::Sub": args}}
	}
	var b strings.Builder
	known := true
	rest := text
	for {
		i := strings.Index(rest, "${")
		if i < 0 {
			b.WriteString(rest)
			break
		}
		j := strings.Index(rest[i:], "}")
		if j < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		name := rest[i+2 : i+j]
		rest = rest[i+j+1:]
		if strings.HasPrefix(name, "!") { // ${!Literal}
			b.WriteString("${" + name[1:] + "}")
			continue
		}
		var v any
		if x, ok := vars[name]; ok {
			v = x
		} else if res, attr, isAtt := strings.Cut(name, "."); isAtt {
			v = s.call("Fn::GetAtt", []any{res, attr}, replaced)
		} else {
			v = s.call("Ref", name, replaced)
		}
		str, ok := v.(string)
		if !ok {
			known = false
			str = fmt.Sprintf("${%v}", describe(v))
		}
		b.WriteString(str)
	}
	if !known {
		return unknown{expr: map[string]any{"Fn::Sub": b.String()}}
	}
	return b.String()
}

func describe(v any) string {
	if u, ok := v.(unknown); ok {
		v = u.expr
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// sameValue says whether two resolved values are the same: equal, with
// unknowns equal only to the same expression.
func sameValue(a, b any) bool {
	if _, ok := a.(noValue); ok {
		a = nil
	}
	if _, ok := b.(noValue); ok {
		b = nil
	}
	return reflect.DeepEqual(a, b)
}

// newSide reads a side of an update: the template's document (body),
// the values its parameters take (values; a parameter without one takes
// its Default), and its conditions worked out from them.
func newSide(body string, values map[string]any) (templateSide, error) {
	doc, err := templateDocument([]byte(body))
	if err != nil {
		return templateSide{}, err
	}
	s := templateSide{doc: doc, params: map[string]any{}, conds: map[string]any{}}
	declared, _ := doc["Parameters"].(map[string]any)
	for name, d := range declared {
		decl, _ := d.(map[string]any)
		if v, ok := values[name]; ok {
			s.params[name] = v
		} else if def, ok := decl["Default"]; ok {
			s.params[name] = scalar(def)
		} else {
			s.params[name] = unknown{expr: map[string]any{"Ref": name}}
		}
		if typ, _ := decl["Type"].(string); typ == "CommaDelimitedList" || strings.HasPrefix(typ, "List<") {
			if str, ok := s.params[name].(string); ok {
				var items []any
				for _, p := range strings.Split(str, ",") {
					items = append(items, strings.TrimSpace(p))
				}
				s.params[name] = items
			}
		}
	}
	conds, _ := doc["Conditions"].(map[string]any)
	var eval func(v any, depth int) any
	eval = func(v any, depth int) any {
		m, ok := v.(map[string]any)
		if !ok || depth > 16 {
			return nil
		}
		fn, args, ok := intrinsic(m)
		if !ok {
			return nil
		}
		a, _ := args.([]any)
		switch fn {
		case "Condition":
			name, _ := args.(string)
			return eval(conds[name], depth+1)
		case "Fn::Equals":
			if len(a) != 2 {
				return nil
			}
			x, y := s.resolve(a[0], nil), s.resolve(a[1], nil)
			if isUnknown(x) || isUnknown(y) {
				return nil
			}
			return reflect.DeepEqual(x, y)
		case "Fn::Not":
			if len(a) != 1 {
				return nil
			}
			if b, ok := eval(a[0], depth+1).(bool); ok {
				return !b
			}
			return nil
		case "Fn::And", "Fn::Or":
			all, unknownSeen := fn == "Fn::And", false
			for _, e := range a {
				b, ok := eval(e, depth+1).(bool)
				switch {
				case !ok:
					unknownSeen = true
				case fn == "Fn::And" && !b:
					return false
				case fn == "Fn::Or" && b:
					return true
				}
			}
			if unknownSeen {
				return nil
			}
			return all
		}
		return nil
	}
	for name, c := range conds {
		s.conds[name] = eval(c, 0)
	}
	return s, nil
}

func isUnknown(v any) bool {
	switch v := v.(type) {
	case unknown:
		return true
	case []any:
		return slices.ContainsFunc(v, isUnknown)
	case map[string]any:
		for _, e := range v {
			if isUnknown(e) {
				return true
			}
		}
	}
	return false
}

// templateDocument reads a template as CloudFormation does: JSON, or YAML
// whose short-form tags (!Ref X, !GetAtt A.B, !If [...], !Sub ...) are
// their long forms ({"Ref": "X"}, {"Fn::GetAtt": ["A", "B"]}, ...).
func templateDocument(body []byte) (map[string]any, error) {
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '{' {
		var doc map[string]any
		if err := json.Unmarshal(trimmed, &doc); err != nil {
			return nil, fmt.Errorf("not valid JSON: %v", err)
		}
		return doc, nil
	}
	return yamlDocument(body)
}
