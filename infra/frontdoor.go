package infra

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscertificatemanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudfront"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudfrontorigins"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awswafv2"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/env"
)

// cloudFrontRegion is where CloudFront takes its certificates from and
// where a web ACL of scope CLOUDFRONT must be made.
const cloudFrontRegion = "us-east-1"

// The web ACL's rules, as WAF's metrics and sampled requests name them.
const (
	wafRuleRate      = "RatePerSource"
	wafRuleRateAll   = "RateAllSources"
	wafRuleAllowList = "PlatformAddresses"
)

// wafRateWindowSeconds is the window the rate rules count requests over.
const wafRateWindowSeconds = 300

// wafStageShare is the share of the stage's throttle that the web ACL lets
// through from all sources together: WAF counts with a delay of some
// seconds, so the rule must trip before the stage's throttle would.
const wafStageShare = 0.8

// frontDoorTotalLimit is the limit of the rule keyed on the whole web ACL
// (AggregateKeyType CONSTANT): the requests of all sources together in
// WAF's 5-minute window, under what the stage's default route throttle
// serves in that window. The arithmetic: throttleRateLimit requests a
// second × 300 seconds × 0.8; the default 50/s gives 15,000 a window at the
// stage and 12,000 at the web ACL. The burst is left out: it is a bucket
// the steady rate refills, not a rate of its own.
func frontDoorTotalLimit(p BrokerStackProps) int {
	return int(p.ThrottleRateLimit * wafRateWindowSeconds * wafStageShare)
}

// WAF's bounds on a rate-based rule's limit.
const (
	minFrontDoorRateLimit = 10
	maxFrontDoorRateLimit = 2_000_000_000
)

// cloudFrontWebACLARN is the ARN of a web ACL of scope CLOUDFRONT, which
// WAF makes in us-east-1 and names global.
var cloudFrontWebACLARN = regexp.MustCompile(`^arn:aws[a-z-]*:wafv2:us-east-1:[0-9]{12}:global/webacl/[A-Za-z0-9_-]+/[a-f0-9-]+$`)

// checkFrontDoor checks the front door's settings: none of them without
// it, CIDRs WAF takes, a rate WAF allows, a web ACL of the operator's that
// CloudFront can use (and no stack settings for a web ACL the stack does
// not make), and a custom domain's certificate where CloudFront takes it.
func checkFrontDoor(p BrokerStackProps) []error {
	var errs []error
	if !p.FrontDoor {
		if len(p.FrontDoorAllowCIDRs) > 0 || p.FrontDoorWebACLARN != "" || p.FrontDoorOriginCertificateARN != "" || p.FrontDoorTruststore != "" {
			errs = append(errs, fmt.Errorf("%s, %s, %s and %s configure the front door: set %s=true too, or leave them empty",
				ContextFrontDoorAllowCIDRs, ContextFrontDoorWebACLARN, ContextFrontDoorOriginCertificateARN, ContextFrontDoorTruststore, ContextFrontDoor))
		}
		return errs
	}
	errs = append(errs, checkOriginMTLS(p)...)
	if p.FrontDoorRateLimit < minFrontDoorRateLimit || p.FrontDoorRateLimit > maxFrontDoorRateLimit {
		errs = append(errs, fmt.Errorf("front door rate limit %d: WAF allows %d to %d requests per source in 5 minutes",
			p.FrontDoorRateLimit, minFrontDoorRateLimit, maxFrontDoorRateLimit))
	}
	if p.DomainName == "" || p.CertificateARN == "" {
		errs = append(errs, fmt.Errorf("the front door needs %s and %s (its certificate in %s): the HTTP API's own execute-api endpoint "+
			"is turned off behind it, so CloudFront reaches the API at its custom domain, which exists only with them; "+
			"without, the execute-api endpoint would stay open around the web ACL", ContextDomainName, ContextCertificateARN, cloudFrontRegion))
	}
	if p.FrontDoorWebACLARN == "" {
		total := frontDoorTotalLimit(p)
		switch {
		case total < minFrontDoorRateLimit || total > maxFrontDoorRateLimit:
			errs = append(errs, fmt.Errorf("%s %v: the front door limits all sources together to %v%% of it over 5 minutes (%d), which WAF cannot take (%d to %d)",
				ContextThrottleRateLimit, p.ThrottleRateLimit, wafStageShare*100, total, minFrontDoorRateLimit, maxFrontDoorRateLimit))
		case p.FrontDoorRateLimit > total:
			errs = append(errs, fmt.Errorf("front door rate limit %d per source in 5 minutes: over the %d that all sources together may send "+
				"(%v%% of the stage's %s %v/s over 5 minutes), so one source could use up the stage's throttle: lower %s or raise %s",
				p.FrontDoorRateLimit, total, wafStageShare*100, ContextThrottleRateLimit, p.ThrottleRateLimit, ContextFrontDoorRateLimit, ContextThrottleRateLimit))
		}
	}
	for _, cidr := range p.FrontDoorAllowCIDRs {
		if _, err := allowedPrefix(cidr); err != nil {
			errs = append(errs, fmt.Errorf("front door allow list: %w", err))
		}
	}
	if p.FrontDoorWebACLARN != "" {
		if !cloudFrontWebACLARN.MatchString(p.FrontDoorWebACLARN) {
			errs = append(errs, fmt.Errorf("front door web ACL %q: want the ARN of a web ACL of scope CLOUDFRONT, "+
				"arn:aws:wafv2:us-east-1:ACCOUNT:global/webacl/NAME/ID", p.FrontDoorWebACLARN))
		}
		if len(p.FrontDoorAllowCIDRs) > 0 {
			errs = append(errs, fmt.Errorf("%s: the stack makes no web ACL when %s names yours: put the allow list in your web ACL",
				ContextFrontDoorAllowCIDRs, ContextFrontDoorWebACLARN))
		}
	}
	if p.CertificateARN != "" && certificateARNPattern.MatchString(p.CertificateARN) {
		if region := strings.Split(p.CertificateARN, ":")[3]; region != cloudFrontRegion {
			errs = append(errs, fmt.Errorf("certificate ARN %q: with the front door, %s is served by CloudFront, "+
				"which takes certificates from %s only: request or import one there", p.CertificateARN, p.DomainName, cloudFrontRegion))
		}
	}
	return errs
}

// truststoreURI is an S3 object's URI, as API Gateway takes a truststore.
var truststoreURI = regexp.MustCompile(`^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(.+)$`)

// checkOriginMTLS checks the settings of mutual TLS between the front door
// and the API: both or neither, a client certificate where CloudFront takes
// it, a truststore API Gateway can read.
func checkOriginMTLS(p BrokerStackProps) []error {
	var errs []error
	cert, store := p.FrontDoorOriginCertificateARN, p.FrontDoorTruststore
	switch {
	case cert == "" && store == "":
	case cert == "" || store == "":
		errs = append(errs, fmt.Errorf("mutual TLS to the origin: give both %s and %s (have %q and %q)",
			ContextFrontDoorOriginCertificateARN, ContextFrontDoorTruststore, cert, store))
	default:
		if !certificateARNPattern.MatchString(cert) || strings.Split(cert, ":")[3] != cloudFrontRegion {
			errs = append(errs, fmt.Errorf("%s %q: want an ACM certificate's ARN in %s, where CloudFront takes its client certificates",
				ContextFrontDoorOriginCertificateARN, cert, cloudFrontRegion))
		}
		if !truststoreURI.MatchString(store) {
			errs = append(errs, fmt.Errorf("%s %q: want the S3 URI of the CA bundle (PEM) API Gateway checks the client certificate with, s3://BUCKET/KEY",
				ContextFrontDoorTruststore, store))
		}
	}
	return errs
}

// allowedPrefix parses one CIDR of the allow list as WAF takes it: an IPv4
// or IPv6 network, in its canonical form, narrower than everything (/0).
func allowedPrefix(cidr string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(cidr)
	switch {
	case err != nil:
		return p, fmt.Errorf("%q is not a CIDR such as 203.0.113.0/24 or 2001:db8::/32", cidr)
	case p.Addr().Is4In6():
		return p, fmt.Errorf("%q is an IPv4 network written as IPv6: write it as IPv4", cidr)
	case p.Bits() == 0:
		return p, fmt.Errorf("%q allows every address: WAF refuses /0, and an allow list of everything is none (leave %s empty)", cidr, ContextFrontDoorAllowCIDRs)
	case p != p.Masked():
		return p, fmt.Errorf("%q has host bits set: write the network, %s", cidr, p.Masked())
	}
	return p, nil
}

// frontDoor defines, when the props ask for it, the CloudFront
// distribution in front of the HTTP API, its web ACL (or the operator's),
// and the origin secret that the distribution adds to every request and
// that the api function requires (env.OriginSecretARN).
func (b *builder) frontDoor() {
	if !b.props.FrontDoor {
		return
	}
	b.originSecret = awssecretsmanager.NewSecret(b.stack, jsii.String("OriginSecret"), &awssecretsmanager.SecretProps{
		Description: jsii.String("The value the broker's front door (CloudFront) sends in " + deploy.HeaderOriginVerify +
			"; the api function refuses every request without it."),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			// A header value: letters and digits only.
			ExcludePunctuation: jsii.Bool(true),
			PasswordLength:     jsii.Number(48),
		},
	})
	b.api.AddEnvironment(jsii.String(env.OriginSecretARN), b.originSecret.SecretArn(), nil)

	awscdk.NewCfnRule(b.stack, jsii.String("FrontDoorRegion"), &awscdk.CfnRuleProps{
		Assertions: &[]*awscdk.CfnRuleAssertion{{
			Assert: awscdk.Fn_ConditionEquals(awscdk.Aws_REGION(), jsii.String(cloudFrontRegion)),
			AssertDescription: jsii.String("The front door's certificate (" + ContextCertificateARN + ") serves CloudFront, which takes it from " +
				cloudFrontRegion + " only, and the HTTP API's custom domain, which takes it from the stack's region only; and the stack's web ACL " +
				"(scope CLOUDFRONT, unless " + ContextFrontDoorWebACLARN + " names yours) can only be made there: deploy this stack in " + cloudFrontRegion + "."),
		}},
	})
	webACL := b.props.FrontDoorWebACLARN
	if webACL == "" {
		webACL = *b.webACL().AttrArn()
	}
	// The origin is the API's custom domain (its regional endpoint, mapped
	// to the stage), not the execute-api endpoint, which is turned off: an
	// HTTP API takes no web ACL, so an endpoint that stayed open would let
	// anyone around the web ACL's rate rules use up the stage's throttle.
	// CloudFront forwards the viewer's Host, the domain name, and sends it
	// as the TLS server name too, which is how API Gateway finds the domain.
	origin := awscloudfrontorigins.NewHttpOrigin(b.customDomain().RegionalDomainName(), &awscloudfrontorigins.HttpOriginProps{
		ProtocolPolicy:     awscloudfront.OriginProtocolPolicy_HTTPS_ONLY,
		OriginSslProtocols: &[]awscloudfront.OriginSslPolicy{awscloudfront.OriginSslPolicy_TLS_V1_2},
		// A dynamic reference: CloudFormation resolves it at deployment, and
		// the value is in no template.
		CustomHeaders: &map[string]*string{deploy.HeaderOriginVerify: b.originSecret.SecretValue().UnsafeUnwrap()},
	})
	props := &awscloudfront.DistributionProps{
		Comment: jsii.String("The front door of the broker " + *b.stack.StackName() + ": WAF, then the HTTP API."),
		DefaultBehavior: &awscloudfront.BehaviorOptions{
			Origin:               origin,
			ViewerProtocolPolicy: awscloudfront.ViewerProtocolPolicy_HTTPS_ONLY,
			AllowedMethods:       awscloudfront.AllowedMethods_ALLOW_ALL(),
			// Nothing is cached: every OSB answer is the broker's state now.
			// With caching disabled, the origin request policy forwards the
			// Authorization header too, and Host, the custom domain's name.
			CachePolicy:         awscloudfront.CachePolicy_CACHING_DISABLED(),
			OriginRequestPolicy: awscloudfront.OriginRequestPolicy_ALL_VIEWER(),
			Compress:            jsii.Bool(false),
		},
		HttpVersion: awscloudfront.HttpVersion_HTTP2_AND_3,
		WebAclId:    &webACL,
	}
	props.DomainNames = &[]*string{jsii.String(b.props.DomainName)}
	props.Certificate = awscertificatemanager.Certificate_FromCertificateArn(b.stack, jsii.String("FrontDoorCertificate"), jsii.String(b.props.CertificateARN))
	props.MinimumProtocolVersion = awscloudfront.SecurityPolicyProtocol_TLS_V1_2_2021
	b.distribution = awscloudfront.NewDistribution(b.stack, jsii.String("FrontDoor"), props)
	if cert := b.props.FrontDoorOriginCertificateARN; cert != "" {
		// The L2 origin has no property for it yet.
		b.distribution.Node().DefaultChild().(awscloudfront.CfnDistribution).AddPropertyOverride(
			jsii.String("DistributionConfig.Origins.0.CustomOriginConfig.OriginMtlsConfig.ClientCertificateArn"), cert)
	}
}

// webACL defines the front door's web ACL (scope CLOUDFRONT): a rate-based
// rule per source address, one for all sources together under the stage's
// throttle, then, with an allow list, only those addresses.
func (b *builder) webACL() awswafv2.CfnWebACL {
	visibility := func(name string) *awswafv2.CfnWebACL_VisibilityConfigProperty {
		return &awswafv2.CfnWebACL_VisibilityConfigProperty{
			CloudWatchMetricsEnabled: jsii.Bool(true),
			MetricName:               jsii.String(name),
			SampledRequestsEnabled:   jsii.Bool(true),
		}
	}
	// 429, as API Gateway's own throttle answers: platforms retry it.
	tooMany := &awswafv2.CfnWebACL_RuleActionProperty{Block: &awswafv2.CfnWebACL_BlockActionProperty{
		CustomResponse: &awswafv2.CfnWebACL_CustomResponseProperty{ResponseCode: jsii.Number(429)},
	}}
	var allowed any // the allow list's statement, or nil
	if sets := b.allowListSets(); len(sets) > 0 {
		var statements []any
		for _, set := range sets {
			statements = append(statements, &awswafv2.CfnWebACL_StatementProperty{
				IpSetReferenceStatement: &awswafv2.CfnWebACL_IPSetReferenceStatementProperty{Arn: set.AttrArn()},
			})
		}
		allowed = statements[0]
		if len(statements) > 1 {
			allowed = &awswafv2.CfnWebACL_StatementProperty{OrStatement: &awswafv2.CfnWebACL_OrStatementProperty{Statements: &statements}}
		}
	}
	// WAF counts a CONSTANT rule's requests by its scope-down statement,
	// which it requires: the listed addresses, or every request (a URI
	// path of 0 bytes or more).
	counted := allowed
	if counted == nil {
		counted = &awswafv2.CfnWebACL_StatementProperty{SizeConstraintStatement: &awswafv2.CfnWebACL_SizeConstraintStatementProperty{
			FieldToMatch:        &awswafv2.CfnWebACL_FieldToMatchProperty{UriPath: map[string]any{}},
			ComparisonOperator:  jsii.String("GE"),
			Size:                jsii.Number(0),
			TextTransformations: &[]any{&awswafv2.CfnWebACL_TextTransformationProperty{Priority: jsii.Number(0), Type: jsii.String("NONE")}},
		}}
	}
	rules := []any{&awswafv2.CfnWebACL_RuleProperty{
		Name:     jsii.String(wafRuleRate),
		Priority: jsii.Number(0),
		Action:   tooMany,
		Statement: &awswafv2.CfnWebACL_StatementProperty{RateBasedStatement: &awswafv2.CfnWebACL_RateBasedStatementProperty{
			AggregateKeyType:    jsii.String("IP"),
			Limit:               jsii.Number(b.props.FrontDoorRateLimit),
			EvaluationWindowSec: jsii.Number(wafRateWindowSeconds),
		}},
		VisibilityConfig: visibility(wafRuleRate),
	}, &awswafv2.CfnWebACL_RuleProperty{
		// All sources together, under the stage's throttle: many sources,
		// each under its own limit, cannot use up what the platform needs.
		// With an allow list, only the listed addresses count, so that
		// traffic the list blocks cannot use up the platform's share.
		Name:     jsii.String(wafRuleRateAll),
		Priority: jsii.Number(1),
		Action:   tooMany,
		Statement: &awswafv2.CfnWebACL_StatementProperty{RateBasedStatement: &awswafv2.CfnWebACL_RateBasedStatementProperty{
			AggregateKeyType:    jsii.String("CONSTANT"),
			Limit:               jsii.Number(frontDoorTotalLimit(b.props)),
			EvaluationWindowSec: jsii.Number(wafRateWindowSeconds),
			ScopeDownStatement:  counted,
		}},
		VisibilityConfig: visibility(wafRuleRateAll),
	}}
	defaultAction := &awswafv2.CfnWebACL_DefaultActionProperty{Allow: &awswafv2.CfnWebACL_AllowActionProperty{}}
	if allowed != nil {
		statement := allowed
		rules = append(rules, &awswafv2.CfnWebACL_RuleProperty{
			Name:             jsii.String(wafRuleAllowList),
			Priority:         jsii.Number(2),
			Action:           &awswafv2.CfnWebACL_RuleActionProperty{Allow: &awswafv2.CfnWebACL_AllowActionProperty{}},
			Statement:        statement,
			VisibilityConfig: visibility(wafRuleAllowList),
		})
		defaultAction = &awswafv2.CfnWebACL_DefaultActionProperty{Block: &awswafv2.CfnWebACL_BlockActionProperty{}}
	}
	return awswafv2.NewCfnWebACL(b.stack, jsii.String("FrontDoorWebAcl"), &awswafv2.CfnWebACLProps{
		Description:      jsii.String("The broker front door: a rate limit per source address and one for all, then the listed platform addresses only, if any."),
		Scope:            jsii.String("CLOUDFRONT"),
		DefaultAction:    defaultAction,
		Rules:            &rules,
		VisibilityConfig: visibility(*b.stack.StackName() + "-FrontDoor"),
	})
}

// allowListSets are the IP sets of the allow list, one per IP version it
// holds (WAF keeps the versions apart), or none.
func (b *builder) allowListSets() []awswafv2.CfnIPSet {
	byVersion := map[string][]*string{}
	for _, cidr := range b.props.FrontDoorAllowCIDRs {
		p, _ := allowedPrefix(cidr) // checked by withDefaults
		version := "IPV4"
		if p.Addr().Is6() {
			version = "IPV6"
		}
		byVersion[version] = append(byVersion[version], jsii.String(p.String()))
	}
	var sets []awswafv2.CfnIPSet
	for _, version := range []string{"IPV4", "IPV6"} {
		addresses := byVersion[version]
		if len(addresses) == 0 {
			continue
		}
		sets = append(sets, awswafv2.NewCfnIPSet(b.stack, jsii.String("FrontDoorAllowList"+version), &awswafv2.CfnIPSetProps{
			// WAF allows letters, digits, spaces and =:#@/-,. only.
			Description:      jsii.String("The addresses the broker front door serves, from " + ContextFrontDoorAllowCIDRs + "."),
			Scope:            jsii.String("CLOUDFRONT"),
			IpAddressVersion: jsii.String(version),
			Addresses:        &addresses,
		}))
	}
	return sets
}
