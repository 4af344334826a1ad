package broker_test

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// TestTheLifecycleMakesOnlyTheTransitionsItsTableLists walks every kind of
// operation to every end through the broker (its endpoints and its Tasks,
// on the bbolt store) and compares what each end left stored with the
// entry of broker's transitions table: an end the table does not list, an
// item left otherwise than its entry says, and an entry no walk reaches
// each fail. Each walk's change made a record before it failed, and the
// driver names every record as a leftover, so that Leftovers shows as
// detached records or as none.
func TestTheLifecycleMakesOnlyTheTransitionsItsTableLists(t *testing.T) {
	const failure = "The backend refused the change."
	// failLater: the change's Begin makes its record and asks to be
	// checked again at once (no wait within a request), and its Check
	// fails for good.
	failLater := func(h *harness, kind broker.OperationKind) {
		h.driver.on("begin", kind, running("", 0))
		h.driver.on("check", kind, fails(failure))
	}
	walks := []struct {
		kind broker.OperationKind
		end  broker.End
		walk func(h *harness)
	}{
		{broker.KindProvision, broker.EndSucceeded, func(h *harness) { h.ready("i-1", planSync) }},
		{broker.KindProvision, broker.EndFailed, func(h *harness) { h.failedInstance("i-1", planAsync) }},
		{broker.KindProvision, broker.EndFailedInRequest, func(h *harness) {
			failLater(h, broker.KindProvision)
			_, h.err = h.b.Provision(ctx, provisionOf("i-1", planSync, false, ""))
		}},
		{broker.KindUpdate, broker.EndSucceeded, func(h *harness) {
			h.ready("i-1", planSync)
			_, h.err = h.b.Update(ctx, updateOf("i-1", "", false, `{"size":2}`))
		}},
		{broker.KindUpdate, broker.EndFailed, func(h *harness) {
			h.ready("i-1", planAsync)
			h.driver.on("begin", broker.KindUpdate, running("", time.Second))
			h.driver.on("check", broker.KindUpdate, fails(failure))
			op := h.updating("i-1", `{"size":2}`)
			h.mustBegin("i-1", op)
			h.failTask("i-1", op, "check")
		}},
		{broker.KindUpdate, broker.EndFailedInRequest, func(h *harness) {
			h.ready("i-1", planSync)
			failLater(h, broker.KindUpdate)
			_, h.err = h.b.Update(ctx, updateOf("i-1", "", false, `{"size":2}`))
		}},
		{broker.KindDeprovision, broker.EndSucceeded, func(h *harness) {
			h.ready("i-1", planSync)
			_, h.err = h.b.Deprovision(ctx, deprovisionOf("i-1", planSync, false))
		}},
		{broker.KindDeprovision, broker.EndFailed, func(h *harness) {
			h.ready("i-1", planAsync)
			h.driver.on("begin", broker.KindDeprovision, fails(failure))
			res, err := h.b.Deprovision(ctx, deprovisionOf("i-1", planAsync, true))
			if err != nil {
				h.t.Fatal(err)
			}
			h.failTask("i-1", res.Operation, "begin")
		}},
		{broker.KindDeprovision, broker.EndFailedInRequest, func(h *harness) {
			h.ready("i-1", planSync)
			failLater(h, broker.KindDeprovision)
			_, h.err = h.b.Deprovision(ctx, deprovisionOf("i-1", planSync, false))
		}},
		{broker.KindBind, broker.EndSucceeded, func(h *harness) {
			h.ready("i-1", planSync)
			h.bound("i-1", "b-1", planSync)
		}},
		{broker.KindBind, broker.EndFailed, func(h *harness) {
			h.ready("i-1", planAsync)
			h.failedBinding("i-1", "b-1", planAsync)
		}},
		{broker.KindBind, broker.EndFailedInRequest, func(h *harness) {
			h.ready("i-1", planSync)
			failLater(h, broker.KindBind)
			_, h.err = h.b.Bind(ctx, bindOf("i-1", "b-1", planSync, false, ""))
		}},
		{broker.KindUnbind, broker.EndSucceeded, func(h *harness) {
			h.ready("i-1", planSync)
			h.bound("i-1", "b-1", planSync)
			_, h.err = h.b.Unbind(ctx, unbindOf("i-1", "b-1", planSync, false))
		}},
		{broker.KindUnbind, broker.EndFailed, func(h *harness) {
			h.ready("i-1", planAsync)
			h.bound("i-1", "b-1", planAsync)
			h.driver.on("begin", broker.KindUnbind, fails(failure))
			res, err := h.b.Unbind(ctx, unbindOf("i-1", "b-1", planAsync, true))
			if err != nil {
				h.t.Fatal(err)
			}
			h.failTask("i-1", res.Operation, "begin")
		}},
		{broker.KindUnbind, broker.EndFailedInRequest, func(h *harness) {
			h.ready("i-1", planSync)
			h.bound("i-1", "b-1", planSync)
			failLater(h, broker.KindUnbind)
			_, h.err = h.b.Unbind(ctx, unbindOf("i-1", "b-1", planSync, false))
		}},
	}
	walked := map[broker.OperationKind][]broker.End{}
	for _, w := range walks {
		t.Run(string(w.kind)+" "+string(w.end), func(t *testing.T) {
			h := newHarness(t)
			h.driver.allLeftovers = true
			w.walk(h)
			// The one operation of the walk's kind, finished.
			var op *broker.Operation
			for _, o := range h.ops("i-1") {
				if o.Kind == w.kind {
					op = &o
				}
			}
			if op == nil || !op.Finished() {
				t.Fatalf("the %s did not end: %+v (request: %v)", w.kind, op, h.err)
			}
			got := broker.Transition{Usable: op.InstanceUsable, Repeatable: op.UpdateRepeatable,
				Leftovers: len(h.detachedNames()) > 0}
			switch {
			case w.kind.IsBinding() && h.binding("i-1", "b-1") == nil, !w.kind.IsBinding() && h.instance("i-1") == nil:
				got.Delete = true
			case w.kind.IsBinding():
				got.Binding = h.binding("i-1", "b-1").State
			default:
				got.Instance = h.instance("i-1").State
			}
			end := broker.EndOf(*op)
			want, listed := broker.Transitions[w.kind][end]
			if !listed {
				t.Fatalf("the %s ended %q, which the table does not list; it left %+v", w.kind, end, got)
			}
			// Whether a failure takes the driver's word on the instance
			// is the usable tests' (usable_test.go): this driver says
			// nothing.
			want.DriverSays = false
			if !reflect.DeepEqual(got, want) {
				t.Errorf("the %s that ended %q left %s; the table says %s", w.kind, end, show(got), show(want))
			}
			walked[w.kind] = append(walked[w.kind], end)
		})
	}
	for kind, ends := range broker.Transitions {
		for end := range ends {
			if !slices.Contains(walked[kind], end) {
				t.Errorf("no walk reached the table's %s %q", kind, end)
			}
		}
	}
}

// show prints a transition with its flags' values.
func show(t broker.Transition) string {
	flag := func(b *bool) string {
		if b == nil {
			return "unset"
		}
		return map[bool]string{true: "true", false: "false"}[*b]
	}
	return "{instance " + string(t.Instance) + ", binding " + string(t.Binding) + ", delete " + map[bool]string{true: "yes", false: "no"}[t.Delete] +
		", leftovers " + map[bool]string{true: "yes", false: "no"}[t.Leftovers] +
		", instance_usable " + flag(t.Usable) + ", update_repeatable " + flag(t.Repeatable) + "}"
}
