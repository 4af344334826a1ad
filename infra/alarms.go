package infra

import (
	"fmt"
	"time"

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

// reaperAlarmPeriods is how many reaper intervals in a row must each drop
// a reap before the reaper's alarm fires: one failed reap is retried by the
// next, a reaper that keeps failing leaves operations and detached
// resources stuck.
const reaperAlarmPeriods = 3

// operatorCommand lists the detached resources and their state, for an
// operator.
const operatorCommand = "go run ./functions/api ops detached"

// workflowAlarmDescriptions are what a failed and a timed-out execution of
// workflow mean, for whoever the alarm reaches.
func workflowAlarmDescriptions(workflow string) (failed, timedOut string) {
	switch workflow {
	case workflowOperation:
		// A failed operation ends in the Succeed state FailureRecorded: an
		// execution only fails when it could not record the outcome.
		return "An execution of the operation workflow failed: an operation's outcome may be unrecorded until last_operation or the reaper repairs it.",
			"An execution of the operation workflow timed out: an operation's outcome may be unrecorded until last_operation or the reaper repairs it."
	case workflowCleanup:
		// The cleanup ends in the Fail state GaveUp when it gave up.
		return "An execution of the cleanup workflow failed: a detached resource could not be deleted and stays listed for an operator (" +
				operatorCommand + "), who may start its cleanup again once the cause is fixed.",
			"An execution of the cleanup workflow timed out: a detached resource was not deleted; the reaper marks it failed and it stays listed " +
				"for an operator (" + operatorCommand + ")."
	case workflowUpgrade:
		// A campaign's failures are its items' (ops upgrade status): an
		// execution fails only when its campaign could not be planned.
		return "An execution of the fleet upgrade workflow failed: a campaign could not be planned or recorded; ops upgrade list and ops upgrade status <campaign> say which and how far it got.",
			"An execution of the fleet upgrade workflow timed out (7 days): its campaign stays running; ops upgrade status <campaign> lists the instances it left, for a new campaign."
	}
	return fmt.Sprintf("An execution of the %s workflow failed.", workflow),
		fmt.Sprintf("An execution of the %s workflow timed out.", workflow)
}

// alarm is one CloudWatch alarm to define.
type alarm struct {
	id, description string
	metric          awscloudwatch.IMetric
	threshold       int
}

// alarms defines one alarm per failure signal: the API's 5xx answers,
// each function's errors and throttles, the reaper's dropped runs, each
// workflow's failed and timed-out executions, and the broker's own metrics
// (brokerAlarms). A workflow's execution only fails when something needs a
// person (see workflowAlarmDescriptions), so every one of those alarms on
// the first event. Each notifies topic when it fires and when it recovers.
func (b *builder) alarms(topic awssns.ITopic) {
	sum := func() *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{
			Period:    awscdk.Duration_Minutes(jsii.Number(alarmPeriod)),
			Statistic: jsii.String("Sum"),
		}
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
		failed, timedOut := workflowAlarmDescriptions(m.workflow.name)
		alarms = append(alarms,
			alarm{id + "FailedAlarm", failed, m.machine.MetricFailed(sum()), 1},
			alarm{id + "TimedOutAlarm", timedOut, m.machine.MetricTimedOut(sum()), 1},
		)
	}
	// define defines one alarm; it fires when each of its last periods
	// periods breaches.
	define := func(a alarm, periods int) {
		cw := awscloudwatch.NewAlarm(b.stack, jsii.String(a.id), &awscloudwatch.AlarmProps{
			AlarmDescription:   jsii.String(a.description),
			Metric:             a.metric,
			Threshold:          jsii.Number(a.threshold),
			EvaluationPeriods:  jsii.Number(periods),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			// No data means no requests, no executions or no reaps dropped:
			// nothing failed.
			TreatMissingData: awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		cw.AddAlarmAction(awscloudwatchactions.NewSnsAction(topic))
		cw.AddOkAction(awscloudwatchactions.NewSnsAction(topic))
	}
	for _, a := range append(alarms, b.logAlarms()...) {
		define(a, 1)
	}
	own, periods := b.brokerAlarms()
	for i, a := range own {
		define(a, periods[i])
	}
	define(alarm{"ReaperFailedAlarm", b.reaperAlarmDescription(), b.reaperDropped(), 1}, reaperAlarmPeriods)
}

// reaperPeriod is the period of the reaper's alarm: the reaper's interval,
// and no shorter than the other alarms' period, so that each period holds
// at least one reap.
func (b *builder) reaperPeriod() time.Duration {
	return max(b.props.ReaperInterval, alarmPeriod*time.Minute)
}

// reaperDropped counts the reaps Lambda gave up on: the worker failed (it
// has no asynchronous retries) or the reap waited past its maximum age.
// Only the schedule invokes the worker asynchronously (the workflows call
// it synchronously), so these are the reaper's.
func (b *builder) reaperDropped() awscloudwatch.Metric {
	return b.worker.Metric(jsii.String("AsyncEventsDropped"), &awscloudwatch.MetricOptions{
		Period:    awscdk.Duration_Minutes(jsii.Number(b.reaperPeriod().Minutes())),
		Statistic: jsii.String("Sum"),
	})
}

func (b *builder) reaperAlarmDescription() string {
	return fmt.Sprintf("The reaper (the worker's step reap, every %s) failed in each of the last %s: operations whose execution "+
		"ended without a result and detached resources without a cleanup stay stuck until it runs again. See the worker's logs.",
		minutes(b.props.ReaperInterval), minutes(reaperAlarmPeriods*b.reaperPeriod()))
}
