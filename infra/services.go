package infra

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/infra/servicerole"
	"github.com/serverless-osb/broker/internal/env"
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
		props.Conditions = &s.Conditions
	}
	return awsiam.NewPolicyStatement(props)
}

// services defines the role CloudFormation creates, updates and deletes
// every service stack under (the driver's BROKER_CFN_ROLE_ARN), so that the
// broker's functions never hold the services' permissions: its own
// permissions (serviceRoleGrants, inline, so that it has them from the
// moment it exists) and the managed policies the operator adds. The worker,
// and only the worker (the CloudFormation driver's plans are asynchronous,
// so only the workflows' Task states drive stacks), may manage the service
// stacks: create, update and delete them under that role and no other, and
// read their status, events and resources; and pass the role to
// CloudFormation, and to nothing else.
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
	for _, s := range servicerole.Grants(b.props.StackPrefix, b.boundary.ManagedPolicyArn()) {
		statements = append(statements, policyStatement(b.stack, s))
	}
	// The boundary itself may not be changed: it is what the conditions
	// above name.
	statements = append(statements, awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String("KeepTheBoundary"), Effect: awsiam.Effect_DENY,
		Actions: jsii.Strings(servicerole.BoundaryChanges...), Resources: &[]*string{b.boundary.ManagedPolicyArn()},
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
		InlinePolicies: &map[string]awsiam.PolicyDocument{
			"ServiceStacks": awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{Statements: &statements}),
		},
	}
	if len(managed) > 0 {
		props.ManagedPolicies = &managed
	}
	b.serviceRole = awsiam.NewRole(b.stack, jsii.String("ServiceRole"), props)

	stacks := []*string{token(b.stack, b.stacksARN())}
	b.workerRole.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String("ChangeServiceStacks"),
		// ContinueUpdateRollback: the driver continues the rollback of an
		// update whose own rollback failed, under the same role.
		Actions: jsii.Strings("cloudformation:CreateStack", "cloudformation:DeleteStack",
			"cloudformation:CreateChangeSet", "cloudformation:ContinueUpdateRollback"),
		Resources: &stacks,
		Conditions: &map[string]any{
			"StringEquals": map[string]any{"cloudformation:RoleArn": b.serviceRole.RoleArn()},
		},
	}))
	// The stacks are created with tags, which CloudFormation authorizes
	// as the caller's TagResource (and UntagResource on an update).
	b.workerRole.AddToPrincipalPolicy(statement("TagServiceStacks",
		[]string{"cloudformation:TagResource", "cloudformation:UntagResource"}, stacks...))
	// Every update goes through a change set (created under the service
	// role, above), which the worker reads, executes or deletes, after
	// reading the template the stack runs and setting the stack policy of
	// the one it moves to.
	b.workerRole.AddToPrincipalPolicy(statement("ChangeSetsOfServiceStacks",
		[]string{"cloudformation:DescribeChangeSet", "cloudformation:ExecuteChangeSet", "cloudformation:DeleteChangeSet",
			"cloudformation:SetStackPolicy", "cloudformation:GetTemplate"}, stacks...))
	b.workerRole.AddToPrincipalPolicy(statement("ReadServiceStacks",
		[]string{"cloudformation:DescribeStacks", "cloudformation:DescribeStackEvents", "cloudformation:DescribeStackResources"},
		stacks...))
	b.workerRole.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("PassServiceRole"),
		Actions:   jsii.Strings("iam:PassRole"),
		Resources: &[]*string{b.serviceRole.RoleArn()},
		Conditions: &map[string]any{
			"StringEquals": map[string]any{"iam:PassedToService": "cloudformation.amazonaws.com"},
		},
	}))
	b.worker.AddEnvironment(jsii.String(env.CFNRoleARN), b.serviceRole.RoleArn(), nil)
	b.worker.AddEnvironment(jsii.String(env.StackPrefix), jsii.String(b.props.StackPrefix), nil)
	b.worker.AddEnvironment(jsii.String(env.PermissionsBoundaryARN), b.boundary.ManagedPolicyArn(), nil)
}

// stacksARN matches every stack the driver makes: PREFIX-…, any stack id.
func (b *builder) stacksARN() servicerole.ARN {
	return servicerole.ARN{Service: "cloudformation", Resource: "stack/" + b.props.StackPrefix + "-*/*"}
}
