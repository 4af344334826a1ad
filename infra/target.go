package infra

import (
	"cmp"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/serverless-osb/broker/infra/servicerole"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/deploy"
)

// TargetStackProps are the settings of the target stack: the stack a
// platform team deploys into each account (and Region) a catalog's
// placement puts instances in.
type TargetStackProps struct {
	awscdk.StackProps
	// WorkerCodeDir holds the manifest make build writes (deploy.json):
	// what the broker's worker does in a target account (Needs.InTargets).
	// Default: dist/worker.
	WorkerCodeDir string
	// StackPrefix is the broker's: the stacks it makes here are named
	// PREFIX-…, as at home. Default deploy.DefaultStackPrefix.
	StackPrefix string
	// DatabaseUserCodeDir and CacheUserCodeDir are the asset directories
	// of the broker's custom resource functions, beside which make build
	// writes their zips: the target stack names the zips' keys in the
	// operator's bucket (targetHandlers). Defaults: dist/dbuser and
	// dist/cacheuser.
	DatabaseUserCodeDir, CacheUserCodeDir string
}

// The target stack's parameters: the broker's roles it trusts, and the
// external id it requires of them. They are parameters, not context, so
// that the synthesized template is a plain CloudFormation template a team
// rolls out with StackSets, one value per broker.
const (
	TargetParamWorkerRole = "BrokerWorkerRoleArn"
	TargetParamAPIRole    = "BrokerApiRoleArn"
	TargetParamExternalID = "ExternalId"
	// TargetParamIdentityRegion names the Region whose target stack makes
	// the account's roles and boundary (empty: this one); the stacks of
	// the account's other Regions make only their buckets and functions.
	TargetParamIdentityRegion = "IdentityRegion"
)

// reasonTemplateBuckets is why the target role's ListBucket ends in "*".
const reasonTemplateBuckets = "The target stacks' buckets of templates, one per Region of the account " +
	"(osb-tpl-PREFIX-ACCOUNT-REGION): the role is the account's, and reaches the bucket of each Region it makes stacks in."

// The names of the target stack's IAM resources, so that a catalog names
// the same ARN in every account (arn:aws:iam::<account>:role/<name>).
func targetRoleName(prefix string) string        { return "serverless-osb-target-" + prefix }
func targetServiceRoleName(prefix string) string { return "serverless-osb-target-cfn-" + prefix }
func targetBoundaryName(prefix string) string    { return "serverless-osb-target-boundary-" + prefix }

// NewTargetStack defines the target stack: the role the broker assumes
// here (trusting the broker's worker and api roles only, with the
// external id; allowed what the worker does on the broker's stacks and
// nothing else), the CloudFormation service role the stacks are made
// under, with the same grants and permissions boundary as the broker's
// own, and the bucket of their templates over the TemplateBody limit.
// Nothing else. cdk-nag checks it as the broker's stack.
func NewTargetStack(scope constructs.Construct, id string, props *TargetStackProps) (awscdk.Stack, error) {
	if props == nil {
		props = &TargetStackProps{}
	}
	p := *props
	if p.WorkerCodeDir == "" {
		p.WorkerCodeDir = "dist/worker"
	}
	if p.StackPrefix == "" {
		p.StackPrefix = deploy.DefaultStackPrefix
	}
	if p.DatabaseUserCodeDir == "" {
		p.DatabaseUserCodeDir = DefaultDatabaseUserCodeDir
	}
	if p.CacheUserCodeDir == "" {
		p.CacheUserCodeDir = DefaultCacheUserCodeDir
	}
	if err := deploy.CheckStackPrefix(p.StackPrefix); err != nil {
		return nil, fmt.Errorf("stack %s: stackPrefix: %w", id, err)
	}
	manifest, err := readManifest(p.WorkerCodeDir)
	if err != nil {
		return nil, fmt.Errorf("stack %s: %w", id, err)
	}
	var inTargets []deploy.Statement
	for _, d := range manifest.Drivers {
		inTargets = append(inTargets, d.Needs.InTargets...)
	}
	if len(inTargets) == 0 {
		return nil, fmt.Errorf("stack %s: the catalog's drivers do nothing in other accounts (no driver declares InTargets): a target stack would grant nothing", id)
	}

	if p.Synthesizer == nil {
		// A plain template: StackSets' accounts have no CDK bootstrap to
		// check the version of.
		p.Synthesizer = awscdk.NewDefaultStackSynthesizer(&awscdk.DefaultStackSynthesizerProps{GenerateBootstrapVersionRule: jsii.Bool(false)})
	}
	stack := awscdk.NewStack(scope, &id, &p.StackProps)
	awscdk.Aspects_Of(stack).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	rolePattern := jsii.String(`^arn:aws[a-z-]*:iam::[0-9]{12}:role/\S+$`)
	worker := awscdk.NewCfnParameter(stack, jsii.String(TargetParamWorkerRole), &awscdk.CfnParameterProps{Type: jsii.String("String"),
		AllowedPattern: rolePattern, Description: jsii.String("The ARN of the broker's worker role (its stack's WorkerRole…).")})
	api := awscdk.NewCfnParameter(stack, jsii.String(TargetParamAPIRole), &awscdk.CfnParameterProps{Type: jsii.String("String"),
		AllowedPattern: rolePattern, Description: jsii.String("The ARN of the broker's api role (its stack's ApiRole…).")})
	externalID := awscdk.NewCfnParameter(stack, jsii.String(TargetParamExternalID), &awscdk.CfnParameterProps{Type: jsii.String("String"),
		NoEcho: jsii.Bool(true), MinLength: jsii.Number(2), MaxLength: jsii.Number(1224), AllowedPattern: jsii.String(`^[\w+=,.@:/-]+$`),
		Description: jsii.String("The external id the broker gives STS for this account: the placement's external_id in the catalog.")})

	var boundary []awsiam.PolicyStatement
	for _, s := range servicerole.Boundary(p.StackPrefix) {
		boundary = append(boundary, policyStatement(stack, s))
	}
	boundaryPolicy := awsiam.NewManagedPolicy(stack, jsii.String("BindingBoundary"), &awsiam.ManagedPolicyProps{
		ManagedPolicyName: jsii.String(targetBoundaryName(p.StackPrefix)),
		Description: jsii.String("The permissions boundary of every IAM identity the broker's service stacks (" +
			p.StackPrefix + "-*) make here: at most what a binding of the services needs, on those stacks' resources."),
		Statements: &boundary,
	})
	var grants []awsiam.PolicyStatement
	for _, s := range servicerole.Grants(p.StackPrefix, boundaryPolicy.ManagedPolicyArn()) {
		grants = append(grants, policyStatement(stack, s))
	}
	grants = append(grants, awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String("KeepTheBoundary"), Effect: awsiam.Effect_DENY,
		Actions: jsii.Strings(servicerole.BoundaryChanges...), Resources: &[]*string{boundaryPolicy.ManagedPolicyArn()},
	}))
	serviceRole := awsiam.NewRole(stack, jsii.String("ServiceRole"), &awsiam.RoleProps{
		RoleName: jsii.String(targetServiceRoleName(p.StackPrefix)),
		Description: jsii.String("CloudFormation's role for the stacks of the broker's service instances and bindings (" +
			p.StackPrefix + "-*) in this account: what the services' templates create, nothing else."),
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("cloudformation.amazonaws.com"), nil),
	})
	serviceRoleGrants := grantsAsManagedPolicies(stack, "ServiceStacks", serviceRole, grants,
		"What CloudFormation may do for the broker's service stacks ("+p.StackPrefix+"-*) in this account")

	// The templates over CloudFormation's TemplateBody limit of the stacks
	// made here: CloudFormation reads a TemplateURL with the caller's
	// credentials (the target role's), from a bucket in the stack's
	// Region, so they are put here, in the bucket the driver finds by its
	// name (deploy.TargetTemplateBucket).
	templates := awss3.NewBucket(stack, jsii.String("ServiceTemplates"), &awss3.BucketProps{
		BucketName:        jsii.String(deploy.TargetTemplateBucket(p.StackPrefix, *stack.Account(), *stack.Region())),
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
	})
	suppress(templates, rule("AwsSolutions-S1", reasonTemplateBucketLogs))

	// The role is the account's, used from every Region the account's
	// stacks are in: it reaches each Region's bucket of templates.
	bucketsOfTheAccount := "arn:" + *stack.Partition() + ":s3:::" + deploy.TargetTemplateBucket(p.StackPrefix, *stack.Account(), "*")
	values := map[string]string{
		deploy.Partition: *stack.Partition(), deploy.Region: *stack.Region(), deploy.Account: *stack.Account(),
		deploy.StackPrefix: p.StackPrefix, deploy.ServiceRoleARN: *serviceRole.RoleArn(),
		deploy.PermissionsBoundaryARN: *boundaryPolicy.ManagedPolicyArn(),
		deploy.TemplateBucket:         *templates.BucketName(), deploy.TemplateBucketARN: bucketsOfTheAccount,
	}
	var worked []awsiam.PolicyStatement
	for _, s := range inTargets {
		worked = append(worked, declaredStatement(s, values))
	}
	target := awsiam.NewRole(stack, jsii.String("TargetRole"), &awsiam.RoleProps{
		RoleName: jsii.String(targetRoleName(p.StackPrefix)),
		Description: jsii.String("The role the broker (serverless-osb, stack prefix " + p.StackPrefix +
			") assumes to make its service stacks in this account."),
		AssumedBy:   awsiam.NewCompositePrincipal(awsiam.NewArnPrincipal(worker.ValueAsString()), awsiam.NewArnPrincipal(api.ValueAsString())),
		ExternalIds: &[]*string{externalID.ValueAsString()},
		InlinePolicies: &map[string]awsiam.PolicyDocument{
			"BrokerStacks": awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{Statements: &worked}),
		},
	})

	suppress(boundaryPolicy, wildcardRules(servicerole.Boundary(p.StackPrefix))...)
	suppress(serviceRole, wildcardRules(servicerole.Grants(p.StackPrefix, nil))...)
	for _, g := range serviceRoleGrants {
		suppress(g, wildcardRules(servicerole.Grants(p.StackPrefix, nil))...)
	}
	nag := map[string]string{deploy.Partition: "<AWS::Partition>", deploy.Region: "<AWS::Region>",
		deploy.Account: "<AWS::AccountId>", deploy.StackPrefix: p.StackPrefix,
		deploy.TemplateBucketARN: "arn:<AWS::Partition>:s3:::" + deploy.TargetTemplateBucket(p.StackPrefix, "<AWS::AccountId>", "*")}
	for _, s := range inTargets {
		var wildcards []any
		for _, r := range s.Resources {
			if strings.Contains(deploy.Fill(r, nag), "*") {
				wildcards = append(wildcards, "Resource::"+deploy.Fill(r, nag))
			}
		}
		if len(wildcards) > 0 {
			suppress(target, rule("AwsSolutions-IAM5", cmp.Or(s.WildcardReason, reasonTemplateBuckets), wildcards...))
		}
	}

	// IAM names are the account's, not a Region's: the roles and the
	// boundary are made by the stack of one Region of the account (where
	// IdentityRegion is empty, or names it), the buckets and functions by
	// every Region's.
	identityRegion := awscdk.NewCfnParameter(stack, jsii.String(TargetParamIdentityRegion), &awscdk.CfnParameterProps{Type: jsii.String("String"),
		Default: jsii.String(""), AllowedPattern: jsii.String(`^(` + catalog.RegionPattern + `)?$`),
		Description: jsii.String("The Region whose target stack makes this account's roles and permissions boundary (IAM names are the account's): " +
			"empty in the first (or only) Region you deploy to, that Region's name in every other Region of the account (for a StackSet, the same name in all)."),
	})
	makesIdentities := awscdk.NewCfnCondition(stack, jsii.String("MakesIdentities"), &awscdk.CfnConditionProps{
		Expression: awscdk.Fn_ConditionOr(awscdk.Fn_ConditionEquals(identityRegion.ValueAsString(), jsii.String("")),
			awscdk.Fn_ConditionEquals(identityRegion.ValueAsString(), awscdk.Aws_REGION())),
	})
	onCondition(makesIdentities, boundaryPolicy, serviceRole, target)
	for _, g := range serviceRoleGrants {
		onCondition(makesIdentities, g)
	}

	if err := targetHandlers(stack, p, manifest); err != nil {
		return nil, fmt.Errorf("stack %s: %w", id, err)
	}

	for name, v := range map[string]*string{"TargetRoleArn": target.RoleArn(), "ServiceRoleArn": serviceRole.RoleArn(),
		"PermissionsBoundaryArn": boundaryPolicy.ManagedPolicyArn()} {
		awscdk.NewCfnOutput(stack, jsii.String(name), &awscdk.CfnOutputProps{Value: v, Condition: makesIdentities})
	}
	awscdk.NewCfnOutput(stack, jsii.String("TemplateBucketName"), &awscdk.CfnOutputProps{Value: templates.BucketName()})
	return stack, nil
}

// ContextTarget, true, makes the CDK app define the target stack rather
// than the broker's: cdk synth -c target=true writes its plain template.
const ContextTarget = "target"

// TargetPropsFromContext says whether the CDK context asks for the target
// stack (ContextTarget), and reads its props: the worker's asset (its
// manifest) and the stack prefix, as the broker's stack reads them.
func TargetPropsFromContext(node constructs.Node) (TargetStackProps, bool, error) {
	c := &contextReader{node: node}
	p := TargetStackProps{WorkerCodeDir: c.string(ContextWorkerCode), StackPrefix: c.string(ContextStackPrefix),
		DatabaseUserCodeDir: c.string(ContextDatabaseUserCode), CacheUserCodeDir: c.string(ContextCacheUserCode)}
	target := c.boolean(ContextTarget)
	if err := errors.Join(c.errs...); err != nil {
		return p, false, fmt.Errorf("cdk context: %w", err)
	}
	return p, target, nil
}
