package infra

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/env"
)

// functionCatalog offers plans of the function driver: an asynchronous one
// on a function named by its ARN, a synchronous one on a function named by
// name and alias, one on an HTTPS endpoint with its secret in a variable,
// and three on HTTPS endpoints with their secrets in Secrets Manager (one
// async-only, two that may run synchronously and share a secret).
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
      - id: 9e0c4a4e-2f0c-4b8e-9d2b-6a1f4e3c7b05
        name: https-async-only
        description: An HTTPS target whose secret is in Secrets Manager, asynchronous only.
        broker: {driver: function, mode: async-only, url: "https://slow.example.com/osb", secret_arn: "` + slowSecret + `"}
      - id: 9e0c4a4e-2f0c-4b8e-9d2b-6a1f4e3c7b06
        name: https-sync
        description: An HTTPS target whose secret is in Secrets Manager, synchronous.
        broker: {driver: function, mode: sync, url: "https://quick.example.com/osb", secret_arn: "` + quickSecret + `"}
      - id: 9e0c4a4e-2f0c-4b8e-9d2b-6a1f4e3c7b07
        name: https-async
        description: Another plan on the same HTTPS target and secret.
        broker: {driver: function, mode: async, url: "https://quick.example.com/osb", secret_arn: "` + quickSecret + `"}
`

// The secrets of the HTTPS targets, by complete ARN.
const (
	slowSecret  = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:tenants/slow-signing-AbC123"
	quickSecret = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:tenants/quick-signing-XyZ789"
)

// TestStackGrantsWhatTheCatalogsFunctionTargetsNeed synthesizes the stack
// for a catalog that names Lambda functions and Secrets Manager secrets:
// the worker may invoke exactly those functions and read exactly those
// secrets, the api function exactly those of plans that may run a change
// synchronously, and cdk-nag finds nothing.
func TestStackGrantsWhatTheCatalogsFunctionTargetsNeed(t *testing.T) {
	tmp := t.TempDir()
	catalogPath := filepath.Join(tmp, "catalog.yaml")
	if err := os.WriteFile(catalogPath, []byte(functionCatalog), 0o644); err != nil {
		t.Fatal(err)
	}
	stack, template := synthCatalog(t, "Functions", catalogPath, nil)
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
	t.Run("the worker may read every secret the catalog names, and no other", func(t *testing.T) {
		if got := serviceSecrets(t, template, "WorkerRole"); !jsonEqual(got, []any{quickSecret, slowSecret}) {
			t.Fatalf("secretsmanager:GetSecretValue on %v, want %s and %s", got, quickSecret, slowSecret)
		}
	})
	t.Run("the api function may read the secret of the plans that may run synchronously only", func(t *testing.T) {
		if got := serviceSecrets(t, template, "ApiRole"); !jsonEqual(got, []any{quickSecret}) {
			t.Fatalf("secretsmanager:GetSecretValue on %v, want %s", got, quickSecret)
		}
	})
	t.Run("the secrets are granted for reading only, each in one statement per role", func(t *testing.T) {
		for _, role := range []string{"WorkerRole", "ApiRole"} {
			got := statementsAllowing(t, template, role, "secretsmanager:")
			n := 0
			for _, s := range got {
				if s["Sid"] == "ReadServiceSecrets" {
					n++
					if !jsonEqual(s["Action"], "secretsmanager:GetSecretValue") || s["Effect"] != "Allow" {
						t.Errorf("%s: %v", role, s)
					}
				}
			}
			if n != 1 {
				t.Errorf("%s: %d ReadServiceSecrets statements, want 1", role, n)
			}
		}
	})
	t.Run("the default catalog names no secret: none is granted but the broker's own", func(t *testing.T) {
		for _, role := range []string{"WorkerRole", "ApiRole"} {
			if got := serviceSecrets(t, broker.json, role); len(got) != 0 {
				t.Errorf("%s: %v", role, got)
			}
		}
	})
	t.Run("cdk-nag finds nothing", func(t *testing.T) {
		if found := nagFindings(t, stack); len(found) != 0 {
			t.Errorf("findings: %q", found)
		}
	})
}

// invokeStatements are the statements that allow lambda:InvokeFunction in
// the policies attached to the role whose logical id starts with role.
func invokeStatements(t *testing.T, template map[string]any, role string) []object {
	t.Helper()
	return statementsAllowing(t, template, role, "lambda:InvokeFunction")
}

// serviceSecrets are the secrets, named by literal ARN (the broker's own
// secret is named by reference), that the role may read, sorted.
func serviceSecrets(t *testing.T, template map[string]any, role string) []any {
	t.Helper()
	var out []string
	for _, s := range statementsAllowing(t, template, role, "secretsmanager:GetSecretValue") {
		resources, ok := s["Resource"].([]any)
		if !ok {
			resources = []any{s["Resource"]}
		}
		for _, r := range resources {
			if arn, ok := r.(string); ok {
				out = append(out, arn)
			}
		}
	}
	slices.Sort(out)
	var arns []any
	for _, a := range out {
		arns = append(arns, a)
	}
	return arns
}

// statementsAllowing are the statements whose actions mention action in
// the policies attached to the role whose logical id starts with role.
func statementsAllowing(t *testing.T, template map[string]any, role, action string) []object {
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
			if strings.Contains(string(text), action) {
				out = append(out, s)
			}
		}
	}
	return out
}

// TestStackGrantsWhatADriverDeclares is the proof that infra names no
// driver: a kind the stack has never heard of ("queue") declares a
// statement for the worker, with a wildcard and its reason, and a variable,
// in the manifest the build writes; the stack grants and sets exactly
// that, with its own values for the placeholders, and, since the kind
// needs no service role, makes none.
func TestStackGrantsWhatADriverDeclares(t *testing.T) {
	tmp := t.TempDir()
	catalogPath := filepath.Join(tmp, "catalog.yaml")
	if err := os.WriteFile(catalogPath, []byte("services: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	manifest := deploy.Manifest{Drivers: []deploy.Driver{{Name: "queue", Needs: deploy.Needs{
		Statements: []deploy.Statement{{Function: deploy.Worker, Sid: "SendToServiceQueues", Actions: []string{"sqs:SendMessage"},
			Resources:      []string{deploy.ARN("sqs", deploy.StackPrefix+"-*")},
			WildcardReason: "The queues are made at run time, each named PREFIX-…; the pattern is those queues only."}},
		Env: []deploy.Variable{{Function: deploy.Worker, Name: env.StackPrefix, Value: deploy.StackPrefix}},
	}}}}
	encoded, err := manifest.Encode()
	if err != nil {
		t.Fatal(err)
	}
	stack, template := synthCatalog(t, "Declared", catalogPath, encoded)
	prefix := broker.context[ContextStackPrefix].(string)
	queues := object{"Fn::Join": []any{"", []any{"arn:", partition, ":sqs:", region, ":", account, ":" + prefix + "-*"}}}

	t.Run("the worker's role grants the declared statement on the stack's own ARN", func(t *testing.T) {
		got := statementsAllowing(t, template, "WorkerRole", "sqs:SendMessage")
		if len(got) != 1 || got[0]["Sid"] != "SendToServiceQueues" || !jsonEqual(got[0]["Resource"], queues) {
			t.Fatalf("sqs:SendMessage statements %v, want SendToServiceQueues on %v", got, queues)
		}
	})
	t.Run("the api function's role does not", func(t *testing.T) {
		if got := statementsAllowing(t, template, "ApiRole", "sqs:"); len(got) != 0 {
			t.Errorf("%v", got)
		}
	})
	t.Run("the worker is set the declared variable, with the stack's value", func(t *testing.T) {
		vars := resourceWithPrefix(t, template, "WorkerFunction")["Properties"].(object)["Environment"].(object)["Variables"].(object)
		if vars[env.StackPrefix] != prefix {
			t.Errorf("%s = %v, want %s", env.StackPrefix, vars[env.StackPrefix], prefix)
		}
	})
	t.Run("no driver needs the service role: the stack makes none, and grants nothing on stacks", func(t *testing.T) {
		for id, r := range template["Resources"].(object) {
			if strings.HasPrefix(id, "ServiceRole") || strings.HasPrefix(id, "BindingBoundary") {
				t.Errorf("%s (%v)", id, r.(object)["Type"])
			}
		}
		if got := statementsAllowing(t, template, "WorkerRole", "cloudformation:"); len(got) != 0 {
			t.Errorf("%v", got)
		}
	})
	t.Run("cdk-nag finds nothing: the declared reason covers the wildcard", func(t *testing.T) {
		if found := nagFindings(t, stack); len(found) != 0 {
			t.Errorf("findings: %q", found)
		}
	})
}

// resourceWithPrefix is the template's resource whose logical id starts
// with prefix.
func resourceWithPrefix(t *testing.T, template map[string]any, prefix string) object {
	t.Helper()
	for id, r := range template["Resources"].(object) {
		if strings.HasPrefix(id, prefix) && len(id) == len(prefix)+8 {
			return r.(object)
		}
	}
	t.Fatalf("no resource %s…", prefix)
	return nil
}

// synthCatalog synthesizes the stack id (and returns it with its template) for the catalog at catalogPath,
// with dummy bundles beside it; manifest, when set, is the bundles'
// deploy.json instead of the one their build would write.
func synthCatalog(t *testing.T, id, catalogPath string, manifest []byte) (awscdk.Stack, map[string]any) {
	t.Helper()
	return synthCatalogWith(t, id, catalogPath, manifest, nil)
}

// synthCatalogWith is synthCatalog with the context values extra beside
// cdk.json's.
func synthCatalogWith(t *testing.T, id, catalogPath string, manifest []byte, extra map[string]any) (awscdk.Stack, map[string]any) {
	t.Helper()
	tmp := filepath.Dir(catalogPath)
	context := maps.Clone(broker.context)
	maps.Copy(context, extra)
	context[ContextCatalog] = catalogPath
	for key, name := range map[string]string{ContextAPICode: "api", ContextWorkerCode: "worker"} {
		dir := filepath.Join(tmp, name)
		if err := dummyAsset(dir, catalogPath); err != nil {
			t.Fatal(err)
		}
		if manifest != nil {
			if err := os.WriteFile(filepath.Join(dir, deploy.ManifestName), manifest, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		context[key] = dir
	}
	app := awscdk.NewApp(&awscdk.AppProps{Context: &context, Outdir: jsii.String(filepath.Join(tmp, "cdk.out"))})
	props, err := PropsFromContext(app.Node())
	if err != nil {
		t.Fatal(err)
	}
	stack, err := NewBrokerStack(app, id, &props)
	if err != nil {
		t.Fatal(err)
	}
	var template map[string]any
	check(t, func() { template = *assertions.Template_FromStack(stack, nil).ToJSON() })
	if template == nil {
		t.FailNow()
	}
	return stack, template
}

// TestStackLetsTheWorkerAssumeExactlyTheCatalogsTargetRoles synthesizes the
// stack for a catalog whose S3 plan places instances in other accounts (by
// space, with a default and a retired place): the worker may
// sts:AssumeRole exactly the roles the placement names, in one statement,
// the api function (which runs no CloudFormation change) only those of the
// pool, whose stacks it counts at a provision request, and cdk-nag finds
// nothing.
func TestStackLetsTheWorkerAssumeExactlyTheCatalogsTargetRoles(t *testing.T) {
	const (
		payments = "arn:aws:iam::222222222222:role/osb-target"
		ledger   = "arn:aws:iam::333333333333:role/osb-target"
		retired  = "arn:aws:iam::444444444444:role/osb-target"
		pool1    = "arn:aws:iam::555555555555:role/osb-target"
		pool2    = "arn:aws:iam::666666666666:role/osb-target"
		vault    = "arn:aws:iam::777777777777:role/osb-target"
		// pool2's external id is in a secret given by its whole ARN,
		// vault's in one given by its name (in the broker's account).
		pool2Secret = "arn:aws:secretsmanager:eu-west-1:111111111111:secret:osb/pool-2-AbC123"
	)
	tmp := t.TempDir()
	for _, f := range []string{"s3-bucket/instance.yaml", "s3-bucket/binding.yaml"} {
		body, err := os.ReadFile(filepath.Join("services", f)) // the tests run at the repository's root
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(tmp, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, f), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	catalogPath := filepath.Join(tmp, "catalog.yaml")
	doc := `services:
  - id: 5d0c8a4e-2f0c-4b8e-9d2b-6a1f4e3c7b01
    name: buckets
    description: A bucket where the space's data lives.
    bindable: true
    plans:
      - id: 5d0c8a4e-2f0c-4b8e-9d2b-6a1f4e3c7b02
        name: placed
        description: Placed by space.
        schemas:
          service_instance:
            create: {parameters: {$schema: "http://json-schema.org/draft-04/schema#", type: object, properties: {}}}
          service_binding:
            create: {parameters: {$schema: "http://json-schema.org/draft-04/schema#", type: object, properties: {}}}
        broker:
          driver: cloudformation
          mode: async-only
          template: s3-bucket/instance.yaml
          binding_template: s3-bucket/binding.yaml
          placement:
            by: space
            map:
              space-payments: {region: eu-west-1, role_arn: "` + payments + `", external_id: payments-7f3a}
              space-ledger: {region: eu-central-1, role_arn: "` + ledger + `", external_id_env: LEDGER_EXTERNAL_ID}
              space-pooled:
                region: eu-west-1
                pool: [{role_arn: "` + pool1 + `", external_id: pool-1}, {role_arn: "` + pool2 + `", external_id_secret: "` + pool2Secret + `"}]
              space-vault: {region: eu-west-1, role_arn: "` + vault + `", external_id_secret: osb/vault-external-id}
            default: {region: eu-west-1, role_arn: "` + payments + `", external_id: payments-7f3a}
            retired:
              - {role_arn: "` + retired + `", external_id: old-7f3a}
`
	if err := os.WriteFile(catalogPath, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	stack, template := synthCatalog(t, "Placed", catalogPath, nil)

	t.Run("the worker may assume exactly the roles the placement names, once each", func(t *testing.T) {
		got := statementsAllowing(t, template, "WorkerRole", "sts:AssumeRole")
		if want := []any{payments, ledger, retired, pool1, pool2, vault}; len(got) != 1 || !jsonEqual(got[0]["Resource"], want) || !jsonEqual(got[0]["Action"], "sts:AssumeRole") {
			t.Fatalf("sts:AssumeRole statements %v, want one on %v", got, want)
		}
	})
	t.Run("the api function may assume the pool's roles only", func(t *testing.T) {
		got := statementsAllowing(t, template, "ApiRole", "sts:AssumeRole")
		if len(got) != 1 || !jsonEqual(got[0]["Resource"], []any{pool1, pool2}) {
			t.Fatalf("sts:AssumeRole statements %v, want one on %s and %s", got, pool1, pool2)
		}
	})
	t.Run("the worker may read exactly the secrets that hold external ids, the api those of the pool", func(t *testing.T) {
		// The api reads the broker's own credentials too (ReadCredentials).
		bySid := func(role, sid string) []object {
			var out []object
			for _, s := range statementsAllowing(t, template, role, "secretsmanager:GetSecretValue") {
				if s["Sid"] == sid {
					out = append(out, s)
				}
			}
			return out
		}
		got := bySid("WorkerRole", "ReadExternalIds")
		if len(got) != 1 || !jsonEqual(got[0]["Action"], "secretsmanager:GetSecretValue") {
			t.Fatalf("ReadExternalIds statements of the worker %v, want one allowing secretsmanager:GetSecretValue", got)
		}
		if n := len(statementsAllowing(t, template, "WorkerRole", "secretsmanager:")); n != 1 {
			t.Errorf("%d statements of the worker allow Secrets Manager, want 1", n)
		}
		resources, _ := got[0]["Resource"].([]any)
		byName := object{"Fn::Join": []any{"", []any{"arn:", object{"Ref": "AWS::Partition"}, ":secretsmanager:", object{"Ref": "AWS::Region"}, ":",
			object{"Ref": "AWS::AccountId"}, ":secret:osb/vault-external-id-??????"}}}
		if len(resources) != 2 || !slices.ContainsFunc(resources, func(r any) bool { return jsonEqual(r, pool2Secret) }) ||
			!slices.ContainsFunc(resources, func(r any) bool { return jsonEqual(r, byName) }) {
			t.Errorf("the worker reads %v, want %v and %s", got[0]["Resource"], byName, pool2Secret)
		}
		api := bySid("ApiRole", "ReadPoolExternalIds")
		if len(api) != 1 || !jsonEqual(api[0]["Resource"], pool2Secret) {
			t.Errorf("ReadPoolExternalIds statements of the api %v, want one on %s", api, pool2Secret)
		}
	})
	t.Run("the api function is told the stack prefix, which it counts a pool's stacks by", func(t *testing.T) {
		found := 0
		for id, r := range template["Resources"].(object) {
			r := r.(object)
			if r["Type"] != "AWS::Lambda::Function" || !strings.HasPrefix(id, "Api") {
				continue
			}
			found++
			vars := r["Properties"].(object)["Environment"].(object)["Variables"].(object)
			if vars[env.StackPrefix] != "osb" {
				t.Errorf("%s: %s = %v, want osb", id, env.StackPrefix, vars[env.StackPrefix])
			}
		}
		if found != 1 {
			t.Errorf("%d api functions, want 1", found)
		}
	})
	t.Run("an alarm fires on the worker's line that says a pool is nearly full", func(t *testing.T) {
		var filters []object
		for _, r := range template["Resources"].(object) {
			if r := r.(object); r["Type"] == "AWS::Logs::MetricFilter" {
				filters = append(filters, r["Properties"].(object))
			}
		}
		if len(filters) != 1 || filters[0]["FilterPattern"] != `{ $.msg = "pool nearly full" }` ||
			!jsonEqual(filters[0]["LogGroupName"], object{"Ref": logicalID(t, "WorkerLogs")}) {
			t.Fatalf("metric filters %v, want one on the worker's log lines \"pool nearly full\"", filters)
		}
		metric := filters[0]["MetricTransformations"].([]any)[0].(object)["MetricName"]
		found := false
		for id, r := range template["Resources"].(object) {
			r := r.(object)
			if r["Type"] == "AWS::CloudWatch::Alarm" && strings.HasPrefix(id, "PoolNearlyFullAlarm") {
				found = r["Properties"].(object)["MetricName"] == metric
			}
		}
		if !found {
			t.Errorf("no alarm PoolNearlyFullAlarm on %v", metric)
		}
	})
	t.Run("the default catalog places nothing: no role is granted", func(t *testing.T) {
		for _, role := range []string{"WorkerRole", "ApiRole"} {
			if got := statementsAllowing(t, broker.json, role, "sts:AssumeRole"); len(got) != 0 {
				t.Errorf("%s: %v", role, got)
			}
		}
	})
	t.Run("cdk-nag finds nothing", func(t *testing.T) {
		if found := nagFindings(t, stack); len(found) != 0 {
			t.Errorf("findings: %q", found)
		}
	})
}
