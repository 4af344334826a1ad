package cloudformation

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// templateValues evaluates parts of a real template as CloudFormation
// would, for the tests that read what a template makes (its trust policy,
// its outputs) rather than trust a copy of it: Ref (a parameter or a
// pseudo parameter), Fn::Sub and Fn::GetAtt, short form or long, with the
// values the test gives for the parameters and for the resources'
// attributes. Any other intrinsic function fails the test: teach it here
// before a template relies on it.
type templateValues struct {
	// Parameters, the pseudo parameters (AWS::Region...) among them.
	Parameters map[string]string
	// Attributes are resources' attributes by "LogicalId.Attribute".
	Attributes map[string]string
	// Conditions are the template's conditions' values, for Fn::If
	// (conditions reads them from a template).
	Conditions map[string]bool
}

// readTemplateNode reads a template file as YAML nodes, keeping the tags
// of the short forms (!Ref, !Sub, !GetAtt).
func readTemplateNode(t *testing.T, path string) *yaml.Node {
	t.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Content[0]
}

// nodeAt is the value of keys, one in another, in mapping node n, or nil.
func nodeAt(n *yaml.Node, keys ...string) *yaml.Node {
	for _, key := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

var subVariable = regexp.MustCompile(`\$\{([^}!][^}]*)\}`)

// eval is n's value: strings, lists and maps of them.
func (v templateValues) eval(n *yaml.Node) (any, error) {
	switch n.Tag {
	case "!Ref":
		return v.ref(n.Value)
	case "!Sub":
		if n.Kind == yaml.SequenceNode && len(n.Content) == 2 {
			return v.subWith(n.Content[0].Value, n.Content[1])
		}
		if n.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: !Sub with neither a string nor a string and its variables", n.Line)
		}
		return v.sub(n.Value)
	case "!GetAtt":
		return v.attribute(n.Value)
	case "!If", "!Join", "!Select", "!Split", "!Equals", "!Not", "!And", "!Or":
		return v.function(n)
	}
	if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") {
		return nil, fmt.Errorf("line %d: %s is not an intrinsic function these tests evaluate", n.Line, n.Tag)
	}
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Value, nil
	case yaml.SequenceNode:
		out := []any{}
		for _, c := range n.Content {
			e, err := v.eval(c)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	case yaml.MappingNode:
		if len(n.Content) == 2 {
			arg := n.Content[1]
			switch n.Content[0].Value {
			case "Ref":
				return v.ref(arg.Value)
			case "Condition": // in Fn::And and the like
				c, ok := v.Conditions[arg.Value]
				if !ok {
					return nil, fmt.Errorf("line %d: condition %s has no value", n.Line, arg.Value)
				}
				return c, nil
			case "Fn::Sub":
				return v.sub(arg.Value)
			case "Fn::GetAtt":
				if arg.Kind == yaml.SequenceNode && len(arg.Content) == 2 {
					return v.attribute(arg.Content[0].Value + "." + arg.Content[1].Value)
				}
				return v.attribute(arg.Value)
			}
			if strings.HasPrefix(n.Content[0].Value, "Fn::") {
				return nil, fmt.Errorf("line %d: %s is not an intrinsic function these tests evaluate", n.Line, n.Content[0].Value)
			}
		}
		out := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			e, err := v.eval(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			out[n.Content[i].Value] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("line %d: a YAML node of kind %d", n.Line, n.Kind)
}

// function is one of the functions on a list of arguments: Fn::If (by
// v.Conditions), Fn::Join, Fn::Select, Fn::Split, and the conditions'
// Fn::Equals, Fn::Not, Fn::And and Fn::Or (a bool).
func (v templateValues) function(n *yaml.Node) (any, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("line %d: %s without a list of arguments", n.Line, n.Tag)
	}
	if n.Tag == "!If" {
		if len(n.Content) != 3 {
			return nil, fmt.Errorf("line %d: !If with %d arguments", n.Line, len(n.Content))
		}
		c, ok := v.Conditions[n.Content[0].Value]
		if !ok {
			return nil, fmt.Errorf("line %d: !If on condition %s, which has no value", n.Line, n.Content[0].Value)
		}
		if c {
			return v.eval(n.Content[1])
		}
		return v.eval(n.Content[2])
	}
	var args []any
	for _, c := range n.Content {
		a, err := v.eval(c)
		if err != nil {
			return nil, err
		}
		args = append(args, a)
	}
	str := func(a any) (string, bool) { s, ok := a.(string); return s, ok }
	switch n.Tag {
	case "!Join":
		sep, ok := str(args[0])
		list, isList := args[1].([]any)
		if len(args) != 2 || !ok || !isList {
			return nil, fmt.Errorf("line %d: !Join wants a separator and a list", n.Line)
		}
		var parts []string
		for _, p := range list {
			s, ok := str(p)
			if !ok {
				return nil, fmt.Errorf("line %d: !Join of a %T", n.Line, p)
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, sep), nil
	case "!Select":
		i, err := strconv.Atoi(fmt.Sprint(args[0]))
		list, isList := args[1].([]any)
		if len(args) != 2 || err != nil || !isList || i < 0 || i >= len(list) {
			return nil, fmt.Errorf("line %d: !Select %v of %v", n.Line, args[0], args[1])
		}
		return list[i], nil
	case "!Split":
		sep, ok1 := str(args[0])
		s, ok2 := str(args[1])
		if len(args) != 2 || !ok1 || !ok2 {
			return nil, fmt.Errorf("line %d: !Split wants a separator and a string", n.Line)
		}
		var out []any
		for _, part := range strings.Split(s, sep) {
			out = append(out, part)
		}
		return out, nil
	case "!Equals":
		if len(args) != 2 {
			return nil, fmt.Errorf("line %d: !Equals with %d arguments", n.Line, len(args))
		}
		return fmt.Sprint(args[0]) == fmt.Sprint(args[1]), nil
	case "!Not":
		b, ok := args[0].(bool)
		if len(args) != 1 || !ok {
			return nil, fmt.Errorf("line %d: !Not of %v", n.Line, args)
		}
		return !b, nil
	case "!And", "!Or":
		all, any := true, false
		for _, a := range args {
			b, ok := a.(bool)
			if !ok {
				return nil, fmt.Errorf("line %d: %s of %v", n.Line, n.Tag, a)
			}
			all, any = all && b, any || b
		}
		if n.Tag == "!And" {
			return all, nil
		}
		return any, nil
	}
	return nil, fmt.Errorf("line %d: %s", n.Line, n.Tag)
}

// conditions evaluates the template's Conditions (in the order written,
// each from the parameters) into v.Conditions.
func (v *templateValues) conditions(t *testing.T, doc *yaml.Node) {
	t.Helper()
	v.Conditions = map[string]bool{}
	section := nodeAt(doc, "Conditions")
	if section == nil {
		return
	}
	for i := 0; i+1 < len(section.Content); i += 2 {
		c, err := v.eval(section.Content[i+1])
		if err != nil {
			t.Fatalf("condition %s: %v", section.Content[i].Value, err)
		}
		b, ok := c.(bool)
		if !ok {
			t.Fatalf("condition %s is %v", section.Content[i].Value, c)
		}
		v.Conditions[section.Content[i].Value] = b
	}
}

// subWith is Fn::Sub with its own variables, evaluated, besides the
// parameters.
func (v templateValues) subWith(s string, vars *yaml.Node) (string, error) {
	w := templateValues{Parameters: maps.Clone(v.Parameters), Attributes: v.Attributes, Conditions: v.Conditions}
	if w.Parameters == nil {
		w.Parameters = map[string]string{}
	}
	for i := 0; i+1 < len(vars.Content); i += 2 {
		value, err := v.eval(vars.Content[i+1])
		if err != nil {
			return "", err
		}
		str, ok := value.(string)
		if !ok {
			return "", fmt.Errorf("line %d: !Sub variable %s is %T", vars.Line, vars.Content[i].Value, value)
		}
		w.Parameters[vars.Content[i].Value] = str
	}
	return w.sub(s)
}

func (v templateValues) ref(name string) (string, error) {
	if p, ok := v.Parameters[name]; ok {
		return p, nil
	}
	return "", fmt.Errorf("Ref %s: no value given for it", name)
}

func (v templateValues) attribute(name string) (string, error) {
	if a, ok := v.Attributes[name]; ok {
		return a, nil
	}
	return "", fmt.Errorf("GetAtt %s: no value given for it", name)
}

// sub is Fn::Sub: ${Name} is a parameter's value, ${Resource.Attribute}
// an attribute's; a $ without a brace stays as it is.
func (v templateValues) sub(s string) (string, error) {
	var err error
	out := subVariable.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		var value string
		var e error
		if strings.Contains(name, ".") {
			value, e = v.attribute(name)
		} else {
			value, e = v.ref(name)
		}
		if e != nil && err == nil {
			err = e
		}
		return value
	})
	return out, err
}

// outputs are the template's outputs as CloudFormation would set them
// (no output here carries a Condition).
func (v templateValues) outputs(t *testing.T, doc *yaml.Node) map[string]string {
	t.Helper()
	section := nodeAt(doc, "Outputs")
	if section == nil {
		t.Fatal("the template has no Outputs")
	}
	out := map[string]string{}
	for i := 0; i+1 < len(section.Content); i += 2 {
		name, decl := section.Content[i].Value, section.Content[i+1]
		if nodeAt(decl, "Condition") != nil {
			t.Fatalf("output %s has a Condition, which these tests do not evaluate", name)
		}
		value, err := v.eval(nodeAt(decl, "Value"))
		if err != nil {
			t.Fatalf("output %s: %v", name, err)
		}
		s, ok := value.(string)
		if !ok {
			t.Fatalf("output %s is %T, not a string", name, value)
		}
		out[name] = s
	}
	return out
}
