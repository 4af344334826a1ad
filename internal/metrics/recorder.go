package metrics

import (
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/metrics/metricname"
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
var operationSets = [][]string{{metricname.DimService, metricname.DimPlan, metricname.DimKind}, {metricname.DimKind}, {}}

// planDimensions names planID's offering and plan.
func (r *Recorder) planDimensions(planID string) []Dimension {
	service, plan := UnknownService, planID
	if r.Catalog != nil {
		if s, p := r.Catalog.PlanByID(planID); p != nil {
			service, plan = s.Name, p.Name
		}
	}
	return []Dimension{{metricname.DimService, service}, {metricname.DimPlan, plan}}
}

func (r *Recorder) operationDimensions(op broker.Operation) []Dimension {
	return append(r.planDimensions(op.PlanID), Dimension{metricname.DimKind, string(op.Kind)})
}

// OperationStarted records that op started.
func (r *Recorder) OperationStarted(op broker.Operation) {
	if r == nil {
		return
	}
	r.W.Write(r.operationDimensions(op), operationSets, Metric{metricname.OperationStarted, Count, 1})
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
	ms := []Metric{{metricname.OperationSucceeded, Count, succeeded}, {metricname.OperationFailed, Count, failed}}
	if !op.FinishedAt.IsZero() && !op.CreatedAt.IsZero() && !op.FinishedAt.Before(op.CreatedAt) {
		ms = append(ms, Metric{metricname.OperationDuration, Milliseconds, float64(op.FinishedAt.Sub(op.CreatedAt).Milliseconds())})
	}
	r.W.Write(r.operationDimensions(op), operationSets, ms...)
}

// CleanupFailed records that the cleanup of d gave up.
func (r *Recorder) CleanupFailed(d broker.Detached) {
	if r == nil {
		return
	}
	r.W.Write(r.planDimensions(d.PlanID), [][]string{{metricname.DimService, metricname.DimPlan}, {}}, Metric{metricname.CleanupFailed, Count, 1})
}

// LastOperationPoll records one last_operation request about target
// ("instance" or "binding").
func (r *Recorder) LastOperationPoll(target string) {
	if r == nil {
		return
	}
	r.W.Write([]Dimension{{metricname.DimTarget, target}}, [][]string{{metricname.DimTarget}, {}}, Metric{metricname.LastOperationPolls, Count, 1})
}

// Upgrade records what a fleet upgrade did, once: when its Finish ended
// it (a Finish run again reports it not Ended). A dry run changes
// nothing, and records nothing.
func (r *Recorder) Upgrade(rep broker.UpgradeReport) {
	if r == nil || !rep.Ended || rep.Tally.WouldChange+rep.Tally.WouldRefuse > 0 {
		return
	}
	r.W.Write(nil, nil,
		Metric{metricname.UpgradeUpgraded, Count, float64(rep.Tally.Upgraded)},
		Metric{metricname.UpgradeFailed, Count, float64(rep.Tally.Failed + rep.Tally.NotAttempted)},
		Metric{metricname.UpgradeBlocked, Count, float64(rep.Tally.Blocked)},
		Metric{metricname.UpgradeSkipped, Count, float64(rep.Tally.Skipped)},
	)
}

// Reap records what one run of the reaper did and found.
func (r *Recorder) Reap(rep broker.ReapReport) {
	if r == nil {
		return
	}
	r.W.Write(nil, nil,
		Metric{metricname.ReaperRestarted, Count, float64(rep.Restarted)},
		Metric{metricname.ReaperFailed, Count, float64(rep.Failed)},
		Metric{metricname.ReaperTimedOut, Count, float64(rep.TimedOut)},
		Metric{metricname.ReaperCleanupsStarted, Count, float64(rep.CleanupsStarted)},
		Metric{metricname.DetachedResources, Count, float64(rep.Detached)},
		Metric{metricname.OperationsInProgress, Count, float64(rep.InProgress)},
	)
}
