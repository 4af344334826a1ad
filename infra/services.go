package infra

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/internal/env"
)

// userPath is the IAM path of the users binding templates make
// (services/README.md: "one IAM user under the path /serverless-osb/").
const userPath = "/serverless-osb/"

// arnPattern is an ARN, or a pattern of ARNs, in this stack's partition,
// and in its region and account unless global or accountless: as a token
// for the template and as cdk-nag writes it in a finding.
type arnPattern struct {
	service  string
	resource string
	// regionless leaves the region out (S3, IAM); accountless the account
	// too (S3).
	regionless, accountless bool
}

func (a arnPattern) token(stack awscdk.Stack) *string {
	c := &awscdk.ArnComponents{Service: &a.service, Resource: &a.resource, ArnFormat: awscdk.ArnFormat_NO_RESOURCE_NAME}
	if a.regionless {
		c.Region = jsii.String("")
	}
	if a.accountless {
		c.Account = jsii.String("")
	}
	return stack.FormatArn(c)
}

// nag is the pattern as cdk-nag names it in an AwsSolutions-IAM5 finding.
func (a arnPattern) nag() string {
	region, account := "<AWS::Region>", "<AWS::AccountId>"
	if a.regionless {
		region = ""
	}
	if a.accountless {
		account = ""
	}
	return "Resource::arn:<AWS::Partition>:" + a.service + ":" + region + ":" + account + ":" + a.resource
}

// grant is one statement of the CloudFormation service role, with the reason
// for each wildcard in its resources (the AwsSolutions-IAM5 suppression).
type grant struct {
	sid        string
	actions    []string
	resources  []arnPattern
	everywhere bool // Resource "*"
	conditions map[string]any
	reason     string
}

// Reasons of the service role's wildcards.
const (
	reasonGeneratedNames = "The templates give their resources no names (services/README.md), so CloudFormation " +
		"generates each name from the stack's name, a logical id and a random suffix; every stack the broker makes is " +
		"named PREFIX-… (BROKER_STACK_PREFIX), so this pattern is exactly the resources of the broker's stacks."
	reasonGeneratedNamesLower = reasonGeneratedNames + " RDS and S3 names are the same in lower case."
	reasonUsers               = "Binding templates make one IAM user per binding under the path /serverless-osb/ " +
		"(services/README.md), named by CloudFormation after the binding's stack (PREFIX-…): this pattern is those " +
		"users and no other IAM identity. Group membership, managed policies and console passwords are not granted."
	reasonSnapshots = "DeletionPolicy Snapshot: CloudFormation names a database's final snapshot after the stack " +
		"(PREFIX-…-snapshot-…, in lower case), so this pattern is the final snapshots of the broker's databases."
	reasonDefaultGroups = "A database created without a parameter or option group gets the engine's default ones " +
		"(default.postgres17, default:postgres-17), whose names follow the engine version; only those defaults, which " +
		"CreateDBInstance and ModifyDBInstance may name, and neither is modified."
	reasonManagedSecrets = "ManageMasterUserPassword: RDS creates the master user's secret, named rds!db-<uuid> by " +
		"RDS, with the caller's permissions; this pattern is the secrets RDS manages for DB instances and nothing else."
	reasonSecurityGroups = "EC2 names security groups by id (sg-…), which CloudFormation only learns once the group " +
		"exists. Creating one needs the VPC and the new group's ARN; every other action is allowed only on groups " +
		"carrying CloudFormation's tag aws:cloudformation:stack-name = PREFIX-…, that is, the broker's stacks' groups."
	reasonDescribe = "Read-only Describe actions that CloudFormation's resource handlers call to check and wait for " +
		"their resources: EC2's Describe actions support no resource-level permissions, nor do RDS's DescribeEvents " +
		"and DescribeDBEngineVersions; the other RDS ones read resources not named after the stack (default parameter " +
		"groups, automated backups ab-…) (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html, list_amazonrds.html)."
)

// serviceRoleGrants are the permissions CloudFormation needs to create,
// update and delete the stacks of the example services (services/*/
// instance.yaml and binding.yaml): their resource types' handlers'
// permissions (the CloudFormation registry schemas), on the resources of
// stacks named "prefix-…" only. The AWS managed KMS keys these templates use
// (aws/s3, aws/dynamodb, aws/rds, aws/secretsmanager) need no grant: their key
// policies allow every principal of the account through their service.
// RDS publishes logs to CloudWatch Logs with its service-linked role.
func serviceRoleGrants(prefix string) []grant {
	lower := strings.ToLower(prefix)
	regional := func(service, resource string) arnPattern { return arnPattern{service: service, resource: resource} }
	rds := func(resource string) arnPattern { return regional("rds", resource) }
	securityGroups := regional("ec2", "security-group/*")
	return []grant{
		{
			sid: "Buckets",
			actions: []string{
				"s3:CreateBucket", "s3:DeleteBucket", "s3:ListBucket",
				"s3:PutEncryptionConfiguration", "s3:GetEncryptionConfiguration",
				"s3:PutBucketVersioning", "s3:GetBucketVersioning",
				"s3:PutLifecycleConfiguration", "s3:GetLifecycleConfiguration",
				"s3:PutBucketPublicAccessBlock", "s3:GetBucketPublicAccessBlock",
				"s3:PutBucketOwnershipControls", "s3:GetBucketOwnershipControls",
				"s3:PutBucketTagging", "s3:GetBucketTagging",
				"s3:PutBucketPolicy", "s3:GetBucketPolicy", "s3:DeleteBucketPolicy",
				// What the bucket's read handler reads besides.
				"s3:GetAccelerateConfiguration", "s3:GetAnalyticsConfiguration", "s3:GetBucketAcl", "s3:GetBucketCORS",
				"s3:GetBucketLogging", "s3:GetBucketNotification", "s3:GetBucketObjectLockConfiguration",
				"s3:GetBucketMetadataTableConfiguration", "s3:GetBucketWebsite", "s3:GetIntelligentTieringConfiguration",
				"s3:GetInventoryConfiguration", "s3:GetMetricsConfiguration", "s3:GetReplicationConfiguration",
			},
			resources: []arnPattern{{service: "s3", resource: lower + "-*", regionless: true, accountless: true}},
			reason:    reasonGeneratedNamesLower,
		},
		{
			sid: "Queues",
			actions: []string{
				"sqs:CreateQueue", "sqs:DeleteQueue", "sqs:GetQueueUrl", "sqs:GetQueueAttributes", "sqs:SetQueueAttributes",
				"sqs:ListQueueTags", "sqs:TagQueue", "sqs:UntagQueue",
			},
			resources: []arnPattern{regional("sqs", prefix+"-*")},
			reason:    reasonGeneratedNames,
		},
		{
			sid: "Tables",
			actions: []string{
				"dynamodb:CreateTable", "dynamodb:DeleteTable", "dynamodb:DescribeTable", "dynamodb:UpdateTable",
				"dynamodb:DescribeTimeToLive", "dynamodb:UpdateTimeToLive",
				"dynamodb:DescribeContinuousBackups", "dynamodb:UpdateContinuousBackups",
				"dynamodb:DescribeContributorInsights", "dynamodb:DescribeKinesisStreamingDestination",
				"dynamodb:GetResourcePolicy",
				"dynamodb:ListTagsOfResource", "dynamodb:TagResource", "dynamodb:UntagResource",
			},
			resources: []arnPattern{regional("dynamodb", "table/"+prefix+"-*")},
			reason:    reasonGeneratedNames,
		},
		{
			sid: "BindingUsers",
			actions: []string{
				"iam:CreateUser", "iam:DeleteUser", "iam:GetUser", "iam:TagUser", "iam:UntagUser", "iam:ListUserTags",
				"iam:PutUserPolicy", "iam:GetUserPolicy", "iam:DeleteUserPolicy", "iam:ListUserPolicies",
				"iam:ListAttachedUserPolicies", "iam:ListGroupsForUser", "iam:GetLoginProfile", "iam:DeleteLoginProfile",
				"iam:CreateAccessKey", "iam:DeleteAccessKey", "iam:UpdateAccessKey", "iam:ListAccessKeys",
			},
			resources: []arnPattern{{service: "iam", resource: "user" + userPath + prefix + "-*", regionless: true}},
			reason:    reasonUsers,
		},
		{
			sid: "Databases",
			actions: []string{
				"rds:CreateDBInstance", "rds:ModifyDBInstance", "rds:RebootDBInstance", "rds:DeleteDBInstance",
				"rds:DescribeDBInstances", "rds:CreateDBSnapshot",
				"rds:CreateDBSubnetGroup", "rds:ModifyDBSubnetGroup", "rds:DeleteDBSubnetGroup", "rds:DescribeDBSubnetGroups",
				"rds:AddTagsToResource", "rds:RemoveTagsFromResource", "rds:ListTagsForResource",
			},
			resources: []arnPattern{rds("db:" + lower + "-*"), rds("subgrp:" + lower + "-*"), rds("snapshot:" + lower + "-*")},
			reason:    reasonGeneratedNamesLower,
		},
		{
			sid:       "DatabaseDefaultGroups",
			actions:   []string{"rds:CreateDBInstance", "rds:ModifyDBInstance"},
			resources: []arnPattern{rds("pg:default.*"), rds("og:default:*"), rds("subgrp:default")},
			reason:    reasonDefaultGroups,
		},
		{
			sid:       "DatabaseSecrets",
			actions:   []string{"secretsmanager:CreateSecret", "secretsmanager:TagResource"},
			resources: []arnPattern{regional("secretsmanager", "secret:rds!db-*")},
			reason:    reasonManagedSecrets,
		},
		{
			// RDS creates its service-linked role on its first database in
			// the account; this is that role only.
			sid:       "RdsServiceLinkedRole",
			actions:   []string{"iam:CreateServiceLinkedRole"},
			resources: []arnPattern{{service: "iam", resource: "role/aws-service-role/rds.amazonaws.com/AWSServiceRoleForRDS", regionless: true}},
			conditions: map[string]any{
				"StringEquals": map[string]any{"iam:AWSServiceName": "rds.amazonaws.com"},
			},
		},
		{
			sid:       "CreateSecurityGroups",
			actions:   []string{"ec2:CreateSecurityGroup"},
			resources: []arnPattern{securityGroups, regional("ec2", "vpc/*")},
			reason:    reasonSecurityGroups,
		},
		{
			// Tags given when the group is created (stack tags).
			sid:       "TagNewSecurityGroups",
			actions:   []string{"ec2:CreateTags"},
			resources: []arnPattern{securityGroups},
			conditions: map[string]any{
				"StringEquals": map[string]any{"ec2:CreateAction": "CreateSecurityGroup"},
			},
			reason: reasonSecurityGroups,
		},
		{
			sid: "ManageStackSecurityGroups",
			actions: []string{
				"ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress",
				"ec2:AuthorizeSecurityGroupEgress", "ec2:RevokeSecurityGroupEgress",
				"ec2:UpdateSecurityGroupRuleDescriptionsIngress", "ec2:UpdateSecurityGroupRuleDescriptionsEgress",
				"ec2:CreateTags", "ec2:DeleteTags", "ec2:DeleteSecurityGroup",
			},
			resources: []arnPattern{securityGroups},
			conditions: map[string]any{
				"StringLike": map[string]any{"aws:ResourceTag/aws:cloudformation:stack-name": prefix + "-*"},
			},
			reason: reasonSecurityGroups,
		},
		{
			sid: "Describe",
			actions: []string{
				"ec2:DescribeAccountAttributes", "ec2:DescribeAvailabilityZones", "ec2:DescribeInstances",
				"ec2:DescribeInternetGateways", "ec2:DescribeSecurityGroupRules", "ec2:DescribeSecurityGroups",
				"ec2:DescribeSubnets", "ec2:DescribeVpcAttribute", "ec2:DescribeVpcs",
				"rds:DescribeDBClusters", "rds:DescribeDBClusterSnapshots", "rds:DescribeDBEngineVersions",
				"rds:DescribeDBInstanceAutomatedBackups", "rds:DescribeDBParameterGroups", "rds:DescribeDBSnapshots",
				"rds:DescribeEvents",
			},
			everywhere: true,
			reason:     reasonDescribe,
		},
	}
}

func (g grant) statement(stack awscdk.Stack) awsiam.PolicyStatement {
	resources := []*string{jsii.String("*")}
	if !g.everywhere {
		resources = nil
		for _, r := range g.resources {
			resources = append(resources, r.token(stack))
		}
	}
	props := &awsiam.PolicyStatementProps{Sid: &g.sid, Actions: jsii.Strings(g.actions...), Resources: &resources}
	if g.conditions != nil {
		props.Conditions = &g.conditions
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
	var statements []awsiam.PolicyStatement
	for _, g := range serviceRoleGrants(b.props.StackPrefix) {
		statements = append(statements, g.statement(b.stack))
	}
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

	stacks := []*string{b.stacksARN().token(b.stack)}
	b.workerRole.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("ChangeServiceStacks"),
		Actions:   jsii.Strings("cloudformation:CreateStack", "cloudformation:UpdateStack", "cloudformation:DeleteStack"),
		Resources: &stacks,
		Conditions: &map[string]any{
			"StringEquals": map[string]any{"cloudformation:RoleArn": b.serviceRole.RoleArn()},
		},
	}))
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
}

// stacksARN matches every stack the driver makes: PREFIX-…, any stack id.
func (b *builder) stacksARN() arnPattern {
	return arnPattern{service: "cloudformation", resource: "stack/" + b.props.StackPrefix + "-*/*"}
}
