package broker

import "github.com/serverless-osb/broker/internal/catalog"

// BindChecker is implemented by the settings of a plan whose bindings need
// of the bind request what no schema can say: the CloudFormation driver's
// role plans need the app they bind (OSB's app_guid), for the role they
// make admits only that app. CheckBind returns an *Error (a 4xx that says
// what to do) for a request the plan cannot bind; the broker calls it with
// the request's checks, before anything is written.
type BindChecker interface {
	CheckBind(BindingRequest) error
}

// checkBind runs the plan's BindChecker, if its settings have one.
func (b *Broker) checkBind(p *catalog.Plan, r BindingRequest) error {
	if b.Drivers == nil {
		return nil
	}
	_, settings, _ := b.Drivers.For(p)
	if c, ok := settings.(BindChecker); ok {
		return c.CheckBind(r)
	}
	return nil
}
