package cloudformation

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	cfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
)

// The fake's change sets: CreateChangeSet keeps the input; DescribeChangeSet
// answers CREATE_COMPLETE with the changes the test planted (f.changes), or
// FAILED with nothing to change when f.noUpdates; ExecuteChangeSet starts
// the update as UpdateStack did (UPDATE_IN_PROGRESS, an event with the
// token) and keeps the change set's input in the stack's updates.

type fakeChangeSet struct {
	in       *cfn.CreateChangeSetInput
	id       string
	stack    *fakeStack
	executed bool
}

func (f *fakeStacks) changeSet(nameOrID string) *fakeChangeSet {
	for _, cs := range f.changeSets {
		if cs.id == nameOrID || aws.ToString(cs.in.ChangeSetName) == nameOrID {
			return cs
		}
	}
	return nil
}

func (f *fakeStacks) CreateChangeSet(_ context.Context, in *cfn.CreateChangeSetInput, _ ...func(*cfn.Options)) (*cfn.CreateChangeSetOutput, error) {
	if err := f.enter("CreateChangeSet"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.find(aws.ToString(in.StackName))
	if s == nil {
		return nil, notExist(aws.ToString(in.StackName))
	}
	if f.changeSet(aws.ToString(in.ChangeSetName)) != nil {
		return nil, apiErr("AlreadyExistsException", "ChangeSet "+aws.ToString(in.ChangeSetName)+" already exists")
	}
	cs := &fakeChangeSet{in: in, stack: s,
		id: fmt.Sprintf("arn:aws:cloudformation:us-east-1:123456789012:changeSet/%s/%d", aws.ToString(in.ChangeSetName), len(f.changeSets))}
	f.changeSets = append(f.changeSets, cs)
	return &cfn.CreateChangeSetOutput{Id: aws.String(cs.id), StackId: s.stack.StackId}, nil
}

func (f *fakeStacks) DescribeChangeSet(_ context.Context, in *cfn.DescribeChangeSetInput, _ ...func(*cfn.Options)) (*cfn.DescribeChangeSetOutput, error) {
	if err := f.enter("DescribeChangeSet"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	cs := f.changeSet(aws.ToString(in.ChangeSetName))
	if cs == nil {
		return nil, apiErr("ChangeSetNotFound", "ChangeSet "+aws.ToString(in.ChangeSetName)+" does not exist")
	}
	out := &cfn.DescribeChangeSetOutput{ChangeSetId: aws.String(cs.id), StackId: cs.stack.stack.StackId,
		Status: types.ChangeSetStatusCreateComplete, ExecutionStatus: types.ExecutionStatusAvailable, Changes: f.changes}
	switch {
	case cs.executed:
		out.ExecutionStatus = types.ExecutionStatusExecuteInProgress
	case f.changeSetPending:
		out.Status, out.ExecutionStatus = types.ChangeSetStatusCreateInProgress, types.ExecutionStatusUnavailable
	case f.noUpdates:
		out.Status, out.ExecutionStatus, out.Changes = types.ChangeSetStatusFailed, types.ExecutionStatusUnavailable, nil
		out.StatusReason = aws.String("The submitted information didn't contain changes. Submit different information to create a change set.")
	}
	return out, nil
}

func (f *fakeStacks) ExecuteChangeSet(_ context.Context, in *cfn.ExecuteChangeSetInput, _ ...func(*cfn.Options)) (*cfn.ExecuteChangeSetOutput, error) {
	if err := f.enter("ExecuteChangeSet"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	cs := f.changeSet(aws.ToString(in.ChangeSetName))
	if cs == nil {
		return nil, apiErr("ChangeSetNotFound", "ChangeSet "+aws.ToString(in.ChangeSetName)+" does not exist")
	}
	s := cs.stack
	if strings.HasSuffix(string(s.stack.StackStatus), "_IN_PROGRESS") {
		return nil, apiErr("ValidationError", fmt.Sprintf("Stack:%s is in %s state and can not be updated.", aws.ToString(s.stack.StackName), s.stack.StackStatus))
	}
	cs.executed = true
	s.updates = append(s.updates, cs.in)
	s.stack.StackStatus = types.StackStatusUpdateInProgress
	f.eventLocked(s, aws.ToString(s.stack.StackName), stackType, types.ResourceStatusUpdateInProgress, "User Initiated", aws.ToString(in.ClientRequestToken))
	return &cfn.ExecuteChangeSetOutput{}, nil
}

func (f *fakeStacks) DeleteChangeSet(_ context.Context, in *cfn.DeleteChangeSetInput, _ ...func(*cfn.Options)) (*cfn.DeleteChangeSetOutput, error) {
	if err := f.enter("DeleteChangeSet"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, cs := range f.changeSets {
		if cs.id == aws.ToString(in.ChangeSetName) || aws.ToString(cs.in.ChangeSetName) == aws.ToString(in.ChangeSetName) {
			f.changeSets = append(f.changeSets[:i], f.changeSets[i+1:]...)
			return &cfn.DeleteChangeSetOutput{}, nil
		}
	}
	return nil, apiErr("ChangeSetNotFound", "ChangeSet "+aws.ToString(in.ChangeSetName)+" does not exist")
}

func (f *fakeStacks) SetStackPolicy(_ context.Context, in *cfn.SetStackPolicyInput, _ ...func(*cfn.Options)) (*cfn.SetStackPolicyOutput, error) {
	if err := f.enter("SetStackPolicy"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.find(aws.ToString(in.StackName))
	if s == nil {
		return nil, notExist(aws.ToString(in.StackName))
	}
	s.policy = aws.ToString(in.StackPolicyBody)
	return &cfn.SetStackPolicyOutput{}, nil
}

func (f *fakeStacks) GetTemplate(_ context.Context, in *cfn.GetTemplateInput, _ ...func(*cfn.Options)) (*cfn.GetTemplateOutput, error) {
	if err := f.enter("GetTemplate"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.find(aws.ToString(in.StackName))
	if s == nil {
		return nil, notExist(aws.ToString(in.StackName))
	}
	body := s.template
	if body == "" && s.create != nil {
		body = aws.ToString(s.create.TemplateBody)
	}
	for _, u := range s.updates {
		if u.TemplateBody != nil {
			body = aws.ToString(u.TemplateBody)
		}
	}
	return &cfn.GetTemplateOutput{TemplateBody: aws.String(body)}, nil
}
