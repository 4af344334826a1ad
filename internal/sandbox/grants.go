package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strings"
)

// policies are the identity policies the template gives its roles, as the
// sandbox put them on moto (resolved): what each function's role grants.
type policies struct {
	// inline holds each role's inline documents (the role's Policies,
	// AWS::IAM::Policy), by role name.
	inline map[string][]string
	// attached holds the managed policies' ARNs attached to each role (the
	// role's ManagedPolicyArns, AWS::IAM::ManagedPolicy's Roles).
	attached map[string][]string
	// managed holds the documents of the template's managed policies, by
	// ARN.
	managed map[string]string
}

func (p *policies) addInline(role, doc string) {
	if p.inline == nil {
		p.inline = map[string][]string{}
	}
	p.inline[role] = append(p.inline[role], doc)
}

func (p *policies) attach(role, arn string) {
	if p.attached == nil {
		p.attached = map[string][]string{}
	}
	p.attached[role] = append(p.attached[role], arn)
}

func (p *policies) addManaged(arn, doc string) {
	if p.managed == nil {
		p.managed = map[string]string{}
	}
	p.managed[arn] = doc
}

// Granted returns, by the logical id of each function the sandbox runs, the
// actions its role's policies allow, as they are written (a wildcard stays
// one; Deny statements are left out). A role the template cannot tell all
// of (a managed policy from outside it, an Allow with NotAction) is an
// error.
func (sb *Sandbox) Granted() (map[string][]string, error) {
	granted := map[string][]string{}
	for _, f := range sb.functions {
		role := path.Base(f.spec.role)
		docs := slices.Clone(sb.policies.inline[role])
		for _, arn := range sb.policies.attached[role] {
			doc, ok := sb.policies.managed[arn]
			if !ok {
				return nil, fmt.Errorf("function %s: its role %s has the managed policy %s, which the template does not hold", f.spec.logicalID, role, arn)
			}
			docs = append(docs, doc)
		}
		var actions []string
		for _, doc := range docs {
			allowed, err := allowedActions(doc)
			if err != nil {
				return nil, fmt.Errorf("function %s: its role %s: %w", f.spec.logicalID, role, err)
			}
			actions = append(actions, allowed...)
		}
		slices.Sort(actions)
		granted[f.spec.logicalID] = slices.Compact(actions)
	}
	return granted, nil
}

// allowedActions are the actions of a policy document's Allow statements.
func allowedActions(doc string) ([]string, error) {
	var p struct {
		Statement json.RawMessage
	}
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		return nil, fmt.Errorf("a policy document: %w", err)
	}
	type statement struct {
		Sid       string
		Effect    string
		Action    any
		NotAction any
	}
	var statements []statement
	if err := json.Unmarshal(p.Statement, &statements); err != nil {
		var one statement
		if err := json.Unmarshal(p.Statement, &one); err != nil {
			return nil, fmt.Errorf("a policy's Statement: %w", err)
		}
		statements = []statement{one}
	}
	var actions []string
	for _, s := range statements {
		if s.Effect != "Allow" {
			continue
		}
		if s.NotAction != nil {
			return nil, fmt.Errorf("statement %q allows every action but its NotAction", s.Sid)
		}
		switch a := s.Action.(type) {
		case string:
			actions = append(actions, a)
		case []any:
			for _, v := range a {
				actions = append(actions, fmt.Sprint(v))
			}
		}
	}
	return actions, nil
}

// Allowed returns, by the logical id of each function the sandbox runs, the
// actions moto's IAM enforcement has allowed the function's credentials so
// far (a DynamoDB transaction's per item), as moto_server.py records them.
func (sb *Sandbox) Allowed(ctx context.Context) (map[string][]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, sb.moto.Endpoint+"/moto-api/iam/allowed-actions", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("moto's allowed actions: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("moto's allowed actions: HTTP %d %s", resp.StatusCode, data)
	}
	var byARN map[string][]string
	if err := json.Unmarshal(data, &byARN); err != nil {
		return nil, fmt.Errorf("moto's allowed actions: %w", err)
	}
	allowed := map[string][]string{}
	for _, f := range sb.functions {
		// The credentials of the function's role, for its session (see
		// assumeRole).
		arn := fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", sb.account, path.Base(f.spec.role), f.spec.name)
		for a, actions := range byARN {
			if strings.EqualFold(a, arn) {
				allowed[f.spec.logicalID] = actions
			}
		}
	}
	return allowed, nil
}
