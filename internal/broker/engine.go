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

// The inputs of the executions the broker starts are the Engine port's:
// Start takes JSON, and the workflows read it (WorkflowInput, CleanupInput,
// CampaignInput). Nothing else of the domain has the workflows' JSON: the
// Tasks' payloads and outputs are package steps'.

// campaignInput is CampaignInput's JSON. Its options are what the Plan
// state passes on to the upgrade_plan Task (package steps decodes them).
type campaignInput struct {
	CampaignID string       `json:"campaign_id"`
	Options    inputOptions `json:"options"`
	Part       int          `json:"part"`
}

type inputOptions struct {
	PlanIDs      []string `json:"plan_ids,omitempty"`
	All          bool     `json:"all,omitempty"`
	Canaries     int      `json:"canaries,omitempty"`
	CanaryOrgs   []string `json:"canary_orgs,omitempty"`
	CanarySpaces []string `json:"canary_spaces,omitempty"`
	MaxInFlight  int      `json:"max_in_flight"`
	MaxFailures  int      `json:"max_failures"`
	DryRun       bool     `json:"dry_run,omitempty"`
	Skip         []string `json:"skip,omitempty"`
	Defer        []string `json:"defer,omitempty"`
}

// MarshalJSON is the input an upgrade execution starts with.
func (in CampaignInput) MarshalJSON() ([]byte, error) {
	return json.Marshal(campaignInput{CampaignID: in.CampaignID, Options: inputOptions(in.Options), Part: in.Part})
}

// UnmarshalJSON reads an upgrade execution's input.
func (in *CampaignInput) UnmarshalJSON(data []byte) error {
	var w campaignInput
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*in = CampaignInput{CampaignID: w.CampaignID, Options: CampaignOptions(w.Options), Part: w.Part}
	return nil
}
