package infra

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// TestADatabaseUserFunctionRunsInEachVPCNamed synthesizes the stack with two
// VPCs for the Custom::DatabaseUser function: one function in each, in its
// subnets with a security group of its own, under one role that reads only
// this deployment's master secrets and binding secrets; cdk-nag clean.
func TestADatabaseUserFunctionRunsInEachVPCNamed(t *testing.T) {
	code := filepath.Join(t.TempDir(), "dbuser")
	if err := dummyAsset(code, broker.context[ContextCatalog].(string)); err != nil {
		t.Fatal(err)
	}
	stack, template := synthWith(t, "DatabaseUsers", map[string]any{
		ContextDatabaseUserVPCs: "vpc-0123456789abcdef0=subnet-0123456789abcdef0+subnet-0123456789abcdef1," +
			"vpc-0fedcba9876543210=subnet-0fedcba9876543210",
		ContextDatabaseUserCode: code,
	})
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
	functions := map[string]map[string]any{}
	var policies []string
	for _, r := range tpl.Resources {
		switch r.Type {
		case "AWS::Lambda::Function":
			if name, ok := r.Properties["FunctionName"].(string); ok {
				functions[name] = r.Properties
			}
		case "AWS::IAM::Policy":
			b, _ := json.Marshal(r.Properties["PolicyDocument"])
			policies = append(policies, string(b))
		}
	}
	for vpc, subnets := range map[string]string{
		"vpc-0123456789abcdef0": `["subnet-0123456789abcdef0","subnet-0123456789abcdef1"]`,
		"vpc-0fedcba9876543210": `["subnet-0fedcba9876543210"]`,
	} {
		t.Run("the function in "+vpc+" runs in its subnets", func(t *testing.T) {
			fn, ok := functions["osb-dbuser-"+vpc]
			if !ok {
				t.Fatalf("no function osb-dbuser-%s among %v", vpc, keys(functions))
			}
			b, _ := json.Marshal(fn["VpcConfig"])
			if !strings.Contains(string(b), `"SubnetIds":`+subnets) || !strings.Contains(string(b), "SecurityGroupIds") {
				t.Errorf("its VpcConfig is %s", b)
			}
		})
	}
	t.Run("its role reads the master secrets by RDS's tag and the binding secrets by the prefix", func(t *testing.T) {
		all := strings.Join(policies, "\n")
		for _, want := range []string{`"Sid":"ReadTheMasterSecrets"`, `secret:rds!db-*`, `aws:rds:primaryDBInstanceArn`,
			`:db:osb-*`, `"Sid":"ReadTheClusterMasterSecrets"`, `secret:rds!cluster-*`, `aws:rds:primaryDBClusterArn`, `:cluster:osb-*`,
			`"Sid":"ReadAndWriteTheBindingSecrets"`, `secret:osb-*`, `secretsmanager:PutSecretValue`} {
			if !strings.Contains(all, want) {
				t.Errorf("the policies lack %s", want)
			}
		}
	})
	t.Run("the security groups admit nothing in", func(t *testing.T) {
		template.ResourceCountIs(jsii.String("AWS::EC2::SecurityGroup"), jsii.Number(2))
		for _, r := range tpl.Resources {
			if r.Type == "AWS::EC2::SecurityGroup" && r.Properties["SecurityGroupIngress"] != nil {
				t.Errorf("a security group admits %v", r.Properties["SecurityGroupIngress"])
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

func TestDatabaseUserVPCsAreReadStrictly(t *testing.T) {
	for _, bad := range []string{"vpc-1", "vpc-0123456789abcdef0", "vpc-0123456789abcdef0=subnet-x", "vpc-0123456789abcdef0=sg-0123456789abcdef0"} {
		if _, err := parseDatabaseUserVPCs([]string{bad}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := parseDatabaseUserVPCs([]string{"vpc-0123456789abcdef0=subnet-0123456789abcdef0", "vpc-0123456789abcdef0=subnet-0123456789abcdef1"}); err == nil {
		t.Error("a VPC named twice: no error")
	}
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
