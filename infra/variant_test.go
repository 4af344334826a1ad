package infra

import (
	"maps"
	"path/filepath"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/internal/env"
)

// synthWith synthesizes the stack named name with the test broker's context
// values and extra ones (as -c options give them), and returns it with its
// template.
func synthWith(t *testing.T, name string, extra map[string]any) (awscdk.Stack, assertions.Template) {
	t.Helper()
	context := maps.Clone(broker.context)
	maps.Copy(context, extra)
	app := awscdk.NewApp(&awscdk.AppProps{Context: &context, Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
	props, err := PropsFromContext(app.Node())
	if err != nil {
		t.Fatal(err)
	}
	stack, err := NewBrokerStack(app, name, &props)
	if err != nil {
		t.Fatal(err)
	}
	var template assertions.Template
	check(t, func() { template = assertions.Template_FromStack(stack, nil) })
	if template == nil {
		t.FailNow()
	}
	return stack, template
}

// TestStackFromContext synthesizes the stack with every setting cdk.json
// offers changed, as -c options (strings) change them.
func TestStackFromContext(t *testing.T) {
	const topic = "arn:aws:sns:eu-west-1:123456789012:broker-alarms"
	stack, template := synthWith(t, "Variant", map[string]any{
		ContextStageName:          "v1",
		ContextThrottleRateLimit:  "5",
		ContextThrottleBurstLimit: "10",
		ContextAPIMemorySize:      "512",
		ContextWorkerMemorySize:   "1024",
		ContextAPITimeout:         "20",
		ContextWorkerTimeout:      "120",
		ContextLogRetentionDays:   "90",
		ContextLogLevel:           "debug",
		ContextSealedOnly:         "false",
		ContextAlarmTopicARN:      topic,
		ContextReaperInterval:     "10",
		// 0 is none.
		ContextAPIReservedConcurrency:    "0",
		ContextWorkerReservedConcurrency: "5",
		ContextWorkerTasksPerPlan:        "2",
	})
	tests := []struct {
		name      string
		assertion func()
	}{
		{"the stage has the name and the throttle given", func() {
			template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Stage"), object{
				"StageName":            "v1",
				"DefaultRouteSettings": object{"ThrottlingRateLimit": 5, "ThrottlingBurstLimit": 10},
			})
		}},
		{"the broker's URL ends with the stage's name", func() {
			template.HasOutput(jsii.String(OutputBrokerURL), object{"Value": object{"Fn::Join": []any{"", []any{
				object{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^HttpApi")), "ApiEndpoint"}}, "/v1",
			}}}})
		}},
		{"the api function has the memory, timeout and log level given", func() {
			template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), object{
				"MemorySize":  512,
				"Timeout":     20,
				"Environment": object{"Variables": assertions.Match_ObjectLike(&object{"LOG_LEVEL": "debug"})},
			})
		}},
		{"the api function has no reserved concurrency, and the worker the reservation and the bound per plan given", func() {
			template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), object{
				"Timeout":                      20,
				"ReservedConcurrentExecutions": assertions.Match_Absent(),
			})
			template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), object{
				"Timeout":                      120,
				"ReservedConcurrentExecutions": 5,
				"Environment":                  object{"Variables": assertions.Match_ObjectLike(&object{"BROKER_MAX_TASKS_PER_PLAN": "2"})},
			})
		}},
		{"the worker function has the memory, timeout and log level given", func() {
			template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), object{
				"MemorySize":  1024,
				"Timeout":     120,
				"Environment": object{"Variables": assertions.Match_ObjectLike(&object{"LOG_LEVEL": "debug"})},
			})
		}},
		{"sealedOnly=false lets both functions read secrets in clear until the table is resealed", func() {
			all := *template.ToJSON()
			for _, id := range []string{"ApiFunction", "WorkerFunction"} {
				fn := stack.Node().TryFindChild(jsii.String(id)).Node().DefaultChild().(awscdk.CfnElement)
				r := all["Resources"].(object)[*stack.GetLogicalId(fn)].(object)
				if v, set := r["Properties"].(object)["Environment"].(object)["Variables"].(object)[env.SealedOnly]; set {
					t.Errorf("%s has %s=%v with sealedOnly=false, want it unset", id, env.SealedOnly, v)
				}
			}
		}},
		{"every log group keeps its events the days given", func() {
			template.AllResourcesProperties(jsii.String("AWS::Logs::LogGroup"), object{"RetentionInDays": 90})
		}},
		{"the state machines are named after the stack", func() {
			template.HasResourceProperties(jsii.String("AWS::StepFunctions::StateMachine"), object{"StateMachineName": "Variant-operation"})
			template.HasResourceProperties(jsii.String("AWS::StepFunctions::StateMachine"), object{"StateMachineName": "Variant-cleanup"})
		}},
		{"the worker is given the ARNs of the stack's state machines", func() {
			template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), object{
				"Environment": object{"Variables": assertions.Match_ObjectLike(&object{
					"BROKER_OPERATION_STATE_MACHINE_ARN": stateMachineARN("Variant-operation"),
					"BROKER_CLEANUP_STATE_MACHINE_ARN":   stateMachineARN("Variant-cleanup"),
				})},
			})
		}},
		{"the reaper runs at the interval given, and a reap older than it is dropped", func() {
			template.HasResourceProperties(jsii.String("AWS::Scheduler::Schedule"), object{
				"ScheduleExpression": "rate(10 minutes)",
				"Target":             object{"RetryPolicy": object{"MaximumEventAgeInSeconds": 600}},
			})
			template.HasResourceProperties(jsii.String("AWS::Lambda::EventInvokeConfig"), object{"MaximumEventAgeInSeconds": 600})
		}},
		{"the reaper's alarm watches three intervals", func() {
			template.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), object{
				"MetricName":        "AsyncEventsDropped",
				"Period":            600,
				"EvaluationPeriods": 3,
				"AlarmDescription":  assertions.Match_StringLikeRegexp(jsii.String("every 10 minutes.*the last 30 minutes")),
			})
		}},
		{"every alarm notifies the topic when it fires and when it recovers", func() {
			template.AllResourcesProperties(jsii.String("AWS::CloudWatch::Alarm"), object{
				"AlarmActions": []any{topic},
				"OKActions":    []any{topic},
			})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { check(t, tt.assertion) })
	}
}
