// Package metricname names the broker's CloudWatch metrics and their
// dimensions, once: internal/metrics emits them and the stack's dashboard
// and alarms (infra) read them. It imports nothing, so that infra names
// the metrics without the domain.
package metricname

// DefaultNamespace is the namespace when the functions' variable
// BROKER_METRICS_NAMESPACE (env.MetricsNamespace) is not set.
const DefaultNamespace = "ServerlessOsb"

// The metrics' names.
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
	// before them), blocked by their own state, and skipped.
	UpgradeUpgraded = "UpgradeUpgraded"
	UpgradeFailed   = "UpgradeFailed"
	UpgradeBlocked  = "UpgradeBlocked"
	UpgradeSkipped  = "UpgradeSkipped"
)

// The dimensions' names.
const (
	DimService = "Service" // the offering's name in the catalog
	DimPlan    = "Plan"    // the plan's name in the catalog
	DimKind    = "Kind"    // provision, update, deprovision, bind or unbind
	DimTarget  = "Target"  // what last_operation was asked about: instance or binding
)
