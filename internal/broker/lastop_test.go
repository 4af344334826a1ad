package broker_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// lastOpRule is one rule of the last_operation endpoints: given a state,
// the poll (of the instance's endpoint, or the binding's) answers a state
// or an error code.
type lastOpRule struct {
	name    string
	given   func(h *harness) broker.LastOperationDetails
	binding bool
	state   broker.OperationState
	code    broker.Code
	then    func(t *testing.T, h *harness, lo broker.LastOperation)
}

func runLastOpRules(t *testing.T, rules []lastOpRule) {
	t.Helper()
	for _, tt := range rules {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			d := tt.given(h)
			poll := h.b.LastOperation
			if tt.binding {
				poll = h.b.LastBindingOperation
			}
			lo, err := poll(ctx, d)
			switch {
			case tt.code != "":
				wantCode(t, err, tt.code)
			case err != nil || lo.State != tt.state:
				t.Fatalf("last_operation %+v %v, want %q", lo, err, tt.state)
			}
			if tt.then != nil {
				tt.then(t, h, lo)
			}
		})
	}
}

// of names an instance's operation.
func of(op string) broker.LastOperationDetails {
	return broker.LastOperationDetails{InstanceID: "i-1", OperationID: op}
}

// ofBinding names a binding's operation.
func ofBinding(bindingID, op string) broker.LastOperationDetails {
	return broker.LastOperationDetails{InstanceID: "i-1", BindingID: bindingID, OperationID: op}
}

// wantNoFlags fails when the answer carries instance_usable or
// update_repeatable, which OSB has only for failed updates and
// deprovisions.
func wantNoFlags(t *testing.T, lo broker.LastOperation) {
	t.Helper()
	if lo.InstanceUsable != nil || lo.UpdateRepeatable != nil {
		t.Fatalf("instance_usable %v, update_repeatable %v: want neither", lo.InstanceUsable, lo.UpdateRepeatable)
	}
}

func TestLastOperation(t *testing.T) {
	runLastOpRules(t, []lastOpRule{
		{
			name: "an operation in progress says so, with the driver's description and its Retry-After",
			given: func(h *harness) broker.LastOperationDetails {
				h.driver.on("begin", broker.KindProvision, running("Creating: 1 of 2 resources done.", 5*time.Second))
				op := h.provisioning("i-1", planAsync, "")
				h.mustBegin("i-1", op)
				return of(op)
			},
			state: broker.OperationInProgress,
			then: func(t *testing.T, h *harness, lo broker.LastOperation) {
				if lo.Description != "Creating: 1 of 2 resources done." || lo.RetryAfter != 5*time.Second {
					t.Fatalf("%+v, want the driver's description and retry-after", lo)
				}
			},
		},
		{
			name: "an operation in progress with no description from the driver says its kind is in progress",
			given: func(h *harness) broker.LastOperationDetails {
				return of(h.provisioning("i-1", planAsync, ""))
			},
			state: broker.OperationInProgress,
			then: func(t *testing.T, h *harness, lo broker.LastOperation) {
				if lo.Description != "The provision is in progress." {
					t.Fatalf("description %q", lo.Description)
				}
			},
		},
		{
			name: "a provision that succeeded is succeeded",
			given: func(h *harness) broker.LastOperationDetails {
				op := h.provisioning("i-1", planAsync, "")
				h.task("i-1", op)
				return of(op)
			},
			state: broker.OperationSucceeded,
			then: func(t *testing.T, h *harness, lo broker.LastOperation) {
				wantNoFlags(t, lo)
				if lo.RetryAfter != 0 {
					t.Fatalf("a finished operation has Retry-After %s", lo.RetryAfter)
				}
			},
		},
		{
			name: "a provision that failed gives the failure's description, and neither instance_usable nor update_repeatable",
			given: func(h *harness) broker.LastOperationDetails {
				return of(h.failedInstance("i-1", planAsync))
			},
			state: broker.OperationFailed,
			then: func(t *testing.T, h *harness, lo broker.LastOperation) {
				if lo.Description != "The quota is exhausted." {
					t.Fatalf("description %q, want the driver's", lo.Description)
				}
				wantNoFlags(t, lo)
			},
		},
		{
			name: "an update that failed says the instance is usable and the update repeatable",
			given: func(h *harness) broker.LastOperationDetails {
				h.ready("i-1", planAsync)
				h.driver.on("begin", broker.KindUpdate, fails("The resize failed."))
				op := h.updating("i-1", `{"size":2}`)
				h.failTask("i-1", op, "begin")
				return of(op)
			},
			state: broker.OperationFailed,
			then: func(t *testing.T, h *harness, lo broker.LastOperation) {
				if lo.InstanceUsable == nil || !*lo.InstanceUsable || lo.UpdateRepeatable == nil || !*lo.UpdateRepeatable {
					t.Fatalf("instance_usable %v, update_repeatable %v: want both true", lo.InstanceUsable, lo.UpdateRepeatable)
				}
			},
		},
		{
			name: "a deprovision that failed says the instance is not usable, and nothing of repeating an update",
			given: func(h *harness) broker.LastOperationDetails {
				h.ready("i-1", planAsync)
				h.driver.on("begin", broker.KindDeprovision, fails("The database refuses to be deleted."))
				res, err := h.b.Deprovision(ctx, deprovisionOf("i-1", planAsync, true))
				if err != nil {
					h.t.Fatal(err)
				}
				h.failTask("i-1", res.Operation, "begin")
				return of(res.Operation)
			},
			state: broker.OperationFailed,
			then: func(t *testing.T, h *harness, lo broker.LastOperation) {
				if lo.InstanceUsable == nil || *lo.InstanceUsable || lo.UpdateRepeatable != nil {
					t.Fatalf("instance_usable %v, update_repeatable %v: want false and unset", lo.InstanceUsable, lo.UpdateRepeatable)
				}
			},
		},
		{
			name: "a deprovision that succeeded is 410 Gone: the platform forgets the instance",
			given: func(h *harness) broker.LastOperationDetails {
				h.ready("i-1", planAsync)
				res, err := h.b.Deprovision(ctx, deprovisionOf("i-1", planAsync, true))
				if err != nil {
					h.t.Fatal(err)
				}
				h.task("i-1", res.Operation)
				return of(res.Operation)
			},
			code: broker.CodeGone,
		},
		{
			name: "a deprovision that succeeded is 410 Gone also when the poll names no operation",
			given: func(h *harness) broker.LastOperationDetails {
				h.ready("i-1", planAsync)
				res, err := h.b.Deprovision(ctx, deprovisionOf("i-1", planAsync, true))
				if err != nil {
					h.t.Fatal(err)
				}
				h.task("i-1", res.Operation)
				return of("")
			},
			code: broker.CodeGone,
		},
		{
			name: "a poll that names no operation reports the instance's newest",
			given: func(h *harness) broker.LastOperationDetails {
				h.ready("i-1", planAsync)
				h.updating("i-1", `{"size":2}`)
				return of("")
			},
			state: broker.OperationInProgress,
			then: func(t *testing.T, h *harness, lo broker.LastOperation) {
				if !strings.Contains(lo.Description, "update") {
					t.Fatalf("description %q, want the update's", lo.Description)
				}
			},
		},
		{
			name: "a provision halted by a deprovision is failed, and says why",
			given: func(h *harness) broker.LastOperationDetails {
				op := h.provisioning("i-1", planAsync, "")
				if _, err := h.b.Deprovision(ctx, deprovisionOf("i-1", planAsync, true)); err != nil {
					h.t.Fatal(err)
				}
				return of(op)
			},
			state: broker.OperationFailed,
			then: func(t *testing.T, h *harness, lo broker.LastOperation) {
				if !strings.Contains(lo.Description, "halted") {
					t.Fatalf("description %q, want why", lo.Description)
				}
			},
		},
		{
			name: "an operation the instance does not have is 404 NotFound",
			given: func(h *harness) broker.LastOperationDetails {
				h.ready("i-1", planSync)
				return of("op-999")
			},
			code: broker.CodeNotFound,
		},
		{
			name:  "an instance the broker never had is 404 NotFound",
			given: func(h *harness) broker.LastOperationDetails { return of("") },
			code:  broker.CodeNotFound,
		},
		{
			name: "a binding's operation is not found through the instance's endpoint (404 NotFound)",
			given: func(h *harness) broker.LastOperationDetails {
				h.ready("i-1", planAsync)
				return of(h.bindingAsync("i-1", "b-1", planAsync))
			},
			code: broker.CodeNotFound,
		},
	})
}

func TestLastBindingOperation(t *testing.T) {
	runLastOpRules(t, []lastOpRule{
		{
			name: "a bind in progress says so",
			given: func(h *harness) broker.LastOperationDetails {
				h.ready("i-1", planAsync)
				return ofBinding("b-1", h.bindingAsync("i-1", "b-1", planAsync))
			},
			binding: true,
			state:   broker.OperationInProgress,
		},
		{
			name: "a bind that failed gives its description, and neither instance_usable nor update_repeatable",
			given: func(h *harness) broker.LastOperationDetails {
				h.ready("i-1", planAsync)
				return ofBinding("b-1", h.failedBinding("i-1", "b-1", planAsync))
			},
			binding: true,
			state:   broker.OperationFailed,
			then: func(t *testing.T, h *harness, lo broker.LastOperation) {
				if lo.Description != "The user could not be created." {
					t.Fatalf("description %q", lo.Description)
				}
				wantNoFlags(t, lo)
			},
		},
		{
			name: "an unbind that succeeded is 410 Gone: the platform forgets the binding",
			given: func(h *harness) broker.LastOperationDetails {
				h.ready("i-1", planAsync)
				h.task("i-1", h.bindingAsync("i-1", "b-1", planAsync))
				res, err := h.b.Unbind(ctx, unbindOf("i-1", "b-1", planAsync, true))
				if err != nil {
					h.t.Fatal(err)
				}
				h.task("i-1", res.Operation)
				return ofBinding("b-1", res.Operation)
			},
			binding: true,
			code:    broker.CodeGone,
		},
		{
			name: "a poll that names no operation reports the binding's newest, not another binding's",
			given: func(h *harness) broker.LastOperationDetails {
				h.ready("i-1", planAsync)
				h.task("i-1", h.bindingAsync("i-1", "b-1", planAsync))
				h.bindingAsync("i-1", "b-2", planAsync)
				return ofBinding("b-1", "")
			},
			binding: true,
			state:   broker.OperationSucceeded,
		},
		{
			name: "another binding's operation is 404 NotFound",
			given: func(h *harness) broker.LastOperationDetails {
				h.ready("i-1", planAsync)
				op := h.bindingAsync("i-1", "b-1", planAsync)
				h.bindingAsync("i-1", "b-2", planAsync)
				return ofBinding("b-2", op)
			},
			binding: true,
			code:    broker.CodeNotFound,
		},
		{
			name: "an operation of the instance is 404 NotFound through a binding's endpoint",
			given: func(h *harness) broker.LastOperationDetails {
				op := h.provisioning("i-1", planAsync, "")
				return ofBinding("b-1", op)
			},
			binding: true,
			code:    broker.CodeNotFound,
		},
		{
			name: "a binding the broker never had is 404 NotFound",
			given: func(h *harness) broker.LastOperationDetails {
				h.ready("i-1", planSync)
				return ofBinding("b-1", "")
			},
			binding: true,
			code:    broker.CodeNotFound,
		},
	})
}

// TestLastOperationRepairs: a poll of an operation still in progress long
// after the check its workflow promised asks the engine about the
// execution and repairs the record, so no operation stays "in progress"
// forever.
func TestLastOperationRepairs(t *testing.T) {
	overdue := time.Minute // past NextCheckAt (2s) plus RepairAfter (30s)
	runLastOpRules(t, []lastOpRule{
		{
			name: "an overdue operation whose execution is missing is started again, under the same name and with the same input",
			given: func(h *harness) broker.LastOperationDetails {
				op := h.provisioning("i-1", planAsync, "")
				h.engine.lose(op)
				h.clock.advance(overdue)
				return of(op)
			},
			state: broker.OperationInProgress,
			then: func(t *testing.T, h *harness, _ broker.LastOperation) {
				s := h.engine.Started()
				if len(s) != 2 || s[1] != s[0] {
					t.Fatalf("started %+v, want the same start twice", s)
				}
			},
		},
		{
			name: "an operation whose workflow could not be started is on record all the same (202), and a poll once it is overdue starts it",
			given: func(h *harness) broker.LastOperationDetails {
				h.engine.down = true
				op := h.provisioning("i-1", planAsync, "")
				h.engine.down = false
				h.clock.advance(overdue)
				return of(op)
			},
			state: broker.OperationInProgress,
			then: func(t *testing.T, h *harness, _ broker.LastOperation) {
				op := h.lastOp("i-1")
				if got := h.engine.startsOf(broker.WorkflowOperation); !slices.Equal(got, []string{op.ID}) {
					t.Fatalf("started %v, want %s", got, op.ID)
				}
			},
		},
		{
			name: "an overdue operation whose execution ended without a result is failed with why, and its instance released",
			given: func(h *harness) broker.LastOperationDetails {
				op := h.provisioning("i-1", planAsync, "")
				h.engine.end(op, broker.ExecutionFailed, "States.Runtime")
				h.clock.advance(overdue)
				return of(op)
			},
			state: broker.OperationFailed,
			then: func(t *testing.T, h *harness, lo broker.LastOperation) {
				if lo.Description != "The provision failed: its workflow ended with States.Runtime." {
					t.Fatalf("description %q", lo.Description)
				}
				if inst := h.instance("i-1"); inst.State != broker.InstanceFailed || inst.Op != "" {
					t.Fatalf("instance %+v, want failed and released", inst)
				}
			},
		},
		{
			name: "an overdue operation whose execution timed out is failed as timed out",
			given: func(h *harness) broker.LastOperationDetails {
				h.ready("i-1", planAsync)
				op := h.updating("i-1", `{"size":2}`)
				h.engine.end(op, broker.ExecutionTimedOut, "States.Timeout")
				h.clock.advance(overdue)
				return of(op)
			},
			state: broker.OperationFailed,
			then: func(t *testing.T, h *harness, lo broker.LastOperation) {
				if lo.Description != "The update timed out." {
					t.Fatalf("description %q", lo.Description)
				}
				if inst := h.instance("i-1"); inst.State != broker.InstanceReady || inst.Op != "" {
					t.Fatalf("instance %+v, want ready and released", inst)
				}
			},
		},
		{
			name: "an operation not yet overdue is not repaired, even when its execution ended",
			given: func(h *harness) broker.LastOperationDetails {
				op := h.provisioning("i-1", planAsync, "")
				h.engine.end(op, broker.ExecutionFailed, "States.Runtime")
				return of(op)
			},
			state: broker.OperationInProgress,
		},
		{
			name: "an overdue operation whose execution still runs is left running",
			given: func(h *harness) broker.LastOperationDetails {
				op := h.provisioning("i-1", planAsync, "")
				h.clock.advance(overdue)
				return of(op)
			},
			state: broker.OperationInProgress,
			then: func(t *testing.T, h *harness, _ broker.LastOperation) {
				if n := len(h.engine.Started()); n != 1 {
					t.Fatalf("%d starts, want the first only", n)
				}
			},
		},
		{
			name: "an overdue synchronous operation, whose request died with it, is failed as interrupted",
			given: func(h *harness) broker.LastOperationDetails {
				op := h.crashedSyncProvision("i-1", planSync)
				h.clock.advance(overdue)
				return of(op)
			},
			state: broker.OperationFailed,
			then: func(t *testing.T, h *harness, lo broker.LastOperation) {
				if !strings.Contains(lo.Description, "interrupted") {
					t.Fatalf("description %q", lo.Description)
				}
				if !slices.Equal(h.engine.Started(), nil) {
					t.Fatalf("started %v: a synchronous operation has no execution", h.engine.Started())
				}
			},
		},
	})
}
