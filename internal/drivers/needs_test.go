package drivers

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/drivers/cloudformation"
	"github.com/serverless-osb/broker/internal/env"
)

// grant is one declared statement, as the table below spells it: the
// function, the Sid, the actions, the resources.
type grant struct {
	function  deploy.Function
	sid       string
	actions   []string
	resources []string
}

// TestManifestDeclaresWhatTheCatalogsDriversNeed: each catalog gives the
// drivers it uses, in name order, and what each declares its plans need of
// the stack, from the plans' settings.
func TestManifestDeclaresWhatTheCatalogsDriversNeed(t *testing.T) {
	const fnARN = "arn:aws:lambda:eu-west-1:123456789012:function:tenants-broker"
	const secretA = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:a-AbC123"
	const secretB = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:b-XyZ789"
	stacks := "arn:${Partition}:cloudformation:${Region}:${Account}:stack/${StackPrefix}-*/*"
	// What every catalog with cloudformation plans grants the worker.
	stackGrants := []grant{
		{deploy.Worker, "ChangeServiceStacks", []string{"cloudformation:CreateStack", "cloudformation:DeleteStack", "cloudformation:CreateChangeSet", "cloudformation:ContinueUpdateRollback"}, []string{stacks}},
		{deploy.Worker, "TagServiceStacks", []string{"cloudformation:TagResource", "cloudformation:UntagResource"}, []string{stacks}},
		{deploy.Worker, "ChangeSetsOfServiceStacks", []string{"cloudformation:DescribeChangeSet", "cloudformation:ExecuteChangeSet", "cloudformation:DeleteChangeSet", "cloudformation:SetStackPolicy", "cloudformation:GetTemplate"}, []string{stacks}},
		{deploy.Worker, "ReadServiceStacks", []string{"cloudformation:DescribeStacks", "cloudformation:DescribeStackEvents", "cloudformation:DescribeStackResources"}, []string{stacks}},
		{deploy.Worker, "PassServiceRole", []string{"iam:PassRole"}, []string{deploy.ServiceRoleARN}},
	}
	services, err := catalog.Load("../../services/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		cat         *catalog.Catalog
		drivers     []string
		grants      []grant
		env         []deploy.Variable
		serviceRole bool
		// customResources are the Custom:: types the templates declare,
		// whose functions the stack deploys.
		customResources []string
	}{
		{name: "the demo needs nothing", cat: loadCatalog(t, "", "driver: demo\nmode: async"), drivers: []string{"demo"}},
		{name: "cloudformation plans need the service role, the worker's calls on the prefix's stacks, and its environment",
			cat: services, drivers: []string{"cloudformation"}, serviceRole: true,
			customResources: []string{deploy.CacheUserGroupMember, "Custom::DatabaseUser"},
			grants:          stackGrants,
			env: []deploy.Variable{
				{Function: deploy.Worker, Name: env.CFNRoleARN, Value: deploy.ServiceRoleARN},
				{Function: deploy.Worker, Name: env.StackPrefix, Value: deploy.StackPrefix},
				{Function: deploy.Worker, Name: env.PermissionsBoundaryARN, Value: deploy.PermissionsBoundaryARN},
			}},
		// Only a template over CloudFormation's body limit goes through
		// S3 (make build keeps the S3 client for it): then, and only then,
		// the worker may write and read the templates' bucket, and is told
		// its name.
		{name: "cloudformation plans with a template over the body limit need the templates' bucket too",
			cat: overBodyCatalog(t), drivers: []string{"cloudformation"}, serviceRole: true,
			grants: append(slices.Clone(stackGrants),
				grant{deploy.Worker, "ServiceTemplates", []string{"s3:GetObject", "s3:PutObject"}, []string{deploy.TemplateBucketARN + "/templates/*"}},
				grant{deploy.Worker, "FindServiceTemplates", []string{"s3:ListBucket"}, []string{deploy.TemplateBucketARN}},
			),
			env: []deploy.Variable{
				{Function: deploy.Worker, Name: env.CFNRoleARN, Value: deploy.ServiceRoleARN},
				{Function: deploy.Worker, Name: env.StackPrefix, Value: deploy.StackPrefix},
				{Function: deploy.Worker, Name: env.PermissionsBoundaryARN, Value: deploy.PermissionsBoundaryARN},
				{Function: deploy.Worker, Name: env.TemplateBucket, Value: deploy.TemplateBucket},
			}},
		{name: "function plans need their Lambda functions and secrets: the worker all, the api function the synchronous plans'",
			cat: loadCatalog(t,
				"driver: function\nmode: async-only\nfunction: "+fnARN,
				"driver: function\nmode: sync\nfunction: quick-broker:live",
				"driver: function\nmode: async\nurl: https://a.example.com/osb\nsecret_arn: "+secretA,
				"driver: function\nmode: async-only\nurl: https://b.example.com/osb\nsecret_arn: "+secretB,
				"driver: function\nmode: sync\nurl: https://a.example.com/osb\nsecret_arn: "+secretA,
				"driver: function\nmode: async\nurl: https://c.example.com/osb\nsecret_env: C_SECRET",
				""),
			drivers: []string{"demo", "function"},
			grants: []grant{
				{deploy.Worker, "InvokeServiceFunctions", []string{"lambda:InvokeFunction"}, []string{fnARN, "arn:${Partition}:lambda:${Region}:${Account}:function:quick-broker:live"}},
				{deploy.Worker, "ReadServiceSecrets", []string{"secretsmanager:GetSecretValue"}, []string{secretA, secretB}},
				{deploy.API, "InvokeServiceFunctions", []string{"lambda:InvokeFunction"}, []string{"arn:${Partition}:lambda:${Region}:${Account}:function:quick-broker:live"}},
				{deploy.API, "ReadServiceSecrets", []string{"secretsmanager:GetSecretValue"}, []string{secretA}},
			}},
		{name: "function plans on HTTPS targets with their secrets in variables or files need nothing",
			cat:     loadCatalog(t, "driver: function\nmode: async\nurl: https://c.example.com/osb\nsecret_env: C_SECRET"),
			drivers: []string{"function"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Manifest(tt.cat)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			var grants []grant
			var vars []deploy.Variable
			var types []string
			serviceRole := false
			for _, d := range m.Drivers {
				names = append(names, d.Name)
				for _, s := range d.Needs.Statements {
					grants = append(grants, grant{s.Function, s.Sid, s.Actions, s.Resources})
				}
				vars = append(vars, d.Needs.Env...)
				serviceRole = serviceRole || d.Needs.ServiceRole
				types = append(types, d.Needs.CustomResources...)
			}
			if !slices.Equal(names, tt.drivers) {
				t.Errorf("drivers %v, want %v", names, tt.drivers)
			}
			if !reflect.DeepEqual(grants, tt.grants) {
				t.Errorf("statements\n%v\nwant\n%v", grants, tt.grants)
			}
			if !reflect.DeepEqual(vars, tt.env) {
				t.Errorf("environment %v, want %v", vars, tt.env)
			}
			if serviceRole != tt.serviceRole || m.ServiceRole() != tt.serviceRole {
				t.Errorf("service role %v, want %v", serviceRole, tt.serviceRole)
			}
			if !slices.Equal(types, tt.customResources) {
				t.Errorf("custom resources %v, want %v", types, tt.customResources)
			}
		})
	}
	t.Run("cloudformation plans whose templates declare no custom resource declare none", func(t *testing.T) {
		cat := queueCatalog(t, "Resources:\n  Queue:\n    Type: AWS::SQS::Queue\nOutputs:\n  QueueUrl:\n    Value: !Ref Queue\n")
		m, err := Manifest(cat)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Drivers) != 1 || m.Drivers[0].Name != "cloudformation" || len(m.Drivers[0].Needs.CustomResources) != 0 ||
			m.CustomResource(deploy.CacheUserGroupMember) {
			t.Errorf("manifest %+v, want the cloudformation driver with no custom resource", m)
		}
	})
	t.Run("the manifest lists the files the settings read", func(t *testing.T) {
		m, err := Manifest(services)
		if err != nil {
			t.Fatal(err)
		}
		files, err := Files(services)
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 || !slices.Equal(m.Files, files) {
			t.Errorf("files %v, want %v", m.Files, files)
		}
	})
	t.Run("a catalog with a problem gives no manifest", func(t *testing.T) {
		if _, err := Manifest(loadCatalog(t, "driver: terraform")); err == nil {
			t.Error("no error")
		}
	})
}

// overBodyCatalog is a catalog of one cloudformation plan whose template
// is over CloudFormation's body limit (cloudformation.MaxTemplateBody).
func overBodyCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	return queueCatalog(t, "Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n"+strings.Repeat("# padding\n", cloudformation.MaxTemplateBody/10+1))
}

// queueCatalog is a catalog of one asynchronous cloudformation plan whose
// instance template is template.
func queueCatalog(t *testing.T, template string) *catalog.Catalog {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "instance.yaml"), []byte(template), 0o600); err != nil {
		t.Fatal(err)
	}
	catalogPath := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(catalogPath, []byte("services:\n  - id: q\n    name: q\n    description: d\n    bindable: false\n    plans:\n"+
		"      - id: p\n        name: p\n        description: d\n        broker:\n          driver: cloudformation\n          mode: async-only\n"+
		"          template: instance.yaml\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Load(catalogPath)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}
