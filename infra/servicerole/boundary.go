package servicerole

import "strings"

const reasonBoundary = "The boundary of the identities the service stacks make: at most what a binding of the " +
	"example services needs, on the resources of the broker's stacks, whose names CloudFormation generates " +
	"from the stack's (PREFIX-…, lower case for S3), and the database secrets RDS names rds!db-… and tags with " +
	"the ARN of a database of those stacks."

// Boundary are the statements of the permissions boundary every IAM
// identity a service stack makes carries: at most what a binding of the
// example services may need (services/*/binding.yaml), on the resources of
// the broker's stacks only. A binding's own policy narrows it to its
// instance; the boundary caps whatever a template, or anyone holding the
// worker's credentials, puts in a policy.
func Boundary(prefix string) []Statement {
	lower := strings.ToLower(prefix)
	bucket := ARN{Service: "s3", Resource: lower + "-*", Regionless: true, Accountless: true}
	objects := ARN{Service: "s3", Resource: lower + "-*/*", Regionless: true, Accountless: true}
	return []Statement{
		{
			Sid:       "ListTheBuckets",
			Actions:   []string{"s3:ListBucket", "s3:GetBucketLocation"},
			Resources: []ARN{bucket},
			Reason:    reasonBoundary,
		},
		{
			Sid: "UseTheObjects",
			Actions: []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
				"s3:ListMultipartUploadParts"},
			Resources: []ARN{objects},
			Reason:    reasonBoundary,
		},
		{
			Sid: "UseTheQueues",
			Actions: []string{"sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage", "sqs:ReceiveMessage",
				"sqs:DeleteMessage", "sqs:ChangeMessageVisibility"},
			Resources: []ARN{{Service: "sqs", Resource: prefix + "-*"}},
			Reason:    reasonBoundary,
		},
		{
			Sid: "UseTheTables",
			Actions: []string{"dynamodb:DescribeTable", "dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query",
				"dynamodb:Scan", "dynamodb:ConditionCheckItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
				"dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "dynamodb:PartiQLSelect", "dynamodb:PartiQLInsert",
				"dynamodb:PartiQLUpdate", "dynamodb:PartiQLDelete"},
			Resources: []ARN{{Service: "dynamodb", Resource: "table/" + prefix + "-*"}},
			Reason:    reasonBoundary,
		},
		{
			Sid:       "PublishToTheTopics",
			Actions:   []string{"sns:Publish", "sns:GetTopicAttributes"},
			Resources: []ARN{{Service: "sns", Resource: prefix + "-*"}},
			Reason:    reasonBoundary,
		},
		{
			Sid: "UseTheStreams",
			Actions: []string{"kinesis:DescribeStream", "kinesis:DescribeStreamSummary", "kinesis:ListShards",
				"kinesis:PutRecord", "kinesis:PutRecords", "kinesis:GetShardIterator", "kinesis:GetRecords"},
			Resources: []ARN{{Service: "kinesis", Resource: "stream/" + prefix + "-*"}},
			Reason:    reasonBoundary,
		},
		{
			// RDS names its master secrets rds!db-<uuid>, whatever the
			// database, and tags each with its database's ARN: the tag
			// narrows the name's pattern to this deployment's databases.
			Sid:       "ReadTheDatabaseSecrets",
			Actions:   []string{"secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"},
			Resources: []ARN{{Service: "secretsmanager", Resource: "secret:rds!db-*"}},
			Conditions: map[string]any{
				"StringLike": map[string]any{DatabaseSecretTag: DatabasesARN(prefix)},
			},
			Reason: reasonBoundary,
		},
	}
}

// DatabaseSecretTag is the condition key of the tag RDS puts on the master
// secret it manages for a DB instance: the instance's ARN.
const DatabaseSecretTag = "secretsmanager:ResourceTag/aws:rds:primaryDBInstanceArn"

// ClusterSecretTag is the condition key of the tag RDS puts on the master
// secret it manages for an Aurora DB cluster: the cluster's ARN.
const ClusterSecretTag = "secretsmanager:ResourceTag/aws:rds:primaryDBClusterArn"

// ClustersARN is the pattern of the DB clusters of the stacks named
// "prefix-…".
func ClustersARN(prefix string) ARN {
	return ARN{Service: "rds", Resource: "cluster:" + strings.ToLower(prefix) + "-*"}
}

// DatabasesARN is the pattern of the DB instances of the stacks named
// "prefix-…": RDS identifiers are in lower case.
func DatabasesARN(prefix string) ARN {
	return ARN{Service: "rds", Resource: "db:" + strings.ToLower(prefix) + "-*"}
}
