package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// base is the time the fixtures start at: UTC, with nanoseconds, so that a
// store losing precision or zone fails the round trips.
var base = time.Date(2025, time.March, 1, 12, 0, 0, 123456789, time.UTC)

func at(seconds int) time.Time { return base.Add(time.Duration(seconds) * time.Second) }

// newInstance is a provisioning instance held by its provision op, with
// every field set.
func newInstance(id, op string) broker.Instance {
	return broker.Instance{
		ID: id, InstanceRequest: broker.InstanceRequest{ServiceID: "svc-1", PlanID: "plan-small", OrganizationGUID: "org-1", SpaceGUID: "space-1", Parameters: json.RawMessage(`{"size":3,"tags":["a","b"]}`), Context: json.RawMessage(`{"platform":"cloudfoundry","space_name":"dev"}`), MaintenanceInfo: &broker.MaintenanceInfo{Version: "1.2.0", Description: "first"}}, DashboardURL: "https://dashboard.example.com/" + id,
		Metadata: broker.InstanceMetadata{
			Labels:     map[string]any{"team": "blue"},
			Attributes: map[string]any{"weight": 1.5, "nested": map[string]any{"on": true}},
		},
		State:       broker.InstanceProvisioning,
		Op:          op,
		LastOp:      op,
		Fingerprint: "fp-" + id,
		Version:     1,
		CreatedAt:   at(0),
		UpdatedAt:   at(0),
	}
}

// newOperation is an operation in progress created at the given time.
func newOperation(instanceID, id string, kind broker.OperationKind, created time.Time) broker.Operation {
	return broker.Operation{
		ID:          id,
		InstanceID:  instanceID,
		Kind:        kind,
		State:       broker.OperationInProgress,
		Fingerprint: "fp-" + id,
		Async:       true,
		PlanID:      "plan-small",
		RetryAfter:  5 * time.Second,
		CreatedAt:   created,
		UpdatedAt:   created,
		NextCheckAt: created.Add(30 * time.Second),
	}
}

func newBindingOperation(instanceID, bindingID, id string, kind broker.OperationKind, created time.Time) broker.Operation {
	op := newOperation(instanceID, id, kind, created)
	op.BindingID = bindingID
	return op
}

// newBinding is a creating binding held by its bind op, with every field set.
func newBinding(instanceID, id, op string) broker.Binding {
	return broker.Binding{
		InstanceID: instanceID,
		ID:         id,
		BindingRequest: broker.BindingRequest{
			ServiceID:    "svc-1",
			PlanID:       "plan-small",
			AppGUID:      "app-1",
			BindResource: json.RawMessage(`{"app_guid":"app-1"}`),
			Parameters:   json.RawMessage(`{"role":"reader"}`),
			Context:      json.RawMessage(`{"platform":"cloudfoundry"}`),
		},
		State:       broker.BindingCreating,
		Op:          op,
		LastOp:      op,
		Fingerprint: "fp-" + id,
		Version:     1,
		CreatedAt:   at(10),
		UpdatedAt:   at(10),
	}
}

// newResource is a driver's resource record.
func newResource(instanceID, name string) broker.Resource {
	return broker.Resource{
		InstanceID: instanceID,
		Name:       name,
		Data:       json.RawMessage(`{"arn":"arn:aws:demo:` + instanceID + `/` + name + `","size":3}`),
		UpdatedAt:  at(5),
	}
}

// newDetached is resource r detached by operation opID, pending, with every
// field set but Failure.
func newDetached(r broker.Resource, opID string) broker.Detached {
	return broker.Detached{
		ID:          broker.DetachedID(r.InstanceID, r.Name, opID),
		InstanceID:  r.InstanceID,
		Name:        r.Name,
		Data:        r.Data,
		PlanID:      "plan-small",
		OperationID: opID,
		Reason:      "the provision failed",
		State:       broker.DetachedPending,
		CreatedAt:   at(30),
		UpdatedAt:   at(30),
	}
}

// putResource stores a resource record through the port.
func putResource(t *testing.T, s broker.Store, r broker.Resource) {
	t.Helper()
	must(t, s.PutResource(t.Context(), r), "PutResource "+r.InstanceID+"/"+r.Name)
}

// Detach stores resource r and detaches it as d, the way a failed
// operation does (Finish.Detach): an update of r's instance, or, when the
// instance does not exist, a provision that deletes it again, fails and
// detaches d. The failed operation ("detach-<d.ID>") never expires, so it
// changes no count of expired operations.
func Detach(t *testing.T, s broker.Store, r broker.Resource, d broker.Detached) {
	t.Helper()
	putResource(t, s, r)
	fin := broker.Finish{Detach: []broker.Detached{d}}
	if inst := getInstance(t, s, r.InstanceID); inst != nil {
		fin.Op = newOperation(inst.ID, "detach-"+d.ID, broker.KindUpdate, at(100))
		held := *inst
		held.State, held.Op, held.LastOp, held.Version = broker.InstanceUpdating, fin.Op.ID, fin.Op.ID, inst.Version+1
		must(t, s.LockInstance(t.Context(), broker.LockInstance{Instance: held, Version: inst.Version, Op: fin.Op}),
			"LockInstance "+inst.ID+" to detach "+d.ID)
		held.State, held.Op = broker.InstanceReady, ""
		fin.Instance = &held
	} else {
		fin.Op = newOperation(r.InstanceID, "detach-"+d.ID, broker.KindProvision, at(100))
		must(t, s.CreateInstance(t.Context(), newInstance(r.InstanceID, fin.Op.ID), fin.Op, nil),
			"CreateInstance "+r.InstanceID+" to detach "+d.ID)
		fin.DeleteInstance = true
	}
	fin.Op = finished(fin.Op, broker.OperationFailed)
	fin.Op.ExpiresAt = time.Time{}
	must(t, s.FinishOperation(t.Context(), fin), "FinishOperation detaching "+d.ID)
}

// finished is op finished in state.
func finished(op broker.Operation, state broker.OperationState) broker.Operation {
	op.State, op.Description = state, "The "+string(op.Kind)+" is "+string(state)+"."
	op.RetryAfter = 0
	op.UpdatedAt = op.CreatedAt.Add(time.Minute)
	op.FinishedAt = op.UpdatedAt
	op.ExpiresAt = op.FinishedAt.Add(broker.Retention)
	return op
}

// The helpers below drive a store through the port into a known state and
// return the items as they are then stored.

// startProvision creates instance id held by provision "prov-<id>".
func startProvision(t *testing.T, s broker.Store, id string) (broker.Instance, broker.Operation) {
	t.Helper()
	return startProvisionOf(t, s, newInstance(id, "prov-"+id))
}

// startProvisionOf creates inst (newInstance's) held by its provision.
func startProvisionOf(t *testing.T, s broker.Store, inst broker.Instance) (broker.Instance, broker.Operation) {
	t.Helper()
	op := newOperation(inst.ID, inst.Op, broker.KindProvision, at(0))
	must(t, s.CreateInstance(t.Context(), inst, op, nil), "CreateInstance "+inst.ID)
	return *getInstance(t, s, inst.ID), op
}

// provision creates instance id, ready and idle.
func provision(t *testing.T, s broker.Store, id string) broker.Instance {
	t.Helper()
	return provisionOf(t, s, newInstance(id, "prov-"+id))
}

// provisionOf creates inst (newInstance's), ready and idle.
func provisionOf(t *testing.T, s broker.Store, inst broker.Instance) broker.Instance {
	t.Helper()
	id := inst.ID
	inst, op := startProvisionOf(t, s, inst)
	inst.State, inst.Op, inst.Version, inst.UpdatedAt = broker.InstanceReady, "", inst.Version+1, at(1)
	must(t, s.FinishOperation(t.Context(), broker.Finish{Op: finished(op, broker.OperationSucceeded), Instance: &inst}),
		"FinishOperation provision "+id)
	return *getInstance(t, s, id)
}

// failProvision creates instance id, failed and idle.
func failProvision(t *testing.T, s broker.Store, id string) broker.Instance {
	t.Helper()
	inst, op := startProvision(t, s, id)
	inst.State, inst.Op, inst.Version = broker.InstanceFailed, "", inst.Version+1
	must(t, s.FinishOperation(t.Context(), broker.Finish{Op: finished(op, broker.OperationFailed), Instance: &inst}),
		"FinishOperation failed provision "+id)
	return *getInstance(t, s, id)
}

// startInstanceOp locks idle instance inst for an update or deprovision
// "<kind>-<id>".
func startInstanceOp(t *testing.T, s broker.Store, inst broker.Instance, kind broker.OperationKind) (broker.Instance, broker.Operation) {
	t.Helper()
	op := newOperation(inst.ID, string(kind)+"-"+inst.ID, kind, at(100))
	next := inst
	next.State, next.Op, next.LastOp, next.Version, next.UpdatedAt = broker.InstanceUpdating, op.ID, op.ID, inst.Version+1, at(100)
	if kind == broker.KindDeprovision {
		next.State = broker.InstanceDeprovisioning
	}
	must(t, s.LockInstance(t.Context(), broker.LockInstance{Instance: next, Version: inst.Version, Op: op}),
		"LockInstance "+inst.ID)
	return *getInstance(t, s, inst.ID), op
}

// startBind creates binding id of ready instance instanceID, held by bind
// "bind-<id>".
func startBind(t *testing.T, s broker.Store, instanceID, id string) (broker.Binding, broker.Operation) {
	t.Helper()
	op := newBindingOperation(instanceID, id, "bind-"+id, broker.KindBind, at(10))
	must(t, s.CreateBinding(t.Context(), newBinding(instanceID, id, op.ID), op, nil), "CreateBinding "+id)
	return *getBinding(t, s, instanceID, id), op
}

// bind creates binding id, ready and idle.
func bind(t *testing.T, s broker.Store, instanceID, id string) broker.Binding {
	t.Helper()
	b, op := startBind(t, s, instanceID, id)
	b.State, b.Op, b.Version, b.UpdatedAt = broker.BindingReady, "", b.Version+1, at(11)
	b.Credentials = broker.Credentials{"user": "u-" + id, "password": "secret"}
	must(t, s.FinishOperation(t.Context(), broker.Finish{
		Op: finished(op, broker.OperationSucceeded), Binding: &b, ReleaseBinding: true,
	}), "FinishOperation bind "+id)
	return *getBinding(t, s, instanceID, id)
}

// unbindLock is the LockBinding that starts unbind "unbind-<id>" of b.
func unbindLock(b broker.Binding) broker.LockBinding {
	op := newBindingOperation(b.InstanceID, b.ID, "unbind-"+b.ID, broker.KindUnbind, at(20))
	next := b
	next.State, next.Op, next.LastOp, next.Version, next.UpdatedAt = broker.BindingDeleting, op.ID, op.ID, b.Version+1, at(20)
	return broker.LockBinding{Binding: next, Version: b.Version, Holder: b.Op, Op: op}
}

// startUnbind locks idle binding b for an unbind.
func startUnbind(t *testing.T, s broker.Store, b broker.Binding) (broker.Binding, broker.Operation) {
	t.Helper()
	l := unbindLock(b)
	must(t, s.LockBinding(t.Context(), l), "LockBinding "+b.ID)
	return *getBinding(t, s, b.InstanceID, b.ID), l.Op
}
