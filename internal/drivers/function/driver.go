// Package function is the driver that delegates the work of a plan to the
// service owner's own function, in any language: a Lambda function invoked
// synchronously, or an HTTPS endpoint whose requests the broker signs with
// a shared secret. Each call of the Driver port is one JSON request (begin,
// check or cleanup) and one JSON answer; the protocol is Request and
// Answer, its JSON schema protocol.schema.json, and its guide docs/functions.md,
// "Services in any language".
//
// The driver keeps one resource record per instance ("instance") and per
// binding ("binding-<binding id>"): the target the requests go to and the
// opaque state the target hands back. It reads them from the change (the
// broker reads them with the operation), and writes a record itself before
// a change is asked for, so a failed provision or bind always leaves a
// record for the cleanup workflow, which asks the plan's current target to
// clean up (Cleanup says why not the one that made it).
// The records of a deleted instance or binding are removed by the broker,
// with the operation's outcome.
package function

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
)

// Record names: the instance's, and each binding's (broker.BindingRecord).
const instanceRecord = "instance"

var bindingRecord = broker.BindingRecord

// record is the driver's resource record of one instance or binding.
type record struct {
	// CreatedBy is the operation that made the record; Op the one whose
	// change the target is undergoing or last underwent, and Attempt how
	// many begin requests Op sent.
	CreatedBy string               `json:"created_by"`
	Op        string               `json:"op"`
	Kind      broker.OperationKind `json:"kind"`
	Attempt   int                  `json:"attempt"`
	ServiceID string               `json:"service_id,omitempty"`
	PlanID    string               `json:"plan_id,omitempty"`
	BindingID string               `json:"binding_id,omitempty"`
	// Target is where the requests about this resource went: a cleanup
	// goes to the plan's current target (cleanupTarget).
	Target Target `json:"target"`
	// State is what the target last handed back.
	State json.RawMessage `json:"state,omitempty"`
}

// Driver is the function driver.
type Driver struct {
	Resources broker.Resources
	// HTTP sends the requests to HTTP targets; it follows no redirect.
	HTTP *http.Client
	// Lambda returns the Lambda client, built on first use.
	Lambda func(context.Context) (LambdaAPI, error)
	// Secrets returns the Secrets Manager client that reads HTTP targets'
	// secrets named by ARN, built on first use.
	Secrets func(context.Context) (SecretsAPI, error)
	// SecretTTL is how long a secret read from Secrets Manager is used
	// (DefaultSecretTTL when zero), on the clock SecretClock (time.Now
	// when nil).
	SecretTTL   time.Duration
	SecretClock func() time.Time
	// PlanSettings returns a plan's settings as the catalog has them now,
	// by plan id; ok is false for a plan the catalog no longer has (or no
	// longer gives this driver). A cleanup goes by them (see Cleanup).
	PlanSettings func(planID string) (s *Settings, ok bool)
	// Getenv reads the variables that hold HTTP targets' secrets.
	Getenv func(string) string
	Logger *slog.Logger
	Now    func() time.Time

	secrets secretCache
}

var _ broker.Driver = (*Driver)(nil)

// New returns a driver that keeps its records in resources; cfg, when set,
// gives the AWS configuration for Lambda targets and secrets in Secrets
// Manager, loaded on first use.
func New(resources broker.Resources, cfg func(context.Context) (aws.Config, error), getenv func(string) string, logger *slog.Logger) *Driver {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	d := &Driver{
		Resources: resources,
		HTTP: &http.Client{
			Transport:     http.DefaultTransport.(*http.Transport).Clone(),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		Getenv: getenv,
		Logger: logger,
		Now:    func() time.Time { return time.Now().UTC() },
	}
	if cfg != nil {
		// Each client is built once it is first needed, and again after a
		// failure to load the configuration.
		conf := lazy(func(ctx context.Context) (aws.Config, error) {
			c, err := cfg(ctx)
			if err != nil {
				return aws.Config{}, fmt.Errorf("load the AWS configuration: %w", err)
			}
			return c, nil
		})
		d.Lambda = lazy(func(ctx context.Context) (LambdaAPI, error) {
			c, err := conf(ctx)
			if err != nil {
				return nil, err
			}
			return lambda.NewFromConfig(c), nil
		})
		d.Secrets = lazy(func(ctx context.Context) (SecretsAPI, error) {
			c, err := conf(ctx)
			if err != nil {
				return nil, err
			}
			return secretsmanager.NewFromConfig(c), nil
		})
	}
	return d
}

// Leftovers names the record of what a failed provision or bind made. A
// failed update leaves the instance's record where it is (the target keeps
// the instance as the update left it); a deprovision or unbind leaves its
// resource attached.
func (d *Driver) Leftovers(_ context.Context, c broker.Change) ([]string, error) {
	return c.MadeRecords(instanceRecord), nil
}

// Begin asks the target to start the change.
func (d *Driver) Begin(ctx context.Context, c broker.Change) (broker.Progress, error) {
	return d.advance(ctx, c, true)
}

// Check asks the target how the change is going; once it is done, the
// target answers with its results each time.
func (d *Driver) Check(ctx context.Context, c broker.Change) (broker.Progress, error) {
	return d.advance(ctx, c, false)
}

func (d *Driver) advance(ctx context.Context, c broker.Change, begin bool) (broker.Progress, error) {
	s, ok := c.Settings.(*Settings)
	if !ok || s == nil {
		return broker.Progress{}, &broker.Failure{Description: "The plan has no function settings; the broker's catalog is misconfigured."}
	}
	switch c.Operation.Kind {
	case broker.KindDeprovision, broker.KindUnbind:
		return d.remove(ctx, c, s, begin)
	}
	name := instanceRecord
	if c.Operation.Kind == broker.KindBind {
		name = bindingRecord(c.BindingID())
	}
	rec, found, err := d.get(c, name)
	if err != nil {
		return broker.Progress{}, err
	}
	mine := found && rec.Op == c.Operation.ID
	creates := c.Operation.Kind == broker.KindProvision || c.Operation.Kind == broker.KindBind
	switch {
	case found && !mine && creates:
		return broker.Progress{}, &broker.Failure{Description: fmt.Sprintf(
			"The %s cannot go on: the broker's record of the resource belongs to another operation.", c.Operation.Kind)}
	case !mine && !begin:
		return broker.Progress{}, &broker.Failure{Description: fmt.Sprintf(
			"The %s cannot complete: the broker's record of it is gone (it was handed to cleanup).", c.Operation.Kind)}
	}
	call := CallCheck
	if begin {
		call = CallBegin
		// The record first: whatever happens next, it names the target.
		if !found {
			rec = record{CreatedBy: c.Operation.ID, ServiceID: c.Instance.ServiceID, PlanID: c.Instance.PlanID,
				BindingID: c.Operation.BindingID}
		}
		if !mine {
			rec.Op, rec.Kind, rec.Attempt = c.Operation.ID, c.Operation.Kind, 0
		}
		rec.Attempt++
		rec.Target = s.Target
		if c.Plan != nil {
			rec.PlanID = c.Plan.ID
		}
		if err := d.put(ctx, c.Instance.ID, name, rec); err != nil {
			return broker.Progress{}, err
		}
	}
	a, err := d.ask(ctx, c.Instance.ID, name, &rec, s.Target, request(call, c, s, rec))
	if err != nil {
		return broker.Progress{}, err
	}
	return progress(a, s.RetryAfter), nil
}

// remove runs a deprovision or an unbind: done when the target says the
// resource is gone, and then the broker removes the records of it with the
// operation's outcome (a deprovision's: every record of the instance, so
// that nothing is left behind).
func (d *Driver) remove(ctx context.Context, c broker.Change, s *Settings, begin bool) (broker.Progress, error) {
	name := instanceRecord
	names := []string{bindingRecord(c.BindingID())}
	if c.Operation.Kind == broker.KindDeprovision {
		names = names[:0]
		for _, r := range c.Records {
			names = append(names, r.Name)
		}
	} else {
		name = names[0]
	}
	if len(names) == 0 {
		// Nothing was made that the broker knows of (a failed provision's
		// resource was handed to cleanup), or an earlier check removed it.
		return broker.Progress{Done: true}, nil
	}
	rec, found, err := d.get(c, name)
	if err != nil {
		return broker.Progress{}, err
	}
	if !found {
		rec = record{CreatedBy: c.Operation.ID, ServiceID: c.Instance.ServiceID, PlanID: c.Instance.PlanID, BindingID: c.Operation.BindingID}
	}
	call := CallCheck
	if begin || rec.Op != c.Operation.ID {
		// A deletion is asked for again when no begin of it is on record
		// (one that never went out): deleting is idempotent.
		call = CallBegin
		if rec.Op != c.Operation.ID {
			rec.Op, rec.Kind, rec.Attempt = c.Operation.ID, c.Operation.Kind, 0
		}
		rec.Attempt++
		rec.Target = s.Target
		if found {
			if err := d.put(ctx, c.Instance.ID, name, rec); err != nil {
				return broker.Progress{}, err
			}
		}
	}
	a, err := d.ask(ctx, c.Instance.ID, name, &rec, s.Target, request(call, c, s, rec))
	if err != nil {
		return broker.Progress{}, err
	}
	if a.Done {
		return broker.Progress{Done: true, Records: broker.RecordChanges{Remove: names}}, nil
	}
	return progress(a, s.RetryAfter), nil
}

// Cleanup asks the plan's target to delete a detached resource, with the
// state the record keeps.
func (d *Driver) Cleanup(ctx context.Context, det broker.Detached) (broker.Progress, error) {
	var rec record
	if err := json.Unmarshal(det.Data, &rec); err != nil {
		return broker.Progress{}, &broker.Failure{Description: fmt.Sprintf("The detached record %s is not a function driver's record.", det.Name)}
	}
	if rec.Target.Function == "" && rec.Target.URL == "" {
		return broker.Progress{Done: true}, nil
	}
	target, err := d.cleanupTarget(ctx, det, rec)
	if err != nil {
		return broker.Progress{}, err
	}
	req := Request{
		Version:   target.version(),
		Call:      CallCleanup,
		Operation: RequestOperation{ID: det.OperationID, Kind: rec.Kind, Async: true, Attempt: det.Attempts},
		Instance:  RequestInstance{ID: det.InstanceID, ServiceID: rec.ServiceID, PlanID: rec.PlanID},
		State:     rec.State,
		Cleanup:   &RequestCleanupOf{Reason: det.Reason},
	}
	if rec.BindingID != "" {
		req.Binding = &RequestBinding{ID: rec.BindingID}
	}
	a, err := d.call(ctx, target, req)
	if err != nil {
		return broker.Progress{}, err
	}
	return progress(a, DefaultRetryAfter), nil
}

// cleanupTarget is where the cleanup of a detached resource goes: the
// target its plan names now, not the one its record names (the one that
// made it). A plan whose target moved has retired the old one, whose URL
// (a lapsed domain, a host given to someone else) must not keep receiving
// signed requests with the instance's state; the operator trusts the
// target the catalog names, which, serving the same plan, can delete what
// its predecessor made. The broker does not ask for the cleanup of a plan
// the catalog no longer has (it cannot tell which driver would do it); a
// driver without the catalog's plans (PlanSettings nil, or a plan it does
// not know) sends to the record's target only what still passes every
// check the catalog makes of a target (Configure), and refuses the rest,
// for an operator to settle (ops detached).
func (d *Driver) cleanupTarget(ctx context.Context, det broker.Detached, rec record) (Target, error) {
	planID := det.PlanID
	if planID == "" {
		planID = rec.PlanID
	}
	if d.PlanSettings != nil {
		if s, ok := d.PlanSettings(planID); ok {
			if s.Target.Function != rec.Target.Function || s.Target.URL != rec.Target.URL {
				d.Logger.InfoContext(ctx, "cleanup goes to the plan's current target, not the one that made the resource",
					"target", s.Target.String(), "made_by", rec.Target.String())
			}
			return s.Target, nil
		}
	}
	if _, err := Configure(nil, rec.Target.config(), ""); err != nil {
		problem := err.Error()
		var se *catalog.SettingError
		if errors.As(err, &se) {
			problem = se.Key + ": " + se.Problem
		}
		d.Logger.ErrorContext(ctx, "cleanup refused: the plan is gone and the resource's target no longer passes the catalog's checks",
			"plan_id", planID, "problem", problem)
		return Target{}, &broker.Failure{Description: fmt.Sprintf(
			"The plan %s is no longer in the catalog, and the target that made this resource no longer passes the catalog's checks (%s), so the broker sends it nothing. Delete the resource by hand, or put the plan back in the catalog, and retry the cleanup.",
			planID, problem)}
	}
	return rec.Target, nil
}

// ask sends a request about the record name and keeps the state the
// answer hands back, before it reads the rest: a failed change's state
// reaches the cleanup.
func (d *Driver) ask(ctx context.Context, instanceID, name string, rec *record, t Target, req Request) (Answer, error) {
	a, err := d.call(ctx, t, req)
	if err != nil {
		return Answer{}, err
	}
	if a.State != nil && !bytes.Equal(a.State, rec.State) {
		rec.State = a.State
		if bytes.Equal(bytes.TrimSpace(a.State), []byte("null")) {
			rec.State = nil
		}
		if err := d.put(ctx, instanceID, name, *rec); err != nil {
			return Answer{}, err
		}
	}
	return a, Classify(errorOf(a))
}

// call sends one request and reads its answer, within the target's
// timeout. Its error is classified (Classify); a cleanup's includes the
// answer's error, which ask reports for the other calls once it has kept
// the answer's state.
func (d *Driver) call(ctx context.Context, t Target, req Request) (Answer, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Answer{}, fmt.Errorf("function: encode the %s request: %w", req.Call, err)
	}
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	raw, err := d.send(cctx, t, body)
	if err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		err = &timeoutError{Target: t, Timeout: timeout, Err: err}
	}
	var a Answer
	if err == nil {
		a, err = DecodeAnswer(raw)
		if err == nil {
			err = checkResults(a, req)
		}
		if err != nil {
			err = fmt.Errorf("%s: %w", t, err)
		}
	}
	var malformed *MalformedError
	if errors.As(err, &malformed) {
		d.Logger.ErrorContext(ctx, "function target's answer breaks the protocol", "target", t.String(), "call", req.Call,
			"problem", malformed.Problem)
	}
	if err != nil {
		return Answer{}, Classify(err)
	}
	if req.Call == CallCleanup {
		err = Classify(errorOf(a))
	}
	d.Logger.DebugContext(ctx, "function answered", "call", req.Call, "done", a.Done, "error", a.Error != nil)
	return a, err
}

// checkResults refuses results the request's change cannot have: the
// credentials and endpoints of a binding in an answer about an instance,
// which the broker would otherwise drop in silence (OSB instances have
// none), leaving the service's owner believing they reached the user.
func checkResults(a Answer, req Request) error {
	if a.Results == nil || req.Call == CallCleanup || req.Operation.Kind == broker.KindBind {
		return nil
	}
	switch {
	case len(a.Results.Credentials) > 0:
		return &MalformedError{Problem: fmt.Sprintf("results.credentials in the answer of a %s: only a bind's answer may hold credentials", req.Operation.Kind)}
	case len(a.Results.Endpoints) > 0:
		return &MalformedError{Problem: fmt.Sprintf("results.endpoints in the answer of a %s: only a bind's answer may hold endpoints", req.Operation.Kind)}
	}
	return nil
}

// errorOf is the error an answer reports, for Classify.
func errorOf(a Answer) error {
	if a.Error == nil {
		return nil
	}
	return &answerError{a.Error}
}

// progress turns an answer without error into the port's progress.
func progress(a Answer, retryAfter time.Duration) broker.Progress {
	if a.Done {
		p := broker.Progress{Done: true}
		if a.Results != nil {
			p.DashboardURL, p.Credentials, p.Endpoints = a.Results.DashboardURL, a.Results.Credentials, a.Results.Endpoints
			p.Metadata = a.Results.Metadata
		}
		return p
	}
	if a.RetryAfter != nil {
		retryAfter = time.Duration(*a.RetryAfter * float64(time.Second))
	}
	return broker.Progress{RetryAfter: retryAfter, Description: clip(a.Description)}
}

// request builds the request of a begin or check.
func request(call string, c broker.Change, s *Settings, rec record) Request {
	r := Request{
		Version:   s.Target.version(),
		Call:      call,
		Operation: RequestOperation{ID: c.Operation.ID, Kind: c.Operation.Kind, Async: c.Operation.Async, Attempt: rec.Attempt},
		Instance: RequestInstance{
			ID: c.Instance.ID, ServiceID: c.Instance.ServiceID, PlanID: c.Instance.PlanID,
			OrganizationGUID: c.Instance.OrganizationGUID, SpaceGUID: c.Instance.SpaceGUID,
			Parameters: c.Instance.Parameters, Context: c.Instance.Context, MaintenanceInfo: c.Instance.MaintenanceInfo,
		},
		State: rec.State,
	}
	if c.Service != nil {
		r.Service = &RequestService{ID: c.Service.ID, Name: c.Service.Name}
	}
	if c.Plan != nil {
		r.Plan = &RequestPlan{ID: c.Plan.ID, Name: c.Plan.Name, Config: s.Config}
	}
	if c.Operation.Kind == broker.KindUpdate && c.Operation.Target != nil {
		t := c.Operation.Target
		r.Update = &RequestUpdate{PlanID: t.PlanID, Parameters: t.Parameters, Context: t.Context, MaintenanceInfo: t.MaintenanceInfo}
	}
	if c.Binding != nil {
		b := c.Binding
		r.Binding = &RequestBinding{ID: b.ID, PredecessorID: b.PredecessorID, AppGUID: b.AppGUID, BindResource: b.BindResource,
			Parameters: b.Parameters, Context: b.Context}
	} else if c.Operation.BindingID != "" {
		r.Binding = &RequestBinding{ID: c.Operation.BindingID}
	}
	return r
}

// get reads the record called name from the change, which holds the
// records as the broker read them with the operation.
func (d *Driver) get(c broker.Change, name string) (record, bool, error) {
	var rec record
	found, err := c.DecodeRecord(name, &rec)
	if err != nil {
		return record{}, false, fmt.Errorf("function: %w", err)
	}
	return rec, found, nil
}

func (d *Driver) put(ctx context.Context, instanceID, name string, rec record) error {
	if err := broker.PutRecord(ctx, d.Resources, instanceID, name, rec, d.Now()); err != nil {
		return fmt.Errorf("function: %w", err)
	}
	return nil
}
