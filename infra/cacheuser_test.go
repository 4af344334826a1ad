package infra

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// TestTheCacheUserFunctionIsDeployedWhenAsked synthesizes the stack with
// the Custom::CacheUserGroupMember function: named PREFIX-cacheuser, as the
// Valkey binding template calls it, in no VPC, under a role that may change
// only this deployment's caches' user groups and read only its binding
// secrets; cdk-nag clean. Without the context value there is none.
func TestTheCacheUserFunctionIsDeployedWhenAsked(t *testing.T) {
	for id, r := range broker.json["Resources"].(object) {
		if r := r.(object); r["Type"] == "AWS::Lambda::Function" && strings.Contains(jsonText(r["Properties"]), "cacheuser") {
			t.Errorf("the stack without cacheUsers has the cacheuser function %s", id)
		}
	}
	code := filepath.Join(t.TempDir(), "cacheuser")
	if err := dummyAsset(code, broker.context[ContextCatalog].(string)); err != nil {
		t.Fatal(err)
	}
	stack, template := synthWith(t, "CacheUsers", map[string]any{ContextCacheUsers: "true", ContextCacheUserCode: code})
	var tpl struct {
		Resources map[string]struct {
			Type       string         `json:"Type"`
			Properties map[string]any `json:"Properties"`
		}
	}
	text, _ := json.Marshal(template.ToJSON())
	if err := json.Unmarshal(text, &tpl); err != nil {
		t.Fatal(err)
	}
	var fn map[string]any
	var policies []string
	for _, r := range tpl.Resources {
		switch r.Type {
		case "AWS::Lambda::Function":
			if r.Properties["FunctionName"] == CacheUserFunctionName("osb") {
				fn = r.Properties
			}
		case "AWS::IAM::Policy":
			b, _ := json.Marshal(r.Properties["PolicyDocument"])
			if strings.Contains(string(b), "elasticache:") {
				policies = append(policies, string(b))
			}
		}
	}
	t.Run("the function is osb-cacheuser, in no VPC", func(t *testing.T) {
		if fn == nil {
			t.Fatal("no function osb-cacheuser")
		}
		if fn["VpcConfig"] != nil {
			t.Errorf("it runs in a VPC: %v", fn["VpcConfig"])
		}
	})
	t.Run("its role changes the deployment's user groups and reads its binding secrets, nothing else", func(t *testing.T) {
		if len(policies) != 1 {
			t.Fatalf("%d policies name ElastiCache actions, want the function role's", len(policies))
		}
		for _, want := range []string{`"Sid":"ChangeTheCachesUserGroups"`, `elasticache:ModifyUserGroup`, `:usergroup:osb-*`, `:user:osb-*`,
			`"Sid":"ReadTheBindingSecrets"`, `secret:osb-*`} {
			if !strings.Contains(policies[0], want) {
				t.Errorf("the policy lacks %s: %s", want, policies[0])
			}
		}
		for _, never := range []string{"elasticache:Delete", "elasticache:Create", "secretsmanager:PutSecretValue", `"Resource":"*"`} {
			if strings.Contains(policies[0], never) && !(never == `"Resource":"*"` && strings.Contains(policies[0], "xray:")) {
				t.Errorf("the policy grants %s: %s", never, policies[0])
			}
		}
	})
	t.Run("no AwsSolutions rule fails or warns unsuppressed", func(t *testing.T) {
		annotations := assertions.Annotations_FromStack(stack)
		nag := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
		for _, found := range []any{annotations.FindError(jsii.String("*"), nag), annotations.FindWarning(jsii.String("*"), nag)} {
			b, _ := json.Marshal(found)
			var findings []struct {
				ID    string `json:"id"`
				Entry struct {
					Data any `json:"data"`
				} `json:"entry"`
			}
			_ = json.Unmarshal(b, &findings)
			for _, f := range findings {
				t.Errorf("%s: %v", f.ID, f.Entry.Data)
			}
		}
	})
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
