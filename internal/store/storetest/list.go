package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

var listCases = []testCase{
	{"ListOperations returns an instance's operations and its bindings', oldest first", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		// The creation times order the operations differently from their
		// ids and from the order they are written in; ties go by id.
		provision(t, s, "i-1")
		createBinding := func(bindingID, opID string, created time.Time) broker.Operation {
			op := newBindingOperation("i-1", bindingID, opID, broker.KindBind, created)
			must(t, s.CreateBinding(t.Context(), newBinding("i-1", bindingID, opID), op, nil), "CreateBinding "+bindingID)
			return op
		}
		bindZ := createBinding("b-1", "bind-z", at(10))
		bindA := createBinding("b-2", "bind-a", at(10))
		bindM := createBinding("b-3", "bind-m", at(10).Add(time.Nanosecond))
		l := unbindLock(*getBinding(t, s, "i-1", "b-1"))
		l.Op.ID, l.Op.CreatedAt = "unbind-1", at(3)
		l.Binding.Op = l.Op.ID
		halted := finished(bindZ, broker.OperationFailed)
		l.Halted = &halted
		must(t, s.LockBinding(t.Context(), l), "LockBinding")
		// Instances whose ids extend or prefix "i-1" keep their own.
		lookalikes := []string{"i-10", "i-", "i-1op#z"}
		for _, id := range lookalikes {
			provision(t, s, id)
		}

		ops, err := s.ListOperations(t.Context(), "i-1")
		must(t, err, "ListOperations")
		prov := getOperation(t, s, "i-1", "prov-i-1")
		equal(t, "operations", ops, []broker.Operation{*prov, l.Op, bindA, halted, bindM})
		for _, id := range lookalikes {
			ops, err := s.ListOperations(t.Context(), id)
			must(t, err, "ListOperations "+id)
			equal(t, "operations of "+id, ids(ops), []string{"prov-" + id})
		}
	}},
	{"ListInProgress returns exactly the operations in progress, across instances", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		startProvision(t, s, "i-1")
		provision(t, s, "i-2")
		bind(t, s, "i-2", "b-1")
		_, bindOp := startBind(t, s, "i-2", "b-2")
		_, upd := startInstanceOp(t, s, provision(t, s, "i-3"), broker.KindUpdate)
		inst, halted := startProvision(t, s, "i-4")
		dep := newOperation("i-4", "dep-i-4", broker.KindDeprovision, at(5))
		next := inst
		next.State, next.Op, next.Version = broker.InstanceDeprovisioning, dep.ID, inst.Version+1
		haltedDone := finished(halted, broker.OperationFailed)
		must(t, s.LockInstance(t.Context(), broker.LockInstance{
			Instance: next, Version: inst.Version, Holder: halted.ID, Op: dep, Halted: &haltedDone,
		}), "LockInstance")

		ops, err := s.ListInProgress(t.Context())
		must(t, err, "ListInProgress")
		slices.SortFunc(ops, func(a, b broker.Operation) int { return strings.Compare(a.ID, b.ID) })
		prov := getOperation(t, s, "i-1", "prov-i-1")
		equal(t, "operations in progress", ops, []broker.Operation{bindOp, dep, *prov, upd})

		b := *getBinding(t, s, "i-2", "b-2")
		b.State, b.Op = broker.BindingReady, ""
		must(t, s.FinishOperation(t.Context(), broker.Finish{
			Op: finished(bindOp, broker.OperationSucceeded), Binding: &b, ReleaseBinding: true,
		}), "FinishOperation")
		must(t, s.FinishOperation(t.Context(), broker.Finish{Op: finished(dep, broker.OperationSucceeded), DeleteInstance: true}),
			"FinishOperation")
		equal(t, "operations in progress after two finished", inProgressIDs(t, s), []string{"prov-i-1", upd.ID})
	}},
	{"ListInstances lists every instance once, a page at a time, without its parameters or fingerprint", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		// More than a page, in an order that is not that of the ids, and
		// beside partitions that hold no instance: a deprovisioned
		// instance's operations, a record alone.
		want := map[string]broker.Instance{}
		n := broker.InstancePageSize + 3
		for i := range n {
			id := fmt.Sprintf("i-%03d", (i*37)%n)
			inst := newInstance(id, "")
			inst.State, inst.Version = broker.InstanceReady, 1
			must(t, s.CreateInstance(t.Context(), inst, finished(newOperation(id, "prov-"+id, broker.KindProvision, at(0)), broker.OperationSucceeded), &broker.Settled{}), "CreateInstance "+id)
			inst.Parameters, inst.Fingerprint = nil, ""
			want[id] = inst
		}
		held, _ := startProvision(t, s, "i-held")
		held.Parameters, held.Fingerprint = nil, ""
		want[held.ID] = held
		gone, dep := startInstanceOp(t, s, provision(t, s, "i-gone"), broker.KindDeprovision)
		must(t, s.FinishOperation(t.Context(), broker.Finish{Op: finished(dep, broker.OperationSucceeded), DeleteInstance: true}), "FinishOperation "+gone.ID)
		putResource(t, s, newResource("i-record-only", "r-1"))

		got := map[string]broker.Instance{}
		page, pages := "", 0
		for {
			list, next, err := s.ListInstances(t.Context(), broker.InstanceFilter{}, page)
			must(t, err, fmt.Sprintf("ListInstances page %d", pages))
			pages++
			if len(list) > broker.InstancePageSize || (next != "" && len(list) != broker.InstancePageSize) {
				t.Fatalf("page %d holds %d instances, next %q: want %d, or up to %d on the last page", pages, len(list), next, broker.InstancePageSize, broker.InstancePageSize)
			}
			for _, inst := range list {
				if _, twice := got[inst.ID]; twice {
					t.Errorf("instance %s listed twice", inst.ID)
				}
				got[inst.ID] = inst
			}
			if page = next; page == "" || pages > 3 {
				break
			}
		}
		if pages < 2 {
			t.Errorf("listed %d instances in %d page: want more than one page", len(got), pages)
		}
		equal(t, "instances listed", got, want)
	}},
	{"ListInstances lists only the instances of the service and plan asked for", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		for _, c := range []struct{ id, service, plan string }{
			{"i-1", "svc-1", "plan-small"}, {"i-2", "svc-1", "plan-large"}, {"i-3", "svc-2", "plan-small"}, {"i-4", "svc-1", "plan-small"},
		} {
			inst := newInstance(c.id, "")
			inst.ServiceID, inst.PlanID, inst.State = c.service, c.plan, broker.InstanceReady
			must(t, s.CreateInstance(t.Context(), inst, finished(newOperation(c.id, "prov-"+c.id, broker.KindProvision, at(0)), broker.OperationSucceeded), &broker.Settled{}), "CreateInstance "+c.id)
		}
		for _, c := range []struct {
			f    broker.InstanceFilter
			want []string
		}{
			{broker.InstanceFilter{}, []string{"i-1", "i-2", "i-3", "i-4"}},
			{broker.InstanceFilter{ServiceID: "svc-1"}, []string{"i-1", "i-2", "i-4"}},
			{broker.InstanceFilter{PlanID: "plan-small"}, []string{"i-1", "i-3", "i-4"}},
			{broker.InstanceFilter{ServiceID: "svc-1", PlanID: "plan-small"}, []string{"i-1", "i-4"}},
			{broker.InstanceFilter{ServiceID: "svc-9"}, []string{}},
		} {
			list, next, err := s.ListInstances(t.Context(), c.f, "")
			must(t, err, "ListInstances")
			got := []string{}
			for _, inst := range list {
				got = append(got, inst.ID)
			}
			slices.Sort(got)
			equal(t, fmt.Sprintf("instances of %+v", c.f), got, c.want)
			equal(t, "next page", next, "")
		}
		if _, _, err := s.ListInstances(t.Context(), broker.InstanceFilter{}, "not a token!"); !errors.Is(err, broker.ErrBadPage) {
			t.Errorf("ListInstances of a page token it never gave: got %v, want %v", err, broker.ErrBadPage)
		}
	}},
	{"ListInstances of a plan pages through its instances only, and follows an instance that moves to another plan or goes", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		// More than a page of the plan, beside instances of another plan
		// with bindings and operations of their own.
		want := map[string]bool{}
		for i := range broker.InstancePageSize + 2 {
			id := fmt.Sprintf("i-%03d", i)
			inst := newInstance(id, "")
			inst.PlanID, inst.State, inst.Version = "plan-large", broker.InstanceReady, 1
			must(t, s.CreateInstance(t.Context(), inst, finished(newOperation(id, "prov-"+id, broker.KindProvision, at(0)), broker.OperationSucceeded), &broker.Settled{}), "CreateInstance "+id)
			want[id] = true
		}
		for i := range 3 {
			id := fmt.Sprintf("other-%d", i)
			provision(t, s, id)
			bind(t, s, id, "b-"+id)
		}
		// One moves to plan-large, one leaves it, one is deprovisioned.
		moved, up := startInstanceOp(t, s, *getInstance(t, s, "other-0"), broker.KindUpdate)
		moved.PlanID, moved.State, moved.Op, moved.Version = "plan-large", broker.InstanceReady, "", moved.Version+1
		must(t, s.FinishOperation(t.Context(), broker.Finish{Op: finished(up, broker.OperationSucceeded), Instance: &moved}), "move other-0")
		want["other-0"] = true
		left, up := startInstanceOp(t, s, *getInstance(t, s, "i-001"), broker.KindUpdate)
		left.PlanID, left.State, left.Op, left.Version = "plan-small", broker.InstanceReady, "", left.Version+1
		must(t, s.FinishOperation(t.Context(), broker.Finish{Op: finished(up, broker.OperationSucceeded), Instance: &left}), "move i-001")
		delete(want, "i-001")
		_, dep := startInstanceOp(t, s, *getInstance(t, s, "i-002"), broker.KindDeprovision)
		must(t, s.FinishOperation(t.Context(), broker.Finish{Op: finished(dep, broker.OperationSucceeded), DeleteInstance: true}), "deprovision i-002")
		delete(want, "i-002")

		got := map[string]bool{}
		page, pages := "", 0
		for {
			list, next, err := s.ListInstances(t.Context(), broker.InstanceFilter{PlanID: "plan-large"}, page)
			must(t, err, fmt.Sprintf("ListInstances page %d", pages))
			pages++
			for _, inst := range list {
				if got[inst.ID] {
					t.Errorf("instance %s listed twice", inst.ID)
				}
				if inst.PlanID != "plan-large" || inst.Parameters != nil || inst.Fingerprint != "" {
					t.Errorf("instance %s listed with plan %s, parameters %s, fingerprint %q", inst.ID, inst.PlanID, inst.Parameters, inst.Fingerprint)
				}
				got[inst.ID] = true
			}
			if page = next; page == "" || pages > 3 {
				break
			}
		}
		if pages < 2 {
			t.Errorf("listed %d instances in %d page: want more than one page", len(got), pages)
		}
		equal(t, "instances of plan-large", got, want)
		list, _, err := s.ListInstances(t.Context(), broker.InstanceFilter{PlanID: "plan-small"}, "")
		must(t, err, "ListInstances of plan-small")
		small := []string{}
		for _, inst := range list {
			small = append(small, inst.ID)
		}
		slices.Sort(small)
		equal(t, "instances of plan-small", small, []string{"i-001", "other-1", "other-2"})
	}},
}

var resourceCases = []testCase{
	{"PutResource stores a record and overwrites it", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		r := broker.Resource{InstanceID: "i-1", Name: "r-1", Data: json.RawMessage(`{"v":1}`), UpdatedAt: at(1)}
		must(t, s.PutResource(t.Context(), r), "PutResource")
		equal(t, "resource", getResource(t, s, "i-1", "r-1"), &r)
		r.Data, r.UpdatedAt = json.RawMessage(`{"v":2}`), at(2)
		must(t, s.PutResource(t.Context(), r), "PutResource again")
		equal(t, "overwritten resource", getResource(t, s, "i-1", "r-1"), &r)
	}},
	{"DeleteResource removes a record and ignores a missing one", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		r := broker.Resource{InstanceID: "i-1", Name: "r-1", Data: json.RawMessage(`{}`)}
		must(t, s.PutResource(t.Context(), r), "PutResource")
		must(t, s.DeleteResource(t.Context(), "i-1", "r-1"), "DeleteResource")
		if getResource(t, s, "i-1", "r-1") != nil {
			t.Error("the resource is still stored")
		}
		must(t, s.DeleteResource(t.Context(), "i-1", "r-1"), "DeleteResource of a missing record")
		must(t, s.DeleteResource(t.Context(), "i-9", "r-9"), "DeleteResource under a missing instance")
	}},
	{"Load returns exactly an instance's resource records, by name", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		if rs := records(t, s, "i-1"); len(rs) != 0 {
			t.Fatalf("empty store: got %s, want none", show(rs))
		}
		// The instance's own instance, binding and operation records are
		// not resources, and neither is a resource once detached.
		provision(t, s, "i-1")
		bind(t, s, "i-1", "b-1")
		byName := map[string]broker.Resource{}
		for _, name := range []string{"r-b", "r", "r-a", "db/main", "r-10"} {
			byName[name] = newResource("i-1", name)
			putResource(t, s, byName[name])
		}
		gone := newResource("i-1", "r-gone")
		Detach(t, s, gone, newDetached(gone, "prov-i-1"))
		// Instances whose ids extend or prefix "i-1" keep their own.
		lookalikes := []string{"i-10", "i-", "i-1r#x"}
		for _, id := range lookalikes {
			putResource(t, s, newResource(id, "r-1"))
		}

		equal(t, "resources", records(t, s, "i-1"), []broker.Resource{byName["db/main"], byName["r"], byName["r-10"], byName["r-a"], byName["r-b"]})
		for _, id := range lookalikes {
			equal(t, "resources of "+id, records(t, s, id), []broker.Resource{newResource(id, "r-1")})
		}
	}},
	{"resources are kept apart by instance and name", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		var all []broker.Resource
		for _, key := range [][2]string{{"i-1", "r-1"}, {"i-1", "r-10"}, {"i-10", "r-1"}, {"i-1", "r"}} {
			r := broker.Resource{InstanceID: key[0], Name: key[1], Data: json.RawMessage(`"` + key[0] + "/" + key[1] + `"`)}
			must(t, s.PutResource(t.Context(), r), "PutResource")
			all = append(all, r)
		}
		must(t, s.DeleteResource(t.Context(), "i-1", "r-1"), "DeleteResource")
		if getResource(t, s, "i-1", "r-1") != nil {
			t.Error("i-1/r-1 is still stored")
		}
		for _, r := range all[1:] {
			equal(t, "resource "+r.InstanceID+"/"+r.Name, getResource(t, s, r.InstanceID, r.Name), &r)
		}
	}},
}
