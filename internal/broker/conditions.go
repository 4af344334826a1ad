package broker

import "fmt"

// The conditions of the Store's conditional writes, said once, as data.
// Each write request says what the stored items must be for it to happen
// (LockInstance.Conditions, CreateBindingConditions, ...); an adapter
// translates a Condition once, in one function (bolt: one that checks it
// against the stored item, decoded; DynamoDB: one that builds the
// condition expression), and every write method uses that function rather
// than comparisons of its own. A new store implements the translation of
// the kinds below and nothing else of the conditions.
//
// What a write writes (the increments of binding_ops and version, the
// items it stores or deletes) is the adapter's: only the conditions are
// here.

// ConditionKind says what a Condition requires of a stored item.
type ConditionKind int

// The kinds of conditions. Every kind but CondMissing holds only of a
// stored item: on a missing item it fails.
const (
	// CondMissing: the item is not stored. A list with it has nothing else.
	CondMissing ConditionKind = iota + 1
	// CondHeldBy: the item (an instance or a binding) is held by the
	// operation Text (its Op); an empty Text means idle (no Op).
	CondHeldBy
	// CondVersion: the item (an instance or a binding) is at Version N.
	CondVersion
	// CondState: the item (an instance or an operation) is in State Text.
	CondState
	// CondNoBindingOps: the instance has no binding operation in progress
	// (BindingOps == 0).
	CondNoBindingOps
	// CondBindingOps: the instance counts a binding operation in progress
	// (BindingOps > 0).
	CondBindingOps
	// CondAttempts: the detached record's Attempts is N.
	CondAttempts
	// CondService: the item (an instance) is of the service offering Text
	// (its ServiceID).
	CondService
	// CondPlan: the item (an instance) is of the plan Text (its PlanID).
	CondPlan
)

var conditionNames = map[ConditionKind]string{
	CondMissing: "missing", CondHeldBy: "held by", CondVersion: "at version", CondState: "in state",
	CondNoBindingOps: "no binding operations", CondBindingOps: "binding operations", CondAttempts: "attempts",
	CondService: "of service", CondPlan: "of plan",
}

// Condition is one thing a conditional write requires of one stored item.
type Condition struct {
	Kind ConditionKind
	// Text is the holder of CondHeldBy, the state of CondState, the
	// service id of CondService and the plan id of CondPlan.
	Text string
	// N is the version of CondVersion and the attempts of CondAttempts.
	N int64
}

func (c Condition) String() string {
	name, ok := conditionNames[c.Kind]
	if !ok {
		return fmt.Sprintf("condition(%d)", int(c.Kind))
	}
	switch c.Kind {
	case CondHeldBy, CondState, CondService, CondPlan:
		return fmt.Sprintf("%s %q", name, c.Text)
	case CondVersion, CondAttempts:
		return fmt.Sprintf("%s %d", name, c.N)
	}
	return name
}

// The conditions, by kind.
var (
	// Missing: the item is not stored.
	Missing = Condition{Kind: CondMissing}
	// NoBindingOps: the instance has no binding operation in progress.
	NoBindingOps = Condition{Kind: CondNoBindingOps}
	// HasBindingOps: the instance counts a binding operation in progress.
	HasBindingOps = Condition{Kind: CondBindingOps}
)

// HeldBy requires the item to be held by operation op; "" means idle.
func HeldBy(op string) Condition { return Condition{Kind: CondHeldBy, Text: op} }

// AtVersion requires the item to be at version v.
func AtVersion(v int64) Condition { return Condition{Kind: CondVersion, N: v} }

// InState requires the item to be in state s.
func InState[S ~string](s S) Condition { return Condition{Kind: CondState, Text: string(s)} }

// OfService requires the instance to be of the service offering id.
func OfService(id string) Condition { return Condition{Kind: CondService, Text: id} }

// OfPlan requires the instance to be of the plan id.
func OfPlan(id string) Condition { return Condition{Kind: CondPlan, Text: id} }

// AttemptsAre requires the detached record's Attempts to be n.
func AttemptsAre(n int) Condition { return Condition{Kind: CondAttempts, N: int64(n)} }

// Expect is what one write requires of the items it names: each list
// must hold of its item, every condition of it. A nil list names no
// condition on that item, and the item is not part of the write's
// *ConflictError; a list that is set names the item, which comes back in
// the *ConflictError (nil when missing) whichever condition failed.
type Expect struct {
	// Instance is the write's instance.
	Instance []Condition
	// Binding is the write's binding (for FinishOperation,
	// Finish.BindingID).
	Binding []Condition
	// Operation is the write's operation as stored.
	Operation []Condition
}

// CreateInstanceConditions are CreateInstance's: no instance with that id.
func CreateInstanceConditions() Expect {
	return Expect{Instance: []Condition{Missing}}
}

// Conditions are LockInstance's: the instance is at the expected Version,
// held by Holder (idle when empty), with no binding operations in progress.
func (l LockInstance) Conditions() Expect {
	return Expect{Instance: []Condition{AtVersion(l.Version), HeldBy(l.Holder), NoBindingOps}}
}

// CreateBindingConditions are CreateBinding's for the binding b: the
// instance is idle and ready, of b's service and plan (and, for a change
// settled in memory from a known version, still at that version); no
// binding with that id. The bind checked its request against b's plan
// (bindable, mode, schema, rotation) without reading the instance: the
// service and plan among the conditions make those the instance's own
// checks, and a request naming another plan changes nothing (see
// Broker.Bind).
func CreateBindingConditions(b Binding, settled *Settled) Expect {
	inst := []Condition{HeldBy(""), InState(InstanceReady), OfService(b.ServiceID), OfPlan(b.PlanID)}
	if settled != nil && settled.InstanceVersion != 0 {
		inst = append(inst, AtVersion(settled.InstanceVersion))
	}
	return Expect{Instance: inst, Binding: []Condition{Missing}}
}

// Conditions are LockBinding's: the binding is at the expected Version and
// held by Holder (idle when empty); its instance is idle.
func (l LockBinding) Conditions() Expect {
	return Expect{
		Instance: []Condition{HeldBy("")},
		Binding:  []Condition{AtVersion(l.Version), HeldBy(l.Holder)},
	}
}

// UpdateOperationConditions are UpdateOperation's: the stored operation is
// in progress.
func UpdateOperationConditions() Expect {
	return Expect{Operation: []Condition{InState(OperationInProgress)}}
}

// Conditions are FinishOperation's: the stored operation is in progress;
// when the Finish writes the instance, f.Op holds it; when it writes a
// binding (BindingID), f.Op holds that. The release of ReleaseBinding is
// not among them: see ReleaseConditions.
func (f Finish) Conditions() Expect {
	e := UpdateOperationConditions()
	if f.HoldsInstance() {
		e.Instance = []Condition{HeldBy(f.Op.ID)}
	}
	if f.HoldsBinding() {
		e.Binding = []Condition{HeldBy(f.Op.ID)}
	}
	return e
}

// ReleaseConditions are what the instance must be for ReleaseBinding's
// decrement (nil without ReleaseBinding): it counts a binding operation, so
// that the count never goes below zero. Every store makes them conditions
// of the write, the instance part of its *ConflictError (Conditions leaves
// them out only because they are of the release, not of the hold). See
// Finish.ReleaseBinding.
func (f Finish) ReleaseConditions() []Condition {
	if !f.ReleaseBinding {
		return nil
	}
	return []Condition{HasBindingOps}
}

// BindingID is the binding a Finish writes: Binding's, or, to delete, the
// operation's.
func (f Finish) BindingID() string {
	if f.Binding != nil {
		return f.Binding.ID
	}
	return f.Op.BindingID
}

// UpdateDetachedConditions are UpdateDetached's, of the detached record:
// it is stored with Attempts == attempts, so that two reapers cannot both
// start a cleanup.
func UpdateDetachedConditions(attempts int) []Condition {
	return []Condition{AttemptsAre(attempts)}
}
