package cloudformation

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	cfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
)

// maxEventPages bounds how far back the driver reads a stack's events.
const maxEventPages = 10

// stackType is the resource type of the stack's own events.
const stackType = "AWS::CloudFormation::Stack"

// failure describes a failed creation or update for the user: lead (if
// any), then what CloudFormation said about the first resource that failed in the
// stack's latest change (events are newest first; the scan stops at the
// event that started that change, and keeps the oldest failure, since
// later ones are mostly "Resource creation cancelled").
func (d *Driver) failure(ctx context.Context, stack *types.Stack, lead string) string {
	var first *types.StackEvent
	stackReason := ""
	p := cfn.NewDescribeStackEventsPaginator(d.API, &cfn.DescribeStackEventsInput{StackName: stack.StackId})
scan:
	for page := 0; p.HasMorePages() && page < maxEventPages; page++ {
		out, err := p.NextPage(ctx)
		if err != nil {
			break // describe what was read; the stack's own reason is the fallback
		}
		for i := range out.StackEvents {
			e := &out.StackEvents[i]
			if isStackEvent(e, stack) {
				switch e.ResourceStatus {
				case types.ResourceStatusCreateInProgress, types.ResourceStatusUpdateInProgress, types.ResourceStatusDeleteInProgress:
					break scan // the start of the latest change
				}
				if r := aws.ToString(e.ResourceStatusReason); r != "" && isFailedOrRollingBack(e.ResourceStatus) {
					stackReason = r
				}
				continue
			}
			if strings.HasSuffix(string(e.ResourceStatus), "_FAILED") && aws.ToString(e.ResourceStatusReason) != "" {
				first = e
			}
		}
	}
	if first != nil {
		what := fmt.Sprintf("The %s %q could not be %s: %s", resourceNoun(aws.ToString(first.ResourceType)),
			aws.ToString(first.LogicalResourceId), verb(first.ResourceStatus), clip(sentence(aws.ToString(first.ResourceStatusReason))))
		if lead == "" {
			return what
		}
		return lead + ". " + what
	}
	if lead == "" {
		lead = "The stack could not be created"
	}
	switch {
	case stackReason != "":
		return fmt.Sprintf("%s: %s", lead, clip(sentence(stackReason)))
	case aws.ToString(stack.StackStatusReason) != "":
		return fmt.Sprintf("%s: %s", lead, clip(sentence(aws.ToString(stack.StackStatusReason))))
	}
	return fmt.Sprintf("%s (%s); CloudFormation gave no reason. The stack %s's events may tell more.", lead, stack.StackStatus, aws.ToString(stack.StackName))
}

// deleteFailure names the resources CloudFormation could not delete.
func (d *Driver) deleteFailure(ctx context.Context, stack *types.Stack, tries int) string {
	lead := fmt.Sprintf("The stack %s could not be deleted (tried %d times)", aws.ToString(stack.StackName), tries)
	out, err := d.API.DescribeStackResources(ctx, &cfn.DescribeStackResourcesInput{StackName: stack.StackId})
	var failed []string
	if err == nil {
		for _, r := range out.StackResources {
			if r.ResourceStatus == types.ResourceStatusDeleteFailed {
				failed = append(failed, fmt.Sprintf("%s (%s): %s", aws.ToString(r.LogicalResourceId),
					aws.ToString(r.ResourceType), strings.TrimSuffix(strings.TrimSpace(aws.ToString(r.ResourceStatusReason)), ".")))
			}
		}
	}
	if len(failed) > 0 {
		return clip(fmt.Sprintf("%s. CloudFormation could not delete %s.", lead, strings.Join(failed, "; ")))
	}
	if r := aws.ToString(stack.StackStatusReason); r != "" {
		return clip(fmt.Sprintf("%s: %s", lead, sentence(r)))
	}
	return lead + "."
}

// deleteFailures counts the stack's failed deletions, from its events.
func (d *Driver) deleteFailures(ctx context.Context, stack *types.Stack) (int, error) {
	n := 0
	p := cfn.NewDescribeStackEventsPaginator(d.API, &cfn.DescribeStackEventsInput{StackName: stack.StackId})
	for page := 0; p.HasMorePages() && page < maxEventPages; page++ {
		out, err := p.NextPage(ctx)
		if err != nil {
			return 0, classify("read the stack's events", err)
		}
		for i := range out.StackEvents {
			if e := &out.StackEvents[i]; isStackEvent(e, stack) && e.ResourceStatus == types.ResourceStatusDeleteFailed {
				n++
			}
		}
	}
	return n, nil
}

func isStackEvent(e *types.StackEvent, stack *types.Stack) bool {
	return aws.ToString(e.ResourceType) == stackType && aws.ToString(e.LogicalResourceId) == aws.ToString(stack.StackName)
}

func isFailedOrRollingBack(s types.ResourceStatus) bool {
	return strings.HasSuffix(string(s), "_FAILED") || strings.Contains(string(s), "ROLLBACK")
}

// resourceNoun names a resource type for a sentence: AWS::S3::Bucket is
// "S3 Bucket".
func resourceNoun(t string) string {
	return strings.ReplaceAll(strings.TrimPrefix(t, "AWS::"), "::", " ")
}

func verb(s types.ResourceStatus) string {
	switch s {
	case types.ResourceStatusCreateFailed:
		return "created"
	case types.ResourceStatusUpdateFailed:
		return "updated"
	case types.ResourceStatusDeleteFailed:
		return "deleted"
	}
	return "changed"
}
