package motoserver_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/serverless-osb/broker/internal/mototest/motoserver"
	"github.com/serverless-osb/broker/internal/waittest"
)

// TestMotosMemoryIsBoundedOverALongRun: moto keeps the newest
// MOTO_KEEP_FINISHED finished executions of a state machine and deleted
// stacks (the fixes' twelfth), where it kept every one for as long as it
// ran; a running execution is never dropped.
func TestMotosMemoryIsBoundedOverALongRun(t *testing.T) {
	ctx, cancel := waittest.Context(t)
	defer cancel()
	m, err := motoserver.Start(motoserver.Options{Env: []string{"MOTO_KEEP_FINISHED=2"}, LogPath: t.TempDir() + "/moto.log"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(m.Endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}

	sf := sfn.NewFromConfig(cfg)
	sm, err := sf.CreateStateMachine(ctx, &sfn.CreateStateMachineInput{Name: aws.String("pass"),
		Definition: aws.String(`{"StartAt":"P","States":{"P":{"Type":"Pass","End":true}}}`),
		RoleArn:    aws.String("arn:aws:iam::123456789012:role/sfn")})
	if err != nil {
		t.Fatal(err)
	}
	var started []string
	for i := range 5 {
		out, err := sf.StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: sm.StateMachineArn, Name: aws.String(fmt.Sprintf("run-%d", i))})
		if err != nil {
			t.Fatal(err)
		}
		started = append(started, aws.ToString(out.ExecutionArn))
		waittest.Until(t, func() error {
			d, err := sf.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: out.ExecutionArn})
			if err != nil {
				return err
			}
			if d.Status == sfntypes.ExecutionStatusRunning {
				return fmt.Errorf("execution %d still running", i)
			}
			return nil
		})
	}
	list, err := sf.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: sm.StateMachineArn})
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, e := range list.Executions {
		kept = append(kept, aws.ToString(e.ExecutionArn))
	}
	slices.Sort(kept)
	// At the fifth start, the four before had ended: the newest two stay,
	// with the fifth.
	if want := started[2:]; !slices.Equal(kept, want) {
		t.Errorf("moto keeps the executions %v, want the newest three %v", kept, want)
	}

	cf := cloudformation.NewFromConfig(cfg)
	body := `{"Resources":{"H":{"Type":"AWS::CloudFormation::WaitConditionHandle"}}}`
	for i := range 5 {
		name := fmt.Sprintf("stack-%d", i)
		if _, err := cf.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: &name, TemplateBody: &body}); err != nil {
			t.Fatal(err)
		}
		if _, err := cf.DeleteStack(ctx, &cloudformation.DeleteStackInput{StackName: &name}); err != nil {
			t.Fatal(err)
		}
	}
	stacks, err := cf.ListStacks(ctx, &cloudformation.ListStacksInput{StackStatusFilter: []cfntypes.StackStatus{cfntypes.StackStatusDeleteComplete}})
	if err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for _, s := range stacks.StackSummaries {
		deleted = append(deleted, aws.ToString(s.StackName))
	}
	slices.Sort(deleted)
	if want := []string{"stack-3", "stack-4"}; !slices.Equal(deleted, want) {
		t.Errorf("moto keeps the deleted stacks %v, want the newest two %v", deleted, want)
	}
}
