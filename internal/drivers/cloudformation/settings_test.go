package cloudformation

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/env"
)

// instanceTemplate has five resources, parameters of each kind the driver
// converts, one without a Default, and a dashboard output.
const instanceTemplate = `AWSTemplateFormatVersion: "2010-09-09"
Parameters:
  Versioning:
    Type: String
    Default: Suspended
    AllowedValues: [Enabled, Suspended]
  Size:
    Type: Number
    Default: 1
  Subnets:
    Type: CommaDelimitedList
    Default: ""
  Settings:
    Type: String
    Default: "{}"
  Owner:
    Type: String
Resources:
  Bucket:
    Type: AWS::S3::Bucket
    Properties:
      VersioningConfiguration:
        Status: !Ref Versioning
  BucketPolicy:
    Type: AWS::S3::BucketPolicy
    Properties:
      Bucket: !Ref Bucket
  Queue:
    Type: AWS::SQS::Queue
  Topic:
    Type: AWS::SNS::Topic
  Table:
    Type: AWS::DynamoDB::Table
Outputs:
  BucketName:
    Value: !Ref Bucket
  BucketArn:
    Value: !GetAtt Bucket.Arn
  DashboardUrl:
    Value: !Sub "https://console.example/${Bucket}"
`

const bindingTemplate = `{
  "Parameters": {
    "BucketName": {"Type": "String"},
    "BucketArn": {"Type": "String"},
    "Access": {"Type": "String", "Default": "ReadWrite", "AllowedValues": ["ReadWrite", "ReadOnly"]},
    "PermissionsBoundaryArn": {"Type": "String", "Default": ""}
  },
  "Conditions": {"HasBoundary": {"Fn::Not": [{"Fn::Equals": [{"Ref": "PermissionsBoundaryArn"}, ""]}]}},
  "Resources": {
    "User": {"Type": "AWS::IAM::User", "Properties": {"PermissionsBoundary": {"Fn::If": ["HasBoundary", {"Ref": "PermissionsBoundaryArn"}, {"Ref": "AWS::NoValue"}]}}},
    "AccessKey": {"Type": "AWS::IAM::AccessKey", "Properties": {"UserName": {"Ref": "User"}}}
  },
  "Outputs": {
    "AccessKeyId": {"Value": {"Ref": "AccessKey"}},
    "SecretAccessKey": {"Value": {"Fn::GetAtt": ["AccessKey", "SecretAccessKey"]}},
    "BucketName": {"Value": {"Ref": "BucketName"}}
  }
}
`

// templateDir writes files (name → body) into a new directory.
func templateDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// schemaPlan parses a one-plan catalog whose plan has a parameters schema
// of each kind given, naming those properties (none: properties: {}), to
// get the *catalog.Plan the broker hands Configure.
func schemaPlan(t *testing.T, schemas map[catalog.SchemaKind][]string) *catalog.Plan {
	t.Helper()
	schema := func(props []string) string {
		out := "\n              parameters:\n                $schema: \"http://json-schema.org/draft-04/schema#\"\n                type: object\n                properties: {"
		for i, p := range props {
			if i > 0 {
				out += ", "
			}
			out += p + ": {}"
		}
		return out + "}"
	}
	var instance, binding string
	if props, ok := schemas[catalog.InstanceCreate]; ok {
		instance += "\n            create:" + schema(props)
	}
	if props, ok := schemas[catalog.InstanceUpdate]; ok {
		instance += "\n            update:" + schema(props)
	}
	if props, ok := schemas[catalog.BindingCreate]; ok {
		binding += "\n            create:" + schema(props)
	}
	var all string
	if instance != "" {
		all += "\n          service_instance:" + instance
	}
	if binding != "" {
		all += "\n          service_binding:" + binding
	}
	if all != "" {
		all = "\n        schemas:" + all
	}
	doc := `services:
  - id: 9a8f4c43-0000-4000-8000-000000000001
    name: s3
    description: buckets
    bindable: true
    plans:
      - id: 9a8f4c43-0000-4000-8000-000000000002
        name: private
        description: a private bucket` + all + "\n"
	cat, err := catalog.Parse("catalog.yaml", []byte(doc))
	if err != nil {
		t.Fatalf("parse test catalog: %v\n%s", err, doc)
	}
	p := cat.Services()[0].Plans[0]
	for k, props := range schemas {
		if !p.HasSchema(k) || !slices.Equal(p.SchemaProperties(k), props) {
			t.Fatalf("the test catalog's %s schema names %v, not %v", k, p.SchemaProperties(k), props)
		}
	}
	return p
}

// shippedPlan is the plan of services/catalog.yaml that uses the service's
// templates (the first, where several do), with the catalog's directory.
func shippedPlan(t *testing.T, svc string) (*catalog.Plan, string) {
	t.Helper()
	cat, err := catalog.Load("../../../services/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cat.Services() {
		for _, p := range s.Plans {
			if p.Settings.Config[KeyTemplate] == svc+"/instance.yaml" {
				return p, cat.Dir
			}
		}
	}
	t.Fatalf("services/catalog.yaml has no plan with the template %s/instance.yaml", svc)
	return nil, ""
}

func TestConfigureReadsTheTemplates(t *testing.T) {
	dir := templateDir(t, map[string]string{"svc/instance.yaml": instanceTemplate, "svc/binding.json": bindingTemplate})
	s, err := Configure(schemaPlan(t, map[catalog.SchemaKind][]string{catalog.InstanceCreate: {"Versioning"}, catalog.InstanceUpdate: {}}), map[string]any{
		"template":         "svc/instance.yaml",
		"binding_template": "svc/binding.json",
		"parameters":       map[string]any{"Owner": "team-a", "Size": 3, "Subnets": []any{"a", "b"}, "Settings": map[string]any{"k": true}},
		"binding_parameters": map[string]any{
			"Access": "ReadOnly",
		},
		"retry_after": 30,
	}, dir)
	if err != nil {
		t.Fatalf("Configure: %v", err)
	}
	if s.Template.Body != instanceTemplate || s.Template.Resources != 5 || s.Template.Path != "svc/instance.yaml" {
		t.Errorf("template: %d resources, path %q, body kept: %v", s.Template.Resources, s.Template.Path, s.Template.Body == instanceTemplate)
	}
	if got := strings.Join(s.Template.Outputs, ","); got != "BucketArn,BucketName,DashboardUrl" {
		t.Errorf("outputs %s", got)
	}
	if p := s.Template.Parameters["Subnets"]; !p.IsList() || !s.Template.Parameters["Versioning"].HasDefault || s.Template.Parameters["Owner"].HasDefault {
		t.Errorf("parameters %+v", s.Template.Parameters)
	}
	want := map[string]string{"Owner": "team-a", "Size": "3", "Subnets": "a,b", "Settings": `{"k":true}`}
	for k, v := range want {
		if s.Parameters[k] != v {
			t.Errorf("fixed parameter %s = %q, want %q", k, s.Parameters[k], v)
		}
	}
	if s.BindingTemplate == nil || s.BindingTemplate.Resources != 2 || s.BindingParameters["Access"] != "ReadOnly" {
		t.Errorf("binding template %+v, parameters %v", s.BindingTemplate, s.BindingParameters)
	}
	if s.RetryAfter != 30*time.Second {
		t.Errorf("retry after %s", s.RetryAfter)
	}
}

func TestConfigureReadsTheShippedServices(t *testing.T) {
	cat, err := catalog.Load("../../../services/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range cat.Services() {
		for _, p := range svc.Plans {
			t.Run(svc.Name+" "+p.Name+" configures with its schemas", func(t *testing.T) {
				s, err := Configure(p, p.Settings.Config, cat.Dir)
				if err != nil {
					t.Fatal(err)
				}
				if s.Template.Resources == 0 || s.BindingTemplate.Resources == 0 || len(s.AcceptedParameters(catalog.InstanceCreate)) == 0 {
					t.Errorf("settings %+v", s)
				}
			})
		}
	}
}

func TestConfigureRefuses(t *testing.T) {
	big := instanceTemplate + "# " + strings.Repeat("x", MaxTemplateURLBody) + "\n"
	dir := templateDir(t, map[string]string{
		"instance.yaml":     instanceTemplate,
		"binding.json":      bindingTemplate,
		"big.yaml":          big,
		"broken.yaml":       "Resources:\n  Bucket: [\n",
		"broken.json":       `{"Resources": {`,
		"list.yaml":         "- just\n- a list\n",
		"noresources.yaml":  "Parameters:\n  A: {Type: String, Default: x}\nOutputs: {}\n",
		"untyped.yaml":      "Parameters:\n  A: {Default: x}\nResources:\n  B: {Type: AWS::SNS::Topic}\n",
		"required.yaml":     "Parameters:\n  Owner: {Type: String}\n  Team: {Type: String}\nResources:\n  B: {Type: AWS::SNS::Topic}\n",
		"bindreq.yaml":      "Parameters:\n  BucketName: {Type: String}\n  Principal: {Type: String}\nResources:\n  U: {Type: AWS::SNS::Topic}\n",
		"emptyparams.yaml":  "Parameters: []\nResources:\n  B: {Type: AWS::SNS::Topic}\n",
		"instance-ok.yaml":  "Parameters:\n  A: {Type: String, Default: x}\n  L: {Type: 'List<AWS::EC2::Subnet::Id>', Default: ''}\nResources:\n  B: {Type: AWS::SNS::Topic}\nOutputs:\n  BucketName: {Value: x}\n  BucketArn: {Value: y}\n",
		"directory/.keep":   "",
		"instance-ok2.yaml": "Resources:\n  B: {Type: AWS::SNS::Topic}\n",
		"sam.yaml":          "Transform: AWS::Serverless-2016-10-31\nResources:\n  F: {Type: AWS::Serverless::Function}\n",
		"macros.json":       `{"Transform": ["AWS::LanguageExtensions", "MyMacro"], "Resources": {"B": {"Type": "AWS::SNS::Topic", "Properties": {"Tags": [{"Fn::Transform": {"Name": "Tags"}}]}}}}`,
		"include.yaml":      "Resources:\n  B:\n    Type: AWS::SNS::Topic\n    Properties:\n      Fn::Transform: {Name: AWS::Include, Parameters: {Location: s3://b/k}}\n",
		"tagged.yaml":       "Resources:\n  B:\n    Type: AWS::SNS::Topic\n    Properties:\n      TopicName: !Transform {Name: MyMacro, Parameters: {}}\n",
		"private.yaml":      "Metadata:\n  serverless-osb: {private_outputs: [Secret]}\nResources:\n  B: {Type: AWS::SNS::Topic}\nOutputs:\n  Arn: {Value: x}\n",
		"private-key.yaml":  "Metadata:\n  serverless-osb: {private: [Arn]}\nResources:\n  B: {Type: AWS::SNS::Topic}\nOutputs:\n  Arn: {Value: x}\n",
	})
	ok := map[string]any{"Owner": "team-a"} // supplies instance.yaml's required parameter
	cases := []struct {
		name     string
		plan     *catalog.Plan
		config   map[string]any
		key      string
		contains []string
	}{
		{name: "a private output the template does not declare is refused",
			config: map[string]any{"template": "private.yaml"}, key: "template", contains: []string{"private_outputs names \"Secret\"", "not one of its outputs"}},
		{name: "a key of the broker's Metadata it does not read is refused",
			config: map[string]any{"template": "private-key.yaml"}, key: "template", contains: []string{"Metadata's serverless-osb has private", "private_outputs only"}},
		{name: "a missing template setting is refused and the message shows the form",
			config: map[string]any{}, key: "template", contains: []string{"is missing", "template: services/s3-bucket/instance.yaml"}},
		{name: "a template that is not a string is refused",
			config: map[string]any{"template": 3}, key: "template", contains: []string{"must be the path", "a number (3)"}},
		{name: "a template file that does not exist is refused with the directory it was looked for in",
			config: map[string]any{"template": "nope.yaml"}, key: "template", contains: []string{"cannot read nope.yaml", dir, "no such file"}},
		{name: "a directory is not a template",
			config: map[string]any{"template": "directory"}, key: "template", contains: []string{"cannot read directory"}},
		{name: "a template over 1,000,000 bytes, more than CloudFormation reads even from S3, is refused",
			config: map[string]any{"template": "big.yaml"}, key: "template", contains: []string{"big.yaml is", "at most 1000000 bytes", "TemplateURL"}},
		{name: "YAML that does not parse is refused",
			config: map[string]any{"template": "broken.yaml"}, key: "template", contains: []string{"broken.yaml is not a usable CloudFormation template", "not valid YAML"}},
		{name: "JSON that does not parse is refused",
			config: map[string]any{"template": "broken.json"}, key: "template", contains: []string{"not valid JSON"}},
		{name: "a template that is not a mapping is refused",
			config: map[string]any{"template": "list.yaml"}, key: "template", contains: []string{"a mapping with a Resources section, got a list"}},
		{name: "a template without Resources is refused",
			config: map[string]any{"template": "noresources.yaml"}, key: "template", contains: []string{"has no Resources"}},
		{name: "a parameter without a Type is refused",
			config: map[string]any{"template": "untyped.yaml"}, key: "template", contains: []string{"parameter A has no Type"}},
		{name: "a Parameters section that is not a mapping is refused",
			config: map[string]any{"template": "emptyparams.yaml"}, key: "template", contains: []string{"Parameters section must be a mapping"}},
		{name: "parameters naming a parameter the template does not declare are refused with the declared ones",
			config: map[string]any{"template": "instance.yaml", "parameters": map[string]any{"Owner": "a", "Versoning": "Enabled"}},
			key:    "parameters.Versoning", contains: []string{"instance.yaml declares no parameter Versoning", "Owner, Settings, Size, Subnets and Versioning"}},
		{name: "parameters that are not a mapping are refused",
			config: map[string]any{"template": "instance.yaml", "parameters": []any{"Owner"}}, key: "parameters", contains: []string{"must be a mapping", "got a list"}},
		{name: "a fixed parameter without a value is refused",
			config: map[string]any{"template": "instance.yaml", "parameters": map[string]any{"Owner": nil}}, key: "parameters.Owner", contains: []string{"has no value"}},
		{name: "a fixed value outside the template's AllowedValues is refused",
			config: map[string]any{"template": "instance.yaml", "parameters": map[string]any{"Owner": "a", "Versioning": "enabled"}},
			key:    "parameters.Versioning", contains: []string{`"enabled" is not one of the values the template allows: Enabled and Suspended`}},
		{name: "a list element with a comma cannot be passed in a comma-delimited list",
			config: map[string]any{"template": "instance.yaml", "parameters": map[string]any{"Owner": "a", "Subnets": []any{"a,b"}}},
			key:    "parameters.Subnets", contains: []string{"must not contain a comma"}},
		{name: "a required template parameter that nothing supplies is refused, saying how to supply it",
			config: map[string]any{"template": "required.yaml", "parameters": map[string]any{"Owner": "a"}},
			key:    "template", contains: []string{"required.yaml: parameter Team has no Default", "fix the value under parameters", "schemas.service_instance.create.parameters"}},
		{name: "several required template parameters are all named",
			config: map[string]any{"template": "required.yaml"},
			key:    "template", contains: []string{"parameters Owner and Team have no Default"}},
		{name: "a required binding parameter that no instance output, fixed value or schema supplies is refused",
			config: map[string]any{"template": "instance-ok.yaml", "binding_template": "bindreq.yaml"},
			key:    "binding_template", contains: []string{"parameter Principal has no Default", "binding_parameters", "service_binding.create"}},
		{name: "a binding template that does not exist is refused",
			config: map[string]any{"template": "instance-ok.yaml", "binding_template": "gone.json"}, key: "binding_template", contains: []string{"cannot read gone.json"}},
		{name: "binding parameters without a binding template are refused",
			config: map[string]any{"template": "instance-ok2.yaml", "binding_parameters": map[string]any{"A": "b"}},
			key:    "binding_parameters", contains: []string{"no binding_template"}},
		{name: "binding parameters may not fix what the instance's outputs supply",
			config: map[string]any{"template": "instance-ok.yaml", "binding_template": "binding.json", "binding_parameters": map[string]any{"BucketArn": "arn:aws:s3:::other"}},
			key:    "binding_parameters.BucketArn", contains: []string{"is an output of the instance template"}},
		{name: "binding parameters naming an undeclared parameter are refused",
			config: map[string]any{"template": "instance-ok.yaml", "binding_template": "binding.json", "binding_parameters": map[string]any{"Acess": "ReadOnly"}},
			key:    "binding_parameters.Acess", contains: []string{"binding_template binding.json declares no parameter Acess"}},
		{name: "an unknown key is refused with the keys there are",
			config: map[string]any{"template": "instance.yaml", "parameters": ok, "templates": "x"},
			key:    "templates", contains: []string{"unknown key", "template, binding_template, parameters, binding_parameters, retry_after"}},
		{name: "a template that declares a Transform is refused: the driver does not let a macro rewrite it past the start-up check",
			config: map[string]any{"template": "sam.yaml"}, key: "template",
			contains: []string{"sam.yaml runs Transform AWS::Serverless-2016-10-31", "without CAPABILITY_AUTO_EXPAND", "expand it yourself"}},
		{name: "a list of transforms is refused, naming each, and an Fn::Transform in JSON too",
			config: map[string]any{"template": "macros.json"}, key: "template",
			contains: []string{"Transform AWS::LanguageExtensions, Transform MyMacro and Fn::Transform at Resources/B/Properties/Tags/0"}},
		{name: "an Fn::Transform (AWS::Include) in a resource is refused",
			config: map[string]any{"template": "include.yaml"}, key: "template", contains: []string{"include.yaml runs Fn::Transform at Resources/B/Properties"}},
		{name: "the short form !Transform is refused too",
			config: map[string]any{"template": "tagged.yaml"}, key: "template", contains: []string{"tagged.yaml runs Fn::Transform at Resources/B/Properties/TopicName"}},
		{name: "a binding template that declares a Transform is refused",
			config: map[string]any{"template": "instance-ok2.yaml", "binding_template": "sam.yaml"}, key: "binding_template",
			contains: []string{"sam.yaml runs Transform AWS::Serverless-2016-10-31"}},
		{name: "a retry_after of zero is refused",
			config: map[string]any{"template": "instance.yaml", "parameters": ok, "retry_after": 0}, key: "retry_after", contains: []string{"from 1 to 3600", "a number (0)"}},
		{name: "a retry_after over an hour is refused",
			config: map[string]any{"template": "instance.yaml", "parameters": ok, "retry_after": 3601}, key: "retry_after", contains: []string{"from 1 to 3600"}},
		{name: "a retry_after that is not a whole number is refused",
			config: map[string]any{"template": "instance.yaml", "parameters": ok, "retry_after": 1.5}, key: "retry_after", contains: []string{"whole number"}},
		{name: "a retry_after given as a string is refused",
			config: map[string]any{"template": "instance.yaml", "parameters": ok, "retry_after": "10s"}, key: "retry_after", contains: []string{`a string ("10s")`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := tc.plan
			if plan == nil {
				// Schemas that let users set nothing: the template's
				// open parameters keep their Default.
				plan = schemaPlan(t, map[catalog.SchemaKind][]string{catalog.InstanceCreate: {}, catalog.BindingCreate: {}})
			}
			_, err := Configure(plan, tc.config, dir)
			var se *catalog.SettingError
			if !errors.As(err, &se) {
				t.Fatalf("Configure: %v, want a *SettingError", err)
			}
			if se.Key != tc.key {
				t.Errorf("key %q, want %q (%s)", se.Key, tc.key, se.Problem)
			}
			for _, want := range tc.contains {
				if !strings.Contains(se.Problem, want) {
					t.Errorf("problem %q does not say %q", se.Problem, want)
				}
			}
		})
	}
}

func TestConfigureAsksTheSchemaToNameRequiredParameters(t *testing.T) {
	dir := templateDir(t, map[string]string{
		"required.yaml": "Parameters:\n  Owner: {Type: String}\nResources:\n  B: {Type: AWS::SNS::Topic}\nOutputs:\n  BucketName: {Value: x}\n",
		"bindreq.yaml":  "Parameters:\n  BucketName: {Type: String}\n  Principal: {Type: String}\nResources:\n  U: {Type: AWS::SNS::Topic}\n",
	})
	config := map[string]any{"template": "required.yaml", "binding_template": "bindreq.yaml"}
	named := map[catalog.SchemaKind][]string{catalog.InstanceCreate: {"Owner"}, catalog.InstanceUpdate: {}, catalog.BindingCreate: {"Principal"}}
	t.Run("a plan whose schemas name them is accepted", func(t *testing.T) {
		if _, err := Configure(schemaPlan(t, named), config, dir); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a binding schema that does not name the binding template's is refused", func(t *testing.T) {
		var se *catalog.SettingError
		plan := schemaPlan(t, map[catalog.SchemaKind][]string{catalog.InstanceCreate: {"Owner"}, catalog.InstanceUpdate: {}, catalog.BindingCreate: {}})
		if _, err := Configure(plan, config, dir); !errors.As(err, &se) || se.Key != "binding_template" || !strings.Contains(se.Problem, "parameter Principal has no Default") {
			t.Fatalf("Configure: %v", err)
		}
	})
	t.Run("a create schema that does not name the instance template's is refused", func(t *testing.T) {
		var se *catalog.SettingError
		plan := schemaPlan(t, map[catalog.SchemaKind][]string{catalog.InstanceCreate: {}, catalog.BindingCreate: {"Principal"}})
		if _, err := Configure(plan, config, dir); !errors.As(err, &se) || se.Key != "template" || !strings.Contains(se.Problem, "parameter Owner has no Default") {
			t.Fatalf("Configure: %v", err)
		}
	})
}

func TestConfigureChecksTheSchemas(t *testing.T) {
	dir := templateDir(t, map[string]string{
		"instance.yaml": instanceTemplate, "binding.json": bindingTemplate,
		"fixed.yaml": "Parameters:\n  Class: {Type: String, Default: small}\nResources:\n  B: {Type: AWS::SNS::Topic}\nOutputs:\n  BucketName: {Value: x}\n  BucketArn: {Value: y}\n",
	})
	base := map[string]any{"template": "instance.yaml", "parameters": map[string]any{"Owner": "team-a"}}
	withBinding := map[string]any{"template": "instance.yaml", "parameters": map[string]any{"Owner": "team-a"}, "binding_template": "binding.json"}
	type schemas = map[catalog.SchemaKind][]string
	cases := []struct {
		name     string
		schemas  schemas
		config   map[string]any
		problems map[string][]string // field → what its line says
	}{
		{name: "a plan whose template has parameters it leaves open must have a create schema, naming them",
			schemas: schemas{}, config: base,
			problems: map[string][]string{"schemas.service_instance.create.parameters": {"is missing", "instance.yaml declares parameters that the plan does not fix (Settings, Size, Subnets and Versioning)", "properties: {}", "keep their Default"}}},
		{name: "users who set parameters at create need an update schema saying which may change",
			schemas: schemas{catalog.InstanceCreate: {"Versioning"}}, config: base,
			problems: map[string][]string{"schemas.service_instance.update.parameters": {"is missing", "users set Versioning at create", "plan or maintenance_info needs no parameters"}}},
		{name: "a property the template does not declare is refused with those it declares",
			schemas: schemas{catalog.InstanceCreate: {"Versoning"}, catalog.InstanceUpdate: {"Sise"}}, config: base,
			problems: map[string][]string{
				"schemas.service_instance.create.parameters.properties.Versoning": {"the template instance.yaml declares no parameter Versoning", "Owner, Settings, Size, Subnets and Versioning"},
				"schemas.service_instance.update.parameters.properties.Sise":      {"declares no parameter Sise"}}},
		{name: "a property the plan fixes is refused: users cannot override it",
			schemas: schemas{catalog.InstanceCreate: {"Owner"}, catalog.InstanceUpdate: {}}, config: base,
			problems: map[string][]string{"schemas.service_instance.create.parameters.properties.Owner": {"the plan fixes Owner (broker.parameters.Owner)"}}},
		{name: "a binding template with parameters left open needs a binding schema",
			schemas: schemas{catalog.InstanceCreate: {}}, config: withBinding,
			problems: map[string][]string{"schemas.service_binding.create.parameters": {"is missing", "binding.json declares a parameter that neither the plan's binding_parameters nor the instance's outputs set (Access)"}}},
		{name: "a binding property that the instance's outputs supply is refused",
			schemas: schemas{catalog.InstanceCreate: {}, catalog.BindingCreate: {"Access", "BucketArn"}}, config: withBinding,
			problems: map[string][]string{"schemas.service_binding.create.parameters.properties.BucketArn": {"is an output of the instance template"}}},
		{name: "a schema may not name the permissions boundary: the deployment sets it",
			schemas: schemas{catalog.InstanceCreate: {}, catalog.BindingCreate: {"Access", "PermissionsBoundaryArn"}}, config: withBinding,
			problems: map[string][]string{"schemas.service_binding.create.parameters.properties.PermissionsBoundaryArn": {"is the deployment's permissions boundary"}}},
		{name: "binding properties without a binding template are refused",
			schemas: schemas{catalog.InstanceCreate: {}, catalog.BindingCreate: {"Access"}}, config: base,
			problems: map[string][]string{"schemas.service_binding.create.parameters": {"names Access, but the plan has no binding_template"}}},
		{name: "every problem is reported at once",
			schemas: schemas{catalog.InstanceCreate: {"Owner"}}, config: withBinding,
			problems: map[string][]string{
				"schemas.service_instance.update.parameters":                  {"users set Owner at create"},
				"schemas.service_instance.create.parameters.properties.Owner": {"the plan fixes Owner"},
				"schemas.service_binding.create.parameters":                   {"is missing"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Configure(schemaPlan(t, tc.schemas), tc.config, dir)
			if err == nil {
				t.Fatal("Configure accepted the plan")
			}
			got := map[string]string{}
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var se *catalog.SettingError
				if !errors.As(e, &se) || !se.InPlan {
					t.Fatalf("problem %v is not a *SettingError about a field of the plan", e)
				}
				got[se.Key] = se.Problem
			}
			if len(got) != len(tc.problems) {
				t.Errorf("problems %q, want one for each of %v", got, slices.Sorted(maps.Keys(tc.problems)))
			}
			for field, says := range tc.problems {
				for _, want := range says {
					if !strings.Contains(got[field], want) {
						t.Errorf("%s: %q does not say %q", field, got[field], want)
					}
				}
			}
		})
	}
	t.Run("a template whose parameters the plan fixes or leaves at their Default needs no schema", func(t *testing.T) {
		s, err := Configure(schemaPlan(t, nil), map[string]any{"template": "fixed.yaml", "parameters": map[string]any{"Class": "large"}}, dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []catalog.SchemaKind{catalog.InstanceCreate, catalog.InstanceUpdate, catalog.BindingCreate} {
			if got := s.AcceptedParameters(k); len(got) != 0 {
				t.Errorf("accepted on %s: %v, want none", k, got)
			}
		}
	})
	t.Run("an empty create schema lets users set nothing, and asks for no update schema", func(t *testing.T) {
		s, err := Configure(schemaPlan(t, schemas{catalog.InstanceCreate: {}}), base, dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.AcceptedParameters(catalog.InstanceCreate); len(got) != 0 {
			t.Errorf("accepted on create: %v", got)
		}
	})
}

func TestDeploymentFromEnv(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		prefix  string
		wantErr string
	}{
		{name: "no settings mean the osb prefix and no role", prefix: "osb"},
		{name: "a valid prefix and role are kept", env: map[string]string{env.StackPrefix: "Team-7", env.CFNRoleARN: "arn:aws:iam::123456789012:role/cfn"}, prefix: "Team-7"},
		{name: "a prefix of 20 characters is allowed", env: map[string]string{env.StackPrefix: strings.Repeat("a", 20)}, prefix: strings.Repeat("a", 20)},
		{name: "a prefix of 21 characters is refused", env: map[string]string{env.StackPrefix: strings.Repeat("a", 21)}, wantErr: "at most 20"},
		{name: "a prefix starting with a digit is refused", env: map[string]string{env.StackPrefix: "7osb"}, wantErr: "start with a letter"},
		{name: "a prefix with an underscore is refused", env: map[string]string{env.StackPrefix: "osb_x"}, wantErr: "letters, digits and hyphens"},
		{name: "a role that is not a role ARN is refused", env: map[string]string{env.CFNRoleARN: "cfn-role"}, wantErr: "BROKER_CFN_ROLE_ARN"},
		{name: "a boundary is kept", env: map[string]string{env.PermissionsBoundaryARN: "arn:aws:iam::123456789012:policy/osb-boundary"}, prefix: "osb"},
		{name: "a boundary that is not a managed policy ARN is refused", env: map[string]string{env.PermissionsBoundaryARN: "arn:aws:iam::aws:policy/AdministratorAccess"}, wantErr: "BROKER_PERMISSIONS_BOUNDARY_ARN"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := DeploymentFromEnv(func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || d.StackPrefix != tc.prefix || d.RoleARN != tc.env[env.CFNRoleARN] || d.BoundaryARN != tc.env[env.PermissionsBoundaryARN] {
				t.Fatalf("%+v %v", d, err)
			}
		})
	}
}

func TestConfigureRefusesIAMIdentitiesWithoutTheBoundary(t *testing.T) {
	const boundaryParam = "  PermissionsBoundaryArn: {Type: String, Default: \"\"}\n"
	tests := []struct {
		name     string
		template string
		want     string // "" accepts
	}{
		{"a user without PermissionsBoundary is refused, naming the file and the resource",
			"Parameters:\n" + boundaryParam + "Resources:\n  AppUser: {Type: AWS::IAM::User}\n",
			"bind.yaml: resource AppUser (AWS::IAM::User) has no PermissionsBoundary"},
		{"a role without PermissionsBoundary is refused",
			"Resources:\n  Runner: {Type: AWS::IAM::Role, Properties: {AssumeRolePolicyDocument: {}}}\n",
			"resource Runner (AWS::IAM::Role) has no PermissionsBoundary"},
		{"a user with a boundary but no parameter to take it from is refused",
			"Resources:\n  U: {Type: AWS::IAM::User, Properties: {PermissionsBoundary: arn:aws:iam::123456789012:policy/x}}\n",
			"declares no parameter PermissionsBoundaryArn"},
		{"a boundary parameter without a default is refused",
			"Parameters:\n  PermissionsBoundaryArn: {Type: String}\nResources:\n  U: {Type: AWS::IAM::User, Properties: {PermissionsBoundary: !Ref PermissionsBoundaryArn}}\n",
			"must be Type String with Default"},
		{"a user whose boundary is the parameter is accepted",
			"Parameters:\n" + boundaryParam + "Resources:\n  U: {Type: AWS::IAM::User, Properties: {PermissionsBoundary: !Ref PermissionsBoundaryArn}}\n",
			""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := templateDir(t, map[string]string{"instance.yaml": instanceTemplate, "bind.yaml": tt.template})
			_, err := Configure(schemaPlan(t, map[catalog.SchemaKind][]string{catalog.InstanceCreate: {}}), map[string]any{"template": "instance.yaml", "binding_template": "bind.yaml",
				"parameters": map[string]any{"Owner": "team-a"}}, dir)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err %v, want one saying %q", err, tt.want)
			}
		})
	}
	t.Run("a plan may not fix the boundary parameter", func(t *testing.T) {
		dir := templateDir(t, map[string]string{"instance.yaml": instanceTemplate, "binding.json": bindingTemplate})
		_, err := Configure(nil, map[string]any{"template": "instance.yaml", "binding_template": "binding.json",
			"binding_parameters": map[string]any{BoundaryParameter: "arn:aws:iam::123456789012:policy/x"}}, dir)
		if err == nil || !strings.Contains(err.Error(), "the deployment's permissions boundary") {
			t.Fatalf("err %v", err)
		}
	})
}

func TestTemplateResourcesNameNestedProperties(t *testing.T) {
	dir := templateDir(t, map[string]string{"table.yaml": `Conditions:
  Streams: !Equals [a, a]
Resources:
  Table:
    Type: AWS::DynamoDB::Table
    Properties:
      SSESpecification: {SSEEnabled: true}
      StreamSpecification: !If
        - Streams
        - StreamViewType: NEW_IMAGE
          ResourcePolicy: {PolicyDocument: {}}
        - !Ref AWS::NoValue
      Tags:
        - {Key: a, Value: b}
`})
	res, err := TemplateResources(dir, []string{"table.yaml"})
	if err != nil || len(res) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	want := []string{"SSESpecification", "SSESpecification/SSEEnabled", "StreamSpecification", "StreamSpecification/ResourcePolicy",
		"StreamSpecification/ResourcePolicy/PolicyDocument", "StreamSpecification/StreamViewType", "Tags", "Tags/Key", "Tags/Value"}
	if !slices.Equal(res[0].Properties, want) {
		t.Errorf("properties %v, want %v (through Fn::If's branch and the list)", res[0].Properties, want)
	}
}
