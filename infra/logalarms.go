package infra

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/internal/deploy"
)

// logAlarms are the alarms the catalog's drivers declare on their
// functions' log lines (deploy.LogAlarm): a metric filter on the
// function's log group counts the lines with the message, in the broker's
// metrics namespace, and the alarm fires at the first, as the others.
func (b *builder) logAlarms() []alarm {
	groups := map[deploy.Function]awslogs.LogGroup{deploy.API: b.apiLogs, deploy.Worker: b.workerLogs}
	var out []alarm
	for _, d := range b.needs.Drivers {
		for _, a := range d.Needs.LogAlarms {
			filter := awslogs.NewMetricFilter(b.stack, jsii.String(a.ID+"Lines"), &awslogs.MetricFilterProps{
				LogGroup:        groups[a.Function],
				FilterPattern:   awslogs.FilterPattern_StringValue(jsii.String("$.msg"), jsii.String("="), jsii.String(a.Message)),
				MetricNamespace: jsii.String(b.metricsNamespace()),
				MetricName:      jsii.String(a.ID + "Lines"),
				MetricValue:     jsii.String("1"),
			})
			out = append(out, alarm{a.ID, a.Description, filter.Metric(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum")}), 1})
		}
	}
	return out
}
