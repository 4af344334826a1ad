package cloudformation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	cfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/serverless-osb/broker/internal/broker"
)

// choose picks where a new instance of target t goes: t itself, or for a
// pool the account with the most room under its quota, counting the
// stacks the broker made there (its prefix's); none that holds MaxShare
// of its quota or more. Two provisions at once may pick the same account:
// the share left under the quota is the margin for that.
func (d *Driver) choose(ctx context.Context, t Target) (Target, error) {
	if len(t.Pool) == 0 {
		return t, nil
	}
	best, bestRoom, total := -1, 0, 0
	var counts []string
	for i, m := range t.Pool {
		m.Region = t.Region
		placed, _, err := d.reach(ctx, placeOf(m, d.homeRegion()))
		if err != nil {
			return Target{}, err
		}
		n, err := placed.countStacks(ctx)
		if err != nil {
			return Target{}, err
		}
		counts, total = append(counts, fmt.Sprintf("%d", n)), total+n
		if float64(n) >= t.MaxShare*float64(t.StackQuota) {
			continue
		}
		if room := t.StackQuota - n; best < 0 || room > bestRoom {
			best, bestRoom = i, room
		}
	}
	capacity := t.MaxShare * float64(t.StackQuota*len(t.Pool))
	if float64(total+1) >= nearlyFull*capacity {
		// The stack's alarm on this line fires before the pool is full.
		d.Logger.WarnContext(ctx, PoolNearlyFull, "region", firstOf(t.Region, d.homeRegion()), "stacks", total,
			"capacity", int(capacity), "accounts", len(t.Pool))
	}
	if best < 0 {
		return Target{}, &poolFull{description: fmt.Sprintf(
			"Every account of the plan's pool in %s holds %g%% or more of its quota of %d stacks (%s stacks): the broker places no more instances there. Ask the platform operator to add an account to the pool, or to raise its quota and the plan's stack_quota.",
			firstOf(t.Region, d.homeRegion(), "the broker's Region"), t.MaxShare*100, t.StackQuota, strings.Join(counts, ", "))}
	}
	m := t.Pool[best]
	m.Region = t.Region
	d.Logger.InfoContext(ctx, "pool account chosen", "account", m.Account(), "region", m.Region, "room", bestRoom)
	return m, nil
}

// PoolNearlyFull is the message of the worker's log line that says a pool
// is past nearlyFull of what its accounts may hold (their max_share of
// their quota); the stack alarms on it (Needs).
const PoolNearlyFull = "pool nearly full"

// nearlyFull is the share of a pool's room past which it is nearly full.
const nearlyFull = 0.9

// liveStatuses are the statuses of every stack that counts against the
// quota: all but DELETE_COMPLETE.
var liveStatuses = slices.DeleteFunc(types.StackStatus("").Values(), func(s types.StackStatus) bool {
	return s == types.StackStatusDeleteComplete
})

// countStacks counts the stacks of the broker's prefix in d's place.
func (d *Driver) countStacks(ctx context.Context) (int, error) {
	lister, ok := d.API.(cfn.ListStacksAPIClient)
	if !ok {
		return 0, &broker.Failure{Description: "The broker cannot count the stacks of its pool's accounts here."}
	}
	n := 0
	p := cfn.NewListStacksPaginator(lister, &cfn.ListStacksInput{StackStatusFilter: liveStatuses})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return 0, classify("count the stacks of a pool's account", err)
		}
		for _, s := range page.StackSummaries {
			if strings.HasPrefix(aws.ToString(s.StackName), d.Deployment.StackPrefix+"-") {
				n++
			}
		}
	}
	return n, nil
}

// poolFull says that every account of a pool is at its share of its
// quota: the provision's Failure in the worker, 422 at the request.
type poolFull struct{ description string }

func (e *poolFull) Error() string { return e.description }

var _ broker.RoomCheck = (*Driver)(nil)

// CheckRoom refuses, at the request (422, before anything is written), a
// provision whose plan puts it in a pool whose every account is at its
// share of its quota. It counts as the change would (with the api's
// credentials, which the target role trusts too); any other trouble
// counting is not a refusal: the change counts again, and fails saying so.
func (d *Driver) CheckRoom(ctx context.Context, req broker.InstanceRequest, settings any) error {
	s, ok := settings.(*Settings)
	if !ok || s == nil {
		return nil
	}
	t, err := s.Placement.Resolve(req)
	if err != nil || len(t.Pool) == 0 {
		return nil // CheckProvision has answered a request without a place
	}
	_, err = d.choose(ctx, t)
	var full *poolFull
	if errors.As(err, &full) {
		return broker.Errorf(broker.CodeUnprocessable, "%s", full.description)
	}
	return err
}
