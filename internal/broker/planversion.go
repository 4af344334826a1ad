package broker

// PlanVersion is a version of a plan: its maintenance_info version and the
// digest of what it deploys (Versioned; empty for a plan whose driver has
// none, and for an instance made before the broker kept it).
type PlanVersion struct {
	Version string `json:"version,omitempty"`
	Digest  string `json:"plan_digest,omitempty"`
}

// RunsVersion is the version of its plan that inst runs.
func (inst Instance) RunsVersion() PlanVersion {
	v := PlanVersion{Digest: inst.PlanDigest}
	if inst.MaintenanceInfo != nil {
		v.Version = inst.MaintenanceInfo.Version
	}
	return v
}

// CurrentVersion is the version of the plan that the catalog has now, and
// false when the catalog no longer has the plan.
func (b *Broker) CurrentVersion(serviceID, planID string) (PlanVersion, bool) {
	_, p, err := b.lookup(serviceID, planID)
	if err != nil {
		return PlanVersion{}, false
	}
	v := PlanVersion{Digest: b.planDigest(p)}
	if mi := planMaintenanceInfo(p); mi != nil {
		v.Version = mi.Version
	}
	return v, true
}

// Behind reports whether an instance that runs v runs an older version of
// its plan than current: its maintenance_info version differs, or its
// digest does (an instance that kept no digest is judged by its version
// alone). An update carrying the plan's current maintenance_info (an
// upgrade) brings it to current.
func (v PlanVersion) Behind(current PlanVersion) bool {
	return v.Version != current.Version || (v.Digest != "" && current.Digest != "" && v.Digest != current.Digest)
}
