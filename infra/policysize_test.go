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

// TestServiceRolePolicyFitsIAMsQuota resolves the service role's inline
// policies as CloudFormation would in the longest Region name and with the
// boundary's ARN at its longest likely length, and counts them as IAM does.
// Each service's grants add to it: the day they would not fit, the grants
// must move to managed policies (6,144 characters each, 10 a role).
func TestServiceRolePolicyFitsIAMsQuota(t *testing.T) {
	role := cloudFormationRole(t, broker.json)
	policies, _ := role["Properties"].(object)["Policies"].([]any)
	if len(policies) == 0 {
		t.Fatal("the service role has no inline policy")
	}
	total := 0
	for _, p := range policies {
		doc, err := json.Marshal(resolveForSize(p.(object)["PolicyDocument"]))
		if err != nil {
			t.Fatal(err)
		}
		total += len(doc) + len(p.(object)["PolicyName"].(string))
	}
	t.Logf("the service role's inline policies: %d of %d characters", total, roleInlinePolicyLimit)
	if total > roleInlinePolicyLimit {
		t.Errorf("the service role's inline policies take %d characters, over IAM's %d: move statements to managed policies",
			total, roleInlinePolicyLimit)
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
