package broker

// InstanceFilter stands in for i22-list's until it is merged.
type InstanceFilter struct {
	ServiceID, PlanID string
}
