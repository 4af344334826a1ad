package local

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// Error names of the States Language that this engine raises or treats
// specially.
const (
	errorAll           = "States.ALL"
	errorTaskFailed    = "States.TaskFailed"
	errorTimeout       = "States.Timeout"
	errorRuntime       = "States.Runtime"
	errorResultPath    = "States.ResultPathMatchFailure"
	errorNoChoiceMatch = "States.NoChoiceMatched"
	errorDataLimit     = "States.DataLimitExceeded"
)

// ErrorAborted is the Error of an execution stopped with Stop. Step
// Functions leaves it to the caller of StopExecution; this engine always
// sets it so that every ended execution says why.
const ErrorAborted = "States.Aborted"

// stateError is an error raised by a state: a name that Retry and Catch
// match on, and a cause.
type stateError struct {
	name  string
	cause string
}

func (e *stateError) Error() string { return e.name + ": " + e.cause }

func runtimeError(format string, args ...any) *stateError {
	return &stateError{name: errorRuntime, cause: fmt.Sprintf(format, args...)}
}

// errorName names a worker error the way a Lambda function written with
// aws-lambda-go does, since that name is what Retry and Catch match on in
// Step Functions: an error that has an ErrorName method (anywhere in its
// chain) is named by it; otherwise the name is the error's Go type name,
// without the pointer.
func errorName(err error) string {
	var named interface{ ErrorName() string }
	if errors.As(err, &named) {
		if n := named.ErrorName(); n != "" {
			return n
		}
	}
	return typeName(err)
}

func typeName(v any) string {
	t := reflect.TypeOf(v)
	if t == nil {
		return errorTaskFailed
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() == "" {
		return errorTaskFailed
	}
	return t.Name()
}

// panicError is a worker panic turned into a task failure, named like
// aws-lambda-go names a panic: after the panic value's type.
type panicError struct{ value any }

func (e *panicError) Error() string     { return fmt.Sprintf("worker panicked: %v", e.value) }
func (e *panicError) ErrorName() string { return typeName(e.value) }

// matches reports whether an error name is matched by an ErrorEquals list.
// States.ALL matches everything but States.Runtime (and the data limit,
// which this engine does not raise); States.TaskFailed matches the same
// except States.Timeout. States.Runtime never reaches this function.
func matches(errorEquals []string, name string) bool {
	for _, e := range errorEquals {
		switch {
		case e == name:
			return true
		case e == errorAll:
			return name != errorRuntime && name != errorDataLimit
		case e == errorTaskFailed:
			if name != errorTimeout && name != errorRuntime && name != errorDataLimit {
				return true
			}
		}
	}
	return false
}

// LoadError is a problem in a state machine definition: the file, the state
// (empty for a top-level field) and the field (empty when the problem is the
// state itself) it concerns.
type LoadError struct {
	File    string
	State   string
	Field   string
	Problem string
}

func (e *LoadError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.State != "" {
		fmt.Fprintf(&b, ": state %q", e.State)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": field %q", e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Problem)
	return b.String()
}
