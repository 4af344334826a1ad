package infra

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/infra/servicerole"
	"github.com/serverless-osb/broker/internal/deploy"
)

// ContextCacheUserCode is the asset directory of the
// Custom::CacheUserGroupMember function (functions/cacheuser), named
// PREFIX-cacheuser, which the ElastiCache for Valkey binding template
// calls. No context value deploys it: the catalog does (cacheUsers).
const ContextCacheUserCode = "cacheUserCode"

// DefaultCacheUserCodeDir is where make build puts the cacheuser bundle.
const DefaultCacheUserCodeDir = "dist/cacheuser"

// CacheUserFunctionName is the function's name, which the binding
// template derives from its instance's stack name (PREFIX-…).
func CacheUserFunctionName(prefix string) string { return strings.ToLower(prefix) + "-cacheuser" }

// reasonCacheUsers is why the cacheuser role's statements end in PREFIX-*.
const reasonCacheUsers = "The caches' user groups and users, and the binding stacks' secrets, are named after the " +
	"stacks (PREFIX-…), made at run time: the function puts a binding's user in its cache's group, takes it out, and " +
	"reads the password the binding's stack generated."

// cacheUsers deploys the Custom::CacheUserGroupMember function when a plan's
// template declares that resource (needed: the catalog's manifest says so,
// deploy.Needs.CustomResources), and only then: in no VPC (ElastiCache's and Secrets Manager's APIs are
// public endpoints), with a role that may change the user groups of this
// deployment's caches (PREFIX-*), with its users, and read the binding
// secrets (PREFIX-*).
func (b *builder) cacheUsers(needed bool) {
	if !needed {
		return
	}
	prefix := b.props.StackPrefix
	lower := strings.ToLower(prefix)
	role := b.lambdaRole("CacheUserRole", "The broker's Custom::CacheUserGroupMember function: binding users of its caches.")
	logs := b.logGroup("CacheUserLogs", nil)
	groups := servicerole.ARN{Service: "elasticache", Resource: "usergroup:" + lower + "-*"}
	users := servicerole.ARN{Service: "elasticache", Resource: "user:" + lower + "-*"}
	secrets := servicerole.ARN{Service: "secretsmanager", Resource: "secret:" + prefix + "-*"}
	role.AddToPrincipalPolicy(logsStatement(logs.LogGroupArn()))
	// ModifyUserGroup is authorized on the group and on each user it adds
	// or removes.
	role.AddToPrincipalPolicy(statement("ChangeTheCachesUserGroups",
		[]string{"elasticache:DescribeUserGroups", "elasticache:ModifyUserGroup"}, token(b.stack, groups), token(b.stack, users)))
	role.AddToPrincipalPolicy(statement("ReadTheBindingSecrets", []string{"secretsmanager:GetSecretValue"}, token(b.stack, secrets)))
	suppress(role,
		rule("AwsSolutions-IAM5", reasonXRay, "Resource::*"),
		rule("AwsSolutions-IAM5", reasonCacheUsers, groups.Nag()),
		rule("AwsSolutions-IAM5", reasonCacheUsers, users.Nag()),
		rule("AwsSolutions-IAM5", reasonCacheUsers, secrets.Nag()))
	fn := b.function("CacheUserFunction", functionSpec{
		description: "Custom::CacheUserGroupMember: puts the cache users of bindings in their caches' user groups, and takes them out.",
		codeDir:     b.props.CacheUserCodeDir,
		memoryMB:    DefaultMemoryMB,
		// A user group changes one user at a time: binds that come
		// together wait their turn, within CloudFormation's answer.
		timeout: 10 * time.Minute,
		role:    role,
		logs:    logs,
		env:     map[string]*string{},
	})
	fn.Node().DefaultChild().(awslambda.CfnFunction).SetFunctionName(jsii.String(CacheUserFunctionName(prefix)))
	awscdk.NewCfnOutput(b.stack, jsii.String("CacheUserFunctionName"), &awscdk.CfnOutputProps{
		Description: jsii.String("The Custom::CacheUserGroupMember function, which the Valkey binding template calls."),
		Value:       fn.FunctionName(),
	})
}

// checkCacheUserAsset makes sure the cacheuser bundle is built when the
// function is deployed (needed).
func checkCacheUserAsset(p BrokerStackProps, needed bool) error {
	if !needed {
		return nil
	}
	if _, err := os.Stat(filepath.Join(p.CacheUserCodeDir, "bootstrap")); err != nil {
		return fmt.Errorf("the catalog's templates declare %s, whose function's asset is missing: %w (make build writes it)", deploy.CacheUserGroupMember, err)
	}
	return nil
}
