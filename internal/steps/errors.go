package steps

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/serverless-osb/broker/internal/broker"
)

// The names of a step's errors, which the state machines' Retry and Catch
// match, and of the error Step Functions raises when a Task times out.
const (
	ErrorTransient = "TransientError"
	ErrorPermanent = "PermanentError"
	errorTimeout   = "States.Timeout"
)

// TransientError is a failure worth retrying; the state machine's Retry
// matches its name.
type TransientError struct{ Err error }

func (e *TransientError) Error() string     { return e.Err.Error() }
func (e *TransientError) Unwrap() error     { return e.Err }
func (e *TransientError) ErrorName() string { return ErrorTransient }

// PermanentError is a driver's failure that retrying cannot fix; the state
// machine's Catch records it. Its message is the cause the workflow
// carries to record_failure (cause encodes it, Caught decodes it): the
// description the user sees, with the detail the operator sees and what
// the driver said of the instance.
type PermanentError struct{ broker.Failure }

func (e *PermanentError) Error() string     { return cause(e.Failure) }
func (e *PermanentError) ErrorName() string { return ErrorPermanent }

// classify sorts a step's error into the two the workflows know, and
// returns it bare, since a wrapped one would be named "wrapError" and skip
// the Retry: a driver's permanent failure is caught and recorded by the
// workflow; anything else is retried.
func classify(err error) error {
	switch err.(type) {
	case *TransientError, *PermanentError:
		return err
	}
	var perm *PermanentError
	if errors.As(err, &perm) {
		return perm // its message is the description the user sees
	}
	var f *broker.Failure
	if errors.As(err, &f) {
		return &PermanentError{*f}
	}
	return &TransientError{Err: err}
}

// errorName is the name an error leaves the worker with.
func errorName(err error) string {
	if n, ok := err.(interface{ ErrorName() string }); ok {
		return n.ErrorName()
	}
	return fmt.Sprintf("%T", err)
}

// Caught turns an error a workflow caught, by its name and cause, into the
// failure it records: the description the user sees, the detail the
// operator sees (Operation.Detail), and what the driver said of the
// instance (Failure.InstanceUsable, Failure.UpdateRepeatable). Only a
// driver's permanent failure is shown as it is, as cause encoded it;
// anything else is summarised for the user (broker.GenericFailure), so
// internals do not reach the platform, and given to the operator as it is.
func Caught(name, cause string) broker.Failure {
	var lambdaErr struct {
		ErrorMessage string `json:"errorMessage"`
	}
	if json.Unmarshal([]byte(cause), &lambdaErr) == nil && lambdaErr.ErrorMessage != "" {
		cause = lambdaErr.ErrorMessage
	}
	switch name {
	case ErrorPermanent:
		var f failureCause
		if json.Unmarshal([]byte(cause), &f) == nil && f.Description != "" {
			return broker.Failure(f)
		}
		if cause != "" {
			return broker.Failure{Description: cause}
		}
	case errorTimeout:
		return broker.Failure{Description: "The operation timed out; try again later.", Detail: broker.ClipDetail(strings.TrimSpace(name + ": " + cause))}
	}
	if name == "" && cause == "" {
		return broker.Failure{Description: broker.GenericFailure}
	}
	return broker.Failure{Description: broker.GenericFailure, Detail: broker.ClipDetail(strings.TrimSpace(name + ": " + cause))}
}

// failureCause is a permanent failure with a detail or flags, as the cause
// of the workflow's error carries it.
type failureCause struct {
	Description      string `json:"description"`
	Detail           string `json:"detail,omitempty"`
	InstanceUsable   *bool  `json:"instance_usable,omitempty"`
	UpdateRepeatable *bool  `json:"update_repeatable,omitempty"`
}

// cause is the cause of a workflow's error for the permanent failure f
// (Caught reads it): its description as it is when that is all there is
// (as causes were before details), else all of f in one JSON object, the
// detail capped at broker.MaxDetail. A description that is itself a JSON
// object (a demo driver's fail_description is the user's) is encoded too,
// so that it cannot pass for a detail or flags.
func cause(f broker.Failure) string {
	if f.Detail == "" && f.InstanceUsable == nil && f.UpdateRepeatable == nil &&
		!strings.HasPrefix(strings.TrimSpace(f.Description), "{") {
		return f.Description
	}
	data, err := json.Marshal(failureCause{Description: f.Description, Detail: broker.ClipDetail(f.Detail),
		InstanceUsable: f.InstanceUsable, UpdateRepeatable: f.UpdateRepeatable})
	if err != nil {
		return f.Description
	}
	return string(data)
}
