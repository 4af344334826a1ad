package cloudformation

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	cfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/smithy-go"
)

// fakeStacks is a CloudFormation that the test moves by hand: a created
// stack stays CREATE_IN_PROGRESS, an update UPDATE_IN_PROGRESS and a
// deletion DELETE_IN_PROGRESS until the test sets another status. moto
// completes every stack at once and cannot fail one, so the in-progress,
// failed and rolled-back paths are tested here; the SDK's own encoding is
// tested against moto (moto_test.go).
type fakeStacks struct {
	mu     sync.Mutex
	stacks []*fakeStack
	// errs are returned, first in first out, by the named method instead
	// of doing anything.
	errs map[string][]error
	// calls counts calls by method.
	calls map[string]int
	// noUpdates makes UpdateStack answer "No updates are to be performed",
	// and a change set fail for want of changes.
	noUpdates bool
	// changeSets are the change sets not deleted; changes are what each
	// says it would do; changeSetPending keeps them CREATE_IN_PROGRESS.
	changeSets []*fakeChangeSet
	// changeSetInputs are every change set asked for, deleted ones too.
	changeSetInputs  []*cfn.CreateChangeSetInput
	changes          []types.Change
	changeSetPending bool
	// eventPage is how many events DescribeStackEvents returns a page.
	eventPage int
	clock     time.Time
}

type fakeStack struct {
	stack     types.Stack
	resources []types.StackResource
	events    []types.StackEvent // newest first
	create    *cfn.CreateStackInput
	updates   []*cfn.CreateChangeSetInput // executed change sets
	deletes   []*cfn.DeleteStackInput
	policy    string // set by SetStackPolicy
	template  string // the template GetTemplate answers, when the test sets one
	continues []*cfn.ContinueUpdateRollbackInput
}

var _ API = (*fakeStacks)(nil)

func newFakeStacks() *fakeStacks {
	return &fakeStacks{errs: map[string][]error{}, calls: map[string]int{}, eventPage: 2,
		clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func apiErr(code, msg string) error { return &smithy.GenericAPIError{Code: code, Message: msg} }

// failNext makes the next call of method return err.
func (f *fakeStacks) failNext(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[method] = append(f.errs[method], err)
}

func (f *fakeStacks) enter(method string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[method]++
	if q := f.errs[method]; len(q) > 0 {
		f.errs[method] = q[1:]
		return q[0]
	}
	return nil
}

func (f *fakeStacks) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// find returns the stack named by id (any) or by name (not deleted).
func (f *fakeStacks) find(nameOrID string) *fakeStack {
	for i := len(f.stacks) - 1; i >= 0; i-- {
		s := f.stacks[i]
		if aws.ToString(s.stack.StackId) == nameOrID {
			return s
		}
		if aws.ToString(s.stack.StackName) == nameOrID && s.stack.StackStatus != types.StackStatusDeleteComplete {
			return s
		}
	}
	return nil
}

// onStack is a call on the stack the input names: an error the test
// planted for method, or CloudFormation's for a stack that does not exist;
// else do, under the lock.
func onStack[Out any](f *fakeStacks, method, nameOrID string, do func(s *fakeStack) (*Out, error)) (*Out, error) {
	if err := f.enter(method); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.find(nameOrID)
	if s == nil {
		return nil, notExist(nameOrID)
	}
	return do(s)
}

// get returns a stack for the test to look at or change.
func (f *fakeStacks) get(name string) *fakeStack {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.find(name)
}

// live counts the stacks not deleted.
func (f *fakeStacks) live() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, s := range f.stacks {
		if s.stack.StackStatus != types.StackStatusDeleteComplete {
			n++
		}
	}
	return n
}

// add puts a stack of this name and status in place, as something other
// than the driver made it.
func (f *fakeStacks) add(name string, status types.StackStatus, tags ...types.Tag) *fakeStack {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &fakeStack{stack: types.Stack{
		StackName: aws.String(name), StackId: aws.String(fmt.Sprintf("arn:aws:cloudformation:us-east-1:123456789012:stack/%s/%d", name, len(f.stacks))),
		StackStatus: status, Tags: tags, CreationTime: aws.Time(f.clock),
	}}
	f.stacks = append(f.stacks, s)
	return s
}

// set changes a stack's status, with the stack's own event.
func (f *fakeStacks) set(name string, status types.StackStatus, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.find(name)
	s.stack.StackStatus = status
	s.stack.StackStatusReason = aws.String(reason)
	f.eventLocked(s, name, stackType, types.ResourceStatus(status), reason, "")
}

// resource sets one resource's status, with its event.
func (f *fakeStacks) resource(name, logicalID, typ string, status types.ResourceStatus, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.find(name)
	r := types.StackResource{LogicalResourceId: aws.String(logicalID), ResourceType: aws.String(typ),
		ResourceStatus: status, ResourceStatusReason: aws.String(reason), StackId: s.stack.StackId, StackName: s.stack.StackName}
	replaced := false
	for i := range s.resources {
		if aws.ToString(s.resources[i].LogicalResourceId) == logicalID {
			s.resources[i], replaced = r, true
		}
	}
	if !replaced {
		s.resources = append(s.resources, r)
	}
	f.eventLocked(s, logicalID, typ, status, reason, "")
}

func (f *fakeStacks) outputs(name string, kv ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.find(name)
	s.stack.Outputs = nil
	for i := 0; i+1 < len(kv); i += 2 {
		s.stack.Outputs = append(s.stack.Outputs, types.Output{OutputKey: aws.String(kv[i]), OutputValue: aws.String(kv[i+1])})
	}
}

func (f *fakeStacks) eventLocked(s *fakeStack, logicalID, typ string, status types.ResourceStatus, reason, tok string) {
	f.clock = f.clock.Add(time.Second)
	e := types.StackEvent{
		EventId: aws.String(strconv.Itoa(len(s.events))), StackId: s.stack.StackId, StackName: s.stack.StackName,
		LogicalResourceId: aws.String(logicalID), ResourceType: aws.String(typ), ResourceStatus: status,
		Timestamp: aws.Time(f.clock),
	}
	if reason != "" {
		e.ResourceStatusReason = aws.String(reason)
	}
	if tok != "" {
		e.ClientRequestToken = aws.String(tok)
	}
	s.events = append([]types.StackEvent{e}, s.events...)
}

func notExist(name string) error {
	return apiErr("ValidationError", fmt.Sprintf("Stack with id %s does not exist", name))
}

func (f *fakeStacks) CreateStack(_ context.Context, in *cfn.CreateStackInput, _ ...func(*cfn.Options)) (*cfn.CreateStackOutput, error) {
	if err := f.enter("CreateStack"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	name := aws.ToString(in.StackName)
	if f.find(name) != nil {
		// Like moto, and like CloudFormation for a token it no longer
		// remembers: the name is taken.
		return nil, apiErr("AlreadyExistsException", fmt.Sprintf("Stack [%s] already exists", name))
	}
	s := &fakeStack{create: in, stack: types.Stack{
		StackName: in.StackName, StackId: aws.String(fmt.Sprintf("arn:aws:cloudformation:us-east-1:123456789012:stack/%s/%d", name, len(f.stacks))),
		StackStatus: types.StackStatusCreateInProgress, Parameters: in.Parameters, Tags: in.Tags, CreationTime: aws.Time(f.clock),
		RoleARN: in.RoleARN, Capabilities: in.Capabilities,
	}}
	f.stacks = append(f.stacks, s)
	f.eventLocked(s, name, stackType, types.ResourceStatusCreateInProgress, "User Initiated", aws.ToString(in.ClientRequestToken))
	return &cfn.CreateStackOutput{StackId: s.stack.StackId}, nil
}

func (f *fakeStacks) DeleteStack(_ context.Context, in *cfn.DeleteStackInput, _ ...func(*cfn.Options)) (*cfn.DeleteStackOutput, error) {
	if err := f.enter("DeleteStack"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.find(aws.ToString(in.StackName))
	if s == nil || s.stack.StackStatus == types.StackStatusDeleteComplete {
		return &cfn.DeleteStackOutput{}, nil // as CloudFormation: deleting nothing succeeds
	}
	s.deletes = append(s.deletes, in)
	s.stack.StackStatus = types.StackStatusDeleteInProgress
	f.eventLocked(s, aws.ToString(s.stack.StackName), stackType, types.ResourceStatusDeleteInProgress, "User Initiated", aws.ToString(in.ClientRequestToken))
	return &cfn.DeleteStackOutput{}, nil
}

func (f *fakeStacks) DescribeStacks(_ context.Context, in *cfn.DescribeStacksInput, _ ...func(*cfn.Options)) (*cfn.DescribeStacksOutput, error) {
	return onStack(f, "DescribeStacks", aws.ToString(in.StackName), func(s *fakeStack) (*cfn.DescribeStacksOutput, error) {
		return &cfn.DescribeStacksOutput{Stacks: []types.Stack{s.stack}}, nil
	})
}

func (f *fakeStacks) DescribeStackResources(_ context.Context, in *cfn.DescribeStackResourcesInput, _ ...func(*cfn.Options)) (*cfn.DescribeStackResourcesOutput, error) {
	return onStack(f, "DescribeStackResources", aws.ToString(in.StackName), func(s *fakeStack) (*cfn.DescribeStackResourcesOutput, error) {
		return &cfn.DescribeStackResourcesOutput{StackResources: append([]types.StackResource(nil), s.resources...)}, nil
	})
}

func (f *fakeStacks) DescribeStackEvents(_ context.Context, in *cfn.DescribeStackEventsInput, _ ...func(*cfn.Options)) (*cfn.DescribeStackEventsOutput, error) {
	return onStack(f, "DescribeStackEvents", aws.ToString(in.StackName), func(s *fakeStack) (*cfn.DescribeStackEventsOutput, error) {
		start, _ := strconv.Atoi(aws.ToString(in.NextToken))
		end := min(start+f.eventPage, len(s.events))
		out := &cfn.DescribeStackEventsOutput{StackEvents: append([]types.StackEvent(nil), s.events[start:end]...)}
		if end < len(s.events) {
			out.NextToken = aws.String(strconv.Itoa(end))
		}
		return out, nil
	})
}

// ContinueUpdateRollback continues the rollback of a stack that is
// UPDATE_ROLLBACK_FAILED, as CloudFormation does: a stack in another state
// is refused, and so is a resource to skip that is not UPDATE_FAILED; the
// resources skipped become UPDATE_COMPLETE, and the stack
// UPDATE_ROLLBACK_IN_PROGRESS until the test sets how it ends.
func (f *fakeStacks) ContinueUpdateRollback(_ context.Context, in *cfn.ContinueUpdateRollbackInput, _ ...func(*cfn.Options)) (*cfn.ContinueUpdateRollbackOutput, error) {
	name := aws.ToString(in.StackName)
	return onStack(f, "ContinueUpdateRollback", name, func(s *fakeStack) (*cfn.ContinueUpdateRollbackOutput, error) {
		if s.stack.StackStatus != types.StackStatusUpdateRollbackFailed {
			return nil, apiErr("ValidationError", fmt.Sprintf("Stack %s is in %s state and can not continue the update rollback.", name, s.stack.StackStatus))
		}
		for _, skip := range in.ResourcesToSkip {
			ok := false
			for _, r := range s.resources {
				ok = ok || aws.ToString(r.LogicalResourceId) == skip && r.ResourceStatus == types.ResourceStatusUpdateFailed
			}
			if !ok {
				return nil, apiErr("ValidationError", fmt.Sprintf("Resource %s is not in UPDATE_FAILED state and cannot be skipped.", skip))
			}
		}
		s.continues = append(s.continues, in)
		s.stack.StackStatus = types.StackStatusUpdateRollbackInProgress
		tok := aws.ToString(in.ClientRequestToken)
		f.eventLocked(s, aws.ToString(s.stack.StackName), stackType, types.ResourceStatusUpdateRollbackInProgress, "User Initiated", tok)
		for _, skip := range in.ResourcesToSkip {
			for i := range s.resources {
				if r := &s.resources[i]; aws.ToString(r.LogicalResourceId) == skip {
					r.ResourceStatus = types.ResourceStatusUpdateComplete
					f.eventLocked(s, skip, aws.ToString(r.ResourceType), types.ResourceStatusUpdateComplete, "Resource skipped during the rollback", tok)
				}
			}
		}
		return &cfn.ContinueUpdateRollbackOutput{}, nil
	})
}
