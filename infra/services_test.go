package infra

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// arn is an ARN as the template writes it: parts joined, with {"Ref": X}
// for "${X}" (AWS::Partition, AWS::Region, AWS::AccountId).
func arn(parts ...any) object {
	return object{"Fn::Join": []any{"", parts}}
}

var (
	partition = object{"Ref": "AWS::Partition"}
	region    = object{"Ref": "AWS::Region"}
	account   = object{"Ref": "AWS::AccountId"}
)

// regional is arn:PARTITION:service:REGION:ACCOUNT:resource.
func regional(service, resource string) object {
	return arn("arn:", partition, ":"+service+":", region, ":", account, ":"+resource)
}

// serviceRoleStatements are the statements of the CloudFormation service
// role's own policies in template (its inline policies and the managed
// policies of the template attached to it), by Sid.
func serviceRoleStatements(t *testing.T, template map[string]any) map[string]object {
	t.Helper()
	id, _ := cloudFormationRoleID(t, template)
	found := map[string]object{}
	for _, doc := range rolePolicies(template, id) {
		for _, s := range doc.document["Statement"].([]any) {
			s := s.(object)
			sid, _ := s["Sid"].(string)
			if _, dup := found[sid]; dup || sid == "" {
				t.Errorf("statement Sid %q is missing or repeated", sid)
			}
			found[sid] = s
		}
	}
	if len(found) == 0 {
		t.Fatal("the service role has no statement of its own")
	}
	return found
}

// rolePolicy is a policy document of a role: inline (named), or a managed
// policy of the template attached to it (managed, its logical id).
type rolePolicy struct {
	name     string
	managed  bool
	document object
}

// rolePolicies are the inline policies of role id in template, then the
// managed policies of the template that name it in their Roles.
func rolePolicies(template map[string]any, id string) []rolePolicy {
	resources := template["Resources"].(object)
	var out []rolePolicy
	for _, p := range asList(resources[id].(object)["Properties"].(object)["Policies"]) {
		out = append(out, rolePolicy{name: mapOf(p)["PolicyName"].(string), document: mapOf(p)["PolicyDocument"].(object)})
	}
	for _, pid := range slices.Sorted(maps.Keys(resources)) {
		r := resources[pid].(object)
		if r["Type"] != "AWS::IAM::ManagedPolicy" {
			continue
		}
		props := r["Properties"].(object)
		for _, role := range asList(props["Roles"]) {
			if ref, _ := mapOf(role)["Ref"].(string); ref == id {
				out = append(out, rolePolicy{name: pid, managed: true, document: props["PolicyDocument"].(object)})
			}
		}
	}
	return out
}

// cloudFormationRole is the one role of template that CloudFormation
// assumes.
func cloudFormationRole(t *testing.T, template map[string]any) object {
	t.Helper()
	_, role := cloudFormationRoleID(t, template)
	return role
}

// cloudFormationRoleID is the logical id of the one role of template that
// CloudFormation assumes, and the role.
func cloudFormationRoleID(t *testing.T, template map[string]any) (string, object) {
	t.Helper()
	var ids []string
	resources := template["Resources"].(object)
	for id, r := range resources {
		r := r.(object)
		if r["Type"] != "AWS::IAM::Role" {
			continue
		}
		text, _ := json.Marshal(r["Properties"].(object)["AssumeRolePolicyDocument"])
		if strings.Contains(string(text), "cloudformation.amazonaws.com") {
			ids = append(ids, id)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("%d roles that CloudFormation assumes, want 1", len(ids))
	}
	return ids[0], resources[ids[0]].(object)
}

func TestServiceRole(t *testing.T) {
	role := resource(t, "ServiceRole")
	statements := serviceRoleStatements(t, broker.json)

	t.Run("only CloudFormation may assume it", func(t *testing.T) {
		want := object{
			"Version": "2012-10-17",
			"Statement": []any{object{
				"Action":    "sts:AssumeRole",
				"Effect":    "Allow",
				"Principal": object{"Service": "cloudformation.amazonaws.com"},
			}},
		}
		if got := role["Properties"].(object)["AssumeRolePolicyDocument"]; !jsonEqual(got, want) {
			t.Errorf("trust policy %v, want %v", got, want)
		}
	})
	t.Run("it has no managed policy unless the operator gives some", func(t *testing.T) {
		if p := role["Properties"].(object)["ManagedPolicyArns"]; p != nil {
			t.Errorf("ManagedPolicyArns %v", p)
		}
	})

	rds := func(resource string) object { return regional("rds", resource) }
	boundary := object{"Ref": logicalID(t, "BindingBoundary")}
	securityGroups := regional("ec2", "security-group/*")
	bindingRoles := arn("arn:", partition, ":iam::", account, ":role/serverless-osb/osb-*")
	profiles := regional("rolesanywhere", "profile/*")
	requestTag := object{"StringLike": object{"aws:RequestTag/aws:cloudformation:stack-name": "osb-*"}}
	tests := []struct {
		name      string
		sid       string
		actions   []string // some of the statement's actions
		resource  any
		condition any
	}{
		{"buckets are made, configured, tagged and deleted only when named after the broker's stacks (in lower case)", "Buckets",
			[]string{"s3:CreateBucket", "s3:DeleteBucket", "s3:PutEncryptionConfiguration", "s3:PutBucketVersioning",
				"s3:PutLifecycleConfiguration", "s3:PutBucketPublicAccessBlock", "s3:PutBucketOwnershipControls",
				"s3:PutBucketTagging", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy"},
			arn("arn:", partition, ":s3:::osb-*"), nil},
		{"queues, with their policies and tags, only when named after the broker's stacks", "Queues",
			[]string{"sqs:CreateQueue", "sqs:DeleteQueue", "sqs:SetQueueAttributes", "sqs:GetQueueAttributes", "sqs:TagQueue"},
			regional("sqs", "osb-*"), nil},
		{"tables, with point-in-time recovery, TTL and tags, only when named after the broker's stacks", "Tables",
			[]string{"dynamodb:CreateTable", "dynamodb:DeleteTable", "dynamodb:UpdateContinuousBackups", "dynamodb:UpdateTimeToLive", "dynamodb:TagResource"},
			regional("dynamodb", "table/osb-*"), nil},
		{"topics, their policies and the bindings' subscriptions, only when named after the broker's stacks", "Topics",
			[]string{"sns:CreateTopic", "sns:DeleteTopic", "sns:SetTopicAttributes", "sns:TagResource", "sns:Subscribe", "sns:Unsubscribe"},
			regional("sns", "osb-*"), nil},
		{"streams, with their shards, retention, encryption and tags, only when named after the broker's stacks", "Streams",
			[]string{"kinesis:CreateStream", "kinesis:DeleteStream", "kinesis:UpdateShardCount", "kinesis:StartStreamEncryption", "kinesis:AddTagsToStream"},
			regional("kinesis", "stream/osb-*"), nil},
		{"IAM users' keys, tags and deletion, only under /serverless-osb/ and named after the broker's stacks", "BindingUsers",
			[]string{"iam:DeleteUser", "iam:DeleteUserPolicy", "iam:CreateAccessKey", "iam:DeleteAccessKey", "iam:TagUser"},
			arn("arn:", partition, ":iam::", account, ":user/serverless-osb/osb-*"), nil},
		{"IAM users are made and given policies only with the boundary", "BoundedBindingUsers",
			[]string{"iam:CreateUser", "iam:PutUserPolicy", "iam:PutUserPermissionsBoundary"},
			arn("arn:", partition, ":iam::", account, ":user/serverless-osb/osb-*"),
			object{"StringEquals": object{"iam:PermissionsBoundary": boundary}}},
		{"no IAM identity anywhere is made or empowered with another boundary or none", "OnlyBoundedIdentities",
			[]string{"iam:CreateUser", "iam:CreateRole", "iam:PutRolePolicy", "iam:AttachUserPolicy", "iam:AttachRolePolicy"},
			"*", object{"StringNotEquals": object{"iam:PermissionsBoundary": boundary}}},
		{"no IAM identity's boundary is removed", "KeepBoundaries",
			[]string{"iam:DeleteUserPermissionsBoundary", "iam:DeleteRolePermissionsBoundary"}, "*", nil},
		{"the boundary policy is not changed", "KeepTheBoundary",
			[]string{"iam:CreatePolicyVersion", "iam:SetDefaultPolicyVersion", "iam:DeletePolicy"}, boundary, nil},
		{"databases, Aurora clusters, their subnet groups and final snapshots, only when named after the broker's stacks", "Databases",
			[]string{"rds:CreateDBInstance", "rds:ModifyDBInstance", "rds:DeleteDBInstance", "rds:CreateDBSnapshot",
				"rds:CreateDBSubnetGroup", "rds:DeleteDBSubnetGroup", "rds:AddTagsToResource",
				"rds:CreateDBCluster", "rds:ModifyDBCluster", "rds:DeleteDBCluster", "rds:CreateDBClusterSnapshot", "rds:EnableHttpEndpoint"},
			[]any{rds("cluster-snapshot:osb-*"), rds("cluster:osb-*"), rds("db:osb-*"), rds("snapshot:osb-*"), rds("subgrp:osb-*")}, nil},
		{"a database or cluster may use the engine's default groups", "DatabaseDefaultGroups",
			[]string{"rds:CreateDBInstance", "rds:ModifyDBInstance", "rds:CreateDBCluster", "rds:ModifyDBCluster"},
			[]any{rds("cluster-pg:default.*"), rds("og:default:*"), rds("pg:default.*"), rds("subgrp:default")}, nil},
		{"RDS may create the master user's secret, and only a secret of RDS's, tag only those of the broker's databases", "DatabaseSecrets",
			[]string{"secretsmanager:CreateSecret", "secretsmanager:TagResource"},
			regional("secretsmanager", "secret:rds!db-*"),
			object{"StringLikeIfExists": object{"secretsmanager:ResourceTag/aws:rds:primaryDBInstanceArn": rds("db:osb-*")}}},
		{"RDS may create an Aurora cluster's master secret, and only a secret of RDS's, tag only those of the broker's clusters", "ClusterSecrets",
			[]string{"secretsmanager:CreateSecret", "secretsmanager:TagResource"},
			regional("secretsmanager", "secret:rds!cluster-*"),
			object{"StringLikeIfExists": object{"secretsmanager:ResourceTag/aws:rds:primaryDBClusterArn": rds("cluster:osb-*")}}},
		{"the binding stacks' own secrets, only when named after the broker's stacks", "BindingSecrets",
			[]string{"secretsmanager:CreateSecret", "secretsmanager:DeleteSecret", "secretsmanager:GetSecretValue", "secretsmanager:TagResource"},
			regional("secretsmanager", "secret:osb-*"), nil},
		{"the broker's Custom::DatabaseUser functions, and no other function, are invoked", "DatabaseUserFunctions",
			[]string{"lambda:InvokeFunction"}, regional("lambda", "function:osb-dbuser-*"), nil},
		{"RDS's service-linked role, and no other role, may be created", "RdsServiceLinkedRole",
			[]string{"iam:CreateServiceLinkedRole"},
			arn("arn:", partition, ":iam::", account, ":role/aws-service-role/rds.amazonaws.com/AWSServiceRoleForRDS"),
			object{"StringEquals": object{"iam:AWSServiceName": "rds.amazonaws.com"}}},
		{"security groups may be created in the account's VPCs", "CreateSecurityGroups",
			[]string{"ec2:CreateSecurityGroup"}, []any{securityGroups, regional("ec2", "vpc/*")}, nil},
		{"a new security group may be tagged as it is created", "TagNewSecurityGroups",
			[]string{"ec2:CreateTags"}, securityGroups, object{"StringEquals": object{"ec2:CreateAction": "CreateSecurityGroup"}}},
		{"rules, tags and deletion only on the security groups of the broker's stacks", "ManageStackSecurityGroups",
			[]string{"ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress", "ec2:DeleteSecurityGroup", "ec2:CreateTags", "ec2:DeleteTags"},
			securityGroups, object{"StringLike": object{"aws:ResourceTag/aws:cloudformation:stack-name": "osb-*"}}},
		{"DynamoDB's AWS managed key, only through DynamoDB", "TableManagedKey",
			[]string{"kms:CreateGrant", "kms:RevokeGrant", "kms:Encrypt", "kms:Decrypt"}, regional("kms", "key/*"), object{
				"StringEquals":             object{"kms:ViaService": object{"Fn::Sub": "dynamodb.${AWS::Region}.${AWS::URLSuffix}"}},
				"ForAnyValue:StringEquals": object{"kms:ResourceAliases": "alias/aws/dynamodb"}}},
		{"RDS's AWS managed key, only through RDS", "DatabaseManagedKey",
			[]string{"kms:CreateGrant"}, regional("kms", "key/*"), object{
				"StringEquals":             object{"kms:ViaService": object{"Fn::Sub": "rds.${AWS::Region}.${AWS::URLSuffix}"}},
				"ForAnyValue:StringEquals": object{"kms:ResourceAliases": "alias/aws/rds"}}},
		{"the handlers describe those two keys themselves", "DescribeManagedKeys",
			[]string{"kms:DescribeKey"}, regional("kms", "key/*"), object{
				"ForAnyValue:StringEquals": object{"kms:ResourceAliases": []any{"alias/aws/dynamodb", "alias/aws/rds"}}}},
		{"the broker's own keys are not the stacks' to use", "KeepOffTheBrokersKeys",
			[]string{"kms:*"}, []any{object{"Fn::GetAtt": []any{logicalID(t, "SealingKey"), "Arn"}}, object{"Fn::GetAtt": []any{logicalID(t, "TableKey"), "Arn"}}}, nil},
		{"the table's handler finds the AWS managed key by its alias", "ListKeyAliases",
			[]string{"kms:ListAliases"}, "*", nil},
		{"binding roles' tags, policies, trust and deletion, only under /serverless-osb/ and named after the broker's stacks", "BindingRoles",
			[]string{"iam:DeleteRole", "iam:GetRole", "iam:DeleteRolePolicy", "iam:TagRole", "iam:UpdateAssumeRolePolicy"}, bindingRoles, nil},
		{"binding roles are made and given policies only with the boundary", "BoundedBindingRoles",
			[]string{"iam:CreateRole", "iam:PutRolePolicy", "iam:PutRolePermissionsBoundary"}, bindingRoles,
			object{"StringEquals": object{"iam:PermissionsBoundary": boundary}}},
		{"binding roles, and no other role, are passed, and only to IAM Roles Anywhere", "PassBindingRolesToRolesAnywhere",
			[]string{"iam:PassRole"}, bindingRoles, object{"StringEquals": object{"iam:PassedToService": "rolesanywhere.amazonaws.com"}}},
		{"a Roles Anywhere profile is created only with the tag of a broker's stack", "CreateBindingProfiles",
			[]string{"rolesanywhere:CreateProfile"}, "*", requestTag},
		{"a new profile may be tagged as it is created, with the tag of a broker's stack", "TagNewBindingProfiles",
			[]string{"rolesanywhere:TagResource"}, profiles, requestTag},
		{"reads, changes, tags and deletion only on the profiles of the broker's stacks", "ManageStackBindingProfiles",
			[]string{"rolesanywhere:GetProfile", "rolesanywhere:DeleteProfile", "rolesanywhere:PutAttributeMapping", "rolesanywhere:UntagResource"},
			profiles, object{"StringLike": object{"aws:ResourceTag/aws:cloudformation:stack-name": "osb-*"}}},
		{"search domains are made, changed, tagged and deleted only when named after the broker's stacks (in lower case)", "SearchDomains",
			[]string{"es:CreateDomain", "es:UpdateDomainConfig", "es:UpgradeDomain", "es:DeleteDomain", "es:AddTags", "es:RemoveTags"},
			regional("es", "domain/osb-*"), nil},
		{"OpenSearch Service's service-linked role, and no other role, may be created", "SearchServiceLinkedRole",
			[]string{"iam:CreateServiceLinkedRole"},
			arn("arn:", partition, ":iam::", account, ":role/aws-service-role/opensearchservice.amazonaws.com/AWSServiceRoleForAmazonOpenSearchService"),
			object{"StringEquals": object{"iam:AWSServiceName": "opensearchservice.amazonaws.com"}}},
		{"caches, their user groups, users and final snapshots, only when named after the broker's stacks (in lower case)", "Caches",
			[]string{"elasticache:CreateServerlessCache", "elasticache:DeleteServerlessCache", "elasticache:CreateServerlessCacheSnapshot",
				"elasticache:CreateUserGroup", "elasticache:ModifyUserGroup", "elasticache:CreateUser", "elasticache:DeleteUser",
				"elasticache:AddTagsToResource"},
			[]any{regional("elasticache", "replicationgroup:osb-*"), regional("elasticache", "serverlesscache:osb-*"),
				regional("elasticache", "serverlesscachesnapshot:osb-*"), regional("elasticache", "user:osb-*"),
				regional("elasticache", "usergroup:osb-*")}, nil},
		{"a serverless cache may put its endpoints in the account's VPCs", "CacheEndpoints",
			[]string{"ec2:CreateVpcEndpoint"}, []any{regional("ec2", "subnet/*"), regional("ec2", "vpc-endpoint/*"), regional("ec2", "vpc/*")}, nil},
		{"in the security groups of the broker's stacks only", "CacheEndpointsInStackSecurityGroups",
			[]string{"ec2:CreateVpcEndpoint"}, securityGroups, object{"StringLike": object{"aws:ResourceTag/aws:cloudformation:stack-name": "osb-*"}}},
		{"a new cache endpoint may be tagged as it is created", "TagNewCacheEndpoints",
			[]string{"ec2:CreateTags"}, regional("ec2", "vpc-endpoint/*"), object{"StringEquals": object{"ec2:CreateAction": "CreateVpcEndpoint"}}},
		{"ElastiCache's service-linked role, and no other role, may be created", "ElastiCacheServiceLinkedRole",
			[]string{"iam:CreateServiceLinkedRole"},
			arn("arn:", partition, ":iam::", account, ":role/aws-service-role/elasticache.amazonaws.com/AWSServiceRoleForElastiCache"),
			object{"StringEquals": object{"iam:AWSServiceName": "elasticache.amazonaws.com"}}},
		{"the broker's cache user function, and no other, is invoked", "CacheUserFunction",
			[]string{"lambda:InvokeFunction"}, regional("lambda", "function:osb-cacheuser"), nil},
		{"what the resource handlers describe, read-only", "Describe",
			[]string{"ec2:DescribeSecurityGroups", "ec2:DescribeSubnets", "ec2:DescribeVpcs", "rds:DescribeEvents", "rds:DescribeDBEngineVersions"},
			"*", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ok := statements[tt.sid]
			if !ok {
				t.Fatalf("no statement %s", tt.sid)
			}
			if !containsAll(actions(s), tt.actions) {
				t.Errorf("%s grants %v; want at least %v", tt.sid, actions(s), tt.actions)
			}
			if !jsonEqual(s["Resource"], tt.resource) {
				t.Errorf("%s is granted on %v; want %v", tt.sid, s["Resource"], tt.resource)
			}
			if !jsonEqual(s["Condition"], tt.condition) {
				t.Errorf("%s is granted on condition %v; want %v", tt.sid, s["Condition"], tt.condition)
			}
		})
	}
	t.Run("every statement is one of those", func(t *testing.T) {
		var sids []string
		for _, tt := range tests {
			sids = append(sids, tt.sid)
		}
		if got := slices.Sorted(maps.Keys(statements)); !slices.Equal(got, slices.Sorted(slices.Values(sids))) {
			t.Errorf("statements %v, want %v", got, sids)
		}
	})
	t.Run(`only read-only Describe and List actions are granted on "*", but for a creation that carries the tag of a broker's stack`, func(t *testing.T) {
		for sid, s := range statements {
			if s["Resource"] != "*" || s["Effect"] == "Deny" || jsonEqual(s["Condition"], requestTag) {
				continue
			}
			for _, a := range actions(s) {
				// GetRandomPassword reads nothing: it returns random
				// characters, and names no resource.
				if a == "secretsmanager:GetRandomPassword" {
					continue
				}
				if _, name, _ := strings.Cut(a, ":"); !strings.HasPrefix(name, "Describe") && !strings.HasPrefix(name, "List") {
					t.Errorf("%s grants %s on *", sid, a)
				}
			}
		}
	})
	t.Run("no action is a wildcard, and KMS's are only for the AWS managed keys", func(t *testing.T) {
		managedKeys := []string{"TableManagedKey", "DatabaseManagedKey", "DescribeManagedKeys", "ListKeyAliases"}
		for sid, s := range statements {
			if sid == "KeepOffTheBrokersKeys" {
				continue
			}
			for _, a := range actions(s) {
				if strings.Contains(a, "*") || (strings.HasPrefix(a, "kms:") && !slices.Contains(managedKeys, sid)) {
					t.Errorf("%s grants %s", sid, a)
				}
			}
		}
	})
	t.Run("IAM actions touch only the binding users, the binding roles and RDS's and ElastiCache's service-linked roles: no other role, no group or managed policy", func(t *testing.T) {
		roleSids := []string{"BindingRoles", "BoundedBindingRoles", "PassBindingRolesToRolesAnywhere"}
		for sid, s := range statements {
			if s["Effect"] == "Deny" {
				continue
			}
			if slices.Contains(roleSids, sid) {
				// Their resource and conditions are pinned above; only
				// role actions, and no managed policy.
				for _, a := range actions(s) {
					if !strings.Contains(a, "Role") || slices.Contains([]string{"iam:AttachRolePolicy", "iam:DetachRolePolicy", "iam:DeleteRolePermissionsBoundary"}, a) {
						t.Errorf("%s grants %s", sid, a)
					}
				}
				continue
			}
			for _, a := range actions(s) {
				if !strings.HasPrefix(a, "iam:") {
					continue
				}
				if sid != "BindingUsers" && sid != "BoundedBindingUsers" && a != "iam:CreateServiceLinkedRole" {
					t.Errorf("%s grants %s", sid, a)
				}
				for _, risky := range []string{"Role", "Group", "AttachUserPolicy", "LoginProfile", "PassRole", "Permissions"} {
					if strings.Contains(strings.TrimPrefix(a, "iam:"), risky) && a != "iam:CreateServiceLinkedRole" && a != "iam:PutUserPermissionsBoundary" &&
						a != "iam:GetLoginProfile" && a != "iam:DeleteLoginProfile" && a != "iam:ListGroupsForUser" {
						t.Errorf("%s grants %s", sid, a)
					}
				}
			}
		}
	})
}

func TestServiceStacksEnvironment(t *testing.T) {
	serviceRole := object{"Fn::GetAtt": []any{logicalID(t, "ServiceRole"), "Arn"}}
	t.Run("the worker is given the service role's ARN and the stack prefix", func(t *testing.T) {
		env := properties(t, "WorkerFunction")["Environment"].(object)["Variables"].(object)
		if !jsonEqual(env["BROKER_CFN_ROLE_ARN"], serviceRole) {
			t.Errorf("BROKER_CFN_ROLE_ARN = %v, want %v", env["BROKER_CFN_ROLE_ARN"], serviceRole)
		}
		if env["BROKER_STACK_PREFIX"] != "osb" {
			t.Errorf("BROKER_STACK_PREFIX = %v, want osb", env["BROKER_STACK_PREFIX"])
		}
	})
	t.Run("the api function is given neither: it never touches a stack", func(t *testing.T) {
		env := properties(t, "ApiFunction")["Environment"].(object)["Variables"].(object)
		for _, name := range []string{"BROKER_CFN_ROLE_ARN", "BROKER_STACK_PREFIX"} {
			if v, ok := env[name]; ok {
				t.Errorf("%s = %v", name, v)
			}
		}
	})
	t.Run("cdk.json deploys the example services' catalog and names the stacks osb-…", func(t *testing.T) {
		context, err := cdkContext()
		if err != nil {
			t.Fatal(err)
		}
		if context[ContextCatalog] != "services/catalog.yaml" || context[ContextStackPrefix] != "osb" {
			t.Errorf("catalog %v, stackPrefix %v", context[ContextCatalog], context[ContextStackPrefix])
		}
	})
}

// TestServiceStacksFromContext synthesizes the stack with another stack
// prefix and extra managed policies for the service role, as -c options
// give them.
func TestServiceStacksFromContext(t *testing.T) {
	const (
		awsManaged = "arn:aws:iam::aws:policy/AmazonElastiCacheFullAccess"
		customer   = "arn:aws:iam::123456789012:policy/broker-extra"
	)
	// A prefix under the old rule, which legacyStackPrefix keeps.
	stack, template := synthWith(t, "Prefixed", map[string]any{
		ContextStackPrefix: "Team-A", ContextLegacyStackPrefix: "true", ContextServiceRolePolicyARNs: awsManaged + "," + customer,
	})
	tmpl := *template.ToJSON()
	role := cloudFormationRole(t, tmpl)
	statements := serviceRoleStatements(t, tmpl)

	t.Run("the managed policies given are attached to the service role, and to no other role", func(t *testing.T) {
		want := []any{awsManaged, customer}
		if got := role["Properties"].(object)["ManagedPolicyArns"]; !jsonEqual(got, want) {
			t.Errorf("ManagedPolicyArns %v, want %v", got, want)
		}
		roles := 0
		for _, r := range tmpl["Resources"].(object) {
			if r := r.(object); r["Type"] == "AWS::IAM::Role" && r["Properties"].(object)["ManagedPolicyArns"] != nil {
				roles++
			}
		}
		if roles != 1 {
			t.Errorf("%d roles have managed policies, want 1", roles)
		}
	})
	t.Run("the service role's own permissions name the prefix given (in lower case for S3 and RDS)", func(t *testing.T) {
		for sid, want := range map[string]any{
			"Buckets": arn("arn:", partition, ":s3:::team-a-*"),
			"Queues":  regional("sqs", "Team-A-*"),
			"Databases": []any{regional("rds", "cluster-snapshot:team-a-*"), regional("rds", "cluster:team-a-*"),
				regional("rds", "db:team-a-*"), regional("rds", "snapshot:team-a-*"), regional("rds", "subgrp:team-a-*")},
			"BindingSecrets":        regional("secretsmanager", "secret:Team-A-*"),
			"DatabaseUserFunctions": regional("lambda", "function:team-a-dbuser-*"),
		} {
			if got := statements[sid]["Resource"]; !jsonEqual(got, want) {
				t.Errorf("%s is granted on %v, want %v", sid, got, want)
			}
		}
		want := object{"StringLike": object{"aws:ResourceTag/aws:cloudformation:stack-name": "Team-A-*"}}
		if got := statements["ManageStackSecurityGroups"]["Condition"]; !jsonEqual(got, want) {
			t.Errorf("security groups on condition %v, want %v", got, want)
		}
	})
	t.Run("the worker manages the stacks of the prefix given, and is told the prefix", func(t *testing.T) {
		check(t, func() {
			template.HasResourceProperties(jsii.String("AWS::IAM::Policy"), object{
				"PolicyDocument": object{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&object{
					"Sid":      "ChangeServiceStacks",
					"Resource": regional("cloudformation", "stack/Team-A-*/*"),
				})})},
			})
			template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), object{
				"Environment": object{"Variables": assertions.Match_ObjectLike(&object{"BROKER_STACK_PREFIX": "Team-A"})},
			})
		})
	})
	t.Run("cdk-nag passes: the AWS managed policy is the operator's choice, suppressed with that reason", func(t *testing.T) {
		for _, f := range nagFindings(t, stack) {
			t.Error(f)
		}
	})
}

// TestBadStackPrefixFailsSynthesis: a prefix that is no stack name's start,
// or that another deployment's prefix extends or is extended by (it holds a
// hyphen, or upper case, which S3's and RDS's lower-case names lose), or
// that starts names of AWS's or the CDK's, fails the synthesis, naming it.
func TestBadStackPrefixFailsSynthesis(t *testing.T) {
	for _, prefix := range []string{"1osb", "osb_a", "a-very-long-stack-prefix", "osb-", "osb-prod", "Osb", "team-a", "cdk"} {
		t.Run(prefix+" is refused, naming the prefix", func(t *testing.T) {
			context := maps.Clone(broker.context)
			context[ContextStackPrefix] = prefix
			app := awscdk.NewApp(&awscdk.AppProps{Context: &context})
			props, err := PropsFromContext(app.Node())
			if err != nil {
				t.Fatal(err)
			}
			_, err = NewBrokerStack(app, "Broker", &props)
			if err == nil || !strings.Contains(err.Error(), `stack prefix: "`+prefix+`"`) {
				t.Errorf("error %v, want one naming the stack prefix %q", err, prefix)
			}
			if n := len(*app.Node().Children()); n != 0 {
				t.Errorf("the app has %d constructs; want none", n)
			}
		})
	}
}

// TestOverlappingBrokerStackNameFailsSynthesis: a broker stack whose name
// its own prefix's patterns cover (its table is NAME-Table…) fails the
// synthesis, legacy or not; and one whose name another deployment could
// take as its prefix's (a whole lower-case segment first) fails unless
// legacy.
func TestOverlappingBrokerStackNameFailsSynthesis(t *testing.T) {
	for _, tt := range []struct {
		name, prefix string
		legacy       bool
		want         string
	}{
		{"osb-broker", "osb", false, `falls under the stack prefix "osb"`},
		{"osb", "osb", false, `falls under the stack prefix "osb"`},
		{"OSB-Broker", "osb", false, `falls under the stack prefix "osb"`},
		{"Team-A-Broker", "Team-A", true, `falls under the stack prefix "Team-A"`},
		{"broker-prod", "osb", false, `starts with "broker-", which another deployment in the account could take as its stack prefix`},
		{"osbprod", "osb", false, `starts with "osbprod-"`},
	} {
		t.Run(fmt.Sprintf("%s on prefix %s (legacy %v) is refused", tt.name, tt.prefix, tt.legacy), func(t *testing.T) {
			context := maps.Clone(broker.context)
			context[ContextStackPrefix] = tt.prefix
			context[ContextLegacyStackPrefix] = tt.legacy
			app := awscdk.NewApp(&awscdk.AppProps{Context: &context})
			props, err := PropsFromContext(app.Node())
			if err != nil {
				t.Fatal(err)
			}
			_, err = NewBrokerStack(app, tt.name, &props)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
			if n := len(*app.Node().Children()); n != 0 {
				t.Errorf("the app has %d constructs; want none", n)
			}
		})
	}
	t.Run("legacy, a name another deployment's prefix could cover is accepted", func(t *testing.T) {
		synthWith(t, "broker-prod", map[string]any{ContextLegacyStackPrefix: true})
	})
}

// nagFindings are the AwsSolutions errors and warnings left unsuppressed
// on stack.
func nagFindings(t *testing.T, stack awscdk.Stack) []string {
	t.Helper()
	annotations := assertions.Annotations_FromStack(stack)
	nag := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
	var found []string
	for _, findings := range []any{annotations.FindError(jsii.String("*"), nag), annotations.FindWarning(jsii.String("*"), nag)} {
		text, err := json.Marshal(findings)
		if err != nil {
			t.Fatal(err)
		}
		var list []struct {
			ID    string `json:"id"`
			Entry struct {
				Data any `json:"data"`
			} `json:"entry"`
		}
		if err := json.Unmarshal(text, &list); err != nil {
			t.Fatal(err)
		}
		for _, f := range list {
			found = append(found, f.ID+": "+jsonString(f.Entry.Data))
		}
	}
	return found
}

func jsonString(v any) string {
	text, _ := json.Marshal(v)
	return string(text)
}
