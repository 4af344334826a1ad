package broker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/serverless-osb/broker/internal/jsonenc"

	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/logging"
)

// Broker implements the OSB semantics on top of its ports. One method per
// OSB endpoint; each documents its route. It holds the store's ports it
// uses, not the whole Store: the drivers' Resources and re-sealing's are
// for others.
type Broker struct {
	Catalog *catalog.Catalog
	// Store is the broker's port of the store: instances, bindings and
	// their operations.
	Store Repository
	// Detached is the cleanup's: the resources that failed operations
	// left, which the reaper and the cleanup workflow's Tasks delete.
	Detached DetachedRecords
	Engine   Engine
	Drivers  Drivers
	// Campaigns keeps the fleet upgrades (nil: the broker runs none).
	Campaigns Campaigns
	// CampaignHistory is the events of an upgrade execution's history its
	// lanes may spend (CampaignHistoryBudget when zero): tests make it
	// small to see a campaign continue in a new execution.
	CampaignHistory int
	Logger          *slog.Logger
	// Now and NewID are replaceable in tests.
	Now   func() time.Time
	NewID func() string
	// RepairAfter is how long past its promised check an in-progress
	// operation may go before last_operation asks the engine about it.
	RepairAfter time.Duration
	// Backoff is the first pause between tries of a driver call within a
	// request, after a transient error; it doubles each time.
	Backoff time.Duration
	// SyncWait bounds how long a synchronous request waits for its change
	// to be done (SyncWait when zero): it checks again only while the
	// next check is due within SyncWait of its start.
	SyncWait time.Duration
	// Slots, when set, bound the calls each plan's Tasks make to its
	// driver at once (slots.go).
	Slots Slots
	// Sleep, when set, replaces the waits of a synchronous request (between
	// its checks, and its backoff): tests record them, and take no time.
	Sleep func(ctx context.Context, d time.Duration)
}

// New returns a Broker on the store s (each of its ports that the broker
// uses), with default clock, ids, repair delay and backoff.
func New(c *catalog.Catalog, s Store, e Engine, d Drivers, logger *slog.Logger) *Broker {
	return &Broker{Catalog: c, Store: s, Detached: s, Engine: e, Drivers: d, Logger: logger,
		Now:         func() time.Time { return time.Now().UTC() },
		NewID:       func() string { return uuid.Must(uuid.NewV7()).String() },
		RepairAfter: 30 * time.Second,
		Backoff:     Backoff,
		SyncWait:    SyncWait,
	}
}

// Result says which success status an endpoint answers with.
type Result int

const (
	ResultOK       Result = iota // 200
	ResultCreated                // 201
	ResultAccepted               // 202
)

// WorkflowInput is the input of an operation's execution. It is a pure
// function of the operation, so a lost start can be retried with the same
// input (execution names are idempotent only for identical input).
type WorkflowInput struct {
	InstanceID string `json:"instance_id"`
	// BindingID (a binding operation's binding) and Kind are what a Task
	// needs, besides its operation (the execution's name), to name every
	// key it reads, so that it reads them in one round trip (OperationTask).
	// An execution started before they were in the input has neither: its
	// Tasks read them from the operation first.
	BindingID string        `json:"binding_id,omitempty"`
	Kind      OperationKind `json:"kind,omitempty"`
}

// OperationTask names the operation a Task of the operation workflow works
// on: its instance and id, and what its execution's input says of it
// besides (WorkflowInput), empty for an execution started without it.
type OperationTask struct {
	InstanceID, OperationID string
	// BindingID is a binding operation's binding; Kind the operation's
	// kind. A Task reads them from the operation when they are empty.
	BindingID string
	Kind      OperationKind
}

// TaskOf is the OperationTask of op, all of it known.
func TaskOf(op Operation) OperationTask {
	return OperationTask{InstanceID: op.InstanceID, OperationID: op.ID, BindingID: op.BindingID, Kind: op.Kind}
}

// knows reports whether t carries what the execution's input adds.
func (t OperationTask) knows() bool { return t.Kind != "" }

// newOperation returns an in-progress operation record.
func (b *Broker) newOperation(kind OperationKind, instanceID, bindingID, planID string, async bool) Operation {
	now := b.Now()
	return Operation{
		ID: b.NewID(), InstanceID: instanceID, BindingID: bindingID, Kind: kind,
		State: OperationInProgress, Async: async, PlanID: planID,
		CreatedAt: now, UpdatedAt: now, NextCheckAt: now.Add(2 * time.Second),
	}
}

// syncError is what a request answers when its synchronous change did not
// succeed. A permanent failure is 422 with the driver's description (the
// target's, for a function): OSB gives 422 to an update "not supported or
// that cannot currently be fulfilled", and it is the one status it lets
// every endpoint answer for a refusal without a malformed request (400
// would blame the platform's request, which was valid; 500 would blame the
// broker). A change whose service's backend stayed unavailable or did not
// complete in time is 503 with a description that says so: nothing the
// platform sent was wrong, and it may try again. instance_usable and
// update_repeatable go only with the operations the spec gives them to.
func syncError(op Operation, err error) error {
	var f *Failure
	var u *unavailable
	switch {
	case errors.As(err, &f):
		e := &Error{Code: CodeUnprocessable, Description: CleanLine(f.Description)}
		switch op.Kind {
		case KindUpdate:
			e.InstanceUsable, e.UpdateRepeatable = f.InstanceUsable, f.UpdateRepeatable
		case KindDeprovision:
			e.InstanceUsable = f.InstanceUsable
		}
		return e
	case errors.As(err, &u):
		return &Error{Code: CodeUnavailable, Description: u.description}
	case errors.Is(err, ErrTakenOver):
		// Another operation took over (a deprovision halted this
		// provision, say): this request did not do what it asked.
		return concurrency("The %s was halted by another operation.", op.Kind)
	}
	return err
}

// start starts op's workflow. A failed start is logged, not returned: the
// operation record is durable, and last_operation (or the reaper) starts
// the execution again under the same name.
func (b *Broker) start(ctx context.Context, op Operation) {
	ctx = logging.With(ctx, op.LogAttrs()...)
	input, _ := json.Marshal(WorkflowInput{InstanceID: op.InstanceID, BindingID: op.BindingID, Kind: op.Kind})
	if err := b.Engine.Start(ctx, WorkflowOperation, op.ID, input); err != nil {
		b.Logger.ErrorContext(ctx, "start workflow", "error", err.Error())
	}
}

// halt stops the execution of an operation that another one took over. Its
// log line names the halted operation, which is not the one ctx may name.
func (b *Broker) halt(ctx context.Context, opID, cause string) {
	if err := b.Engine.Stop(ctx, opID, cause); err != nil && !errors.Is(err, ErrExecutionNotFound) {
		b.Logger.ErrorContext(ctx, "stop workflow", "operation_id", opID, "error", err.Error())
	}
}

// finished marks a copy of op finished in state with description.
func (b *Broker) finished(op Operation, state OperationState, description string) Operation {
	now := b.Now()
	op.State, op.Description, op.RetryAfter = state, description, 0
	op.UpdatedAt, op.FinishedAt, op.ExpiresAt = now, now, now.Add(Retention)
	return op
}

// Fingerprint hashes the canonical JSON of the values that make two requests
// "identical" in the OSB sense.
func Fingerprint(values ...any) string {
	// The hash of the values' encodings, each followed by a zero byte,
	// gathered on the stack: the same bytes as one Write per encoding.
	var onStack [512]byte
	b := onStack[:0]
	for _, v := range values {
		b = appendFingerprint(b, v)
	}
	return fingerprintSum(b)
}

// appendFingerprint appends what Fingerprint hashes of v: its canonical
// JSON and a zero byte.
func appendFingerprint(b []byte, v any) []byte {
	switch v := v.(type) {
	case json.RawMessage:
		return appendFingerprintRaw(b, v)
	case string:
		return appendFingerprintString(b, v)
	}
	enc, _ := json.Marshal(v)
	return append(append(b, enc...), 0)
}

// appendFingerprintString is appendFingerprint of a string, which a
// request's fingerprint appends without boxing it in an interface (an
// allocation each).
func appendFingerprintString(b []byte, s string) []byte {
	if plainJSONString(s) {
		return append(append(append(b, '"'), s...), '"', 0)
	}
	enc, _ := json.Marshal(s)
	return append(append(b, enc...), 0)
}

// appendFingerprintRaw is appendFingerprint of a JSON document.
func appendFingerprintRaw(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 || string(raw) == "{}" || string(raw) == "null" {
		return append(b, "{}\x00"...) // what canonical makes of them, without decoding
	}
	// An object already as canonical makes it is hashed as it is.
	if jsonenc.Canonical(raw, jsonenc.CanonicalOptions{EscapeHTML: true, Float64: true}) {
		return append(append(b, raw...), 0)
	}
	enc, _ := json.Marshal(canonical(raw))
	return append(append(b, enc...), 0)
}

// fingerprintSum is the hex SHA-256 of what the appendFingerprint functions
// gathered.
func fingerprintSum(b []byte) string {
	sum := sha256.Sum256(b)
	var hexSum [2 * sha256.Size]byte
	hex.Encode(hexSum[:], sum[:])
	return string(hexSum[:])
}

// plainJSONString says whether json.Marshal encodes s as s in quotes:
// printable ASCII that it neither escapes nor, as HTML, rewrites.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// canonical decodes JSON so that re-encoding sorts keys and drops spacing;
// absent and empty-object parameters compare equal.
func canonical(raw json.RawMessage) any {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil || v == nil {
		return map[string]any{}
	}
	return v
}

// The request fingerprints below say which attributes make two requests
// "identical" in the OSB sense (a re-sent request gets 200 or 202, a
// different one 409). Each names its fields once; fingerprint_test.go
// fails for a field of a details type that none hashes and that is not
// listed there as deliberately left out. Their values are stored with the
// instances, bindings and operations: changing what one hashes makes every
// re-sent request for an existing one a conflict.

// requestFingerprint identifies an instance's attributes as a provision
// request states them: the context and the maintenance_info description
// are left out (a platform may send a new context for the same instance).
// Provision stamps it on a new instance, Target.Apply again after an update.
func (i Instance) requestFingerprint() string {
	version := ""
	if i.MaintenanceInfo != nil {
		version = i.MaintenanceInfo.Version
	}
	var onStack [512]byte
	b := appendFingerprintString(onStack[:0], i.ServiceID)
	b = appendFingerprintString(b, i.PlanID)
	b = appendFingerprintString(b, i.OrganizationGUID)
	b = appendFingerprintString(b, i.SpaceGUID)
	b = appendFingerprintRaw(b, i.Parameters)
	return fingerprintSum(appendFingerprintString(b, version))
}

// requestFingerprint identifies an update request: what it asks to change.
func (t Target) requestFingerprint() string {
	return Fingerprint("update", t.PlanID, t.Parameters, t.Context, t.MaintenanceInfo)
}

// requestFingerprint identifies the bind request that made a binding: the
// context is left out, as for an instance.
func (b Binding) requestFingerprint() string {
	var onStack [512]byte
	f := appendFingerprintString(onStack[:0], "bind")
	f = appendFingerprintString(f, b.ServiceID)
	f = appendFingerprintString(f, b.PlanID)
	f = appendFingerprintString(f, b.AppGUID)
	f = appendFingerprintRaw(f, b.BindResource)
	f = appendFingerprintRaw(f, b.Parameters)
	return fingerprintSum(appendFingerprintString(f, b.PredecessorID))
}

// SameJSON reports whether two JSON documents are equal after canonicalisation.
func SameJSON(a, b json.RawMessage) bool { return Fingerprint(a) == Fingerprint(b) }

func (b *Broker) lookup(serviceID, planID string) (*catalog.Service, *catalog.Plan, error) {
	s, p, err := b.Catalog.Lookup(serviceID, planID)
	if err != nil {
		return nil, nil, Errorf(CodeBadRequest, "%s", err.Error())
	}
	return s, p, nil
}

// async decides whether an operation on plan runs asynchronously, or
// refuses a synchronous request for an async-only plan.
func async(p *catalog.Plan, acceptsIncomplete bool) (bool, error) {
	switch p.Settings.Mode {
	case catalog.ModeAsyncOnly:
		if !acceptsIncomplete {
			return false, Errorf(CodeAsyncRequired,
				"This service plan (%s) requires client support for asynchronous service operations: send accepts_incomplete=true.", p.Name)
		}
		return true, nil
	case catalog.ModeAsync:
		return acceptsIncomplete, nil
	default:
		return false, nil
	}
}

func checkMaintenanceInfo(p *catalog.Plan, mi *MaintenanceInfo) error {
	if mi == nil {
		return nil
	}
	if p.MaintenanceInfo == nil {
		return Errorf(CodeMaintenanceInfoConflict,
			"The service plan %s has no maintenance_info, but the request has version %q: fetch the catalog again and omit maintenance_info.", p.Name, mi.Version)
	}
	if mi.Version != p.MaintenanceInfo.Version {
		return Errorf(CodeMaintenanceInfoConflict,
			"The maintenance information for the service plan %s has changed: the request has version %q, the catalog has %q. Fetch the catalog again.",
			p.Name, mi.Version, p.MaintenanceInfo.Version)
	}
	return nil
}

func planMaintenanceInfo(p *catalog.Plan) *MaintenanceInfo {
	if p.MaintenanceInfo == nil {
		return nil
	}
	return &MaintenanceInfo{Version: p.MaintenanceInfo.Version, Description: p.MaintenanceInfo.Description}
}

// validateParameters checks a request's parameters against the plan's
// schema of that kind and, for a plan whose settings say which parameters
// its driver passes on (AcceptedParameters), refuses any other: a
// parameter is never dropped in silence.
func (b *Broker) validateParameters(p *catalog.Plan, kind catalog.SchemaKind, params json.RawMessage) error {
	if err := p.ValidateParameters(kind, params); err != nil {
		return Errorf(CodeBadRequest, "%s", err.Error())
	}
	if b.Drivers == nil {
		return nil
	}
	_, settings, _ := b.Drivers.For(p)
	ap, ok := settings.(AcceptedParameters)
	if !ok {
		return nil
	}
	params = bytes.TrimSpace(params)
	if len(params) == 0 || string(params) == "null" {
		return nil
	}
	var given map[string]json.RawMessage
	if err := json.Unmarshal(params, &given); err != nil {
		return Errorf(CodeBadRequest, "parameters: must be a JSON object")
	}
	accepted := ap.AcceptedParameters(kind)
	which := "none"
	if len(accepted) > 0 {
		which = strings.Join(accepted, ", ")
	}
	var refused []string
	for _, name := range slices.Sorted(maps.Keys(given)) {
		if !slices.Contains(accepted, name) {
			refused = append(refused, fmt.Sprintf("parameters.%s: is not a parameter the plan %s accepts %s (it accepts: %s)",
				name, p.Name, parameterMoment[kind], which))
		}
	}
	if len(refused) > 0 {
		return Errorf(CodeBadRequest, "%s", strings.Join(refused, "; "))
	}
	return nil
}

// parameterMoment names the request a schema kind checks, for messages.
var parameterMoment = map[catalog.SchemaKind]string{
	catalog.InstanceCreate: "on provision",
	catalog.InstanceUpdate: "on update",
	catalog.BindingCreate:  "on bind",
}

func concurrency(format string, args ...any) error {
	return Errorf(CodeConcurrencyError, format, args...)
}

// conflictOf is the *ConflictError in err's chain, if any: a conditional
// write that found the stored items otherwise than it required.
func conflictOf(err error) (*ConflictError, bool) {
	if err == nil {
		return nil, false // no variable on the heap for errors.As
	}
	var c *ConflictError
	ok := errors.As(err, &c)
	return c, ok
}
