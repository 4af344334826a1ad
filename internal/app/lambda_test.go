package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/serverless-osb/broker/internal/api"
	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/env"
	"github.com/serverless-osb/broker/internal/logging"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/sealing"
	"github.com/serverless-osb/broker/internal/steps"
	"github.com/serverless-osb/broker/internal/store/dynamo"
)

// lambdaEnv is every variable LambdaConfigFromEnv reads; tests set them all
// so that the machine's environment does not leak in.
var lambdaEnv = []string{env.Table, env.Region, env.DynamoDBEndpoint, env.SecretARN, env.OriginSecretARN, env.OperationStateMachineARN,
	env.CleanupStateMachineARN, env.Catalog, env.LogLevel, env.TaskRoot, env.SealingKeyARN, env.SealedOnly, env.MetricsNamespace, env.MaxTasksPerPlan}

func setEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, name := range lambdaEnv {
		t.Setenv(name, env[name])
	}
	for name, value := range env {
		t.Setenv(name, value)
	}
}

const sampleStateMachineARN = "arn:aws:states:eu-west-1:123456789012:stateMachine:ServerlessOsbOperation"

func TestLambdaConfigFromEnv(t *testing.T) {
	complete := map[string]string{
		"BROKER_TABLE": "broker", "AWS_REGION": "eu-west-1", "LAMBDA_TASK_ROOT": "/var/task",
		"BROKER_SECRET_ARN":                  "arn:aws:secretsmanager:eu-west-1:123456789012:secret:broker-AbCdEf",
		"BROKER_OPERATION_STATE_MACHINE_ARN": sampleStateMachineARN,
	}
	with := func(changes map[string]string) map[string]string {
		env := maps.Clone(complete)
		maps.Copy(env, changes)
		return env
	}
	cases := []struct {
		name string
		fn   app.Function
		env  map[string]string
		// wantErr are the phrases the error must hold ("" for success);
		// notErr, those it must not.
		wantErr []string
		notErr  []string
		check   func(t *testing.T, c app.LambdaConfig)
	}{
		{name: "the api function names every missing variable at once", fn: app.FunctionAPI, env: nil,
			wantErr: []string{"missing environment variables: BROKER_TABLE, AWS_REGION, BROKER_SECRET_ARN, BROKER_OPERATION_STATE_MACHINE_ARN"}},
		{name: "the worker function needs only the table and the region", fn: app.FunctionWorker, env: nil,
			wantErr: []string{"missing environment variables: BROKER_TABLE, AWS_REGION"}, notErr: []string{"BROKER_SECRET_ARN"}},
		{name: "a state machine ARN that is not one is refused with the missing variables", fn: app.FunctionAPI,
			env:     with(map[string]string{"BROKER_TABLE": "", "BROKER_OPERATION_STATE_MACHINE_ARN": "arn:aws:lambda:eu-west-1:123456789012:function:worker"}),
			wantErr: []string{"missing environment variables: BROKER_TABLE;", "is not the ARN of a state machine"}},
		{name: "an unknown log level is refused", fn: app.FunctionWorker, env: with(map[string]string{"LOG_LEVEL": "chatty"}),
			wantErr: []string{`LOG_LEVEL="chatty"`}},
		{name: "the worker's bound on each plan's Tasks is read", fn: app.FunctionWorker, env: with(map[string]string{"BROKER_MAX_TASKS_PER_PLAN": "5"}),
			check: func(t *testing.T, c app.LambdaConfig) {
				if c.MaxTasksPerPlan != 5 {
					t.Errorf("MaxTasksPerPlan %d, want 5", c.MaxTasksPerPlan)
				}
			}},
		{name: "a bound on each plan's Tasks that is not a number is refused", fn: app.FunctionWorker, env: with(map[string]string{"BROKER_MAX_TASKS_PER_PLAN": "few"}),
			wantErr: []string{`BROKER_MAX_TASKS_PER_PLAN="few": want a whole number`}},
		{name: "BROKER_SEALED_ONLY is true or false", fn: app.FunctionWorker, env: with(map[string]string{"BROKER_SEALED_ONLY": "yes"}),
			wantErr: []string{`BROKER_SEALED_ONLY="yes": want true or false`}},
		{name: "BROKER_SEALED_ONLY=true needs the sealing key", fn: app.FunctionAPI, env: with(map[string]string{"BROKER_SEALED_ONLY": "true"}),
			wantErr: []string{"BROKER_SEALED_ONLY=true needs BROKER_SEALING_KEY_ARN"}},
		{name: "BROKER_SEALED_ONLY=true with the sealing key refuses values in clear", fn: app.FunctionWorker,
			env: with(map[string]string{"BROKER_SEALED_ONLY": "true", "BROKER_SEALING_KEY_ARN": "arn:aws:kms:eu-west-1:123456789012:key/k"}),
			check: func(t *testing.T, c app.LambdaConfig) {
				if !c.SealedOnly {
					t.Error("SealedOnly is off")
				}
			}},
		{name: "the catalog is beside the bootstrap by default, the log level INFO", fn: app.FunctionAPI, env: complete,
			check: func(t *testing.T, c app.LambdaConfig) {
				if c.CatalogPath != "/var/task/catalog.yaml" || c.LogLevel != slog.LevelInfo {
					t.Errorf("catalog %q, level %v; want /var/task/catalog.yaml, INFO", c.CatalogPath, c.LogLevel)
				}
				if c.SecretARN != complete["BROKER_SECRET_ARN"] || c.StateMachineARN != sampleStateMachineARN ||
					c.Store.Table != "broker" || c.Store.Region != "eu-west-1" || c.SealedOnly {
					t.Errorf("config %+v does not hold the environment's values", c)
				}
			}},
		{name: "BROKER_CATALOG and LOG_LEVEL are honoured", fn: app.FunctionWorker,
			env: with(map[string]string{"BROKER_CATALOG": "/opt/catalog.yaml", "LOG_LEVEL": "debug"}),
			check: func(t *testing.T, c app.LambdaConfig) {
				if c.CatalogPath != "/opt/catalog.yaml" || c.LogLevel != slog.LevelDebug {
					t.Errorf("catalog %q, level %v; want /opt/catalog.yaml, DEBUG", c.CatalogPath, c.LogLevel)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			setEnv(t, c.env)
			cfg, err := app.LambdaConfigFromEnv(c.fn)
			if len(c.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				c.check(t, cfg)
				return
			}
			if err == nil {
				t.Fatalf("no error for %v", c.env)
			}
			for _, phrase := range c.wantErr {
				if !strings.Contains(err.Error(), phrase) {
					t.Errorf("error %q does not say %q", err, phrase)
				}
			}
			for _, phrase := range c.notErr {
				if strings.Contains(err.Error(), phrase) {
					t.Errorf("error %q says %q", err, phrase)
				}
			}
		})
	}
}

func TestParseSecret(t *testing.T) {
	cases := []struct {
		name  string
		value string
		want  []api.Credential
		// wantErr is false for success.
		wantErr bool
	}{
		{name: "the object a CDK-generated secret holds is one pair",
			value: `{"username":"broker","password":"p1","excludeCharacters":"/@\""}`,
			want:  []api.Credential{{Username: "broker", Password: "p1"}}},
		{name: "a list holds the pairs accepted during a rotation",
			value: ` [{"username":"broker","password":"p1"},{"username":"next","password":"p2"}]`,
			want:  []api.Credential{{Username: "broker", Password: "p1"}, {Username: "next", Password: "p2"}}},
		{name: "a pair without a password is refused", value: `{"username":"broker"}`, wantErr: true},
		{name: "an empty list is refused", value: `[]`, wantErr: true},
		{name: "a list with an empty pair is refused", value: `[{"username":"a","password":"p"},{}]`, wantErr: true},
		{name: "a plain string is refused", value: `hunter2-password`, wantErr: true},
		{name: "truncated JSON is refused", value: `{"username":"broker","password":"hunter2-password"`, wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := app.ParseSecret([]byte(c.value))
			if c.wantErr {
				if err == nil {
					t.Fatalf("accepted %s as %v", c.value, got)
				}
				if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), `"p"`) {
					t.Errorf("the error %q quotes the secret", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

// TestLambdaFunctionsOnMoto builds both functions as deployed (DynamoDB,
// Secrets Manager, Step Functions, here moto's) and runs the sample events
// through them.
func TestLambdaFunctionsOnMoto(t *testing.T) {
	ctx := context.Background()
	const region = "us-east-1"
	awsCfg := mototest.Config(t, region)
	env := deployedOnMoto(t, ctx, awsCfg, region, "lambda")
	table, machine := env["BROKER_TABLE"], env["BROKER_OPERATION_STATE_MACHINE_ARN"]
	cleanup, err := awssfn.NewFromConfig(awsCfg).CreateStateMachine(ctx, &awssfn.CreateStateMachineInput{
		Name:       aws.String(mototest.Name("cleanup")),
		Definition: aws.String(`{"StartAt":"Started","States":{"Started":{"Type":"Pass","End":true}}}`),
		RoleArn:    aws.String("arn:aws:iam::123456789012:role/broker-workflows"),
	})
	if err != nil {
		t.Fatal(err)
	}
	secrets := secretsmanager.NewFromConfig(awsCfg)
	secret := func(value string) string {
		out, err := secrets.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
			Name: aws.String(mototest.Name("broker-credentials")), SecretString: aws.String(value)})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.ARN)
	}
	key, err := kms.NewFromConfig(awsCfg).CreateKey(ctx, &kms.CreateKeyInput{Description: aws.String(mototest.Name("broker"))})
	if err != nil {
		t.Fatal(err)
	}
	password, next := "deployed-"+mototest.Name("p"), "rotated-"+mototest.Name("p")
	single := secret(`{"username":"broker","password":"` + password + `"}`)
	rotation := secret(`[{"username":"broker","password":"` + password + `"},{"username":"next","password":"` + next + `"}]`)

	maps.Copy(env, map[string]string{
		"BROKER_SECRET_ARN":                single,
		"BROKER_CLEANUP_STATE_MACHINE_ARN": aws.ToString(cleanup.StateMachineArn),
		"BROKER_SEALING_KEY_ARN":           aws.ToString(key.KeyMetadata.Arn),
	})
	setEnv(t, env)
	logs := &apptest.SyncBuffer{}
	logger := logging.New(logs, slog.LevelDebug)
	apiCfg, err := app.LambdaConfigFromEnv(app.FunctionAPI)
	if err != nil {
		t.Fatal(err)
	}
	h, err := app.BuildLambdaAPI(ctx, apiCfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	workerCfg, err := app.LambdaConfigFromEnv(app.FunctionWorker)
	if err != nil {
		t.Fatal(err)
	}
	worker, err := app.BuildWorker(ctx, workerCfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	f := &eventFlow{api: app.LambdaHTTP(h), worker: lambda.NewHandler(worker), logs: logs, password: password}

	t.Run("the sample password is refused: the secret holds the broker's", func(t *testing.T) {
		sample := &eventFlow{api: f.api}
		if r := sample.send(t, "catalog.json"); r.status != http.StatusUnauthorized {
			t.Errorf("status = %d, want 401", r.status)
		}
	})
	flow := []eventStep{
		{name: "the catalog is served with the secret's credentials", file: "catalog.json", status: http.StatusOK},
		{name: "an asynchronous provision starts an execution named after its operation", file: "provision-async.json",
			status: http.StatusAccepted, check: func(t *testing.T, f *eventFlow, r reply) {
				f.operation, _ = r.body["operation"].(string)
				arn := strings.Replace(machine, ":stateMachine:", ":execution:", 1) + ":" + f.operation
				x, err := awssfn.NewFromConfig(awsCfg).DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
				if err != nil {
					t.Fatalf("execution %s: %v", arn, err)
				}
				if !strings.Contains(aws.ToString(x.Input), sampleAsyncInstance) {
					t.Errorf("execution input %s does not name instance %s", aws.ToString(x.Input), sampleAsyncInstance)
				}
			}},
		{name: "the worker begins it on DynamoDB", file: "worker-begin.json", check: wantProgress},
		{name: "the worker records its failure on DynamoDB", file: "worker-record-failure.json", check: wantEmpty},
		{name: "the api function reads the failure from DynamoDB", file: "instance-last-operation.json", status: http.StatusOK,
			check: wantState("failed", sampleFailureMessage)},
	}
	for _, step := range flow {
		ok := t.Run(step.name, func(t *testing.T) {
			r := f.send(t, step.file)
			if r.err != nil {
				t.Fatalf("the worker failed: %v", r.err)
			}
			if !isWorkerEvent(step.file) && r.status != step.status {
				t.Fatalf("status = %d, want %d: %s", r.status, step.status, r.raw)
			}
			if step.check != nil {
				step.check(t, f, r)
			}
		})
		if !ok {
			break
		}
	}

	t.Run("the schedule's reap step runs the reaper on DynamoDB and Step Functions", func(t *testing.T) {
		out, err := lambda.NewHandler(worker).Invoke(ctx, []byte(`{"step":"reap"}`))
		if err != nil {
			t.Fatalf("reap: %v", err)
		}
		var rep steps.ReapReport
		if err := json.Unmarshal(out, &rep); err != nil || !strings.Contains(string(out), `"in_progress"`) {
			t.Fatalf("reap answered %s (%v), want a report", out, err)
		}
		// The failed provision's leftover was detached and its cleanup
		// started (a stand-in state machine here, which deletes nothing).
		if rep.Detached < 1 {
			t.Fatalf("the reaper saw no detached resource: %s", out)
		}
	})
	t.Run("the table keeps the drivers' records sealed under the stack's KMS key", func(t *testing.T) {
		out, err := dynamodb.NewFromConfig(awsCfg).Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
		if err != nil {
			t.Fatal(err)
		}
		sealed := 0
		for _, item := range out.Items {
			data, ok := item["data"].(*types.AttributeValueMemberS)
			if !ok {
				continue
			}
			s, err := sealing.Parse([]byte(data.Value))
			if err != nil || s.Alg != sealing.AlgKMS || s.KeyID != aws.ToString(key.KeyMetadata.Arn) {
				t.Errorf("item %v holds data that is not sealed under the key: %.80s (%v)", item["SK"], data.Value, err)
			}
			sealed++
		}
		if sealed == 0 {
			t.Error("the flow left no record to look at")
		}
	})
	t.Run("with BROKER_SEALED_ONLY=true both functions say at start that values in clear are refused", func(t *testing.T) {
		t.Setenv("BROKER_SEALED_ONLY", "true")
		logs := &apptest.SyncBuffer{}
		logger := logging.New(logs, slog.LevelDebug)
		apiCfg, err1 := app.LambdaConfigFromEnv(app.FunctionAPI)
		workerCfg, err2 := app.LambdaConfigFromEnv(app.FunctionWorker)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		if _, err := app.BuildLambdaAPI(ctx, apiCfg, logger); err != nil {
			t.Fatal(err)
		}
		if _, err := app.BuildWorker(ctx, workerCfg, logger); err != nil {
			t.Fatal(err)
		}
		for _, ready := range []string{"api function ready", "worker function ready"} {
			var line map[string]any
			for l := range strings.Lines(logs.String()) {
				if strings.Contains(l, `"msg":"`+ready+`"`) {
					if err := json.Unmarshal([]byte(l), &line); err != nil {
						t.Fatal(err)
					}
				}
			}
			if line["sealed_only"] != true {
				t.Errorf("%q logged %v, want sealed_only true", ready, line)
			}
		}
		// No reseal ran on this table: each function says, at start, what
		// to run before values stored in clear are refused.
		if n := strings.Count(logs.String(), "no reseal has recorded the table sealed"); n != 2 {
			t.Errorf("%d start warnings that no reseal recorded the table sealed, want one per function: %s", n, logs)
		}
	})
	t.Run("during a rotation both pairs of a list secret are accepted", func(t *testing.T) {
		t.Setenv("BROKER_SECRET_ARN", rotation)
		cfg, err := app.LambdaConfigFromEnv(app.FunctionAPI)
		if err != nil {
			t.Fatal(err)
		}
		h, err := app.BuildLambdaAPI(ctx, cfg, logger)
		if err != nil {
			t.Fatal(err)
		}
		for user, pass := range map[string]string{"broker": password, "next": next} {
			payload, err := os.ReadFile(filepath.Join(eventsDir(), "catalog.json"))
			if err != nil {
				t.Fatal(err)
			}
			out, err := app.LambdaHTTP(h).Invoke(ctx, withPassword(t, payload, user, pass))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), `"statusCode":200`) {
				t.Errorf("%s was refused: %s", user, out)
			}
		}
	})
	origin := "origin-" + mototest.Name("v")
	originSecret := secret(origin)
	t.Run("behind the front door, an event without the origin secret is refused, one with it served", func(t *testing.T) {
		t.Setenv("BROKER_ORIGIN_SECRET_ARN", originSecret)
		cfg, err := app.LambdaConfigFromEnv(app.FunctionAPI)
		if err != nil {
			t.Fatal(err)
		}
		h, err := app.BuildLambdaAPI(ctx, cfg, logger)
		if err != nil {
			t.Fatal(err)
		}
		payload, err := os.ReadFile(filepath.Join(eventsDir(), "catalog.json"))
		if err != nil {
			t.Fatal(err)
		}
		for header, want := range map[string]string{"": `"statusCode":403`, "wrong": `"statusCode":403`, origin: `"statusCode":200`} {
			var e map[string]any
			if err := json.Unmarshal(withPassword(t, payload, "broker", password), &e); err != nil {
				t.Fatal(err)
			}
			if header != "" {
				e["headers"].(map[string]any)["x-origin-verify"] = header
			}
			event, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			out, err := app.LambdaHTTP(h).Invoke(ctx, event)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), want) {
				t.Errorf("with X-Origin-Verify %q: %.300s, want %s", header, out, want)
			}
		}
	})
	// The secrets are read while the catalog and its drivers are built
	// (BuildLambdaAPI): an api that cannot read one still does not start,
	// and says so first, whatever else failed beside it.
	t.Run("an api whose secret cannot be read does not start, and names the secret", func(t *testing.T) {
		missing := strings.Replace(single, "broker-credentials", "no-such-secret", 1)
		for name, c := range map[string]struct{ secret, origin, catalog string }{
			"the broker's credentials":                  {secret: missing},
			"the origin secret":                         {secret: single, origin: missing},
			"the broker's credentials, with no catalog": {secret: missing, catalog: filepath.Join(t.TempDir(), "catalog.yaml")},
		} {
			t.Setenv("BROKER_SECRET_ARN", c.secret)
			t.Setenv("BROKER_ORIGIN_SECRET_ARN", c.origin)
			t.Setenv("BROKER_CATALOG", c.catalog)
			cfg, err := app.LambdaConfigFromEnv(app.FunctionAPI)
			if err != nil {
				t.Fatal(err)
			}
			h, err := app.BuildLambdaAPI(ctx, cfg, logger)
			if err == nil || h != nil || !strings.Contains(err.Error(), "secret "+missing) {
				t.Errorf("%s unreadable: BuildLambdaAPI answered (%v), want it refused naming secret %s", name, err, missing)
			}
		}
	})
	t.Run("no log line holds a password", func(t *testing.T) {
		for _, p := range []string{password, next, origin} {
			if strings.Contains(logs.String(), p) {
				t.Errorf("a log line holds %q", p)
			}
		}
		if !strings.Contains(logs.String(), "api function ready") {
			t.Error("the api function did not log that it is ready")
		}
	})
}

// deployedOnMoto makes what the api function needs as deployed, on moto: its
// table, an operation state machine that only accepts executions, and a
// task root with the demo catalog; it returns the function's environment
// but for the secret's ARN and what a test adds.
func deployedOnMoto(t *testing.T, ctx context.Context, awsCfg aws.Config, region, name string) map[string]string {
	t.Helper()
	table := mototest.Name(name)
	if err := dynamo.CreateTable(ctx, dynamodb.NewFromConfig(awsCfg), table); err != nil {
		t.Fatal(err)
	}
	machine, err := awssfn.NewFromConfig(awsCfg).CreateStateMachine(ctx, &awssfn.CreateStateMachineInput{
		Name:       aws.String(mototest.Name("operation")),
		Definition: aws.String(`{"StartAt":"Started","States":{"Started":{"Type":"Pass","End":true}}}`),
		RoleArn:    aws.String("arn:aws:iam::123456789012:role/broker-workflows"),
	})
	if err != nil {
		t.Fatal(err)
	}
	taskRoot := t.TempDir()
	catalog, err := os.ReadFile(filepath.Join(apptest.Root(), "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(taskRoot, "catalog.yaml"), catalog, 0o644); err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"AWS_ENDPOINT_URL": mototest.Endpoint(t), "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
		"AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONFIG_FILE":             filepath.Join(taskRoot, "no-config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(taskRoot, "no-credentials"),
		"AWS_REGION":                  region, "BROKER_TABLE": table, "LAMBDA_TASK_ROOT": taskRoot,
		"BROKER_OPERATION_STATE_MACHINE_ARN": aws.ToString(machine.StateMachineArn),
	}
}
