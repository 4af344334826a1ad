package apptest

import (
	"context"
	"sync"
	"time"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/broker"
)

// Hold keeps the asynchronous changes of instance id (its provision,
// update and deprovision, and its binds and unbinds) in progress until
// Release: a test can then act during an operation without racing its end,
// however slow the machine. The driver still does its work; only its
// "done" is held back, and the workflow checks again a second later.
func (b *Broker) Hold(id string) { b.holds.set(id, true) }

// Release lets the held changes of instance id end, at their next check.
func (b *Broker) Release(id string) { b.holds.set(id, false) }

// holds are the instances whose asynchronous changes are held.
type holds struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (h *holds) set(id string, held bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if held {
		h.ids[id] = true
	} else {
		delete(h.ids, id)
	}
}

func (h *holds) held(c broker.Change) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return c.Operation.Async && h.ids[c.Instance.ID]
}

// wrap returns w with the driver (as w wraps it) wrapped by h.
func (h *holds) wrap(w *app.Wrappers) *app.Wrappers {
	out := app.Wrappers{}
	if w != nil {
		out = *w
	}
	inner := out.Driver
	out.Driver = func(d broker.Driver) broker.Driver {
		if inner != nil {
			d = inner(d)
		}
		return heldDriver{Driver: d, holds: h}
	}
	return &out
}

// heldDriver reports a held change that its driver has done as still in
// progress.
type heldDriver struct {
	broker.Driver
	holds *holds
}

// Preview passes a dry run's preview on to a driver that has one
// (broker.Previewer); for another, broker.ErrNoPreview, as the broker
// itself says of it.
func (d heldDriver) Preview(ctx context.Context, c broker.Change) (broker.Preview, error) {
	if p, ok := d.Driver.(broker.Previewer); ok {
		return p.Preview(ctx, c)
	}
	return broker.Preview{}, broker.ErrNoPreview
}

func (d heldDriver) Begin(ctx context.Context, c broker.Change) (broker.Progress, error) {
	p, err := d.Driver.Begin(ctx, c)
	return d.hold(c, p), err
}

func (d heldDriver) Check(ctx context.Context, c broker.Change) (broker.Progress, error) {
	p, err := d.Driver.Check(ctx, c)
	return d.hold(c, p), err
}

func (d heldDriver) hold(c broker.Change, p broker.Progress) broker.Progress {
	if p.Done && d.holds.held(c) {
		// The driver's record changes still go with the progress.
		return broker.Progress{RetryAfter: time.Second, Records: p.Records}
	}
	return p
}

// InMemory is the wrapped driver's (holds apply to asynchronous changes,
// which are never settled in memory).
func (d heldDriver) InMemory() bool {
	im, ok := d.Driver.(broker.InMemory)
	return ok && im.InMemory()
}

// Place is the wrapped driver's, when it places instances (broker.Placed).
func (d heldDriver) Place(inst broker.Instance, records []broker.Resource, settings any) (broker.Place, bool) {
	if p, ok := d.Driver.(broker.Placed); ok {
		return p.Place(inst, records, settings)
	}
	return broker.Place{}, false
}

// CheckRoom is the wrapped driver's, when it has one (broker.RoomCheck).
func (d heldDriver) CheckRoom(ctx context.Context, req broker.InstanceRequest, settings any) error {
	if rc, ok := d.Driver.(broker.RoomCheck); ok {
		return rc.CheckRoom(ctx, req, settings)
	}
	return nil
}
