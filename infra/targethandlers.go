package infra

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/deploy"
)

// TargetParamHandlerCodeBucket is the target stack's parameter naming the
// bucket, in the stack's Region, that holds the bundles of the broker's
// custom resource functions (deploy.HandlerCodeKey; `make target-assets
// BUCKET=…` puts them there). StackSets have no CDK assets, so the code is
// the operator's to put where every target account may read it. The
// template declares it only when a placed plan needs those functions.
const TargetParamHandlerCodeBucket = "HandlerCodeBucket"

// targetNetworks are the VPCs of the catalog's networks in other accounts
// (catalog.Network.Placed), each with the condition that deploys its
// Custom::DatabaseUser function in its own account and Region only: one
// template serves every account a StackSet deploys it to.
func targetNetworks(stack awscdk.Stack, catalogPath string) ([]DatabaseUserVPC, error) {
	cat, err := catalog.Load(catalogPath)
	if err != nil {
		return nil, err
	}
	var placed []*catalog.Network
	for _, n := range cat.Networks() {
		if n.Placed() { // the broker's stack deploys the others' (catalogNetworks)
			placed = append(placed, n)
		}
	}
	vpcs := vpcsOf(placed, nil)
	for i, v := range vpcs {
		vpcs[i].condition = awscdk.NewCfnCondition(stack, jsii.String("In"+strings.TrimPrefix(v.VpcID, "vpc-")), &awscdk.CfnConditionProps{
			Expression: awscdk.Fn_ConditionAnd(
				awscdk.Fn_ConditionEquals(awscdk.Aws_ACCOUNT_ID(), jsii.String(v.account)),
				awscdk.Fn_ConditionEquals(awscdk.Aws_REGION(), jsii.String(v.region))),
		})
	}
	return vpcs, nil
}

// anyOf is a condition true where any of conds is (Fn::Or takes 2 to 10;
// more are nested); conds[0] alone when it is the only one.
func anyOf(stack awscdk.Stack, id string, conds []awscdk.CfnCondition) awscdk.CfnCondition {
	if len(conds) == 1 {
		return conds[0]
	}
	var groups []awscdk.ICfnConditionExpression
	for i := 0; i < len(conds); i += 10 {
		part := conds[i:min(i+10, len(conds))]
		if len(part) == 1 {
			groups = append(groups, part[0])
			continue
		}
		var exprs []awscdk.ICfnConditionExpression
		for _, c := range part {
			exprs = append(exprs, c)
		}
		groups = append(groups, awscdk.Fn_ConditionOr(exprs...))
	}
	expr := groups[0]
	if len(groups) > 1 {
		expr = awscdk.Fn_ConditionOr(groups...)
	}
	return awscdk.NewCfnCondition(stack, jsii.String(id), &awscdk.CfnConditionProps{Expression: expr})
}

// onCondition puts every CloudFormation resource of each construct on the
// condition c (nil: none).
func onCondition(c awscdk.CfnCondition, of ...constructs.IConstruct) {
	if c == nil {
		return
	}
	for _, x := range of {
		for _, child := range *x.Node().FindAll(constructs.ConstructOrder_PREORDER) {
			if *awscdk.CfnResource_IsCfnResource(child) {
				child.(awscdk.CfnResource).CfnOptions().SetCondition(c)
			}
		}
	}
}

// bundleKey is where the target stack finds the zip make build writes
// beside a function's asset directory (dir + ".zip").
func bundleKey(function, dir string) (string, error) {
	zip, err := os.ReadFile(filepath.Clean(dir) + ".zip")
	if err != nil {
		return "", fmt.Errorf("the function's bundle: %w (make build writes it)", err)
	}
	return deploy.HandlerCodeKey(function, zip), nil
}

// targetHandlers deploys in the target stack the broker's functions that
// the templates of the plans placed in other accounts call (the manifest's
// InTargetCustomResources), as the broker's stack does at home and under
// the same names, so that the templates and the driver name them alike:
// the Custom::CacheUserGroupMember function in every account, and the
// Custom::DatabaseUser function in each of the catalog's networks of
// other accounts, in the account and Region of that network only. Their
// code is in the bucket HandlerCodeBucket names, under the keys of the
// bundles this synthesis read (deploy.HandlerCodeKey). Nothing, and no
// parameter, when no placed plan calls one.
func targetHandlers(stack awscdk.Stack, p TargetStackProps, manifest deploy.Manifest) error {
	cache := manifest.InTargetCustomResource(deploy.CacheUserGroupMember)
	var vpcs []DatabaseUserVPC
	if manifest.InTargetCustomResource(deploy.DatabaseUser) {
		var err error
		if vpcs, err = targetNetworks(stack, filepath.Join(p.WorkerCodeDir, "catalog.yaml")); err != nil {
			return err
		}
	}
	if !cache && len(vpcs) == 0 {
		return nil
	}
	bucket := awscdk.NewCfnParameter(stack, jsii.String(TargetParamHandlerCodeBucket), &awscdk.CfnParameterProps{
		Type: jsii.String("String"), AllowedPattern: jsii.String(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`),
		Description: jsii.String("The bucket, in this Region, that holds the bundles of the broker's custom resource functions " +
			"(make target-assets BUCKET=… puts them there); every account of the StackSet must be able to read it."),
	})
	codeBucket := awss3.Bucket_FromBucketName(stack, jsii.String("HandlerCode"), bucket.ValueAsString())
	keys := map[string]string{}
	for _, f := range []struct{ name, dir string }{{"dbuser", p.DatabaseUserCodeDir}, {"cacheuser", p.CacheUserCodeDir}} {
		if (f.name == "dbuser" && len(vpcs) == 0) || (f.name == "cacheuser" && !cache) {
			continue
		}
		key, err := bundleKey(f.name, f.dir)
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		keys[filepath.Clean(f.dir)] = key
	}
	b := &builder{stack: stack, retention: retentions[DefaultLogRetentionDays],
		props: BrokerStackProps{StackPrefix: p.StackPrefix, DatabaseUserVPCs: vpcs,
			DatabaseUserCodeDir: p.DatabaseUserCodeDir, CacheUserCodeDir: p.CacheUserCodeDir},
		code: func(dir string) awslambda.Code {
			return awslambda.Code_FromBucket(codeBucket, jsii.String(keys[filepath.Clean(dir)]), nil)
		}}
	if len(vpcs) > 0 {
		var conds []awscdk.CfnCondition
		for _, v := range vpcs {
			conds = append(conds, v.condition)
		}
		b.databaseUsersOn(anyOf(stack, "InAnyNetwork", conds))
	}
	b.cacheUsers(cache)
	return nil
}
