package infra

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"gopkg.in/yaml.v3"

	"github.com/serverless-osb/broker/internal/deploy"
)

// shippedCatalogWith writes the shipped catalog, changed by edit, beside
// a copy of its templates, and returns its path.
func shippedCatalogWith(t *testing.T, edit func(cat map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("services")); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile("services/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cat map[string]any
	if err := yaml.Unmarshal(text, &cat); err != nil {
		t.Fatal(err)
	}
	edit(cat)
	if text, err = yaml.Marshal(cat); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(path, text, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// placedCatalog is the shipped catalog, with its templates, whose RDS
// PostgreSQL plans are placed in account 111111111111, eu-west-1, with a
// network there, and whose Valkey plans are placed there too.
func placedCatalog(t *testing.T) string {
	t.Helper()
	return shippedCatalogWith(t, func(cat map[string]any) {
		cat["networks"] = map[string]any{"data": map[string]any{"account": "111111111111", "region": "eu-west-1",
			"vpc_id": "vpc-0aaaaaaaaaaaaaaa0", "subnet_ids": []any{"subnet-0aaaaaaaaaaaaaaa0", "subnet-0aaaaaaaaaaaaaaa1"},
			"client_security_group_id": "sg-0aaaaaaaaaaaaaaa0"}}
		placement := map[string]any{"role_arn": "arn:aws:iam::111111111111:role/serverless-osb-target-osb", "external_id": "data-12345", "region": "eu-west-1"}
		placed := 0
		for _, s := range cat["services"].([]any) {
			s := s.(map[string]any)
			name := s["name"]
			if name != "aws-rds-postgresql" && name != "aws-elasticache-valkey" {
				continue
			}
			for _, p := range s["plans"].([]any) {
				b := p.(map[string]any)["broker"].(map[string]any)
				b["placement"] = placement
				if name == "aws-rds-postgresql" {
					b["network"] = "data"
				}
				placed++
			}
		}
		if placed < 2 {
			t.Fatalf("placed %d plans of the shipped catalog, want its RDS PostgreSQL and Valkey plans", placed)
		}
	})
}

// handlerBundles writes dummy bundles of the dbuser and cacheuser
// functions, each a directory and its zip as make build writes them, and
// returns the directories and the keys their zips go under.
func handlerBundles(t *testing.T) (dbuser, cacheuser string, keys map[string]string) {
	t.Helper()
	dir := t.TempDir()
	keys = map[string]string{}
	for _, name := range []string{"dbuser", "cacheuser"} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		zip := []byte("a bundle of " + name)
		if err := os.WriteFile(filepath.Join(dir, name+".zip"), zip, 0o644); err != nil {
			t.Fatal(err)
		}
		keys[name] = deploy.HandlerCodeKey(name, zip)
	}
	return filepath.Join(dir, "dbuser"), filepath.Join(dir, "cacheuser"), keys
}

// TestTheTargetStackDeploysTheFunctionsItsPlacedPlansCall: for a catalog
// whose RDS PostgreSQL plans are placed in another account with a network
// there, and whose Valkey plans are placed there too, the target stack
// takes the bucket of the functions' code as a parameter and deploys the
// cacheuser function and the dbuser function of that network's VPC under
// the names the templates call (the broker's own), with code under the
// keys of the bundles it was synthesized from; the dbuser function, its
// security group, role and log group only in that network's account and
// Region (one template for every account of a StackSet). cdk-nag and
// cfn-lint find nothing. The shipped catalog, which places nothing, gets
// none of it (TestTargetStack: two roles, a boundary, a bucket).
func TestTheTargetStackDeploysTheFunctionsItsPlacedPlansCall(t *testing.T) {
	catalogPath := placedCatalog(t)
	worker := filepath.Join(filepath.Dir(catalogPath), "worker")
	if err := dummyAsset(worker, catalogPath); err != nil {
		t.Fatal(err)
	}
	dbuser, cacheuser, keys := handlerBundles(t)
	app := awscdk.NewApp(&awscdk.AppProps{Context: &broker.context, Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
	stack, err := NewTargetStack(app, "PlacedTarget", &TargetStackProps{WorkerCodeDir: worker, StackPrefix: "osb",
		DatabaseUserCodeDir: dbuser, CacheUserCodeDir: cacheuser})
	if err != nil {
		t.Fatal(err)
	}
	var template map[string]any
	check(t, func() { template = *assertions.Template_FromStack(stack, nil).ToJSON() })
	var tpl struct {
		Parameters map[string]any
		Conditions map[string]any
		Resources  map[string]struct {
			Type       string         `json:"Type"`
			Condition  string         `json:"Condition"`
			Properties map[string]any `json:"Properties"`
		}
	}
	text, _ := json.Marshal(template)
	if err := json.Unmarshal(text, &tpl); err != nil {
		t.Fatal(err)
	}
	if tpl.Parameters[TargetParamHandlerCodeBucket] == nil {
		t.Fatalf("no parameter %s: %v", TargetParamHandlerCodeBucket, tpl.Parameters)
	}
	functions := map[string]struct {
		condition string
		props     map[string]any
	}{}
	conditioned := map[string]string{}
	for id, r := range tpl.Resources {
		if r.Type == "AWS::Lambda::Function" {
			name, _ := r.Properties["FunctionName"].(string)
			functions[name] = struct {
				condition string
				props     map[string]any
			}{r.Condition, r.Properties}
		}
		if r.Condition != "" {
			conditioned[id] = r.Type
		}
	}
	code := func(props map[string]any) (bucket any, key any) {
		c, _ := props["Code"].(map[string]any)
		return c["S3Bucket"], c["S3Key"]
	}
	t.Run("the cacheuser function, in every account, its code from the bucket", func(t *testing.T) {
		fn, ok := functions[CacheUserFunctionName("osb")]
		if !ok {
			t.Fatalf("no function %s: %v", CacheUserFunctionName("osb"), functions)
		}
		bucket, key := code(fn.props)
		if b, _ := json.Marshal(bucket); string(b) != `{"Ref":"HandlerCodeBucket"}` || key != keys["cacheuser"] || fn.condition != "" {
			t.Errorf("code %s %v, condition %q: want the parameter's bucket, key %s, no condition", b, key, fn.condition, keys["cacheuser"])
		}
	})
	t.Run("the dbuser function of the network's VPC, only in its account and Region", func(t *testing.T) {
		name := deploy.DatabaseUserFunctionName("osb", "vpc-0aaaaaaaaaaaaaaa0")
		fn, ok := functions[name]
		if !ok {
			t.Fatalf("no function %s: %v", name, functions)
		}
		if _, key := code(fn.props); key != keys["dbuser"] {
			t.Errorf("key %v, want %s", key, keys["dbuser"])
		}
		vpc, _ := json.Marshal(fn.props["VpcConfig"])
		for _, want := range []string{"subnet-0aaaaaaaaaaaaaaa0", "subnet-0aaaaaaaaaaaaaaa1", "sg-0aaaaaaaaaaaaaaa0"} {
			if !strings.Contains(string(vpc), want) {
				t.Errorf("VpcConfig %s lacks %s", vpc, want)
			}
		}
		cond, _ := json.Marshal(tpl.Conditions[fn.condition])
		for _, want := range []string{`"Ref":"AWS::AccountId"`, `"111111111111"`, `"Ref":"AWS::Region"`, `"eu-west-1"`} {
			if !strings.Contains(string(cond), want) {
				t.Errorf("its condition %q is %s, which lacks %s", fn.condition, cond, want)
			}
		}
		var types []string
		for _, typ := range conditioned {
			types = append(types, typ)
		}
		for _, want := range []string{"AWS::EC2::SecurityGroup", "AWS::IAM::Role", "AWS::IAM::Policy", "AWS::Logs::LogGroup"} {
			if !strings.Contains(strings.Join(types, " "), want) {
				t.Errorf("no %s under a condition (conditioned: %v)", want, conditioned)
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
		if err := os.WriteFile(path, text, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cfn-lint", path).CombinedOutput(); err != nil {
			t.Errorf("cfn-lint: %v\n%s", err, out)
		}
	})
	t.Run("make target-assets uploads the bundles under the keys the template names", func(t *testing.T) {
		dir := t.TempDir()
		for name := range keys {
			bundle := map[string]string{"dbuser": dbuser, "cacheuser": cacheuser}[name] + ".zip"
			if err := os.MkdirAll(filepath.Join(dir, "dist"), 0o755); err != nil {
				t.Fatal(err)
			}
			text, err := os.ReadFile(bundle)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "dist", name+".zip"), text, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		makefile, err := filepath.Abs("Makefile")
		if err != nil {
			t.Fatal(err)
		}
		// The aws CLI's part is echoed: what it would copy, and where.
		cmd := exec.Command("make", "-s", "-f", makefile, "target-assets", "BUCKET=handlers", "AWS=echo")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make target-assets: %v\n%s", err, out)
		}
		for name, key := range keys {
			if want := "s3 cp dist/" + name + ".zip s3://handlers/" + key; !strings.Contains(string(out), want) {
				t.Errorf("make target-assets said %q, want %q", out, want)
			}
		}
		cmd = exec.Command("make", "-s", "-f", makefile, "target-assets", "AWS=echo")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "BUCKET=... names the bucket") {
			t.Errorf("without BUCKET: %v, %s", err, out)
		}
	})
}
