package infra

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/serverless-osb/broker/internal/env"
)

// workflowOperation is the workflow every asynchronous operation runs; the
// api function cannot work without it.
const workflowOperation = "operation"

// workflowCleanup is the workflow that deletes a detached resource; it ends
// failed when it gives up, which its alarm says.
const workflowCleanup = "cleanup"

// workflowUpgrade is the fleet upgrade that ops upgrade starts.
const workflowUpgrade = "upgrade"

// aslSuffix names the files of StateMachinesDir that are workflows.
const aslSuffix = ".asl.json"

// workflow is one statemachines/*.asl.json.
type workflow struct {
	// name is the file's name without .asl.json: "operation".
	name string
	// definition is the file's text, which the state machine gets inline.
	definition string
}

// envVar is the functions' variable holding the state machine's ARN
// (env.StateMachineARN): BROKER_OPERATION_STATE_MACHINE_ARN.
func (w workflow) envVar() string { return env.StateMachineARN(w.name) }

// stateMachineName is the state machine's name in a stack: STACK-NAME,
// ServerlessOsb-operation. The name is fixed, not made up by CloudFormation,
// so that the worker, which the state machine's Task states name, can know
// the state machine's ARN without a reference to it (a circular
// dependency).
func (w workflow) stateMachineName(stackName string) string {
	return stackName + "-" + w.name
}

// maxStateMachineName is the longest name Step Functions accepts.
const maxStateMachineName = 80

// constructID is the state machine's construct id: OperationStateMachine.
func (w workflow) constructID() string {
	var b strings.Builder
	for part := range strings.FieldsFuncSeq(w.name, func(r rune) bool { return r == '-' || r == '_' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String() + "StateMachine"
}

var (
	workflowName = regexp.MustCompile(`^[a-z][a-z0-9]*([-_][a-z0-9]+)*$`)
	// placeholder is a DefinitionSubstitutions reference: ${WorkerFunctionArn}.
	placeholder = regexp.MustCompile(`\$\{([^}]*)\}`)
)

// loadWorkflows reads every *.asl.json of dir, sorted by name, and checks
// what a deployment relies on and Step Functions would only report at
// deploy time or later: the file is a JSON object with StartAt and States,
// it bounds its executions with a top-level TimeoutSeconds (so none runs
// for the Standard maximum of a year), and every ${...} in it is one of
// substitutions.
func loadWorkflows(dir string, substitutions []string) ([]workflow, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*"+aslSuffix))
	if err != nil {
		return nil, fmt.Errorf("workflows in %s: %w", dir, err)
	}
	slices.Sort(paths)
	var workflows []workflow
	var errs []error
	for _, path := range paths {
		w, err := loadWorkflow(path, substitutions)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		workflows = append(workflows, w)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(workflows, func(w workflow) bool { return w.name == workflowOperation }) {
		return nil, fmt.Errorf("workflows in %s: no %s%s", dir, workflowOperation, aslSuffix)
	}
	return workflows, nil
}

func loadWorkflow(path string, substitutions []string) (workflow, error) {
	w := workflow{name: strings.TrimSuffix(filepath.Base(path), aslSuffix)}
	if !workflowName.MatchString(w.name) {
		return workflow{}, fmt.Errorf("%s: name the file lower-case words joined by - or _", path)
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return workflow{}, fmt.Errorf("workflow %s: %w", w.name, err)
	}
	w.definition = string(text)
	var asl struct {
		StartAt        string                     `json:"StartAt"`
		States         map[string]json.RawMessage `json:"States"`
		TimeoutSeconds *int                       `json:"TimeoutSeconds"`
	}
	if err := json.Unmarshal(text, &asl); err != nil {
		return workflow{}, fmt.Errorf("%s: %w", path, err)
	}
	var errs []error
	if asl.StartAt == "" || len(asl.States) == 0 {
		errs = append(errs, errors.New("StartAt and States are required"))
	}
	if asl.TimeoutSeconds == nil || *asl.TimeoutSeconds <= 0 {
		errs = append(errs, errors.New("a positive top-level TimeoutSeconds is required"))
	}
	for _, m := range placeholder.FindAllStringSubmatch(w.definition, -1) {
		if !slices.Contains(substitutions, m[1]) {
			errs = append(errs, fmt.Errorf("%s is not substituted by the stack (it substitutes %s)", m[0], strings.Join(substitutions, ", ")))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return workflow{}, fmt.Errorf("%s: %w", path, err)
	}
	return w, nil
}
