package infra

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/store/dynamo/schema"
)

// itemActions are the DynamoDB actions internal/store/dynamo performs:
// GetItem (also what TransactGetItems needs per item), BatchGetItem (a
// Load's keys, at half a TransactGetItems' read units), PutItem,
// DeleteItem, UpdateItem and ConditionCheckItem (also what
// TransactWriteItems needs per item), and Query (on the table and its
// indexes: the worker's fleet upgrade lists a plan's instances by the
// ByPlan index). Neither Scan (ops instances without a plan scans, with
// the operator's credentials) nor a batch write, nor any table
// management action.
var itemActions = []string{
	"dynamodb:BatchGetItem",
	"dynamodb:ConditionCheckItem",
	"dynamodb:DeleteItem",
	"dynamodb:GetItem",
	"dynamodb:PutItem",
	"dynamodb:Query",
	"dynamodb:UpdateItem",
}

// tableKeyActions are what DynamoDB does with the table's customer-managed
// key on behalf of a caller reading and writing items.
var tableKeyActions = []string{
	"kms:Decrypt",
	"kms:DescribeKey",
	"kms:Encrypt",
	"kms:GenerateDataKey",
}

// sealActions are what internal/sealing's KMS sealer calls with the key.
var sealActions = []string{"kms:Decrypt", "kms:GenerateDataKey"}

// keyAdministrationActions are what the account's IAM may do with the
// sealing key: manage it, never use it. Not kms:CreateGrant, which would
// let an identity grant itself the key's use.
var keyAdministrationActions = []string{
	"kms:DescribeKey", "kms:GetKeyPolicy", "kms:GetKeyRotationStatus", "kms:ListGrants", "kms:ListKeyPolicies",
	"kms:ListKeyRotations", "kms:ListResourceTags", "kms:PutKeyPolicy", "kms:UpdateKeyDescription",
	"kms:EnableKey", "kms:DisableKey", "kms:EnableKeyRotation", "kms:DisableKeyRotation", "kms:RotateKeyOnDemand",
	"kms:TagResource", "kms:UntagResource", "kms:CreateAlias", "kms:UpdateAlias", "kms:DeleteAlias",
	"kms:RevokeGrant", "kms:RetireGrant", "kms:ScheduleKeyDeletion", "kms:CancelKeyDeletion",
}

// keyAdministration is the sealing key policy's statement that lets the
// account's IAM administer the key (CloudFormation updates it, an
// administrator may disable it), and nothing more: without it, no one
// could change the key.
func keyAdministration() awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("AdministerThroughIAM"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewAccountRootPrincipal()},
		Actions:    jsii.Strings(keyAdministrationActions...),
		Resources:  jsii.Strings("*"),
	})
}

// sealingKeyPolicy names in the sealing key's policy who may use it: the
// api and the worker, and the operators named (sealingKeyOperators, for
// ops reseal), each only to seal and open, only in the sealing context.
// The roles' own statements (SealSecrets) say the same; the key's policy
// is what makes nobody else's IAM policy enough.
func (b *builder) sealingKeyPolicy() {
	users := []awsiam.IPrincipal{awsiam.NewArnPrincipal(b.apiRole.RoleArn()), awsiam.NewArnPrincipal(b.workerRole.RoleArn())}
	for _, arn := range b.props.SealingKeyOperators {
		users = append(users, awsiam.NewArnPrincipal(jsii.String(arn)))
	}
	b.sealKey.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("SealInTheSealingContext"),
		Principals: &users,
		Actions:    jsii.Strings(sealActions...),
		Resources:  jsii.Strings("*"),
		Conditions: b.sealingContext(),
	}), jsii.Bool(false))
}

// permissions writes out every permission of the functions and the state
// machines, each scoped to this stack's resources (the reaper's schedule
// has its role in reaper). CDK adds two more that IAM only grants on "*":
// X-Ray's PutTraceSegments and PutTelemetryRecords for tracing, and, for
// the state machines, the CloudWatch Logs delivery actions (see nag.go).
func (b *builder) permissions() {
	for _, role := range []awsiam.Role{b.apiRole, b.workerRole} {
		role.AddToPrincipalPolicy(b.itemsStatement())
		role.AddToPrincipalPolicy(b.tableKeyStatement())
		// Envelope encryption of the secrets the table keeps
		// (internal/sealing): a data key to seal, its decryption to open,
		// with the sealing key only, for this table's sealing context only.
		role.AddToPrincipalPolicy(b.sealingStatement("SealSecrets", sealActions, b.sealKey))
		// Values that brokers before the sealing key sealed under the
		// table's key still open, until ops reseal moves them under the
		// sealing key: decryption only, in the sealing context only, which
		// DynamoDB's own use of the key never has.
		role.AddToPrincipalPolicy(b.sealingStatement("OpenValuesSealedUnderTheTableKey", []string{"kms:Decrypt"}, b.key))
	}
	b.sealingKeyPolicy()
	b.apiRole.AddToPrincipalPolicy(logsStatement(b.apiLogs.LogGroupArn()))
	b.workerRole.AddToPrincipalPolicy(logsStatement(b.workerLogs.LogGroupArn()))

	b.apiRole.AddToPrincipalPolicy(statement("ReadCredentials",
		[]string{"secretsmanager:GetSecretValue"}, b.secret.SecretArn()))
	if b.originSecret != nil {
		b.apiRole.AddToPrincipalPolicy(statement("ReadOriginSecret",
			[]string{"secretsmanager:GetSecretValue"}, b.originSecret.SecretArn()))
	}

	// Both functions start, describe and stop the workflows' executions: the
	// api for operations (and an operator's retried cleanups), the worker
	// for cleanups, as the reaper, for repairs, and for a fleet upgrade:
	// each instance's update (an operation), and the campaign's next
	// execution when one's history is spent. The worker names the
	// state machines by the ARNs made from their names (see stateMachines).
	var machines, arns, executions []*string
	for _, m := range b.machines {
		machines = append(machines, m.machine.StateMachineArn())
		arns = append(arns, m.arn)
		executions = append(executions, b.executionsARN(m))
	}
	b.apiRole.AddToPrincipalPolicy(statement("StartWorkflows",
		[]string{"states:StartExecution"}, machines...))
	b.workerRole.AddToPrincipalPolicy(statement("StartWorkflows",
		[]string{"states:StartExecution"}, arns...))
	for _, role := range []awsiam.Role{b.apiRole, b.workerRole} {
		role.AddToPrincipalPolicy(statement("ManageExecutions",
			[]string{"states:DescribeExecution", "states:StopExecution"}, executions...))
	}

	for _, m := range b.machines {
		// Qualified ARNs too, should a workflow ever name a version.
		m.machine.AddToRolePolicy(statement("InvokeWorker", []string{"lambda:InvokeFunction"},
			b.worker.FunctionArn(), jsii.String(*b.worker.FunctionArn()+":*")))
	}
}

func (b *builder) itemsStatement() awsiam.PolicyStatement {
	resources := []*string{b.table.TableArn()}
	for _, index := range schema.Table().Indexes {
		resources = append(resources, jsii.String(*b.table.TableArn()+"/index/"+index.Name))
	}
	return statement("TableItems", itemActions, resources...)
}

// tableKeyStatement lets a function use the table's key only through
// DynamoDB.
func (b *builder) tableKeyStatement() awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("TableKeyThroughDynamoDB"),
		Actions:   jsii.Strings(tableKeyActions...),
		Resources: &[]*string{b.key.KeyArn()},
		Conditions: &map[string]any{
			"StringEquals": map[string]any{
				"kms:ViaService": awscdk.Fn_Join(jsii.String(""), &[]*string{
					jsii.String("dynamodb."), awscdk.Aws_REGION(), jsii.String("."), awscdk.Aws_URL_SUFFIX(),
				}),
			},
		},
	})
}

// sealingStatement grants actions on key only when the request's KMS
// encryption context is exactly the sealing context: {"table": <the table's
// name>}.
func (b *builder) sealingStatement(sid string, actions []string, key awskms.Key) awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String(sid),
		Actions:    jsii.Strings(actions...),
		Resources:  &[]*string{key.KeyArn()},
		Conditions: b.sealingContext(),
	})
}

// sealingContext is the condition that the request's KMS encryption
// context is exactly the sealing context.
func (b *builder) sealingContext() *map[string]any {
	return &map[string]any{
		"StringEquals": map[string]any{
			"kms:EncryptionContext:" + deploy.SealingContextKey: b.table.TableName(),
		},
		"ForAllValues:StringEquals": map[string]any{
			"kms:EncryptionContextKeys": []string{deploy.SealingContextKey},
		},
	}
}

// executionsARN matches every execution of m:
// arn:PARTITION:states:REGION:ACCOUNT:execution:NAME:*.
func (b *builder) executionsARN(m stateMachine) *string {
	return b.stack.FormatArn(&awscdk.ArnComponents{
		Service:      jsii.String("states"),
		Resource:     jsii.String("execution"),
		ResourceName: jsii.String(m.name + ":*"),
		ArnFormat:    awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
}

// logsStatement lets a function write to its own log group only.
func logsStatement(logGroupARN *string) awsiam.PolicyStatement {
	return statement("WriteLogs", []string{"logs:CreateLogStream", "logs:PutLogEvents"}, logGroupARN)
}

func statement(sid string, actions []string, resources ...*string) awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       &sid,
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	})
}
