package metrics

import (
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
)

// DefaultNamespace is the namespace when the functions' variable
// BROKER_METRICS_NAMESPACE (env.MetricsNamespace) is not set.
const DefaultNamespace = "ServerlessOsb"

// The metrics' names. The infra package's dashboard and alarms use these.
const (
	// OperationStarted counts operations that started (the write that
	// created or locked the instance or binding succeeded).
	OperationStarted = "OperationStarted"
	// OperationSucceeded and OperationFailed count finished operations;
	// both are written for every finished one (one of them 0), so that
	// their sum is the operations finished.
	OperationSucceeded = "OperationSucceeded"
	OperationFailed    = "OperationFailed"
	// OperationDuration is from the operation's start to its end.
	OperationDuration = "OperationDuration"
	// LastOperationPolls counts the authenticated last_operation requests.
	LastOperationPolls = "LastOperationPolls"
	// CleanupFailed counts detached resources whose cleanup gave up: they
	// stay listed for an operator (ops detached).
	CleanupFailed = "CleanupFailed"
	// What one run of the reaper did: operations started again, failed
	// because their execution ended without a result, and stopped and
	// failed because they outlived their maximum polling duration; and the
	// cleanups it started.
	ReaperRestarted       = "ReaperRestarted"
	ReaperFailed          = "ReaperFailed"
	ReaperTimedOut        = "ReaperTimedOut"
	ReaperCleanupsStarted = "ReaperCleanupsStarted"
	// What the reaper found: the detached resources waiting for (or given
	// up by) their cleanup, and the operations in progress.
	DetachedResources    = "DetachedResources"
	OperationsInProgress = "OperationsInProgress"
	// What a fleet upgrade (a campaign) did, once it ended: instances
	// upgraded, failed (not attempted included: the campaign stopped
	// before them) and skipped.
	UpgradeUpgraded = "UpgradeUpgraded"
	UpgradeFailed   = "UpgradeFailed"
	UpgradeSkipped  = "UpgradeSkipped"
)

// The dimensions' names.
const (
	DimService = "Service" // the offering's name in the catalog
	DimPlan    = "Plan"    // the plan's name in the catalog
	DimKind    = "Kind"    // provision, update, deprovision, bind or unbind
	DimTarget  = "Target"  // what last_operation was asked about: instance or binding
)

// UnknownService is the Service dimension of a plan the catalog no longer
// has (its Plan dimension is then the plan's id).
const UnknownService = "unknown"

// Recorder records the broker's metrics. A nil *Recorder records nothing.
type Recorder struct {
	W       *Writer
	Catalog *catalog.Catalog
}

// New returns a Recorder writing to w, naming services and plans from cat.
func New(w *Writer, cat *catalog.Catalog) *Recorder {
	return &Recorder{W: w, Catalog: cat}
}

// operationSets are the aggregations of the operation metrics: by plan and
// kind (the dashboard's detail), by kind, and in total (what alarms watch).
var operationSets = [][]string{{DimService, DimPlan, DimKind}, {DimKind}, {}}

// planDimensions names planID's offering and plan.
func (r *Recorder) planDimensions(planID string) []Dimension {
	service, plan := UnknownService, planID
	if r.Catalog != nil {
		if s, p := r.Catalog.PlanByID(planID); p != nil {
			service, plan = s.Name, p.Name
		}
	}
	return []Dimension{{DimService, service}, {DimPlan, plan}}
}

func (r *Recorder) operationDimensions(op broker.Operation) []Dimension {
	return append(r.planDimensions(op.PlanID), Dimension{DimKind, string(op.Kind)})
}

// OperationStarted records that op started.
func (r *Recorder) OperationStarted(op broker.Operation) {
	if r == nil {
		return
	}
	r.W.Write(r.operationDimensions(op), operationSets, Metric{OperationStarted, Count, 1})
}

// OperationFinished records op's outcome and, when it says when it
// finished, its duration.
func (r *Recorder) OperationFinished(op broker.Operation) {
	if r == nil || !op.Finished() {
		return
	}
	succeeded, failed := 0.0, 0.0
	if op.State == broker.OperationSucceeded {
		succeeded = 1
	} else {
		failed = 1
	}
	ms := []Metric{{OperationSucceeded, Count, succeeded}, {OperationFailed, Count, failed}}
	if !op.FinishedAt.IsZero() && !op.CreatedAt.IsZero() && !op.FinishedAt.Before(op.CreatedAt) {
		ms = append(ms, Metric{OperationDuration, Milliseconds, float64(op.FinishedAt.Sub(op.CreatedAt).Milliseconds())})
	}
	r.W.Write(r.operationDimensions(op), operationSets, ms...)
}

// CleanupFailed records that the cleanup of d gave up.
func (r *Recorder) CleanupFailed(d broker.Detached) {
	if r == nil {
		return
	}
	r.W.Write(r.planDimensions(d.PlanID), [][]string{{DimService, DimPlan}, {}}, Metric{CleanupFailed, Count, 1})
}

// LastOperationPoll records one last_operation request about target
// ("instance" or "binding").
func (r *Recorder) LastOperationPoll(target string) {
	if r == nil {
		return
	}
	r.W.Write([]Dimension{{DimTarget, target}}, [][]string{{DimTarget}, {}}, Metric{LastOperationPolls, Count, 1})
}

// Upgrade records what a fleet upgrade did, once: when its Finish ended
// it (a Finish run again reports it not Ended). A dry run changes
// nothing, and records nothing.
func (r *Recorder) Upgrade(rep broker.UpgradeReport) {
	if r == nil || !rep.Ended || rep.Tally.WouldChange+rep.Tally.WouldRefuse > 0 {
		return
	}
	r.W.Write(nil, nil,
		Metric{UpgradeUpgraded, Count, float64(rep.Tally.Upgraded)},
		Metric{UpgradeFailed, Count, float64(rep.Tally.Failed + rep.Tally.NotAttempted)},
		Metric{UpgradeSkipped, Count, float64(rep.Tally.Skipped)},
	)
}

// Reap records what one run of the reaper did and found.
func (r *Recorder) Reap(rep broker.ReapReport) {
	if r == nil {
		return
	}
	r.W.Write(nil, nil,
		Metric{ReaperRestarted, Count, float64(rep.Restarted)},
		Metric{ReaperFailed, Count, float64(rep.Failed)},
		Metric{ReaperTimedOut, Count, float64(rep.TimedOut)},
		Metric{ReaperCleanupsStarted, Count, float64(rep.CleanupsStarted)},
		Metric{DetachedResources, Count, float64(rep.Detached)},
		Metric{OperationsInProgress, Count, float64(rep.InProgress)},
	)
}
