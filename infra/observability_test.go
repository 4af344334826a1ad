package infra

import (
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/env"
)

// brokerAlarmIDs are the alarms on the broker's own metrics.
var brokerAlarmIDs = []string{"OperationsFailedAlarm", "StuckOperationsAlarm", "DetachedResourcesAlarm"}

// joined is a Fn::Join's literal parts, concatenated: enough to read what
// a dashboard's body says.
func joined(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case object:
		if j, ok := x["Fn::Join"].([]any); ok {
			var b strings.Builder
			for _, part := range j[1].([]any) {
				b.WriteString(joined(part))
			}
			return b.String()
		}
	}
	return ""
}

func TestStackDashboard(t *testing.T) {
	dashboards := resources(t, "AWS::CloudWatch::Dashboard")
	if len(dashboards) != 1 {
		t.Fatalf("%d dashboards, want 1", len(dashboards))
	}
	var body string
	for _, d := range dashboards {
		props := d["Properties"].(object)
		if props["DashboardName"] != "ServerlessOsb" {
			t.Errorf("DashboardName %v, want the stack's name", props["DashboardName"])
		}
		body = joined(props["DashboardBody"])
	}
	tests := []struct {
		name string
		want []string
	}{
		{"it shows operations started, succeeded and failed, in the stack's namespace", []string{
			`"ServerlessOsb","OperationStarted"`, `"ServerlessOsb","OperationSucceeded"`, `"ServerlessOsb","OperationFailed"`}},
		{"it breaks operations down by service, plan and kind", []string{
			`SEARCH('{ServerlessOsb,Service,Plan,Kind} MetricName=\"OperationFailed\"', 'Sum', 300)`,
			`SEARCH('{ServerlessOsb,Service,Plan,Kind} MetricName=\"OperationStarted\"', 'Sum', 300)`}},
		{"it shows the operations' duration", []string{`"OperationDuration"`, `"stat":"p90"`}},
		{"it shows the last_operation polls", []string{`"LastOperationPolls"`}},
		{"it shows what the reaper did and the cleanups given up", []string{
			`"ReaperRestarted"`, `"ReaperFailed"`, `"ReaperTimedOut"`, `"ReaperCleanupsStarted"`, `"CleanupFailed"`}},
		{"it shows the detached resources waiting and the operations in progress", []string{`"DetachedResources"`, `"OperationsInProgress"`}},
		{"it shows the HTTP API's requests, errors and latency", []string{`"AWS/ApiGateway","Count"`, `"AWS/ApiGateway","5xx"`, `"AWS/ApiGateway","Latency"`}},
		{"it shows the functions' invocations, errors, throttles and duration", []string{
			`"AWS/Lambda","Invocations"`, `"AWS/Lambda","Errors"`, `"AWS/Lambda","Throttles"`, `"AWS/Lambda","Duration"`}},
		{"it shows the workflows' executions", []string{`"AWS/States","ExecutionsStarted"`, `"AWS/States","ExecutionsFailed"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, w := range tt.want {
				if !strings.Contains(body, w) {
					t.Errorf("the dashboard's body does not hold %s", w)
				}
			}
		})
	}
}

func TestStackBrokerMetrics(t *testing.T) {
	t.Run("both functions put their metrics in the stack's namespace", func(t *testing.T) {
		for _, fn := range []string{"ApiFunction", "WorkerFunction"} {
			vars := properties(t, fn)["Environment"].(object)["Variables"].(object)
			if vars[env.MetricsNamespace] != "ServerlessOsb" {
				t.Errorf("%s: %s = %v, want ServerlessOsb", fn, env.MetricsNamespace, vars[env.MetricsNamespace])
			}
		}
	})
	alarms := []struct {
		name      string
		id        string
		props     object
		describes string
	}{
		{"a failed operation alarms", "OperationsFailedAlarm", object{
			"Namespace": "ServerlessOsb", "MetricName": "OperationFailed", "Statistic": "Sum", "Period": 300,
			"Threshold": 1, "EvaluationPeriods": 1, "Dimensions": assertions.Match_Absent(),
		}, "last_operation"},
		{"an operation the reaper found stuck alarms", "StuckOperationsAlarm", object{
			"Metrics":   assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&object{"Expression": "failed + timedOut"})}),
			"Threshold": 1, "EvaluationPeriods": 1,
		}, "ops --stack ServerlessOsb operations"},
		{"a detached resource waiting for 6 hours alarms", "DetachedResourcesAlarm", object{
			"Namespace": "ServerlessOsb", "MetricName": "DetachedResources", "Statistic": "Minimum", "Period": 3600,
			"Threshold": 1, "EvaluationPeriods": 6,
		}, "ops --stack ServerlessOsb detached"},
	}
	for _, tt := range alarms {
		t.Run(tt.name, func(t *testing.T) {
			check(t, func() {
				broker.template.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), assertions.Match_ObjectLike(&tt.props))
			})
			if d, _ := properties(t, tt.id)["AlarmDescription"].(string); !strings.Contains(d, tt.describes) {
				t.Errorf("AlarmDescription %q does not say %q", d, tt.describes)
			}
		})
	}
	t.Run("the stuck operations alarm sums the reaper's failed and stopped operations", func(t *testing.T) {
		got := map[string]string{}
		for _, m := range properties(t, "StuckOperationsAlarm")["Metrics"].([]any) {
			if stat, ok := m.(object)["MetricStat"].(object); ok {
				got[m.(object)["Id"].(string)] = stat["Metric"].(object)["MetricName"].(string)
			}
		}
		if got["failed"] != "ReaperFailed" || got["timedOut"] != "ReaperTimedOut" {
			t.Errorf("metrics %v, want failed=ReaperFailed and timedOut=ReaperTimedOut", got)
		}
	})
}

func TestStackAlarmTopic(t *testing.T) {
	topic := object{"Ref": logicalID(t, "AlarmTopic")}
	tests := []struct {
		name      string
		assertion func()
	}{
		{"the stack makes a topic, encrypted with its own rotating key", func() {
			broker.template.HasResourceProperties(jsii.String("AWS::SNS::Topic"), object{
				"KmsMasterKeyId": object{"Fn::GetAtt": []any{logicalID(t, "AlarmTopicKey"), "Arn"}},
			})
			broker.template.HasResourceProperties(jsii.String("AWS::KMS::Key"), object{
				"Description":       assertions.Match_StringLikeRegexp(jsii.String("alarm")),
				"EnableKeyRotation": true,
			})
		}},
		{"CloudWatch may use the key to publish", func() {
			broker.template.HasResourceProperties(jsii.String("AWS::KMS::Key"), object{
				"KeyPolicy": object{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&object{
					"Effect": "Allow", "Principal": object{"Service": "cloudwatch.amazonaws.com"},
					"Action": []any{"kms:Decrypt", "kms:GenerateDataKey*"}, "Resource": "*",
				})})},
			})
		}},
		{"the topic refuses requests without TLS", func() {
			broker.template.HasResourceProperties(jsii.String("AWS::SNS::TopicPolicy"), object{
				"Topics": []any{topic},
				"PolicyDocument": object{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&object{
					"Effect": "Deny", "Condition": object{"Bool": object{"aws:SecureTransport": "false"}},
				})})},
			})
		}},
		{"every alarm notifies the topic when it fires and when it recovers", func() {
			broker.template.AllResourcesProperties(jsii.String("AWS::CloudWatch::Alarm"), object{
				"AlarmActions": []any{topic},
				"OKActions":    []any{topic},
			})
		}},
		{"no address is subscribed unless one is given", func() {
			broker.template.ResourceCountIs(jsii.String("AWS::SNS::Subscription"), jsii.Number(0))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { check(t, tt.assertion) })
	}
}

func TestStackOperatorOutputs(t *testing.T) {
	tests := []struct {
		name  string
		id    string
		value any
	}{
		{"the table's name", OutputTableName, object{"Ref": logicalID(t, "Table")}},
		{"the operation workflow's ARN", OutputOperationStateMachineARN, object{"Ref": logicalID(t, "OperationStateMachine")}},
		{"the cleanup workflow's ARN", OutputCleanupStateMachineARN, object{"Ref": logicalID(t, "CleanupStateMachine")}},
		{"the fleet upgrade workflow's ARN", OutputUpgradeStateMachineARN, object{"Ref": logicalID(t, "UpgradeStateMachine")}},
		{"the region", OutputRegion, object{"Ref": "AWS::Region"}},
		{"the alarms' topic", OutputAlarmTopicARN, object{"Ref": logicalID(t, "AlarmTopic")}},
		{"the stack prefix", OutputStackPrefix, "osb"},
		{"the binding users' permissions boundary", OutputPermissionsBoundaryARN, object{"Ref": logicalID(t, "BindingBoundary")}},
		{"the operator command for this stack", OutputOpsCommand, "go run ./functions/api ops --stack ServerlessOsb operations"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is an output", func(t *testing.T) {
			check(t, func() { broker.template.HasOutput(&tt.id, object{"Value": tt.value}) })
		})
	}
	t.Run("the outputs ops --stack reads are the ones the stack has", func(t *testing.T) {
		for infraName, appName := range map[string]string{
			OutputTableName: app.OutputTable, OutputOperationStateMachineARN: app.OutputOperationStateMachine,
			OutputCleanupStateMachineARN: app.OutputCleanupStateMachine, OutputRegion: app.OutputRegion,
			OutputUpgradeStateMachineARN: app.OutputUpgradeStateMachine,
			OutputStackPrefix:            app.OutputStackPrefix, OutputPermissionsBoundaryARN: app.OutputPermissionsBoundary,
		} {
			if infraName != appName {
				t.Errorf("the stack outputs %s where ops --stack reads %s", infraName, appName)
			}
		}
	})
	t.Run("there is no custom domain unless one is given", func(t *testing.T) {
		check(t, func() { broker.template.ResourceCountIs(jsii.String("AWS::ApiGatewayV2::DomainName"), jsii.Number(0)) })
	})
}

// TestStackWithEmailAndDomain synthesizes the stack with an address for
// the alarms and a custom domain.
func TestStackWithEmailAndDomain(t *testing.T) {
	const (
		email = "platform-team@example.com"
		cert  = "arn:aws:acm:eu-west-1:123456789012:certificate/0b7f4b0e-5a56-4b8e-9f3c-1f1f7f0d7a01"
	)
	stack, template := synthWith(t, "Domain", map[string]any{ContextAlarmEmail: email, ContextDomainName: "broker.example.com", ContextCertificateARN: cert})
	tests := []struct {
		name      string
		assertion func()
	}{
		{"the address is subscribed to the alarms' topic", func() {
			template.HasResourceProperties(jsii.String("AWS::SNS::Subscription"), object{
				"Protocol": "email", "Endpoint": email,
				"TopicArn": object{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^AlarmTopic"))},
			})
		}},
		{"the API is served at the domain with its certificate and TLS 1.2", func() {
			template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::DomainName"), object{
				"DomainName": "broker.example.com",
				"DomainNameConfigurations": []any{object{
					"CertificateArn": cert, "EndpointType": "REGIONAL", "SecurityPolicy": "TLS_1_2",
				}},
			})
		}},
		{"the stage is mapped at the domain's root", func() {
			template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::ApiMapping"), object{
				"DomainName":    object{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^CustomDomain"))},
				"ApiId":         object{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^HttpApi"))},
				"Stage":         "$default",
				"ApiMappingKey": assertions.Match_Absent(),
			})
		}},
		{"the broker's URL is the domain's", func() {
			template.HasOutput(jsii.String(OutputBrokerURL), object{"Value": "https://broker.example.com"})
		}},
		{"the DNS target of the domain is an output", func() {
			template.HasOutput(jsii.String(OutputDomainTarget), object{"Value": object{
				"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^CustomDomain")), "RegionalDomainName"}}})
		}},
		{"cdk-nag finds nothing unsuppressed", func() {
			nag := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
			assertions.Annotations_FromStack(stack).HasNoError(jsii.String("*"), nag)
			assertions.Annotations_FromStack(stack).HasNoWarning(jsii.String("*"), nag)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { check(t, tt.assertion) })
	}
}

func TestObservabilitySettingsRejected(t *testing.T) {
	const cert = "arn:aws:acm:eu-west-1:123456789012:certificate/abc-123"
	tests := []struct {
		name  string
		props BrokerStackProps
		want  string
	}{
		{"an alarm email that is no address", BrokerStackProps{AlarmEmail: "platform team"}, "not an email address"},
		{"a domain without a certificate", BrokerStackProps{DomainName: "broker.example.com"}, "give both domainName and certificateArn"},
		{"a certificate without a domain", BrokerStackProps{CertificateARN: cert}, "give both"},
		{"a domain that is no DNS name", BrokerStackProps{DomainName: "https://broker.example.com", CertificateARN: cert}, "want a DNS name"},
		{"a certificate ARN that is not ACM's", BrokerStackProps{DomainName: "broker.example.com", CertificateARN: "arn:aws:iam::123456789012:server-certificate/x"}, "want arn:aws:acm"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			_, err := tt.props.withDefaults()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}
