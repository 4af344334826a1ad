package cloudformation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/serverless-osb/broker/internal/broker"
)

var _ broker.Previewer = (*Driver)(nil)

// previewPolls bounds how long Preview waits for CloudFormation to work
// out a change set (a second between reads): well inside a Task's minute.
const previewPolls = 30

// Preview tells what the update c would do to the instance's stack,
// changing nothing: the change set the update would make (under a name of
// its own), read, judged by the rule updates are (refusal: the same
// resources refused, with the same words), then deleted. A stack that is
// busy with another change is a transient error: the Task tries again.
func (d *Driver) Preview(ctx context.Context, c broker.Change) (broker.Preview, error) {
	s, err := settingsOf(c)
	if err != nil {
		return broker.Preview{}, err
	}
	rec, found, err := d.get(c, instanceRecord)
	if err != nil {
		return broker.Preview{}, err
	}
	if !found {
		return broker.Preview{}, &broker.Failure{Description: "The service instance has no stack on record, so its update cannot be previewed."}
	}
	if d, err = d.at(ctx, rec.Place); err != nil {
		return broker.Preview{}, err
	}
	stack, err := d.describeExisting(ctx, rec)
	if err != nil {
		return broker.Preview{}, err
	}
	if inProgress(stack.StackStatus) {
		return broker.Preview{}, fmt.Errorf("preview of stack %s: the stack is busy (%s)", rec.StackName, stack.StackStatus)
	}
	running := d.runningTemplate(stack)
	in, defaults, err := d.changeSetInputWithDefaults(ctx, c, s, &rec, running)
	if err != nil {
		var f *broker.Failure
		if errors.As(err, &f) {
			return broker.Preview{Refused: f.Description}, nil
		}
		return broker.Preview{}, err
	}
	// A name and token of the preview's own: never the change set the
	// upgrade itself would make and execute.
	in.ChangeSetName, in.ClientToken = aws.String(token("preview", c.Operation.ID)), aws.String(token("preview-token", c.Operation.ID))
	preview := rec
	preview.ChangeSet = aws.ToString(in.ChangeSetName)
	out, err := d.API.CreateChangeSet(ctx, in)
	switch {
	case err == nil:
		preview.ChangeSet = aws.ToString(out.Id)
	case isAlreadyExists(err): // a retried Task's: found by name
	default:
		return broker.Preview{}, classify("preview the update of the stack", err)
	}
	defer d.deleteChangeSet(ctx, &preview, stack)
	for range previewPolls {
		cs, err := d.describeChangeSet(ctx, &preview, stack)
		switch {
		case err != nil:
			return broker.Preview{}, err
		case cs == nil:
			return broker.Preview{}, fmt.Errorf("preview of stack %s: the change set %s is gone", rec.StackName, preview.ChangeSet)
		}
		switch cs.Status {
		case types.ChangeSetStatusCreatePending, types.ChangeSetStatusCreateInProgress:
			select {
			case <-ctx.Done():
				return broker.Preview{}, ctx.Err()
			case <-time.After(time.Second):
			}
			continue
		case types.ChangeSetStatusFailed:
			if noChanges(aws.ToString(cs.StatusReason)) {
				return broker.Preview{}, nil
			}
			return broker.Preview{Refused: "CloudFormation could not work out the update of the service instance's stack (the platform operator finds its reason in the broker's log)."}, nil
		}
		// The new defaults the change set itself was made with.
		p := broker.Preview{Changes: append(changeLines(cs.Changes), defaultLines(defaults)...)}
		f, err := d.refusal(ctx, c, s, running, cs.Changes, in.Parameters)
		if err != nil {
			return broker.Preview{}, err
		}
		if f != nil {
			p.Refused = f.Description
		}
		return p, nil
	}
	return broker.Preview{}, fmt.Errorf("preview of stack %s: the change set is not worked out yet", rec.StackName)
}

// changeLines says what each change would do: "Modify Bucket
// (AWS::S3::Bucket), replacement False".
func changeLines(changes []types.Change) []string {
	var out []string
	for _, ch := range changes {
		rc := ch.ResourceChange
		if rc == nil {
			continue
		}
		line := fmt.Sprintf("%s %s (%s)", rc.Action, aws.ToString(rc.LogicalResourceId), aws.ToString(rc.ResourceType))
		if rc.Action == types.ChangeActionModify && rc.Replacement != "" {
			line += ", replacement " + string(rc.Replacement)
		}
		out = append(out, line)
	}
	return out
}
