package function

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// The one classification of what a target answered, or of its failure to
// answer: Classify. Every Driver call (begin, check, cleanup; synchronous
// or not) returns its error through it, so the request of a synchronous
// plan and the workflow of an asynchronous one treat an answer alike, and
// the table of what users see in docs/functions.md is this function's.
//
// Permanent (*broker.Failure, whose Description users get): an error of
// kind permanent; a malformed answer (the violation named); an HTTP 4xx
// other than 408 and 429 (401 and 403: the signature refused); a Lambda
// function that is missing, that the broker may not invoke, or that
// refuses the request; a plan whose target or secret is misconfigured.
// Transient (*TransientError): an error of kind transient; no answer in
// time; a connection that failed; HTTP 408, 429 and 5xx; a Lambda function
// error, throttling or service error.

// TransientError is a failure that retrying may fix: the target is
// unreachable, slow or overloaded, or says so.
type TransientError struct {
	// Reason says what happened, in words fit for the user and the
	// service's owner ("HTTP 503", "no answer within 10s"): never the
	// answer's content, which may hold anything.
	Reason string
	// Err is the full error, for the log.
	Err error
}

func (e *TransientError) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

func (e *TransientError) Unwrap() error { return e.Err }

// TransientReason is Reason, for the broker (broker.TransientReason).
func (e *TransientError) TransientReason() string { return e.Reason }

var _ broker.TransientReason = (*TransientError)(nil)

// StatusError is an HTTP answer whose status the protocol does not read as
// an answer.
type StatusError struct {
	Target Target
	Code   int
}

func (e *StatusError) Error() string { return fmt.Sprintf("%s answered HTTP %d", e.Target, e.Code) }

// timeoutError is a request that got no answer within the target's timeout.
type timeoutError struct {
	Target  Target
	Timeout time.Duration
	Err     error
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("%s did not answer in time: %v", e.Target, e.Err)
}
func (e *timeoutError) Unwrap() error { return e.Err }

// answerError is the error an answer reports.
type answerError struct{ *AnswerError }

func (e *answerError) Error() string {
	return fmt.Sprintf("the target reports a %s error: %s", e.Kind, clipTo(e.Description, 200))
}

// malformedDescription is what users see for a malformed answer: the
// violation, for the service's owner to fix.
const malformedDescription = "This service's backend sent the broker an answer that breaks the function protocol (%s); retrying cannot help. The service's owner must fix the backend."

// Classify sorts a failed call's error into permanent (a *broker.Failure,
// its Description for users) or transient (a *TransientError); nil stays
// nil. It is the only place that decides; an error it does not know is
// transient (the network, the AWS SDK).
func Classify(err error) error {
	var (
		failure   *broker.Failure
		transient *TransientError
		malformed *MalformedError
		status    *StatusError
		timeout   *timeoutError
		answer    *answerError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &failure), errors.As(err, &transient):
		return err
	case errors.As(err, &answer) && answer.Kind == ErrorPermanent:
		return &broker.Failure{Description: clip(answer.Description),
			InstanceUsable: answer.InstanceUsable, UpdateRepeatable: answer.UpdateRepeatable}
	case errors.As(err, &answer):
		return &TransientError{Reason: "it reports a transient error", Err: err}
	case errors.As(err, &malformed):
		return &broker.Failure{Description: fmt.Sprintf(malformedDescription, malformed.Problem), Detail: err.Error()}
	case errors.As(err, &status) && transientStatus(status.Code):
		return &TransientError{Reason: fmt.Sprintf("HTTP %d", status.Code), Err: err}
	case errors.As(err, &status):
		return &broker.Failure{Description: fmt.Sprintf(
			"This service's backend refused the broker's request (HTTP %d) without an answer of the function protocol. Ask the platform operator to check the plan's function settings.",
			status.Code), Detail: err.Error()}
	case errors.As(err, &timeout):
		return &TransientError{Reason: fmt.Sprintf("no answer within %s", timeout.Timeout), Err: err}
	}
	return &TransientError{Reason: "unreachable", Err: err}
}

// transientStatus reports whether an HTTP status says "try again": a
// timeout, too many requests, or a server's error.
func transientStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
}
