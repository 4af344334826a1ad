package broker

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// The Engine port: the workflows of statemachines/, and what an engine
// reports of their executions.

// Workflow names a state machine in statemachines/ (without .asl.json).
type Workflow string

// The workflows.
const (
	// WorkflowOperation runs every provision, update, deprovision, bind and unbind.
	WorkflowOperation Workflow = "operation"
	// WorkflowCleanup deletes one detached resource, with retries over hours.
	WorkflowCleanup Workflow = "cleanup"
)

// ExecutionStatus is the status of a workflow execution, spelled as Step
// Functions does.
type ExecutionStatus string

const (
	ExecutionRunning   ExecutionStatus = "RUNNING"
	ExecutionSucceeded ExecutionStatus = "SUCCEEDED"
	ExecutionFailed    ExecutionStatus = "FAILED"
	ExecutionTimedOut  ExecutionStatus = "TIMED_OUT"
	ExecutionAborted   ExecutionStatus = "ABORTED"
)

// Execution is what an Engine reports about one execution.
type Execution struct {
	Name      string
	Workflow  Workflow
	Status    ExecutionStatus
	Input     json.RawMessage
	Output    json.RawMessage
	Error     string // for FAILED, TIMED_OUT, ABORTED
	Cause     string
	StartedAt time.Time
	StoppedAt time.Time
}

// ErrExecutionNotFound is returned by Describe for an unknown execution.
var ErrExecutionNotFound = errors.New("execution not found")

// ErrExecutionExists is returned by Start when an execution with that name
// exists with a different input.
var ErrExecutionExists = errors.New("execution already exists with a different input")

// Engine runs the workflows of statemachines/. Names are unique: starting a
// name again with the same input returns the existing execution (nil error),
// so a lost start can be retried safely.
type Engine interface {
	Start(ctx context.Context, workflow Workflow, name string, input json.RawMessage) error
	Describe(ctx context.Context, name string) (Execution, error)
	// Stop aborts a running execution; stopping one that has ended is not an error.
	Stop(ctx context.Context, name, cause string) error
}
