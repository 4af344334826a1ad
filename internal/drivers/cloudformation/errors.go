package cloudformation

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/smithy-go"

	"github.com/serverless-osb/broker/internal/broker"
)

// apiError returns the AWS error code and message of err, if it is one.
func apiError(err error) (code, message string, ok bool) {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode(), ae.ErrorMessage(), true
	}
	return "", "", false
}

// isNotFound: the stack does not exist (CloudFormation says so with a
// ValidationError).
func isNotFound(err error) bool {
	code, msg, _ := apiError(err)
	return code == "ValidationError" && strings.Contains(msg, "does not exist")
}

// isAlreadyExists: CreateStack of a name that is taken.
func isAlreadyExists(err error) bool {
	code, _, _ := apiError(err)
	return code == "AlreadyExistsException"
}

// isTokenUsed: a ClientRequestToken sent before with another request.
func isTokenUsed(err error) bool {
	code, _, _ := apiError(err)
	return code == "TokenAlreadyExistsException"
}

// isBusy: the stack is in the middle of another change ("Stack:… is in
// UPDATE_IN_PROGRESS state and can not be updated").
func isBusy(err error) bool {
	code, msg, _ := apiError(err)
	return code == "ValidationError" && (strings.Contains(msg, "_IN_PROGRESS state") || strings.Contains(msg, "while in status"))
}

// classify turns the error of a CloudFormation call into what the Driver
// port expects: a *broker.Failure when only a person can fix it (bad
// parameter values or template, missing permissions, an account limit),
// otherwise a *broker.Unreachable, an outage the operation waits out
// within its plan's budget (throttling, 5xx, network, and the same of STS
// when the credentials come from it), which names the service and AWS's
// error code for last_operation. what says what the call was doing, e.g.
// "create the stack".
func classify(what string, err error) error {
	code, msg, ok := apiError(err)
	if !ok {
		return unreachable(what, err)
	}
	// CloudFormation's refusals are worth showing (a parameter value it
	// does not allow), but not the account or the roles they may name.
	msg = redact(msg)
	switch code {
	case "ValidationError":
		return &broker.Failure{Description: fmt.Sprintf("CloudFormation refused to %s: %s", what, sentence(msg))}
	case "InsufficientCapabilitiesException":
		return &broker.Failure{Description: fmt.Sprintf("CloudFormation refused to %s: %s The template needs a capability the broker does not grant; the platform team must change the template.", what, sentence(msg))}
	case "AccessDenied", "AccessDeniedException", "UnauthorizedOperation":
		return &broker.Failure{Description: fmt.Sprintf("The broker is not allowed to %s (%s); ask the platform operator to check the broker's AWS permissions and its CloudFormation service role.", what, code)}
	case "LimitExceededException":
		return &broker.Failure{Description: fmt.Sprintf("CloudFormation refused to %s: %s Ask the platform operator to raise the account's limit or delete unused stacks.", what, sentence(msg))}
	}
	return unreachable(what, err)
}

// unreachable is a transient error of an AWS call as an outage: its
// reason names the AWS service that failed (the innermost, so STS when the
// call's credentials could not be had) and AWS's error code, or says that
// the service did not answer; never a message, which may name the account.
func unreachable(what string, err error) error {
	service := "CloudFormation"
	for e := err; ; {
		var oe *smithy.OperationError
		if !errors.As(e, &oe) {
			break
		}
		service, e = oe.Service(), oe.Err
	}
	reason := service + " did not answer"
	if code, _, ok := apiError(err); ok {
		reason = service + " answered " + code
	}
	return &broker.Unreachable{Reason: reason, Err: fmt.Errorf("%s: %w", what, err)}
}

var (
	arnPattern     = lazyPattern(`arn:aws[a-z-]*:[^\s"',;]*`)
	accountPattern = lazyPattern(`\b[0-9]{12}\b`)
)

// redact replaces ARNs and account ids in one of CloudFormation's messages.
func redact(msg string) string {
	return accountPattern().ReplaceAllString(arnPattern().ReplaceAllString(msg, "(an ARN)"), "(an account)")
}

// sentence ends s with a full stop.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasSuffix(s, ".") {
		return s
	}
	return s + "."
}

// maxReason bounds what a failure description quotes from CloudFormation.
const maxReason = 1000

func clip(s string) string {
	r := []rune(strings.TrimSpace(s))
	if len(r) <= maxReason {
		return string(r)
	}
	return string(r[:maxReason]) + "…"
}
