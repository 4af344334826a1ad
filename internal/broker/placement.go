package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/serverless-osb/broker/internal/catalog"
)

// ProvisionCheck is implemented by the settings of a plan whose driver
// refuses some provision requests for what they say of the instance's
// place (the CloudFormation driver's placement: a context the plan maps
// nowhere, a Region it does not allow). The broker answers 400 with the
// error's text, before anything is written; the error is for the user:
// it says what to change.
type ProvisionCheck interface {
	CheckProvision(req InstanceRequest) error
}

// checkProvision asks the plan's settings, when they can, whether the
// request has a place.
func (b *Broker) checkProvision(p *catalog.Plan, req InstanceRequest) error {
	if b.Drivers == nil {
		return nil
	}
	_, settings, _ := b.Drivers.For(p)
	pc, ok := settings.(ProvisionCheck)
	if !ok {
		return nil
	}
	if err := pc.CheckProvision(req); err != nil {
		return Errorf(CodeBadRequest, "%s", err.Error())
	}
	return nil
}

// Place is where an instance lives, as its driver's records say: an
// account and Region (empty account: the broker's own).
type Place struct {
	Account string `json:"account,omitempty"`
	Region  string `json:"region,omitempty"`
	// Moved says that the plan's placement, as the catalog has it now,
	// would put the instance elsewhere: in Now, or nowhere (Now nil). The
	// instance stays where it is; new instances go there.
	Moved bool   `json:"moved,omitempty"`
	Now   *Place `json:"now,omitempty"`
}

// Placed is implemented by a driver whose instances live in places
// (accounts and Regions): it says where inst lives, from its records, and
// where its plan's settings would put it now; false when it cannot say
// (no record of it yet).
type Placed interface {
	Place(inst Instance, records []Resource, settings any) (Place, bool)
}

// InstancePlace says where inst lives, for the operator (ops instances);
// false when its plan's driver does not place instances, or its plan is
// no longer in the catalog. It reads the instance's records: one read.
func (b *Broker) InstancePlace(ctx context.Context, inst Instance) (Place, bool, error) {
	if b.Drivers == nil {
		return Place{}, false, nil
	}
	_, p, err := b.lookup(inst.ServiceID, inst.PlanID)
	if err != nil {
		return Place{}, false, nil
	}
	d, settings, ok := b.Drivers.For(p)
	placed, isPlaced := d.(Placed)
	if !ok || !isPlaced {
		return Place{}, false, nil
	}
	snap, err := b.Store.Load(ctx, inst.ID, "", "")
	if err != nil {
		return Place{}, false, fmt.Errorf("place of %s: %w", inst.ID, err)
	}
	place, known := placed.Place(inst, snap.Records, settings)
	return place, known, nil
}

// RoomCheck is implemented by a driver that may have no room for a new
// instance where its plan puts it (the CloudFormation driver's pool of
// accounts, each at its share of its stack quota). The broker asks it
// after ProvisionCheck, before anything is written; an error with a Code
// (CodeUnprocessable: 422) is the answer, any other lets the request
// through (the change itself finds out again, and fails saying so).
type RoomCheck interface {
	CheckRoom(ctx context.Context, req InstanceRequest, settings any) error
}

// checkRoom asks the plan's driver, when it can, whether there is room.
func (b *Broker) checkRoom(ctx context.Context, p *catalog.Plan, req InstanceRequest) error {
	if b.Drivers == nil {
		return nil
	}
	d, settings, ok := b.Drivers.For(p)
	rc, isRoomCheck := d.(RoomCheck)
	if !ok || !isRoomCheck {
		return nil
	}
	err := rc.CheckRoom(ctx, req, settings)
	var coded *Error
	switch {
	case errors.As(err, &coded):
		return coded
	case err != nil:
		// Not a refusal: the change finds out where it goes itself.
		b.Logger.WarnContext(ctx, "could not tell whether there is room for the instance", "error", err.Error())
	}
	return nil
}
