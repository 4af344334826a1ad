package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/logging"
)

// The Tasks of statemachines/upgrade.asl.json. Each reads the campaign or
// one item, and writes at most one item (or the campaign's end), by a
// conditional write on the item as read; each is idempotent.

// Preview is what an upgrade would do to an instance, as its driver works
// it out without changing anything.
type Preview struct {
	// Changes lists what would change, one line per resource
	// ("Modify Bucket (AWS::S3::Bucket), replacement False").
	Changes []string
	// Refused, when set, is why the upgrade would be refused (the
	// description the update's failure would have).
	Refused string
}

// ErrNoPreview is what a Previewer that wraps a driver without one (a
// decorator of any driver) answers: the item is skipped as for a driver
// that is no Previewer.
var ErrNoPreview = errors.New("the driver cannot preview a change")

// Previewer is implemented by a driver that can tell what a change would
// do without doing it (the CloudFormation driver: a change set created,
// read and deleted). A dry run of a plan whose driver has none skips its
// instances, saying so.
type Previewer interface {
	Preview(ctx context.Context, c Change) (Preview, error)
}

// UpgradeLanes is what the Plan Task answers: the campaign's lanes for
// each phase (a Map state runs one iteration per lane), the execution's
// part, and how many Tasks each lane runs in this execution (LaneSteps:
// CampaignLaneSteps).
type UpgradeLanes struct {
	CampaignID  string
	Part        int
	DryRun      bool
	HasCanaries bool
	CanaryLanes []int
	Lanes       []int
	LaneSteps   int
}

// UpgradeLane is a lane's state ($.lane in upgrade.asl.json), which each
// of its Tasks reads and answers: what the lane does next (Action, after
// a Claim), the item it works on, whether that item's result is recorded
// (Done) or the lane ends before it is (Yield), and how many Tasks the
// lane ran in this execution (Steps), against its budget. Every field is
// always written: a Choice on a field that is absent fails.
type UpgradeLane struct {
	Action     ClaimAction
	InstanceID string
	RetryAfter int
	Done       bool
	Yield      bool
	Steps      int
}

// spent says whether a lane that ran steps Tasks has used its budget (0:
// none, as when a Task is run by hand).
func spent(steps, budget int) bool { return budget > 0 && steps >= budget }

// UpgradeNext is what the Continue Task answers: whether the campaign
// goes on in a new execution (Execution), this one ending.
type UpgradeNext struct {
	Continued bool
	Execution string
}

// CampaignInput is the input of an upgrade execution: the campaign, its
// options, and which part of it the execution is (1, then 2, ... for the
// executions it continues in). Its JSON is the Engine port's (engine.go).
type CampaignInput struct {
	CampaignID string
	Options    CampaignOptions
	Part       int
}

// CampaignExecution is the name of the execution of part of a campaign:
// the campaign's id, then <id>-2, <id>-3, ... Deterministic, so that a
// Continue Task run again starts the same execution (the Engine's start is
// idempotent), and ops follows a campaign across its executions.
func CampaignExecution(id string, part int) string {
	if part <= 1 {
		return id
	}
	return fmt.Sprintf("%s-%d", id, part)
}

// Step Functions keeps at most 25,000 events in an execution's history,
// and an inline Map's iterations count in it. A lane's loop costs at most
// CampaignEventsPerStep events per Task it runs (Wait 2 + Check 5 +
// Choice 2, the same for Claim with its Choice and busy Wait), so each
// execution gives its lanes, canaries' and others' together,
// CampaignHistoryBudget events: lane_steps = budget / (lanes × 9), at
// least CampaignMinLaneSteps. The 5,000 events left are the margin: the
// fixed states (about 40), each lane's Map iteration and its end (6),
// ItemFailed (5, once an item), and Task retries (3 events each). A lane
// that spent its steps ends (yield); the campaign then continues in a new
// execution of the workflow (UpgradeContinueTask).
const (
	CampaignHistoryBudget = 20000
	CampaignEventsPerStep = 9
	CampaignMinLaneSteps  = 2
)

// CampaignLaneSteps is how many Tasks each of lanes lanes (both phases'
// together) runs in one execution, given budget events (0: the default,
// CampaignHistoryBudget).
func CampaignLaneSteps(budget, lanes int) int {
	if budget <= 0 {
		budget = CampaignHistoryBudget
	}
	if lanes <= 0 {
		return 0
	}
	return max(CampaignMinLaneSteps, budget/(lanes*CampaignEventsPerStep))
}

// UpgradeStop is what the Tally Task answers: whether the campaign stops
// after its canaries.
type UpgradeStop struct {
	Stop  bool
	Tally Tally
}

// UpgradeReport is what the Finish Task answers: the campaign's end, and
// Ended when this Task ended it (a Finish run again reports it once).
type UpgradeReport struct {
	CampaignID string
	State      CampaignState
	Tally      Tally
	Ended      bool
}

// campaignWorkflowTimeout bounds a campaign's execution, as
// upgrade.asl.json's TimeoutSeconds does: a campaign's records are kept
// CampaignRetention past it.
const campaignWorkflowTimeout = 7 * 24 * time.Hour

func (b *Broker) campaigns() (Campaigns, error) {
	if b.Campaigns == nil {
		return nil, errors.New("this broker keeps no fleet upgrades (no Campaigns port)")
	}
	return b.Campaigns, nil
}

// UpgradePlanTask runs the Plan Task of part of a campaign: it lists the
// instances of the campaign's plans that run behind and writes the
// campaign and its items (once: run again, or in a later part, it reads
// them), and answers the lanes. A later part first hands the items that
// the lanes of the part before left running back to its own lanes
// (pending again, their upgrade's operation id kept: NextClaim takes them
// first), before any of its lanes runs.
func (b *Broker) UpgradePlanTask(ctx context.Context, id string, part int, o CampaignOptions) (UpgradeLanes, error) {
	cs, err := b.campaigns()
	if err != nil {
		return UpgradeLanes{}, err
	}
	part = max(part, 1)
	c, items, err := cs.LoadCampaign(ctx, id)
	if errors.Is(err, ErrNotFound) {
		if err := o.Check(b.Catalog); err != nil {
			return UpgradeLanes{}, &Failure{Description: fmt.Sprintf("The upgrade cannot start: %s.", err)}
		}
		if err := o.CheckInstances(ctx, b.Catalog, b.Store.GetInstance); err != nil {
			if oe := (*OptionsError)(nil); errors.As(err, &oe) {
				return UpgradeLanes{}, &Failure{Description: fmt.Sprintf("The upgrade cannot start: %s.", oe)}
			}
			return UpgradeLanes{}, fmt.Errorf("plan campaign %s: %w", id, err)
		}
		now := b.Now()
		c = Campaign{ID: id, Options: o, State: CampaignRunning, CreatedAt: now, UpdatedAt: now,
			ExpiresAt: now.Add(campaignWorkflowTimeout + CampaignRetention)}
		var insts []Instance
		if insts, err = b.planInstances(ctx, o); err != nil {
			return UpgradeLanes{}, err
		}
		items = PlanItems(c, insts, b.behind)
		for i := range items {
			items[i].ExpiresAt = c.ExpiresAt
		}
		err = cs.CreateCampaign(ctx, c, items)
		if errors.Is(err, ErrCampaignExists) {
			c, items, err = cs.LoadCampaign(ctx, id)
		}
		if err == nil {
			b.Logger.InfoContext(ctx, "upgrade campaign planned", "items", len(items), "dry_run", o.DryRun)
		}
	}
	if err != nil {
		return UpgradeLanes{}, fmt.Errorf("plan campaign %s: %w", id, err)
	}
	if c.State != CampaignRunning {
		return UpgradeLanes{CampaignID: id, Part: part, DryRun: c.Options.DryRun, CanaryLanes: []int{}, Lanes: []int{}}, nil
	}
	if part > 1 {
		if items, err = b.adoptRunning(ctx, id, items); err != nil {
			return UpgradeLanes{}, err
		}
	}
	canaries := 0
	for _, it := range items {
		if it.Canary {
			canaries++
		}
	}
	lanes := min(c.Options.MaxInFlight, MaxInFlightCap, len(items))
	canaryLanes := min(lanes, canaries)
	return UpgradeLanes{CampaignID: id, Part: part, DryRun: c.Options.DryRun, HasCanaries: canaryLanes > 0,
		CanaryLanes: count(canaryLanes), Lanes: count(lanes),
		LaneSteps: CampaignLaneSteps(b.CampaignHistory, canaryLanes+lanes)}, nil
}

// adoptRunning makes the items left running by an earlier part pending
// again, keeping their operation id (Started), and returns the items as
// they are then. No lane of the campaign runs while it does: the earlier
// part's Maps ended, this part's have not begun.
func (b *Broker) adoptRunning(ctx context.Context, id string, items []CampaignItem) ([]CampaignItem, error) {
	out := slices.Clone(items)
	for i, it := range items {
		if it.State != ItemRunning {
			continue
		}
		next := it
		next.State, next.Lane, next.UpdatedAt = ItemPending, "", b.Now()
		err := b.Campaigns.UpdateCampaignItem(ctx, next, it)
		if _, lost := conflictOf(err); lost {
			continue // another try of this Task did it
		}
		if err != nil {
			return nil, fmt.Errorf("plan campaign %s: adopt %s: %w", id, it.InstanceID, err)
		}
		next.Version = it.Version + 1
		out[i] = next
	}
	return out, nil
}

func count(n int) []int {
	out := make([]int, max(n, 0))
	for i := range out {
		out[i] = i
	}
	return out
}

// planInstances lists the instances of the plans o names (for All, every
// plan of the catalog with a maintenance_info, the only plans it
// upgrades: hasPlan), a plan at a time, so that a store reads those
// plans' instances and not the others' (the table's ByPlan index).
func (b *Broker) planInstances(ctx context.Context, o CampaignOptions) ([]Instance, error) {
	var filters []InstanceFilter
	for _, id := range o.PlanIDs {
		filters = append(filters, InstanceFilter{PlanID: id})
	}
	if o.All {
		for _, s := range b.Catalog.Services() {
			for _, p := range s.Plans {
				if p.MaintenanceInfo != nil {
					filters = append(filters, InstanceFilter{PlanID: p.ID})
				}
			}
		}
	}
	var out []Instance
	for _, f := range filters {
		page := ""
		for {
			insts, next, err := b.Store.ListInstances(ctx, f, page)
			if err != nil {
				return nil, fmt.Errorf("list instances: %w", err)
			}
			out = append(out, insts...)
			if next == "" {
				break
			}
			page = next
		}
	}
	return out, nil
}

// behind says whether inst runs behind its plan (PlanVersion.Behind), and
// which plan that is; never for a plan with no maintenance_info, which
// has no version to upgrade to.
func (b *Broker) behind(inst Instance) (bool, *catalog.Plan) {
	_, p := b.Catalog.PlanByID(inst.PlanID)
	if p == nil || p.MaintenanceInfo == nil {
		return false, p
	}
	current, ok := b.CurrentVersion(inst.ServiceID, inst.PlanID)
	return ok && inst.RunsVersion().Behind(current), p
}

// UpgradeClaimTask runs the Claim Task of lane index (nil: the lane does
// not say) in phase: it claims the next item (NextClaim) by a conditional
// write, or says what the lane does instead: wait for a busy item, end
// (nothing left, the campaign stops), or yield, once the lane ran budget
// Tasks in this execution. A claim lost to another lane is tried again on
// what the store holds then. An item running under the lane's own id is
// the lane's already: it is answered as claimed, and nothing is written.
func (b *Broker) UpgradeClaimTask(ctx context.Context, id string, phase Phase, index *int, lane UpgradeLane, budget int) (UpgradeLane, error) {
	cs, err := b.campaigns()
	if err != nil {
		return UpgradeLane{}, err
	}
	if spent(lane.Steps, budget) {
		return UpgradeLane{Action: ClaimYield, Yield: true, Steps: lane.Steps}, nil
	}
	laneID := ""
	if index != nil {
		laneID = LaneID(phase, *index)
	}
	steps := lane.Steps + 1
	for range 20 {
		c, items, err := cs.LoadCampaign(ctx, id)
		if err != nil {
			return UpgradeLane{}, fmt.Errorf("claim in campaign %s: %w", id, err)
		}
		now := b.Now()
		it, action, wait := NextClaim(c, items, phase, laneID, now)
		if action != ClaimStart {
			return UpgradeLane{Action: action, RetryAfter: RetryAfterSeconds(wait), Steps: steps}, nil
		}
		claimed := UpgradeLane{Action: ClaimStart, InstanceID: it.InstanceID, RetryAfter: 1, Steps: steps}
		if it.State == ItemRunning {
			b.Logger.InfoContext(logging.With(ctx, slog.String("campaign_id", id), slog.String("instance_id", it.InstanceID)),
				"upgrade lane adopts the item it left running", "lane", laneID)
			return claimed, nil
		}
		next := it
		next.State, next.OperationID, next.Lane, next.UpdatedAt = ItemRunning, UpgradeOperationID(id, it.InstanceID), laneID, now
		err = cs.UpdateCampaignItem(ctx, next, it)
		if _, lost := conflictOf(err); lost {
			continue // another lane claimed it first
		}
		if err != nil {
			return UpgradeLane{}, fmt.Errorf("claim %s in campaign %s: %w", it.InstanceID, id, err)
		}
		return claimed, nil
	}
	return UpgradeLane{}, fmt.Errorf("claim in campaign %s: every claim was lost to another lane", id)
}

// UpgradeItemTask runs the Start and the Check Tasks of an item: it starts
// the instance's upgrade (the broker's own update to the plan's
// maintenance_info, under the item's operation id), or, once started,
// looks at that operation, and records the item's result once it has
// one. Done: the lane claims its next item. Yield: the item still runs
// and the lane spent its budget of budget Tasks: it ends, and the next
// execution of the campaign adopts the item (UpgradePlanTask).
func (b *Broker) UpgradeItemTask(ctx context.Context, id, instanceID string, dryRun bool, lane UpgradeLane, budget int) (UpgradeLane, error) {
	cs, err := b.campaigns()
	if err != nil {
		return UpgradeLane{}, err
	}
	out := UpgradeLane{Action: ClaimStart, InstanceID: instanceID, Steps: lane.Steps + 1}
	it, err := cs.GetCampaignItem(ctx, id, instanceID)
	if errors.Is(err, ErrNotFound) {
		// Only a payload the campaign never made names no item: retrying
		// it cannot help.
		return UpgradeLane{}, &Failure{Description: fmt.Sprintf("The upgrade campaign %s has no item for service instance %s.", id, instanceID)}
	}
	if err != nil {
		return UpgradeLane{}, fmt.Errorf("campaign %s: %w", id, err)
	}
	if it.State != ItemRunning {
		out.Done = true // recorded by an earlier try
		return out, nil
	}
	ctx = logging.With(ctx, slog.String("campaign_id", id), slog.String("instance_id", instanceID), slog.String("operation_id", it.OperationID))
	next, wait, err := b.advanceItem(ctx, it, dryRun)
	if err != nil {
		return UpgradeLane{}, err
	}
	if next.State == ItemRunning {
		out.RetryAfter, out.Yield = RetryAfterSeconds(wait), spent(out.Steps, budget)
		return out, nil
	}
	out.Done = true
	return out, b.recordItem(ctx, it, next)
}

// recordItem writes an item's new state, once: a write lost to another
// try of the same Task finds the item recorded.
func (b *Broker) recordItem(ctx context.Context, read, next CampaignItem) error {
	next.UpdatedAt = b.Now()
	// A driver's words (a failure, a preview), stored clean.
	next.Description = CleanLine(next.Description)
	for i, c := range next.Changes {
		next.Changes[i] = CleanLine(c)
	}
	err := b.Campaigns.UpdateCampaignItem(ctx, next, read)
	if _, lost := conflictOf(err); lost {
		return nil
	}
	if err != nil {
		return fmt.Errorf("record campaign item %s: %w", read.InstanceID, err)
	}
	level := slog.LevelInfo
	if next.State.Bad() {
		level = slog.LevelWarn
	}
	b.Logger.Log(ctx, level, "upgrade campaign item ended", "state", string(next.State))
	return nil
}

// advanceItem is what the item it, running, becomes now, and when to look
// again while it runs.
func (b *Broker) advanceItem(ctx context.Context, it CampaignItem, dryRun bool) (CampaignItem, time.Duration, error) {
	op, err := b.Store.GetOperation(ctx, it.InstanceID, it.OperationID)
	switch {
	case err == nil:
		return itemOfOperation(it, op, b.Now())
	case !errors.Is(err, ErrNotFound):
		return it, 0, err
	}
	inst, err := b.Store.GetInstance(ctx, it.InstanceID)
	if errors.Is(err, ErrNotFound) {
		return skipped(it, "The instance is gone (deprovisioned)."), 0, nil
	}
	if err != nil {
		return it, 0, err
	}
	late, plan := b.behind(inst)
	switch {
	case plan == nil || plan.MaintenanceInfo == nil:
		return skipped(it, fmt.Sprintf("The instance's plan %s is no longer in the catalog with a maintenance_info.", inst.PlanID)), 0, nil
	case inst.State == InstanceFailed:
		return skipped(it, "The instance is failed: it can only be deprovisioned."), 0, nil
	case !late:
		return skipped(it, fmt.Sprintf("The instance is already current (version %s).", plan.MaintenanceInfo.Version)), 0, nil
	}
	if err := b.validateParameters(plan, catalog.InstanceCreate, inst.Parameters); err != nil {
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeBadRequest {
			return it, 0, err
		}
		return blocked(it, fmt.Sprintf("The instance's parameters do not fit version %s of its plan: %s Its owner changes them (an update), then the instance can be upgraded.",
			plan.MaintenanceInfo.Version, strings.TrimSuffix(e.Description, ".")+".")), 0, nil
	}
	if dryRun {
		return b.previewItem(ctx, it, inst, plan)
	}
	_, err = b.upgrade(ctx, UpdateDetails{InstanceID: inst.ID, ServiceID: inst.ServiceID,
		MaintenanceInfo: planMaintenanceInfo(plan), AcceptsIncomplete: true}, it.OperationID)
	var e *Error
	switch {
	case errors.As(err, &e) && e.Code == CodeConcurrencyError:
		return busyAgain(it, b.Now(), e.Description), 0, nil
	case errors.As(err, &e) && e.Code != CodeInternal:
		return failed(it, e.Description), 0, nil
	case err != nil:
		return it, 0, err
	}
	// Started (or, for a synchronous plan, done): its record says which.
	op, err = b.Store.GetOperation(ctx, it.InstanceID, it.OperationID)
	if errors.Is(err, ErrNotFound) {
		// Nothing to change after all (the update was a no-op).
		return skipped(it, fmt.Sprintf("The instance is already current (version %s).", plan.MaintenanceInfo.Version)), 0, nil
	}
	if err != nil {
		return it, 0, err
	}
	b.Logger.InfoContext(ctx, "upgrade started", "from_version", it.FromVersion, "to_version", it.ToVersion)
	return itemOfOperation(it, op, b.Now())
}

// itemOfOperation is what the item becomes as its operation stands.
func itemOfOperation(it CampaignItem, op Operation, now time.Time) (CampaignItem, time.Duration, error) {
	switch op.State {
	case OperationSucceeded:
		it.State, it.Description = ItemUpgraded, ""
		return it, 0, nil
	case OperationFailed:
		return failed(it, op.Description), 0, nil
	}
	wait := op.NextCheckAt.Sub(now)
	return it, min(max(wait, 5*time.Second), time.Minute), nil
}

func skipped(it CampaignItem, why string) CampaignItem {
	it.State, it.Description = ItemSkipped, why
	return it
}

func blocked(it CampaignItem, why string) CampaignItem {
	it.State, it.Description = ItemBlocked, why
	return it
}

func failed(it CampaignItem, why string) CampaignItem {
	it.State, it.Description = ItemFailed, why
	return it
}

// previewItem asks the instance's driver what the upgrade would do.
func (b *Broker) previewItem(ctx context.Context, it CampaignItem, inst Instance, plan *catalog.Plan) (CampaignItem, time.Duration, error) {
	driver, settings, ok := b.Drivers.For(plan)
	pv, can := driver.(Previewer)
	if !ok || !can {
		return skipped(it, "Its driver cannot preview a change (no preview)."), 0, nil
	}
	snap, err := b.Store.Load(ctx, inst.ID, "", "")
	if err != nil {
		return it, 0, err
	}
	target := Target{MaintenanceInfo: planMaintenanceInfo(plan), PlanDigest: b.planDigest(plan)}
	op := Operation{ID: it.OperationID, InstanceID: inst.ID, Kind: KindUpdate, State: OperationInProgress, Async: true,
		PlanID: inst.PlanID, Target: &target, CreatedAt: b.Now()}
	p, err := pv.Preview(ctx, Change{Operation: op, Instance: inst, Plan: plan, Service: b.Catalog.Service(inst.ServiceID),
		Settings: settings, Records: snap.Records})
	var f *Failure
	switch {
	case errors.Is(err, ErrNoPreview):
		return skipped(it, "Its driver cannot preview a change (no preview)."), 0, nil
	case errors.As(err, &f):
		it.State, it.Description = ItemWouldRefuse, f.Description
		return it, 0, nil
	case err != nil:
		return it, 0, err
	}
	it.Changes = p.Changes
	if p.Refused != "" {
		it.State, it.Description = ItemWouldRefuse, p.Refused
		return it, 0, nil
	}
	it.State, it.Description = ItemWouldChange, ""
	if len(p.Changes) == 0 {
		it.Description = "No resource would change."
	}
	return it, 0, nil
}

// UpgradeItemFailedTask records that an item's Task failed for good (the
// workflow's Catch): the item failed, with the caught failure's
// description.
func (b *Broker) UpgradeItemFailedTask(ctx context.Context, id, instanceID string, f Failure) error {
	cs, err := b.campaigns()
	if err != nil {
		return err
	}
	it, err := cs.GetCampaignItem(ctx, id, instanceID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("campaign %s: %w", id, err)
	}
	if it.State.Ended() {
		return nil
	}
	why := f.Description
	if why == "" {
		why = "The upgrade's step failed."
	}
	return b.recordItem(logging.With(ctx, slog.String("campaign_id", id), slog.String("instance_id", instanceID)), it, failed(it, why))
}

// UpgradeContinueTask runs the Continue Task, after phase's Map of part
// of a campaign ended: when a lane of it yielded (an item of the phase
// still running, or pending or busy while the campaign does not stop, or
// started before it stopped), it starts the campaign's next part, a new
// execution of the workflow (CampaignExecution), and the workflow ends;
// else the campaign goes on in this execution. Run again, it starts the
// same execution (the Engine's start is idempotent).
func (b *Broker) UpgradeContinueTask(ctx context.Context, id string, part int, phase Phase) (UpgradeNext, error) {
	cs, err := b.campaigns()
	if err != nil {
		return UpgradeNext{}, err
	}
	c, items, err := cs.LoadCampaign(ctx, id)
	if err != nil {
		return UpgradeNext{}, fmt.Errorf("continue campaign %s: %w", id, err)
	}
	if c.State != CampaignRunning || !leftBehind(c, items, phase) {
		return UpgradeNext{}, nil
	}
	next := max(part, 1) + 1
	name := CampaignExecution(id, next)
	input, err := json.Marshal(CampaignInput{CampaignID: id, Options: c.Options, Part: next})
	if err != nil {
		return UpgradeNext{}, err
	}
	// The next execution may run as long as the first: the campaign and
	// its items are kept CampaignRetention past its end, not the first's.
	if err := cs.SetCampaignExpiry(ctx, id, b.Now().Add(campaignWorkflowTimeout+CampaignRetention)); err != nil {
		return UpgradeNext{}, fmt.Errorf("continue campaign %s: %w", id, err)
	}
	if err := b.Engine.Start(ctx, WorkflowUpgrade, name, input); err != nil {
		return UpgradeNext{}, fmt.Errorf("continue campaign %s in %s: %w", id, name, err)
	}
	b.Logger.InfoContext(logging.With(ctx, slog.String("campaign_id", id)), "upgrade campaign continues in a new execution",
		"execution", name, "part", next)
	return UpgradeNext{Continued: true, Execution: name}, nil
}

// leftBehind says whether phase's lanes ended with work of the phase left:
// only a lane that yielded leaves any.
func leftBehind(c Campaign, items []CampaignItem, phase Phase) bool {
	stops := TallyItems(items).Stops(c.Options)
	for _, it := range items {
		if phase == PhaseCanary && !it.Canary {
			continue
		}
		switch {
		case it.State == ItemRunning, it.Started():
			return true
		case (it.State == ItemPending || it.State == ItemBusy) && !stops:
			return true
		}
	}
	return false
}

// UpgradeTallyTask runs the Tally Task, after the canaries: whether the
// campaign stops (the other lanes do not run).
func (b *Broker) UpgradeTallyTask(ctx context.Context, id string) (UpgradeStop, error) {
	cs, err := b.campaigns()
	if err != nil {
		return UpgradeStop{}, err
	}
	c, items, err := cs.LoadCampaign(ctx, id)
	if err != nil {
		return UpgradeStop{}, fmt.Errorf("tally campaign %s: %w", id, err)
	}
	t := TallyItems(items)
	// Items an earlier execution started (Started) are watched to their
	// end by the other lanes even once the campaign stops: they run.
	return UpgradeStop{Stop: t.Stops(c.Options) && !slices.ContainsFunc(items, CampaignItem.Started), Tally: t}, nil
}

// UpgradeFinishTask runs the Finish Task: the items not tried become
// not_attempted, and the campaign's record its outcome (once).
func (b *Broker) UpgradeFinishTask(ctx context.Context, id string) (UpgradeReport, error) {
	cs, err := b.campaigns()
	if err != nil {
		return UpgradeReport{}, err
	}
	c, items, err := cs.LoadCampaign(ctx, id)
	if err != nil {
		return UpgradeReport{}, fmt.Errorf("finish campaign %s: %w", id, err)
	}
	if c.State != CampaignRunning {
		return UpgradeReport{CampaignID: id, State: c.State, Tally: TallyItems(items)}, nil
	}
	now := b.Now()
	state := CampaignFinished
	for _, it := range items {
		if it.State != ItemPending && it.State != ItemBusy {
			continue
		}
		state = CampaignStopped
		left := it
		left.State, left.UpdatedAt = ItemNotAttempted, now
		left.Description = "The campaign stopped before this instance was tried."
		if err := cs.UpdateCampaignItem(ctx, left, it); err != nil {
			if _, lost := conflictOf(err); lost {
				continue // another try of this Task wrote it
			}
			return UpgradeReport{}, fmt.Errorf("finish campaign %s: %w", id, err)
		}
	}
	if _, items, err = cs.LoadCampaign(ctx, id); err != nil {
		return UpgradeReport{}, fmt.Errorf("finish campaign %s: %w", id, err)
	}
	t := TallyItems(items)
	if t.Stops(c.Options) {
		state = CampaignStopped
	}
	// Kept CampaignRetention from its end, however long it ran: the items
	// first, so that a Finish cut short and run again (the campaign still
	// running) sets them.
	c.ExpiresAt = now.Add(CampaignRetention)
	if err := cs.SetCampaignExpiry(ctx, id, c.ExpiresAt); err != nil {
		return UpgradeReport{}, fmt.Errorf("finish campaign %s: %w", id, err)
	}
	c.State, c.UpdatedAt, c.FinishedAt = state, now, now
	c.Outcome = t.Outcome(c.Options)
	err = cs.EndCampaign(ctx, c)
	if _, lost := conflictOf(err); lost {
		return UpgradeReport{CampaignID: id, State: state, Tally: t}, nil
	}
	if err != nil {
		return UpgradeReport{}, fmt.Errorf("finish campaign %s: %w", id, err)
	}
	b.Logger.InfoContext(logging.With(ctx, slog.String("campaign_id", id)), "upgrade campaign ended", "state", string(state),
		"upgraded", t.Upgraded, "failed", t.Failed, "blocked", t.Blocked, "skipped", t.Skipped, "not_attempted", t.NotAttempted,
		"would_change", t.WouldChange, "would_refuse", t.WouldRefuse)
	return UpgradeReport{CampaignID: id, State: state, Tally: t, Ended: true}, nil
}

// Outcome says in a sentence how a campaign with options o ended.
func (t Tally) Outcome(o CampaignOptions) string {
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{t.Upgraded, "upgraded"}, {t.Failed, "failed"}, {t.Blocked, "blocked by the instance's own state"}, {t.Skipped, "skipped"}, {t.NotAttempted, "not attempted"},
		{t.WouldChange, "would change"}, {t.WouldRefuse, "would be refused"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	if len(parts) == 0 {
		parts = []string{"no instance ran behind"}
	}
	s := strings.Join(parts, ", ") + "."
	switch {
	case t.CanaryFailed:
		s = "Stopped: a canary failed. " + s
	case t.Failed >= max(1, o.MaxFailures):
		s = fmt.Sprintf("Stopped after %d failures (max failures %d). %s", t.Failed, o.MaxFailures, s)
	}
	return s
}
