package function

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// Versions of the protocol: every request carries its plan's (the body's
// version and the header X-Broker-Protocol-Version), and an answer says
// which it speaks. A change that old targets could not read gets a new
// number; new optional fields do not.
//
// Version 2 changes the HTTP signature only: it covers the method, the URL
// and a request id as well as the time and the body (Sign). The bodies are
// those of version 1. A plan chooses its version (its protocol setting),
// version 2 by default: its requests carry the version 2 signature alone.
// A plan whose target knows only version 1 opts in with protocol: 1; its
// requests carry the version 1 signature beside the version 2 one, and the
// broker warns at start, naming the plan (Target.Warning).
const (
	Version1 = 1
	Version2 = 2
	// Version is the newest version.
	Version = Version2
	// DefaultVersion is the version of a plan that names none.
	DefaultVersion = Version2
)

// Calls a request may make.
const (
	// CallBegin starts a change: sent once per operation, again only when
	// the broker could not read the answer (a crash, a timeout, a transient
	// error), so a target must make it idempotent (per operation.id).
	CallBegin = "begin"
	// CallCheck asks how a change begun earlier is going; once done, the
	// target answers done with the results each time it is asked.
	CallCheck = "check"
	// CallCleanup asks the target to delete what a failed change left (or,
	// for a plan that deprovisions in detach mode, the instance itself).
	CallCleanup = "cleanup"
)

// Limits on what a target answers; an answer past them is a transient
// error (the workflow retries it, then fails the operation).
const (
	// MaxAnswerBytes bounds an answer: what it carries is stored in one
	// item (DynamoDB keeps at most 400 KB per item).
	MaxAnswerBytes = 64 << 10
	// MaxStateBytes bounds the opaque state, which the broker keeps in its
	// resource record.
	MaxStateBytes = 16 << 10
	// MaxDescription bounds a description, in characters.
	MaxDescription = 1000
	// MaxRetryAfter is the longest retry_after a target may ask for.
	MaxRetryAfter = 24 * time.Hour
)

// Request is what the broker sends: one per Driver call. Its JSON schema
// is protocol.schema.json.
type Request struct {
	Version   int               `json:"version"`
	Call      string            `json:"call"`
	Operation RequestOperation  `json:"operation"`
	Service   *RequestService   `json:"service,omitempty"`
	Plan      *RequestPlan      `json:"plan,omitempty"`
	Instance  RequestInstance   `json:"instance"`
	Update    *RequestUpdate    `json:"update,omitempty"`
	Binding   *RequestBinding   `json:"binding,omitempty"`
	State     json.RawMessage   `json:"state,omitempty"`
	Cleanup   *RequestCleanupOf `json:"cleanup,omitempty"`
}

// RequestOperation is the operation a request is about.
type RequestOperation struct {
	ID   string               `json:"id"`
	Kind broker.OperationKind `json:"kind"`
	// Async is false for a change the broker completes within the
	// platform's request (a few seconds at most).
	Async bool `json:"async"`
	// Attempt counts the begin requests of this operation (1 the first
	// time); a cleanup's counts the cleanup executions.
	Attempt int `json:"attempt"`
}

// RequestService and RequestPlan name the offering and plan.
type RequestService struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// RequestPlan is the plan a change runs under (for an update that changes
// plan, the new one), with the settings the catalog fixes for its target.
type RequestPlan struct {
	ID     string         `json:"id"`
	Name   string         `json:"name"`
	Config map[string]any `json:"config,omitempty"`
}

// RequestInstance is the service instance as stored.
type RequestInstance struct {
	ID               string                  `json:"id"`
	ServiceID        string                  `json:"service_id,omitempty"`
	PlanID           string                  `json:"plan_id,omitempty"`
	OrganizationGUID string                  `json:"organization_guid,omitempty"`
	SpaceGUID        string                  `json:"space_guid,omitempty"`
	Parameters       json.RawMessage         `json:"parameters,omitempty"`
	Context          json.RawMessage         `json:"context,omitempty"`
	MaintenanceInfo  *broker.MaintenanceInfo `json:"maintenance_info,omitempty"`
}

// RequestUpdate is what an update asks for; an absent field keeps the
// instance's value.
type RequestUpdate struct {
	PlanID          string                  `json:"plan_id,omitempty"`
	Parameters      json.RawMessage         `json:"parameters,omitempty"`
	Context         json.RawMessage         `json:"context,omitempty"`
	MaintenanceInfo *broker.MaintenanceInfo `json:"maintenance_info,omitempty"`
}

// RequestBinding is the service binding as stored.
type RequestBinding struct {
	ID string `json:"id"`
	// PredecessorID, for a bind that rotates a binding, is the binding it
	// succeeds: a target keeps the predecessor working and may carry its
	// state over, and makes new credentials.
	PredecessorID string          `json:"predecessor_binding_id,omitempty"`
	AppGUID       string          `json:"app_guid,omitempty"`
	BindResource  json.RawMessage `json:"bind_resource,omitempty"`
	Parameters    json.RawMessage `json:"parameters,omitempty"`
	Context       json.RawMessage `json:"context,omitempty"`
}

// RequestCleanupOf says why a cleanup is asked for.
type RequestCleanupOf struct {
	Reason string `json:"reason,omitempty"`
}

// Answer is what a target answers.
type Answer struct {
	Version int `json:"version"`
	// Done: the change is complete (Results hold its results).
	Done bool `json:"done"`
	// RetryAfter, in seconds: when to check again while not done.
	RetryAfter *float64 `json:"retry_after,omitempty"`
	// Description says how far the change is, for last_operation.
	Description string `json:"description,omitempty"`
	// State, when present, replaces what the broker keeps for the target
	// and sends back in later requests about this instance or binding;
	// null forgets it.
	State   json.RawMessage `json:"state,omitempty"`
	Results *Results        `json:"results,omitempty"`
	Error   *AnswerError    `json:"error,omitempty"`
}

// Results are what a done change hands out.
type Results struct {
	DashboardURL string `json:"dashboard_url,omitempty"`
	// Metadata, for a provision or an update, replaces the instance's
	// labels and attributes (OSB instance metadata), which the platform
	// shows; absent keeps them. Other changes' metadata is ignored.
	Metadata    *broker.InstanceMetadata `json:"metadata,omitempty"`
	Credentials broker.Credentials       `json:"credentials,omitempty"`
	Endpoints   []broker.Endpoint        `json:"endpoints,omitempty"`
}

// Error kinds.
const (
	// ErrorPermanent fails the operation with the description.
	ErrorPermanent = "permanent"
	// ErrorTransient is retried with backoff, like a timeout.
	ErrorTransient = "transient"
)

// AnswerError is a target's failure.
type AnswerError struct {
	Kind string `json:"kind"`
	// Description is shown to the user (permanent) or logged (transient):
	// never credentials or request parameters.
	Description string `json:"description"`
	// InstanceUsable and UpdateRepeatable, for a failed update or
	// deprovision, as OSB's last_operation reports them.
	InstanceUsable   *bool `json:"instance_usable,omitempty"`
	UpdateRepeatable *bool `json:"update_repeatable,omitempty"`
}

// MalformedError is an answer the broker cannot use; it is transient.
type MalformedError struct{ Problem string }

func (e *MalformedError) Error() string { return "malformed answer: " + e.Problem }

// DecodeAnswer reads and checks an answer. Its errors never quote the
// answer, which may hold credentials.
func DecodeAnswer(raw []byte) (Answer, error) {
	if len(raw) > MaxAnswerBytes {
		return Answer{}, &MalformedError{Problem: fmt.Sprintf("%d bytes, over the limit of %d", len(raw), MaxAnswerBytes)}
	}
	var a Answer
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&a); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return Answer{}, &MalformedError{Problem: fmt.Sprintf("%s must be of type %s", typeErr.Field, typeErr.Type)}
		}
		return Answer{}, &MalformedError{Problem: "not a JSON object"}
	}
	if dec.More() {
		return Answer{}, &MalformedError{Problem: "more than one JSON value"}
	}
	switch {
	case a.Version != Version1 && a.Version != Version2:
		// Either version's answer, whatever the request's: the answers of
		// both are the same, and a target may move first.
		return Answer{}, &MalformedError{Problem: fmt.Sprintf("version must be %d or %d", Version1, Version2)}
	case len(a.State) > MaxStateBytes:
		return Answer{}, &MalformedError{Problem: fmt.Sprintf("state is %d bytes, over the limit of %d", len(a.State), MaxStateBytes)}
	case a.RetryAfter != nil && (math.IsNaN(*a.RetryAfter) || *a.RetryAfter < 0 || *a.RetryAfter > MaxRetryAfter.Seconds()):
		return Answer{}, &MalformedError{Problem: fmt.Sprintf("retry_after must be from 0 to %d seconds", int(MaxRetryAfter.Seconds()))}
	case a.Error != nil && a.Done:
		return Answer{}, &MalformedError{Problem: "done and error at once"}
	case a.Error != nil && a.Error.Kind != ErrorPermanent && a.Error.Kind != ErrorTransient:
		return Answer{}, &MalformedError{Problem: `error.kind must be "permanent" or "transient"`}
	case a.Error != nil && strings.TrimSpace(a.Error.Description) == "":
		return Answer{}, &MalformedError{Problem: "error.description is empty"}
	case a.Results != nil && !a.Done:
		return Answer{}, &MalformedError{Problem: "results while not done"}
	}
	if a.Results != nil {
		if u := a.Results.DashboardURL; u != "" && !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
			return Answer{}, &MalformedError{Problem: "results.dashboard_url must be an http(s) URL"}
		}
		for i, e := range a.Results.Endpoints {
			if e.Host == "" || len(e.Ports) == 0 {
				return Answer{}, &MalformedError{Problem: fmt.Sprintf("results.endpoints[%d] needs a host and ports", i)}
			}
		}
		if err := checkMetadata(raw); err != nil {
			return Answer{}, err
		}
	}
	return a, nil
}

// checkMetadata checks what decoding cannot: that results.metadata, and
// its labels and attributes, are objects when present (decoding reads a
// null as absent, which would keep or clear metadata the target never
// meant to).
func checkMetadata(raw []byte) error {
	var probe struct {
		Results struct {
			Metadata json.RawMessage `json:"metadata"`
		} `json:"results"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil || probe.Results.Metadata == nil {
		return nil // DecodeAnswer read it: metadata is absent
	}
	var m struct {
		Labels     json.RawMessage `json:"labels"`
		Attributes json.RawMessage `json:"attributes"`
	}
	if !isObject(probe.Results.Metadata) || json.Unmarshal(probe.Results.Metadata, &m) != nil {
		return &MalformedError{Problem: "results.metadata must be an object"}
	}
	switch {
	case m.Labels != nil && !isObject(m.Labels):
		return &MalformedError{Problem: "results.metadata.labels must be an object"}
	case m.Attributes != nil && !isObject(m.Attributes):
		return &MalformedError{Problem: "results.metadata.attributes must be an object"}
	}
	return nil
}

func isObject(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '{'
}

// clip bounds a target's description.
func clip(s string) string {
	r := []rune(strings.TrimSpace(s))
	if len(r) <= MaxDescription {
		return string(r)
	}
	return string(r[:MaxDescription]) + "…"
}
