package infra

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/internal/drivers/cloudformation"
	"github.com/serverless-osb/broker/internal/env"
)

// TestTheWorkerIsGrantedTheTemplatesBucketOnlyWhenATemplateGoesThroughIt
// synthesizes the stack for the bundled catalog, whose templates are all
// within CloudFormation's body limit (make build leaves the S3 client out
// of the worker: osb_without_s3), and for a catalog with one template
// over it, which the worker puts in the templates' bucket: the first
// makes no bucket, grants the worker nothing of S3 and sets it no
// BROKER_TEMPLATE_BUCKET; the second makes the bucket, grants the worker
// exactly its templates/ folder (and ListBucket on it) and sets the
// variable to its name; cdk-nag finds nothing in either.
func TestTheWorkerIsGrantedTheTemplatesBucketOnlyWhenATemplateGoesThroughIt(t *testing.T) {
	buckets := func(template map[string]any) []string {
		var ids []string
		for id, r := range template["Resources"].(object) {
			if r.(object)["Type"] == "AWS::S3::Bucket" && strings.HasPrefix(id, "ServiceTemplates") {
				ids = append(ids, id)
			}
		}
		return ids
	}
	workerVariables := func(t *testing.T, template map[string]any) object {
		return resourceWithPrefix(t, template, "WorkerFunction")["Properties"].(object)["Environment"].(object)["Variables"].(object)
	}

	t.Run("with every template within the limit, the worker is granted nothing of S3 and there is no bucket", func(t *testing.T) {
		if got := statementsAllowing(t, broker.json, "WorkerRole", "s3:"); len(got) != 0 {
			t.Errorf("the worker's role allows S3: %v", got)
		}
		if ids := buckets(broker.json); len(ids) != 0 {
			t.Errorf("buckets of templates %v, which nothing writes or reads", ids)
		}
		if v, ok := workerVariables(t, broker.json)[env.TemplateBucket]; ok {
			t.Errorf("%s = %v: the worker is told a bucket it never uses", env.TemplateBucket, v)
		}
	})

	catalogPath := overBodyCatalog(t)
	stack, template := synthCatalog(t, "OverBody", catalogPath, nil)

	t.Run("with a template over the limit, the worker may write and read the bucket's templates, and is told its name", func(t *testing.T) {
		ids := buckets(template)
		if len(ids) != 1 {
			t.Fatalf("buckets of templates %v, want one", ids)
		}
		bucketARN := object{"Fn::GetAtt": []any{ids[0], "Arn"}}
		objects := statementsAllowing(t, template, "WorkerRole", "s3:PutObject")
		if len(objects) != 1 || objects[0]["Sid"] != "ServiceTemplates" ||
			!jsonEqual(objects[0]["Action"], []any{"s3:GetObject", "s3:PutObject"}) ||
			!jsonEqual(objects[0]["Resource"], object{"Fn::Join": []any{"", []any{bucketARN, "/templates/*"}}}) {
			t.Errorf("s3:PutObject statements %v, want ServiceTemplates: s3:GetObject and s3:PutObject on %s/templates/*", objects, ids[0])
		}
		list := statementsAllowing(t, template, "WorkerRole", "s3:ListBucket")
		if len(list) != 1 || list[0]["Sid"] != "FindServiceTemplates" || !jsonEqual(list[0]["Resource"], bucketARN) {
			t.Errorf("s3:ListBucket statements %v, want FindServiceTemplates on %s", list, ids[0])
		}
		if v := workerVariables(t, template)[env.TemplateBucket]; !jsonEqual(v, object{"Ref": ids[0]}) {
			t.Errorf("%s = %v, want the bucket's name (Ref %s)", env.TemplateBucket, v, ids[0])
		}
		if got := statementsAllowing(t, template, "ApiRole", "s3:"); len(got) != 0 {
			t.Errorf("the api function's role allows S3: %v", got)
		}
	})
	t.Run("cdk-nag finds nothing", func(t *testing.T) {
		if found := nagFindings(t, stack); len(found) != 0 {
			t.Errorf("findings: %q", found)
		}
	})
}

// TestTargetRoleReachesTheTemplatesOfTheAccountsBuckets synthesizes the
// target stack for a catalog with a template over CloudFormation's body
// limit: the role the worker assumes may write and read the templates of
// the account's buckets of templates (every Region's: the role is the
// account's), and list those buckets, nothing else of S3.
func TestTargetRoleReachesTheTemplatesOfTheAccountsBuckets(t *testing.T) {
	catalogPath := overBodyCatalog(t)
	worker := filepath.Join(filepath.Dir(catalogPath), "worker")
	if err := dummyAsset(worker, catalogPath); err != nil {
		t.Fatal(err)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Context: &broker.context, Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
	stack, err := NewTargetStack(app, "OverBodyTarget", &TargetStackProps{WorkerCodeDir: worker, StackPrefix: "osb"})
	if err != nil {
		t.Fatal(err)
	}
	var template map[string]any
	check(t, func() { template = *assertions.Template_FromStack(stack, nil).ToJSON() })
	if template == nil {
		t.FailNow()
	}
	target := resourceWithPrefix(t, template, "TargetRole")["Properties"].(object)
	policy := target["Policies"].([]any)[0].(object)["PolicyDocument"].(object)["Statement"].([]any)
	var s3 []string
	for _, s := range policy {
		s := s.(object)
		text, _ := json.Marshal(s["Action"])
		if !strings.Contains(string(text), "s3:") {
			continue
		}
		s3 = append(s3, s["Sid"].(string))
		switch s["Sid"] {
		case "ServiceTemplates":
			want := object{"Fn::Join": []any{"", []any{"arn:", partition, ":s3:::osb-tpl-osb-", account, "-*/templates/*"}}}
			if !jsonEqual(s["Resource"], want) || !jsonEqual(s["Action"], []any{"s3:GetObject", "s3:PutObject"}) {
				t.Errorf("ServiceTemplates: %v on %v, want s3:GetObject and s3:PutObject on %v", s["Action"], s["Resource"], want)
			}
		case "FindServiceTemplates":
			if want := (object{"Fn::Join": []any{"", []any{"arn:", partition, ":s3:::osb-tpl-osb-", account, "-*"}}}); !jsonEqual(s["Resource"], want) {
				t.Errorf("FindServiceTemplates on %v, want the account's buckets %v", s["Resource"], want)
			}
		}
	}
	if want := []string{"ServiceTemplates", "FindServiceTemplates"}; !slices.Equal(s3, want) {
		t.Errorf("the statements granting S3 %v, want %v", s3, want)
	}
	if found := nagFindings(t, stack); len(found) != 0 {
		t.Errorf("findings: %q", found)
	}
}

// overBodyCatalog writes a catalog of one cloudformation plan whose
// template is over CloudFormation's body limit, and returns its path.
func overBodyCatalog(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	big := "Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n" + strings.Repeat("# padding\n", cloudformation.MaxTemplateBody/10+1)
	if err := os.WriteFile(filepath.Join(tmp, "instance.yaml"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	catalogPath := filepath.Join(tmp, "catalog.yaml")
	if err := os.WriteFile(catalogPath, []byte("services:\n  - id: q\n    name: q\n    description: d\n    bindable: false\n    plans:\n"+
		"      - id: p\n        name: p\n        description: d\n        broker:\n          driver: cloudformation\n          mode: async-only\n"+
		"          template: instance.yaml\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return catalogPath
}
