package infra

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/serverless-osb/broker/infra/servicerole"
	"github.com/serverless-osb/broker/internal/deploy"
)

// The reasons of the cdk-nag findings the stack keeps, each suppressed on
// the construct it is about and, for wildcards, on exactly the wildcard
// resources it names (appliesTo).
const (
	reasonXRay = "X-Ray's PutTraceSegments and PutTelemetryRecords (and, for Step Functions, GetSamplingRules and " +
		"GetSamplingTargets) support no resource-level permissions: IAM only grants them on \"*\" " +
		"(https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsx-ray.html)."
	reasonLogDelivery = "Step Functions' logging to CloudWatch Logs uses the log delivery actions (CreateLogDelivery, " +
		"GetLogDelivery, UpdateLogDelivery, DeleteLogDelivery, ListLogDeliveries, PutResourcePolicy, " +
		"DescribeResourcePolicies, DescribeLogGroups), which support no resource-level permissions: IAM only grants them " +
		"on \"*\" (https://docs.aws.amazon.com/step-functions/latest/dg/cw-logs.html)."
	reasonExecutions = "DescribeExecution and StopExecution act on executions, whose names (the operation ids, and the " +
		"detached resources' ids with the attempt) are made at run time; the resource is every execution of one of this " +
		"stack's state machines and nothing else."
	reasonWorkerVersions = "The worker's qualified ARNs (function:NAME:VERSION or :ALIAS), should a workflow name a version; " +
		"the resource is this one function and nothing else."
	reasonOperatorPolicies = "An AWS managed policy the operator attached to the CloudFormation service role with the " +
		"serviceRolePolicyArns context value, for a service whose template needs more than the example services."
	reasonRotation = "The password is what the platform (Cloud Foundry, SAP BTP, ...) registered the broker with: " +
		"a scheduled rotation would lock the platform out until someone updated the registration. It is rotated by " +
		"hand, together with the registration (cf update-service-broker)."
	reasonAuthorization = "OSB authenticates the platform with HTTP basic auth (OSB API spec, Platform to Service Broker " +
		"Authentication), which HTTP API authorizers do not offer; the api function checks the credentials of every " +
		"request against the secret, in constant time, before anything else."
	reasonOriginSecretRotation = "CloudFront sends the value as a custom origin header, which CloudFormation resolves " +
		"only when it updates the distribution: a scheduled rotation would leave the front door sending the old value, " +
		"and the api function refusing every request. It is rotated by hand: put a new value, then update the stack and " +
		"let the api containers be replaced."
	reasonGeoRestriction = "Platforms (Cloud Foundry, SAP BTP, Kubernetes) call the broker from wherever they run; the " +
		"web ACL's allow list (frontDoorAllowCidrs) limits the callers by address, which is narrower than by country."
	reasonFrontDoorLogs = "Every request the front door forwards is in the HTTP API's JSON access log; the ones the web " +
		"ACL blocks are counted in its CloudWatch metrics and sampled by WAF. A CloudFront log bucket would add a " +
		"standing S3 bucket and its own access logs for nothing more."
	reasonTemplateBucketLogs = "The bucket holds only the service stacks' templates over 51,200 bytes, which the worker " +
		"writes and CloudFormation reads with the worker's credentials; CloudTrail records both calls, and server " +
		"access logs would need a standing log bucket of their own."
	reasonDefaultCertificate = "Without a custom domain the distribution serves *.cloudfront.net with CloudFront's " +
		"default certificate, whose minimum protocol CloudFront fixes (TLSv1); with domainName and certificateArn the " +
		"stack sets TLSv1.2_2021."
)

// suppressNagFindings records, on each construct, why the AwsSolutions
// findings that remain are how this stack must be.
func (b *builder) suppressNagFindings() {
	star := "Resource::*"
	for _, role := range []constructs.IConstruct{b.apiRole, b.workerRole} {
		suppress(role, rule("AwsSolutions-IAM5", reasonXRay, star))
	}
	var executions []any
	for _, m := range b.machines {
		executions = append(executions, "Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:"+m.name+":*")
	}
	for _, role := range []constructs.IConstruct{b.apiRole, b.workerRole} {
		suppress(role, rule("AwsSolutions-IAM5", reasonExecutions, executions...))
	}
	for _, m := range b.machines {
		suppress(m.machine.Role(),
			rule("AwsSolutions-IAM5", reasonXRay+" "+reasonLogDelivery, star),
			rule("AwsSolutions-IAM5", reasonWorkerVersions,
				"Resource::<"+*b.stack.GetLogicalId(b.worker.Node().DefaultChild().(awscdk.CfnElement))+".Arn>:*"))
	}
	b.suppressDeclaredWildcards()
	if b.serviceRole != nil {
		b.suppressServiceRoleWildcards()
	}
	if b.templateBucket != nil {
		suppress(b.templateBucket, rule("AwsSolutions-S1", reasonTemplateBucketLogs))
	}
	suppress(b.secret, rule("AwsSolutions-SMG4", reasonRotation))
	for _, route := range append([]awsapigatewayv2.HttpRoute{b.route}, b.pollRoutes...) {
		suppress(route, rule("AwsSolutions-APIG4", reasonAuthorization))
	}
	if b.distribution != nil {
		suppress(b.originSecret, rule("AwsSolutions-SMG4", reasonOriginSecretRotation))
		rules := []*cdknag.NagPackSuppression{rule("AwsSolutions-CFR1", reasonGeoRestriction), rule("AwsSolutions-CFR3", reasonFrontDoorLogs)}
		if b.props.DomainName == "" {
			rules = append(rules, rule("AwsSolutions-CFR4", reasonDefaultCertificate))
		}
		suppress(b.distribution, rules...)
	}
}

// suppressDeclaredWildcards suppresses AwsSolutions-IAM5 on the wildcard
// resources of the statements the drivers declared, each with the reason
// its declaration gives.
func (b *builder) suppressDeclaredWildcards() {
	nag := map[string]string{deploy.Partition: "<AWS::Partition>", deploy.Region: "<AWS::Region>",
		deploy.Account: "<AWS::AccountId>", deploy.StackPrefix: b.props.StackPrefix}
	if b.templateBucket != nil {
		nag[deploy.TemplateBucketARN] = "<" + *b.stack.GetLogicalId(b.templateBucket.Node().DefaultChild().(awscdk.CfnElement)) + ".Arn>"
	}
	roles := map[deploy.Function]awsiam.Role{deploy.API: b.apiRole, deploy.Worker: b.workerRole}
	for _, d := range b.needs.Drivers {
		for _, s := range d.Needs.Statements {
			var wildcards []any
			for _, r := range s.Resources {
				if strings.Contains(r, "*") {
					wildcards = append(wildcards, "Resource::"+deploy.Fill(r, nag))
				}
			}
			if len(wildcards) > 0 {
				suppress(roles[s.Function], rule("AwsSolutions-IAM5", s.WildcardReason, wildcards...))
			}
		}
	}
}

// suppressServiceRoleWildcards records why the service role's and its
// boundary's wildcards are as they are.
func (b *builder) suppressServiceRoleWildcards() {
	suppress(b.boundary, wildcardRules(servicerole.Boundary(b.props.StackPrefix))...)
	serviceRole := wildcardRules(b.serviceRoleStatements(nil))
	var awsManaged []any
	for _, arn := range b.props.ServiceRolePolicyARNs {
		if strings.Contains(arn, ":iam::aws:policy/") {
			awsManaged = append(awsManaged, "Policy::"+arn)
		}
	}
	if len(awsManaged) > 0 {
		serviceRole = append(serviceRole, rule("AwsSolutions-IAM4", reasonOperatorPolicies, awsManaged...))
	}
	suppress(b.serviceRole, serviceRole...)
	for _, p := range b.serviceRoleGrants {
		suppress(p, wildcardRules(b.serviceRoleStatements(nil))...)
	}
}

// ignoreRedundantRoleDependency tells cfn-lint not to warn (W3005) that
// resource both depends on its role and names it with GetAtt: CDK's
// Function and StateMachine add the DependsOn, which they need for the
// role's DefaultPolicy, at synthesis, past where the stack could take the
// role's half out; it is harmless.
func ignoreRedundantRoleDependency(resource constructs.IConstruct) {
	resource.Node().DefaultChild().(awscdk.CfnResource).AddMetadata(jsii.String("cfn-lint"), map[string]any{
		"config": map[string]any{"ignore_checks": []string{"W3005"}},
	})
}

// wildcardRules suppress AwsSolutions-IAM5 on the wildcard resources of
// the Allow statements, each with its statement's reason.
func wildcardRules(statements []servicerole.Statement) []*cdknag.NagPackSuppression {
	var rules []*cdknag.NagPackSuppression
	for _, s := range statements {
		if s.Deny {
			continue
		}
		var wildcards []any
		if s.Everywhere {
			wildcards = append(wildcards, "Resource::*")
		}
		for _, r := range s.Resources {
			if strings.Contains(r.Resource, "*") {
				wildcards = append(wildcards, r.Nag())
			}
		}
		if len(wildcards) > 0 {
			rules = append(rules, rule("AwsSolutions-IAM5", s.Sid+": "+s.Reason, wildcards...))
		}
	}
	return rules
}

func rule(id, reason string, appliesTo ...any) *cdknag.NagPackSuppression {
	s := &cdknag.NagPackSuppression{Id: &id, Reason: &reason}
	if len(appliesTo) > 0 {
		s.AppliesTo = &appliesTo
	}
	return s
}

// suppress suppresses rules on c and its children: a role's findings are
// about its DefaultPolicy.
func suppress(c constructs.IConstruct, rules ...*cdknag.NagPackSuppression) {
	cdknag.NagSuppressions_AddResourceSuppressions(c, &rules, jsii.Bool(true))
}
