// Package env names the environment variables of the broker's Lambda
// functions, once: internal/app (and the drivers it builds) read them, and
// the CDK stack (infra) sets them. It holds names only, no reading, so that
// any package may import it: infra without importing the app, a driver
// without importing upwards.
//
// Every constant here is a variable something in the functions reads, and
// the stack sets no variable that is not one of them; infra's tests check
// both, and that the stack sets every variable a function requires
// (app.RequiredEnv).
//
// The local broker's own settings (BROKER_ADDR, BROKER_DATA_DIR, ...),
// which no stack sets, are read and documented by internal/app (local.go).
package env

import "strings"

// Set by the stack for both functions.
const (
	// Table is the DynamoDB table holding the broker's items.
	Table = "BROKER_TABLE"
	// SealingKeyARN is the KMS key (ARN) that seals the secrets the table
	// keeps (binding credentials, driver records), by envelope encryption:
	// a key of its own, not the one that encrypts the table at rest, so
	// that either can be rotated or revoked without the other. Without it
	// nothing is sealed.
	SealingKeyARN = "BROKER_SEALING_KEY_ARN"
	// SealedOnly, "true" (set only when the stack's sealedOnly context
	// is), refuses every secret found in clear in the table whatever the
	// table's sealing mode says: deploy it once `ops reseal` has sealed
	// everything, so that deleting the mode item does not turn the
	// refusal off. Requires SealingKeyARN.
	SealedOnly = "BROKER_SEALED_ONLY"
	// MetricsNamespace is the CloudWatch namespace of the broker's metrics:
	// the stack's name, so that two stacks in one account keep their
	// metrics apart (default metricname.DefaultNamespace).
	MetricsNamespace = "BROKER_METRICS_NAMESPACE"
	// LogLevel is DEBUG, INFO (the default), WARN or ERROR; the stack sets
	// it when its logLevel context is set.
	LogLevel = "LOG_LEVEL"
	// OperationStateMachineARN is the ARN of statemachines/operation.asl.json
	// as deployed; the api function requires it.
	OperationStateMachineARN = "BROKER_OPERATION_STATE_MACHINE_ARN"
	// CleanupStateMachineARN is the ARN of statemachines/cleanup.asl.json.
	// Both functions start cleanups with it; without it the reaper (the
	// worker's "reap" step) starts them.
	CleanupStateMachineARN = "BROKER_CLEANUP_STATE_MACHINE_ARN"
	// UpgradeStateMachineARN is the ARN of statemachines/upgrade.asl.json,
	// the fleet upgrade that ops upgrade starts (ops reads it from the
	// stack's outputs); the worker starts a campaign's next execution with
	// it (the api not at all).
	UpgradeStateMachineARN = "BROKER_UPGRADE_STATE_MACHINE_ARN"
)

// Set by the stack for one function.
const (
	// SecretARN names the Secrets Manager secret holding the broker's
	// credentials (api function).
	SecretARN = "BROKER_SECRET_ARN"
	// OriginSecretARN, set only when the stack has its front door
	// (CloudFront), names the Secrets Manager secret whose value the front
	// door adds to every request it forwards (X-Origin-Verify); the api
	// function then refuses every request without it (api function).
	OriginSecretARN = "BROKER_ORIGIN_SECRET_ARN"
	// CFNRoleARN names the CloudFormation service role the cloudformation
	// driver creates, updates and deletes every stack under (worker
	// function); empty means none: the caller's own permissions, as
	// locally.
	CFNRoleARN = "BROKER_CFN_ROLE_ARN"
	// StackPrefix starts the name of every stack the cloudformation driver
	// makes (default "osb"); the worker's IAM policy allows it only stacks
	// named "<prefix>-*" (worker function).
	StackPrefix = "BROKER_STACK_PREFIX"
	// PermissionsBoundaryARN is the managed policy every IAM user or role
	// a service stack makes must carry as its permissions boundary (worker
	// function): the cloudformation driver hands it to each template that
	// declares the parameter PermissionsBoundaryArn. Empty (locally): the
	// parameter keeps its default.
	PermissionsBoundaryARN = "BROKER_PERMISSIONS_BOUNDARY_ARN"
	// TemplateBucket names the S3 bucket where the cloudformation driver
	// puts a template over CloudFormation's 51,200-byte TemplateBody limit,
	// by its digest, and hands CloudFormation its URL (worker function).
	// Empty (locally): the driver makes a bucket of its own on first need,
	// serverless-osb-templates-<account>-<region>.
	TemplateBucket = "BROKER_TEMPLATE_BUCKET"
	// MaxTasksPerPlan bounds the calls each plan's Tasks make to its
	// backend at once (worker function): leases on the table
	// (broker.Slots), so that one slow or hanging backend holds at most
	// that many of the worker's instances. Unset or 0: no bound.
	MaxTasksPerPlan = "BROKER_MAX_TASKS_PER_PLAN"
)

// Set by Lambda itself.
const (
	// Region is the function's region, where the table is.
	Region = "AWS_REGION"
	// TaskRoot is where Lambda unpacks the function's bundle.
	TaskRoot = "LAMBDA_TASK_ROOT"
)

// Read when set, and set by no stack: for tests, local tooling and SAM CLI.
const (
	// Catalog is the catalog to serve; by default catalog.yaml in
	// LAMBDA_TASK_ROOT, beside the bootstrap.
	Catalog = "BROKER_CATALOG"
	// DynamoDBEndpoint, when set, replaces DynamoDB's endpoint: moto_server
	// or DynamoDB Local.
	DynamoDBEndpoint = "BROKER_DYNAMODB_ENDPOINT"
)

// Names are every variable this package names: the only ones the stack may
// set (infra's tests hold it to that).
func Names() []string {
	return []string{Table, SealingKeyARN, SealedOnly, MetricsNamespace, LogLevel, OperationStateMachineARN, CleanupStateMachineARN,
		UpgradeStateMachineARN, SecretARN, OriginSecretARN, CFNRoleARN, StackPrefix, PermissionsBoundaryARN, TemplateBucket, MaxTasksPerPlan, Region, TaskRoot, Catalog, DynamoDBEndpoint}
}

// StateMachineARN is the variable holding the ARN of the state machine of
// workflow (statemachines/<workflow>.asl.json, a broker.Workflow):
// BROKER_<WORKFLOW>_STATE_MACHINE_ARN, the name in capitals with - as _.
// The stack sets one for every workflow, so each must be one of the
// constants above (OperationStateMachineARN, CleanupStateMachineARN,
// UpgradeStateMachineARN).
func StateMachineARN(workflow string) string {
	return "BROKER_" + strings.ToUpper(strings.ReplaceAll(workflow, "-", "_")) + "_STATE_MACHINE_ARN"
}
