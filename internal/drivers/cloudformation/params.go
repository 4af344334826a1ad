package cloudformation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/serverless-osb/broker/internal/broker"
)

// DashboardOutput is the output that becomes an instance's dashboard URL;
// it is not a credential.
const DashboardOutput = "DashboardUrl"

// errNull marks a JSON null: the parameter is treated as not given.
var errNull = errors.New("null")

// parameterValue turns one JSON value into the string CloudFormation takes
// for a parameter declared as decl: a string as it is, a number or boolean
// as its JSON text, an array of scalars joined with commas for a list
// parameter, anything else as compact JSON text. Its errors never quote
// the value.
func parameterValue(raw json.RawMessage, decl Parameter) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", errors.New("has no value")
	}
	switch raw[0] {
	case 'n':
		return "", errNull
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", errors.New("is not a valid JSON string")
		}
		return s, nil
	case '[':
		if decl.IsList() {
			return joinList(raw)
		}
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", errors.New("is not valid JSON")
	}
	return b.String(), nil
}

// joinList joins an array of scalars for a CommaDelimitedList or List<…>
// parameter.
func joinList(raw json.RawMessage) (string, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return "", errors.New("is not a valid JSON array")
	}
	parts := make([]string, 0, len(elems))
	for i, e := range elems {
		e = bytes.TrimSpace(e)
		if len(e) == 0 || e[0] == '[' || e[0] == '{' || e[0] == 'n' {
			return "", fmt.Errorf("is a list parameter: element %d must be a string, number or boolean", i)
		}
		s, err := parameterValue(e, Parameter{Type: "String"})
		if err != nil {
			return "", fmt.Errorf("element %d %v", i, err)
		}
		if strings.Contains(s, ",") {
			return "", fmt.Errorf("is a comma-delimited list: element %d must not contain a comma", i)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ","), nil
}

// requestParameters converts an OSB parameters object to template
// parameter values. Users may set only the parameters accepted names (the
// plan's schema's properties, which Configure checked the template
// declares); the broker refuses any other at the request, so one here (a
// request accepted under an earlier catalog) fails the change rather than
// being dropped. A problem is a *broker.Failure that names the parameter,
// never its value.
func requestParameters(raw json.RawMessage, t *Template, accepted []string) (map[string]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, &broker.Failure{Description: "The parameters must be a JSON object."}
	}
	out := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(obj)) {
		decl, ok := t.Parameters[name]
		// The boundary is the deployment's: no schema may name it (Configure
		// refuses one that does), so a user's value is refused like any other.
		if !ok || driverSupplied(name) || !slices.Contains(accepted, name) {
			return nil, &broker.Failure{Description: fmt.Sprintf(
				"The parameter %s is not one the plan accepts (it accepts: %s); the plan changed since the request was accepted. Send the request again without it.",
				name, list(accepted))}
		}
		v, err := parameterValue(obj[name], decl)
		if errors.Is(err, errNull) {
			continue
		}
		if err != nil {
			return nil, &broker.Failure{Description: fmt.Sprintf("The parameter %s %v.", name, err)}
		}
		out[name] = v
	}
	return out, nil
}

// merge returns the union of layers, later ones winning, restricted to the
// parameters t declares.
func merge(t *Template, layers ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, l := range layers {
		for k, v := range l {
			if _, ok := t.Parameters[k]; ok {
				out[k] = v
			}
		}
	}
	return out
}

// createParameters lists values for CreateStack, sorted by name: a
// parameter without a value is left out, so its Default applies.
func createParameters(values map[string]string) []types.Parameter {
	var out []types.Parameter
	for _, k := range slices.Sorted(maps.Keys(values)) {
		out = append(out, types.Parameter{ParameterKey: aws.String(k), ParameterValue: aws.String(values[k])})
	}
	return out
}

// updateParameters lists values for UpdateStack: a declared parameter the
// update does not set keeps its previous value when the stack has one
// (otherwise CloudFormation would reset it to its Default, and a
// create-only parameter would replace the resource); one the stack does not
// have yet (a plan change to a template that declares more) gets its
// Default.
func updateParameters(t *Template, values map[string]string, previous []types.Parameter) []types.Parameter {
	had := map[string]bool{}
	for _, p := range previous {
		had[aws.ToString(p.ParameterKey)] = true
	}
	var out []types.Parameter
	for _, k := range slices.Sorted(maps.Keys(t.Parameters)) {
		switch v, ok := values[k]; {
		case ok:
			out = append(out, types.Parameter{ParameterKey: aws.String(k), ParameterValue: aws.String(v)})
		case had[k]:
			out = append(out, types.Parameter{ParameterKey: aws.String(k), UsePreviousValue: aws.Bool(true)})
		}
	}
	return out
}

// outputs reads a stack's outputs.
func outputs(s *types.Stack) map[string]string {
	out := map[string]string{}
	for _, o := range s.Outputs {
		out[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	return out
}

// credentials are a binding's credentials: the instance's outputs but the
// dashboard URL and those its template keeps private, then the binding
// stack's outputs, which win; names in snake_case.
func credentials(instance, binding map[string]string, private []string) broker.Credentials {
	c := broker.Credentials{}
	for _, k := range slices.Sorted(maps.Keys(instance)) {
		if k != DashboardOutput && !slices.Contains(private, k) {
			c[snakeCase(k)] = instance[k]
		}
	}
	for _, k := range slices.Sorted(maps.Keys(binding)) {
		c[snakeCase(k)] = binding[k]
	}
	return c
}

// snakeCase turns an output name from CamelCase into snake_case: a word
// starts at a capital after a lower-case letter or digit, and at the last
// capital of a run followed by a lower-case letter (AccessKeyId is
// access_key_id, SQSQueueUrl is sqs_queue_url, S3Bucket is s3_bucket).
func snakeCase(name string) string {
	rs := []rune(name)
	var b strings.Builder
	for i, r := range rs {
		if i > 0 && unicode.IsUpper(r) {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// decodeContext reads the parts of an OSB context object the tags use; a
// context that does not decode gives none.
func decodeContext(raw json.RawMessage) platformContext {
	var c platformContext
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &c) // tags are a courtesy: a context of another shape adds none
	}
	return c
}

// itoa is strconv.Itoa, for tokens.
func itoa(n int) string { return strconv.Itoa(n) }
