package infra

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// The managed CloudFront policies the front door uses, by their ids.
const (
	cachingDisabledID = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"
	allViewerID       = "216adef6-5c7f-47e4-b989-5492eafa07d3"
)

// instancePoll and bindingPoll are the routes of the polling endpoints.
const (
	instancePoll = "GET /v2/service_instances/{instance_id}/last_operation"
	bindingPoll  = "GET /v2/service_instances/{instance_id}/service_bindings/{binding_id}/last_operation"
)

func TestPollRoutesAreThrottledApart(t *testing.T) {
	routes := resources(t, "AWS::ApiGatewayV2::Route")
	byKey := map[string]object{}
	for id, r := range routes {
		props := r["Properties"].(object)
		props["id"] = id
		byKey[props["RouteKey"].(string)] = props
	}
	t.Run("there are the catch-all route and one per polling endpoint", func(t *testing.T) {
		want := []string{"ANY /v2/{proxy+}", instancePoll, bindingPoll}
		if got := slices.Sorted(maps.Keys(byKey)); !slices.Equal(got, want) {
			t.Errorf("routes %v, want %v", got, want)
		}
	})
	t.Run("every route goes to the one integration, the api function", func(t *testing.T) {
		target := byKey["ANY /v2/{proxy+}"]["Target"]
		if target == nil {
			t.Fatal("the catch-all route has no target")
		}
		for key, props := range byKey {
			if !jsonEqual(props["Target"], target) {
				t.Errorf("%s goes to %v, not to %v", key, props["Target"], target)
			}
		}
		if n := len(resources(t, "AWS::ApiGatewayV2::Integration")); n != 1 {
			t.Errorf("%d integrations, want 1", n)
		}
	})
	stage := resource(t, "Stage")
	t.Run("each polling route has the poll throttle of its own, the others the stage's", func(t *testing.T) {
		settings, _ := stage["Properties"].(object)["RouteSettings"].(object)
		want := object{
			instancePoll: object{"ThrottlingRateLimit": 25.0, "ThrottlingBurstLimit": 50.0},
			bindingPoll:  object{"ThrottlingRateLimit": 25.0, "ThrottlingBurstLimit": 50.0},
		}
		if !jsonEqual(settings, want) {
			t.Errorf("RouteSettings %v, want %v", settings, want)
		}
	})
	t.Run("the stage is made after the routes its settings name", func(t *testing.T) {
		depends, _ := stage["DependsOn"].([]any)
		for _, key := range []string{instancePoll, bindingPoll} {
			if !slices.Contains(depends, any(byKey[key]["id"])) {
				t.Errorf("the stage does not depend on the route %s (%v): %v", key, byKey[key]["id"], depends)
			}
		}
	})
	t.Run("API Gateway may invoke the api function on every route", func(t *testing.T) {
		for id, p := range resources(t, "AWS::Lambda::Permission") {
			props := p["Properties"].(object)
			if props["Principal"] == "apigateway.amazonaws.com" && !jsonEqual(props["FunctionName"], object{"Fn::GetAtt": []any{logicalID(t, "ApiFunction"), "Arn"}}) {
				t.Errorf("permission %s is for %v", id, props["FunctionName"])
			}
		}
	})

	_, template := synthWith(t, "PollVariant", map[string]any{ContextPollRateLimit: "2.5", ContextPollBurstLimit: "5"})
	t.Run("the poll throttle comes from the context", func(t *testing.T) {
		check(t, func() {
			template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Stage"), object{
				"DefaultRouteSettings": object{"ThrottlingRateLimit": 50, "ThrottlingBurstLimit": 100},
				"RouteSettings": object{
					instancePoll: object{"ThrottlingRateLimit": 2.5, "ThrottlingBurstLimit": 5},
					bindingPoll:  object{"ThrottlingRateLimit": 2.5, "ThrottlingBurstLimit": 5},
				},
			})
		})
	})
}

func TestNoFrontDoorByDefault(t *testing.T) {
	for _, resourceType := range []string{"AWS::CloudFront::Distribution", "AWS::WAFv2::WebACL", "AWS::WAFv2::IPSet"} {
		t.Run("the stack has no "+resourceType, func(t *testing.T) {
			if n := len(resources(t, resourceType)); n != 0 {
				t.Errorf("%d of them", n)
			}
		})
	}
	t.Run("the template has no rule on the region", func(t *testing.T) {
		if rule := broker.json["Rules"].(object)["FrontDoorRegion"]; rule != nil {
			t.Errorf("rule %v", rule)
		}
	})
	t.Run("the api function is not given an origin secret, and accepts requests without one", func(t *testing.T) {
		vars := properties(t, "ApiFunction")["Environment"].(object)["Variables"].(object)
		if v, ok := vars["BROKER_ORIGIN_SECRET_ARN"]; ok {
			t.Errorf("BROKER_ORIGIN_SECRET_ARN = %v", v)
		}
	})
	t.Run("the only secret is the credentials'", func(t *testing.T) {
		if n := len(resources(t, "AWS::SecretsManager::Secret")); n != 1 {
			t.Errorf("%d secrets", n)
		}
	})
}

// frontDoorCertificate is a certificate where CloudFront takes them, which
// the front door needs (checkFrontDoor).
const frontDoorCertificate = "arn:aws:acm:us-east-1:123456789012:certificate/0d7a2a3c-1111-2222-3333-444455556666"

// frontDoorStack synthesizes the stack with the front door and extra
// context values, and returns it with its template as a Go value.
func frontDoorStack(t *testing.T, name string, extra map[string]any) (awscdk.Stack, assertions.Template, object) {
	t.Helper()
	context := map[string]any{ContextFrontDoor: "true", ContextDomainName: "broker.example.com", ContextCertificateARN: frontDoorCertificate}
	maps.Copy(context, extra)
	stack, template := synthWith(t, name, context)
	return stack, template, *template.ToJSON()
}

// only is the one resource of resourceType in template, with its logical id.
func only(t *testing.T, template object, resourceType string) (string, object) {
	t.Helper()
	var id string
	var found object
	for rid, r := range template["Resources"].(object) {
		if r.(object)["Type"] == resourceType {
			if found != nil {
				t.Fatalf("more than one %s", resourceType)
			}
			id, found = rid, r.(object)
		}
	}
	if found == nil {
		t.Fatalf("no %s", resourceType)
	}
	return id, found
}

func TestFrontDoor(t *testing.T) {
	stack, template, tj := frontDoorStack(t, "FrontDoor", map[string]any{
		ContextFrontDoorRateLimit:  "500",
		ContextFrontDoorAllowCIDRs: "203.0.113.0/24, 198.51.100.7/32,2001:db8::/32",
	})
	aclID, _ := only(t, tj, "AWS::WAFv2::WebACL")
	distID, dist := only(t, tj, "AWS::CloudFront::Distribution")
	config := dist["Properties"].(object)["DistributionConfig"].(object)
	var secretID string
	for id, r := range tj["Resources"].(object) {
		if r.(object)["Type"] == "AWS::SecretsManager::Secret" && strings.HasPrefix(id, "OriginSecret") {
			secretID = id
		}
	}
	if secretID == "" {
		t.Fatal("no OriginSecret")
	}

	tests := []struct {
		name      string
		assertion func()
	}{
		{"the distribution serves HTTPS only, every method, caches nothing and forwards every header, Host too", func() {
			template.HasResourceProperties(jsii.String("AWS::CloudFront::Distribution"), object{"DistributionConfig": assertions.Match_ObjectLike(&object{
				"DefaultCacheBehavior": assertions.Match_ObjectLike(&object{
					"ViewerProtocolPolicy":  "https-only",
					"AllowedMethods":        []any{"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "POST", "DELETE"},
					"CachePolicyId":         cachingDisabledID,
					"OriginRequestPolicyId": allViewerID,
				}),
			})})
		}},
		{"the distribution's origin is the HTTP API's custom domain, over HTTPS only (TLS 1.2), with the origin secret", func() {
			template.HasResourceProperties(jsii.String("AWS::CloudFront::Distribution"), object{"DistributionConfig": assertions.Match_ObjectLike(&object{
				"Origins": []any{assertions.Match_ObjectLike(&object{
					"DomainName": object{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^CustomDomain")), "RegionalDomainName"}},
					"CustomOriginConfig": assertions.Match_ObjectLike(&object{
						"OriginProtocolPolicy": "https-only",
						"OriginSSLProtocols":   []any{"TLSv1.2"},
					}),
					"OriginCustomHeaders": []any{object{
						"HeaderName": "X-Origin-Verify",
						"HeaderValue": object{"Fn::Join": []any{"", []any{
							"{{resolve:secretsmanager:", object{"Ref": secretID}, ":SecretString:::}}",
						}}},
					}},
					"OriginPath": assertions.Match_Absent(),
				})},
			})})
		}},
		{"the distribution is behind the stack's web ACL", func() {
			if !jsonEqual(config["WebACLId"], object{"Fn::GetAtt": []any{aclID, "Arn"}}) {
				panic("WebACLId " + jsonString(config["WebACLId"]))
			}
		}},
		{"the web ACL is CloudFront's, limits each source address and the listed ones together per 5 minutes with a 429, then allows the listed addresses only", func() {
			listed := object{"OrStatement": object{"Statements": []any{
				object{"IPSetReferenceStatement": object{"Arn": object{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^FrontDoorAllowListIPV4")), "Arn"}}}},
				object{"IPSetReferenceStatement": object{"Arn": object{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^FrontDoorAllowListIPV6")), "Arn"}}}},
			}}}
			template.HasResourceProperties(jsii.String("AWS::WAFv2::WebACL"), object{
				"Scope":         "CLOUDFRONT",
				"DefaultAction": object{"Block": object{}},
				"Rules": []any{
					assertions.Match_ObjectLike(&object{
						"Name": "RatePerSource", "Priority": 0,
						"Action":    object{"Block": object{"CustomResponse": object{"ResponseCode": 429}}},
						"Statement": object{"RateBasedStatement": object{"AggregateKeyType": "IP", "Limit": 500, "EvaluationWindowSec": 300}},
					}),
					assertions.Match_ObjectLike(&object{
						"Name": "RateAllSources", "Priority": 1,
						"Action": object{"Block": object{"CustomResponse": object{"ResponseCode": 429}}},
						// 80% of the stage's 50 requests a second over 300 s.
						"Statement": object{"RateBasedStatement": object{"AggregateKeyType": "CONSTANT", "Limit": 12000, "EvaluationWindowSec": 300,
							"ScopeDownStatement": listed}},
					}),
					assertions.Match_ObjectLike(&object{
						"Name": "PlatformAddresses", "Priority": 2,
						"Action":    object{"Allow": object{}},
						"Statement": listed,
					}),
				},
			})
		}},
		{"the HTTP API's own execute-api endpoint is turned off: it answers only through the front door", func() {
			template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Api"), object{"DisableExecuteApiEndpoint": true})
		}},
		{"the HTTP API's custom domain is the front door's name, with the same certificate, mapped to the stage", func() {
			template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::DomainName"), object{
				"DomainName":               "broker.example.com",
				"DomainNameConfigurations": []any{assertions.Match_ObjectLike(&object{"CertificateArn": frontDoorCertificate})},
			})
			template.ResourceCountIs(jsii.String("AWS::ApiGatewayV2::ApiMapping"), jsii.Number(1))
		}},
		{"the allow list's IPv4 and IPv6 networks are in an IP set each", func() {
			template.HasResourceProperties(jsii.String("AWS::WAFv2::IPSet"), object{
				"Scope": "CLOUDFRONT", "IPAddressVersion": "IPV4", "Addresses": []any{"203.0.113.0/24", "198.51.100.7/32"},
			})
			template.HasResourceProperties(jsii.String("AWS::WAFv2::IPSet"), object{
				"Scope": "CLOUDFRONT", "IPAddressVersion": "IPV6", "Addresses": []any{"2001:db8::/32"},
			})
		}},
		{"a deployment outside us-east-1, where CloudFront takes its certificate and WAF makes its web ACLs, is refused with the reason", func() {
			rules, _ := tj["Rules"].(object)
			rule, _ := rules["FrontDoorRegion"].(object)
			assertions, _ := rule["Assertions"].([]any)
			if len(assertions) != 1 {
				panic("Rules " + jsonString(tj["Rules"]))
			}
			a := assertions[0].(object)
			if !jsonEqual(a["Assert"], object{"Fn::Equals": []any{object{"Ref": "AWS::Region"}, "us-east-1"}}) ||
				!strings.Contains(a["AssertDescription"].(string), "certificateArn") {
				panic("assertion " + jsonString(a))
			}
		}},
		{"the api function is given the origin secret, and may read it", func() {
			template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), object{
				"Environment": object{"Variables": assertions.Match_ObjectLike(&object{
					"BROKER_ORIGIN_SECRET_ARN": object{"Ref": secretID},
					"BROKER_SECRET_ARN":        object{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^Credentials"))},
				})},
			})
			template.HasResourceProperties(jsii.String("AWS::IAM::Policy"), object{
				"Roles": []any{object{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^ApiRole"))}},
				"PolicyDocument": object{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&object{
					"Action": "secretsmanager:GetSecretValue", "Resource": object{"Ref": secretID},
				})})},
			})
		}},
		{"the origin secret is a 48-character header value", func() {
			template.HasResourceProperties(jsii.String("AWS::SecretsManager::Secret"), object{
				"GenerateSecretString": object{"ExcludePunctuation": true, "PasswordLength": 48},
			})
		}},
		{"the broker's URL is the front door's name, whose DNS record points at the distribution", func() {
			template.HasOutput(jsii.String(OutputBrokerURL), object{"Value": "https://broker.example.com"})
			template.HasOutput(jsii.String(OutputDomainTarget), object{"Value": object{"Fn::GetAtt": []any{distID, "DomainName"}}})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { check(t, tt.assertion) })
	}
	t.Run("cdk-nag finds nothing unsuppressed", func(t *testing.T) {
		for _, f := range nagFindings(t, stack) {
			t.Error(f)
		}
	})
	t.Run("the origin secret's value is in no template", func(t *testing.T) {
		if strings.Contains(jsonString(tj), "X-Origin-Verify\",\"HeaderValue\":\"") {
			t.Error("a header value is written out")
		}
	})
}

func TestFrontDoorVariants(t *testing.T) {
	t.Run("without an allow list, the web ACL has the rate rules only, the one for all sources counting every request, and allows the rest", func(t *testing.T) {
		_, template, tj := frontDoorStack(t, "FrontDoorOpen", map[string]any{ContextThrottleRateLimit: "20"})
		check(t, func() {
			template.HasResourceProperties(jsii.String("AWS::WAFv2::WebACL"), object{
				"DefaultAction": object{"Allow": object{}},
				"Rules": []any{assertions.Match_ObjectLike(&object{
					"Name":      "RatePerSource",
					"Statement": object{"RateBasedStatement": object{"AggregateKeyType": "IP", "Limit": 3000, "EvaluationWindowSec": 300}},
				}), assertions.Match_ObjectLike(&object{
					"Name": "RateAllSources",
					// 80% of the stage's 20 requests a second over 300 s.
					"Statement": object{"RateBasedStatement": object{"AggregateKeyType": "CONSTANT", "Limit": 4800, "EvaluationWindowSec": 300,
						"ScopeDownStatement": object{"SizeConstraintStatement": assertions.Match_ObjectLike(&object{
							"FieldToMatch": object{"UriPath": object{}}, "ComparisonOperator": "GE", "Size": 0,
						})}}},
				})},
			})
		})
		for id, r := range tj["Resources"].(object) {
			if r.(object)["Type"] == "AWS::WAFv2::IPSet" {
				t.Errorf("IP set %s", id)
			}
		}
	})
	t.Run("with a web ACL of the operator's, the stack makes none", func(t *testing.T) {
		const arn = "arn:aws:wafv2:us-east-1:123456789012:global/webacl/platform-edge/a1b2c3d4-5678-90ab-cdef-111122223333"
		stack, template, tj := frontDoorStack(t, "FrontDoorOwnAcl", map[string]any{ContextFrontDoorWebACLARN: arn})
		check(t, func() { template.ResourceCountIs(jsii.String("AWS::WAFv2::WebACL"), jsii.Number(0)) })
		check(t, func() {
			template.HasResourceProperties(jsii.String("AWS::CloudFront::Distribution"), object{"DistributionConfig": assertions.Match_ObjectLike(&object{"WebACLId": arn})})
		})
		if rule := tj["Rules"].(object)["FrontDoorRegion"]; rule == nil {
			t.Error("no rule on the region: the certificate still ties the stack to us-east-1")
		}
		for _, f := range nagFindings(t, stack) {
			t.Error(f)
		}
	})
	t.Run("the distribution serves the domain with the us-east-1 certificate and TLS 1.2", func(t *testing.T) {
		const cert = frontDoorCertificate
		stack, template, tj := frontDoorStack(t, "FrontDoorDomain", nil)
		distID, _ := only(t, tj, "AWS::CloudFront::Distribution")
		check(t, func() {
			template.HasResourceProperties(jsii.String("AWS::CloudFront::Distribution"), object{"DistributionConfig": assertions.Match_ObjectLike(&object{
				"Aliases": []any{"broker.example.com"},
				"ViewerCertificate": object{
					"AcmCertificateArn": cert, "SslSupportMethod": "sni-only", "MinimumProtocolVersion": "TLSv1.2_2021",
				},
			})})
		})
		check(t, func() { template.ResourceCountIs(jsii.String("AWS::ApiGatewayV2::DomainName"), jsii.Number(1)) })
		check(t, func() {
			template.HasOutput(jsii.String(OutputBrokerURL), object{"Value": "https://broker.example.com"})
		})
		check(t, func() {
			template.HasOutput(jsii.String(OutputDomainTarget), object{"Value": object{"Fn::GetAtt": []any{distID, "DomainName"}}})
		})
		for _, f := range nagFindings(t, stack) {
			t.Error(f)
		}
	})
	t.Run("with mutual TLS, the distribution presents the client certificate and the custom domain requires one of the truststore", func(t *testing.T) {
		const client = "arn:aws:acm:us-east-1:123456789012:certificate/11111111-2222-3333-4444-555555555555"
		stack, template, _ := frontDoorStack(t, "FrontDoorMtls", map[string]any{
			ContextFrontDoorOriginCertificateARN: client, ContextFrontDoorTruststore: "s3://platform-truststores/broker/ca.pem",
		})
		check(t, func() {
			template.HasResourceProperties(jsii.String("AWS::CloudFront::Distribution"), object{"DistributionConfig": assertions.Match_ObjectLike(&object{
				"Origins": []any{assertions.Match_ObjectLike(&object{"CustomOriginConfig": assertions.Match_ObjectLike(&object{
					"OriginMtlsConfig": object{"ClientCertificateArn": client},
				})})},
			})})
		})
		check(t, func() {
			template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::DomainName"), object{
				"DomainName":              "broker.example.com",
				"MutualTlsAuthentication": object{"TruststoreUri": "s3://platform-truststores/broker/ca.pem"},
			})
		})
		for _, f := range nagFindings(t, stack) {
			t.Error(f)
		}
	})
	t.Run("without mutual TLS, the custom domain takes any client", func(t *testing.T) {
		_, template, _ := frontDoorStack(t, "FrontDoorNoMtls", nil)
		check(t, func() {
			template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::DomainName"), object{"MutualTlsAuthentication": assertions.Match_Absent()})
		})
	})
	t.Run("with a stage of another name, the custom domain maps its root to the stage, so the distribution adds no path", func(t *testing.T) {
		_, template, _ := frontDoorStack(t, "FrontDoorStage", map[string]any{ContextStageName: "v1"})
		check(t, func() {
			template.HasResourceProperties(jsii.String("AWS::CloudFront::Distribution"), object{"DistributionConfig": assertions.Match_ObjectLike(&object{
				"Origins": []any{assertions.Match_ObjectLike(&object{"OriginPath": assertions.Match_Absent()})},
			})})
			template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::ApiMapping"), object{"Stage": "v1"})
		})
	})
}

func TestFrontDoorSettingsRejected(t *testing.T) {
	const acl = "arn:aws:wafv2:us-east-1:123456789012:global/webacl/edge/a1b2c3d4-5678-90ab-cdef-111122223333"
	tests := []struct {
		name  string
		props BrokerStackProps
		want  string
	}{
		{"an allow list without the front door is refused", BrokerStackProps{FrontDoorAllowCIDRs: []string{"203.0.113.0/24"}}, "set frontDoor=true too"},
		{"a web ACL without the front door is refused", BrokerStackProps{FrontDoorWebACLARN: acl}, "set frontDoor=true too"},
		{"a rate under WAF's 10 is refused", BrokerStackProps{FrontDoor: true, FrontDoorRateLimit: 5}, "front door rate limit 5: WAF allows 10"},
		{"a CIDR that is not one is refused", BrokerStackProps{FrontDoor: true, FrontDoorAllowCIDRs: []string{"203.0.113.0"}}, `"203.0.113.0" is not a CIDR`},
		{"a CIDR with host bits is refused, naming the network", BrokerStackProps{FrontDoor: true, FrontDoorAllowCIDRs: []string{"203.0.113.9/24"}}, "write the network, 203.0.113.0/24"},
		{"an allow list of everything is refused", BrokerStackProps{FrontDoor: true, FrontDoorAllowCIDRs: []string{"0.0.0.0/0"}}, "allows every address"},
		{"an IPv4 network written as IPv6 is refused", BrokerStackProps{FrontDoor: true, FrontDoorAllowCIDRs: []string{"::ffff:203.0.113.0/120"}}, "write it as IPv4"},
		{"a regional web ACL is refused", BrokerStackProps{FrontDoor: true,
			FrontDoorWebACLARN: "arn:aws:wafv2:eu-west-1:123456789012:regional/webacl/edge/a1b2c3d4-5678-90ab-cdef-111122223333"}, "scope CLOUDFRONT"},
		{"an allow list beside the operator's web ACL is refused", BrokerStackProps{FrontDoor: true, FrontDoorWebACLARN: acl,
			FrontDoorAllowCIDRs: []string{"203.0.113.0/24"}}, "put the allow list in your web ACL"},
		{"a certificate outside us-east-1 with the front door is refused", BrokerStackProps{FrontDoor: true, DomainName: "broker.example.com",
			CertificateARN: "arn:aws:acm:eu-west-1:123456789012:certificate/0d7a2a3c-1111-2222-3333-444455556666"}, "takes certificates from us-east-1 only"},
		{"negative poll limits are refused", BrokerStackProps{PollThrottleBurstLimit: -1}, "poll throttle"},
		{"mutual TLS settings without the front door are refused", BrokerStackProps{FrontDoorTruststore: "s3://b/ca.pem"}, "set frontDoor=true too"},
		{"a client certificate without a truststore is refused", BrokerStackProps{FrontDoor: true, FrontDoorOriginCertificateARN: frontDoorCertificate},
			"give both frontDoorOriginCertificateArn and frontDoorTruststore"},
		{"a client certificate outside us-east-1 is refused", BrokerStackProps{FrontDoor: true, FrontDoorTruststore: "s3://bucket/ca.pem",
			FrontDoorOriginCertificateARN: "arn:aws:acm:eu-west-1:123456789012:certificate/0d7a2a3c-1111-2222-3333-444455556666"}, "where CloudFront takes its client certificates"},
		{"a truststore that is not an S3 URI is refused", BrokerStackProps{FrontDoor: true, FrontDoorTruststore: "https://bucket.s3.amazonaws.com/ca.pem",
			FrontDoorOriginCertificateARN: frontDoorCertificate}, "want the S3 URI of the CA bundle"},
		{"a front door without a custom domain is refused: the execute-api endpoint would stay open", BrokerStackProps{FrontDoor: true},
			"the front door needs domainName and certificateArn"},
		{"a per-source rate over what all sources together may send is refused", BrokerStackProps{FrontDoor: true, DomainName: "broker.example.com",
			CertificateARN: frontDoorCertificate, ThrottleRateLimit: 10, FrontDoorRateLimit: 3000}, "front door rate limit 3000 per source in 5 minutes: over the 2400"},
		{"a stage throttle too low for WAF's limit on all sources is refused", BrokerStackProps{FrontDoor: true, DomainName: "broker.example.com",
			CertificateARN: frontDoorCertificate, ThrottleRateLimit: 0.01, FrontDoorRateLimit: 10}, "throttleRateLimit 0.01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.props.withDefaults()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
	t.Run("a certificate outside us-east-1 without the front door is the HTTP API's, and accepted", func(t *testing.T) {
		_, err := BrokerStackProps{DomainName: "broker.example.com",
			CertificateARN: "arn:aws:acm:eu-west-1:123456789012:certificate/0d7a2a3c-1111-2222-3333-444455556666"}.withDefaults()
		if err != nil {
			t.Error(err)
		}
	})
}

func TestFrontDoorFromContext(t *testing.T) {
	tests := []struct {
		name    string
		context map[string]any
		check   func(BrokerStackProps) bool
		wantErr string
	}{
		{"true from -c turns it on", map[string]any{ContextFrontDoor: "true"}, func(p BrokerStackProps) bool { return p.FrontDoor }, ""},
		{"true from cdk.json turns it on", map[string]any{ContextFrontDoor: true}, func(p BrokerStackProps) bool { return p.FrontDoor }, ""},
		{"false and empty leave it off", map[string]any{ContextFrontDoor: ""}, func(p BrokerStackProps) bool { return !p.FrontDoor }, ""},
		{"a word that is neither is refused", map[string]any{ContextFrontDoor: "yes"}, nil, `frontDoor: want true or false, got "yes"`},
		{"the allow list is a comma-separated list", map[string]any{ContextFrontDoorAllowCIDRs: "203.0.113.0/24, 2001:db8::/32"},
			func(p BrokerStackProps) bool {
				return slices.Equal(p.FrontDoorAllowCIDRs, []string{"203.0.113.0/24", "2001:db8::/32"})
			}, ""},
		{"the rate limit and the poll throttle are read", map[string]any{ContextFrontDoorRateLimit: "600", ContextPollRateLimit: "4", ContextPollBurstLimit: "8"},
			func(p BrokerStackProps) bool {
				return p.FrontDoorRateLimit == 600 && p.PollThrottleRateLimit == 4 && p.PollThrottleBurstLimit == 8
			}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := awscdk.NewApp(&awscdk.AppProps{Context: &tt.context})
			p, err := PropsFromContext(app.Node())
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %v, want one saying %q", err, tt.wantErr)
				}
			case err != nil:
				t.Errorf("error %v", err)
			case !tt.check(p):
				t.Errorf("props %+v", p)
			}
		})
	}
}
