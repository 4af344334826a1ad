package sfn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode/utf16"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/serverless-osb/broker/internal/broker"
)

// Config is what the broker's configuration says about this engine.
type Config struct {
	// StateMachines holds the ARN of the state machine of each workflow.
	StateMachines map[broker.Workflow]string
}

// ErrorAborted is the Error given to StopExecution. Step Functions leaves it
// to the caller; like the local engine, this one always sets it so that
// every ended execution says why.
const ErrorAborted = "States.Aborted"

// MaxCauseLength is the longest cause StopExecution accepts, in UTF-16 code
// units (which is how a Java service counts characters); Stop truncates.
const MaxCauseLength = 32768

// ErrUnknownWorkflow is returned by Start for a workflow with no state
// machine configured.
var ErrUnknownWorkflow = errors.New("unknown workflow")

// historyPageSize is the largest page GetExecutionHistory returns.
const historyPageSize = 1000

// Engine runs workflows as Step Functions executions. It keeps no state of
// its own and is safe for concurrent use.
type Engine struct {
	client *sfn.Client
	// machines lists the state machines in the order Describe, Stop and
	// History look for an execution: the operation workflow's first (the
	// broker names nearly all executions it asks about after an
	// operation), then the others by workflow name.
	machines   []machine
	byWorkflow map[broker.Workflow]machine
}

// machine is the state machine of one workflow.
type machine struct {
	workflow broker.Workflow
	arn      string
	// executionPrefix is the ARN of its executions without their name:
	// arn:<partition>:states:<region>:<account>:execution:<machine name>:
	executionPrefix string
	// err is why arn is not a state machine ARN; every use returns it.
	err error
}

func (m machine) executionARN(name string) (*string, error) {
	if m.err != nil {
		return nil, m.err
	}
	return aws.String(m.executionPrefix + name), nil
}

var _ broker.Engine = (*Engine)(nil)

// New returns an engine that runs each workflow on the state machine whose
// ARN stateMachineARNs gives. An ARN that is not a state machine's makes
// every call that would use it fail.
func New(client *sfn.Client, stateMachineARNs map[broker.Workflow]string) *Engine {
	e := &Engine{client: client, byWorkflow: make(map[broker.Workflow]machine, len(stateMachineARNs))}
	for w, a := range stateMachineARNs {
		m := machine{workflow: w, arn: a}
		m.executionPrefix, m.err = executionPrefix(a)
		if m.err != nil {
			m.err = fmt.Errorf("state machine of workflow %q: %w", w, m.err)
		}
		e.machines = append(e.machines, m)
		e.byWorkflow[w] = m
	}
	slices.SortFunc(e.machines, func(a, b machine) int {
		switch {
		case a.workflow == b.workflow:
			return 0
		case a.workflow == broker.WorkflowOperation:
			return -1
		case b.workflow == broker.WorkflowOperation:
			return 1
		}
		return strings.Compare(string(a.workflow), string(b.workflow))
	})
	return e
}

// executionPrefix derives, from a state machine ARN (optionally qualified by
// a version or an alias), the ARN of its executions without their name.
func executionPrefix(stateMachineARN string) (string, error) {
	a, err := arn.Parse(stateMachineARN)
	if err != nil {
		return "", fmt.Errorf("%q: %w", stateMachineARN, err)
	}
	resource := strings.Split(a.Resource, ":")
	if a.Service != "states" || len(resource) < 2 || len(resource) > 3 || resource[0] != "stateMachine" || resource[1] == "" {
		return "", fmt.Errorf("%q is not the ARN of a state machine", stateMachineARN)
	}
	return fmt.Sprintf("arn:%s:states:%s:%s:execution:%s:", a.Partition, a.Region, a.AccountID, resource[1]), nil
}

// Start starts an execution of workflow named name, unless one with that
// name exists: then it returns nil if that one has the same input (compared
// as JSON), whether it still runs or not, and broker.ErrExecutionExists
// otherwise. Step Functions itself only accepts the same name and input
// again while the execution runs, so an ExecutionAlreadyExists answer is
// settled by describing the execution.
func (e *Engine) Start(ctx context.Context, workflow broker.Workflow, name string, input json.RawMessage) error {
	m, ok := e.byWorkflow[workflow]
	if !ok {
		return fmt.Errorf("start %s: %w: %q", name, ErrUnknownWorkflow, workflow)
	}
	executionARN, err := m.executionARN(name)
	if err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	if len(strings.TrimSpace(string(input))) == 0 {
		input = json.RawMessage(`{}`)
	}
	if !json.Valid(input) {
		return fmt.Errorf("start %s: input is not JSON", name)
	}
	_, err = e.client.StartExecution(ctx, &sfn.StartExecutionInput{
		StateMachineArn: aws.String(m.arn),
		Name:            aws.String(name),
		Input:           aws.String(string(input)),
	})
	var exists *types.ExecutionAlreadyExists
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &exists):
		return fmt.Errorf("start %s: %w", name, err)
	}
	out, err := e.client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: executionARN})
	if err != nil {
		return fmt.Errorf("start %s: it exists, but describing it failed: %w", name, err)
	}
	if !sameJSON(aws.ToString(out.Input), input) {
		return fmt.Errorf("start %s: %w", name, broker.ErrExecutionExists)
	}
	return nil
}

// Describe returns what Step Functions reports about an execution; a
// PENDING_REDRIVE execution is reported RUNNING, since it will run again.
func (e *Engine) Describe(ctx context.Context, name string) (broker.Execution, error) {
	for _, m := range e.machines {
		executionARN, err := m.executionARN(name)
		if err != nil {
			return broker.Execution{}, fmt.Errorf("describe %s: %w", name, err)
		}
		out, err := e.client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: executionARN})
		if notFound(err) {
			continue
		}
		if err != nil {
			return broker.Execution{}, fmt.Errorf("describe %s: %w", name, err)
		}
		x, err := execution(m.workflow, name, out)
		if err != nil {
			return broker.Execution{}, fmt.Errorf("describe %s: %w", name, err)
		}
		return x, nil
	}
	return broker.Execution{}, fmt.Errorf("describe %s: %w", name, broker.ErrExecutionNotFound)
}

func execution(w broker.Workflow, name string, out *sfn.DescribeExecutionOutput) (broker.Execution, error) {
	x := broker.Execution{
		Name:      name,
		Workflow:  w,
		Error:     aws.ToString(out.Error),
		Cause:     aws.ToString(out.Cause),
		StartedAt: aws.ToTime(out.StartDate),
		StoppedAt: aws.ToTime(out.StopDate),
	}
	switch out.Status {
	case types.ExecutionStatusRunning, types.ExecutionStatusPendingRedrive:
		x.Status = broker.ExecutionRunning
	case types.ExecutionStatusSucceeded:
		x.Status = broker.ExecutionSucceeded
	case types.ExecutionStatusFailed:
		x.Status = broker.ExecutionFailed
	case types.ExecutionStatusTimedOut:
		x.Status = broker.ExecutionTimedOut
	case types.ExecutionStatusAborted:
		x.Status = broker.ExecutionAborted
	default:
		// Not guessed: the broker records a failure for any status but
		// RUNNING.
		return x, fmt.Errorf("unknown execution status %q", out.Status)
	}
	if out.Input != nil {
		x.Input = json.RawMessage(*out.Input)
	}
	if out.Output != nil {
		x.Output = json.RawMessage(*out.Output)
	}
	return x, nil
}

// Stop aborts a running execution with error ErrorAborted and cause (cut to
// MaxCauseLength). Step Functions accepts stopping an ended execution and
// changes nothing.
func (e *Engine) Stop(ctx context.Context, name, cause string) error {
	for _, m := range e.machines {
		executionARN, err := m.executionARN(name)
		if err != nil {
			return fmt.Errorf("stop %s: %w", name, err)
		}
		_, err = e.client.StopExecution(ctx, &sfn.StopExecutionInput{
			ExecutionArn: executionARN,
			Error:        aws.String(ErrorAborted),
			Cause:        aws.String(truncate(cause, MaxCauseLength)),
		})
		if notFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("stop %s: %w", name, err)
		}
		return nil
	}
	return fmt.Errorf("stop %s: %w", name, broker.ErrExecutionNotFound)
}

// History returns the names of the states an execution entered, in order
// (its StateEntered events). A state retried appears once.
func (e *Engine) History(ctx context.Context, name string) ([]string, error) {
	for _, m := range e.machines {
		executionARN, err := m.executionARN(name)
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", name, err)
		}
		states, err := e.statesEntered(ctx, executionARN)
		if notFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", name, err)
		}
		return states, nil
	}
	return nil, fmt.Errorf("history of %s: %w", name, broker.ErrExecutionNotFound)
}

func (e *Engine) statesEntered(ctx context.Context, executionARN *string) ([]string, error) {
	pages := sfn.NewGetExecutionHistoryPaginator(e.client, &sfn.GetExecutionHistoryInput{
		ExecutionArn:         executionARN,
		MaxResults:           historyPageSize,
		IncludeExecutionData: aws.Bool(false),
	})
	states := []string{}
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, ev := range page.Events {
			if d := ev.StateEnteredEventDetails; d != nil {
				states = append(states, aws.ToString(d.Name))
			}
		}
	}
	return states, nil
}

func notFound(err error) bool {
	var e *types.ExecutionDoesNotExist
	return errors.As(err, &e)
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(a string, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// truncate cuts s to at most max UTF-16 code units, on a character
// boundary.
func truncate(s string, max int) string {
	n := 0
	for i, r := range s {
		w := utf16.RuneLen(r)
		if w < 0 {
			w = 1 // an invalid byte, sent as U+FFFD
		}
		if n+w > max {
			return s[:i]
		}
		n += w
	}
	return s
}
