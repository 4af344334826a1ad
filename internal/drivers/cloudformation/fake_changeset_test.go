package cloudformation

import (
	"context"
	"fmt"
	"slices"
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

// onChangeSet is a call on the change set the input names: an error the
// test planted for method, or CloudFormation's for a change set that does
// not exist; else do, under the lock.
func onChangeSet[Out any](f *fakeStacks, method, nameOrID string, do func(cs *fakeChangeSet) (*Out, error)) (*Out, error) {
	if err := f.enter(method); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	cs := f.changeSet(nameOrID)
	if cs == nil {
		return nil, apiErr("ChangeSetNotFound", "ChangeSet "+nameOrID+" does not exist")
	}
	return do(cs)
}

func (f *fakeStacks) CreateChangeSet(_ context.Context, in *cfn.CreateChangeSetInput, _ ...func(*cfn.Options)) (*cfn.CreateChangeSetOutput, error) {
	return onStack(f, "CreateChangeSet", aws.ToString(in.StackName), func(s *fakeStack) (*cfn.CreateChangeSetOutput, error) {
		if f.changeSet(aws.ToString(in.ChangeSetName)) != nil {
			return nil, apiErr("AlreadyExistsException", "ChangeSet "+aws.ToString(in.ChangeSetName)+" already exists")
		}
		cs := &fakeChangeSet{in: in, stack: s,
			id: fmt.Sprintf("arn:aws:cloudformation:us-east-1:123456789012:changeSet/%s/%d", aws.ToString(in.ChangeSetName), len(f.changeSets))}
		f.changeSets = append(f.changeSets, cs)
		f.changeSetInputs = append(f.changeSetInputs, in)
		return &cfn.CreateChangeSetOutput{Id: aws.String(cs.id), StackId: s.stack.StackId}, nil
	})
}

func (f *fakeStacks) DescribeChangeSet(_ context.Context, in *cfn.DescribeChangeSetInput, _ ...func(*cfn.Options)) (*cfn.DescribeChangeSetOutput, error) {
	return onChangeSet(f, "DescribeChangeSet", aws.ToString(in.ChangeSetName), func(cs *fakeChangeSet) (*cfn.DescribeChangeSetOutput, error) {
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
	})
}

func (f *fakeStacks) ExecuteChangeSet(_ context.Context, in *cfn.ExecuteChangeSetInput, _ ...func(*cfn.Options)) (*cfn.ExecuteChangeSetOutput, error) {
	return onChangeSet(f, "ExecuteChangeSet", aws.ToString(in.ChangeSetName), func(cs *fakeChangeSet) (*cfn.ExecuteChangeSetOutput, error) {
		s := cs.stack
		if strings.HasSuffix(string(s.stack.StackStatus), "_IN_PROGRESS") {
			return nil, apiErr("ValidationError", fmt.Sprintf("Stack:%s is in %s state and can not be updated.", aws.ToString(s.stack.StackName), s.stack.StackStatus))
		}
		cs.executed = true
		s.updates = append(s.updates, cs.in)
		s.stack.StackStatus = types.StackStatusUpdateInProgress
		f.eventLocked(s, aws.ToString(s.stack.StackName), stackType, types.ResourceStatusUpdateInProgress, "User Initiated", aws.ToString(in.ClientRequestToken))
		return &cfn.ExecuteChangeSetOutput{}, nil
	})
}

func (f *fakeStacks) DeleteChangeSet(_ context.Context, in *cfn.DeleteChangeSetInput, _ ...func(*cfn.Options)) (*cfn.DeleteChangeSetOutput, error) {
	return onChangeSet(f, "DeleteChangeSet", aws.ToString(in.ChangeSetName), func(cs *fakeChangeSet) (*cfn.DeleteChangeSetOutput, error) {
		f.changeSets = slices.DeleteFunc(f.changeSets, func(c *fakeChangeSet) bool { return c == cs })
		return &cfn.DeleteChangeSetOutput{}, nil
	})
}

func (f *fakeStacks) SetStackPolicy(_ context.Context, in *cfn.SetStackPolicyInput, _ ...func(*cfn.Options)) (*cfn.SetStackPolicyOutput, error) {
	return onStack(f, "SetStackPolicy", aws.ToString(in.StackName), func(s *fakeStack) (*cfn.SetStackPolicyOutput, error) {
		s.policy = aws.ToString(in.StackPolicyBody)
		return &cfn.SetStackPolicyOutput{}, nil
	})
}

func (f *fakeStacks) GetTemplate(_ context.Context, in *cfn.GetTemplateInput, _ ...func(*cfn.Options)) (*cfn.GetTemplateOutput, error) {
	return onStack(f, "GetTemplate", aws.ToString(in.StackName), func(s *fakeStack) (*cfn.GetTemplateOutput, error) {
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
	})
}
