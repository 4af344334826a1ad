package infra

import (
	"slices"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

func TestStackReaper(t *testing.T) {
	worker := object{"Fn::GetAtt": []any{logicalID(t, "WorkerFunction"), "Arn"}}
	tests := []struct {
		name      string
		assertion func()
	}{
		{"there is one schedule", func() {
			broker.template.ResourceCountIs(jsii.String("AWS::Scheduler::Schedule"), jsii.Number(1))
		}},
		{"the schedule runs every 5 minutes, on time, from the moment it is deployed", func() {
			broker.template.HasResourceProperties(jsii.String("AWS::Scheduler::Schedule"), object{
				"ScheduleExpression": "rate(5 minutes)",
				"FlexibleTimeWindow": object{"Mode": "OFF"},
				"State":              "ENABLED",
				"GroupName":          "default",
				"StartDate":          assertions.Match_Absent(),
				"EndDate":            assertions.Match_Absent(),
			})
		}},
		{`the schedule invokes the worker with {"step":"reap"}, through the reaper's role`, func() {
			broker.template.HasResourceProperties(jsii.String("AWS::Scheduler::Schedule"), object{
				"Target": object{
					"Arn":     worker,
					"RoleArn": object{"Fn::GetAtt": []any{logicalID(t, "ReaperRole"), "Arn"}},
					"Input":   assertions.Match_SerializedJson(assertions.Match_ObjectEquals(&map[string]any{"step": "reap"})),
				},
			})
		}},
		{"the schedule retries handing a reap to Lambda twice, for no longer than the interval", func() {
			broker.template.HasResourceProperties(jsii.String("AWS::Scheduler::Schedule"), object{
				"Target": object{"RetryPolicy": object{"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 300}},
			})
		}},
		{"only EventBridge Scheduler, for this account's default schedule group, may assume the reaper's role", func() {
			broker.template.HasResourceProperties(jsii.String("AWS::IAM::Role"), object{
				"AssumeRolePolicyDocument": object{"Statement": []any{object{
					"Action":    "sts:AssumeRole",
					"Effect":    "Allow",
					"Principal": object{"Service": "scheduler.amazonaws.com"},
					"Condition": object{"StringEquals": object{
						"aws:SourceAccount": object{"Ref": "AWS::AccountId"},
						"aws:SourceArn": object{"Fn::Join": []any{"", []any{
							"arn:", object{"Ref": "AWS::Partition"}, ":scheduler:", object{"Ref": "AWS::Region"}, ":",
							object{"Ref": "AWS::AccountId"}, ":schedule-group/default",
						}}},
					}},
				}}},
			})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { check(t, tt.assertion) })
	}

	t.Run("the reaper's role may invoke the worker function and nothing else", func(t *testing.T) {
		statements := inlineStatements(t, "ReaperRole")
		if len(statements) != 1 {
			t.Fatalf("%d statements: %v", len(statements), statements)
		}
		s := statements[0]
		if got := actions(s); !slices.Equal(got, []string{"lambda:InvokeFunction"}) || s["Effect"] != "Allow" || s["Condition"] != nil {
			t.Errorf("statement %v", s)
		}
		if !jsonEqual(s["Resource"], worker) {
			t.Errorf("lambda:InvokeFunction is granted on %v; want the worker, %v", s["Resource"], worker)
		}
	})
	t.Run("the reaper's role has no policy but its inline one, which it has from the start", func(t *testing.T) {
		role := object{"Ref": logicalID(t, "ReaperRole")}
		for id, p := range resources(t, "AWS::IAM::Policy") {
			if slices.ContainsFunc(p["Properties"].(object)["Roles"].([]any), func(r any) bool { return jsonEqual(r, role) }) {
				t.Errorf("policy %s is attached to the reaper's role", id)
			}
		}
	})
	t.Run("the reaper starts only once the state machines it starts executions of exist", func(t *testing.T) {
		dependsOn, _ := resource(t, "ReaperSchedule")["DependsOn"].([]any)
		for _, machine := range []string{"OperationStateMachine", "CleanupStateMachine"} {
			if !slices.Contains(dependsOn, any(logicalID(t, machine))) {
				t.Errorf("DependsOn %v has no %s", dependsOn, machine)
			}
		}
	})
}
