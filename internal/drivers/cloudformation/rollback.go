package cloudformation

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	cfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/serverless-osb/broker/internal/broker"
)

// continued is the record of the continued rollback of an update whose
// own rollback failed (UPDATE_ROLLBACK_FAILED): a stack in that state
// takes no update and no deletion of its resources is certain, so the
// driver asks CloudFormation once to continue the rollback
// (ContinueUpdateRollback), skipping the resources CloudFormation could not
// roll back. It is written before the call, so a crash after it finds the
// token and the resources skipped on record.
type continued struct {
	Token   string   `json:"token"`
	Skipped []string `json:"skipped,omitempty"`
	// Started: CloudFormation accepted the call.
	Started bool `json:"started,omitempty"`
}

// continueRollback moves on an update whose stack is UPDATE_ROLLBACK_FAILED:
// it continues the rollback, once; a rollback that fails again after that
// leaves the instance unusable, for the operator to mend.
func (d *Driver) continueRollback(ctx context.Context, c broker.Change, rec record, stack *types.Stack) (broker.Progress, error) {
	switch {
	case rec.Continued == nil:
		failed, err := d.rollbackFailures(ctx, stack)
		if err != nil {
			return broker.Progress{}, err
		}
		rec.Continued = &continued{Token: token("continue-rollback", c.Operation.ID)}
		for _, e := range failed {
			rec.Continued.Skipped = append(rec.Continued.Skipped, aws.ToString(e.LogicalResourceId))
		}
		if err := d.put(ctx, c.Instance.ID, instanceRecord, rec); err != nil {
			return broker.Progress{}, err
		}
	case rec.Continued.Started:
		return broker.Progress{}, d.rollbackStuck(ctx, c, rec, stack)
	default:
		// Asked for before a crash lost the record of it? Its events carry
		// its token; then it ran, and failed again.
		ran, err := d.startedWith(ctx, stack, rec.Continued.Token)
		if err != nil {
			return broker.Progress{}, err
		}
		if ran {
			rec.Continued.Started = true
			if err := d.put(ctx, c.Instance.ID, instanceRecord, rec); err != nil {
				return broker.Progress{}, err
			}
			return broker.Progress{}, d.rollbackStuck(ctx, c, rec, stack)
		}
	}

	in := &cfn.ContinueUpdateRollbackInput{StackName: stack.StackId, ClientRequestToken: aws.String(rec.Continued.Token),
		ResourcesToSkip: rec.Continued.Skipped}
	if d.Deployment.RoleARN != "" {
		in.RoleARN = aws.String(d.Deployment.RoleARN)
	}
	_, err := d.API.ContinueUpdateRollback(ctx, in)
	switch {
	case err == nil, isTokenUsed(err):
	case isBusy(err):
		// Rolling back already (this very call, whose answer was lost, or
		// one the operator made): the next check sees how it ends.
	default:
		err = classify("continue the stack's rollback", err)
		var f *broker.Failure
		if errors.As(err, &f) {
			f.Description = fmt.Sprintf("The update failed and so did its rollback; %s The service instance may not work until the platform operator continues the rollback of stack %s.",
				f.Description, rec.StackName)
			f.InstanceUsable, f.UpdateRepeatable = broker.Bool(false), broker.Bool(false)
		}
		return broker.Progress{}, err
	}
	rec.Continued.Started = true
	if err := d.put(ctx, c.Instance.ID, instanceRecord, rec); err != nil {
		return broker.Progress{}, err
	}
	d.Logger.InfoContext(ctx, "stack rollback continued", "stack", rec.StackName, "skipped", strings.Join(rec.Continued.Skipped, ","))
	return broker.Progress{RetryAfter: retryAfter(c), Description: rollingBack(rec)}, nil
}

// rollingBack describes an update's rollback in progress.
func rollingBack(rec record) string {
	switch {
	case rec.Continued == nil:
		return "The update failed; rolling the stack back to its previous configuration."
	case len(rec.Continued.Skipped) == 0:
		return "The update failed, and so did its rollback; continuing the rollback."
	}
	return fmt.Sprintf("The update failed, and so did its rollback; continuing the rollback, skipping %s, which CloudFormation could not roll back.",
		list(rec.Continued.Skipped))
}

// rolledBack is the failure of an update whose stack is back on its
// previous configuration (UPDATE_ROLLBACK_COMPLETE): the instance is
// usable. After a continued rollback that skipped resources, those may not
// match it, and they are named; CloudFormation warns that a later update
// may fail until they do, so the update is not repeatable.
func (d *Driver) rolledBack(ctx context.Context, c broker.Change, rec record, stack *types.Stack) *broker.Failure {
	lead, repeatable := "The update was rolled back; the service instance is as it was before", true
	if rec.Continued != nil {
		lead = "The update failed, and so did its rollback; the broker continued the rollback and the service instance is as it was before"
		if skipped := rec.Continued.Skipped; len(skipped) > 0 {
			lead = fmt.Sprintf("The update failed, and so did its rollback; the broker continued the rollback, skipping %s, which CloudFormation could not roll back: the service instance is back on its previous configuration, except that %s may not match it (the platform operator can check them in stack %s)",
				list(skipped), list(skipped), rec.StackName)
			repeatable = false
		}
	}
	f := d.failure(ctx, c, stack, lead)
	f.InstanceUsable, f.UpdateRepeatable = broker.Bool(true), broker.Bool(repeatable)
	return f
}

// rollbackStuck is the failure of an update whose continued rollback
// failed too: the instance is not usable until the operator mends the
// stack. The description names the resources (logical ids); the detail,
// which ops operation shows, has CloudFormation's reasons.
func (d *Driver) rollbackStuck(ctx context.Context, c broker.Change, rec record, stack *types.Stack) *broker.Failure {
	failed, _ := d.rollbackFailures(ctx, stack) // what was read; the stack's own reason is the fallback
	var names, reasons []string
	for _, e := range failed {
		id := aws.ToString(e.LogicalResourceId)
		logged := d.logReason(ctx, c, stack, "stack rollback failed", aws.ToString(e.ResourceStatusReason),
			"resource", id, "resource_type", aws.ToString(e.ResourceType), "status", string(e.ResourceStatus))
		names = append(names, id)
		reasons = append(reasons, fmt.Sprintf("%s (%s) %s: %s", id, aws.ToString(e.ResourceType), e.ResourceStatus, logged))
	}
	what := ""
	if len(names) > 0 {
		what = fmt.Sprintf(" (CloudFormation could not roll back %s)", list(names))
	}
	f := d.failure(ctx, c, stack, fmt.Sprintf(
		"The update failed and could not be rolled back, even after the broker continued the rollback%s; the service instance may not work until the platform operator mends stack %s and continues its rollback (the broker's ops operation command shows CloudFormation's reasons)",
		what, rec.StackName))
	if len(reasons) > 0 {
		f.Detail = strings.TrimPrefix(f.Detail+"; rollback: "+strings.Join(reasons, "; "), "; ")
	}
	f.InstanceUsable, f.UpdateRepeatable = broker.Bool(false), broker.Bool(false)
	return f
}

// rollbackFailures are the resources that the stack's latest rollback
// could not roll back: those whose newest event since the stack's last
// UPDATE_ROLLBACK_IN_PROGRESS is UPDATE_FAILED, for a reason other than a
// cancellation. They are the only resources ContinueUpdateRollback may
// skip ("only resources that are in the UPDATE_FAILED state because a
// rollback failed").
func (d *Driver) rollbackFailures(ctx context.Context, stack *types.Stack) ([]types.StackEvent, error) {
	seen := map[string]bool{}
	var failed []types.StackEvent
	p := cfn.NewDescribeStackEventsPaginator(d.API, &cfn.DescribeStackEventsInput{StackName: stack.StackId})
	for page := 0; p.HasMorePages() && page < maxEventPages; page++ {
		out, err := p.NextPage(ctx)
		if err != nil {
			return failed, classify("read the stack's events", err)
		}
		for i := range out.StackEvents {
			e := out.StackEvents[i]
			if isStackEvent(&e, stack) {
				if e.ResourceStatus == types.ResourceStatusUpdateRollbackInProgress {
					return failed, nil // the start of the latest rollback
				}
				continue
			}
			id := aws.ToString(e.LogicalResourceId)
			if seen[id] {
				continue // events are newest first: this one is older
			}
			seen[id] = true
			if e.ResourceStatus == types.ResourceStatusUpdateFailed &&
				!strings.Contains(strings.ToLower(aws.ToString(e.ResourceStatusReason)), "cancel") {
				failed = append(failed, e)
			}
		}
	}
	return failed, nil
}

// stuckInRollback says whether a stack is left by an update that could not
// be rolled back: it takes no update until the operator repairs it and
// continues its rollback (an update of this broker's gets there only after
// continueRollback tried once).
func stuckInRollback(status types.StackStatus) bool {
	return status == types.StackStatusUpdateRollbackFailed || status == types.StackStatusUpdateFailed
}

// stuckStack is the failure of an update asked of a stack stuckInRollback:
// refused before any call, since CloudFormation would refuse the change
// set with a message that names neither the cause nor the way out. Once
// the operator has repaired the stack, the same update may be sent again.
func stuckStack(rec record, stack *types.Stack) *broker.Failure {
	f := &broker.Failure{
		Description: fmt.Sprintf("The service instance's stack %s could not be rolled back after an earlier update (it is %s), so it takes no update: the platform operator must repair it and continue its rollback (the broker's ops operation command shows CloudFormation's reasons for the earlier update). Nothing was changed; try the update again once the stack is repaired.",
			rec.StackName, stack.StackStatus),
		Detail: aws.ToString(stack.StackStatusReason),
	}
	f.InstanceUsable, f.UpdateRepeatable = broker.Bool(false), broker.Bool(true)
	return f
}
