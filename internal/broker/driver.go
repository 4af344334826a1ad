package broker

import (
	"context"
	"time"

	"github.com/serverless-osb/broker/internal/catalog"
)

// The Driver port: what a driver is asked to do (Change) and answers
// (Progress), the registry that gives a plan its driver (Drivers), and what
// a driver or its settings may say of themselves.

// Change is what a driver is asked to do: the operation and the items it
// concerns, as stored when the step runs, and the plan it runs under.
type Change struct {
	Operation Operation
	Instance  Instance
	// Binding is set for bind and unbind.
	Binding *Binding
	// Plan is the plan the change runs under: the instance's plan, or for
	// an update that changes plan, the new one (Instance.PlanID is then
	// still the old one).
	Plan *catalog.Plan
	// Service is Plan's offering.
	Service *catalog.Service
	// Settings are Plan's driver settings, as the driver's kind parsed them
	// from the catalog when the broker started.
	Settings any
	// Records are the driver's resource records under the instance, as
	// they are when the step runs (with the changes of earlier steps of the
	// same request applied): the instance's own and, for a binding's
	// change, that binding's (BindingRecord); for a deprovision, every
	// record, its bindings' too. A driver reads them here rather than from
	// the store.
	Records []Resource
}

// WithRecords returns c with the record changes applied to its Records, as
// a driver's next call must see them.
func (c Change) WithRecords(changes RecordChanges) Change {
	if changes.Empty() {
		return c
	}
	gone := map[string]bool{}
	for _, n := range changes.Remove {
		gone[n] = true
	}
	for _, s := range changes.Save {
		gone[s.Name] = true
	}
	records := make([]Resource, 0, len(c.Records)+len(changes.Save)) // one allocation
	for _, r := range c.Records {
		if !gone[r.Name] {
			records = append(records, r)
		}
	}
	c.Records = append(records, changes.Save...)
	return c
}

// BindingID is the id of the binding the change concerns, or "".
func (c Change) BindingID() string {
	if c.Binding != nil {
		return c.Binding.ID
	}
	return c.Operation.BindingID
}

// Progress is a driver's answer about a change.
type Progress struct {
	Done bool
	// RetryAfter is when to check again, while not Done.
	RetryAfter time.Duration
	// Description says how far the change is, while not Done (for example
	// "Creating: 3 of 5 resources created."). It is shown to the user by
	// last_operation, so it never holds credentials; empty keeps the
	// broker's generic description.
	Description string
	// Results, when Done. Metadata, when set, replaces the instance's
	// (a provision's or an update's: labels and attributes the platform shows).
	DashboardURL string
	Metadata     *InstanceMetadata
	Credentials  Credentials
	Endpoints    []Endpoint
	// Records are changes to the driver's records that the broker writes
	// with the step's own write (the operation's progress or its outcome),
	// so that a record never disagrees with its operation. A driver whose
	// record must be durable BEFORE it acts on the world (the name of a
	// stack it is about to create) writes it itself, through Resources.
	Records RecordChanges
}

// Drivers gives the driver of a plan and the plan's settings for it
// (drivers.Set is the one the broker builds from its catalog).
type Drivers interface {
	For(plan *catalog.Plan) (driver Driver, settings any, ok bool)
}

// AcceptedParameters is implemented by the settings of a plan whose driver
// passes on only the parameters it names for each kind of request (the
// CloudFormation driver's: the properties of the plan's schemas). The
// broker refuses, with 400 and before anything is written, a request whose
// parameters name any other, rather than let the driver drop it or fail
// the operation later.
type AcceptedParameters interface {
	AcceptedParameters(kind catalog.SchemaKind) []string
}

// Versioned is implemented by the settings of a plan whose driver deploys
// what the catalog ships (the CloudFormation driver's templates and fixed
// parameters): PlanDigest identifies it. With the plan's maintenance_info
// version it is the version of the plan an instance runs
// (Instance.PlanDigest); the catalog's lock file (internal/drivers) holds
// a plan's digest to its version.
type Versioned interface {
	PlanDigest() string
}

// InMemory is implemented by a driver whose changes live only in the
// records it hands back (Progress.Records): its Begin touches nothing
// outside the broker, so it may run before the broker takes a hold, and a
// change that is not kept (a race lost, a crash) leaves nothing behind. A
// synchronous provision or bind of such a driver that is done at once is
// then one write (CreateInstance or CreateBinding with Settled).
type InMemory interface {
	InMemory() bool
}

// Driver creates, changes and deletes the real resource behind instances and
// bindings. Every method must be idempotent: a step may run again after a
// crash or a lost answer. A permanent failure is returned as *Failure (its
// description is shown to the user); any other error is transient and the
// step is retried, with backoff, by the workflow's Retry (or, for a change
// that completes within its request, a few times in the request).
//
// The broker runs every change the same way, asynchronous or not: Begin,
// then Check after RetryAfter until Done. For an operation that is not
// Async the whole loop runs within the platform's request (which platforms
// time out after about a minute), so a plan whose changes take longer must
// be async or async-only.
type Driver interface {
	// Leftovers names the resource records that a failure of c leaves
	// behind and that must be detached for cleanup: a provision's or bind's
	// half-made resource, an update's partial change. A deprovision or
	// unbind leaves none: its resource stays attached.
	Leftovers(ctx context.Context, c Change) ([]string, error)
	// Cleanup deletes a detached resource: Done once it is gone.
	Cleanup(ctx context.Context, d Detached) (Progress, error)

	// Begin starts the change.
	Begin(ctx context.Context, c Change) (Progress, error)
	// Check reports progress of a change begun earlier; once Done it returns
	// the results again each time it is called.
	Check(ctx context.Context, c Change) (Progress, error)
}
