package servicerole

import (
	"strings"

	"github.com/serverless-osb/broker/internal/cfnregistry"
)

// More reasons of the service role's wildcards.
const (
	reasonManagedKeys = "The AWS managed KMS keys the templates encrypt with (aws/dynamodb for the table, aws/rds for " +
		"the database) are named by key ids AWS makes up, and the table's and database's handlers ask for them. The " +
		"statement holds only for a key with one of those aliases (kms:ResourceAliases; the alias/aws/ names are AWS's, " +
		"which no customer managed key can take) and, but for DescribeKey, which the handlers call themselves, only for " +
		"a request the key's own service makes (kms:ViaService): no other key, the broker's own (denied besides) included."
	reasonListAliases = "kms:ListAliases, which the table's handler calls to find the AWS managed key, supports no " +
		"resource-level permissions (https://docs.aws.amazon.com/service-authorization/latest/reference/list_awskeymanagementservice.html)."
	reasonManagedClusterSecrets = "ManageMasterUserPassword on an Aurora cluster: RDS creates the master user's secret, " +
		"named rds!cluster-<uuid> by RDS, with the caller's permissions; this pattern is the secrets RDS manages for DB " +
		"clusters, and the condition on the tag RDS gives each (its cluster's ARN) keeps other deployments' clusters' out."
	reasonDatabaseUserFunctions = "The broker's Custom::DatabaseUser functions, one per VPC, named PREFIX-dbuser-<vpc id> " +
		"(infra/dbuser.go), in lower case: the binding templates name them in their ServiceToken."
	reasonBoundaryChanges = "Nothing the stacks make may take a permissions boundary off an IAM identity, whichever " +
		"identity it is: without one, a user or role could be given any permission."
)

// Governed are the IAM actions that create an identity or change what it
// may do, which the service role may call only with the boundary as
// iam:PermissionsBoundary: an Allow names them only with that condition,
// and a Deny refuses them with any other boundary or none, so that no
// policy the operator attaches (serviceRolePolicyArns) lifts it.
var Governed = []string{
	"iam:CreateUser", "iam:CreateRole",
	"iam:PutUserPermissionsBoundary", "iam:PutRolePermissionsBoundary",
	"iam:PutUserPolicy", "iam:PutRolePolicy",
	"iam:AttachUserPolicy", "iam:AttachRolePolicy",
}

// Refused are the actions the service role may never perform, for any
// template: a Deny without condition names each.
var Refused = []cfnregistry.Refused{
	{Action: "iam:DeleteUserPermissionsBoundary", Why: reasonBoundaryChanges},
	{Action: "iam:DeleteRolePermissionsBoundary", Why: reasonBoundaryChanges},
}

// BoundaryChanges are the actions that would change the boundary policy
// itself: the service role is denied them on it.
var BoundaryChanges = []string{
	"iam:CreatePolicyVersion", "iam:DeletePolicyVersion", "iam:SetDefaultPolicyVersion", "iam:DeletePolicy",
	"iam:TagPolicy", "iam:UntagPolicy",
}

// Grants are the statements of the CloudFormation service role: what the
// handlers of the example templates' resource types need (their
// CloudFormation registry schemas, internal/cfnregistry; what they need
// only for properties the templates do not set is listed in Unused), on the
// resources of stacks named "prefix-…" only; IAM users may be made and
// given policies only with boundary (the boundary policy's ARN) as their
// permissions boundary. RDS publishes logs to CloudWatch Logs with its
// service-linked role. The binding roles' statements are roles.go's.
func Grants(prefix string, boundary any) []Statement {
	return append(grants(prefix, boundary), roleGrants(prefix, boundary)...)
}

func grants(prefix string, boundary any) []Statement {
	lower := strings.ToLower(prefix)
	regional := func(service, resource string) ARN { return ARN{Service: service, Resource: resource} }
	rds := func(resource string) ARN { return regional("rds", resource) }
	securityGroups := regional("ec2", "security-group/*")
	users := ARN{Service: "iam", Resource: "user" + UserPath + prefix + "-*", Regionless: true}
	withBoundary := map[string]any{"StringEquals": map[string]any{"iam:PermissionsBoundary": boundary}}
	return []Statement{
		{
			Sid: "Buckets",
			Actions: []string{
				"s3:CreateBucket", "s3:DeleteBucket", "s3:ListBucket",
				"s3:PutEncryptionConfiguration", "s3:GetEncryptionConfiguration",
				"s3:PutBucketVersioning", "s3:GetBucketVersioning",
				"s3:PutLifecycleConfiguration", "s3:GetLifecycleConfiguration",
				"s3:PutBucketPublicAccessBlock", "s3:GetBucketPublicAccessBlock",
				"s3:PutBucketOwnershipControls", "s3:GetBucketOwnershipControls",
				// Every stack is tagged (the instance, binding, plan...),
				// and the bucket's handlers tag with both APIs.
				"s3:PutBucketTagging", "s3:GetBucketTagging", "s3:TagResource", "s3:UntagResource", "s3:ListTagsForResource",
				"s3:PutBucketPolicy", "s3:GetBucketPolicy", "s3:DeleteBucketPolicy",
				// What the bucket's read handler reads besides.
				"s3:GetAccelerateConfiguration", "s3:GetAnalyticsConfiguration", "s3:GetBucketAbac", "s3:GetBucketAcl",
				"s3:GetBucketCORS", "s3:GetBucketLogging", "s3:GetBucketNotification", "s3:GetBucketObjectLockConfiguration",
				"s3:GetBucketMetadataTableConfiguration", "s3:GetBucketWebsite", "s3:GetIntelligentTieringConfiguration",
				"s3:GetInventoryConfiguration", "s3:GetMetricsConfiguration", "s3:GetReplicationConfiguration",
			},
			Resources: []ARN{{Service: "s3", Resource: lower + "-*", Regionless: true, Accountless: true}},
			Reason:    reasonGeneratedNamesLower,
		},
		{
			Sid: "Queues",
			Actions: []string{
				"sqs:CreateQueue", "sqs:DeleteQueue", "sqs:GetQueueUrl", "sqs:GetQueueAttributes", "sqs:SetQueueAttributes",
				"sqs:ListQueueTags", "sqs:TagQueue", "sqs:UntagQueue",
			},
			Resources: []ARN{regional("sqs", prefix+"-*")},
			Reason:    reasonGeneratedNames,
		},
		{
			Sid: "Tables",
			Actions: []string{
				"dynamodb:CreateTable", "dynamodb:DeleteTable", "dynamodb:DescribeTable", "dynamodb:UpdateTable",
				"dynamodb:DescribeTimeToLive", "dynamodb:UpdateTimeToLive",
				"dynamodb:DescribeContinuousBackups", "dynamodb:UpdateContinuousBackups",
				"dynamodb:DescribeContributorInsights", "dynamodb:DescribeKinesisStreamingDestination",
				"dynamodb:GetResourcePolicy",
				"dynamodb:ListTagsOfResource", "dynamodb:TagResource", "dynamodb:UntagResource",
			},
			Resources: []ARN{regional("dynamodb", "table/"+prefix+"-*")},
			Reason:    reasonGeneratedNames,
		},
		{
			// The topics, their policies, and the bindings' subscriptions
			// (whose ARNs are their topic's and a suffix).
			Sid: "Topics",
			Actions: []string{
				"sns:CreateTopic", "sns:DeleteTopic", "sns:GetTopicAttributes", "sns:SetTopicAttributes",
				"sns:GetDataProtectionPolicy", "sns:ListSubscriptionsByTopic",
				"sns:TagResource", "sns:UntagResource", "sns:ListTagsForResource",
				"sns:Subscribe", "sns:Unsubscribe", "sns:GetSubscriptionAttributes", "sns:SetSubscriptionAttributes",
			},
			Resources: []ARN{regional("sns", prefix+"-*")},
			Reason:    reasonGeneratedNames,
		},
		{
			Sid: "Streams",
			Actions: []string{
				"kinesis:CreateStream", "kinesis:DeleteStream", "kinesis:DescribeStreamSummary",
				"kinesis:UpdateShardCount", "kinesis:UpdateStreamMode",
				"kinesis:IncreaseStreamRetentionPeriod", "kinesis:DecreaseStreamRetentionPeriod",
				"kinesis:StartStreamEncryption", "kinesis:StopStreamEncryption",
				"kinesis:AddTagsToStream", "kinesis:RemoveTagsFromStream", "kinesis:ListTagsForStream",
				"kinesis:TagResource", "kinesis:UntagResource", "kinesis:ListTagsForResource",
			},
			Resources: []ARN{regional("kinesis", "stream/"+prefix+"-*")},
			Reason:    reasonGeneratedNames,
		},
		{
			// The Valkey caches, their user groups, their users (the
			// default user and the bindings'), and their final snapshots,
			// all named after the stacks, in lower case. The user group's
			// delete handler detaches it from replication groups, of which
			// the templates make none.
			Sid: "Caches",
			Actions: []string{
				"elasticache:CreateServerlessCache", "elasticache:DescribeServerlessCaches",
				"elasticache:ModifyServerlessCache", "elasticache:DeleteServerlessCache",
				"elasticache:CreateServerlessCacheSnapshot",
				"elasticache:CreateUserGroup", "elasticache:DescribeUserGroups", "elasticache:ModifyUserGroup",
				"elasticache:DeleteUserGroup", "elasticache:ModifyReplicationGroup",
				"elasticache:CreateUser", "elasticache:DescribeUsers", "elasticache:ModifyUser", "elasticache:DeleteUser",
				"elasticache:AddTagsToResource", "elasticache:RemoveTagsFromResource", "elasticache:ListTagsForResource",
			},
			Resources: []ARN{regional("elasticache", "serverlesscache:"+lower+"-*"), regional("elasticache", "usergroup:"+lower+"-*"),
				regional("elasticache", "user:"+lower+"-*"), regional("elasticache", "serverlesscachesnapshot:"+lower+"-*"),
				regional("elasticache", "replicationgroup:"+lower+"-*")},
			Reason: reasonGeneratedNamesLower,
		},
		{
			// A serverless cache puts an endpoint in each of its subnets...
			Sid:       "CacheEndpoints",
			Actions:   []string{"ec2:CreateVpcEndpoint"},
			Resources: []ARN{regional("ec2", "vpc-endpoint/*"), regional("ec2", "vpc/*"), regional("ec2", "subnet/*")},
			Reason:    reasonCacheEndpoints,
		},
		{
			// ...in the security group of the cache's stack, and no other.
			Sid:       "CacheEndpointsInStackSecurityGroups",
			Actions:   []string{"ec2:CreateVpcEndpoint"},
			Resources: []ARN{securityGroups},
			Conditions: map[string]any{
				"StringLike": map[string]any{"aws:ResourceTag/aws:cloudformation:stack-name": prefix + "-*"},
			},
			Reason: reasonCacheEndpoints,
		},
		{
			Sid:       "TagNewCacheEndpoints",
			Actions:   []string{"ec2:CreateTags"},
			Resources: []ARN{regional("ec2", "vpc-endpoint/*")},
			Conditions: map[string]any{
				"StringEquals": map[string]any{"ec2:CreateAction": "CreateVpcEndpoint"},
			},
			Reason: reasonCacheEndpoints,
		},
		{
			// ElastiCache creates its service-linked role with the first
			// cache of the account; this is that role only.
			Sid:       "ElastiCacheServiceLinkedRole",
			Actions:   []string{"iam:CreateServiceLinkedRole"},
			Resources: []ARN{{Service: "iam", Resource: "role/aws-service-role/elasticache.amazonaws.com/AWSServiceRoleForElastiCache", Regionless: true}},
			Conditions: map[string]any{
				"StringEquals": map[string]any{"iam:AWSServiceName": "elasticache.amazonaws.com"},
			},
		},
		{
			// Custom::CacheUserGroupMember: the broker's function.
			Sid:       "CacheUserFunction",
			Actions:   []string{"lambda:InvokeFunction"},
			Resources: []ARN{regional("lambda", "function:"+lower+"-cacheuser")},
			For:       []string{"Custom::CacheUserGroupMember"},
		},
		{
			// What needs no boundary condition: reading, tagging, keys,
			// and taking permissions away (DeleteUserPolicy also removes
			// the policies of users made before the boundary existed).
			Sid: "BindingUsers",
			Actions: []string{
				"iam:DeleteUser", "iam:GetUser", "iam:UpdateUser", "iam:TagUser", "iam:UntagUser", "iam:ListUserTags",
				"iam:GetUserPolicy", "iam:DeleteUserPolicy", "iam:ListUserPolicies",
				"iam:ListAttachedUserPolicies", "iam:ListGroupsForUser", "iam:GetLoginProfile", "iam:DeleteLoginProfile",
				"iam:CreateAccessKey", "iam:DeleteAccessKey", "iam:UpdateAccessKey", "iam:ListAccessKeys",
			},
			Resources: []ARN{users},
			Reason:    reasonUsers,
		},
		{
			// A user comes into being, and gets a policy, only under the
			// boundary: whatever its policy says, it may do no more.
			Sid:        "BoundedBindingUsers",
			Actions:    []string{"iam:CreateUser", "iam:PutUserPolicy", "iam:PutUserPermissionsBoundary"},
			Resources:  []ARN{users},
			Conditions: withBoundary,
			Reason:     reasonUsers,
		},
		{
			Sid:     "OnlyBoundedIdentities",
			Deny:    true,
			Actions: Governed,
			// Every user and role of the account: a policy attached by the
			// operator cannot make an identity without the boundary.
			Everywhere: true,
			Conditions: map[string]any{"StringNotEquals": map[string]any{"iam:PermissionsBoundary": boundary}},
		},
		{
			Sid:        "KeepBoundaries",
			Deny:       true,
			Actions:    refusedActions(),
			Everywhere: true,
		},
		{
			// DB instances, and the Aurora clusters whose instances are
			// authorized on their cluster too.
			Sid: "Databases",
			Actions: []string{
				"rds:CreateDBInstance", "rds:ModifyDBInstance", "rds:RebootDBInstance", "rds:DeleteDBInstance",
				"rds:DescribeDBInstances", "rds:CreateDBSnapshot",
				"rds:CreateDBSubnetGroup", "rds:ModifyDBSubnetGroup", "rds:DeleteDBSubnetGroup", "rds:DescribeDBSubnetGroups",
				"rds:AddTagsToResource", "rds:RemoveTagsFromResource", "rds:ListTagsForResource",
				"rds:CreateDBCluster", "rds:ModifyDBCluster", "rds:DeleteDBCluster", "rds:CreateDBClusterSnapshot",
				"rds:EnableHttpEndpoint", "rds:DisableHttpEndpoint",
			},
			Resources: []ARN{rds("db:" + lower + "-*"), rds("subgrp:" + lower + "-*"), rds("snapshot:" + lower + "-*"),
				rds("cluster:" + lower + "-*"), rds("cluster-snapshot:" + lower + "-*")},
			Reason: reasonGeneratedNamesLower,
		},
		{
			Sid:     "DatabaseDefaultGroups",
			Actions: []string{"rds:CreateDBInstance", "rds:ModifyDBInstance", "rds:CreateDBCluster", "rds:ModifyDBCluster"},
			Resources: []ARN{rds("pg:default.*"), rds("og:default:*"), rds("subgrp:default"),
				rds("cluster-pg:default.*")},
			Reason: reasonDefaultGroups,
		},
		{
			// RDS tags the secret with its database's ARN: an existing
			// secret carries it, so this role may tag only its own
			// databases' secrets; a new one, being created, has no tag yet.
			Sid:       "DatabaseSecrets",
			Actions:   []string{"secretsmanager:CreateSecret", "secretsmanager:TagResource"},
			Resources: []ARN{regional("secretsmanager", "secret:rds!db-*")},
			Conditions: map[string]any{
				"StringLikeIfExists": map[string]any{DatabaseSecretTag: DatabasesARN(prefix)},
			},
			Reason: reasonManagedSecrets,
		},
		{
			// Aurora names a cluster's master secret rds!cluster-<uuid> and
			// tags it with the cluster's ARN, as DatabaseSecrets above.
			Sid:       "ClusterSecrets",
			Actions:   []string{"secretsmanager:CreateSecret", "secretsmanager:TagResource"},
			Resources: []ARN{regional("secretsmanager", "secret:rds!cluster-*")},
			Conditions: map[string]any{
				"StringLikeIfExists": map[string]any{ClusterSecretTag: ClustersARN(prefix)},
			},
			Reason: reasonManagedClusterSecrets,
		},
		{
			// The secrets the templates name after their stack: a binding's
			// password (a database's, a search domain's or a cache's user), a
			// search domain's master secret, a cache's default user's; which
			// CloudFormation reads to resolve {{resolve:secretsmanager:…}}.
			Sid: "BindingSecrets",
			Actions: []string{
				"secretsmanager:CreateSecret", "secretsmanager:DeleteSecret", "secretsmanager:DescribeSecret",
				"secretsmanager:GetSecretValue", "secretsmanager:UpdateSecret",
				"secretsmanager:TagResource", "secretsmanager:UntagResource",
			},
			Resources: []ARN{regional("secretsmanager", "secret:"+prefix+"-*")},
			Reason:    reasonGeneratedNames,
		},
		{
			// Custom::DatabaseUser: CloudFormation invokes the broker's
			// function of the database's VPC with this role.
			Sid:       "DatabaseUserFunctions",
			Actions:   []string{"lambda:InvokeFunction"},
			Resources: []ARN{regional("lambda", "function:"+lower+"-dbuser-*")},
			Reason:    reasonDatabaseUserFunctions,
		},
		{
			// The table (SSEType KMS) is encrypted with DynamoDB's AWS
			// managed key, which DynamoDB uses and grants itself on the
			// role's behalf.
			Sid:        "TableManagedKey",
			Actions:    []string{"kms:CreateGrant", "kms:RevokeGrant", "kms:Encrypt", "kms:Decrypt"},
			Resources:  []ARN{regional("kms", "key/*")},
			Conditions: managedKeyConditions("dynamodb"),
			Reason:     reasonManagedKeys,
		},
		{
			// The database (StorageEncrypted) likewise with RDS's.
			Sid:        "DatabaseManagedKey",
			Actions:    []string{"kms:CreateGrant"},
			Resources:  []ARN{regional("kms", "key/*")},
			Conditions: managedKeyConditions("rds"),
			Reason:     reasonManagedKeys,
		},
		{
			// The handlers describe those keys themselves, not through
			// their service.
			Sid:       "DescribeManagedKeys",
			Actions:   []string{"kms:DescribeKey"},
			Resources: []ARN{regional("kms", "key/*")},
			Conditions: map[string]any{
				"ForAnyValue:StringEquals": map[string]any{"kms:ResourceAliases": []string{managedKeyAlias("dynamodb"), managedKeyAlias("rds")}},
			},
			Reason: reasonManagedKeys,
		},
		{
			// RDS creates its service-linked role on its first database in
			// the account; this is that role only.
			Sid:       "RdsServiceLinkedRole",
			Actions:   []string{"iam:CreateServiceLinkedRole"},
			Resources: []ARN{{Service: "iam", Resource: "role/aws-service-role/rds.amazonaws.com/AWSServiceRoleForRDS", Regionless: true}},
			Conditions: map[string]any{
				"StringEquals": map[string]any{"iam:AWSServiceName": "rds.amazonaws.com"},
			},
		},
		{
			Sid:       "CreateSecurityGroups",
			Actions:   []string{"ec2:CreateSecurityGroup"},
			Resources: []ARN{securityGroups, regional("ec2", "vpc/*")},
			Reason:    reasonSecurityGroups,
		},
		{
			// Tags given when the group is created (stack tags).
			Sid:       "TagNewSecurityGroups",
			Actions:   []string{"ec2:CreateTags"},
			Resources: []ARN{securityGroups},
			Conditions: map[string]any{
				"StringEquals": map[string]any{"ec2:CreateAction": "CreateSecurityGroup"},
			},
			Reason: reasonSecurityGroups,
		},
		{
			Sid: "ManageStackSecurityGroups",
			Actions: []string{
				"ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress",
				"ec2:AuthorizeSecurityGroupEgress", "ec2:RevokeSecurityGroupEgress",
				"ec2:UpdateSecurityGroupRuleDescriptionsIngress", "ec2:UpdateSecurityGroupRuleDescriptionsEgress",
				"ec2:CreateTags", "ec2:DeleteTags", "ec2:DeleteSecurityGroup",
			},
			Resources: []ARN{securityGroups},
			Conditions: map[string]any{
				"StringLike": map[string]any{"aws:ResourceTag/aws:cloudformation:stack-name": prefix + "-*"},
			},
			Reason: reasonSecurityGroups,
		},
		{
			Sid: "Describe",
			Actions: []string{
				"ec2:DescribeAccountAttributes", "ec2:DescribeAvailabilityZones", "ec2:DescribeInstances",
				"ec2:DescribeInternetGateways", "ec2:DescribeSecurityGroupRules", "ec2:DescribeSecurityGroups",
				"ec2:DescribeSubnets", "ec2:DescribeVpcAttribute", "ec2:DescribeVpcs",
				"rds:DescribeDBClusters", "rds:DescribeDBClusterSnapshots", "rds:DescribeDBEngineVersions",
				"rds:DescribeDBInstanceAutomatedBackups", "rds:DescribeDBParameterGroups", "rds:DescribeDBSnapshots",
				"rds:DescribeEvents", "rds:DescribeDBClusterAutomatedBackups", "rds:DescribeGlobalClusters",
				// A generated password, asked for before any secret exists.
				"secretsmanager:GetRandomPassword",
			},
			Everywhere: true,
			Reason:     reasonDescribe,
		},
		{
			// The search domains (services/opensearch): CloudFormation names
			// them from the stack, in lower case (3 to 28 characters).
			Sid: "SearchDomains",
			Actions: []string{
				"es:CreateDomain", "es:DescribeDomain", "es:DescribeDomainChangeProgress",
				"es:UpdateDomainConfig", "es:UpgradeDomain", "es:DeleteDomain",
				"es:AddTags", "es:RemoveTags", "es:ListTags",
			},
			Resources: []ARN{regional("es", "domain/"+lower+"-*")},
			Reason:    reasonGeneratedNamesLower,
		},
		{
			// OpenSearch Service makes its service-linked role, which puts a
			// domain's network interfaces in the VPC, with the first VPC
			// domain of the account; this is that role only.
			Sid:       "SearchServiceLinkedRole",
			Actions:   []string{"iam:CreateServiceLinkedRole"},
			Resources: []ARN{{Service: "iam", Resource: "role/aws-service-role/opensearchservice.amazonaws.com/AWSServiceRoleForAmazonOpenSearchService", Regionless: true}},
			Conditions: map[string]any{
				"StringEquals": map[string]any{"iam:AWSServiceName": "opensearchservice.amazonaws.com"},
			},
		},
		{
			Sid:        "ListKeyAliases",
			Actions:    []string{"kms:ListAliases"},
			Everywhere: true,
			Reason:     reasonListAliases,
		},
	}
}

// managedKeyAlias is the alias of service's AWS managed key.
func managedKeyAlias(service string) string { return "alias/aws/" + service }

// managedKeyConditions let a statement hold for service's AWS managed key
// only, and only for a request service makes on the role's behalf. The
// service's endpoint is CloudFormation's to fill in (Fn::Sub), as the
// key's own policy names it.
func managedKeyConditions(service string) map[string]any {
	return map[string]any{
		"StringEquals": map[string]any{
			"kms:ViaService": map[string]any{"Fn::Sub": service + ".${AWS::Region}.${AWS::URLSuffix}"},
		},
		"ForAnyValue:StringEquals": map[string]any{"kms:ResourceAliases": managedKeyAlias(service)},
	}
}

func refusedActions() []string {
	var out []string
	for _, r := range Refused {
		out = append(out, r.Action)
	}
	return out
}
