package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// The service_id and plan_id a request sends MUST be those of the instance
// it names: a plan changes only through an update (whose service_id must
// still be the instance's). A driver runs under the instance's plan, so a
// request checked against another plan would bypass that plan's checks
// (async-only, bindable, binding_rotatable, its parameter schemas). Every
// route that names an instance or a binding checks the ids it sends once it
// has read the instance, before it writes anything; a bind, which does not
// read the instance, makes them conditions of its write
// (CreateBindingConditions). The answer is a 400 that names both sides.

// sameIDs reports whether the ids a request sends ("": not sent) are
// serviceID and planID.
func sameIDs(serviceID, planID, reqServiceID, reqPlanID string) bool {
	return (reqServiceID == "" || reqServiceID == serviceID) && (reqPlanID == "" || reqPlanID == planID)
}

// checkIDs returns the 400 for a request that sends ids other than inst's
// ("": not sent), or nil.
func (b *Broker) checkIDs(inst Instance, serviceID, planID string) error {
	if sameIDs(inst.ServiceID, inst.PlanID, serviceID, planID) {
		return nil
	}
	return b.mismatch(inst.ID, inst.ServiceID, inst.PlanID, serviceID, planID,
		"send the instance's service_id and plan_id (a plan changes only through an update)")
}

// checkUpdateService returns the 400 for an update whose service_id is not
// inst's: only the plan may change.
func (b *Broker) checkUpdateService(inst Instance, serviceID string) error {
	if serviceID == inst.ServiceID {
		return nil
	}
	return b.mismatch(inst.ID, inst.ServiceID, inst.PlanID, serviceID, "",
		"send the instance's service_id (an update changes only the plan)")
}

// mismatch describes an instance of serviceID and planID, what a request
// named of them, and what to send instead.
func (b *Broker) mismatch(instanceID, serviceID, planID, reqServiceID, reqPlanID, fix string) error {
	var named []string
	if reqServiceID != "" && reqServiceID != serviceID {
		named = append(named, b.serviceName(reqServiceID))
	}
	if reqPlanID != "" && reqPlanID != planID {
		named = append(named, b.planName(reqPlanID))
	}
	return Errorf(CodeBadRequest, "The instance %s is of %s %s, but the request names %s: %s.",
		instanceID, b.serviceName(serviceID), b.planName(planID), strings.Join(named, " "), fix)
}

// serviceName is how a description names an offering: `service "name" (id
// …)`, or by its id alone when the catalog has none of that id.
func (b *Broker) serviceName(id string) string {
	if s := b.Catalog.Service(id); s != nil {
		return fmt.Sprintf("service %q (id %s)", s.Name, id)
	}
	return fmt.Sprintf("service id %q", id)
}

// planName is how a description names a plan, as serviceName does.
func (b *Broker) planName(id string) string {
	if _, p := b.Catalog.PlanByID(id); p != nil {
		return fmt.Sprintf("plan %q (id %s)", p.Name, id)
	}
	return fmt.Sprintf("plan id %q", id)
}

// hints keeps, of the optional ids of a fetch or a poll, those the catalog
// has: an id in no catalog is not compared there (nothing is run under
// it), as it never was.
func (b *Broker) hints(serviceID, planID string) (string, string) {
	if b.Catalog.Service(serviceID) == nil {
		serviceID = ""
	}
	if _, p := b.Catalog.PlanByID(planID); p == nil {
		planID = ""
	}
	return serviceID, planID
}

// checkRecordedIDs checks the ids of a fetch or a poll against a plan the
// binding or operation it reads recorded (planIDs: the plan a binding was
// made under, an operation's plan before it and an update's target), and,
// when they are none of those, against the instance as it is now, which it
// reads only then (a plan may have changed since). An instance missing or
// deleted is named as recorded (planIDs[0]).
func (b *Broker) checkRecordedIDs(ctx context.Context, instanceID, serviceID, planID string, planIDs ...string) error {
	serviceID, planID = b.hints(serviceID, planID)
	if serviceID == "" && planID == "" {
		return nil
	}
	for _, p := range planIDs {
		if s, _ := b.Catalog.PlanByID(p); s != nil && sameIDs(s.ID, p, serviceID, planID) {
			return nil
		}
	}
	inst, err := b.Store.GetInstance(ctx, instanceID)
	switch {
	case err == nil:
		return b.checkIDs(inst, serviceID, planID)
	case !errors.Is(err, ErrNotFound):
		return fmt.Errorf("read instance %s: %w", instanceID, err)
	}
	recorded := ""
	if len(planIDs) > 0 {
		recorded = planIDs[0]
	}
	recordedService := ""
	if s, _ := b.Catalog.PlanByID(recorded); s != nil {
		recordedService = s.ID
	}
	return b.checkIDs(Instance{ID: instanceID, InstanceRequest: InstanceRequest{ServiceID: recordedService, PlanID: recorded}},
		serviceID, planID)
}
