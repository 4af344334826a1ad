// Package servicerole is the CloudFormation service role's policy and the
// permissions boundary of the IAM identities its stacks make, as data: the
// CDK stack (infra) builds the role and the boundary from it, and
// make build checks a catalog's templates against it (cfnregistry) without
// synthesizing anything. It imports no CDK.
package servicerole

import (
	"github.com/serverless-osb/broker/internal/cfnregistry"
	"github.com/serverless-osb/broker/internal/deploy"
)

// UserPath is the IAM path of the users binding templates make
// (services/README.md: "one IAM user under the path /serverless-osb/").
const UserPath = deploy.BindingUserPath

// ARN is an ARN, or a pattern of ARNs, in the stack's partition, and in its
// region and account unless global or accountless.
type ARN struct {
	Service  string
	Resource string
	// Regionless leaves the region out (S3, IAM); Accountless the account
	// too (S3).
	Regionless, Accountless bool
}

// Nag is the pattern as cdk-nag names it in an AwsSolutions-IAM5 finding.
func (a ARN) Nag() string {
	region, account := "<AWS::Region>", "<AWS::AccountId>"
	if a.Regionless {
		region = ""
	}
	if a.Accountless {
		account = ""
	}
	return "Resource::arn:<AWS::Partition>:" + a.Service + ":" + region + ":" + account + ":" + a.Resource
}

// Statement is one statement of a policy, with the reason for each
// wildcard in its resources (the AwsSolutions-IAM5 suppression).
type Statement struct {
	Sid        string
	Deny       bool
	Actions    []string
	Resources  []ARN
	Everywhere bool // Resource "*"
	// Conditions is the statement's Condition; a value may be a token
	// of the stack's (the boundary's ARN).
	Conditions map[string]any
	Reason     string
	// For are the resource types whose handlers the statement serves, when
	// its resources hold for those alone (cfnregistry.Statement.For).
	For []string
}

// Policy is statements as cfnregistry checks them.
func Policy(statements []Statement) cfnregistry.Policy {
	var p cfnregistry.Policy
	for _, s := range statements {
		p = append(p, cfnregistry.Statement{Sid: s.Sid, Deny: s.Deny, Actions: s.Actions, Conditional: len(s.Conditions) > 0,
			Scoped: !s.Everywhere, For: s.For})
	}
	return p
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
		"(default.postgres17, default:postgres-17, and an Aurora cluster's default.aurora-postgresql17), whose names " +
		"follow the engine version; only those defaults, which CreateDBInstance, ModifyDBInstance, CreateDBCluster and " +
		"ModifyDBCluster may name, and none is modified."
	reasonManagedSecrets = "ManageMasterUserPassword: RDS creates the master user's secret, named rds!db-<uuid> by " +
		"RDS, with the caller's permissions; this pattern is the secrets RDS manages for DB instances and nothing else, " +
		"and the condition on the tag RDS gives each (its database's ARN) keeps those of other deployments' databases out."
	reasonSecurityGroups = "EC2 names security groups by id (sg-…), which CloudFormation only learns once the group " +
		"exists. Creating one needs the VPC and the new group's ARN; every other action is allowed only on groups " +
		"carrying CloudFormation's tag aws:cloudformation:stack-name = PREFIX-…, that is, the broker's stacks' groups."
	reasonCacheEndpoints = "A serverless cache makes a VPC endpoint in each of its subnets, whose id (vpce-…) EC2 " +
		"makes up; creating one names the VPC, the subnets and the security group, which the cache's stack takes as " +
		"parameters. The tag is only the one given when the endpoint is created."
	reasonDescribe = "Read-only Describe actions that CloudFormation's resource handlers call to check and wait for " +
		"their resources: EC2's Describe actions support no resource-level permissions, nor do RDS's DescribeEvents " +
		"and DescribeDBEngineVersions; the other RDS ones read resources not named after the stack (default parameter " +
		"groups, automated backups ab-…, global clusters) (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html, list_amazonrds.html); " +
		"Secrets Manager's GetRandomPassword, which the binding secrets' handler calls, names no resource."
)
