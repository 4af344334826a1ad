package infra

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/jsii-runtime-go"
)

// alarmPeriod is the period every alarm sums its metric over.
const alarmPeriod = 5 // minutes

// workerErrorThreshold is higher than the other thresholds because the
// worker fails by design: with TransientError when DynamoDB or a driver's
// service is briefly unavailable (the workflows retry it), and with
// PermanentError when a change fails (the workflow records the failure). A
// burst of them is what deserves attention.
const workerErrorThreshold = 5

// alarms defines one alarm per failure signal: the API's 5xx answers,
// each function's errors and throttles, each workflow's failed and
// timed-out executions. A workflow's execution only fails when it could not
// record an operation's outcome (a failed operation ends in the Succeed
// state FailureRecorded), so every one of those alarms on the first event.
func (b *builder) alarms() {
	var topic awssns.ITopic
	if b.props.AlarmTopicARN != "" {
		topic = awssns.Topic_FromTopicArn(b.stack, jsii.String("AlarmTopic"), &b.props.AlarmTopicARN)
	}
	sum := func() *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{
			Period:    awscdk.Duration_Minutes(jsii.Number(alarmPeriod)),
			Statistic: jsii.String("Sum"),
		}
	}
	type alarm struct {
		id, description string
		metric          awscloudwatch.Metric
		threshold       int
	}
	alarms := []alarm{
		{"Api5xxAlarm", "The HTTP API answered 5xx: the api function failed or timed out.", b.stage.MetricServerError(sum()), 1},
		{"ApiErrorsAlarm", "The api function failed (an unhandled error, a crash or a timeout).", b.api.MetricErrors(sum()), 1},
		{"ApiThrottlesAlarm", "The api function was throttled: requests were refused.", b.api.MetricThrottles(sum()), 1},
		{"WorkerErrorsAlarm", fmt.Sprintf("The worker function failed %d times or more in %d minutes.", workerErrorThreshold, alarmPeriod), b.worker.MetricErrors(sum()), workerErrorThreshold},
		{"WorkerThrottlesAlarm", "The worker function was throttled: workflows are retrying.", b.worker.MetricThrottles(sum()), 1},
	}
	for _, m := range b.machines {
		id := m.workflow.constructID()
		alarms = append(alarms,
			alarm{id + "FailedAlarm", fmt.Sprintf("An execution of the %s workflow failed: an operation's outcome may be unrecorded until last_operation or the reaper repairs it.", m.workflow.name), m.machine.MetricFailed(sum()), 1},
			alarm{id + "TimedOutAlarm", fmt.Sprintf("An execution of the %s workflow timed out: an operation's outcome may be unrecorded until last_operation or the reaper repairs it.", m.workflow.name), m.machine.MetricTimedOut(sum()), 1},
		)
	}
	for _, a := range alarms {
		cw := awscloudwatch.NewAlarm(b.stack, jsii.String(a.id), &awscloudwatch.AlarmProps{
			AlarmDescription:   jsii.String(a.description),
			Metric:             a.metric,
			Threshold:          jsii.Number(a.threshold),
			EvaluationPeriods:  jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			// No data means no requests or no executions: nothing failed.
			TreatMissingData: awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		if topic != nil {
			cw.AddAlarmAction(awscloudwatchactions.NewSnsAction(topic))
			cw.AddOkAction(awscloudwatchactions.NewSnsAction(topic))
		}
	}
}
