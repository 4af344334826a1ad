package servicerole

import "github.com/serverless-osb/broker/internal/cfnregistry"

// Unused are the actions the example templates' resource types' handlers
// need only for properties no example template sets, which the service
// role therefore does not grant: (type, property, action, why). An action
// listed under several properties is needed as soon as a template sets
// any of them. The infra tests fail when a bundled template starts setting
// one (then grant the action), and make build reports it for a user's
// catalog.
var Unused = join(
	// AWS::S3::Bucket: the configurations the templates leave out.
	unused("AWS::S3::Bucket", "ABAC (attribute-based access control) for the bucket", []string{"AbacStatus"},
		"s3:PutBucketAbac"),
	unused("AWS::S3::Bucket", "transfer acceleration", []string{"AccelerateConfiguration"},
		"s3:PutAccelerateConfiguration"),
	unused("AWS::S3::Bucket", "ACLs: the buckets enforce bucket-owner ownership, which disables them", []string{"AccessControl"},
		"s3:PutBucketAcl", "s3:PutObjectAcl"),
	unused("AWS::S3::Bucket", "S3 analytics", []string{"AnalyticsConfigurations"},
		"s3:PutAnalyticsConfiguration", "s3:DeleteBucketAnalyticsConfiguration"),
	unused("AWS::S3::Bucket", "CORS", []string{"CorsConfiguration"},
		"s3:PutBucketCORS", "s3:DeleteBucketCors"),
	unused("AWS::S3::Bucket", "Intelligent-Tiering archive configurations", []string{"IntelligentTieringConfigurations"},
		"s3:PutIntelligentTieringConfiguration"),
	unused("AWS::S3::Bucket", "S3 Inventory", []string{"InventoryConfigurations"},
		"s3:PutInventoryConfiguration"),
	unused("AWS::S3::Bucket", "server access logging", []string{"LoggingConfiguration"},
		"s3:PutBucketLogging"),
	unused("AWS::S3::Bucket", "S3 Metadata tables (in S3 Tables buckets, and the objects they write)",
		[]string{"MetadataConfiguration", "MetadataTableConfiguration"},
		"s3:CreateBucketMetadataTableConfiguration", "s3:DeleteBucketMetadataTableConfiguration",
		"s3:UpdateBucketMetadataAnnotationTableConfiguration", "s3:UpdateBucketMetadataInventoryTableConfiguration",
		"s3:UpdateBucketMetadataJournalTableConfiguration", "s3:DeleteObject",
		"s3tables:CreateNamespace", "s3tables:CreateTable", "s3tables:CreateTableBucket", "s3tables:GetTable",
		"s3tables:GetTableMetadataLocation", "s3tables:PutTableBucketPolicy", "s3tables:PutTableEncryption",
		"s3tables:PutTablePolicy", "s3tables:UpdateTableMetadataLocation"),
	unused("AWS::S3::Bucket", "request metrics", []string{"MetricsConfigurations"},
		"s3:PutMetricsConfiguration", "s3:DeleteBucketMetricsConfiguration"),
	unused("AWS::S3::Bucket", "event notifications", []string{"NotificationConfiguration"},
		"s3:PutBucketNotification"),
	unused("AWS::S3::Bucket", "Object Lock", []string{"ObjectLockConfiguration", "ObjectLockEnabled"},
		"s3:PutBucketObjectLockConfiguration", "s3:PutObjectLockConfiguration"),
	unused("AWS::S3::Bucket", "replication, which passes its role to S3", []string{"ReplicationConfiguration"},
		"s3:PutBucketReplication", "s3:PutReplicationConfiguration", "s3:DeleteBucketReplication", "iam:PassRole"),
	unused("AWS::S3::Bucket", "static website hosting", []string{"WebsiteConfiguration"},
		"s3:PutBucketWebsite", "s3:DeleteBucketWebsite"),

	// AWS::DynamoDB::Table.
	unused("AWS::DynamoDB::Table", "contributor insights", []string{"ContributorInsightsSpecification"},
		"dynamodb:UpdateContributorInsights"),
	unused("AWS::DynamoDB::Table", "a table imported from S3, with the import's log in CloudWatch Logs",
		[]string{"ImportSourceSpecification"},
		"dynamodb:ImportTable", "dynamodb:DescribeImport", "s3:GetObject", "s3:GetObjectMetadata",
		"logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogGroups", "logs:DescribeLogStreams",
		"logs:PutLogEvents", "logs:PutRetentionPolicy"),
	unused("AWS::DynamoDB::Table", "Kinesis Data Streams for DynamoDB", []string{"KinesisStreamSpecification"},
		"dynamodb:EnableKinesisStreamingDestination", "dynamodb:DisableKinesisStreamingDestination",
		"dynamodb:UpdateKinesisStreamingDestination", "kinesis:DescribeStream", "kinesis:PutRecords"),
	unused("AWS::DynamoDB::Table", "a resource-based policy on the table or its stream", []string{"ResourcePolicy", "StreamSpecification/ResourcePolicy"},
		"dynamodb:PutResourcePolicy", "dynamodb:DeleteResourcePolicy"),

	// AWS::IAM::User and AWS::IAM::Policy: binding users get one inline
	// policy (AWS::IAM::Policy on Users) and an access key, nothing else.
	// (Binding roles carry theirs themselves, Policies: roles.go, whose
	// statements serve AWS::IAM::Role alone.)
	unused("AWS::IAM::User", "console passwords", []string{"LoginProfile"},
		"iam:CreateLoginProfile", "iam:UpdateLoginProfile"),
	unused("AWS::IAM::User", "group membership", []string{"Groups"},
		"iam:AddUserToGroup", "iam:RemoveUserFromGroup"),
	unused("AWS::IAM::User", "managed policies", []string{"ManagedPolicyArns"},
		"iam:AttachUserPolicy", "iam:DetachUserPolicy"),
	unused("AWS::IAM::Policy", "inline policies of roles", []string{"Roles"},
		"iam:GetRolePolicy", "iam:PutRolePolicy", "iam:DeleteRolePolicy"),
	unused("AWS::IAM::Policy", "inline policies of groups", []string{"Groups"},
		"iam:GetGroupPolicy", "iam:PutGroupPolicy", "iam:DeleteGroupPolicy"),

	// AWS::SNS::Topic and AWS::SNS::Subscription: the topic's and the
	// subscriptions' features that pass a role to SNS or set a policy the
	// templates do not.
	unused("AWS::SNS::Topic", "delivery status logging, which passes a role to SNS", []string{"DeliveryStatusLogging"},
		"iam:GetRole", "iam:PassRole"),
	unused("AWS::SNS::Topic", "a data protection policy", []string{"DataProtectionPolicy"},
		"sns:PutDataProtectionPolicy"),
	unused("AWS::SNS::Subscription", "Amazon Data Firehose subscriptions, which pass a role to SNS", []string{"SubscriptionRoleArn"},
		"iam:GetRole", "iam:PassRole"),

	// AWS::Kinesis::Stream.
	unused("AWS::Kinesis::Stream", "shard-level (enhanced) metrics", []string{"DesiredShardLevelMetrics"},
		"kinesis:EnableEnhancedMonitoring", "kinesis:DisableEnhancedMonitoring"),
	unused("AWS::Kinesis::Stream", "records larger than 1 MiB", []string{"MaxRecordSizeInKiB"},
		"kinesis:UpdateMaxRecordSize"),
	unused("AWS::Kinesis::Stream", "warm throughput", []string{"WarmThroughputMiBps", "WarmThroughputObject"},
		"kinesis:UpdateStreamWarmThroughput"),

	// AWS::ElastiCache::ServerlessCache and AWS::SecretsManager::Secret.
	unused("AWS::SecretsManager::Secret", "secrets replicated to other Regions", []string{"ReplicaRegions"},
		"secretsmanager:ReplicateSecretToRegions", "secretsmanager:RemoveRegionsFromReplication"),

	// AWS::RDS::DBInstance.
	unused("AWS::RDS::DBInstance", "IAM roles for the database, Enhanced Monitoring, or a directory domain, which pass a role to RDS",
		[]string{"AssociatedRoles", "MonitoringRoleArn", "DomainIAMRoleName"},
		"iam:GetRole", "iam:ListRoles", "iam:PassRole"),
	unused("AWS::RDS::DBInstance", "IAM roles for the database (S3 import, Lambda...)", []string{"AssociatedRoles"},
		"rds:AddRoleToDBInstance", "rds:RemoveRoleFromDBInstance"),
	unused("AWS::RDS::DBInstance", "read replicas, and their promotion", []string{"SourceDBInstanceIdentifier", "SourceDBClusterIdentifier", "ReplicaMode"},
		"rds:CreateDBInstanceReadReplica", "rds:PromoteReadReplica"),
	unused("AWS::RDS::DBInstance", "a database restored from a snapshot", []string{"DBSnapshotIdentifier", "DBClusterSnapshotIdentifier"},
		"rds:RestoreDBInstanceFromDBSnapshot"),
	unused("AWS::RDS::DBInstance", "a database restored to a point in time",
		[]string{"RestoreTime", "UseLatestRestorableTime", "SourceDbiResourceId", "SourceDBInstanceAutomatedBackupsArn", "SourceDBInstanceIdentifier"},
		"rds:RestoreDBInstanceToPointInTime"),
	unused("AWS::RDS::DBInstance", "automated backups replicated to another Region",
		[]string{"AutomaticBackupReplicationRegion", "AutomaticBackupReplicationKmsKeyId", "AutomaticBackupReplicationRetentionPeriod"},
		"rds:StartDBInstanceAutomatedBackupsReplication", "rds:StopDBInstanceAutomatedBackupsReplication"),

	// AWS::RDS::DBCluster: Aurora Serverless v2 clusters, made new, alone.
	unused("AWS::RDS::DBCluster", "IAM roles for the cluster, Enhanced Monitoring, or a directory domain, which pass a role to RDS",
		[]string{"AssociatedRoles", "MonitoringRoleArn", "DomainIAMRoleName"},
		"iam:PassRole"),
	unused("AWS::RDS::DBCluster", "IAM roles for the cluster (S3 import, Lambda...)", []string{"AssociatedRoles"},
		"rds:AddRoleToDBCluster", "rds:RemoveRoleFromDBCluster"),
	unused("AWS::RDS::DBCluster", "a cluster restored from a snapshot", []string{"SnapshotIdentifier"},
		"rds:RestoreDBClusterFromSnapshot"),
	unused("AWS::RDS::DBCluster", "a cluster restored to a point in time or cloned",
		[]string{"RestoreType", "RestoreToTime", "UseLatestRestorableTime", "SourceDBClusterIdentifier", "SourceDbClusterResourceId"},
		"rds:RestoreDBClusterToPointInTime"),
	unused("AWS::RDS::DBCluster", "Aurora global databases", []string{"GlobalClusterIdentifier"},
		"rds:RemoveFromGlobalCluster"),

	// AWS::SecretsManager::Secret: the binding stacks' password secrets.
	unused("AWS::SecretsManager::Secret", "secrets replicated to other Regions", []string{"ReplicaRegions"},
		"secretsmanager:ReplicateSecretToRegions", "secretsmanager:RemoveRegionsFromReplication"),

	// AWS::IAM::Role and AWS::RolesAnywhere::Profile: roles.go.
	rolesUnused,

	// AWS::SecretsManager::Secret: dbusers.go.
)

// Withheld are the actions a handler of the example templates' types lists
// for a feature its schema no longer offers (no property a template could
// set), which the service role does not grant: the proof counts them as
// refused (it fails should the role grant one), but no Deny names them.
var Withheld = withheld("AWS::DynamoDB::Table", "multi-account global table replicas, which the schema offered with "+
	"the property GlobalTableSettingsReplicationMode and kept these actions for when it dropped the property; a replica "+
	"copies items with the caller's permissions, and the service role reads and writes no table's items",
	"dynamodb:CreateTableReplica", "dynamodb:AssociateTableReplica",
	"dynamodb:Scan", "dynamodb:Query", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
	"dynamodb:DeleteItem", "dynamodb:BatchWriteItem")

// Extra are the actions the service role grants that no handler of the
// example templates' types lists, each with its reason; the infra tests
// fail on any other (nothing granted is unused).
var Extra = []cfnregistry.Extra{
	{Action: "elasticache:CreateServerlessCacheSnapshot", Why: "DeleteServerlessCache with a FinalSnapshotName, as the " +
		"cache's template deletes it, takes that snapshot with the caller's permission (the Service Authorization " +
		"Reference lists it as DeleteServerlessCache's dependent action)"},
}

func withheld(typ, feature string, actions ...string) []cfnregistry.Refused {
	var out []cfnregistry.Refused
	for _, a := range actions {
		out = append(out, cfnregistry.Refused{Action: a, Why: typ + " lists it only for " + feature})
	}
	return out
}

func unused(typ, feature string, properties []string, actions ...string) []cfnregistry.Unused {
	var out []cfnregistry.Unused
	for _, p := range properties {
		for _, a := range actions {
			out = append(out, cfnregistry.Unused{Type: typ, Property: p, Action: a,
				Why: "only for " + feature + " (" + p + "), which no example template sets"})
		}
	}
	return out
}

func join(lists ...[]cfnregistry.Unused) []cfnregistry.Unused {
	var out []cfnregistry.Unused
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
