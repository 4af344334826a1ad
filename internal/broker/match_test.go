package broker_test

import (
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
)

// The rule of every route that names an instance or a binding: the
// service_id and plan_id it sends are the instance's (a plan changes only
// through an update, whose service_id is still the instance's). Otherwise
// 400, naming both, with nothing written and no driver called.

// wantMismatch fails unless err is the 400 of a request naming other ids
// than the instance's, with a description naming the instance's plan and
// the id the request named instead (a plan's or an offering's), and unless
// nothing changed, no driver was called and no workflow started since the
// request (h.mark). A bind's refusal is its write's condition failing.
func wantMismatch(t *testing.T, h *harness, err error, instancePlan, named string) {
	t.Helper()
	wantCode(t, err, broker.CodeBadRequest)
	desc := err.(*broker.Error).Description
	for _, part := range []string{"(id " + instancePlan + ")", "but the request names", "(id " + named + ")", "send the instance's service_id"} {
		if !strings.Contains(desc, part) {
			t.Fatalf("description %q lacks %q", desc, part)
		}
	}
	if after := h.snapshotJSON("i-1"); after != h.before {
		t.Fatalf("stored before the request:\n%s\nafter:\n%s", h.before, after)
	}
	if calls := h.driver.Calls()[h.calls:]; len(calls) != 0 {
		t.Fatalf("driver called: %q", calls)
	}
	if s := h.engine.Started()[h.starts:]; len(s) != 0 {
		t.Fatalf("workflows started: %+v", s)
	}
}

// asOther is d as set changes it.
func asOther[D any](d D, set func(*D)) D { set(&d); return d }

func TestBindNamesTheInstancesOfferingAndPlan(t *testing.T) {
	bindRules(t, []rule[broker.BindDetails, broker.BindResult]{
		{
			name:  "a bind naming another plan than the instance's is 400, even where the plan it names would bind synchronously",
			given: func(h *harness) { h.ready("i-1", planAsyncOnly) },
			req:   bindOf("i-1", "b-1", planSync, false, ""),
			code:  broker.CodeBadRequest,
			then: func(t *testing.T, h *harness, _ broker.BindResult) {
				wantMismatch(t, h, h.err, planAsyncOnly, planSync)
			},
		},
		{
			name: "a bind naming another plan is 400 before a driver that works in memory runs",
			given: func(h *harness) {
				h.driver.inMemory = true
				h.ready("i-1", planLarge)
			},
			req:  bindOf("i-1", "b-1", planSync, false, ""),
			code: broker.CodeBadRequest,
			then: func(t *testing.T, h *harness, _ broker.BindResult) {
				wantMismatch(t, h, h.err, planLarge, planSync)
			},
		},
		{
			name:  "an asynchronous bind naming another plan is 400 and starts nothing",
			given: func(h *harness) { h.ready("i-1", planSync) },
			req:   bindOf("i-1", "b-1", planAsync, true, ""),
			code:  broker.CodeBadRequest,
			then: func(t *testing.T, h *harness, _ broker.BindResult) {
				wantMismatch(t, h, h.err, planSync, planAsync)
			},
		},
		{
			name:  "a bind naming another offering and its plan is 400",
			given: func(h *harness) { h.ready("i-1", planSync) },
			req:   asOther(bindOf("i-1", "b-1", planOther, false, ""), func(d *broker.BindDetails) { d.ServiceID = otherService }),
			code:  broker.CodeBadRequest,
			then: func(t *testing.T, h *harness, _ broker.BindResult) {
				wantMismatch(t, h, h.err, planSync, planOther)
				wantMismatch(t, h, h.err, planSync, otherService)
			},
		},
		{
			name:  "a bind that the plan it names refuses (async-only) is 400 naming the ids when the instance is of another plan",
			given: func(h *harness) { h.ready("i-1", planSync) },
			req:   bindOf("i-1", "b-1", planAsyncOnly, false, ""),
			code:  broker.CodeBadRequest,
			then: func(t *testing.T, h *harness, _ broker.BindResult) {
				wantMismatch(t, h, h.err, planSync, planAsyncOnly)
			},
		},
		{
			name:  "a bind on an unbindable instance naming a bindable plan is 400",
			given: func(h *harness) { h.ready("i-1", planUnbindable) },
			req:   bindOf("i-1", "b-1", planSync, false, ""),
			code:  broker.CodeBadRequest,
			then: func(t *testing.T, h *harness, _ broker.BindResult) {
				wantMismatch(t, h, h.err, planUnbindable, planSync)
			},
		},
		{
			name: "a rotation naming a rotatable plan on an instance whose plan is not is 400",
			given: func(h *harness) {
				h.ready("i-1", planLarge)
				h.bound("i-1", "b-1", planLarge)
			},
			req:  asOther(bindOf("i-1", "b-2", planSync, false, ""), func(d *broker.BindDetails) { d.PredecessorID = "b-1" }),
			code: broker.CodeBadRequest,
			then: func(t *testing.T, h *harness, _ broker.BindResult) {
				wantMismatch(t, h, h.err, planLarge, planSync)
			},
		},
		{
			name:  "a bind of an instance that does not exist stays 404 whatever it names",
			req:   bindOf("i-1", "b-1", planAsync, true, ""),
			code:  broker.CodeNotFound,
			given: func(h *harness) {},
		},
	})
}

func TestUnbindNamesTheInstancesOfferingAndPlan(t *testing.T) {
	unbindRules(t, []rule[broker.UnbindDetails, broker.UnbindResult]{
		{
			name: "an unbind naming another plan than the instance's is 400 and keeps the binding",
			given: func(h *harness) {
				h.ready("i-1", planSync)
				h.bound("i-1", "b-1", planSync)
			},
			req:  unbindOf("i-1", "b-1", planLarge, false),
			code: broker.CodeBadRequest,
			then: func(t *testing.T, h *harness, _ broker.UnbindResult) {
				wantMismatch(t, h, h.err, planSync, planLarge)
			},
		},
		{
			name: "an unbind naming another offering and its plan is 400",
			given: func(h *harness) {
				h.ready("i-1", planSync)
				h.bound("i-1", "b-1", planSync)
			},
			req:  asOther(unbindOf("i-1", "b-1", planOther, false), func(d *broker.UnbindDetails) { d.ServiceID = otherService }),
			code: broker.CodeBadRequest,
			then: func(t *testing.T, h *harness, _ broker.UnbindResult) {
				wantMismatch(t, h, h.err, planSync, planOther)
			},
		},
		{
			name: "a binding belongs to its instance's plan as it is now: after an update to another plan, the unbind names that plan",
			given: func(h *harness) {
				h.ready("i-1", planSync)
				h.bound("i-1", "b-1", planSync)
				if _, err := h.b.Update(ctx, updateOf("i-1", planLarge, false, "")); err != nil {
					h.t.Fatal(err)
				}
			},
			req:  unbindOf("i-1", "b-1", planLarge, false),
			want: broker.ResultOK,
			then: func(t *testing.T, h *harness, _ broker.UnbindResult) {
				if b := h.binding("i-1", "b-1"); b != nil {
					t.Fatalf("binding %+v left", b)
				}
			},
		},
		{
			name: "after an update to another plan, an unbind naming the plan the binding was made under is 400",
			given: func(h *harness) {
				h.ready("i-1", planSync)
				h.bound("i-1", "b-1", planSync)
				if _, err := h.b.Update(ctx, updateOf("i-1", planAsyncOnly, true, "")); err != nil {
					h.t.Fatal(err)
				}
				h.task("i-1", h.instance("i-1").LastOp)
			},
			req:  unbindOf("i-1", "b-1", planSync, true),
			code: broker.CodeBadRequest,
			then: func(t *testing.T, h *harness, _ broker.UnbindResult) {
				wantMismatch(t, h, h.err, planAsyncOnly, planSync)
			},
		},
		{
			name:  "an unbind of a binding the broker never had stays 410 whatever it names",
			given: func(h *harness) { h.ready("i-1", planSync) },
			req:   unbindOf("i-1", "b-1", planLarge, false),
			code:  broker.CodeGone,
		},
	})
}

func TestDeprovisionNamesTheInstancesOfferingAndPlan(t *testing.T) {
	deprovisionRules(t, []rule[broker.DeprovisionDetails, broker.DeprovisionResult]{
		{
			name:  "a deprovision naming another plan than the instance's is 400 and keeps the instance",
			given: func(h *harness) { h.ready("i-1", planSync) },
			req:   deprovisionOf("i-1", planLarge, false),
			code:  broker.CodeBadRequest,
			then: func(t *testing.T, h *harness, _ broker.DeprovisionResult) {
				wantMismatch(t, h, h.err, planSync, planLarge)
			},
		},
		{
			name:  "a deprovision naming another offering and its plan is 400",
			given: func(h *harness) { h.ready("i-1", planSync) },
			req:   asOther(deprovisionOf("i-1", planOther, false), func(d *broker.DeprovisionDetails) { d.ServiceID = otherService }),
			code:  broker.CodeBadRequest,
			then: func(t *testing.T, h *harness, _ broker.DeprovisionResult) {
				wantMismatch(t, h, h.err, planSync, planOther)
			},
		},
		{
			name: "a deprovision of a failed instance naming another plan is 400 too",
			given: func(h *harness) {
				h.failedInstance("i-1", planAsync)
			},
			req:  deprovisionOf("i-1", planSync, true),
			code: broker.CodeBadRequest,
			then: func(t *testing.T, h *harness, _ broker.DeprovisionResult) {
				wantMismatch(t, h, h.err, planAsync, planSync)
			},
		},
		{
			name:  "a deprovision of an instance the broker never had stays 410 whatever it names",
			req:   deprovisionOf("i-1", planLarge, false),
			code:  broker.CodeGone,
			given: func(h *harness) {},
		},
	})
}

func TestUpdateNamesTheInstancesOffering(t *testing.T) {
	updateRules(t, []rule[broker.UpdateDetails, broker.UpdateResult]{
		{
			name:  "an update naming another offering and its plan is 400 naming both offerings",
			given: func(h *harness) { h.ready("i-1", planSync) },
			req:   asOther(updateOf("i-1", planOther, false, ""), func(d *broker.UpdateDetails) { d.ServiceID = otherService }),
			code:  broker.CodeBadRequest,
			then: func(t *testing.T, h *harness, _ broker.UpdateResult) {
				desc := h.err.Error()
				for _, part := range []string{`service "test-service" (id svc-test)`, `service "other-service" (id svc-other)`, "send the instance's service_id"} {
					if !strings.Contains(desc, part) {
						t.Fatalf("description %q lacks %q", desc, part)
					}
				}
				if w := h.writes.since(); len(w) != 0 {
					t.Fatalf("writes %q", w)
				}
			},
		},
	})
}

// given is what the fetches' and polls' given made.
type given struct{ updateOp string }

// TestFetchesAndPollsNameTheInstancesOfferingAndPlan: service_id and
// plan_id are optional there; sent, they are the instance's, or what the
// binding or operation read recorded (the plan before an update, as the
// spec has platforms send while polling it). An id in no catalog is not
// compared.
func TestFetchesAndPollsNameTheInstancesOfferingAndPlan(t *testing.T) {
	// moved: i-1 on plan-sync with binding b-1, then updated to
	// plan-async-only.
	moved := func(h *harness) given {
		h.ready("i-1", planSync)
		h.bound("i-1", "b-1", planSync)
		res, err := h.b.Update(ctx, updateOf("i-1", planAsyncOnly, true, ""))
		if err != nil {
			h.t.Fatal(err)
		}
		h.task("i-1", res.Operation)
		return given{updateOp: res.Operation}
	}
	// named is what the 400 names of the request; empty: answered.
	cases := []struct {
		name          string
		service, plan string
		fetch         func(h *harness, g given, service, plan string) error
		named         string
	}{
		{"a fetch of the instance naming its plan is answered", serviceID, planAsyncOnly, fetchInstance, ""},
		{"a fetch of the instance naming nothing is answered", "", "", fetchInstance, ""},
		{"a fetch of the instance naming the plan it had before is 400", serviceID, planSync, fetchInstance, planSync},
		{"a fetch of the instance naming another offering is 400", otherService, "", fetchInstance, otherService},
		{"a fetch of the instance naming ids in no catalog is answered as it always was", "no-service", "no-plan", fetchInstance, ""},
		{"a fetch of the binding naming the plan it was made under is answered", serviceID, planSync, fetchBinding, ""},
		{"a fetch of the binding naming its instance's plan now is answered", serviceID, planAsyncOnly, fetchBinding, ""},
		{"a fetch of the binding naming another plan is 400", serviceID, planLarge, fetchBinding, planLarge},
		{"a fetch of the binding naming another offering and its plan is 400", otherService, planOther, fetchBinding, otherService},
		{"a poll of a plan change naming the plan before it is answered", serviceID, planSync, pollUpdate, ""},
		{"a poll of a plan change naming the plan it moved to is answered", serviceID, planAsyncOnly, pollUpdate, ""},
		{"a poll of a plan change naming another plan is 400", serviceID, planLarge, pollUpdate, planLarge},
		{"a poll of a plan change naming another offering is 400", otherService, "", pollUpdate, otherService},
		{"a poll of a bind made before a plan change naming the instance's plan now is answered", serviceID, planAsyncOnly, pollBind, ""},
		{"a poll of a bind naming another plan is 400", serviceID, planLarge, pollBind, planLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			g := moved(h)
			h.mark()
			err := c.fetch(h, g, c.service, c.plan)
			if c.named == "" {
				if err != nil {
					t.Fatalf("answered %v", err)
				}
				return
			}
			// The instance is on plan-async-only now.
			wantMismatch(t, h, err, planAsyncOnly, c.named)
		})
	}
}

func fetchInstance(h *harness, _ given, service, plan string) error {
	_, err := h.b.FetchInstance(ctx, broker.FetchInstanceDetails{InstanceID: "i-1", ServiceID: service, PlanID: plan})
	return err
}

func fetchBinding(h *harness, _ given, service, plan string) error {
	_, err := h.b.FetchBinding(ctx, broker.FetchBindingDetails{InstanceID: "i-1", BindingID: "b-1", ServiceID: service, PlanID: plan})
	return err
}

func pollUpdate(h *harness, g given, service, plan string) error {
	_, err := h.b.LastOperation(ctx, broker.LastOperationDetails{InstanceID: "i-1", OperationID: g.updateOp, ServiceID: service, PlanID: plan})
	return err
}

func pollBind(h *harness, _ given, service, plan string) error {
	_, err := h.b.LastBindingOperation(ctx, broker.LastOperationDetails{InstanceID: "i-1", BindingID: "b-1", ServiceID: service, PlanID: plan})
	return err
}
