package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/serverless-osb/broker/internal/api"
	"github.com/serverless-osb/broker/internal/awsenv"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/drivers"
	"github.com/serverless-osb/broker/internal/engine/sfn"
	"github.com/serverless-osb/broker/internal/env"
	"github.com/serverless-osb/broker/internal/logging"
	"github.com/serverless-osb/broker/internal/metrics"
	"github.com/serverless-osb/broker/internal/metrics/metricname"
	"github.com/serverless-osb/broker/internal/sealing"
	"github.com/serverless-osb/broker/internal/steps"
	"github.com/serverless-osb/broker/internal/store/dynamo"
	"github.com/serverless-osb/broker/internal/tracing"
)

// Function is one of the broker's Lambda functions.
type Function string

const (
	// FunctionAPI serves the OSB API behind API Gateway.
	FunctionAPI Function = "api"
	// FunctionWorker runs the Task states of the workflows.
	FunctionWorker Function = "worker"
)

// LambdaConfig configures a Lambda function of the broker.
type LambdaConfig struct {
	Function Function
	// Store says which DynamoDB table holds the broker's items.
	Store dynamo.Config
	// SecretARN is the api function's (required there).
	SecretARN string
	// OriginSecretARN (api function, optional) names the secret the front
	// door sends in deploy.HeaderOriginVerify: set, every request without it
	// is refused.
	OriginSecretARN string
	// StateMachineARN (the operation workflow) is required for the api
	// function; the worker needs it, with CleanupStateMachineARN, to run
	// the reaper ({"step":"reap"}) and to start cleanups. The CDK stack
	// gives both to both functions.
	StateMachineARN        string
	CleanupStateMachineARN string
	// UpgradeStateMachineARN (the fleet upgrade) is ops upgrade's.
	UpgradeStateMachineARN string
	CatalogPath            string
	LogLevel               slog.Level
	// SealingKey seals the secrets the table keeps (env.SealingKeyARN);
	// empty, none.
	SealingKey string
	// SealedOnly refuses secrets found in clear whatever the table's
	// sealing mode says (env.SealedOnly; sealing.Store.SealedOnly).
	SealedOnly bool
	// MetricsNamespace is the metrics' CloudWatch namespace
	// (env.MetricsNamespace; default metricname.DefaultNamespace).
	MetricsNamespace string
	// Metrics, when set, receives the broker's metrics (EMF documents on
	// the function's stdout); nil records none, as the operator command.
	Metrics *metrics.Writer
	// MaxTasksPerPlan (worker function, env.MaxTasksPerPlan) bounds the
	// calls each plan's Tasks make to its backend at once, by leases on
	// the table (dynamo.Slots); 0, none.
	MaxTasksPerPlan int
	// Tracing instruments the AWS SDK clients for X-Ray (internal/tracing):
	// on in the functions, off for the operator command and tests.
	Tracing bool
	// CredentialsMaxAge (api function) is how long the credentials read
	// from SecretARN are used before they are read again; zero means
	// DefaultCredentialsMaxAge.
	CredentialsMaxAge time.Duration
	// Now tells the time (the credentials' age); nil means time.Now.
	Now func() time.Time
	// CatalogChecked says the catalog is the one make build checked and
	// bundled: its parameters schemas are compiled on first use
	// (catalog.LoadChecked), not at start. On in the functions only.
	CatalogChecked bool
}

// InLambda reports whether the process runs under the Lambda runtime.
func InLambda() bool {
	return os.Getenv("AWS_LAMBDA_RUNTIME_API") != "" || os.Getenv("AWS_LAMBDA_FUNCTION_NAME") != ""
}

// RequiredEnv lists the environment variables function f refuses to start
// without (internal/env names them; the CDK stack sets them, but for
// AWS_REGION, which Lambda sets).
func RequiredEnv(f Function) []string {
	switch f {
	case FunctionAPI:
		return []string{env.Table, env.Region, env.SecretARN, env.OperationStateMachineARN}
	case FunctionWorker:
		return []string{env.Table, env.Region}
	}
	return nil
}

// LambdaConfigFromEnv reads the configuration of function f from the
// variables internal/env names. Every problem is reported in one error: all
// the missing variables (RequiredEnv), then the malformed ones.
func LambdaConfigFromEnv(f Function) (LambdaConfig, error) {
	c := LambdaConfig{
		Function: f,
		Store: dynamo.Config{
			Table:    os.Getenv(env.Table),
			Region:   os.Getenv(env.Region),
			Endpoint: os.Getenv(env.DynamoDBEndpoint),
		},
		CatalogPath:      os.Getenv(env.Catalog),
		SealingKey:       os.Getenv(env.SealingKeyARN),
		MetricsNamespace: cmp.Or(os.Getenv(env.MetricsNamespace), metricname.DefaultNamespace),
	}
	c.StateMachineARN, c.CleanupStateMachineARN = os.Getenv(env.OperationStateMachineARN), os.Getenv(env.CleanupStateMachineARN)
	c.UpgradeStateMachineARN = os.Getenv(env.UpgradeStateMachineARN)
	switch f {
	case FunctionAPI:
		c.SecretARN = os.Getenv(env.SecretARN)
		c.OriginSecretARN = os.Getenv(env.OriginSecretARN)
	case FunctionWorker:
	default:
		return c, fmt.Errorf("no Lambda function %q (have: %s, %s)", f, FunctionAPI, FunctionWorker)
	}
	var missing []string
	for _, name := range RequiredEnv(f) {
		if os.Getenv(name) == "" {
			missing = append(missing, name)
		}
	}
	var problems []string
	if len(missing) > 0 {
		problems = append(problems, "missing environment variables: "+strings.Join(missing, ", "))
	}
	for _, v := range [][2]string{{env.OperationStateMachineARN, c.StateMachineARN}, {env.CleanupStateMachineARN, c.CleanupStateMachineARN},
		{env.UpgradeStateMachineARN, c.UpgradeStateMachineARN}} {
		if v[1] == "" {
			continue
		}
		if a, err := arn.Parse(v[1]); err != nil || a.Service != "states" || !strings.HasPrefix(a.Resource, "stateMachine:") {
			problems = append(problems, fmt.Sprintf("%s=%q is not the ARN of a state machine", v[0], v[1]))
		}
	}
	switch v := os.Getenv(env.SealedOnly); v {
	case "", "false":
	case "true":
		c.SealedOnly = true
		if c.SealingKey == "" {
			problems = append(problems, fmt.Sprintf("%s=true needs %s: nothing is sealed without a sealing key", env.SealedOnly, env.SealingKeyARN))
		}
	default:
		problems = append(problems, fmt.Sprintf("%s=%q: want true or false", env.SealedOnly, v))
	}
	if v := os.Getenv(env.MaxTasksPerPlan); v != "" && f == FunctionWorker {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			problems = append(problems, fmt.Sprintf("%s=%q: want a whole number, 0 for no bound", env.MaxTasksPerPlan, v))
		}
		c.MaxTasksPerPlan = n
	}
	if v := os.Getenv(env.LogLevel); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			problems = append(problems, fmt.Sprintf("%s=%q: want DEBUG, INFO, WARN or ERROR", env.LogLevel, v))
		}
	}
	if len(problems) > 0 {
		return c, fmt.Errorf("%s function configuration: %s", f, strings.Join(problems, "; "))
	}
	if c.CatalogPath == "" {
		c.CatalogPath = defaultCatalogPath()
	}
	return c, nil
}

// defaultCatalogPath is catalog.yaml beside the bootstrap: in
// LAMBDA_TASK_ROOT, or else in the executable's folder.
func defaultCatalogPath() string {
	dir := os.Getenv(env.TaskRoot)
	if dir == "" {
		if exe, err := os.Executable(); err == nil {
			dir = filepath.Dir(exe)
		}
	}
	return filepath.Join(dir, "catalog.yaml")
}

// NewLambdaAPI builds the api function's handler from the environment, once
// per container: AWS configuration, DynamoDB store, Step Functions engine,
// the credentials from Secrets Manager, the catalog, and the demo driver
// running synchronous plans within the request. It logs JSON to stdout,
// and sets the process's garbage collector (functionGC).
func NewLambdaAPI(ctx context.Context) (http.Handler, error) {
	functionGC(os.Getenv)
	c, err := LambdaConfigFromEnv(FunctionAPI)
	if err != nil {
		return nil, err
	}
	logger := logging.New(os.Stdout, c.LogLevel)
	c.Metrics, c.Tracing, c.CatalogChecked = functionMetrics(c, logger), true, true
	return BuildLambdaAPI(ctx, c, logger)
}

// NewWorker builds the worker function's handler from the environment,
// once per container: the steps of the workflows on the DynamoDB store.
// It logs JSON to stdout, and sets the process's garbage collector
// (functionGC).
func NewWorker(ctx context.Context) (func(context.Context, json.RawMessage) (json.RawMessage, error), error) {
	functionGC(os.Getenv)
	c, err := LambdaConfigFromEnv(FunctionWorker)
	if err != nil {
		return nil, err
	}
	logger := logging.New(os.Stdout, c.LogLevel)
	log.SetFlags(0)
	log.SetOutput(runtimeLog{logger})
	c.Metrics, c.Tracing, c.CatalogChecked = functionMetrics(c, logger), true, true
	return BuildWorker(ctx, c, logger)
}

// runtimeLog receives what aws-lambda-go writes with the standard logger.
// For every function error it prints the error's payload, whose message
// is, for a PermanentError, the description the user sees, which may
// repeat request input (steps.Lambda logs the error's type instead), in a
// line that is not JSON: that line is dropped. Anything else (the runtime
// failing) is logged as JSON.
type runtimeLog struct{ logger *slog.Logger }

func (w runtimeLog) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	if !strings.HasPrefix(line, `{"errorMessage"`) {
		w.logger.Error("lambda runtime", "message", line)
	}
	return len(p), nil
}

// functionMetrics writes a function's metrics to stdout, beside its logs,
// where CloudWatch Logs extracts them.
func functionMetrics(c LambdaConfig, logger *slog.Logger) *metrics.Writer {
	w := metrics.NewWriter(os.Stdout, c.MetricsNamespace)
	w.Logger = logger
	return w
}

// BuildLambdaAPI builds the api function's handler from c. The secrets
// are read while the catalog and the drivers are built (a round trip to
// Secrets Manager and the catalog's templates were each a good part of
// the cold start, one after the other); both must succeed before it
// returns, so no request is served without the credentials, and a secret
// that cannot be read is the error reported, as when it was read first.
func BuildLambdaAPI(ctx context.Context, c LambdaConfig, logger *slog.Logger) (http.Handler, error) {
	awsCfg, err := functionConfig(c, logger)
	if err != nil {
		return nil, err
	}
	read := make(chan startSecrets, 1)
	go func() { read <- readStartSecrets(ctx, c, secretsmanager.NewFromConfig(awsCfg), logger) }()
	// The api changes no stack (its CloudFormation plans are async-only),
	// and its bootstrap links no client that would.
	cat, b, err := buildBroker(ctx, c, awsCfg, drivers.AdmitStacks, logger)
	secrets := <-read
	if secrets.err != nil {
		return nil, secrets.err
	}
	if err != nil {
		return nil, err
	}
	creds, origin := secrets.creds, secrets.origin
	b.Engine = sfn.New(awssfn.NewFromConfig(awsCfg), c.stateMachines())
	logger.InfoContext(ctx, "api function ready", "table", c.Store.Table, "catalog", c.CatalogPath,
		"credential_pairs", creds.set.Len(), "credentials_max_age", creds.maxAge.String(), "front_door", origin != "", "sealed_only", c.SealedOnly)
	h := api.New(api.Config{Broker: b, Catalog: cat, CredentialSource: creds, Logger: logger, OriginSecret: origin})
	return metrics.CountPolls(h, c.recorder(cat)), nil
}

// startSecrets are what the api reads from Secrets Manager at start: the
// broker's credentials and, behind a front door, the origin secret.
type startSecrets struct {
	creds  *secretCredentials
	origin string
	err    error
}

func readStartSecrets(ctx context.Context, c LambdaConfig, client *secretsmanager.Client, logger *slog.Logger) startSecrets {
	creds, err := newSecretCredentials(ctx, c, client, logger)
	if err != nil {
		return startSecrets{err: err}
	}
	s := startSecrets{creds: creds}
	if c.OriginSecretARN != "" {
		s.origin, s.err = readOriginSecret(ctx, client, c.OriginSecretARN)
	}
	return s
}

// BuildWorker builds the worker function's handler from c.
func BuildWorker(ctx context.Context, c LambdaConfig, logger *slog.Logger) (func(context.Context, json.RawMessage) (json.RawMessage, error), error) {
	awsCfg, err := functionConfig(c, logger)
	if err != nil {
		return nil, err
	}
	cat, b, err := buildBroker(ctx, c, awsCfg, drivers.RunStacks, logger)
	if err != nil {
		return nil, err
	}
	if c.MaxTasksPerPlan > 0 {
		slots := dynamo.NewSlots(dynamodb.NewFromConfig(awsCfg, c.Store.ClientOptions), c.Store.Table, c.MaxTasksPerPlan)
		slots.Logger = logger
		b.Slots = slots
	}
	st := steps.New(b)
	if machines := c.stateMachines(); len(machines) > 0 {
		b.Engine = sfn.New(awssfn.NewFromConfig(awsCfg), machines)
		rec := c.recorder(cat)
		st.Reaped, st.Upgraded = rec.Reap, rec.Upgrade
	}
	logger.InfoContext(ctx, "worker function ready", "table", c.Store.Table, "catalog", c.CatalogPath, "sealed_only", c.SealedOnly)
	return st.Lambda, nil
}

// recorder records the metrics of the broker serving cat, or none (nil)
// when c has no metrics writer.
func (c LambdaConfig) recorder(cat *catalog.Catalog) *metrics.Recorder {
	if c.Metrics == nil {
		return nil
	}
	return metrics.New(c.Metrics, cat)
}

// stateMachines maps the workflows to the ARNs the environment gives.
func (c LambdaConfig) stateMachines() map[broker.Workflow]string {
	m := map[broker.Workflow]string{}
	if c.StateMachineARN != "" {
		m[broker.WorkflowOperation] = c.StateMachineARN
	}
	if c.CleanupStateMachineARN != "" {
		m[broker.WorkflowCleanup] = c.CleanupStateMachineARN
	}
	if c.UpgradeStateMachineARN != "" {
		m[broker.WorkflowUpgrade] = c.UpgradeStateMachineARN
	}
	return m
}

// functionConfig is a function's AWS configuration (awsenv.Config).
func functionConfig(c LambdaConfig, logger *slog.Logger) (aws.Config, error) {
	cfg, err := awsenv.Config(c.Store.Region)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	return instrumented(cfg, c, logger)
}

func instrumented(cfg aws.Config, c LambdaConfig, logger *slog.Logger) (aws.Config, error) {
	if c.Tracing {
		if err := tracing.Instrument(&cfg, logger); err != nil {
			return aws.Config{}, err
		}
	}
	return cfg, nil
}

// buildBroker loads the catalog and makes the broker on the DynamoDB store,
// with the drivers the catalog's plans name, the CloudFormation driver's
// stacks as the caller runs them; its engine is the caller's.
func buildBroker(ctx context.Context, c LambdaConfig, awsCfg aws.Config, stacks drivers.Stacks, logger *slog.Logger) (*catalog.Catalog, *broker.Broker, error) {
	load := catalog.Load
	if c.CatalogChecked {
		load = catalog.LoadChecked
	}
	cat, err := load(c.CatalogPath)
	if err != nil {
		return nil, nil, err
	}
	table := dynamo.New(dynamodb.NewFromConfig(awsCfg, c.Store.ClientOptions), c.Store.Table)
	store := metrics.NewStore(table, c.recorder(cat))
	if c.SealingKey != "" {
		// One cached data key seals many items for a while (bounded in age
		// and uses); each value is still bound to its item.
		sealer, err := sealing.NewKMS(sealing.KMSConfig{Client: kms.NewFromConfig(awsCfg), KeyID: c.SealingKey,
			SharedDataKeys: true, SharedContext: map[string]string{deploy.SealingContextKey: c.Store.Table}})
		if err != nil {
			return nil, nil, err
		}
		sealed := sealing.NewStore(store, sealer)
		sealed.SensitivePlans = cat.SensitivePlanIDs()
		sealed.SealedOnly = c.SealedOnly
		store = sealed
		if c.SealedOnly {
			warnUnsealed(ctx, table, logger)
		}
	}
	set, err := drivers.Build(ctx, cat, drivers.Env{Resources: store, Logger: logger, Getenv: os.Getenv, Stacks: stacks,
		AWS: func(context.Context) (aws.Config, error) { return awsCfg, nil }})
	if err != nil {
		return nil, nil, err
	}
	b := broker.New(cat, store, nil, set, logger)
	b.Campaigns = table
	return cat, b, nil
}

// warnUnsealed logs, at start, when the functions refuse values in clear
// (sealed-only, the stack's default) but no `ops reseal` has recorded the
// table sealed: a deployment upgraded from a broker that stored values in
// clear would refuse them, and this line says so before the first refusal.
// A new deployment sees it too until its first reseal, which finds nothing
// to seal.
func warnUnsealed(ctx context.Context, table *dynamo.Store, logger *slog.Logger) {
	mode, err := table.SealingMode(ctx)
	switch {
	case err != nil:
		logger.WarnContext(ctx, "sealing mode unknown at start", "error", err)
	case !mode.SealedOnly:
		logger.WarnContext(ctx, "values in clear are refused ("+env.SealedOnly+"=true), but no reseal has recorded the table sealed: "+
			"if this deployment stored secrets before sealing, run `ops --stack NAME reseal` (or deploy with sealedOnly=false until it has run)")
	}
}

// readCredentials reads the broker's credentials from the secret. Its value
// is never logged, not even in an error.
func readCredentials(ctx context.Context, client *secretsmanager.Client, secretARN string) ([]api.Credential, error) {
	out, err := client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(secretARN)})
	if err != nil {
		return nil, fmt.Errorf("read the broker credentials from secret %s: %w", secretARN, err)
	}
	creds, err := ParseSecret([]byte(aws.ToString(out.SecretString)))
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", secretARN, err)
	}
	return creds, nil
}

// readOriginSecret reads the origin secret, the front door's header value:
// the secret's whole string, as the stack generates it. Its value is never
// logged, not even in an error.
func readOriginSecret(ctx context.Context, client *secretsmanager.Client, secretARN string) (string, error) {
	out, err := client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(secretARN)})
	if err != nil {
		return "", fmt.Errorf("read the origin secret from secret %s: %w", secretARN, err)
	}
	value := aws.ToString(out.SecretString)
	if value == "" {
		return "", fmt.Errorf("origin secret %s: empty: it must hold the value the front door sends in %s", secretARN, deploy.HeaderOriginVerify)
	}
	return value, nil
}

// ParseSecret reads the broker's credentials from a secret's value: one
// {"username","password"} object (what a CDK-generated secret holds) or a
// JSON list of them (several pairs are accepted at once, for rotation).
// Its errors never quote the value.
func ParseSecret(value []byte) ([]api.Credential, error) {
	trimmed := strings.TrimSpace(string(value))
	if strings.HasPrefix(trimmed, "[") {
		return ParseCredentials([]byte(trimmed))
	}
	var pair struct {
		Username string `json:"username"`
		Password string `json:"password"`
	}
	if err := json.Unmarshal([]byte(trimmed), &pair); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			return nil, fmt.Errorf("want {\"username\",\"password\"} or a list of them: not JSON (at byte %d)", syntax.Offset)
		}
		return nil, errors.New(`want {"username","password"} or a list of them`)
	}
	if pair.Username == "" || pair.Password == "" {
		return nil, errors.New("username and password must be non-empty")
	}
	return []api.Credential{api.Credential(pair)}, nil
}

// LambdaHTTP adapts the broker's HTTP handler to API Gateway HTTP API
// events (payload format 2.0), as the api function serves it.
func LambdaHTTP(h http.Handler) lambda.Handler {
	return lambda.NewHandler(proxyV2(httpadapter.NewV2(withLambdaRequestID(h))))
}

// withLambdaRequestID puts the Lambda request id on every log line of the
// request.
func withLambdaRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lc, ok := lambdacontext.FromContext(r.Context()); ok && lc.AwsRequestID != "" {
			r = r.WithContext(logging.With(r.Context(), slog.String("aws_request_id", lc.AwsRequestID)))
		}
		next.ServeHTTP(w, r)
	})
}
