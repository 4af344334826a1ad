package cloudformation

import (
	"context"
	"errors"

	"github.com/serverless-osb/broker/internal/broker"
)

// Admission is the driver as the api function runs it. Its plans are
// async-only, so the api never changes a stack: the worker does. At a
// request it only counts a pool's stacks (CheckRoom), says where an
// instance is (Place) and names what a failed operation leaves (Leftovers).
// Nothing reachable from it creates, updates or deletes a stack or puts a
// template in a bucket, so the api's bootstrap links only the
// CloudFormation call it makes (ListStacks) and no S3 client
// (TestTheAPIBootstrapLinksNoStackChanges, internal/tools/build).
//
// It holds d's methods rather than d: the linker keeps every method of a
// type that reaches an interface, its fields' types too, whose name an
// interface call names, and the broker calls Begin on every driver.
type Admission struct {
	leftovers func(context.Context, broker.Change) ([]string, error)
	checkRoom func(context.Context, broker.InstanceRequest, any) error
	place     func(broker.Instance, []broker.Resource, any) (broker.Place, bool)
}

// Admit returns d as the api function runs it.
func Admit(d *Driver) *Admission {
	return &Admission{leftovers: d.Leftovers, checkRoom: d.CheckRoom, place: d.Place}
}

var (
	_ broker.Driver    = (*Admission)(nil)
	_ broker.RoomCheck = (*Admission)(nil)
	_ broker.Placed    = (*Admission)(nil)
)

// errWorkerOnly is what the changes the api never runs answer: reaching
// one would be a broker bug (a stack's change in a request), and a
// transient error leaves the operation to the worker's retries.
var errWorkerOnly = errors.New("the cloudformation driver changes stacks in the worker function only, and its plans are async-only: the api function never runs a change")

// Leftovers names what a failed change leaves, as the worker's driver does.
func (a *Admission) Leftovers(ctx context.Context, c broker.Change) ([]string, error) {
	return a.leftovers(ctx, c)
}

// Begin refuses: the worker runs every change.
func (a *Admission) Begin(context.Context, broker.Change) (broker.Progress, error) {
	return broker.Progress{}, errWorkerOnly
}

// Check refuses: the worker runs every change.
func (a *Admission) Check(context.Context, broker.Change) (broker.Progress, error) {
	return broker.Progress{}, errWorkerOnly
}

// Cleanup refuses: the worker's cleanup workflow deletes detached stacks.
func (a *Admission) Cleanup(context.Context, broker.Detached) (broker.Progress, error) {
	return broker.Progress{}, errWorkerOnly
}

// CheckRoom counts the stacks of the plan's pool as the worker's driver.
func (a *Admission) CheckRoom(ctx context.Context, req broker.InstanceRequest, settings any) error {
	return a.checkRoom(ctx, req, settings)
}

// Place says where an instance's stack is, as the worker's driver.
func (a *Admission) Place(inst broker.Instance, records []broker.Resource, settings any) (broker.Place, bool) {
	return a.place(inst, records, settings)
}
