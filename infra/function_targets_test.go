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

// functionCatalog offers three plans of the function driver: an
// asynchronous one on a function named by its ARN, a synchronous one on a
// function named by name and alias, and one on an HTTPS endpoint.
const functionCatalog = `services:
  - id: 9e0c4a4e-2f0c-4b8e-9d2b-6a1f4e3c7b01
    name: tenants
    description: A tenant in a shared cluster.
    bindable: true
    plans:
      - id: 9e0c4a4e-2f0c-4b8e-9d2b-6a1f4e3c7b02
        name: async
        description: Asynchronous.
        broker: {driver: function, mode: async-only, function: "arn:aws:lambda:eu-west-1:123456789012:function:tenants-broker"}
      - id: 9e0c4a4e-2f0c-4b8e-9d2b-6a1f4e3c7b03
        name: sync
        description: Synchronous.
        broker: {driver: function, mode: sync, function: "quick-broker:live"}
      - id: 9e0c4a4e-2f0c-4b8e-9d2b-6a1f4e3c7b04
        name: https
        description: An HTTPS target.
        broker: {driver: function, mode: async, url: "https://tenants.example.com/osb", secret_env: TENANTS_SECRET}
`

// TestStackGrantsInvokeOnTheCatalogsFunctions synthesizes the stack for a
// catalog that names Lambda functions: the worker may invoke exactly those
// functions, the api function exactly those of plans that may run a change
// synchronously, and cdk-nag finds nothing.
func TestStackGrantsInvokeOnTheCatalogsFunctions(t *testing.T) {
	tmp := t.TempDir()
	catalogPath := filepath.Join(tmp, "catalog.yaml")
	if err := os.WriteFile(catalogPath, []byte(functionCatalog), 0o644); err != nil {
		t.Fatal(err)
	}
	context := maps.Clone(broker.context)
	context[ContextCatalog] = catalogPath
	for key, name := range map[string]string{ContextAPICode: "api", ContextWorkerCode: "worker"} {
		dir := filepath.Join(tmp, name)
		if err := dummyAsset(dir, catalogPath); err != nil {
			t.Fatal(err)
		}
		context[key] = dir
	}
	app := awscdk.NewApp(&awscdk.AppProps{Context: &context, Outdir: jsii.String(filepath.Join(tmp, "cdk.out"))})
	props, err := PropsFromContext(app.Node())
	if err != nil {
		t.Fatal(err)
	}
	stack, err := NewBrokerStack(app, "Functions", &props)
	if err != nil {
		t.Fatal(err)
	}
	var template map[string]any
	check(t, func() { template = *assertions.Template_FromStack(stack, nil).ToJSON() })
	if template == nil {
		t.FailNow()
	}
	byName := object{"Fn::Join": []any{"", []any{"arn:", partition, ":lambda:", region, ":", account, ":function:quick-broker:live"}}}
	byARN := "arn:aws:lambda:eu-west-1:123456789012:function:tenants-broker"

	t.Run("the worker may invoke every function the catalog names, and no other", func(t *testing.T) {
		got := invokeStatements(t, template, "WorkerRole")
		if len(got) != 1 || !jsonEqual(got[0]["Resource"], []any{byARN, byName}) {
			t.Fatalf("lambda:InvokeFunction statements %v, want one on %s and quick-broker:live", got, byARN)
		}
	})
	t.Run("the api function may invoke the synchronous plan's function only", func(t *testing.T) {
		got := invokeStatements(t, template, "ApiRole")
		if len(got) != 1 || !jsonEqual(got[0]["Resource"], byName) {
			t.Fatalf("lambda:InvokeFunction statements %v, want one on quick-broker:live", got)
		}
	})
	t.Run("the default catalog names no function: nothing is granted", func(t *testing.T) {
		for _, role := range []string{"WorkerRole", "ApiRole"} {
			if got := invokeStatements(t, broker.json, role); len(got) != 0 {
				t.Errorf("%s: %v", role, got)
			}
		}
	})
	t.Run("cdk-nag finds nothing", func(t *testing.T) {
		annotations := assertions.Annotations_FromStack(stack)
		nag := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
		for _, findings := range []any{annotations.FindError(jsii.String("*"), nag), annotations.FindWarning(jsii.String("*"), nag)} {
			text, _ := json.Marshal(findings)
			if string(text) != "[]" && string(text) != "null" {
				t.Errorf("findings: %s", text)
			}
		}
	})
}

// invokeStatements are the statements that allow lambda:InvokeFunction in
// the policies attached to the role whose logical id starts with role.
func invokeStatements(t *testing.T, template map[string]any, role string) []object {
	t.Helper()
	var out []object
	for _, r := range template["Resources"].(object) {
		r := r.(object)
		if r["Type"] != "AWS::IAM::Policy" {
			continue
		}
		props := r["Properties"].(object)
		attached := false
		for _, ref := range props["Roles"].([]any) {
			if id, _ := ref.(object)["Ref"].(string); strings.HasPrefix(id, role) {
				attached = true
			}
		}
		if !attached {
			continue
		}
		for _, s := range props["PolicyDocument"].(object)["Statement"].([]any) {
			s := s.(object)
			text, _ := json.Marshal(s["Action"])
			if strings.Contains(string(text), "lambda:InvokeFunction") {
				out = append(out, s)
			}
		}
	}
	return out
}
