package sfn

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/serverless-osb/broker/internal/broker"
)

func TestExecutionPrefix(t *testing.T) {
	tests := []struct {
		name, machine, want string
	}{
		{"a state machine ARN gives its executions' prefix",
			"arn:aws:states:eu-west-1:123456789012:stateMachine:osb-operation",
			"arn:aws:states:eu-west-1:123456789012:execution:osb-operation:"},
		{"the partition is kept",
			"arn:aws-cn:states:cn-north-1:123456789012:stateMachine:osb-operation",
			"arn:aws-cn:states:cn-north-1:123456789012:execution:osb-operation:"},
		{"a version or an alias runs executions of the state machine",
			"arn:aws:states:us-east-1:123456789012:stateMachine:osb-operation:prod",
			"arn:aws:states:us-east-1:123456789012:execution:osb-operation:"},
		{"an activity is refused", "arn:aws:states:us-east-1:123456789012:activity:osb-operation", ""},
		{"another service is refused", "arn:aws:lambda:us-east-1:123456789012:function:osb-worker", ""},
		{"a state machine without a name is refused", "arn:aws:states:us-east-1:123456789012:stateMachine:", ""},
		{"a name is refused", "osb-operation", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := executionPrefix(tt.machine)
			if tt.want == "" {
				if err == nil {
					t.Errorf("executionPrefix(%q) = %q, want an error", tt.machine, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("executionPrefix(%q) = %q, %v; want %q", tt.machine, got, err, tt.want)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"a short cause is kept", "deprovision requested", 32768, "deprovision requested"},
		{"a cause of exactly the limit is kept", strings.Repeat("a", 5), 5, strings.Repeat("a", 5)},
		{"a long cause is cut", "abcdef", 4, "abcd"},
		{"characters are counted, not bytes", "ééééé", 4, "éééé"},
		{"a character outside the BMP counts twice and is never split", "a😀😀", 4, "a😀"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := truncate(tt.in, tt.max)
			if got != tt.want || !utf8.ValidString(got) {
				t.Errorf("truncate(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
			}
		})
	}
}

// A misconfigured state machine ARN fails every call that needs it, before
// any call to Step Functions (the client is nil).
func TestMisconfiguredStateMachine(t *testing.T) {
	e := New(nil, map[broker.Workflow]string{broker.WorkflowOperation: "osb-operation"})
	ctx := context.Background()
	if err := e.Start(ctx, broker.WorkflowOperation, "op-1", json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), `workflow "operation"`) {
		t.Errorf("Start = %v, want an error naming the workflow", err)
	}
	if _, err := e.Describe(ctx, "op-1"); err == nil {
		t.Error("Describe = nil error, want one")
	}
	if err := e.Stop(ctx, "op-1", "why"); err == nil {
		t.Error("Stop = nil error, want one")
	}
	if _, err := e.History(ctx, "op-1"); err == nil {
		t.Error("History = nil error, want one")
	}
	if err := e.Start(ctx, "cleanup", "op-1", nil); !errors.Is(err, ErrUnknownWorkflow) {
		t.Errorf("Start of an unknown workflow = %v, want ErrUnknownWorkflow", err)
	}
}
