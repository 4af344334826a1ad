// Package demo is the driver that ships with the broker so that every
// lifecycle works end to end with no real backing service. Each instance
// gets a resource record standing in for a database; each binding gets its
// own credentials. Parameters control it: duration_seconds (how long an
// asynchronous change takes), fail and fail_description (the change fails).
package demo

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// Host and Port are what the demo credentials point at.
const (
	Host = "demo.serverless-osb.invalid"
	Port = 5432
)

// Driver is the demo driver. Its records are its resource: it reads them
// from the change and hands its changes to the broker, which writes them
// with the operation's progress or outcome.
type Driver struct {
	Now func() time.Time
}

var (
	_ broker.Driver   = (*Driver)(nil)
	_ broker.InMemory = (*Driver)(nil)
)

// InMemory says that the demo's changes live only in its records.
func (d *Driver) InMemory() bool { return true }

// New returns a demo driver.
func New() *Driver {
	return &Driver{Now: func() time.Time { return time.Now().UTC() }}
}

// Parameters are the demo plans' parameters (see catalog.yaml's schemas).
type Parameters struct {
	DurationSeconds int    `json:"duration_seconds"`
	Fail            bool   `json:"fail"`
	FailDescription string `json:"fail_description"`
}

// record is the demo's resource record: one per instance ("instance"), one
// per binding ("binding-<id>"), and one for an update in progress
// ("instance-update"), which is applied to the instance's record only when
// the update completes, so that a failed update leaves the resource as it was.
type record struct {
	// Op is the operation whose change the record now reflects.
	Op      string    `json:"op"`
	Kind    string    `json:"kind"`
	ReadyAt time.Time `json:"ready_at"`
	Fail    string    `json:"fail,omitempty"`
	// Username and Password are a binding's credentials.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// Record names.
const (
	instanceRecord = "instance"
	updateRecord   = "instance-update"
)

func recordName(c broker.Change) string {
	switch {
	case c.Binding != nil:
		return broker.BindingRecord(c.Binding.ID)
	case c.Operation.Kind == broker.KindUpdate:
		return updateRecord
	}
	return instanceRecord
}

// Leftovers names what a failed change leaves: the half-made resource of a
// provision or bind, the pending change of an update.
func (d *Driver) Leftovers(_ context.Context, c broker.Change) ([]string, error) {
	switch c.Operation.Kind {
	case broker.KindProvision, broker.KindUpdate, broker.KindBind:
		return []string{recordName(c)}, nil
	}
	return nil, nil
}

// Cleanup deletes a detached resource. The demo's resource is its record,
// which detaching already took from the instance: nothing is left to do.
func (d *Driver) Cleanup(context.Context, broker.Detached) (broker.Progress, error) {
	return broker.Progress{Done: true}, nil
}

// Begin starts a change: it writes the record that says when the change is
// done, or fails at once for a synchronous change asked to fail.
func (d *Driver) Begin(ctx context.Context, c broker.Change) (broker.Progress, error) {
	name := recordName(c)
	rec, found, err := get(c, name)
	if err != nil {
		return broker.Progress{}, err
	}
	if found && rec.Op == c.Operation.ID {
		return d.progress(c, rec, name, broker.RecordChanges{}) // begun before: idempotent
	}
	params, err := parameters(c)
	if err != nil {
		return broker.Progress{}, err
	}
	next := record{Op: c.Operation.ID, Kind: string(c.Operation.Kind), ReadyAt: d.Now()}
	if c.Operation.Async {
		next.ReadyAt = next.ReadyAt.Add(time.Duration(params.DurationSeconds) * time.Second)
	}
	if params.Fail {
		next.Fail = params.FailDescription
		if next.Fail == "" {
			next.Fail = fmt.Sprintf("The %s failed as requested (fail: true).", c.Operation.Kind)
		}
		if !c.Operation.Async {
			return broker.Progress{}, &broker.Failure{Description: next.Fail}
		}
	}
	switch c.Operation.Kind {
	case broker.KindBind:
		next.Username = "u-" + c.Binding.ID
		next.Password = rand.Text()
	case broker.KindDeprovision, broker.KindUnbind:
		if !found {
			return broker.Progress{Done: true}, nil // nothing to delete
		}
		next.Username, next.Password = rec.Username, rec.Password
	}
	return d.progress(c, next, name, broker.RecordChanges{Save: []broker.Resource{d.resource(c, name, next)}})
}

// Check reports how the change is going and, once done, its results.
func (d *Driver) Check(ctx context.Context, c broker.Change) (broker.Progress, error) {
	name := recordName(c)
	rec, found, err := get(c, name)
	if err != nil {
		return broker.Progress{}, err
	}
	deleting := c.Operation.Kind == broker.KindDeprovision || c.Operation.Kind == broker.KindUnbind
	switch {
	case !found && deleting:
		return broker.Progress{Done: true}, nil
	case !found && c.Operation.Kind == broker.KindUpdate:
		// Applied by an earlier check, which then removed the pending record.
		applied, ok, err := get(c, instanceRecord)
		if err != nil {
			return broker.Progress{}, err
		}
		if ok && applied.Op == c.Operation.ID {
			return broker.Progress{Done: true, DashboardURL: dashboard(c.Instance.ID)}, nil
		}
		return broker.Progress{}, &broker.Failure{Description: "The demo update vanished before it completed."}
	case !found:
		return broker.Progress{}, &broker.Failure{Description: "The demo resource vanished before the change completed."}
	case rec.Op != c.Operation.ID && deleting:
		// The record was rewritten by an operation this one halted (a
		// provision that kept going): begin the deletion again.
		return d.Begin(ctx, c)
	case rec.Op != c.Operation.ID:
		return broker.Progress{}, &broker.Failure{Description: "The demo resource was changed by another operation."}
	}
	return d.progress(c, rec, name, broker.RecordChanges{})
}

// progress says how far the change that rec records is; changes are the
// record changes made so far, which a finished change replaces with its own.
func (d *Driver) progress(c broker.Change, rec record, name string, changes broker.RecordChanges) (broker.Progress, error) {
	if wait := rec.ReadyAt.Sub(d.Now()); wait > 0 {
		return broker.Progress{RetryAfter: wait, Records: changes}, nil
	}
	if rec.Fail != "" {
		return broker.Progress{}, &broker.Failure{Description: rec.Fail}
	}
	p := broker.Progress{Done: true, Records: changes}
	switch c.Operation.Kind {
	case broker.KindDeprovision:
		// The instance's bindings go with it (a platform deletes them first,
		// but a deprovision must leave nothing behind either way).
		p.Records = broker.RecordChanges{}
		for _, r := range c.Records {
			p.Records.Remove = append(p.Records.Remove, r.Name)
		}
	case broker.KindUnbind:
		p.Records = broker.RecordChanges{Remove: []string{name}}
	case broker.KindUpdate:
		// Apply the change to the instance's record and drop the pending
		// one, in the same write as the update's outcome.
		applied, _, err := get(c, instanceRecord)
		if err != nil {
			return broker.Progress{}, err
		}
		applied.Op, applied.Kind, applied.ReadyAt, applied.Fail = rec.Op, rec.Kind, rec.ReadyAt, ""
		p.Records = broker.RecordChanges{Save: []broker.Resource{d.resource(c, instanceRecord, applied)}, Remove: []string{updateRecord}}
		p.DashboardURL = dashboard(c.Instance.ID)
	case broker.KindProvision:
		p.DashboardURL = dashboard(c.Instance.ID)
	case broker.KindBind:
		// No endpoints: the demo host is not a place any app can reach.
		p.Credentials = broker.Credentials{
			"uri":      fmt.Sprintf("demo://%s:%s@%s:%d/%s", rec.Username, rec.Password, Host, Port, c.Instance.ID),
			"username": rec.Username,
			"password": rec.Password,
			"host":     Host,
			"port":     Port,
		}
	}
	return p, nil
}

// parameters returns the parameters that govern the change: an update's
// new ones, a binding's own, or else the instance's.
func parameters(c broker.Change) (Parameters, error) {
	raw := c.Instance.Parameters
	switch {
	case c.Operation.Kind == broker.KindUpdate && c.Operation.Target != nil && c.Operation.Target.Parameters != nil:
		raw = c.Operation.Target.Parameters
	case c.Binding != nil:
		raw = c.Binding.Parameters
	}
	var p Parameters
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &p); err != nil {
			// Named by field, not quoted: encoding/json's message may hold
			// the value (a number), and a failure's description holds no
			// request parameter.
			var typeErr *json.UnmarshalTypeError
			if errors.As(err, &typeErr) && typeErr.Field != "" {
				return p, &broker.Failure{Description: fmt.Sprintf("The demo parameter %s must be of type %s.", typeErr.Field, typeErr.Type)}
			}
			return p, &broker.Failure{Description: "The demo parameters cannot be read."}
		}
	}
	if c.Operation.Kind == broker.KindDeprovision || c.Operation.Kind == broker.KindUnbind {
		p.Fail = false // fail applies to the change that was asked for
	}
	return p, nil
}

func dashboard(instanceID string) string { return "https://" + Host + "/instances/" + instanceID }

// get decodes the record called name from the change.
func get(c broker.Change, name string) (record, bool, error) {
	var rec record
	found, err := c.DecodeRecord(name, &rec)
	if err != nil {
		return record{}, false, fmt.Errorf("demo: %w", err)
	}
	return rec, found, nil
}

func (d *Driver) resource(c broker.Change, name string, rec record) broker.Resource {
	r, _ := broker.NewRecord(c.Instance.ID, name, rec, d.Now()) // strings and a time: it always encodes
	return r
}
