package infra

import (
	"fmt"
	"regexp"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscertificatemanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/internal/metrics/metricname"
)

// The outputs an operator needs beside the URL and the secret: what `ops
// --stack NAME` reads (internal/app's Output* constants) and the DNS target
// of a custom domain.
const (
	OutputTableName                = "TableName"
	OutputOperationStateMachineARN = "OperationStateMachineArn"
	OutputCleanupStateMachineARN   = "CleanupStateMachineArn"
	OutputUpgradeStateMachineARN   = "UpgradeStateMachineArn"
	OutputRegion                   = "Region"
	OutputSealingKeyARN            = "SealingKeyArn"
	// OutputStackPrefix and OutputPermissionsBoundaryARN are output when
	// the stack makes the service role: ops audit reads them.
	OutputStackPrefix            = "StackPrefix"
	OutputPermissionsBoundaryARN = "PermissionsBoundaryArn"
	OutputAlarmTopicARN          = "AlarmTopicArn"
	OutputDomainTarget           = "CustomDomainTarget"
	OutputOpsCommand             = "OpsCommand"
	OutputDashboard              = "DashboardUrl"
)

// detachedAlarmHours is how long a detached resource may wait before its
// alarm fires: the cleanup retries for hours by design.
const detachedAlarmHours = 6

// metricsNamespace is where the functions put the broker's metrics: one
// namespace per stack, so that two brokers in one account keep theirs apart.
func (b *builder) metricsNamespace() string { return *b.stack.StackName() }

// brokerMetric is one of the broker's own metrics (internal/metrics), in
// total (no dimension) unless dims say otherwise.
func (b *builder) brokerMetric(name, statistic string, minutes float64, label string, dims map[string]*string) awscloudwatch.Metric {
	props := &awscloudwatch.MetricProps{
		Namespace:     jsii.String(b.metricsNamespace()),
		MetricName:    jsii.String(name),
		Statistic:     jsii.String(statistic),
		Period:        awscdk.Duration_Minutes(jsii.Number(minutes)),
		DimensionsMap: &dims,
	}
	// An alarm on a labelled metric is written as a metric math query;
	// without a label, as the plain metric.
	if label != "" {
		props.Label = &label
	}
	return awscloudwatch.NewMetric(props)
}

// alarmTopic is the topic every alarm notifies: the one alarmTopicArn
// names, or else one of the stack's own, encrypted with a key CloudWatch
// may use. alarmEmail subscribes an address to it.
func (b *builder) alarmTopic() awssns.ITopic {
	var topic awssns.ITopic
	if b.props.AlarmTopicARN != "" {
		topic = awssns.Topic_FromTopicArn(b.stack, jsii.String("AlarmTopic"), &b.props.AlarmTopicARN)
	} else {
		key := awskms.NewKey(b.stack, jsii.String("AlarmTopicKey"), &awskms.KeyProps{
			Description:       jsii.String("Encrypts the broker's alarm notifications (SNS topic AlarmTopic)."),
			EnableKeyRotation: jsii.Bool(true),
		})
		// CloudWatch publishes to an encrypted topic with the topic's key,
		// which the AWS managed key for SNS does not let it use.
		key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("CloudWatchAlarmsPublish"),
			Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)},
			Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey*"),
			Resources:  jsii.Strings("*"),
		}), nil)
		own := awssns.NewTopic(b.stack, jsii.String("AlarmTopic"), &awssns.TopicProps{
			DisplayName: jsii.String("serverless-osb alarms"),
			MasterKey:   key,
			EnforceSSL:  jsii.Bool(true),
		})
		topic = own
	}
	if b.props.AlarmEmail != "" {
		topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(b.props.AlarmEmail), nil))
	}
	return topic
}

// brokerAlarms are the alarms on the broker's own metrics: failed
// operations, operations the reaper found stuck, and detached resources
// that have waited for hours. periods is how many periods in a row must
// breach.
func (b *builder) brokerAlarms() (alarms []alarm, periods []int) {
	period := float64(alarmPeriod)
	stuck := awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String("failed + timedOut"),
		UsingMetrics: &map[string]awscloudwatch.IMetric{
			"failed":   b.brokerMetric(metricname.ReaperFailed, "Sum", period, "failed by the reaper", nil),
			"timedOut": b.brokerMetric(metricname.ReaperTimedOut, "Sum", period, "stopped by the reaper", nil),
		},
		Label:  jsii.String("operations stuck"),
		Period: awscdk.Duration_Minutes(jsii.Number(period)),
	})
	return []alarm{
			{"OperationsFailedAlarm", "An operation failed: last_operation tells its platform why (a driver's or a template's error, " +
				"a missing permission, a quota). Its resources were detached for cleanup. The logs of the worker function name the operation.",
				b.brokerMetric(metricname.OperationFailed, "Sum", period, "", nil), 1},
			{"StuckOperationsAlarm", "The reaper failed an operation that was stuck: its execution ended without recording a result, " +
				"or it outlived its plan's maximum polling duration. Something crashed or hung; see the worker's logs. " +
				"List operations in progress with: go run ./functions/api ops --stack " + *b.stack.StackName() + " operations",
				stuck, 1},
			{"DetachedResourcesAlarm", fmt.Sprintf("A detached resource has waited for its deletion for %d hours or more, "+
				"or its cleanup gave up: it may still cost money. List them with: %s --stack %s detached",
				detachedAlarmHours, "go run ./functions/api ops", *b.stack.StackName()),
				b.brokerMetric(metricname.DetachedResources, "Minimum", 60, "", nil), 1},
		},
		[]int{1, 1, detachedAlarmHours}
}

// dashboard shows, per row: the broker's operations (by kind, plan,
// outcome, duration), its last_operation polls and the reaper's work; the
// HTTP API's and the functions' own metrics; the workflows' executions.
func (b *builder) dashboard() awscloudwatch.Dashboard {
	const minutes = 5.0
	ns := b.metricsNamespace()
	m := func(name, stat, label string) awscloudwatch.IMetric {
		return b.brokerMetric(name, stat, minutes, label, nil)
	}
	search := func(label, expr string) awscloudwatch.IMetric {
		return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression:   jsii.String(expr),
			Label:        jsii.String(label),
			Period:       awscdk.Duration_Minutes(jsii.Number(minutes)),
			UsingMetrics: &map[string]awscloudwatch.IMetric{},
		})
	}
	byPlan := func(name, stat string) string {
		return fmt.Sprintf(`SEARCH('{%s,%s,%s,%s} MetricName="%s"', '%s', %d)`,
			ns, metricname.DimService, metricname.DimPlan, metricname.DimKind, name, stat, int(minutes*60))
	}
	graph := func(title string, left []awscloudwatch.IMetric, right []awscloudwatch.IMetric) awscloudwatch.IWidget {
		props := &awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: &left, Width: jsii.Number(8), Height: jsii.Number(6)}
		if len(right) > 0 {
			props.Right = &right
		}
		return awscloudwatch.NewGraphWidget(props)
	}
	sum := func() *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(minutes)), Statistic: jsii.String("Sum")}
	}
	stat := func(s string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(minutes)), Statistic: jsii.String(s)}
	}
	var executions []awscloudwatch.IMetric
	for _, sm := range b.machines {
		w := sm.workflow.name
		executions = append(executions,
			sm.machine.MetricStarted(&awscloudwatch.MetricOptions{Label: jsii.String(w + " started"), Statistic: jsii.String("Sum")}),
			sm.machine.MetricFailed(&awscloudwatch.MetricOptions{Label: jsii.String(w + " failed"), Statistic: jsii.String("Sum")}),
			sm.machine.MetricTimedOut(&awscloudwatch.MetricOptions{Label: jsii.String(w + " timed out"), Statistic: jsii.String("Sum")}))
	}
	widgets := [][]awscloudwatch.IWidget{
		{awscloudwatch.NewTextWidget(&awscloudwatch.TextWidgetProps{Width: jsii.Number(24), Height: jsii.Number(2),
			Markdown: jsii.String(fmt.Sprintf("# serverless-osb: %s\nThe broker's metrics are in the namespace `%s` "+
				"(dimensions Service, Plan, Kind); operators list operations and detached resources with "+
				"`go run ./functions/api ops --stack %s operations` (or `detached`).", ns, ns, ns))})},
		{
			graph("Operations", []awscloudwatch.IMetric{
				m(metricname.OperationStarted, "Sum", "started"),
				m(metricname.OperationSucceeded, "Sum", "succeeded"),
				m(metricname.OperationFailed, "Sum", "failed"),
			}, nil),
			graph("Operations failed, by service, plan and kind", []awscloudwatch.IMetric{
				search("failed", byPlan(metricname.OperationFailed, "Sum")),
			}, nil),
			graph("Operation duration (ms)", []awscloudwatch.IMetric{
				m(metricname.OperationDuration, "p50", "p50"),
				m(metricname.OperationDuration, "p90", "p90"),
				m(metricname.OperationDuration, "Maximum", "max"),
			}, nil),
		},
		{
			graph("Operations started, by service, plan and kind", []awscloudwatch.IMetric{
				search("started", byPlan(metricname.OperationStarted, "Sum")),
			}, nil),
			graph("last_operation polls", []awscloudwatch.IMetric{
				m(metricname.LastOperationPolls, "Sum", "polls"),
			}, nil),
			graph("Reaper and cleanups", []awscloudwatch.IMetric{
				m(metricname.ReaperRestarted, "Sum", "restarted"),
				m(metricname.ReaperFailed, "Sum", "failed (stuck)"),
				m(metricname.ReaperTimedOut, "Sum", "stopped (overdue)"),
				m(metricname.ReaperCleanupsStarted, "Sum", "cleanups started"),
				m(metricname.CleanupFailed, "Sum", "cleanups given up"),
			}, []awscloudwatch.IMetric{
				m(metricname.DetachedResources, "Maximum", "detached resources"),
				m(metricname.OperationsInProgress, "Maximum", "operations in progress"),
			}),
		},
		{
			graph("HTTP API requests", []awscloudwatch.IMetric{
				b.stage.MetricCount(sum()), b.stage.MetricClientError(sum()), b.stage.MetricServerError(sum()),
			}, []awscloudwatch.IMetric{b.stage.MetricLatency(stat("p90"))}),
			graph("Functions: invocations, errors, throttles", []awscloudwatch.IMetric{
				b.api.MetricInvocations(&awscloudwatch.MetricOptions{Label: jsii.String("api invocations"), Statistic: jsii.String("Sum")}),
				b.api.MetricErrors(&awscloudwatch.MetricOptions{Label: jsii.String("api errors"), Statistic: jsii.String("Sum")}),
				b.api.MetricThrottles(&awscloudwatch.MetricOptions{Label: jsii.String("api throttles"), Statistic: jsii.String("Sum")}),
				b.worker.MetricInvocations(&awscloudwatch.MetricOptions{Label: jsii.String("worker invocations"), Statistic: jsii.String("Sum")}),
				b.worker.MetricErrors(&awscloudwatch.MetricOptions{Label: jsii.String("worker errors"), Statistic: jsii.String("Sum")}),
				b.worker.MetricThrottles(&awscloudwatch.MetricOptions{Label: jsii.String("worker throttles"), Statistic: jsii.String("Sum")}),
			}, nil),
			graph("Functions: duration p90 (ms)", []awscloudwatch.IMetric{
				b.api.MetricDuration(&awscloudwatch.MetricOptions{Label: jsii.String("api"), Statistic: jsii.String("p90")}),
				b.worker.MetricDuration(&awscloudwatch.MetricOptions{Label: jsii.String("worker"), Statistic: jsii.String("p90")}),
			}, nil),
		},
		{graph("Workflow executions", executions, nil)},
	}
	rows := make([]*[]awscloudwatch.IWidget, len(widgets))
	for i := range widgets {
		rows[i] = &widgets[i]
	}
	return awscloudwatch.NewDashboard(b.stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName:   b.stack.StackName(),
		DefaultInterval: awscdk.Duration_Hours(jsii.Number(24)),
		Widgets:         &rows,
	})
}

// customDomain serves the API at the domain name the context gives, with
// its ACM certificate, so that the URL a platform registered survives a
// new HTTP API; with the front door, it is the distribution's origin (see
// frontDoor). It returns nil when no domain is configured, and the same
// domain on every call.
func (b *builder) customDomain() awsapigatewayv2.DomainName {
	if b.props.DomainName == "" {
		return nil
	}
	if b.apiDomain == nil {
		props := &awsapigatewayv2.DomainNameProps{
			DomainName:     jsii.String(b.props.DomainName),
			Certificate:    awscertificatemanager.Certificate_FromCertificateArn(b.stack, jsii.String("CustomDomainCertificate"), jsii.String(b.props.CertificateARN)),
			SecurityPolicy: awsapigatewayv2.SecurityPolicy_TLS_1_2,
		}
		if m := truststoreURI.FindStringSubmatch(b.props.FrontDoorTruststore); m != nil {
			// Mutual TLS: only the front door, with its client certificate,
			// completes a handshake with the domain (checkOriginMTLS).
			props.Mtls = &awsapigatewayv2.MTLSConfig{
				Bucket: awss3.Bucket_FromBucketName(b.stack, jsii.String("FrontDoorTruststoreBucket"), jsii.String(m[1])),
				Key:    jsii.String(m[2]),
			}
		}
		b.apiDomain = awsapigatewayv2.NewDomainName(b.stack, jsii.String("CustomDomain"), props)
		awsapigatewayv2.NewApiMapping(b.stack, jsii.String("CustomDomainMapping"), &awsapigatewayv2.ApiMappingProps{
			Api: b.httpAPI, DomainName: b.apiDomain, Stage: b.stage,
		})
	}
	return b.apiDomain
}

// domainNamePattern is a DNS name of two labels or more.
var domainNamePattern = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$`)

// certificateARNPattern is an ACM certificate's ARN.
var certificateARNPattern = regexp.MustCompile(`^arn:aws[a-z-]*:acm:[a-z0-9-]+:[0-9]{12}:certificate/[A-Za-z0-9-]+$`)

// emailPattern is loose on purpose: SNS checks the address, this catches a
// value that is plainly something else.
var emailPattern = regexp.MustCompile(`^[^@\s,]+@[^@\s,]+\.[^@\s,]+$`)

// checkObservability checks the settings of the alarms' topic and the
// custom domain.
func checkObservability(p BrokerStackProps) []error {
	var errs []error
	if p.AlarmEmail != "" && !emailPattern.MatchString(p.AlarmEmail) {
		errs = append(errs, fmt.Errorf("alarm email %q: not an email address", p.AlarmEmail))
	}
	switch {
	case p.DomainName == "" && p.CertificateARN == "":
	case p.DomainName == "" || p.CertificateARN == "":
		errs = append(errs, fmt.Errorf("custom domain: give both %s and %s (have %q and %q)",
			ContextDomainName, ContextCertificateARN, p.DomainName, p.CertificateARN))
	default:
		if !domainNamePattern.MatchString(p.DomainName) {
			errs = append(errs, fmt.Errorf("domain name %q: want a DNS name such as broker.example.com, in lower case", p.DomainName))
		}
		if !certificateARNPattern.MatchString(p.CertificateARN) {
			errs = append(errs, fmt.Errorf("certificate ARN %q: want arn:aws:acm:REGION:ACCOUNT:certificate/ID, in the stack's region", p.CertificateARN))
		}
	}
	return errs
}

// observability defines the alarms' topic, the alarms, the dashboard, the
// custom domain when one is configured, and the outputs an operator needs.
func (b *builder) observability() {
	topic := b.alarmTopic()
	b.alarms(topic)
	dashboard := b.dashboard()
	b.observabilityOutputs(topic, dashboard, b.customDomain())
}

// observabilityOutputs are what an operator needs to work on the deployed
// broker and to find its dashboard and alarms.
func (b *builder) observabilityOutputs(topic awssns.ITopic, dashboard awscloudwatch.Dashboard, domain awsapigatewayv2.DomainName) {
	output := func(id, description string, value *string) {
		awscdk.NewCfnOutput(b.stack, jsii.String(id), &awscdk.CfnOutputProps{Description: jsii.String(description), Value: value})
	}
	output(OutputTableName, "The broker's DynamoDB table (BROKER_TABLE).", b.table.TableName())
	for _, m := range b.machines {
		switch m.workflow.name {
		case workflowOperation:
			output(OutputOperationStateMachineARN, "The operation workflow (BROKER_OPERATION_STATE_MACHINE_ARN).", m.machine.StateMachineArn())
		case workflowCleanup:
			output(OutputCleanupStateMachineARN, "The cleanup workflow (BROKER_CLEANUP_STATE_MACHINE_ARN).", m.machine.StateMachineArn())
		case workflowUpgrade:
			output(OutputUpgradeStateMachineARN, "The fleet upgrade workflow (ops upgrade start).", m.machine.StateMachineArn())
		}
	}
	output(OutputRegion, "The region the broker runs in (AWS_REGION).", b.stack.Region())
	output(OutputSealingKeyARN, "The KMS key that seals the secrets the table keeps (BROKER_SEALING_KEY_ARN).", b.sealKey.KeyArn())
	if b.boundary != nil {
		output(OutputStackPrefix, "What the name of every service stack starts with, before a hyphen (BROKER_STACK_PREFIX).",
			jsii.String(b.props.StackPrefix))
		output(OutputPermissionsBoundaryARN, "The permissions boundary every IAM user of the service stacks carries (ops audit).",
			b.boundary.ManagedPolicyArn())
	}
	output(OutputAlarmTopicARN, "The SNS topic every alarm notifies; subscribe to it (or deploy with -c alarmEmail=ADDRESS).", topic.TopicArn())
	output(OutputDashboard, "The broker's CloudWatch dashboard.", awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("https://console.aws.amazon.com/cloudwatch/home?region="), b.stack.Region(),
		jsii.String("#dashboards:name="), dashboard.DashboardName(),
	}))
	output(OutputOpsCommand, "The operator command, run from a checkout of the broker with AWS credentials for this account.",
		jsii.String("go run ./functions/api ops --stack "+*b.stack.StackName()+" operations"))
	switch {
	case b.distribution != nil:
		output(OutputDomainTarget, "Point the custom domain's DNS record (CNAME, or a Route 53 alias) at the front door's distribution.",
			b.distribution.DistributionDomainName())
	case domain != nil:
		output(OutputDomainTarget, "Point the custom domain's DNS record (CNAME, or an alias) at this name.", domain.RegionalDomainName())
	}
}
