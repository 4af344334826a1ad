package cloudformation

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/serverless-osb/broker/internal/cfnregistry"
)

// TestTemplateReplacements: the templates' opinion on an update, for each
// way a resource that holds data can be lost, and for changes that lose
// nothing.
func TestTemplateReplacements(t *testing.T) {
	schemas, err := cfnregistry.Schemas()
	if err != nil {
		t.Fatal(err)
	}
	// A type whose registry schema lists a nested create-only property.
	schemas["Test::Nested::Store"] = cfnregistry.Schema{TypeName: "Test::Nested::Store",
		CreateOnlyProperties: []string{"/properties/Storage/Engine", "/properties/Name"}}
	every := func(string, string) bool { return true }

	dynamo := readService(t, "dynamodb-table/instance.yaml")
	sortKeyInTemplate := strings.Replace(dynamo, `        - - AttributeName: !Ref HashKeyName
            KeyType: HASH
      SSESpecification:`, `        - - AttributeName: !Ref HashKeyName
            KeyType: HASH
          - AttributeName: sk
            KeyType: RANGE
      SSESpecification:`, 1)
	if sortKeyInTemplate == dynamo {
		t.Fatal("the DynamoDB example's KeySchema is not as this test expects")
	}

	const bucket = `Parameters:
  Name: {Type: String, Default: ""}
  Secret: {Type: String, NoEcho: true, Default: x}
Conditions:
  Named: !Not [!Equals [!Ref Name, ""]]
Resources:
  Bucket:
    Type: AWS::S3::Bucket
    Properties:
      BucketName: !If [Named, !Sub "${Name}-data", !Ref AWS::NoValue]
      Tags: [{Key: secret, Value: !Ref Secret}]
`
	const rds = `Parameters:
  Version: {Type: String}
  InsightsKey: {Type: String}
Resources:
  Database:
    Type: AWS::RDS::DBInstance
    Properties:
      Engine: postgres
      EngineVersion: !Ref Version
      DBInstanceClass: db.t3.micro
      EnablePerformanceInsights: true
      PerformanceInsightsKMSKeyId: !Ref InsightsKey
`
	const nested = `Parameters:
  Engine: {Type: String}
  Size: {Type: String}
Resources:
  Key:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: !Ref Engine
  Store:
    Type: Test::Nested::Store
    Properties:
      Storage:
        Engine: !Ref Engine
        Size: !Ref Size
      Queue: !GetAtt Key.Arn
`
	tests := []struct {
		name                 string
		oldBody, newBody     string
		oldParams, newParams map[string]any
		held                 func(id, typ string) bool
		want                 []replacementChange
	}{
		{name: "the DynamoDB example's table gaining a sort key in the template is replaced (KeySchema, immutable in the resource specification)",
			oldBody: dynamo, newBody: sortKeyInTemplate,
			want: []replacementChange{{LogicalID: "Table", Type: "AWS::DynamoDB::Table", Replaced: []string{"KeySchema"}}}},
		{name: "the DynamoDB example's table gaining a sort key through a changed parameter (a Ref in an Fn::If on a condition) is replaced",
			oldBody: dynamo, newBody: dynamo, oldParams: map[string]any{"SortKeyName": ""}, newParams: map[string]any{"SortKeyName": "sk"},
			want: []replacementChange{{LogicalID: "Table", Type: "AWS::DynamoDB::Table", Replaced: []string{"KeySchema"}}}},
		{name: "the DynamoDB example with the same keys and a new time to live loses nothing",
			oldBody: dynamo, newBody: dynamo, oldParams: map[string]any{"TimeToLiveAttribute": ""}, newParams: map[string]any{"TimeToLiveAttribute": "ttl"}},
		{name: "a bucket given a name by the template is replaced (BucketName, create-only)",
			oldBody: bucket, newBody: strings.Replace(bucket, `!If [Named, !Sub "${Name}-data", !Ref AWS::NoValue]`, "renamed", 1),
			want: []replacementChange{{LogicalID: "Bucket", Type: "AWS::S3::Bucket", Replaced: []string{"BucketName"}}}},
		{name: "a bucket renamed through a parameter in an Fn::Sub is replaced",
			oldBody: bucket, newBody: bucket, oldParams: map[string]any{"Name": "a"}, newParams: map[string]any{"Name": "b"},
			want: []replacementChange{{LogicalID: "Bucket", Type: "AWS::S3::Bucket", Replaced: []string{"BucketName"}}}},
		{name: "a bucket whose parameters keep their values loses nothing, a NoEcho one kept as it was included",
			oldBody: bucket, newBody: bucket, oldParams: map[string]any{"Name": "a", "Secret": unknown{expr: "masked"}},
			newParams: map[string]any{"Name": "a", "Secret": unknown{expr: "masked"}}},
		{name: "a resource the plan allows to go is not reported",
			oldBody: bucket, newBody: bucket, oldParams: map[string]any{"Name": "a"}, newParams: map[string]any{"Name": "b"},
			held: func(id, _ string) bool { return id != "Bucket" }},
		{name: "a conditional property changed (RDS PerformanceInsightsKMSKeyId) may replace the database",
			oldBody: rds, newBody: rds, oldParams: map[string]any{"Version": "16", "InsightsKey": "alias/a"}, newParams: map[string]any{"Version": "16", "InsightsKey": "alias/b"},
			want: []replacementChange{{LogicalID: "Database", Type: "AWS::RDS::DBInstance", MayReplace: []string{"PerformanceInsightsKMSKeyId"}}}},
		// The RDS examples' major version upgrade: "Some interruptions",
		// though the resource specification says Conditional.
		{name: "a database's engine version upgraded loses nothing",
			oldBody: rds, newBody: rds, oldParams: map[string]any{"Version": "16", "InsightsKey": "alias/a"}, newParams: map[string]any{"Version": "17", "InsightsKey": "alias/a"}},
		{name: "a logical id the new template no longer declares is removed",
			oldBody: bucket, newBody: strings.Replace(bucket, "  Bucket:\n", "  Renamed:\n", 1),
			want: []replacementChange{{LogicalID: "Bucket", Type: "AWS::S3::Bucket", Removed: true}}},
		{name: "a resource declared with another type is removed",
			oldBody: bucket, newBody: strings.Replace(bucket, "AWS::S3::Bucket", "AWS::SQS::Queue", 1),
			want: []replacementChange{{LogicalID: "Bucket", Type: "AWS::S3::Bucket", Removed: true, NewType: "AWS::SQS::Queue"}}},
		{name: "a resource whose condition no longer holds is removed",
			oldBody:   strings.Replace(bucket, "    Type: AWS::S3::Bucket\n", "    Type: AWS::S3::Bucket\n    Condition: Named\n", 1),
			newBody:   strings.Replace(bucket, "    Type: AWS::S3::Bucket\n", "    Type: AWS::S3::Bucket\n    Condition: Named\n", 1),
			oldParams: map[string]any{"Name": "a"}, newParams: map[string]any{"Name": ""},
			want: []replacementChange{{LogicalID: "Bucket", Type: "AWS::S3::Bucket", Removed: true}}},
		{name: "a nested create-only property (Storage/Engine) changed replaces its resource",
			oldBody: nested, newBody: nested, oldParams: map[string]any{"Engine": "a", "Size": "1"}, newParams: map[string]any{"Engine": "b", "Size": "1"},
			want: []replacementChange{{LogicalID: "Key", Type: "AWS::SQS::Queue", Replaced: []string{"QueueName"}},
				{LogicalID: "Store", Type: "Test::Nested::Store", Replaced: []string{"Storage/Engine"}}}},
		{name: "a create-only property referring to a resource the update replaces changes with it",
			oldBody:   strings.Replace(nested, "QueueName: !Ref Engine", "QueueName: !Ref Size", 1) + "      Name: !Ref Key\n",
			newBody:   strings.Replace(nested, "QueueName: !Ref Engine", "QueueName: !Ref Size", 1) + "      Name: !Ref Key\n",
			oldParams: map[string]any{"Engine": "a", "Size": "1"}, newParams: map[string]any{"Engine": "a", "Size": "2"},
			want: []replacementChange{{LogicalID: "Key", Type: "AWS::SQS::Queue", Replaced: []string{"QueueName"}},
				{LogicalID: "Store", Type: "Test::Nested::Store", Replaced: []string{"Name"}}}},
		{name: "a nested property beside a create-only one changes nothing that forces a new resource",
			oldBody: nested, newBody: nested, oldParams: map[string]any{"Engine": "a", "Size": "1"}, newParams: map[string]any{"Engine": "a", "Size": "2"}},
		{name: "a create-only property that refers to a resource (GetAtt) is replaced when the expression changes, kept when it is the same",
			oldBody:   strings.Replace(nested, "Engine: !Ref Engine\n        Size", "Engine: !GetAtt Key.QueueName\n        Size", 1),
			newBody:   strings.Replace(nested, "Engine: !Ref Engine\n        Size", "Engine: !GetAtt Key.Arn\n        Size", 1),
			oldParams: map[string]any{"Engine": "a", "Size": "1"}, newParams: map[string]any{"Engine": "a", "Size": "1"},
			want: []replacementChange{{LogicalID: "Store", Type: "Test::Nested::Store", Replaced: []string{"Storage/Engine"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, err := newSide(tt.oldBody, tt.oldParams)
			if err != nil {
				t.Fatal(err)
			}
			next, err := newSide(tt.newBody, tt.newParams)
			if err != nil {
				t.Fatal(err)
			}
			held := tt.held
			if held == nil {
				held = every
			}
			got := templateReplacements(old, next, schemas, held)
			if len(got) == 0 && len(tt.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestTemplateRefusal: the templates' opinion refuses with the words of
// the change set's, the parameters' values read as the driver has them
// (the stack's, and the update's with UsePreviousValue), and lets through
// what the plan's allow_replacement names.
func TestTemplateRefusal(t *testing.T) {
	body := readService(t, "dynamodb-table/instance.yaml")
	current, err := parseTemplate([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	stack := &types.Stack{StackName: aws.String("osb-i-x"), Parameters: []types.Parameter{
		{ParameterKey: aws.String("HashKeyName"), ParameterValue: aws.String("id")},
		{ParameterKey: aws.String("SortKeyName"), ParameterValue: aws.String("")},
	}}
	update := []types.Parameter{
		{ParameterKey: aws.String("HashKeyName"), UsePreviousValue: aws.Bool(true)},
		{ParameterKey: aws.String("SortKeyName"), ParameterValue: aws.String("sk")},
	}
	f, err := templateRefusal(&Settings{Template: current}, stack, current, current, update)
	if err != nil {
		t.Fatal(err)
	}
	if f == nil {
		t.Fatal("a sort key added through a parameter was not refused")
	}
	for _, want := range []string{"The update would replace the resource Table (AWS::DynamoDB::Table), which holds data", "KeySchema", "Nothing was changed."} {
		if !strings.Contains(f.Description, want) {
			t.Errorf("the refusal %q does not say %q", f.Description, want)
		}
	}
	kept := []types.Parameter{{ParameterKey: aws.String("HashKeyName"), UsePreviousValue: aws.Bool(true)},
		{ParameterKey: aws.String("SortKeyName"), UsePreviousValue: aws.Bool(true)}}
	if f, err := templateRefusal(&Settings{Template: current}, stack, current, current, kept); err != nil || f != nil {
		t.Errorf("an update keeping every value was refused: %v %v", f, err)
	}
	if f, err := templateRefusal(&Settings{Template: current, AllowReplacement: []string{"Table"}}, stack, current, current, update); err != nil || f != nil {
		t.Errorf("a replacement the plan allows was refused: %v %v", f, err)
	}
}

func readService(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "services", path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTemplateDocumentReadsShortFormTags: a YAML template's short-form
// tags are read as the long forms a JSON template writes.
func TestTemplateDocumentReadsShortFormTags(t *testing.T) {
	yamlDoc, err := templateDocument([]byte(`Resources:
  T:
    Type: X
    Properties:
      A: !Ref P
      B: !GetAtt R.Endpoint.Address
      C: !If [Cond, !Sub "${P}-x", !Ref AWS::NoValue]
      D: !Join [",", [a, !Ref P]]
`))
	if err != nil {
		t.Fatal(err)
	}
	jsonDoc, err := templateDocument([]byte(`{"Resources": {"T": {"Type": "X", "Properties": {
  "A": {"Ref": "P"},
  "B": {"Fn::GetAtt": ["R", "Endpoint.Address"]},
  "C": {"Fn::If": ["Cond", {"Fn::Sub": "${P}-x"}, {"Ref": "AWS::NoValue"}]},
  "D": {"Fn::Join": [",", ["a", {"Ref": "P"}]]}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(yamlDoc, jsonDoc) {
		t.Errorf("YAML read as\n%v\nJSON as\n%v", yamlDoc, jsonDoc)
	}
}
