package infra

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// TestTargetStack synthesizes the stack a platform team deploys into each
// account a placement names, for the bundled catalog: the role the broker
// assumes trusts the broker's worker and api roles only, with the external
// id; it may do what the worker does on the broker's stacks, under the
// account's service role, which has the broker's own service role's
// grants and boundary; cdk-nag finds nothing, cfn-lint nothing either, and
// the template is a plain one (parameters, no assets) for StackSets.
func TestTargetStack(t *testing.T) {
	stack, template := synthTarget(t)
	resources := template["Resources"].(object)
	byType := func(typ string) map[string]object {
		out := map[string]object{}
		for id, r := range resources {
			if r := r.(object); r["Type"] == typ {
				out[id] = r
			}
		}
		return out
	}
	role := func(prefix string) object {
		for id, r := range byType("AWS::IAM::Role") {
			if len(id) >= len(prefix) && id[:len(prefix)] == prefix {
				return r["Properties"].(object)
			}
		}
		t.Fatalf("no role %s…", prefix)
		return nil
	}

	t.Run("it makes two roles, the boundary and the templates' bucket, nothing else", func(t *testing.T) {
		var types []string
		for _, r := range resources {
			types = append(types, r.(object)["Type"].(string))
		}
		slices.Sort(types)
		// The managed policies: the boundary, and the service role's
		// grants (grantsAsManagedPolicies); the bucket's policy enforces
		// TLS.
		types = slices.Compact(types)
		if want := []string{"AWS::IAM::ManagedPolicy", "AWS::IAM::Role", "AWS::S3::Bucket", "AWS::S3::BucketPolicy"}; !slices.Equal(types, want) ||
			len(byType("AWS::IAM::Role")) != 2 || len(byType("AWS::S3::Bucket")) != 1 {
			t.Errorf("resources of types %v (%d roles, %d buckets), want %v (2 roles, 1 bucket)", types, len(byType("AWS::IAM::Role")), len(byType("AWS::S3::Bucket")), want)
		}
	})
	t.Run("the templates' bucket has the name the driver finds it by", func(t *testing.T) {
		var bucket object
		for _, r := range byType("AWS::S3::Bucket") {
			bucket = r["Properties"].(object)
		}
		want := object{"Fn::Join": []any{"", []any{"osb-tpl-osb-", object{"Ref": "AWS::AccountId"}, "-", object{"Ref": "AWS::Region"}}}}
		if !jsonEqual(bucket["BucketName"], want) {
			t.Errorf("bucket name %v, want %v (deploy.TargetTemplateBucket)", bucket["BucketName"], want)
		}
	})
	// The bundled catalog's templates are all within CloudFormation's
	// body limit: its worker is built without S3 (osb_without_s3) and
	// granted nothing there, here either (cloudformation.Needs);
	// TestTargetRoleReachesTheTemplatesOfTheAccountsBuckets has one over it.
	t.Run("the role is granted nothing of S3: no template of the catalog goes through a bucket", func(t *testing.T) {
		policy := role("TargetRole")["Policies"].([]any)[0].(object)["PolicyDocument"].(object)["Statement"].([]any)
		for _, s := range policy {
			if text, _ := json.Marshal(s.(object)["Action"]); strings.Contains(string(text), "s3:") {
				t.Errorf("statement %v", s)
			}
		}
	})
	t.Run("it is a plain template: its parameters are its own, and it checks no CDK bootstrap", func(t *testing.T) {
		params := slices.Sorted(maps.Keys(template["Parameters"].(object)))
		if want := []string{TargetParamAPIRole, TargetParamWorkerRole, TargetParamExternalID, TargetParamIdentityRegion}; !slices.Equal(params, want) {
			t.Errorf("parameters %v, want %v", params, want)
		}
		if rules, ok := template["Rules"]; ok {
			t.Errorf("rules %v: a StackSet's accounts have no CDK bootstrap", rules)
		}
	})
	t.Run("the role trusts the broker's worker and api roles only, with the external id", func(t *testing.T) {
		trust := role("TargetRole")["AssumeRolePolicyDocument"].(object)["Statement"].([]any)
		if len(trust) != 1 {
			t.Fatalf("trust %v", trust)
		}
		s := trust[0].(object)
		principals := s["Principal"].(object)["AWS"]
		want := []any{object{"Ref": TargetParamAPIRole}, object{"Ref": TargetParamWorkerRole}}
		if !jsonEqual(principals, want) {
			t.Errorf("principals %v, want the two parameters", principals)
		}
		if !jsonEqual(s["Condition"], object{"StringEquals": object{"sts:ExternalId": object{"Ref": TargetParamExternalID}}}) {
			t.Errorf("condition %v, want sts:ExternalId", s["Condition"])
		}
		if p := template["Parameters"].(object)[TargetParamExternalID].(object); p["NoEcho"] != true {
			t.Errorf("the external id parameter echoes: %v", p)
		}
	})
	t.Run("the role may create, change and delete the broker's stacks only under the account's service role", func(t *testing.T) {
		policy := role("TargetRole")["Policies"].([]any)[0].(object)["PolicyDocument"].(object)["Statement"].([]any)
		var sids []string
		for _, s := range policy {
			s := s.(object)
			sids = append(sids, s["Sid"].(string))
			if s["Sid"] == "ChangeServiceStacks" {
				cond := s["Condition"].(object)["StringEquals"].(object)["cloudformation:RoleArn"].(object)
				if id := cond["Fn::GetAtt"].([]any)[0].(string); len(id) < len("ServiceRole") || id[:len("ServiceRole")] != "ServiceRole" {
					t.Errorf("ChangeServiceStacks requires the role %v, want the stack's ServiceRole", cond)
				}
			}
		}
		want := []string{"ChangeServiceStacks", "TagServiceStacks", "ChangeSetsOfServiceStacks", "ReadServiceStacks",
			"PassServiceRole", "CountServiceStacks"}
		if !slices.Equal(sids, want) {
			t.Errorf("statements %v, want %v", sids, want)
		}
	})
	t.Run("the service role has the broker's own grants and boundary", func(t *testing.T) {
		grants := func(template map[string]any) map[string]any {
			out := map[string]any{}
			for _, s := range serviceRoleStatements(t, template) {
				out[s["Sid"].(string)] = s["Action"]
			}
			return out
		}
		want := grants(broker.json)
		delete(want, "KeepOffTheBrokersKeys") // the broker's keys are in its own account
		got := grants(template)
		if !jsonEqual(got, want) {
			t.Errorf("statements %v, want the broker's %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
		if role("ServiceRole")["RoleName"] != "serverless-osb-target-cfn-osb" || role("TargetRole")["RoleName"] != "serverless-osb-target-osb" {
			t.Errorf("role names %v and %v", role("ServiceRole")["RoleName"], role("TargetRole")["RoleName"])
		}
	})
	t.Run("one Region's stack of an account makes its roles and boundary, every Region's its bucket", func(t *testing.T) {
		for id, r := range resources {
			r := r.(object)
			typ := r["Type"].(string)
			identity := strings.HasPrefix(typ, "AWS::IAM::")
			if identity != (r["Condition"] == "MakesIdentities") {
				t.Errorf("%s (%s) has the condition %v; want MakesIdentities on the IAM resources only", id, typ, r["Condition"])
			}
		}
		cond, _ := json.Marshal(template["Conditions"].(object)["MakesIdentities"])
		if want := `{"Fn::Or":[{"Fn::Equals":[{"Ref":"IdentityRegion"},""]},{"Fn::Equals":[{"Ref":"IdentityRegion"},{"Ref":"AWS::Region"}]}]}`; string(cond) != want {
			t.Errorf("MakesIdentities is %s, want %s", cond, want)
		}
		outputs := template["Outputs"].(object)
		for _, name := range []string{"TargetRoleArn", "ServiceRoleArn", "PermissionsBoundaryArn"} {
			if outputs[name].(object)["Condition"] != "MakesIdentities" {
				t.Errorf("the output %s is not under MakesIdentities", name)
			}
		}
	})
	t.Run("cdk-nag finds nothing", func(t *testing.T) {
		if found := nagFindings(t, stack); len(found) != 0 {
			t.Errorf("findings: %q", found)
		}
	})
	t.Run("cfn-lint finds nothing", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "target.template.json")
		body, err := json.Marshal(template)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, body, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cfn-lint", path).CombinedOutput(); err != nil {
			t.Errorf("cfn-lint: %v\n%s", err, out)
		}
	})
}

// synthTarget synthesizes the target stack for the bundled catalog.
func synthTarget(t *testing.T) (awscdk.Stack, map[string]any) {
	t.Helper()
	app := awscdk.NewApp(&awscdk.AppProps{Context: &broker.context, Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
	stack, err := NewTargetStack(app, "ServerlessOsbTarget", &TargetStackProps{WorkerCodeDir: broker.context[ContextWorkerCode].(string), StackPrefix: "osb"})
	if err != nil {
		t.Fatal(err)
	}
	var template map[string]any
	check(t, func() { template = *assertions.Template_FromStack(stack, nil).ToJSON() })
	return stack, template
}

// targetTemplate is the target stack's template (synthTarget).
func targetTemplate(t *testing.T) map[string]any {
	t.Helper()
	_, template := synthTarget(t)
	return template
}
