package infra

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/internal/cfnregistry"
)

// keyUseActions are the KMS actions that use a key's material, or hand its
// use on (CreateGrant): what only the named roles may do with the sealing
// key.
var keyUseActions = []string{
	"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:GenerateDataKeyWithoutPlaintext",
	"kms:GenerateDataKeyPair", "kms:ReEncryptFrom", "kms:ReEncryptTo", "kms:CreateGrant",
}

// TestBrokerKeys checks, on the template each setting of cdk.json that
// touches them synthesizes, that the service role may use AWS managed keys
// only, through their services, and none of the broker's own keys; and that
// the sealing key's policy names who may use it (the api, the worker, the
// operators given), in the sealing context only, rather than leave it to
// the account's IAM.
func TestBrokerKeys(t *testing.T) {
	const topic = "arn:aws:sns:eu-west-1:123456789012:broker-alarms"
	operators := []string{"arn:aws:iam::123456789012:role/broker-operator", "arn:aws:iam::123456789012:user/alice"}
	variants := []struct {
		name      string
		synth     func() (awscdk.Stack, map[string]any)
		operators []string
	}{
		{"as cdk.json sets it", func() (awscdk.Stack, map[string]any) { return broker.stack, broker.json }, nil},
		{"sealed only, behind the front door, with the operator's alarm topic", func() (awscdk.Stack, map[string]any) {
			stack, template := synthWith(t, "KeysSealed", map[string]any{
				ContextSealedOnly: "true", ContextFrontDoor: "true", ContextAlarmTopicARN: topic,
				ContextDomainName: "broker.example.com", ContextCertificateARN: frontDoorCertificate})
			return stack, *template.ToJSON()
		}, nil},
		{"with the operators who reseal named", func() (awscdk.Stack, map[string]any) {
			stack, template := synthWith(t, "KeysOperators", map[string]any{
				ContextSealingKeyOperators: strings.Join(operators, ", ")})
			return stack, *template.ToJSON()
		}, operators},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			stack, template := v.synth()
			id := func(path string) string { return logicalIDIn(t, stack, path) }
			brokerKeys := []string{id("TableKey"), id("SealingKey")}
			if stack.Node().TryFindChild(jsii.String("AlarmTopicKey")) != nil {
				brokerKeys = append(brokerKeys, id("AlarmTopicKey"))
			}
			statements := serviceRoleStatements(t, template)

			t.Run("the service role's KMS statements hold for AWS managed keys only, and but for DescribeKey through their service", func(t *testing.T) {
				n := 0
				for sid, s := range statements {
					granted := actions(s)
					if s["Effect"] == "Deny" || !slices.ContainsFunc(granted, func(a string) bool { return strings.HasPrefix(a, "kms:") }) ||
						slices.Equal(granted, []string{"kms:ListAliases"}) {
						continue
					}
					n++
					condition, _ := s["Condition"].(object)
					aliases := aliasesOf(condition)
					if len(aliases) == 0 || slices.ContainsFunc(aliases, func(a string) bool { return !strings.HasPrefix(a, "alias/aws/") }) {
						t.Errorf("%s grants %v on keys whose aliases are %v, want AWS managed keys only (ForAnyValue:StringEquals kms:ResourceAliases alias/aws/…)",
							sid, granted, aliases)
					}
					via, _ := condition["StringEquals"].(object)
					if !slices.Equal(granted, []string{"kms:DescribeKey"}) && via["kms:ViaService"] == nil {
						t.Errorf("%s grants %v on condition %v: no kms:ViaService", sid, granted, condition)
					}
					for _, key := range brokerKeys {
						if strings.Contains(jsonString(s["Resource"]), key) {
							t.Errorf("%s grants %v on the broker's key %s", sid, granted, key)
						}
					}
				}
				if n == 0 {
					t.Error("no statement grants the AWS managed keys the table's and the database's handlers need")
				}
			})
			t.Run("and a Deny keeps the role off the table's and the sealing key", func(t *testing.T) {
				s := statements["KeepOffTheBrokersKeys"]
				want := []string{id("SealingKey"), id("TableKey")}
				var got []string
				for _, r := range asList(s["Resource"]) {
					if att, ok := r.(object)["Fn::GetAtt"].([]any); ok {
						got = append(got, att[0].(string))
					}
				}
				if s["Effect"] != "Deny" || !slices.Equal(actions(s), []string{"kms:*"}) || s["Condition"] != nil ||
					!slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
					t.Errorf("KeepOffTheBrokersKeys %v, want a Deny of kms:* on %v", s, want)
				}
			})

			sealKey := template["Resources"].(object)[id("SealingKey")].(object)
			policy := sealKey["Properties"].(object)["KeyPolicy"].(object)["Statement"].([]any)
			t.Run("the sealing key's policy lets the api, the worker and the operators named use it, in the sealing context only", func(t *testing.T) {
				want := []string{jsonString(object{"Fn::GetAtt": []any{id("ApiRole"), "Arn"}}), jsonString(object{"Fn::GetAtt": []any{id("WorkerRole"), "Arn"}})}
				for _, arn := range v.operators {
					want = append(want, jsonString(arn))
				}
				sealingContext := object{
					"StringEquals":              object{"kms:EncryptionContext:table": object{"Ref": id("Table")}},
					"ForAllValues:StringEquals": object{"kms:EncryptionContextKeys": []any{"table"}},
				}
				users := 0
				for _, s := range policy {
					s := s.(object)
					if s["Effect"] != "Allow" || !slices.ContainsFunc(actions(s), func(pattern string) bool {
						return slices.ContainsFunc(keyUseActions, func(a string) bool { return cfnregistry.MatchAction(pattern, a) })
					}) {
						continue
					}
					users++
					var got []string
					principal, _ := s["Principal"].(object)
					for _, p := range asList(principal["AWS"]) {
						got = append(got, jsonString(p))
					}
					if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
						t.Errorf("%v may use the sealing key (%v), want %v only", got, actions(s), want)
					}
					if !slices.Equal(slices.Sorted(slices.Values(actions(s))), []string{"kms:Decrypt", "kms:GenerateDataKey"}) {
						t.Errorf("the key's users may %v, want kms:Decrypt and kms:GenerateDataKey only", actions(s))
					}
					if !jsonEqual(s["Condition"], sealingContext) {
						t.Errorf("the key's users may use it on condition %v, want %v", s["Condition"], sealingContext)
					}
				}
				if users != 1 {
					t.Errorf("%d statements of the sealing key's policy let principals use it, want 1: %v", users, policy)
				}
			})
			t.Run("the account's IAM may administer the sealing key, not use it", func(t *testing.T) {
				admin := false
				for _, s := range policy {
					principal, _ := s.(object)["Principal"].(object)
					if strings.Contains(jsonString(principal), ":root") {
						admin = true
					}
					if s.(object)["Principal"] == "*" || jsonString(principal["AWS"]) == `"*"` {
						t.Errorf("statement %v names every principal", s)
					}
				}
				if !admin {
					t.Error("no statement lets the account administer the key: CloudFormation could not update it")
				}
			})
		})
	}
}

// aliasesOf are the aliases a condition's kms:ResourceAliases names.
func aliasesOf(condition object) []string {
	anyOf, _ := condition["ForAnyValue:StringEquals"].(object)
	var out []string
	for _, a := range asList(anyOf["kms:ResourceAliases"]) {
		if s, ok := a.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// asList is a JSON value that may be one item or a list, as a list.
func asList(v any) []any {
	switch v := v.(type) {
	case nil:
		return nil
	case []any:
		return v
	}
	return []any{v}
}

// logicalIDIn is the logical id of the construct at path in stack.
func logicalIDIn(t *testing.T, stack awscdk.Stack, path string) string {
	t.Helper()
	var c constructs.IConstruct = stack
	for part := range strings.SplitSeq(path, "/") {
		if c = c.Node().TryFindChild(&part); c == nil {
			t.Fatalf("no construct %s in the stack", path)
		}
	}
	element, ok := c.(awscdk.CfnElement)
	if !ok {
		element, ok = c.Node().DefaultChild().(awscdk.CfnElement)
	}
	if !ok {
		t.Fatalf("construct %s has no CloudFormation resource", path)
	}
	return *stack.GetLogicalId(element)
}
