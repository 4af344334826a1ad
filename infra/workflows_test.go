package infra

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadWorkflows(t *testing.T) {
	const valid = `{"StartAt": "A", "TimeoutSeconds": 60, "States": {"A": {"Type": "Task", "Resource": "${WorkerFunctionArn}", "End": true}}}`
	tests := []struct {
		name    string
		files   map[string]string
		wantErr string
		want    []string
	}{
		{"every workflow is loaded, in name order", map[string]string{"operation.asl.json": valid, "cleanup.asl.json": valid, "notes.json": "{}"}, "", []string{"cleanup", "operation"}},
		{"a workflow without a top-level TimeoutSeconds is refused", map[string]string{"operation.asl.json": `{"StartAt": "A", "States": {"A": {"Type": "Succeed"}}}`}, "TimeoutSeconds", nil},
		{"a workflow without StartAt is refused", map[string]string{"operation.asl.json": `{"TimeoutSeconds": 60, "States": {"A": {"Type": "Succeed"}}}`}, "StartAt", nil},
		{"a placeholder the stack does not substitute is refused", map[string]string{"operation.asl.json": strings.Replace(valid, "WorkerFunctionArn", "TableName", 1)}, "${TableName} is not substituted", nil},
		{"a file that is not JSON is refused", map[string]string{"operation.asl.json": `{"StartAt": `}, "operation.asl.json", nil},
		{"a workflow named otherwise than in lower-case words is refused", map[string]string{"operation.asl.json": valid, "Clean Up.asl.json": valid}, "lower-case words", nil},
		{"a directory without the operation workflow is refused", map[string]string{"cleanup.asl.json": valid}, "no operation.asl.json", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range tt.files {
				write(t, filepath.Join(dir, name), text)
			}
			workflows, err := loadWorkflows(dir, []string{substitutionWorkerARN})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, w := range workflows {
				names = append(names, w.name)
				if w.definition != tt.files[w.name+aslSuffix] {
					t.Errorf("workflow %s: definition %q is not the file's text", w.name, w.definition)
				}
			}
			if strings.Join(names, " ") != strings.Join(tt.want, " ") {
				t.Errorf("workflows %v, want %v", names, tt.want)
			}
		})
	}
}

func TestWorkflowNames(t *testing.T) {
	tests := []struct {
		name, workflow, constructID, envVar, stateMachineName string
	}{
		{"the operation workflow's ARN is BROKER_OPERATION_STATE_MACHINE_ARN", "operation", "OperationStateMachine", "BROKER_OPERATION_STATE_MACHINE_ARN", "ServerlessOsb-operation"},
		{"the cleanup workflow's ARN is BROKER_CLEANUP_STATE_MACHINE_ARN", "cleanup", "CleanupStateMachine", "BROKER_CLEANUP_STATE_MACHINE_ARN", "ServerlessOsb-cleanup"},
		{"a workflow of several words joined by - keeps its words", "long-cleanup", "LongCleanupStateMachine", "BROKER_LONG_CLEANUP_STATE_MACHINE_ARN", "ServerlessOsb-long-cleanup"},
		{"a workflow of several words joined by _ keeps its words", "long_cleanup", "LongCleanupStateMachine", "BROKER_LONG_CLEANUP_STATE_MACHINE_ARN", "ServerlessOsb-long_cleanup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := workflow{name: tt.workflow}
			if got := w.constructID(); got != tt.constructID {
				t.Errorf("construct id %s, want %s", got, tt.constructID)
			}
			if got := w.envVar(); got != tt.envVar {
				t.Errorf("variable %s, want %s", got, tt.envVar)
			}
			if got := w.stateMachineName("ServerlessOsb"); got != tt.stateMachineName {
				t.Errorf("state machine name %s, want %s", got, tt.stateMachineName)
			}
		})
	}
}
