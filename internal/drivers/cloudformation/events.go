package cloudformation

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	cfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/serverless-osb/broker/internal/broker"
)

// maxEventPages bounds how far back the driver reads a stack's events.
const maxEventPages = 10

// stackType is the resource type of the stack's own events.
const stackType = "AWS::CloudFormation::Stack"

// failure describes a failed creation or update for the user: lead (if
// any), then the first resource that failed in the stack's latest change
// (events are newest first; the scan stops at the event that started that
// change, and keeps the oldest failure, since later ones are mostly
// "Resource creation cancelled"), by its logical id and the class of
// CloudFormation's reason (reasonClass). CloudFormation's own text can name
// the account, the service role's ARN and the IAM action refused, which
// every user of the platform would read in last_operation: the driver logs
// it, with the operation's ids, and gives it as the failure's Detail,
// which the operation's record keeps for the operator (ops operation).
func (d *Driver) failure(ctx context.Context, c broker.Change, stack *types.Stack, lead string) *broker.Failure {
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
		reason := aws.ToString(first.ResourceStatusReason)
		logged := d.logReason(ctx, c, stack, "stack change failed", reason, "resource", aws.ToString(first.LogicalResourceId),
			"resource_type", aws.ToString(first.ResourceType), "status", string(first.ResourceStatus))
		what := fmt.Sprintf("The %s %q could not be %s: %s", resourceNoun(aws.ToString(first.ResourceType)),
			aws.ToString(first.LogicalResourceId), verb(first.ResourceStatus), forUsers(reason))
		if lead != "" {
			what = lead + ". " + what
		}
		return &broker.Failure{Description: what, Detail: fmt.Sprintf("stack %s: %s (%s) %s: %s", aws.ToString(stack.StackName),
			aws.ToString(first.LogicalResourceId), aws.ToString(first.ResourceType), first.ResourceStatus, logged)}
	}
	if lead == "" {
		lead = "The stack could not be created"
	}
	if stackReason == "" {
		stackReason = aws.ToString(stack.StackStatusReason)
	}
	if stackReason != "" {
		logged := d.logReason(ctx, c, stack, "stack change failed", stackReason, "status", string(stack.StackStatus))
		f := &broker.Failure{Description: fmt.Sprintf("%s: %s", lead, forUsers(stackReason)),
			Detail: fmt.Sprintf("stack %s %s: %s", aws.ToString(stack.StackName), stack.StackStatus, logged)}
		if failed := failedResources().FindString(stackReason); failed != "" {
			// Logical ids only: the template's names, safe to show.
			f.Description = fmt.Sprintf("%s: %s", lead, sentence(failed))
		}
		return f
	}
	return &broker.Failure{Description: fmt.Sprintf("%s (%s); CloudFormation gave no reason. The stack %s's events may tell more.",
		lead, stack.StackStatus, aws.ToString(stack.StackName))}
}

// deleteFailure names the resources CloudFormation could not delete, each
// with the class of its reason; the reasons themselves are logged, and
// are the failure's Detail.
func (d *Driver) deleteFailure(ctx context.Context, c broker.Change, stack *types.Stack, tries int) *broker.Failure {
	lead := fmt.Sprintf("The stack %s could not be deleted (tried %d times)", aws.ToString(stack.StackName), tries)
	out, err := d.API.DescribeStackResources(ctx, &cfn.DescribeStackResourcesInput{StackName: stack.StackId})
	var failed, reasons []string
	if err == nil {
		for _, r := range out.StackResources {
			if r.ResourceStatus == types.ResourceStatusDeleteFailed {
				reason := aws.ToString(r.ResourceStatusReason)
				logged := d.logReason(ctx, c, stack, "stack deletion failed", reason, "resource", aws.ToString(r.LogicalResourceId),
					"resource_type", aws.ToString(r.ResourceType))
				failed = append(failed, fmt.Sprintf("%s (%s): %s", aws.ToString(r.LogicalResourceId),
					aws.ToString(r.ResourceType), reasonClass(reason)))
				reasons = append(reasons, fmt.Sprintf("%s (%s) %s: %s", aws.ToString(r.LogicalResourceId),
					aws.ToString(r.ResourceType), r.ResourceStatus, logged))
			}
		}
	}
	if len(failed) > 0 {
		return &broker.Failure{Description: clip(fmt.Sprintf("%s. CloudFormation could not delete %s%s", lead, strings.Join(failed, "; "), fullReasonLogged)),
			Detail: fmt.Sprintf("stack %s: %s", aws.ToString(stack.StackName), strings.Join(reasons, "; "))}
	}
	if r := aws.ToString(stack.StackStatusReason); r != "" {
		logged := d.logReason(ctx, c, stack, "stack deletion failed", r)
		return &broker.Failure{Description: fmt.Sprintf("%s: %s", lead, forUsers(r)),
			Detail: fmt.Sprintf("stack %s %s: %s", aws.ToString(stack.StackName), stack.StackStatus, logged)}
	}
	return &broker.Failure{Description: lead + "."}
}

// failedResources is the start of a stack's own reason that lists the
// logical ids of the resources that failed, and nothing else.
var failedResources = lazyPattern(`^The following resource\(s\) failed to [a-z]+: \[[A-Za-z0-9, ]*\]`)

// fullReasonLogged ends a description whose reason is classified.
const fullReasonLogged = " (the platform operator finds CloudFormation's full reason with the broker's ops operation command, and in its log)."

// forUsers is what users read of one of CloudFormation's reasons: its
// class, and where the operator finds the rest.
func forUsers(reason string) string { return reasonClass(reason) + fullReasonLogged }

// reasonClasses sort CloudFormation's reasons, first match wins: what
// could be a permission problem before anything else, since a refusal's
// text often goes on to say what the request "must" be; CloudFormation's
// own validation messages before the words of a conflict they may contain
// ("Unresolved resource dependencies").
var reasonClasses = []struct {
	says  []string // lower case
	class string
}{
	{[]string{"not authorized", "accessdenied", "access denied", "unauthorized", "forbidden", "permission"},
		"the broker's service role lacks a permission"},
	{[]string{"limitexceeded", "limit exceeded", "limit", "quota", "throttl", "rate exceeded"},
		"an account limit or quota was reached"},
	{[]string{"template format error", "parameter validation failed", "properties validation failed", "validationerror"},
		invalid},
	{[]string{"not empty", "still contains", "still has"},
		"it still holds data; empty it, then try again"},
	{[]string{"already exists", "in use", "being used", "conflict", "dependency", "dependent", "dependencies"},
		"it conflicts with a resource that already exists or is in use"},
	{[]string{"invalid", "validation", "must", "malformed", "not valid", "unsupported", "not supported"},
		invalid},
}

const invalid = "a parameter value or the template is not valid"

// reasonClass sorts one of CloudFormation's reasons into a few classes
// that say what kind of problem it is without quoting it.
func reasonClass(reason string) string {
	lower := strings.ToLower(reason)
	for _, rc := range reasonClasses {
		for _, w := range rc.says {
			if strings.Contains(lower, w) {
				return rc.class
			}
		}
	}
	return "CloudFormation reported a failure"
}

// logReason logs one of CloudFormation's reasons in full, for the
// operator, with the operation's ids; unless it repeats a request
// parameter, which a log line never carries. It returns the reason as
// logged, for the failure's Detail.
func (d *Driver) logReason(ctx context.Context, c broker.Change, stack *types.Stack, msg, reason string, attrs ...any) string {
	params := []json.RawMessage{c.Instance.Parameters}
	if c.Binding != nil {
		params = append(params, c.Binding.Parameters)
	}
	if c.Operation.Target != nil {
		params = append(params, c.Operation.Target.Parameters)
	}
	args := []any{"stack", aws.ToString(stack.StackName)}
	for _, a := range c.Operation.LogAttrs() {
		args = append(args, a)
	}
	args = append(args, attrs...)
	if broker.RepeatsParameter(reason, params...) {
		reason = "(left out: it repeats a request parameter; the stack's events in CloudFormation have it)"
	}
	args = append(args, "reason", reason)
	d.Logger.WarnContext(ctx, msg, args...)
	return reason
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
