package cloudformation

import (
	"maps"
	"slices"
	"strings"

	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/env"
)

// stacksARN matches every stack the driver makes: PREFIX-…, any stack id.
var stacksARN = deploy.ARN("cloudformation", "stack/"+deploy.StackPrefix+"-*/*")

// Needs is what the driver needs of the stack, whatever its plans: the
// service role that CloudFormation creates, updates and deletes every
// service stack under, so that the broker's functions never hold the
// services' permissions; and for the worker, and only the worker (the
// driver's plans are asynchronous, so only the workflows' Tasks drive
// stacks), the calls the driver makes on the stacks under the stack
// prefix: create, update and delete them under that role and no other,
// read their status, events and resources, and pass the role to
// CloudFormation, and to nothing else. The worker is told the role, the
// prefix and the boundary (DeploymentFromEnv).
//
// roles are the roles the plans' placements name (RolesOf): the worker may
// assume exactly those, and no other, to reach the accounts they are in;
// there the role it assumes (the target stack's) grants it InTargets.
//
// viaS3 says a template of the plans is over MaxTemplateBody
// (TemplatesOverBody), so goes to CloudFormation through the templates'
// bucket: only then is the worker granted that bucket and told its name.
// Without one the bootstraps are built without the S3 client (make build,
// osb_without_s3), and the worker is granted nothing of S3, as it calls
// nothing there.
func Needs(roles Roles, viaS3 bool) deploy.Needs {
	stacks := []string{stacksARN}
	const whyStacks = "The stacks of service instances and bindings are made at run time, one or two per instance, " +
		"each named PREFIX-… (BROKER_STACK_PREFIX) and addressed by its ARN, which ends with a stack id CloudFormation " +
		"makes up; the pattern is those stacks only, and creating, updating and deleting them requires the service role."
	n := deploy.Needs{
		ServiceRole: true,
		Statements: []deploy.Statement{
			{Function: deploy.Worker, Sid: "ChangeServiceStacks",
				// ContinueUpdateRollback: the driver continues the rollback
				// of an update whose own rollback failed, under the same role.
				Actions: []string{"cloudformation:CreateStack", "cloudformation:DeleteStack",
					"cloudformation:CreateChangeSet", "cloudformation:ContinueUpdateRollback"},
				Resources: stacks, WildcardReason: whyStacks,
				Conditions: map[string]map[string]string{"StringEquals": {"cloudformation:RoleArn": deploy.ServiceRoleARN}}},
			// The stacks are created with tags, which CloudFormation
			// authorizes as the caller's TagResource (and UntagResource on
			// an update).
			{Function: deploy.Worker, Sid: "TagServiceStacks",
				Actions: []string{"cloudformation:TagResource", "cloudformation:UntagResource"}, Resources: stacks, WildcardReason: whyStacks},
			// Every update goes through a change set (created under the
			// service role, above), which the worker reads, executes or
			// deletes, after reading the template the stack runs and
			// setting the stack policy of the one it moves to.
			{Function: deploy.Worker, Sid: "ChangeSetsOfServiceStacks",
				Actions: []string{"cloudformation:DescribeChangeSet", "cloudformation:ExecuteChangeSet", "cloudformation:DeleteChangeSet",
					"cloudformation:SetStackPolicy", "cloudformation:GetTemplate"}, Resources: stacks, WildcardReason: whyStacks},
			{Function: deploy.Worker, Sid: "ReadServiceStacks",
				Actions:   []string{"cloudformation:DescribeStacks", "cloudformation:DescribeStackEvents", "cloudformation:DescribeStackResources"},
				Resources: stacks, WildcardReason: whyStacks},
			{Function: deploy.Worker, Sid: "PassServiceRole",
				Actions: []string{"iam:PassRole"}, Resources: []string{deploy.ServiceRoleARN},
				Conditions: map[string]map[string]string{"StringEquals": {"iam:PassedToService": "cloudformation.amazonaws.com"}}},
		},
		Env: []deploy.Variable{
			{Function: deploy.Worker, Name: env.CFNRoleARN, Value: deploy.ServiceRoleARN},
			{Function: deploy.Worker, Name: env.StackPrefix, Value: deploy.StackPrefix},
			{Function: deploy.Worker, Name: env.PermissionsBoundaryARN, Value: deploy.PermissionsBoundaryARN},
		},
	}
	if viaS3 {
		n.Statements = append(n.Statements,
			// A template over CloudFormation's TemplateBody limit goes
			// to the stack's bucket under its digest (templates.go), and
			// CloudFormation reads it back with the worker's credentials.
			// ListBucket makes a missing key a 404, not a 403.
			deploy.Statement{Function: deploy.Worker, Sid: "ServiceTemplates",
				Actions: []string{"s3:GetObject", "s3:PutObject"}, Resources: []string{deploy.TemplateBucketARN + "/templates/*"},
				WildcardReason: "The templates over 51,200 bytes are kept in the stack's own bucket (the broker stack's; in a target account, the target stack's), each under templates/ " +
					"and its SHA-256 digest, which the worker computes: the pattern is that folder of that bucket and nothing else."},
			deploy.Statement{Function: deploy.Worker, Sid: "FindServiceTemplates",
				Actions: []string{"s3:ListBucket"}, Resources: []string{deploy.TemplateBucketARN}},
		)
		n.Env = append(n.Env, deploy.Variable{Function: deploy.Worker, Name: env.TemplateBucket, Value: deploy.TemplateBucket})
	}
	// In a target account the worker does the same, through the role it
	// assumes there, under that account's service role, with the
	// templates' bucket the target stack makes there (CloudFormation
	// reads a TemplateURL with the assumed role's credentials:
	// deploy.TargetTemplateBucket); and counts the broker's stacks there
	// for a pool (pool.go).
	inTargets := slices.Clone(n.Statements)
	n.InTargets = append(inTargets, deploy.Statement{Function: deploy.Worker, Sid: "CountServiceStacks",
		Actions: []string{"cloudformation:ListStacks"}, Resources: []string{"*"},
		WildcardReason: "ListStacks supports no resource-level permissions: IAM only grants it on \"*\"; the driver counts the stacks named PREFIX-… among them, to place an instance of a pool where there is room."})
	if len(roles) > 0 {
		n.Statements = append(n.Statements, deploy.Statement{Function: deploy.Worker, Sid: "AssumeTargetRoles",
			Actions: []string{"sts:AssumeRole"}, Resources: slices.Sorted(maps.Keys(roles))})
	}
	// The external ids kept in Secrets Manager are read where the roles
	// are assumed: the worker reads every one, the api those of a pool's
	// roles; nothing else of Secrets Manager.
	var secrets, pooledSecrets []string
	for _, r := range roles {
		if r.ExternalIDSecret == "" {
			continue
		}
		secrets = append(secrets, secretResources(r.ExternalIDSecret)...)
		if r.Pooled {
			pooledSecrets = append(pooledSecrets, secretResources(r.ExternalIDSecret)...)
		}
	}
	const whySecrets = "A secret's ARN ends with six characters Secrets Manager makes up; a catalog that names a secret by its name, " +
		"or by its ARN without them, is granted that secret's ARN with those six characters left open (-??????), which is that secret only."
	if len(secrets) > 0 {
		n.Statements = append(n.Statements, deploy.Statement{Function: deploy.Worker, Sid: "ReadExternalIds",
			Actions: []string{"secretsmanager:GetSecretValue"}, Resources: sortedUnique(secrets), WildcardReason: whySecrets})
	}
	// The api function counts the stacks of a pool's accounts at a
	// provision request, to refuse one with 422 when every account is
	// at its share (CheckRoom): it may assume those roles, and no other.
	var pooled []string
	for arn, r := range roles {
		if r.Pooled {
			pooled = append(pooled, arn)
		}
	}
	if len(pooledSecrets) > 0 {
		n.Statements = append(n.Statements, deploy.Statement{Function: deploy.API, Sid: "ReadPoolExternalIds",
			Actions: []string{"secretsmanager:GetSecretValue"}, Resources: sortedUnique(pooledSecrets), WildcardReason: whySecrets})
	}
	if len(pooled) > 0 {
		slices.Sort(pooled)
		n.Statements = append(n.Statements, deploy.Statement{Function: deploy.API, Sid: "AssumePoolRoles",
			Actions: []string{"sts:AssumeRole"}, Resources: pooled})
		// It counts the stacks of the deployment's prefix.
		n.Env = append(n.Env, deploy.Variable{Function: deploy.API, Name: env.StackPrefix, Value: deploy.StackPrefix})
		n.LogAlarms = append(n.LogAlarms, deploy.LogAlarm{ID: "PoolNearlyFullAlarm", Function: deploy.Worker, Message: PoolNearlyFull,
			Description: "A pool of accounts of a placement holds 90% or more of the stacks its accounts may hold (their max_share of their stack_quota): add an account to the pool before provisions are refused with 422 (the worker's log line \"" + PoolNearlyFull + "\" names the Region)."})
	}
	return n
}

// CustomResources are the custom resource types (Custom::NAME) the
// plans' instance and binding templates declare, each once, sorted: the
// stack deploys the broker's handler of each it has (Needs.CustomResources),
// so that a catalog whose templates call one gets it, and another does not.
func CustomResources(plans []*Settings) []string {
	var types []string
	for _, s := range plans {
		for _, t := range []*Template{s.Template, s.BindingTemplate} {
			if t == nil {
				continue
			}
			for _, r := range t.Declared {
				if strings.HasPrefix(r.Type, "Custom::") {
					types = append(types, r.Type)
				}
			}
		}
	}
	return sortedUnique(types)
}

// InTargetCustomResources are the custom resource types the templates of
// the plans placed in accounts of their own declare, each once, sorted:
// the target stack deploys the broker's handler of each
// (Needs.InTargetCustomResources). A placement in the broker's own
// account has none (checkPlacedHandlers).
func InTargetCustomResources(plans []*Settings) []string {
	var placed []*Settings
	for _, s := range plans {
		if s.Placement != nil {
			placed = append(placed, s)
		}
	}
	return CustomResources(placed)
}

// secretFullARN is a secret's ARN with the six characters Secrets Manager
// adds to its name.
var secretFullARN = lazyPattern(`^arn:[^:]+:secretsmanager:[^:]*:[0-9]{12}:secret:.+-[A-Za-z0-9]{6}$`)

// secretResources is what IAM grants a secret by: its ARN when the
// catalog gives it whole; the ARN of a name (in the broker's Region and
// account) or of a partial ARN, with the six characters open.
func secretResources(secret string) []string {
	switch {
	case secretFullARN().MatchString(secret):
		return []string{secret}
	case strings.HasPrefix(secret, "arn:"):
		return []string{secret + "-??????"}
	}
	return []string{deploy.ARN("secretsmanager", "secret:"+secret+"-??????")}
}

// TemplatesOverBody says whether a template of plans (an instance's or a
// binding's) is over MaxTemplateBody, so goes to CloudFormation through
// S3: the same decision make build makes over the catalog's files to
// leave the S3 client out (osb_without_s3).
func TemplatesOverBody(plans []*Settings) bool {
	for _, s := range plans {
		for _, t := range []*Template{s.Template, s.BindingTemplate} {
			if t != nil && len(t.Body) > MaxTemplateBody {
				return true
			}
		}
	}
	return false
}

func sortedUnique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}
