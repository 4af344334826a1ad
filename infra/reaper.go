package infra

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/jsii-runtime-go"
)

// reapInput is the event the schedule sends the worker: its step "reap"
// (broker.Reap), which repairs what crashes and timeouts leave behind.
const reapInput = `{"step":"reap"}`

// reaperScheduleGroup is the schedule group the reaper's schedule is in;
// the scheduler role's trust names it (aws:SourceArn).
const reaperScheduleGroup = "default"

// reaperRetryAttempts is how many times EventBridge Scheduler retries
// handing a reap to Lambda when Lambda refuses it (throttled, unavailable).
const reaperRetryAttempts = 2

// reaper defines the schedule that runs the reaper: EventBridge Scheduler
// invokes the worker with reapInput every ReaperInterval, on time (no
// flexible window), through a role that may invoke the worker and nothing
// else.
//
// Scheduler invokes Lambda asynchronously, so two retry policies apply. The
// schedule's retries handing the event to Lambda; once Lambda has accepted
// it, Lambda's asynchronous retries apply, and those are off: the next reap,
// one interval later, is the retry, and a reap older than an interval is
// dropped rather than run late next to a newer one. There is no dead-letter
// queue, as a failed reap leaves nothing to replay (each reap reads the
// table afresh); the alarm on the worker's dropped events (see alarms) says
// when reaps keep failing.
func (b *builder) reaper() {
	interval := awscdk.Duration_Minutes(jsii.Number(b.props.ReaperInterval.Minutes()))
	role := awsiam.NewRole(b.stack, jsii.String("ReaperRole"), &awsiam.RoleProps{
		Description: jsii.String("EventBridge Scheduler's role for the reaper's schedule: it invokes the worker function, nothing else."),
		// Confused-deputy protection: only schedules of this account's
		// group may use the role.
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]any{
				"StringEquals": map[string]any{
					"aws:SourceAccount": awscdk.Aws_ACCOUNT_ID(),
					"aws:SourceArn": b.stack.FormatArn(&awscdk.ArnComponents{
						Service:      jsii.String("scheduler"),
						Resource:     jsii.String("schedule-group"),
						ResourceName: jsii.String(reaperScheduleGroup),
					}),
				},
			},
		}),
		// Inline, so that the role has its permission from the moment it
		// exists: the schedule may fire before a separate policy is attached.
		InlinePolicies: &map[string]awsiam.PolicyDocument{
			"InvokeWorker": awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{
				Statements: &[]awsiam.PolicyStatement{
					statement("InvokeWorker", []string{"lambda:InvokeFunction"}, b.worker.FunctionArn()),
				},
			}),
		},
	})

	schedule := awsscheduler.NewCfnSchedule(b.stack, jsii.String("ReaperSchedule"), &awsscheduler.CfnScheduleProps{
		Description: jsii.String(fmt.Sprintf("Runs the broker's reaper (the worker's step reap) every %s: it repairs "+
			"operations whose execution ended without a result and starts the cleanups of detached resources.", minutes(b.props.ReaperInterval))),
		GroupName:          jsii.String(reaperScheduleGroup),
		ScheduleExpression: awsscheduler.ScheduleExpression_Rate(interval).ExpressionString(),
		FlexibleTimeWindow: &awsscheduler.CfnSchedule_FlexibleTimeWindowProperty{Mode: jsii.String("OFF")},
		State:              jsii.String("ENABLED"),
		Target: &awsscheduler.CfnSchedule_TargetProperty{
			Arn:     b.worker.FunctionArn(),
			RoleArn: role.RoleArn(),
			Input:   jsii.String(reapInput),
			RetryPolicy: &awsscheduler.CfnSchedule_RetryPolicyProperty{
				MaximumRetryAttempts:     jsii.Number(reaperRetryAttempts),
				MaximumEventAgeInSeconds: interval.ToSeconds(nil),
			},
		},
	})
	// The reaper starts executions: let it run once they can be started.
	for _, m := range b.machines {
		schedule.Node().AddDependency(m.machine)
	}

	b.worker.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
		MaxEventAge:   interval,
		RetryAttempts: jsii.Number(0),
	})
}

// minutes says d, whole minutes, in words: "5 minutes".
func minutes(d time.Duration) string {
	if n := int(d.Minutes()); n != 1 {
		return fmt.Sprintf("%d minutes", n)
	}
	return "1 minute"
}
