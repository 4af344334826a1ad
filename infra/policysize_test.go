package infra

import (
	"encoding/json"
	"strings"
	"testing"
)

// roleInlinePolicyLimit is IAM's quota on the characters of a role's
// inline policies together, whitespace aside
// (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html):
// a deployment whose service role's policy is longer fails at that role.
const roleInlinePolicyLimit = 10240

// managedPolicyLimit is IAM's quota on a managed policy's characters,
// whitespace aside, and managedPoliciesPerRole its default quota on the
// managed policies a role may have (the same page).
const (
	managedPolicyLimit     = 6144
	managedPoliciesPerRole = 10
)

// TestServiceRolePolicyFitsIAMsQuota resolves the service role's own
// policies as CloudFormation would in the longest Region name and with the
// boundary's ARN at its longest likely length, and counts them as IAM does:
// its inline policies together (none since its grants outgrew them) within
// IAM's 10,240 characters, each managed policy of its grants within 6,144,
// and few enough managed policies to leave the operator room for theirs.
func TestServiceRolePolicyFitsIAMsQuota(t *testing.T) {
	for name, template := range map[string]map[string]any{"the broker's": broker.json, "a target account's": targetTemplate(t)} {
		t.Run(name, func(t *testing.T) {
			id, _ := cloudFormationRoleID(t, template)
			policies := rolePolicies(template, id)
			if len(policies) == 0 {
				t.Fatal("the service role has no policy of its own")
			}
			inline, managed := 0, 0
			for _, p := range policies {
				doc, err := json.Marshal(resolveForSize(p.document))
				if err != nil {
					t.Fatal(err)
				}
				if !p.managed {
					inline += len(doc) + len(p.name)
					continue
				}
				managed++
				t.Logf("the service role's managed policy %s: %d of %d characters", p.name, len(doc), managedPolicyLimit)
				if len(doc) > managedPolicyLimit {
					t.Errorf("managed policy %s takes %d characters, over IAM's %d: fewer statements a policy (grantsPerPolicy)",
						p.name, len(doc), managedPolicyLimit)
				}
			}
			if inline > roleInlinePolicyLimit {
				t.Errorf("the service role's inline policies take %d characters, over IAM's %d", inline, roleInlinePolicyLimit)
			}
			if managed > managedPoliciesPerRole/2 {
				t.Errorf("the service role has %d managed policies of its own, which leaves the operator %d of IAM's default %d",
					managed, managedPoliciesPerRole-managed, managedPoliciesPerRole)
			}
		})
	}
}

// resolveForSize replaces the intrinsic functions of a policy with the
// longest values they could take, so that the length is an upper bound.
func resolveForSize(v any) any {
	pseudo := map[string]string{
		"AWS::Partition": "aws-iso-b", "AWS::AccountId": "123456789012", "AWS::Region": "ap-southeast-2",
		"AWS::URLSuffix": "amazonaws.com", "AWS::StackName": strings.Repeat("s", 128),
	}
	// A reference to a resource of the stack: an ARN as long as a managed
	// policy's or a key's.
	const resourceARN = "arn:aws-iso-b:iam::123456789012:policy/ServerlessOsb-BindingBoundaryABCDEF12-ABCDEFGHIJKL"
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["Ref"].(string); ok {
			if p, ok := pseudo[ref]; ok {
				return p
			}
			return resourceARN
		}
		if join, ok := v["Fn::Join"].([]any); ok {
			var parts []string
			for _, part := range join[1].([]any) {
				parts = append(parts, resolveForSize(part).(string))
			}
			return strings.Join(parts, join[0].(string))
		}
		if sub, ok := v["Fn::Sub"].(string); ok {
			for name, value := range pseudo {
				sub = strings.ReplaceAll(sub, "${"+name+"}", value)
			}
			return sub
		}
		if _, ok := v["Fn::GetAtt"]; ok {
			return resourceARN
		}
		out := map[string]any{}
		for k, e := range v {
			out[k] = resolveForSize(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = resolveForSize(e)
		}
		return out
	}
	return v
}
