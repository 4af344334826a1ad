package broker

import "github.com/serverless-osb/broker/internal/catalog"

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
