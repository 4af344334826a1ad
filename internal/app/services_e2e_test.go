package app_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/osbtest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// exampleService is one service of services/catalog.yaml as the end-to-end
// test drives it, and how to find its resource in moto.
type exampleService struct {
	service, plan string
	params        map[string]any
	bindParams    map[string]any
	// credentials the binding must hand out.
	credentials []string
	// exists says whether the instance's resource exists in AWS (moto),
	// found from the binding's credentials.
	exists func(ctx context.Context, creds map[string]any) (bool, error)
	// bindingExists, when set, says whether what the binding's stack made
	// besides its user (the SNS binding's queue) exists.
	bindingExists func(ctx context.Context, creds map[string]any) (bool, error)
}

// awsClients reach moto.
type awsClients struct {
	s3  *s3.Client
	sqs *sqs.Client
	ddb *dynamodb.Client
	iam *iam.Client
	cfn *cloudformation.Client
	// moto reaches the APIs the module has no client for.
	moto motoAPI
}

func newAWSClients(cfg aws.Config) awsClients {
	return awsClients{
		s3:   s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }),
		sqs:  sqs.NewFromConfig(cfg),
		ddb:  dynamodb.NewFromConfig(cfg),
		iam:  iam.NewFromConfig(cfg),
		cfn:  cloudformation.NewFromConfig(cfg),
		moto: motoAPI{cfg: cfg},
	}
}

func (c awsClients) examples() []exampleService {
	common := []string{"region", "access_key_id", "secret_access_key"}
	return []exampleService{
		{service: "aws-s3-bucket", plan: "standard",
			params:      map[string]any{"Versioning": "Enabled", "NoncurrentVersionExpirationDays": 30},
			bindParams:  map[string]any{"Access": "ReadOnly"},
			credentials: append([]string{"bucket_name", "bucket_arn"}, common...),
			exists: func(ctx context.Context, creds map[string]any) (bool, error) {
				_, err := c.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(fmt.Sprint(creds["bucket_name"]))})
				return notFound(err)
			}},
		{service: "aws-sqs-queue", plan: "standard",
			params:      map[string]any{"VisibilityTimeout": 60, "DeadLetterQueue": true},
			credentials: append([]string{"queue_name", "queue_url", "queue_arn", "dead_letter_queue_url"}, common...),
			exists: func(ctx context.Context, creds map[string]any) (bool, error) {
				out, err := c.sqs.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(fmt.Sprint(creds["queue_name"]))})
				if err != nil {
					return false, err
				}
				return slices.ContainsFunc(out.QueueUrls, func(u string) bool { return strings.HasSuffix(u, "/"+fmt.Sprint(creds["queue_name"])) }), nil
			}},
		{service: "aws-dynamodb-table", plan: "on-demand",
			params:      map[string]any{"HashKeyName": "pk", "SortKeyName": "sk", "SortKeyType": "N"},
			credentials: append([]string{"table_name", "table_arn"}, common...),
			exists: func(ctx context.Context, creds map[string]any) (bool, error) {
				_, err := c.ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(fmt.Sprint(creds["table_name"]))})
				return notFound(err)
			}},
		{service: "aws-sns-topic", plan: "standard",
			params:      map[string]any{"DisplayName": "Orders", "TracingConfig": "Active"},
			bindParams:  map[string]any{"Access": "PublishAndSubscribe", "RawMessageDelivery": true},
			credentials: append([]string{"topic_name", "topic_arn", "queue_url", "queue_arn"}, common...),
			exists: func(ctx context.Context, creds map[string]any) (bool, error) {
				return c.moto.topicExists(ctx, fmt.Sprint(creds["topic_arn"]))
			},
			bindingExists: func(ctx context.Context, creds map[string]any) (bool, error) {
				return queueExists(ctx, c.sqs, fmt.Sprint(creds["queue_url"]))
			}},
		{service: "aws-kinesis-stream", plan: "provisioned",
			params:      map[string]any{"ShardCount": 2, "RetentionPeriodHours": 48},
			bindParams:  map[string]any{"Access": "WriteOnly"},
			credentials: append([]string{"stream_name", "stream_arn"}, common...),
			exists: func(ctx context.Context, creds map[string]any) (bool, error) {
				shards, ok, err := c.moto.streamShards(ctx, fmt.Sprint(creds["stream_name"]))
				if ok && err == nil && shards != 2 {
					return false, fmt.Errorf("the stream has %d shards, want the provision's ShardCount 2", shards)
				}
				return ok, err
			}},
		{service: "aws-rds-postgresql", plan: "micro",
			params:      map[string]any{"DatabaseName": "orders", "BackupRetentionPeriod": 3},
			credentials: append([]string{"host", "port", "database_name", "secret_arn"}, common...),
			exists: func(ctx context.Context, creds map[string]any) (bool, error) {
				return c.moto.databaseExists(ctx, fmt.Sprint(creds["host"]), fmt.Sprint(creds["secret_arn"]))
			}},
		{service: "aws-rds-mysql", plan: "micro",
			params:      map[string]any{"DatabaseName": "orders", "EngineVersion": "8.4"},
			credentials: append([]string{"host", "port", "database_name", "secret_arn"}, common...),
			exists: func(ctx context.Context, creds map[string]any) (bool, error) {
				if creds["port"] != "3306" {
					return false, fmt.Errorf("port %v, want MySQL's 3306", creds["port"])
				}
				return c.moto.databaseExists(ctx, fmt.Sprint(creds["host"]), fmt.Sprint(creds["secret_arn"]))
			}},
		{service: "aws-kinesis-stream", plan: "on-demand",
			credentials: append([]string{"stream_name", "stream_arn"}, common...),
			exists: func(ctx context.Context, creds map[string]any) (bool, error) {
				_, ok, err := c.moto.streamShards(ctx, fmt.Sprint(creds["stream_name"]))
				return ok, err
			}},
	}
}

// notFound turns a lookup's error into "exists": a 404-like error means no.
func notFound(err error) (bool, error) {
	if err == nil {
		return true, nil
	}
	msg := err.Error()
	for _, s := range []string{"NotFound", "404", "ResourceNotFoundException", "NonExistentQueue", "does not exist"} {
		if strings.Contains(msg, s) {
			return false, nil
		}
	}
	return false, err
}

// accessKeyExists says whether an IAM user under /serverless-osb/ holds the
// access key.
func (c awsClients) accessKeyExists(ctx context.Context, id string) (bool, error) {
	users, err := c.iam.ListUsers(ctx, &iam.ListUsersInput{PathPrefix: aws.String("/serverless-osb/")})
	if err != nil {
		return false, err
	}
	for _, u := range users.Users {
		keys, err := c.iam.ListAccessKeys(ctx, &iam.ListAccessKeysInput{UserName: u.UserName})
		if err != nil {
			return false, err
		}
		for _, k := range keys.AccessKeyMetadata {
			if aws.ToString(k.AccessKeyId) == id {
				return true, nil
			}
		}
	}
	return false, nil
}

// TestClientDrivesTheExampleServicesOnMoto provisions, binds, fetches,
// unbinds and deprovisions each example service of services/catalog.yaml
// with the real OSB client, the CloudFormation driver making real stacks in
// moto, and checks the bucket, queue, table, user and key in moto.
func TestClientDrivesTheExampleServicesOnMoto(t *testing.T) {
	cfg := mototest.Config(t, "us-east-1")
	cloud := newAWSClients(cfg)
	prefix := "osbe2e" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	b := apptest.StartWith(t, apptest.Options{
		Catalog: "services/catalog.yaml",
		AWS:     func(context.Context) (aws.Config, error) { return cfg, nil },
		Getenv: func(k string) string {
			if k == "BROKER_STACK_PREFIX" {
				return prefix
			}
			return ""
		},
		// The plans ask to be checked every 10 s; moto completes stacks
		// at once, so the test does not wait.
		Sleep: func(ctx context.Context, _ time.Duration) {},
	})
	c := client(t, b.URL)
	ctx, cancel := waittest.Context(t)
	defer cancel()

	cat, err := c.GetCatalog()
	if err != nil {
		t.Fatal(err)
	}
	// Every example service runs here, but those moto's CloudFormation
	// cannot make, which their tests drive over a named fake.
	notOnMoto := map[string]string{"aws-opensearch": "TestSearchBindings", "aws-elasticache-valkey": "TestTheValkeyTemplatesThroughTheDriver",
		"aws-aurora-postgresql": "TestAuroraLifecycles", "aws-aurora-mysql": "TestAuroraLifecycles"}
	covered := map[string]bool{}
	for _, ex := range cloud.examples() {
		covered[ex.service] = true
	}
	for _, svc := range cat.Services {
		if !covered[svc.Name] && notOnMoto[svc.Name] == "" {
			t.Errorf("the example service %s is neither driven here nor named as one moto cannot run", svc.Name)
		}
	}

	t.Run("a bind naming a parameter the RDS plan leaves to its outputs is refused with 400, naming it and what the plan accepts", func(t *testing.T) {
		service, plan := planOf(t, b, "aws-rds-postgresql", "micro")
		_, err := c.Bind(&osb.BindRequest{InstanceID: uuid.NewString(), BindingID: uuid.NewString(), ServiceID: service, PlanID: plan,
			AcceptsIncomplete: true, Parameters: map[string]any{"Host": "attacker.example"}, BindResource: &osb.BindResource{AppGUID: ptr("app-1")}})
		var h osb.HTTPStatusCodeError
		if !errors.As(err, &h) || h.StatusCode != http.StatusBadRequest || h.Description == nil ||
			!strings.Contains(*h.Description, "parameters.Host: is not a parameter the plan micro accepts on bind (it accepts: none)") {
			t.Fatalf("bind: %v, want 400 naming Host", err)
		}
		if strings.Contains(*h.Description, "attacker") {
			t.Errorf("the description quotes the value: %s", *h.Description)
		}
	})

	for _, ex := range cloud.examples() {
		t.Run(ex.service+" "+ex.plan+" goes through its whole lifecycle", func(t *testing.T) {
			service, plan := planOf(t, b, ex.service, ex.plan)
			e := &e2e{t: t, c: c, service: service}
			instanceID, bindingID := uuid.NewString(), uuid.NewString()

			t.Run("a synchronous provision is refused: the plan is async-only", func(t *testing.T) {
				_, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: instanceID, ServiceID: service, PlanID: plan,
					OrganizationGUID: "org", SpaceGUID: "space"})
				if !osbtest.IsOSBError(err, 422, "AsyncRequired") {
					t.Fatalf("got %v, want 422 AsyncRequired", err)
				}
			})

			r := e.provision(instanceID, plan, true, ex.params)
			if !r.Async || r.OperationKey == nil {
				t.Fatalf("provision answered %+v, want 202 with an operation", r)
			}
			if state, desc := e.poll(instanceID, r.OperationKey); state != osb.StateSucceeded {
				t.Fatalf("provision ended %s: %s", state, desc)
			}
			inst, err := c.GetInstance(&osb.GetInstanceRequest{InstanceID: instanceID})
			if err != nil {
				t.Fatal(err)
			}
			if u := inst.DashboardURL; !strings.HasPrefix(u, "https://") || !strings.Contains(u, "console.aws.amazon.com/") {
				t.Errorf("dashboard_url = %q, want the resource's console page (the template's DashboardUrl output)", inst.DashboardURL)
			}
			stacks := stacksNamed(ctx, t, cloud.cfn, prefix)
			if len(stacks) != 1 {
				t.Fatalf("stacks %v, want the instance's one", stacks)
			}

			br, err := c.Bind(&osb.BindRequest{InstanceID: instanceID, BindingID: bindingID, ServiceID: service, PlanID: plan,
				AcceptsIncomplete: true, Parameters: ex.bindParams, BindResource: &osb.BindResource{AppGUID: ptr("app-1")}})
			if err != nil {
				t.Fatalf("bind: %v", err)
			}
			if !br.Async {
				t.Fatalf("bind answered synchronously: %+v", br)
			}
			if state := e.pollBinding(instanceID, bindingID, br.OperationKey); state != osb.StateSucceeded {
				t.Fatalf("bind ended %s", state)
			}
			got, err := c.GetBinding(&osb.GetBindingRequest{InstanceID: instanceID, BindingID: bindingID})
			if err != nil {
				t.Fatalf("fetch binding: %v", err)
			}
			creds := got.Credentials
			for _, k := range ex.credentials {
				if v, _ := creds[k].(string); v == "" {
					t.Errorf("credentials lack %s (have %v)", k, slices.Sorted(maps.Keys(creds)))
				}
			}
			if creds["region"] != "us-east-1" {
				t.Errorf("region = %v, want us-east-1", creds["region"])
			}
			if _, leaked := creds["dashboard_url"]; leaked {
				t.Error("the dashboard URL is handed out as a credential")
			}
			if ok, err := ex.exists(ctx, creds); err != nil || !ok {
				t.Fatalf("the %s named by the credentials does not exist in AWS (%v)", ex.service, err)
			}
			key := fmt.Sprint(creds["access_key_id"])
			if ok, err := cloud.accessKeyExists(ctx, key); err != nil || !ok {
				t.Fatalf("no IAM user under /serverless-osb/ holds the binding's key %s (%v)", key, err)
			}
			if ex.bindingExists != nil {
				if ok, err := ex.bindingExists(ctx, creds); err != nil || !ok {
					t.Fatalf("what the binding's stack made for %s does not exist (%v)", ex.service, err)
				}
			}
			if n := len(stacksNamed(ctx, t, cloud.cfn, prefix)); n != 2 {
				t.Errorf("%d stacks after bind, want the instance's and the binding's", n)
			}

			// Rotation (OSB 2.17, over HTTP: the client library predates it):
			// the successor has a key of its own, and the predecessor's works
			// until its unbind.
			successor := uuid.NewString()
			rr := b.Do(apptest.Request{Method: http.MethodPut,
				Path: "/v2/service_instances/" + instanceID + "/service_bindings/" + successor + "?accepts_incomplete=true",
				Body: map[string]any{"service_id": service, "plan_id": plan, "predecessor_binding_id": bindingID}})
			if rr.Status != http.StatusAccepted {
				t.Fatalf("rotate the binding: %d %s", rr.Status, rr.Raw)
			}
			rotation := osb.OperationKey(rr.Str("operation"))
			if state := e.pollBinding(instanceID, successor, &rotation); state != osb.StateSucceeded {
				t.Fatalf("the rotation ended %s", state)
			}
			next, err := c.GetBinding(&osb.GetBindingRequest{InstanceID: instanceID, BindingID: successor})
			if err != nil {
				t.Fatalf("fetch the successor: %v", err)
			}
			nextKey := fmt.Sprint(next.Credentials["access_key_id"])
			for _, k := range []string{key, nextKey} {
				if ok, err := cloud.accessKeyExists(ctx, k); err != nil || !ok {
					t.Fatalf("after the rotation, key %s does not exist (%v)", k, err)
				}
			}
			if nextKey == key {
				t.Fatalf("the successor has the predecessor's key %s", key)
			}

			ur, err := c.Unbind(&osb.UnbindRequest{InstanceID: instanceID, BindingID: bindingID, ServiceID: service, PlanID: plan, AcceptsIncomplete: true})
			if err != nil {
				t.Fatalf("unbind: %v", err)
			}
			if state := e.pollBinding(instanceID, bindingID, ur.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
				t.Fatalf("unbind ended %s", state)
			}
			if ok, err := cloud.accessKeyExists(ctx, key); err != nil || ok {
				t.Fatalf("the binding's key %s outlived the unbind (%v)", key, err)
			}
			if ex.bindingExists != nil {
				if ok, err := ex.bindingExists(ctx, creds); err != nil || ok {
					t.Fatalf("what the binding's stack made for %s outlived the unbind (%v)", ex.service, err)
				}
			}
			if ok, err := cloud.accessKeyExists(ctx, nextKey); err != nil || !ok {
				t.Fatalf("the successor's key %s went with its predecessor's unbind (%v)", nextKey, err)
			}
			ur, err = c.Unbind(&osb.UnbindRequest{InstanceID: instanceID, BindingID: successor, ServiceID: service, PlanID: plan, AcceptsIncomplete: true})
			if err != nil {
				t.Fatalf("unbind the successor: %v", err)
			}
			if state := e.pollBinding(instanceID, successor, ur.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
				t.Fatalf("the successor's unbind ended %s", state)
			}
			if ok, err := cloud.accessKeyExists(ctx, nextKey); err != nil || ok {
				t.Fatalf("the successor's key %s outlived its unbind (%v)", nextKey, err)
			}
			if ok, err := ex.exists(ctx, creds); err != nil || !ok {
				t.Fatalf("the unbind took the instance's %s with it (%v)", ex.service, err)
			}

			dr, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: instanceID, ServiceID: service, PlanID: plan, AcceptsIncomplete: true})
			if err != nil {
				t.Fatalf("deprovision: %v", err)
			}
			if state, desc := e.poll(instanceID, dr.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
				t.Fatalf("deprovision ended %s: %s", state, desc)
			}
			if ok, err := ex.exists(ctx, creds); err != nil || ok {
				t.Fatalf("the %s outlived the deprovision (%v)", ex.service, err)
			}
			if stacks := stacksNamed(ctx, t, cloud.cfn, prefix); len(stacks) != 0 {
				t.Fatalf("stacks %v outlived the deprovision", stacks)
			}
		})
	}
}

// planOf returns the ids of a service's plan by their names.
func planOf(t *testing.T, b *apptest.Broker, service, plan string) (string, string) {
	t.Helper()
	for _, s := range b.Catalog.Services() {
		if s.Name != service {
			continue
		}
		for _, p := range s.Plans {
			if p.Name == plan {
				return s.ID, p.ID
			}
		}
	}
	t.Fatalf("no plan %s of %s", plan, service)
	return "", ""
}

// stacksNamed lists the live stacks whose names start with prefix.
func stacksNamed(ctx context.Context, t *testing.T, c *cloudformation.Client, prefix string) []string {
	t.Helper()
	var names []string
	for _, s := range liveStacks(ctx, t, c, prefix) {
		names = append(names, aws.ToString(s.StackName))
	}
	return names
}

// liveStacks returns the stacks, not deleted, whose names start with
// prefix, from every page (moto is shared by every test of the run).
func liveStacks(ctx context.Context, t *testing.T, c *cloudformation.Client, prefix string) []cfntypes.Stack {
	t.Helper()
	var out []cfntypes.Stack
	p := cloudformation.NewDescribeStacksPaginator(c, &cloudformation.DescribeStacksInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Stacks {
			if strings.HasPrefix(aws.ToString(s.StackName), prefix+"-") && s.StackStatus != cfntypes.StackStatusDeleteComplete {
				out = append(out, s)
			}
		}
	}
	return out
}
