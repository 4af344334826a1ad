package infra

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/infra/servicerole"
	"github.com/serverless-osb/broker/internal/deploy"
)

// token is the ARN pattern a as a token of stack's template.
func token(stack awscdk.Stack, a servicerole.ARN) *string {
	c := &awscdk.ArnComponents{Service: &a.Service, Resource: &a.Resource, ArnFormat: awscdk.ArnFormat_NO_RESOURCE_NAME}
	if a.Regionless {
		c.Region = jsii.String("")
	}
	if a.Accountless {
		c.Account = jsii.String("")
	}
	return stack.FormatArn(c)
}

// statement is s as a CDK policy statement of stack.
func policyStatement(stack awscdk.Stack, s servicerole.Statement) awsiam.PolicyStatement {
	resources := []*string{jsii.String("*")}
	if !s.Everywhere {
		resources = nil
		for _, r := range s.Resources {
			resources = append(resources, token(stack, r))
		}
	}
	effect := awsiam.Effect_ALLOW
	if s.Deny {
		effect = awsiam.Effect_DENY
	}
	props := &awsiam.PolicyStatementProps{Sid: &s.Sid, Effect: effect, Actions: jsii.Strings(s.Actions...), Resources: &resources}
	if s.Conditions != nil {
		conditions := map[string]any{}
		for op, byKey := range s.Conditions {
			values := byKey
			if m, ok := byKey.(map[string]any); ok {
				values = conditionValues(stack, m)
			}
			conditions[op] = values
		}
		props.Conditions = &conditions
	}
	return awsiam.NewPolicyStatement(props)
}

// conditionValues are a condition's values by key, an ARN pattern among
// them as a token of stack's template.
func conditionValues(stack awscdk.Stack, byKey map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range byKey {
		if a, ok := v.(servicerole.ARN); ok {
			v = token(stack, a)
		}
		out[k] = v
	}
	return out
}

// grantsPerPolicy is how many statements each managed policy of
// grantsAsManagedPolicies holds: the largest statements (a service's
// grants, about 1,000 characters) keep 9 of them under a managed policy's
// 6,144 characters (TestServiceRolePolicyFitsIAMsQuota proves it).
const grantsPerPolicy = 9

// grantsAsManagedPolicies attaches statements to role as customer managed
// policies named id1, id2, …, of at most grantsPerPolicy statements each,
// and returns them. A role's inline policies share one quota of 10,240
// characters, which the service role's grants outgrew; a role may have 10
// managed policies (20 on request), of 6,144 characters each.
func grantsAsManagedPolicies(scope constructs.Construct, id string, role awsiam.IRole, statements []awsiam.PolicyStatement, description string) []awsiam.ManagedPolicy {
	var out []awsiam.ManagedPolicy
	for i := 0; i*grantsPerPolicy < len(statements); i++ {
		chunk := statements[i*grantsPerPolicy : min((i+1)*grantsPerPolicy, len(statements))]
		out = append(out, awsiam.NewManagedPolicy(scope, jsii.String(fmt.Sprintf("%s%d", id, i+1)), &awsiam.ManagedPolicyProps{
			Description: jsii.String(fmt.Sprintf("%s, part %d.", description, i+1)),
			Statements:  &chunk,
			Roles:       &[]awsiam.IRole{role},
		}))
	}
	return out
}

// services defines the role CloudFormation creates, updates and deletes
// every service stack under (a driver that declares it needs the service
// role is told its ARN through its declared environment), so that the
// broker's functions never hold the services' permissions: its own
// permissions (servicerole.Grants, in managed policies of its own, which
// the stack makes before any service stack can be made: the worker runs
// once the deployment is done) and the managed policies the operator adds; and the
// permissions boundary every IAM identity those stacks make carries. What
// the functions may do with the stacks and the role is the driver's
// declaration (grantDriverNeeds).
func (b *builder) services() {
	var boundary []awsiam.PolicyStatement
	for _, s := range servicerole.Boundary(b.props.StackPrefix) {
		boundary = append(boundary, policyStatement(b.stack, s))
	}
	b.boundary = awsiam.NewManagedPolicy(b.stack, jsii.String("BindingBoundary"), &awsiam.ManagedPolicyProps{
		Description: jsii.String("The permissions boundary of every IAM identity the broker's service stacks (" +
			b.props.StackPrefix + "-*) make: at most what a binding of the services needs, on those stacks' resources."),
		Statements: &boundary,
	})
	var statements []awsiam.PolicyStatement
	for _, s := range b.serviceRoleStatements(b.boundary.ManagedPolicyArn()) {
		statements = append(statements, policyStatement(b.stack, s))
	}
	// The boundary itself may not be changed: it is what the conditions
	// above name.
	statements = append(statements, awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String("KeepTheBoundary"), Effect: awsiam.Effect_DENY,
		Actions: jsii.Strings(servicerole.BoundaryChanges...), Resources: &[]*string{b.boundary.ManagedPolicyArn()},
	}))
	// Nor may the stacks use the broker's own keys, whatever a policy the
	// operator attaches allows: the table's and the sealing key's (the
	// managed-key statements name AWS managed keys only already).
	statements = append(statements, awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String("KeepOffTheBrokersKeys"), Effect: awsiam.Effect_DENY,
		Actions: jsii.Strings("kms:*"), Resources: &[]*string{b.key.KeyArn(), b.sealKey.KeyArn()},
	}))
	var managed []awsiam.IManagedPolicy
	for i, arn := range b.props.ServiceRolePolicyARNs {
		managed = append(managed, awsiam.ManagedPolicy_FromManagedPolicyArn(b.stack,
			jsii.String(fmt.Sprintf("ServiceRolePolicy%d", i+1)), jsii.String(arn)))
	}
	props := &awsiam.RoleProps{
		Description: jsii.String("CloudFormation's role for the stacks of the broker's service instances and bindings (" +
			b.props.StackPrefix + "-*): what the services' templates create, nothing else."),
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("cloudformation.amazonaws.com"), nil),
	}
	if len(managed) > 0 {
		props.ManagedPolicies = &managed
	}
	b.serviceRole = awsiam.NewRole(b.stack, jsii.String("ServiceRole"), props)
	b.serviceRoleGrants = grantsAsManagedPolicies(b.stack, "ServiceStacks", b.serviceRole, statements,
		"What CloudFormation may do for the broker's service stacks ("+b.props.StackPrefix+"-*)")
	// Templates over 51,200 bytes reach CloudFormation from here
	// (TemplateURL), which reads them with the worker's credentials: the
	// worker alone may write and read them (its declared statements), over
	// TLS only. Kept when the stack goes (CDK's default for a bucket), as
	// the service stacks may outlive it. Made only when a driver's needs
	// name it: with no template over the limit the worker is granted
	// nothing of S3 (cloudformation.Needs), and nothing else uses it.
	if !namesTemplateBucket(b.needs) {
		return
	}
	b.templateBucket = awss3.NewBucket(b.stack, jsii.String("ServiceTemplates"), &awss3.BucketProps{
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
	})
}

// namesTemplateBucket says whether a statement or variable the drivers of m
// declare names the templates' bucket (deploy.TemplateBucket,
// deploy.TemplateBucketARN).
func namesTemplateBucket(m deploy.Manifest) bool {
	names := func(v string) bool {
		return strings.Contains(v, deploy.TemplateBucket) || strings.Contains(v, deploy.TemplateBucketARN)
	}
	for _, d := range m.Drivers {
		for _, s := range d.Needs.Statements {
			if slices.ContainsFunc(s.Resources, names) {
				return true
			}
		}
		for _, v := range d.Needs.Env {
			if names(v.Value) {
				return true
			}
		}
	}
	return false
}

// serviceRoleStatements are the service role's grants (servicerole.Grants).
func (b *builder) serviceRoleStatements(boundary any) []servicerole.Statement {
	return servicerole.Grants(b.props.StackPrefix, boundary)
}
