package cloudformation

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/serverless-osb/broker/internal/broker"
)

// defaultChange is a parameter an upgrade moves from the default of the
// template the stack runs to the new template's.
type defaultChange struct{ From, To string }

// newDefaults are the parameters that an update moving the instance's stack
// to template t sets to t's Default, where it differs from the value the
// stack has: those that no one set, the stack having the Default of the
// template it runs (read from CloudFormation). What someone set keeps its
// value: a parameter of the instance's requests (its stored parameters and
// the update's), the plan's fixed values and the deployment's (values), and
// any value other than the old Default (set by a request whose parameters
// a later update replaced, or fixed by an older plan). A user who set the
// old Default itself, in a request since replaced, gets the new one.
func (d *Driver) newDefaults(ctx context.Context, c broker.Change, t *Template, values map[string]string, running *running) (map[string]defaultChange, error) {
	stack := running.stack
	set := map[string]bool{}
	for k := range values {
		set[k] = true
	}
	raw := []json.RawMessage{c.Instance.Parameters}
	if c.Operation.Target != nil {
		raw = append(raw, c.Operation.Target.Parameters)
	}
	for _, r := range raw {
		var obj map[string]json.RawMessage
		if len(r) > 0 && json.Unmarshal(r, &obj) == nil {
			for k := range obj {
				set[k] = true
			}
		}
	}
	candidates := map[string]string{}
	for _, p := range stack.Parameters {
		k := aws.ToString(p.ParameterKey)
		if decl, ok := t.Parameters[k]; ok && decl.HasDefault && !set[k] && decl.Default != aws.ToString(p.ParameterValue) {
			candidates[k] = aws.ToString(p.ParameterValue)
		}
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	old, err := running.template(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]defaultChange{}
	for k, v := range candidates {
		if decl, ok := old.Parameters[k]; ok && decl.HasDefault && decl.Default == v {
			out[k] = defaultChange{From: v, To: t.Parameters[k].Default}
		}
	}
	return out, nil
}

// defaultLines say what newDefaults changes, one line a parameter, for a
// dry run: "MessageRetentionPeriod: 345600 → 604800 (new default)".
func defaultLines(changes map[string]defaultChange) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(changes)) {
		out = append(out, fmt.Sprintf("%s: %s → %s (new default)", k, changes[k].From, changes[k].To))
	}
	return out
}
