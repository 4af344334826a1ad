package broker

import (
	"errors"
	"fmt"
)

// Code classifies a broker error. Codes are data: internal/api maps each one
// to an HTTP status and an OSB error string in exactly one function.
type Code string

// Error codes. The ones whose name matches an OSB error code are sent to the
// platform as the "error" field of the response body.
const (
	CodeBadRequest              Code = "BadRequest"              // 400: the request is malformed or invalid
	CodeUnauthorized            Code = "Unauthorized"            // 401
	CodeForbidden               Code = "Forbidden"               // 403: not through the front door
	CodeNotFound                Code = "NotFound"                // 404
	CodeConflict                Code = "Conflict"                // 409: exists with other attributes
	CodeGone                    Code = "Gone"                    // 410: nothing to delete
	CodePreconditionFailed      Code = "PreconditionFailed"      // 412: unsupported API version
	CodeAsyncRequired           Code = "AsyncRequired"           // 422
	CodeConcurrencyError        Code = "ConcurrencyError"        // 422
	CodeMaintenanceInfoConflict Code = "MaintenanceInfoConflict" // 422
	CodeRequiresApp             Code = "RequiresApp"             // 422
	CodeUnprocessable           Code = "Unprocessable"           // 422 without an OSB error code
	CodeUnavailable             Code = "Unavailable"             // 503: a service's backend did not complete a synchronous change
	CodeInternal                Code = "Internal"                // 500
)

// Error is an error the broker reports to the platform. Its Description is
// meant for the end user and must say what to do about it.
type Error struct {
	Code        Code
	Description string
	// InstanceUsable and UpdateRepeatable are sent where the spec has them
	// (failed update or deprovision); nil means "not said".
	InstanceUsable   *bool
	UpdateRepeatable *bool
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Description) }

// Errorf returns an *Error with a formatted description.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Description: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err, or CodeInternal when err carries none.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// Failure is a permanent failure of a change, reported by a driver. Its
// Description reaches the platform through last_operation; it must not hold
// credentials or request parameters. Detail is for the platform operator
// alone: what the driver's provider said in full (a CloudFormation reason
// can name the account, roles and IAM actions), kept on the operation's
// record for `ops operation` and never served to the platform; it must not
// hold credentials either (see Operation.Detail).
type Failure struct {
	Description      string
	Detail           string
	InstanceUsable   *bool
	UpdateRepeatable *bool
}

func (f *Failure) Error() string { return f.Description }

// TransientReason is implemented by a driver's transient error that can
// say what went wrong in words fit for users ("HTTP 503", "no answer
// within 10s"): never what the service's backend answered.
type TransientReason interface {
	error
	TransientReason() string
}

// Bool returns a pointer to b, for the optional flags of Error and Operation.
func Bool(b bool) *bool { return &b }
