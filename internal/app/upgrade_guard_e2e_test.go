package app_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/drivers"
	cfndriver "github.com/serverless-osb/broker/internal/drivers/cloudformation"
	"github.com/serverless-osb/broker/internal/mototest"
)

// An RDS database added to the DynamoDB example for the conditional case:
// its PerformanceInsightsKMSKeyId replaces the database when it names
// another key (the CloudFormation User Guide).
const guardDatabase = `
  Database:
    Type: AWS::RDS::DBInstance
    Properties:
      Engine: postgres
      EngineVersion: "16.3"
      DBInstanceClass: db.t3.micro
      AllocatedStorage: "20"
      MasterUsername: osb
      MasterUserPassword: not-a-secret-0
      EnablePerformanceInsights: true
      PerformanceInsightsKMSKeyId: alias/insights-a
`

// TestUpgradesThatLoseDataAreRefusedOnMoto: moto's change sets never
// report a replacement, so the broker's own reading of the two templates
// must refuse it. An instance of an example service with data in it (an
// item in the table, an object in the bucket); the operator changes the
// template so that the resource holding it would be replaced, and raises
// the plan's version. The dry run (ops upgrade start --dry-run) says
// would_refuse, the upgrade through the OSB client fails with the guard's
// words, and the stack still runs the old template with the data in it.
func TestUpgradesThatLoseDataAreRefusedOnMoto(t *testing.T) {
	cfg := mototest.Config(t, "us-east-1")
	cfn := cloudformation.NewFromConfig(cfg)
	ddb := dynamodb.NewFromConfig(cfg)
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })

	type data struct {
		put, check func(t *testing.T, outputs map[string]string)
	}
	item := data{
		put: func(t *testing.T, out map[string]string) {
			if _, err := ddb.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(out["TableName"]),
				Item: map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: "kept"}}}); err != nil {
				t.Fatal(err)
			}
		},
		check: func(t *testing.T, out map[string]string) {
			got, err := ddb.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(out["TableName"]),
				Key: map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: "kept"}}})
			if err != nil || len(got.Item) == 0 {
				t.Errorf("the table's item is gone after the refused upgrade: %v", err)
			}
		},
	}
	object := data{
		put: func(t *testing.T, out map[string]string) {
			if _, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(out["BucketName"]), Key: aws.String("kept"),
				Body: strings.NewReader("data")}); err != nil {
				t.Fatal(err)
			}
		},
		check: func(t *testing.T, out map[string]string) {
			if _, err := s3c.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(out["BucketName"]), Key: aws.String("kept")}); err != nil {
				t.Errorf("the bucket's object is gone after the refused upgrade: %v", err)
			}
		},
	}
	dynamoKeys := `        - - AttributeName: !Ref HashKeyName
            KeyType: HASH
      SSESpecification:`
	tests := []struct {
		name, service, plan, template, versionText string
		// before is the template's change made before the instances are
		// provisioned (at the same version), if any; change the
		// operator's change under the raised version.
		before, change [2]string
		data           data
		want           []string
	}{
		{name: "the DynamoDB example's table gaining a sort key (KeySchema)",
			service: "aws-dynamodb-table", plan: "on-demand", template: "dynamodb-table/instance.yaml",
			versionText: "First release of the DynamoDB table template.",
			change:      [2]string{dynamoKeys, strings.Replace(dynamoKeys, "HASH\n", "HASH\n          - AttributeName: sk\n            KeyType: RANGE\n", 1)},
			data:        item,
			want:        []string{"would replace the resource Table (AWS::DynamoDB::Table)", "KeySchema", "Nothing was changed."}},
		{name: "the S3 example's bucket renamed by the template (BucketName)",
			service: "aws-s3-bucket", plan: "standard", template: "s3-bucket/instance.yaml",
			versionText: "First release of the S3 bucket template.",
			change:      [2]string{"    Properties:\n      BucketEncryption:", "    Properties:\n      BucketName: !Sub \"${AWS::StackName}-renamed\"\n      BucketEncryption:"},
			data:        object,
			want:        []string{"would replace the resource Bucket (AWS::S3::Bucket)", "BucketName", "Nothing was changed."}},
		{name: "a database's conditional property changed (RDS PerformanceInsightsKMSKeyId)",
			service: "aws-dynamodb-table", plan: "on-demand", template: "dynamodb-table/instance.yaml",
			versionText: "First release of the DynamoDB table template.",
			before:      [2]string{"\nOutputs:\n", guardDatabase + "\nOutputs:\n"},
			change:      [2]string{`alias/insights-a`, `alias/insights-b`},
			data:        item,
			want:        []string{"may replace the resource Database (AWS::RDS::DBInstance)", "PerformanceInsightsKMSKeyId", "Nothing was changed."}},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused, the stack and its data unchanged", func(t *testing.T) {
			prefix := "osbgd" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
			catalogPath, _ := shippedServices(t)
			templatePath := filepath.Join(filepath.Dir(catalogPath), tt.template)
			if tt.before[0] != "" {
				// The catalog as first released: a lock file of its own.
				replaceOnce(t, templatePath, tt.before[0], tt.before[1])
				if err := os.Remove(filepath.Join(filepath.Dir(catalogPath), "catalog.lock.json")); err != nil {
					t.Fatal(err)
				}
				writeLock(t, catalogPath)
			}
			opts := apptest.Options{Dir: t.TempDir(), Catalog: catalogPath, ReapInterval: -1,
				AWS: func(context.Context) (aws.Config, error) { return cfg, nil },
				Getenv: func(k string) string {
					if k == "BROKER_STACK_PREFIX" {
						return prefix
					}
					return ""
				},
				Sleep: func(ctx context.Context, _ time.Duration) {}, // moto completes stacks at once
			}
			b := apptest.StartWith(t, opts)
			service, plan := planOf(t, b, tt.service, tt.plan)
			e := &e2e{t: t, c: client(t, b.URL), service: service}
			id := uuid.NewString()
			r := e.provision(id, plan, true, map[string]any{})
			if state, desc := e.poll(id, r.OperationKey); state != osb.StateSucceeded {
				t.Fatalf("provision ended %s: %s", state, desc)
			}
			out := stackOutputs(t, cfn, prefix, id)
			tt.data.put(t, out)
			before := stackTemplate(t, cfn, prefix, id)

			b.Stop()
			replaceOnce(t, templatePath, tt.change[0], tt.change[1])
			replaceOnce(t, catalogPath, `version: "`+upgradeFrom+`"
          description: `+tt.versionText, `version: "`+upgradeTo+`"
          description: A change that would lose the instance's data.`)
			writeLock(t, catalogPath)
			b = apptest.StartWith(t, opts)
			e.c = client(t, b.URL)

			dry, err := startCampaignOps(t, b.Local.Broker, true, "--plan", plan, "--dry-run")
			if err == nil {
				t.Error("ops upgrade start --dry-run exited 0 with a change that would lose data")
			}
			status, _ := campaignStatusJSON(t, b.Local.Broker, dry)
			items, _ := status["items"].([]any)
			if len(items) != 1 {
				t.Fatalf("the dry run lists %d instances, want 1: %v", len(items), status)
			}
			if it := items[0].(map[string]any); it["state"] != "would_refuse" || !containsAll(fmt.Sprint(it["description"]), tt.want) {
				t.Errorf("dry run: %s %q, want would_refuse saying %q", it["state"], it["description"], tt.want)
			}

			r2 := b.Do(apptest.Request{Method: http.MethodPatch, Path: "/v2/service_instances/" + id + "?accepts_incomplete=true",
				Body: map[string]any{"service_id": service, "maintenance_info": map[string]any{"version": upgradeTo}}})
			if r2.Status != http.StatusAccepted {
				t.Fatalf("upgrade: %d %s", r2.Status, r2.Raw)
			}
			op := osb.OperationKey(r2.Str("operation"))
			state, desc := e.poll(id, &op)
			if state != osb.StateFailed || !containsAll(desc, tt.want) {
				t.Errorf("the upgrade ended %s: %q, want failed saying %q", state, desc, tt.want)
			}
			if got := stackTemplate(t, cfn, prefix, id); got != before {
				t.Errorf("the refused upgrade changed the stack's template:\n%s", got)
			}
			if v := instanceVersion(t, b, id); v != upgradeFrom {
				t.Errorf("GET instance after the refused upgrade answers maintenance_info version %q, want %s", v, upgradeFrom)
			}
			tt.data.check(t, stackOutputs(t, cfn, prefix, id))
		})
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// stackOutputs are the outputs of the instance's stack.
func stackOutputs(t *testing.T, c *cloudformation.Client, prefix, instanceID string) map[string]string {
	t.Helper()
	out, err := c.DescribeStacks(t.Context(), &cloudformation.DescribeStacksInput{StackName: aws.String(cfndriver.InstanceStackName(prefix, instanceID))})
	if err != nil || len(out.Stacks) != 1 {
		t.Fatalf("describe the instance's stack: %v", err)
	}
	m := map[string]string{}
	for _, o := range out.Stacks[0].Outputs {
		m[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	return m
}

// writeLock writes the catalog's lock file again, as make build does.
func writeLock(t *testing.T, catalogPath string) {
	t.Helper()
	cat, err := catalog.Load(catalogPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := drivers.WriteLock(cat, catalogPath); err != nil {
		t.Fatalf("the lock file: %v", err)
	}
}
