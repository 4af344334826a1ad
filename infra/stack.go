package infra

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudfront"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	osbcatalog "github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/env"
	"github.com/serverless-osb/broker/internal/store/dynamo/schema"
)

// substitutionWorkerARN is the DefinitionSubstitutions key the workflows
// name the worker function by.
const substitutionWorkerARN = "WorkerFunctionArn"

// The stack's outputs.
const (
	OutputBrokerURL       = "BrokerUrl"
	OutputBrokerSecretARN = "BrokerSecretArn"
)

// brokerUsername is the user name of the generated credentials.
const brokerUsername = "broker"

// NewBrokerStack defines the broker's stack in scope. It reads the
// workflows and checks the function assets now, so that a missing build or
// a broken workflow fails the synthesis with the reason rather than the
// deployment.
func NewBrokerStack(scope constructs.Construct, id string, props *BrokerStackProps) (awscdk.Stack, error) {
	if props == nil {
		props = &BrokerStackProps{}
	}
	p, err := props.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("stack %s: %w", id, err)
	}
	name := id
	if p.StackName != nil {
		name = *p.StackName
	}
	if err := checkBrokerStackName(name, p.StackPrefix, p.LegacyStackPrefix); err != nil {
		return nil, fmt.Errorf("stack %s: %w", id, err)
	}
	workflows, err := loadWorkflows(p.StateMachinesDir, []string{substitutionWorkerARN})
	if err != nil {
		return nil, fmt.Errorf("stack %s: %w", id, err)
	}
	manifestFiles := func(string) ([]string, error) {
		m, err := readManifest(p.WorkerCodeDir)
		return m.Files, err
	}
	if err := checkAssets(p.CatalogPath, manifestFiles, p.APICodeDir, p.WorkerCodeDir); err != nil {
		return nil, fmt.Errorf("stack %s: %w", id, err)
	}
	manifest, err := readManifest(p.WorkerCodeDir)
	if err != nil {
		return nil, fmt.Errorf("stack %s: %w", id, err)
	}
	// The catalog's networks add the VPCs of their dbuser functions.
	if p.DatabaseUserVPCs, err = catalogNetworks(p.CatalogPath, p.DatabaseUserVPCs); err != nil {
		return nil, fmt.Errorf("stack %s: %w", id, err)
	}
	if err := checkDatabaseUserAsset(p); err != nil {
		return nil, fmt.Errorf("stack %s: %w", id, err)
	}
	// The catalog's templates say whether the Custom::CacheUserGroupMember
	// function is needed: a Valkey bind fails at CloudFormation without it.
	cacheUsers := manifest.CustomResource(deploy.CacheUserGroupMember)
	if err := checkCacheUserAsset(p, cacheUsers); err != nil {
		return nil, fmt.Errorf("stack %s: %w", id, err)
	}

	stack := awscdk.NewStack(scope, &id, &p.StackProps)
	if err := checkStateMachineNames(stack, workflows); err != nil {
		return nil, fmt.Errorf("stack %s: %w", id, err)
	}
	b := &builder{stack: stack, props: p, retention: retentions[p.LogRetentionDays]}
	if err := b.data(); err != nil {
		return nil, fmt.Errorf("stack %s: %w", id, err)
	}
	b.functions()
	b.databaseUsers()
	b.cacheUsers(cacheUsers)
	b.grantDriverNeeds(manifest)
	b.stateMachines(workflows)
	b.reaper()
	b.apiGateway()
	b.frontDoor()
	b.permissions()
	b.observability()
	b.outputs()

	awscdk.Aspects_Of(stack).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	b.suppressNagFindings()
	return stack, nil
}

// checkAssets makes sure each asset directory holds what the functions
// run: bootstrap and the catalog, pre-parsed (catalog.yaml.json, made from
// catalog when one is given) or as YAML (catalog.yaml, identical to it),
// and beside it, identical too, every file the catalog's
// driver settings read (list: the templates), at its path relative to the
// catalog.
func checkAssets(catalog string, list func(catalog string) ([]string, error), dirs ...string) error {
	var want []byte
	files := map[string][]byte{}
	if catalog != "" {
		var err error
		if want, err = os.ReadFile(catalog); err != nil {
			return fmt.Errorf("catalog: %w", err)
		}
		names, err := list(catalog)
		if err != nil {
			return fmt.Errorf("catalog %s: %w", catalog, err)
		}
		for _, name := range names {
			if files[name], err = os.ReadFile(filepath.Join(filepath.Dir(catalog), filepath.FromSlash(name))); err != nil {
				return fmt.Errorf("catalog %s: %w", catalog, err)
			}
		}
	}
	var errs []error
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "bootstrap")); err != nil {
			errs = append(errs, fmt.Errorf("function asset %s: %w (make build writes it)", dir, err))
			continue
		}
		// make build bundles the catalog pre-parsed alone (the functions
		// read no YAML), which records the digest of the YAML it was made
		// from; an asset that holds the YAML is compared as it is.
		if digest, err := osbcatalog.PreparsedDigest(filepath.Join(dir, "catalog.yaml.json")); err == nil {
			if want != nil && digest != osbcatalog.Digest(want) {
				errs = append(errs, fmt.Errorf("function asset %s: its catalog.yaml.json was not made from %s: build with that catalog (make build)", dir, catalog))
				continue
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("function asset %s: %w", dir, err))
			continue
		} else if got, err := os.ReadFile(filepath.Join(dir, "catalog.yaml")); err != nil {
			errs = append(errs, fmt.Errorf("function asset %s: %w (make build writes it)", dir, err))
			continue
		} else if want != nil && !bytes.Equal(got, want) {
			errs = append(errs, fmt.Errorf("function asset %s: its catalog.yaml is not %s: build with that catalog (make build)", dir, catalog))
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(files)) {
			got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
			if err != nil || !bytes.Equal(got, files[name]) {
				errs = append(errs, fmt.Errorf("function asset %s: its %s is not the one beside %s: build with that catalog (make build)", dir, name, catalog))
			}
		}
	}
	return errors.Join(errs...)
}

// checkStateMachineNames makes sure the state machines' names, which
// derive from the stack's name, are names Step Functions accepts.
func checkStateMachineNames(stack awscdk.Stack, workflows []workflow) error {
	if *awscdk.Token_IsUnresolved(stack.StackName()) {
		return errors.New("the stack's name must be known at synthesis: the state machines are named after it")
	}
	var errs []error
	for _, w := range workflows {
		if name := w.stateMachineName(*stack.StackName()); len(name) > maxStateMachineName {
			errs = append(errs, fmt.Errorf("state machine name %s: longer than Step Functions' %d characters; choose a shorter stack name", name, maxStateMachineName))
		}
	}
	return errors.Join(errs...)
}

// builder holds the stack's resources while NewBrokerStack defines them.
type builder struct {
	stack     awscdk.Stack
	props     BrokerStackProps
	retention awslogs.RetentionDays
	// code, when set, is a function's code from its asset directory: the
	// target stack's come from a bucket (targetHandlers), the broker's are
	// CDK assets.
	code func(codeDir string) awslambda.Code

	// key encrypts the table at rest; sealKey seals the secrets the table
	// keeps (internal/sealing): two keys, so that one can be rotated or
	// revoked without the other.
	key     awskms.Key
	sealKey awskms.Key
	table   awsdynamodb.Table
	secret  awssecretsmanager.Secret

	apiRole, workerRole awsiam.Role
	// needs are what the catalog's drivers declared they need of the
	// stack (grantDriverNeeds).
	needs deploy.Manifest
	// serviceRole is CloudFormation's role for the service stacks, made
	// when a driver needs it.
	serviceRole awsiam.Role
	// serviceRoleGrants hold the service role's own grants.
	serviceRoleGrants []awsiam.ManagedPolicy
	// boundary is the permissions boundary of the IAM identities the
	// service stacks make.
	boundary awsiam.ManagedPolicy
	// templateBucket holds the service stacks' templates over
	// CloudFormation's TemplateBody limit, made with the service role.
	templateBucket      awss3.Bucket
	apiLogs, workerLogs awslogs.LogGroup
	api, worker         awslambda.Function

	machines []stateMachine

	httpAPI awsapigatewayv2.HttpApi
	// route is every OSB request's but the polls', which have pollRoutes.
	route      awsapigatewayv2.HttpRoute
	pollRoutes []awsapigatewayv2.HttpRoute
	stage      awsapigatewayv2.HttpStage
	accessLog  awslogs.LogGroup

	// The front door, when the props ask for it: the distribution in front
	// of the HTTP API, and the secret it sends that the api requires.
	distribution awscloudfront.Distribution
	// apiDomain is the HTTP API's custom domain (customDomain), or nil.
	apiDomain    awsapigatewayv2.DomainName
	originSecret awssecretsmanager.Secret
}

type stateMachine struct {
	workflow workflow
	machine  awsstepfunctions.StateMachine
	// name is the state machine's fixed name, and arn its ARN made from
	// the name rather than a reference to the state machine, which the
	// worker needs (see workflow.stateMachineName).
	name string
	arn  *string
}

// data defines the table, its key and the credentials' secret.
func (b *builder) data() error {
	b.key = awskms.NewKey(b.stack, jsii.String("TableKey"), &awskms.KeyProps{
		Description:       jsii.String("Encrypts the broker's DynamoDB table (instances, bindings, operations, credentials)."),
		EnableKeyRotation: jsii.Bool(true),
		// The table outlives the stack, and its data is unreadable without
		// this key.
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	})
	b.sealKey = awskms.NewKey(b.stack, jsii.String("SealingKey"), &awskms.KeyProps{
		Description: jsii.String("Seals the secrets the broker's table keeps (binding credentials, driver records, sensitive parameters): envelope encryption by the functions."),
		// Its own policy, which replaces CDK's default (the account's IAM
		// decides everything): the account administers the key, the
		// functions and the operators named use it (sealingKeyPolicy).
		Policy:            awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{Statements: &[]awsiam.PolicyStatement{keyAdministration()}}),
		Alias:             jsii.String("alias/" + *b.stack.StackName() + "-sealing"),
		EnableKeyRotation: jsii.Bool(true),
		// The secrets in the table are unreadable without this key.
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	})
	// The table's shape is the dynamo store's (schema.Table), which its
	// CreateTable makes too: TestTableIsTheStoresTable checks both agree.
	shape := schema.Table()
	hash, err := tableAttribute(shape.HashKey)
	if err != nil {
		return err
	}
	sort, err := tableAttribute(shape.RangeKey)
	if err != nil {
		return err
	}
	b.table = awsdynamodb.NewTable(b.stack, jsii.String("Table"), &awsdynamodb.TableProps{
		PartitionKey:  hash,
		SortKey:       sort,
		BillingMode:   awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Encryption:    awsdynamodb.TableEncryption_CUSTOMER_MANAGED,
		EncryptionKey: b.key,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		TimeToLiveAttribute: jsii.String(shape.TimeToLive),
		DeletionProtection:  jsii.Bool(true),
		RemovalPolicy:       awscdk.RemovalPolicy_RETAIN,
	})
	for _, index := range shape.Indexes {
		hash, err := tableAttribute(index.HashKey)
		if err != nil {
			return fmt.Errorf("index %s: %w", index.Name, err)
		}
		sort, err := tableAttribute(index.RangeKey)
		if err != nil {
			return fmt.Errorf("index %s: %w", index.Name, err)
		}
		projection, ok := tableProjections[index.Projection]
		if !ok {
			return fmt.Errorf("index %s: projection %q: the stack knows %v", index.Name, index.Projection, slices.Sorted(maps.Keys(tableProjections)))
		}
		b.table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
			IndexName:      jsii.String(index.Name),
			PartitionKey:   hash,
			SortKey:        sort,
			ProjectionType: projection,
		})
	}

	b.secret = awssecretsmanager.NewSecret(b.stack, jsii.String("Credentials"), &awssecretsmanager.SecretProps{
		Description: jsii.String("The broker's basic-auth credentials, which the platform registers the broker with."),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			SecretStringTemplate: jsii.String(fmt.Sprintf(`{"username":%q}`, brokerUsername)),
			GenerateStringKey:    jsii.String("password"),
			// Letters and digits only: the password goes into URLs and
			// Authorization headers unescaped.
			ExcludePunctuation: jsii.Bool(true),
			PasswordLength:     jsii.Number(32),
		},
	})
	return nil
}

// The CDK's names of DynamoDB's attribute types and projections.
var (
	tableAttributeTypes = map[types.ScalarAttributeType]awsdynamodb.AttributeType{
		types.ScalarAttributeTypeS: awsdynamodb.AttributeType_STRING,
		types.ScalarAttributeTypeN: awsdynamodb.AttributeType_NUMBER,
		types.ScalarAttributeTypeB: awsdynamodb.AttributeType_BINARY,
	}
	tableProjections = map[types.ProjectionType]awsdynamodb.ProjectionType{
		types.ProjectionTypeAll:      awsdynamodb.ProjectionType_ALL,
		types.ProjectionTypeKeysOnly: awsdynamodb.ProjectionType_KEYS_ONLY,
	}
)

// tableAttribute is a key attribute of the store's schema for the CDK, or
// nil for none (a key without a range key).
func tableAttribute(a schema.KeyAttribute) (*awsdynamodb.Attribute, error) {
	if a.Name == "" {
		return nil, nil
	}
	t, ok := tableAttributeTypes[a.Type]
	if !ok {
		return nil, fmt.Errorf("key attribute %s: type %q: the stack knows %v", a.Name, a.Type, slices.Sorted(maps.Keys(tableAttributeTypes)))
	}
	return &awsdynamodb.Attribute{Name: jsii.String(a.Name), Type: t}, nil
}

// functions defines the api and worker functions with their roles and log
// groups; their permissions come in permissions.
func (b *builder) functions() {
	b.apiRole = b.lambdaRole("ApiRole", "The broker's api function (the OSB HTTP API).")
	b.workerRole = b.lambdaRole("WorkerRole", "The broker's worker function (the workflows' Task states).")
	b.apiLogs = b.logGroup("ApiLogs", nil)
	b.workerLogs = b.logGroup("WorkerLogs", nil)

	// The variables internal/env names; the state machines' ARNs come with
	// the state machines, the CloudFormation driver's with the service
	// role.
	apiEnv := map[string]*string{
		env.Table:            b.table.TableName(),
		env.SecretARN:        b.secret.SecretArn(),
		env.MetricsNamespace: jsii.String(b.metricsNamespace()),
		env.SealingKeyARN:    b.sealKey.KeyArn(),
	}
	workerEnv := map[string]*string{
		env.Table:            b.table.TableName(),
		env.MetricsNamespace: jsii.String(b.metricsNamespace()),
		env.SealingKeyARN:    b.sealKey.KeyArn(),
	}
	if b.props.LogLevel != "" {
		apiEnv[env.LogLevel] = jsii.String(b.props.LogLevel)
		workerEnv[env.LogLevel] = jsii.String(b.props.LogLevel)
	}
	if !b.props.AllowClear {
		apiEnv[env.SealedOnly] = jsii.String("true")
		workerEnv[env.SealedOnly] = jsii.String("true")
	}
	b.api = b.function("ApiFunction", functionSpec{
		description: "The Open Service Broker API, behind the HTTP API.",
		codeDir:     b.props.APICodeDir,
		memoryMB:    b.props.APIMemoryMB,
		timeout:     b.props.APITimeout,
		reserved:    b.props.APIReservedConcurrency,
		role:        b.apiRole,
		logs:        b.apiLogs,
		env:         apiEnv,
	})
	b.worker = b.function("WorkerFunction", functionSpec{
		description: "The Task states of the broker's workflows.",
		codeDir:     b.props.WorkerCodeDir,
		memoryMB:    b.props.WorkerMemoryMB,
		timeout:     b.props.WorkerTimeout,
		reserved:    b.props.WorkerReservedConcurrency,
		role:        b.workerRole,
		logs:        b.workerLogs,
		env:         workerEnv,
	})
	if b.props.WorkerTasksPerPlan > 0 {
		b.worker.AddEnvironment(jsii.String(env.MaxTasksPerPlan), jsii.String(strconv.Itoa(b.props.WorkerTasksPerPlan)), nil)
	}
}

type functionSpec struct {
	description string
	codeDir     string
	memoryMB    int
	timeout     time.Duration
	// reserved is the reserved concurrency; not positive: none.
	reserved int
	role     awsiam.IRole
	logs     awslogs.ILogGroup
	env      map[string]*string
}

func (b *builder) function(id string, s functionSpec) awslambda.Function {
	fn := awslambda.NewFunction(b.stack, &id, &awslambda.FunctionProps{
		Description:  &s.description,
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         b.functionCode(s.codeDir),
		MemorySize:   jsii.Number(s.memoryMB),
		Timeout:      awscdk.Duration_Seconds(jsii.Number(s.timeout.Seconds())),
		Tracing:      awslambda.Tracing_ACTIVE,
		Role:         s.role,
		LogGroup:     s.logs,
		Environment:  &s.env,
	})
	if s.reserved > 0 {
		fn.Node().DefaultChild().(awslambda.CfnFunction).SetReservedConcurrentExecutions(jsii.Number(s.reserved))
	}
	ignoreRedundantRoleDependency(fn)
	return fn
}

func (b *builder) functionCode(dir string) awslambda.Code {
	if b.code != nil {
		return b.code(dir)
	}
	return awslambda.Code_FromAsset(&dir, nil)
}

// lambdaRole is a role that Lambda assumes and that has no permission yet:
// not even the managed AWSLambdaBasicExecutionRole, whose logs permissions
// cover every log group of the account.
func (b *builder) lambdaRole(id, description string) awsiam.Role {
	return awsiam.NewRole(b.stack, &id, &awsiam.RoleProps{
		Description: &description,
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
	})
}

// logGroup is a log group keeping its events the retention configured;
// name is empty for a name CloudFormation makes up.
func (b *builder) logGroup(id string, name *string) awslogs.LogGroup {
	return awslogs.NewLogGroup(b.stack, &id, &awslogs.LogGroupProps{
		LogGroupName:  name,
		Retention:     b.retention,
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	})
}

// vendedLogGroupName is /aws/vendedlogs/states/STACK-WORKFLOW-STACKUUID:
// under /aws/vendedlogs/, Step Functions' log delivery needs no entry per
// log group in the account's CloudWatch Logs resource policy, whose size is
// limited; the stack's UUID keeps the name free when a deleted stack left
// its log group behind.
func (b *builder) vendedLogGroupName(w workflow) *string {
	stackUUID := awscdk.Fn_Select(jsii.Number(2), awscdk.Fn_Split(jsii.String("/"), b.stack.StackId(), nil))
	return awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("/aws/vendedlogs/states/"), b.stack.StackName(), jsii.String("-" + w.name + "-"), stackUUID,
	})
}

// stateMachines defines one Standard state machine per workflow, its
// definition inline, logging every event without execution data (inputs
// and outputs may hold OSB parameters), traced by X-Ray; and gives both
// functions each state machine's ARN, BROKER_<WORKFLOW>_STATE_MACHINE_ARN:
// the api starts operations and cleanups, the worker starts cleanups and,
// as the reaper, restarts and stops executions.
func (b *builder) stateMachines(workflows []workflow) {
	for _, w := range workflows {
		id := w.constructID()
		name := w.stateMachineName(*b.stack.StackName())
		logs := b.logGroup(id+"Logs", b.vendedLogGroupName(w))
		m := awsstepfunctions.NewStateMachine(b.stack, &id, &awsstepfunctions.StateMachineProps{
			StateMachineName: &name,
			Comment:          jsii.String(fmt.Sprintf("The broker's %s workflow (statemachines/%s%s).", w.name, w.name, aslSuffix)),
			StateMachineType: awsstepfunctions.StateMachineType_STANDARD,
			DefinitionBody:   awsstepfunctions.DefinitionBody_FromString(&w.definition),
			DefinitionSubstitutions: &map[string]*string{
				substitutionWorkerARN: b.worker.FunctionArn(),
			},
			Logs: &awsstepfunctions.LogOptions{
				Destination:          logs,
				Level:                awsstepfunctions.LogLevel_ALL,
				IncludeExecutionData: jsii.Bool(false),
			},
			TracingEnabled: jsii.Bool(true),
		})
		ignoreRedundantRoleDependency(m)
		sm := stateMachine{workflow: w, machine: m, name: name, arn: b.stack.FormatArn(&awscdk.ArnComponents{
			Service:      jsii.String("states"),
			Resource:     jsii.String("stateMachine"),
			ResourceName: &name,
			ArnFormat:    awscdk.ArnFormat_COLON_RESOURCE_NAME,
		})}
		b.machines = append(b.machines, sm)
		// The api refers to the state machine, so that it is only updated
		// once the state machine exists; the worker cannot (the state
		// machine refers to it), and gets the same ARN made from the name.
		b.api.AddEnvironment(jsii.String(w.envVar()), m.StateMachineArn(), nil)
		b.worker.AddEnvironment(jsii.String(w.envVar()), sm.arn, nil)
	}
}

// accessLogFormat is one JSON object per request. It leaves out what could
// hold credentials or parameters: headers, query strings, bodies.
const accessLogFormat = `{"requestId":"$context.requestId","requestTime":"$context.requestTime",` +
	`"ip":"$context.identity.sourceIp","userAgent":"$context.identity.userAgent",` +
	`"httpMethod":"$context.httpMethod","routeKey":"$context.routeKey","path":"$context.path",` +
	`"protocol":"$context.protocol","status":"$context.status","responseLength":"$context.responseLength",` +
	`"responseLatency":"$context.responseLatency","integrationStatus":"$context.integrationStatus",` +
	`"integrationLatency":"$context.integrationLatency","integrationError":"$context.integrationErrorMessage",` +
	`"error":"$context.error.message"}`

// pollPaths are the OSB polling endpoints, last_operation of an instance
// and of a binding: each has a route of its own, throttled apart.
var pollPaths = []string{
	"/v2/service_instances/{instance_id}/last_operation",
	"/v2/service_instances/{instance_id}/service_bindings/{binding_id}/last_operation",
}

// apiGateway defines the HTTP API: every OSB route (/v2/...) goes to the api
// function, which authenticates the caller (OSB basic auth); the stage
// is throttled and logs every request. The polls have routes of their own,
// with a throttle of their own (route settings), so that a platform polling
// many operations spends the polls' budget and not the one provisions and
// binds share: API Gateway throttles a route with its own settings apart
// from the stage's default.
func (b *builder) apiGateway() {
	b.httpAPI = awsapigatewayv2.NewHttpApi(b.stack, jsii.String("HttpApi"), &awsapigatewayv2.HttpApiProps{
		Description:        jsii.String("The Open Service Broker API."),
		CreateDefaultStage: jsii.Bool(false),
		// Behind the front door, the API answers at its custom domain
		// only, which is the distribution's origin (frontDoor).
		DisableExecuteApiEndpoint: jsii.Bool(b.props.FrontDoor),
	})
	integration := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String("ApiIntegration"), b.api,
		&awsapigatewayv2integrations.HttpLambdaIntegrationProps{
			PayloadFormatVersion: awsapigatewayv2.PayloadFormatVersion_VERSION_2_0(),
		})
	routes := b.httpAPI.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
		Path:        jsii.String("/v2/{proxy+}"),
		Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_ANY},
		Integration: integration,
	})
	b.route = (*routes)[0]
	for _, path := range pollPaths {
		routes := b.httpAPI.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
			Path:        jsii.String(path),
			Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_GET},
			Integration: integration,
		})
		b.pollRoutes = append(b.pollRoutes, (*routes)[0])
	}

	b.accessLog = b.logGroup("AccessLogs", nil)
	b.stage = awsapigatewayv2.NewHttpStage(b.stack, jsii.String("Stage"), &awsapigatewayv2.HttpStageProps{
		HttpApi:    b.httpAPI,
		StageName:  jsii.String(b.props.StageName),
		AutoDeploy: jsii.Bool(true),
		Throttle: &awsapigatewayv2.ThrottleSettings{
			RateLimit:  jsii.Number(b.props.ThrottleRateLimit),
			BurstLimit: jsii.Number(b.props.ThrottleBurstLimit),
		},
	})
	cfnStage := b.stage.Node().DefaultChild().(awsapigatewayv2.CfnStage)
	cfnStage.SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
		DestinationArn: b.accessLog.LogGroupArn(),
		Format:         jsii.String(accessLogFormat),
	})
	settings := map[string]any{}
	for i, route := range b.pollRoutes {
		settings["GET "+pollPaths[i]] = map[string]any{
			"ThrottlingRateLimit":  b.props.PollThrottleRateLimit,
			"ThrottlingBurstLimit": b.props.PollThrottleBurstLimit,
		}
		// A route's settings name it by its key, which API Gateway only
		// knows once the route exists.
		b.stage.Node().AddDependency(route)
	}
	cfnStage.SetRouteSettings(settings)
}

// brokerURL is the stage's URL without a trailing slash: platforms append
// /v2/catalog to it, and a double slash would match no route.
//
// With the front door, it is the distribution's (or the custom domain's,
// which the distribution serves): the HTTP API's own URL refuses requests.
func (b *builder) brokerURL() *string {
	if b.props.DomainName != "" {
		return jsii.String("https://" + b.props.DomainName)
	}
	if b.distribution != nil {
		return awscdk.Fn_Join(jsii.String(""), &[]*string{jsii.String("https://"), b.distribution.DistributionDomainName()})
	}
	if b.props.StageName == DefaultStageName {
		return b.httpAPI.ApiEndpoint()
	}
	return awscdk.Fn_Join(jsii.String(""), &[]*string{b.httpAPI.ApiEndpoint(), jsii.String("/" + b.props.StageName)})
}

func (b *builder) outputs() {
	awscdk.NewCfnOutput(b.stack, jsii.String(OutputBrokerURL), &awscdk.CfnOutputProps{
		Description: jsii.String("The broker's URL, to register it with: cf create-service-broker NAME USER PASS URL"),
		Value:       b.brokerURL(),
	})
	awscdk.NewCfnOutput(b.stack, jsii.String(OutputBrokerSecretARN), &awscdk.CfnOutputProps{
		Description: jsii.String("The secret holding the broker's basic-auth username and password."),
		Value:       b.secret.SecretArn(),
	})
}
