package infra

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// TestTheShippedCatalogGetsTheCacheUserFunction: the stack as cdk.json
// configures it, for the shipped catalog (services/catalog.yaml, whose
// ElastiCache for Valkey binding template declares
// Custom::CacheUserGroupMember) and no context value asking for it, has the
// function: named PREFIX-cacheuser, as the binding template calls it, in no
// VPC, under a role that may change only this deployment's caches' user
// groups and read only its binding secrets; cdk-nag clean. Without the
// function's bundle the synthesis fails, saying why.
func TestTheShippedCatalogGetsTheCacheUserFunction(t *testing.T) {
	var tpl struct {
		Resources map[string]struct {
			Type       string         `json:"Type"`
			Properties map[string]any `json:"Properties"`
		}
		Outputs map[string]any
	}
	text, _ := json.Marshal(broker.json)
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
	t.Run("the function is osb-cacheuser, in no VPC, and an output names it", func(t *testing.T) {
		if fn == nil {
			t.Fatal("no function osb-cacheuser")
		}
		if fn["VpcConfig"] != nil {
			t.Errorf("it runs in a VPC: %v", fn["VpcConfig"])
		}
		if tpl.Outputs["CacheUserFunctionName"] == nil {
			t.Error("no output CacheUserFunctionName")
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
	t.Run("without its bundle the synthesis fails, saying to run make build", func(t *testing.T) {
		context := maps.Clone(broker.context)
		context[ContextCacheUserCode] = filepath.Join(t.TempDir(), "cacheuser")
		app := awscdk.NewApp(&awscdk.AppProps{Context: &context})
		props, err := PropsFromContext(app.Node())
		if err != nil {
			t.Fatal(err)
		}
		_, err = NewBrokerStack(app, "NoCacheUserBundle", &props)
		if err == nil || !strings.Contains(err.Error(), "Custom::CacheUserGroupMember") || !strings.Contains(err.Error(), "make build") {
			t.Errorf("error %v, want one naming Custom::CacheUserGroupMember and make build", err)
		}
	})
	t.Run("no AwsSolutions rule fails or warns unsuppressed on it", func(t *testing.T) {
		annotations := assertions.Annotations_FromStack(broker.stack)
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
				if strings.Contains(f.ID, "CacheUser") {
					t.Errorf("%s: %v", f.ID, f.Entry.Data)
				}
			}
		}
	})
}

// TestACatalogWithoutValkeyPlansGetsNoCacheUserFunction synthesizes the
// stack for catalogs whose templates declare no Custom::CacheUserGroupMember
// (the demo catalog, and the shipped one without its Valkey service), with
// the cacheUsers=true that an older cdk.json may still hold: neither gets
// the function, its role, its log group or its output.
func TestACatalogWithoutValkeyPlansGetsNoCacheUserFunction(t *testing.T) {
	demo := func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "catalog.yaml")
		text, err := os.ReadFile("catalog.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, text, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// The shipped catalog, with its templates, less the Valkey service.
	withoutValkey := func(t *testing.T) string {
		return shippedCatalogWith(t, func(cat map[string]any) {
			var kept []any
			for _, s := range cat["services"].([]any) {
				if s.(map[string]any)["name"] != "aws-elasticache-valkey" {
					kept = append(kept, s)
				}
			}
			if len(kept) != len(cat["services"].([]any))-1 {
				t.Fatal("the shipped catalog has no service aws-elasticache-valkey")
			}
			cat["services"] = kept
		})
	}
	for _, c := range []struct {
		name    string
		id      string
		catalog func(*testing.T) string
	}{
		{"the demo catalog", "DemoCatalog", demo},
		{"the shipped catalog without its Valkey service", "NoValkey", withoutValkey},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The context value the stack no longer reads.
			_, template := synthCatalogWith(t, c.id, c.catalog(t), nil, map[string]any{"cacheUsers": "true"})
			for id, r := range template["Resources"].(object) {
				r := r.(object)
				props, _ := r["Properties"].(object)
				name, _ := props["FunctionName"].(string)
				if strings.HasPrefix(id, "CacheUser") || name == CacheUserFunctionName("osb") {
					t.Errorf("the stack has the cacheuser function's %s (%s)", id, r["Type"])
				}
			}
			if outputs, _ := template["Outputs"].(object); outputs["CacheUserFunctionName"] != nil {
				t.Error("the stack has the output CacheUserFunctionName")
			}
		})
	}
}
