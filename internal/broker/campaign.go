package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/serverless-osb/broker/internal/catalog"
)

// A fleet upgrade (statemachines/upgrade.asl.json) is a campaign: one item
// per instance that runs behind its plan, each moved by the broker's own
// update to the plan's current maintenance_info, canaries first, at most
// MaxInFlight at a time, until MaxFailures of them failed. The campaign
// and its items are durable (the Campaigns port), so that the workflow
// survives a restart and every Task is idempotent: an item is claimed by
// one conditional write, and its upgrade runs under an operation id
// derived from the campaign and the instance, so that a Task run again
// finds that operation rather than starting a second.

// WorkflowUpgrade runs a campaign (statemachines/upgrade.asl.json).
const WorkflowUpgrade Workflow = "upgrade"

// CampaignState is where a campaign is.
type CampaignState string

const (
	// CampaignRunning: its workflow claims and upgrades its items.
	CampaignRunning CampaignState = "running"
	// CampaignFinished: every item was tried (or previewed).
	CampaignFinished CampaignState = "finished"
	// CampaignStopped: a canary failed, or MaxFailures items did: the
	// items not tried are not_attempted.
	CampaignStopped CampaignState = "stopped"
)

// ItemState is where one instance is in a campaign. Transitions happen
// only by UpdateCampaignItem, conditional on the item as read.
type ItemState string

const (
	// ItemPending: waiting for a lane to claim it.
	ItemPending ItemState = "pending"
	// ItemRunning: claimed; its upgrade (OperationID) is started or about to be.
	ItemRunning ItemState = "running"
	// ItemBusy: another operation held the instance; claimed again at NextTry.
	ItemBusy ItemState = "busy"
	// ItemUpgraded: the upgrade succeeded.
	ItemUpgraded ItemState = "upgraded"
	// ItemFailed: the upgrade failed (Description says why): the new
	// version, its template or its driver did, a driver's permanent
	// failure included.
	ItemFailed ItemState = "failed"
	// ItemBlocked: the instance's own state stopped its upgrade, not the
	// new version: it stayed busy with its tenant's operations past
	// MaxBusyAttempts, or its stored parameters do not fit the new
	// version's schema. Blocked items do not count toward MaxFailures
	// (one tenant cannot stop an upgrade for everyone), but the operator
	// sees them, and ops exits non-zero.
	ItemBlocked ItemState = "blocked"
	// ItemSkipped: nothing to do, for the reason in Description (the
	// instance is gone, failed, already current, its plan no longer in
	// the catalog, its driver has no preview, or the operator named it
	// to skip).
	ItemSkipped ItemState = "skipped"
	// ItemNotAttempted: the campaign stopped before it was tried.
	ItemNotAttempted ItemState = "not_attempted"
	// ItemWouldChange and ItemWouldRefuse: a dry run's preview (Changes,
	// Description): the upgrade would change the resources listed, or
	// would be refused.
	ItemWouldChange ItemState = "would_change"
	ItemWouldRefuse ItemState = "would_refuse"
)

// Ended reports whether the item reached a terminal state.
func (s ItemState) Ended() bool {
	switch s {
	case ItemPending, ItemRunning, ItemBusy:
		return false
	}
	return true
}

// Bad reports whether the item's result makes the campaign a failure for
// the operator (ops exits non-zero): a failed upgrade, a blocked one, a
// refusal, or an instance left behind.
func (s ItemState) Bad() bool {
	return s == ItemFailed || s == ItemBlocked || s == ItemWouldRefuse || s == ItemNotAttempted
}

// Campaign limits.
const (
	// MaxInFlightCap is the most lanes a phase runs: the Map states'
	// MaxConcurrency in upgrade.asl.json.
	MaxInFlightCap = 50
	// BusyRetry is how long an item whose instance was busy waits before
	// it is claimed again, MaxBusyAttempts times at most (about an hour):
	// then it counts as failed, never skipped silently.
	BusyRetry       = time.Minute
	MaxBusyAttempts = 60
	// CampaignRetention is how long a campaign is kept after it ends. A
	// running campaign's expiry is that past the end of its current
	// execution at the latest: each execution pushes it forward
	// (UpgradeContinueTask), and its end sets it (UpgradeFinishTask).
	CampaignRetention = 30 * 24 * time.Hour
)

// CampaignOptions are what an operator asks of a campaign.
type CampaignOptions struct {
	// PlanIDs are the plans whose instances are upgraded; All: every plan
	// with a maintenance_info.
	PlanIDs []string
	All     bool
	// Canaries are upgraded first: the first Canaries instances, or those
	// of the organizations or spaces named (the instance's OSB context).
	Canaries     int
	CanaryOrgs   []string
	CanarySpaces []string
	// MaxInFlight upgrades run at a time (1..MaxInFlightCap).
	MaxInFlight int
	// MaxFailures failed items stop the campaign (at least 1).
	MaxFailures int
	// DryRun previews each upgrade and changes nothing.
	DryRun bool
	// Skip names instances the campaign leaves as they are (skipped, "by
	// the operator"); Defer, instances it upgrades last: never canaries,
	// claimed after every other item. Each must be an instance of the
	// campaign's plans (CheckInstances).
	Skip  []string
	Defer []string
}

// Check says what is wrong with o, for the operator, or returns nil. It
// checks the plans against c.
func (o CampaignOptions) Check(c *catalog.Catalog) error {
	var problems []string
	switch {
	case o.All && len(o.PlanIDs) > 0:
		problems = append(problems, "name plans or all of them, not both")
	case !o.All && len(o.PlanIDs) == 0:
		problems = append(problems, "name the plans to upgrade (--plan ID) or all of them (--all)")
	}
	for _, id := range o.PlanIDs {
		_, p := c.PlanByID(id)
		switch {
		case p == nil:
			problems = append(problems, fmt.Sprintf("plan %s is not in the catalog", id))
		case p.MaintenanceInfo == nil:
			problems = append(problems, fmt.Sprintf("plan %s (%s) has no maintenance_info: there is no version to upgrade to", id, p.Name))
		}
	}
	ways := 0
	for _, set := range []bool{o.Canaries > 0, len(o.CanaryOrgs) > 0, len(o.CanarySpaces) > 0} {
		if set {
			ways++
		}
	}
	if ways > 1 {
		problems = append(problems, "pick canaries one way: a number, organizations or spaces")
	}
	if o.Canaries < 0 {
		problems = append(problems, "canaries must be 0 or more")
	}
	if o.MaxInFlight < 1 || o.MaxInFlight > MaxInFlightCap {
		problems = append(problems, fmt.Sprintf("max in flight must be 1 to %d, got %d", MaxInFlightCap, o.MaxInFlight))
	}
	if o.MaxFailures < 1 {
		problems = append(problems, fmt.Sprintf("max failures must be 1 or more, got %d", o.MaxFailures))
	}
	for _, id := range o.Skip {
		if slices.Contains(o.Defer, id) {
			problems = append(problems, fmt.Sprintf("instance %s is named to skip and to defer: pick one", id))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// CheckInstances says which instances o names to skip or defer are not
// instances of its plans (of any plan with a maintenance_info, for All),
// as get reads them, or returns nil: a misspelt id must not leave the
// instance the operator meant to protect in the campaign.
func (o CampaignOptions) CheckInstances(ctx context.Context, c *catalog.Catalog, get func(context.Context, string) (Instance, error)) error {
	var problems []string
	for _, named := range []struct {
		flag string
		ids  []string
	}{{"skip", o.Skip}, {"defer", o.Defer}} {
		for _, id := range named.ids {
			inst, err := get(ctx, id)
			switch {
			case errors.Is(err, ErrNotFound):
				problems = append(problems, fmt.Sprintf("%s names instance %s, which does not exist", named.flag, id))
				continue
			case err != nil:
				return fmt.Errorf("read instance %s: %w", id, err)
			}
			if !o.hasPlan(c, inst.PlanID) {
				problems = append(problems, fmt.Sprintf("%s names instance %s, whose plan %s is not one the campaign upgrades", named.flag, id, inst.PlanID))
			}
		}
	}
	if len(problems) > 0 {
		return &OptionsError{Problems: problems}
	}
	return nil
}

// OptionsError is a campaign's options found wrong against the store:
// the operator's to fix, not a fault to retry.
type OptionsError struct{ Problems []string }

func (e *OptionsError) Error() string { return strings.Join(e.Problems, "; ") }

// hasPlan says whether the campaign upgrades the instances of plan id.
func (o CampaignOptions) hasPlan(c *catalog.Catalog, id string) bool {
	if !o.All {
		return slices.Contains(o.PlanIDs, id)
	}
	_, p := c.PlanByID(id)
	return p != nil && p.MaintenanceInfo != nil
}

// Campaign is a fleet upgrade. Item key: PK=campaign#<ID>, SK=campaign.
type Campaign struct {
	ID      string
	Options CampaignOptions
	State   CampaignState
	// Outcome says how it ended, for the operator.
	Outcome    string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt time.Time
	// ExpiresAt is when it may be dropped (DynamoDB TTL), with its items:
	// CampaignRetention past its end, or past the end of its current
	// execution while it runs.
	ExpiresAt time.Time
}

// CampaignItem is one instance of a campaign. Item key:
// PK=campaign#<CampaignID>, SK=i#<InstanceID>.
type CampaignItem struct {
	CampaignID string
	InstanceID string
	ServiceID  string
	PlanID     string
	// Order is the claim order: canaries first, then the others, then the
	// deferred ones, each oldest instance first.
	Order  int
	Canary bool
	// Deferred: the operator asked for it last (CampaignOptions.Defer).
	Deferred bool
	State    ItemState
	// OperationID is the update that upgrades the instance
	// (UpgradeOperationID), set when the item is claimed.
	OperationID string
	// Lane is the lane that claimed the item, running (LaneID): its own
	// lane adopts it again when it claims (a Map run again after a crash,
	// or a Claim Task run again after a lost answer). Empty when pending,
	// or claimed by a lane that did not say which it is.
	Lane string
	// Attempts counts the claims that found the instance busy; NextTry is
	// when a busy item may be claimed again.
	Attempts int
	NextTry  time.Time
	// FromVersion is the maintenance_info version the instance ran when
	// the campaign planned it; ToVersion the plan's.
	FromVersion string
	ToVersion   string
	// Description says why an item failed or was skipped, or what a
	// dry run would refuse; Changes, what it would change.
	Description string
	Changes     []string
	UpdatedAt   time.Time
	ExpiresAt   time.Time
	// Version moves with every write: UpdateCampaignItem is conditional on
	// the version read.
	Version int64
}

// ErrCampaignExists is returned by CreateCampaign when a campaign of that
// id is stored already: a Plan Task run again finds its campaign.
var ErrCampaignExists = errors.New("the campaign exists")

// Campaigns is the port of the fleet upgrades: a campaign and its items,
// in a partition of their own, kept CampaignRetention after the campaign
// ends. Both stores have it (storetest proves them).
type Campaigns interface {
	// CreateCampaign stores c and its items, unless a campaign of c.ID is
	// stored: then it writes nothing and returns ErrCampaignExists. Items
	// are written before the campaign's own record, each only where none
	// is, so that a create cut short and run again keeps what it wrote.
	CreateCampaign(ctx context.Context, c Campaign, items []CampaignItem) error
	// LoadCampaign reads a campaign and all its items (by Order) in one
	// consistent read (more pages only past 1 MB); ErrNotFound when none.
	LoadCampaign(ctx context.Context, id string) (Campaign, []CampaignItem, error)
	// GetCampaignItem reads one item; ErrNotFound when none.
	GetCampaignItem(ctx context.Context, campaignID, instanceID string) (CampaignItem, error)
	// UpdateCampaignItem stores it, its Version one past read's.
	// Conditions: CampaignItemConditions(read) (the stored item is in the
	// state and at the version read); else *ConflictError with no field.
	UpdateCampaignItem(ctx context.Context, it CampaignItem, read CampaignItem) error
	// EndCampaign stores c. Conditions: the stored campaign is running;
	// else *ConflictError with no field.
	EndCampaign(ctx context.Context, c Campaign) error
	// ListCampaigns returns every campaign kept, newest first.
	ListCampaigns(ctx context.Context) ([]Campaign, error)
	// SetCampaignExpiry sets the ExpiresAt of campaign id, of its listed
	// copy and of every item to at, and nothing else: no item's Version
	// moves, for this is no change of its state (a lane's write of an item
	// read before still succeeds, with the expiry it read). ErrNotFound
	// when no campaign of id is stored.
	SetCampaignExpiry(ctx context.Context, id string, at time.Time) error
}

// CampaignItemConditions are UpdateCampaignItem's, of the stored item: in
// the state and at the version read, so that two lanes cannot both claim
// it, and a Task run again cannot undo a newer result.
func CampaignItemConditions(read CampaignItem) []Condition {
	return []Condition{InState(read.State), AtVersion(read.Version)}
}

// EndCampaignConditions are EndCampaign's: the campaign is running.
func EndCampaignConditions() []Condition { return []Condition{InState(CampaignRunning)} }

// NewCampaignID is a campaign's id: upg-<UTC time>-<8 hex digits>, fit for
// an execution name.
func NewCampaignID(now time.Time, random string) string {
	h := sha256.Sum256([]byte(random))
	return "upg-" + now.UTC().Format("20060102t150405") + "-" + hex.EncodeToString(h[:4])
}

// UpgradeOperationID is the id of the update that upgrades an instance in
// a campaign: derived from both, so that a Task run again finds it.
func UpgradeOperationID(campaignID, instanceID string) string {
	h := sha256.Sum256([]byte(campaignID + "\x00" + instanceID))
	return "upgrade-" + hex.EncodeToString(h[:16])
}

// PlanItems makes a campaign's items from the instances of its plans: one
// per instance that runs behind its plan (behind says so), and one,
// skipped, per failed instance (it cannot be upgraded: the operator sees
// it listed) and per instance the operator named to skip. Canaries come
// first, then the others, then those the operator deferred (never
// canaries), each oldest first.
func PlanItems(c Campaign, instances []Instance, behind func(Instance) (bool, *catalog.Plan)) []CampaignItem {
	insts := slices.Clone(instances)
	slices.SortStableFunc(insts, func(a, b Instance) int {
		if d := a.CreatedAt.Compare(b.CreatedAt); d != 0 {
			return d
		}
		return strings.Compare(a.ID, b.ID)
	})
	var canaries, others, deferred []CampaignItem
	for _, inst := range insts {
		late, p := behind(inst)
		if !late || p == nil {
			continue
		}
		it := CampaignItem{CampaignID: c.ID, InstanceID: inst.ID, ServiceID: inst.ServiceID, PlanID: inst.PlanID,
			State: ItemPending, ToVersion: p.MaintenanceInfo.Version, UpdatedAt: c.CreatedAt}
		if inst.MaintenanceInfo != nil {
			it.FromVersion = inst.MaintenanceInfo.Version
		}
		switch {
		case inst.State == InstanceFailed:
			it.State, it.Description = ItemSkipped, "The instance is failed: it can only be deprovisioned."
			others = append(others, it)
		case slices.Contains(c.Options.Skip, inst.ID):
			it.State, it.Description = ItemSkipped, "Skipped by the operator."
			others = append(others, it)
		case slices.Contains(c.Options.Defer, inst.ID):
			it.Deferred = true
			deferred = append(deferred, it)
		case isCanary(c.Options, inst, len(canaries)):
			it.Canary = true
			canaries = append(canaries, it)
		default:
			others = append(others, it)
		}
	}
	items := slices.Concat(canaries, others, deferred)
	for i := range items {
		items[i].Order = i
	}
	return items
}

// isCanary says whether inst is a canary of a campaign with options o,
// given the canaries picked so far.
func isCanary(o CampaignOptions, inst Instance, picked int) bool {
	switch {
	case o.Canaries > 0:
		return picked < o.Canaries
	case len(o.CanaryOrgs) > 0:
		return slices.Contains(o.CanaryOrgs, platformGUID(inst, "organization_guid"))
	case len(o.CanarySpaces) > 0:
		return slices.Contains(o.CanarySpaces, platformGUID(inst, "space_guid"))
	}
	return false
}

// platformGUID is the instance's organization or space: the OSB context's
// field (the platform's say), or else the request's deprecated one.
func platformGUID(inst Instance, field string) string {
	var ctx map[string]any
	if len(inst.Context) > 0 && json.Unmarshal(inst.Context, &ctx) == nil {
		if v, ok := ctx[field].(string); ok && v != "" {
			return v
		}
	}
	if field == "organization_guid" {
		return inst.OrganizationGUID
	}
	return inst.SpaceGUID
}

// Phase is the part of a campaign a lane works in.
type Phase string

const (
	PhaseCanary Phase = "canary"
	PhaseRest   Phase = "rest"
)

// ClaimAction says what a lane does next.
type ClaimAction string

const (
	// ClaimStart: upgrade the item claimed.
	ClaimStart ClaimAction = "start"
	// ClaimWait: only busy items are left, not yet due; claim again after
	// RetryAfter seconds.
	ClaimWait ClaimAction = "wait"
	// ClaimNone: nothing left in the phase; the lane ends.
	ClaimNone ClaimAction = "none"
	// ClaimStop: the campaign stops (MaxFailures items failed, or a canary
	// did); the lane ends.
	ClaimStop ClaimAction = "stop"
	// ClaimYield: the lane ran its budget of Tasks in this execution; it
	// ends, and the campaign continues in a new execution.
	ClaimYield ClaimAction = "yield"
)

// LaneID names a lane of a campaign's execution: its phase and its index
// in the phase's Map (0, 1, ...). A Map run again runs the same lanes.
func LaneID(phase Phase, index int) string { return fmt.Sprintf("%s/%d", phase, index) }

// Started reports whether the item, pending, had its upgrade started by a
// lane of an earlier execution of the campaign (which ended before the
// item did): its operation id is kept, and a lane adopts it first.
func (it CampaignItem) Started() bool {
	return it.State == ItemPending && it.OperationID != ""
}

// Tally is what a campaign's items say of it.
type Tally struct {
	Items        int
	Pending      int
	Running      int
	Busy         int
	Upgraded     int
	Failed       int
	Skipped      int
	NotAttempted int
	WouldChange  int
	WouldRefuse  int
	// CanaryFailed says a canary failed.
	CanaryFailed bool
	// Blocked items (ItemBlocked) count for the operator, not toward
	// MaxFailures.
	Blocked int
}

// TallyItems counts items by state.
func TallyItems(items []CampaignItem) Tally {
	t := Tally{Items: len(items)}
	for _, it := range items {
		switch it.State {
		case ItemPending:
			t.Pending++
		case ItemRunning:
			t.Running++
		case ItemBusy:
			t.Busy++
		case ItemUpgraded:
			t.Upgraded++
		case ItemFailed:
			t.Failed++
			t.CanaryFailed = t.CanaryFailed || it.Canary
		case ItemBlocked:
			t.Blocked++
		case ItemSkipped:
			t.Skipped++
		case ItemNotAttempted:
			t.NotAttempted++
		case ItemWouldChange:
			t.WouldChange++
		case ItemWouldRefuse:
			t.WouldRefuse++
		}
	}
	return t
}

// Stops reports whether a campaign with options o stops, its items
// counting t: MaxFailures items failed, or a canary did. Blocked items
// do not count: their tenants' doing, not the new version's.
func (t Tally) Stops(o CampaignOptions) bool {
	return t.CanaryFailed || t.Failed >= max(1, o.MaxFailures)
}

// NextClaim is the rule of the claim of lane (LaneID; "" when the lane
// does not say) in phase: which item to claim now (ok), or else what the
// lane does (and, for ClaimWait, after how long). An item running under
// the lane's own id goes first: the lane claimed it and did not see it to
// its end (its Map ran again after a crash, or its Claim Task ran again),
// so it watches it now rather than start another beside it. Then an item
// started in an earlier execution (Started), even once the campaign
// stops: its upgrade runs, and is watched to its end; then, unless the
// campaign stops, a pending item goes before a busy one that is due, each
// in Order. The canary phase claims only canaries. Adopting those items
// first keeps at most MaxInFlight upgrades running: an execution, or a
// Map cut short, left at most one per lane.
func NextClaim(c Campaign, items []CampaignItem, phase Phase, lane string, now time.Time) (it CampaignItem, action ClaimAction, wait time.Duration) {
	inPhase := func(x CampaignItem) bool { return phase != PhaseCanary || x.Canary }
	if lane != "" {
		for _, x := range items {
			if x.State == ItemRunning && x.Lane == lane {
				return x, ClaimStart, 0
			}
		}
	}
	for _, x := range items {
		if inPhase(x) && x.Started() {
			return x, ClaimStart, 0
		}
	}
	if TallyItems(items).Stops(c.Options) {
		return CampaignItem{}, ClaimStop, 0
	}
	var due, later *CampaignItem
	for i := range items {
		x := &items[i]
		if !inPhase(*x) {
			continue
		}
		switch x.State {
		case ItemPending:
			return *x, ClaimStart, 0
		case ItemBusy:
			if !x.NextTry.After(now) {
				if due == nil {
					due = x
				}
			} else if later == nil || x.NextTry.Before(later.NextTry) {
				later = x
			}
		}
	}
	switch {
	case due != nil:
		return *due, ClaimStart, 0
	case later != nil:
		return CampaignItem{}, ClaimWait, later.NextTry.Sub(now)
	}
	return CampaignItem{}, ClaimNone, 0
}

// busyAgain is it, found busy again: claimed later, or, past
// MaxBusyAttempts, blocked with a reason.
func busyAgain(it CampaignItem, now time.Time, why string) CampaignItem {
	it.Attempts++
	it.UpdatedAt = now
	if it.Attempts >= MaxBusyAttempts {
		it.State = ItemBlocked
		it.Description = fmt.Sprintf("The instance stayed busy with other operations through %d tries over %s (%s); upgrade it later.",
			it.Attempts, time.Duration(it.Attempts)*BusyRetry, why)
		return it
	}
	it.State, it.NextTry = ItemBusy, now.Add(BusyRetry)
	it.Description = why
	return it
}

// CheckCampaign is CreateCampaign's precondition: ids a store can key,
// and items of c, each instance once.
func CheckCampaign(c Campaign, items []CampaignItem) error {
	if err := CheckIDs(c.ID); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, it := range items {
		if err := CheckIDs(it.InstanceID); err != nil {
			return err
		}
		if it.CampaignID != c.ID {
			return fmt.Errorf("item %s is of campaign %q, not %q", it.InstanceID, it.CampaignID, c.ID)
		}
		if seen[it.InstanceID] {
			return fmt.Errorf("instance %s is twice in campaign %s", it.InstanceID, c.ID)
		}
		seen[it.InstanceID] = true
	}
	return nil
}

// CheckCampaignItem is UpdateCampaignItem's precondition: it and read are
// the same item.
func CheckCampaignItem(it, read CampaignItem) error {
	if err := CheckIDs(it.CampaignID, it.InstanceID); err != nil {
		return err
	}
	if it.CampaignID != read.CampaignID || it.InstanceID != read.InstanceID {
		return fmt.Errorf("item %s/%s written as read item %s/%s", it.CampaignID, it.InstanceID, read.CampaignID, read.InstanceID)
	}
	return nil
}

// SortCampaignItems sorts items by Order, the claim order.
func SortCampaignItems(items []CampaignItem) {
	slices.SortStableFunc(items, func(a, b CampaignItem) int {
		if a.Order != b.Order {
			return a.Order - b.Order
		}
		return strings.Compare(a.InstanceID, b.InstanceID)
	})
}
