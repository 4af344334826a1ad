package app_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/waittest"
)

// gate holds every wait of the local engine, and every asynchronous
// update's "done", while it is closed: the workflows stand still where
// they are, as a process that is about to die leaves them. Open lets
// everything run, the waits passing at once.
type gate struct {
	mu     sync.Mutex
	closed bool
	opened chan struct{}
}

func newGate() *gate { return &gate{closed: true, opened: make(chan struct{})} }

func (g *gate) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		g.closed = false
		close(g.opened)
	}
}

// sleep is the engine's Sleep: held until the gate opens (or the engine
// closes), then none.
func (g *gate) sleep(ctx context.Context, _ time.Duration) {
	select {
	case <-g.opened:
	case <-ctx.Done():
	}
}

func (g *gate) wrap(d broker.Driver) broker.Driver { return gatedDriver{Driver: d, gate: g} }

// gatedDriver reports an asynchronous update that its driver has done as
// still in progress while the gate is closed.
type gatedDriver struct {
	broker.Driver
	gate *gate
}

func (d gatedDriver) Begin(ctx context.Context, c broker.Change) (broker.Progress, error) {
	p, err := d.Driver.Begin(ctx, c)
	return d.held(c, p), err
}

func (d gatedDriver) Check(ctx context.Context, c broker.Change) (broker.Progress, error) {
	p, err := d.Driver.Check(ctx, c)
	return d.held(c, p), err
}

func (d gatedDriver) held(c broker.Change, p broker.Progress) broker.Progress {
	if p.Done && c.Operation.Async && c.Operation.Kind == broker.KindUpdate && d.gate.isClosed() {
		return broker.Progress{RetryAfter: time.Second, Records: p.Records}
	}
	return p
}

// entered counts the times the execution entered state (its history).
func entered(t *testing.T, b *apptest.Broker, execution, state string) int {
	t.Helper()
	history, err := b.Local.Engine.History(t.Context(), execution)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range history {
		if s == state {
			n++
		}
	}
	return n
}

// upgradesInFlight are the instances of ids whose update is in progress,
// and the items of campaign id that are running.
func upgradesInFlight(t *testing.T, b *apptest.Broker, id string, ids []string) (updating, running []string) {
	t.Helper()
	for _, inst := range ids {
		ops, err := b.Local.Store.ListOperations(t.Context(), inst)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(ops, func(o broker.Operation) bool {
			return o.Kind == broker.KindUpdate && o.State == broker.OperationInProgress
		}) {
			updating = append(updating, inst)
		}
	}
	_, items, err := b.Local.Broker.Campaigns.LoadCampaign(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if it.State == broker.ItemRunning {
			running = append(running, it.InstanceID)
		}
	}
	return updating, running
}

// TestAFleetUpgradeKeepsMaxInFlightAcrossACrashInItsMap: the local engine
// records a Map's state, not its iterations': a broker stopped while the
// lanes of a campaign (max in flight 2) wait on their upgrades resumes the
// execution in the Map, which runs its lanes again from their start. Those
// take up the items they left running, whose upgrades still run, rather
// than start two more beside them: no more than 2 instances update at
// once; then the campaign upgrades every instance, each once.
func TestAFleetUpgradeKeepsMaxInFlightAcrossACrashInItsMap(t *testing.T) {
	g := newGate()
	opts := apptest.Options{Dir: t.TempDir(), ReapInterval: -1, Sleep: g.sleep, Wrap: &app.Wrappers{Driver: g.wrap}}
	a := apptest.StartWith(t, opts)
	service, plan := a.Plan("fake-async-plan")
	var ids []string
	for i := range 6 {
		ids = append(ids, fmt.Sprintf("crash-%d", i))
	}
	plantBehind(t, a, service, plan, "0.9.0", ids...)
	id, err := startCampaignOps(t, a.Local.Broker, false, "--plan", plan, "--max-in-flight", "2")
	if err != nil {
		t.Fatalf("ops upgrade start: %v", err)
	}
	// Both lanes wait on the upgrade each started.
	waittest.Until(t, func() error {
		if n := entered(t, a, id, "RestWait"); n < 2 {
			return fmt.Errorf("the lanes entered RestWait %d times, want both waiting", n)
		}
		return nil
	})
	updating, running := upgradesInFlight(t, a, id, ids)
	if len(updating) != 2 || len(running) != 2 {
		t.Fatalf("before the crash %v update and items %v run, want 2 each", updating, running)
	}
	waits := entered(t, a, id, "RestWait")
	a.Stop()

	b := apptest.StartWith(t, opts)
	// The Map runs again: each lane claims, and waits on an upgrade.
	waittest.Until(t, func() error {
		if n := entered(t, b, id, "RestWait") - waits; n < 2 {
			return fmt.Errorf("the lanes of the Map run again entered RestWait %d times, want both waiting", n)
		}
		return nil
	})
	after, running := upgradesInFlight(t, b, id, ids)
	if len(after) > 2 || len(running) > 2 {
		t.Errorf("after the crash %v update and items %v run, want at most 2 (max in flight): the lanes should take up %v", after, running, updating)
	}

	g.open()
	waittest.Until(t, func() error {
		c, _, err := b.Local.Broker.Campaigns.LoadCampaign(t.Context(), id)
		if err != nil || c.State == broker.CampaignRunning {
			return errors.Join(fmt.Errorf("the campaign is %s", c.State), err)
		}
		return nil
	})
	upgradedEachOnce(t, b, id, ids)
}
