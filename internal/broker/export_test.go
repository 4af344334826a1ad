package broker

// What lifecycle_test.go walks: the transitions table, and the end an
// operation came to.

type (
	Transition = transition
	End        = end
)

const (
	EndSucceeded       = endSucceeded
	EndFailed          = endFailed
	EndFailedInRequest = endFailedInRequest
)

var Transitions = transitions

// EndOf is the end a finished op came to.
func EndOf(op Operation) End { return endOf(op, op.State == OperationFailed) }
