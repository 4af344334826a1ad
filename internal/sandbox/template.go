package sandbox

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Template is a synthesized CloudFormation template, as JSON.
type Template struct {
	Parameters map[string]struct {
		Type    string `json:"Type"`
		Default any    `json:"Default"`
	} `json:"Parameters"`
	Mappings   map[string]map[string]map[string]any `json:"Mappings"`
	Conditions map[string]any                       `json:"Conditions"`
	Resources  map[string]Resource                  `json:"Resources"`
	Outputs    map[string]struct {
		Value any `json:"Value"`
	} `json:"Outputs"`
}

// Resource is one of a template's resources.
type Resource struct {
	Type       string         `json:"Type"`
	Properties map[string]any `json:"Properties"`
	Metadata   map[string]any `json:"Metadata"`
	DependsOn  any            `json:"DependsOn"`
	Condition  string         `json:"Condition"`
}

// ReadTemplate reads a template file.
func ReadTemplate(path string) (*Template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var t Template
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("template %s: %w (a synthesized template is JSON)", path, err)
	}
	if len(t.Resources) == 0 {
		return nil, fmt.Errorf("template %s: no Resources", path)
	}
	return &t, nil
}

// stack resolves a template's intrinsic functions: its pseudo parameters,
// its parameters' defaults, its conditions, and each resource's Ref and
// Fn::GetAtt values once the sandbox has made (or stood in for) it.
type stack struct {
	t                 *Template
	name, id          string
	region, account   string
	partition, suffix string
	refs              map[string]string
	attrs             map[string]map[string]string
	conditions        map[string]bool
	// standIns are the resources the sandbox does not make: any attribute
	// of theirs resolves, to a value that names it.
	standIns map[string]bool
}

// noValue is AWS::NoValue: the property it is the value of is left out.
type noValue struct{}

func newStack(t *Template, name, region, account string) (*stack, error) {
	s := &stack{t: t, name: name, region: region, account: account, partition: "aws", suffix: "amazonaws.com",
		id:    fmt.Sprintf("arn:aws:cloudformation:%s:%s:stack/%s/8d3f2a60-0000-4000-8000-5a4db0c5e001", region, account, name),
		refs:  map[string]string{},
		attrs: map[string]map[string]string{}, conditions: map[string]bool{}, standIns: map[string]bool{}}
	for name, p := range t.Parameters {
		if p.Default == nil {
			return nil, fmt.Errorf("parameter %s has no default: the sandbox deploys the template as synthesized", name)
		}
		s.refs[name] = fmt.Sprint(p.Default)
	}
	for _, name := range slices.Sorted(maps.Keys(t.Conditions)) {
		if _, err := s.condition(name, nil); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *stack) condition(name string, seen []string) (bool, error) {
	if v, ok := s.conditions[name]; ok {
		return v, nil
	}
	if slices.Contains(seen, name) {
		return false, fmt.Errorf("condition %s refers to itself", name)
	}
	def, ok := s.t.Conditions[name]
	if !ok {
		return false, fmt.Errorf("no condition %s", name)
	}
	v, err := s.evalCondition(def, append(seen, name))
	if err != nil {
		return false, fmt.Errorf("condition %s: %w", name, err)
	}
	s.conditions[name] = v
	return v, nil
}

func (s *stack) evalCondition(v any, seen []string) (bool, error) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return false, fmt.Errorf("%v is not a condition function", v)
	}
	for fn, arg := range m {
		switch fn {
		case "Condition":
			return s.condition(fmt.Sprint(arg), seen)
		case "Fn::Equals":
			args, ok := arg.([]any)
			if !ok || len(args) != 2 {
				return false, errors.New("Fn::Equals takes two values")
			}
			a, err := s.eval(args[0])
			if err != nil {
				return false, err
			}
			b, err := s.eval(args[1])
			if err != nil {
				return false, err
			}
			return fmt.Sprint(a) == fmt.Sprint(b), nil
		case "Fn::Not", "Fn::And", "Fn::Or":
			args, ok := arg.([]any)
			if !ok || len(args) == 0 {
				return false, fmt.Errorf("%s takes a list of conditions", fn)
			}
			var vals []bool
			for _, a := range args {
				b, err := s.evalCondition(a, seen)
				if err != nil {
					return false, err
				}
				vals = append(vals, b)
			}
			switch fn {
			case "Fn::Not":
				return !vals[0], nil
			case "Fn::And":
				return !slices.Contains(vals, false), nil
			default:
				return slices.Contains(vals, true), nil
			}
		}
		return false, fmt.Errorf("%s is not a condition function", fn)
	}
	return false, nil
}

func (s *stack) pseudo(name string) (string, bool) {
	switch name {
	case "AWS::Region":
		return s.region, true
	case "AWS::AccountId":
		return s.account, true
	case "AWS::Partition":
		return s.partition, true
	case "AWS::URLSuffix":
		return s.suffix, true
	case "AWS::StackName":
		return s.name, true
	case "AWS::StackId":
		return s.id, true
	case "AWS::NotificationARNs":
		return "", true
	}
	return "", false
}

func (s *stack) ref(name string) (any, error) {
	if name == "AWS::NoValue" {
		return noValue{}, nil
	}
	if v, ok := s.pseudo(name); ok {
		return v, nil
	}
	if v, ok := s.refs[name]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("no parameter or resource %s to Ref (or not made yet)", name)
}

func (s *stack) getAtt(name, attr string) (string, error) {
	if v, ok := s.attrs[name][attr]; ok {
		return v, nil
	}
	if _, ok := s.t.Resources[name]; !ok {
		return "", fmt.Errorf("Fn::GetAtt %s.%s: no such resource", name, attr)
	}
	if s.standIns[name] {
		return fmt.Sprintf("sandbox-%s-%s", name, attr), nil
	}
	return "", fmt.Errorf("Fn::GetAtt %s.%s: the sandbox knows no attribute %s of %s", name, attr, attr, s.t.Resources[name].Type)
}

// eval resolves every intrinsic function in v.
func (s *stack) eval(v any) (any, error) {
	switch v := v.(type) {
	case []any:
		out := make([]any, 0, len(v))
		for _, e := range v {
			r, err := s.eval(e)
			if err != nil {
				return nil, err
			}
			if _, ok := r.(noValue); !ok {
				out = append(out, r)
			}
		}
		return out, nil
	case map[string]any:
		if len(v) == 1 {
			for k, arg := range v {
				if k == "Ref" || strings.HasPrefix(k, "Fn::") {
					return s.function(k, arg)
				}
			}
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			r, err := s.eval(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			if _, ok := r.(noValue); !ok {
				out[k] = r
			}
		}
		return out, nil
	}
	return v, nil
}

func (s *stack) evalString(v any) (string, error) {
	r, err := s.eval(v)
	if err != nil {
		return "", err
	}
	switch r := r.(type) {
	case string:
		return r, nil
	case float64, bool, json.Number:
		return fmt.Sprint(r), nil
	}
	return "", fmt.Errorf("%v is not a string", r)
}

func (s *stack) function(fn string, arg any) (any, error) {
	args, _ := arg.([]any)
	switch fn {
	case "Ref":
		return s.ref(fmt.Sprint(arg))
	case "Fn::GetAtt":
		var name, attr string
		if str, ok := arg.(string); ok {
			name, attr, _ = strings.Cut(str, ".")
		} else if len(args) == 2 {
			name = fmt.Sprint(args[0])
			a, err := s.evalString(args[1])
			if err != nil {
				return nil, err
			}
			attr = a
		} else {
			return nil, fmt.Errorf("Fn::GetAtt %v: want [resource, attribute]", arg)
		}
		return s.getAtt(name, attr)
	case "Fn::Join":
		if len(args) != 2 {
			return nil, errors.New("Fn::Join takes a delimiter and a list")
		}
		list, err := s.eval(args[1])
		if err != nil {
			return nil, err
		}
		items, ok := list.([]any)
		if !ok {
			return nil, errors.New("Fn::Join: the second value is not a list")
		}
		var parts []string
		for _, it := range items {
			parts = append(parts, fmt.Sprint(it))
		}
		return strings.Join(parts, fmt.Sprint(args[0])), nil
	case "Fn::Sub":
		text, vars := "", map[string]any{}
		if str, ok := arg.(string); ok {
			text = str
		} else if len(args) == 2 {
			text = fmt.Sprint(args[0])
			m, _ := args[1].(map[string]any)
			for k, e := range m {
				r, err := s.evalString(e)
				if err != nil {
					return nil, err
				}
				vars[k] = r
			}
		} else {
			return nil, errors.New("Fn::Sub takes a string, or a string and a map")
		}
		return s.sub(text, vars)
	case "Fn::Select":
		if len(args) != 2 {
			return nil, errors.New("Fn::Select takes an index and a list")
		}
		i, err := s.evalString(args[0])
		if err != nil {
			return nil, err
		}
		list, err := s.eval(args[1])
		if err != nil {
			return nil, err
		}
		items, _ := list.([]any)
		var n int
		if _, err := fmt.Sscan(i, &n); err != nil || n < 0 || n >= len(items) {
			return nil, fmt.Errorf("Fn::Select: index %s out of %d values", i, len(items))
		}
		return items[n], nil
	case "Fn::Split":
		if len(args) != 2 {
			return nil, errors.New("Fn::Split takes a delimiter and a string")
		}
		str, err := s.evalString(args[1])
		if err != nil {
			return nil, err
		}
		var out []any
		for _, p := range strings.Split(str, fmt.Sprint(args[0])) {
			out = append(out, p)
		}
		return out, nil
	case "Fn::If":
		if len(args) != 3 {
			return nil, errors.New("Fn::If takes a condition and two values")
		}
		c, err := s.condition(fmt.Sprint(args[0]), nil)
		if err != nil {
			return nil, err
		}
		if c {
			return s.eval(args[1])
		}
		return s.eval(args[2])
	case "Fn::Base64":
		str, err := s.evalString(arg)
		if err != nil {
			return nil, err
		}
		return base64.StdEncoding.EncodeToString([]byte(str)), nil
	case "Fn::GetAZs":
		return []any{s.region + "a", s.region + "b", s.region + "c"}, nil
	case "Fn::FindInMap":
		if len(args) != 3 {
			return nil, errors.New("Fn::FindInMap takes a map, a key and a second key")
		}
		var keys []string
		for _, a := range args {
			k, err := s.evalString(a)
			if err != nil {
				return nil, err
			}
			keys = append(keys, k)
		}
		v, ok := s.t.Mappings[keys[0]][keys[1]][keys[2]]
		if !ok {
			return nil, fmt.Errorf("Fn::FindInMap %v: no such value", keys)
		}
		return v, nil
	}
	return nil, fmt.Errorf("%s: the sandbox does not resolve this function", fn)
}

var subVar = regexp.MustCompile(`\$\{([^}!][^}]*)\}`)

func (s *stack) sub(text string, vars map[string]any) (string, error) {
	var errs []error
	out := subVar.ReplaceAllStringFunc(text, func(m string) string {
		name := m[2 : len(m)-1]
		if v, ok := vars[name]; ok {
			return fmt.Sprint(v)
		}
		if res, attr, ok := strings.Cut(name, "."); ok {
			v, err := s.getAtt(res, attr)
			errs = append(errs, err)
			return v
		}
		v, err := s.ref(name)
		errs = append(errs, err)
		return fmt.Sprint(v)
	})
	// ${!Literal} writes ${Literal}.
	out = strings.ReplaceAll(out, "${!", "${")
	return out, errors.Join(errs...)
}

// dependencies are the resources r refers to: Ref, Fn::GetAtt, Fn::Sub's
// ${...}, and DependsOn.
func dependencies(r Resource, resources map[string]Resource) []string {
	deps := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				switch k {
				case "Ref":
					deps[fmt.Sprint(e)] = true
				case "Fn::GetAtt":
					if str, ok := e.(string); ok {
						name, _, _ := strings.Cut(str, ".")
						deps[name] = true
					} else if l, ok := e.([]any); ok && len(l) > 0 {
						deps[fmt.Sprint(l[0])] = true
					}
				case "Fn::Sub":
					text := e
					if l, ok := e.([]any); ok && len(l) > 0 {
						text = l[0]
					}
					if str, ok := text.(string); ok {
						for _, m := range subVar.FindAllStringSubmatch(str, -1) {
							name, _, _ := strings.Cut(m[1], ".")
							deps[name] = true
						}
					}
				}
				walk(e)
			}
		}
	}
	walk(r.Properties)
	switch d := r.DependsOn.(type) {
	case string:
		deps[d] = true
	case []any:
		for _, e := range d {
			deps[fmt.Sprint(e)] = true
		}
	}
	var out []string
	for name := range deps {
		if _, ok := resources[name]; ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// order is the template's resources, each after those it refers to.
func order(resources map[string]Resource) ([]string, error) {
	var out []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string, path []string) error
	visit = func(name string, path []string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("resources refer to each other: %s", strings.Join(append(path, name), " → "))
		case 2:
			return nil
		}
		state[name] = 1
		for _, d := range dependencies(resources[name], resources) {
			if err := visit(d, append(path, name)); err != nil {
				return err
			}
		}
		state[name] = 2
		out = append(out, name)
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(resources)) {
		if err := visit(name, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}
