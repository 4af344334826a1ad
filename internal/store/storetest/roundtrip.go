package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

var readCases = []testCase{
	{"a missing item is reported as ErrNotFound", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		provision(t, s, "i-1")
		must(t, s.PutResource(t.Context(), broker.Resource{InstanceID: "i-1", Name: "r-1", Data: json.RawMessage(`{}`)}), "PutResource")
		gets := []struct {
			name string
			get  func() error
		}{
			{"instance", func() error { _, err := s.GetInstance(t.Context(), "i-2"); return err }},
			{"binding of an existing instance", func() error { _, err := s.GetBinding(t.Context(), "i-1", "b-1"); return err }},
			{"binding of a missing instance", func() error { _, err := s.GetBinding(t.Context(), "i-2", "b-1"); return err }},
			{"operation", func() error { _, err := s.GetOperation(t.Context(), "i-1", "nope"); return err }},
			{"operation under another instance", func() error { _, err := s.GetOperation(t.Context(), "i-2", "prov-i-1"); return err }},
		}
		for _, g := range gets {
			if err := g.get(); !errors.Is(err, broker.ErrNotFound) {
				t.Errorf("get %s: got %v, want broker.ErrNotFound", g.name, err)
			}
		}
	}},
	{"an empty store lists no operations", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		ops, err := s.ListOperations(t.Context(), "i-1")
		must(t, err, "ListOperations")
		if len(ops) != 0 {
			t.Errorf("ListOperations: got %s, want none", show(ops))
		}
		ops, err = s.ListInProgress(t.Context())
		must(t, err, "ListInProgress")
		if len(ops) != 0 {
			t.Errorf("ListInProgress: got %s, want none", show(ops))
		}
	}},
}

var roundTripCases = []testCase{
	{"every field of a provision request that the instance keeps comes back", func(t *testing.T, newStore NewStore) {
		// A field added to broker.InstanceRequest reaches every store's
		// instance record, or this fails naming it: each store has storage
		// types of its own, which name every field.
		s := newStore(t)
		everyField(t, "instance", broker.InstanceRequest{}, func(t *testing.T, name string, r broker.InstanceRequest) broker.InstanceRequest {
			id := "i-" + name
			op := newOperation(id, "prov-"+id, broker.KindProvision, at(0))
			inst := broker.Instance{ID: id, InstanceRequest: r, State: broker.InstanceProvisioning, Op: op.ID, LastOp: op.ID, CreatedAt: at(0), UpdatedAt: at(0)}
			must(t, s.CreateInstance(t.Context(), inst, op, nil), "CreateInstance")
			got := getInstance(t, s, id)
			if got == nil {
				t.Fatal("the instance is not stored")
			}
			return got.InstanceRequest
		})
	}},
	{"every field of a bind request that the binding keeps comes back", func(t *testing.T, newStore NewStore) {
		// The same for broker.BindingRequest and each store's binding
		// record. Each field's binding is of an instance of its own, of the
		// service and plan the binding names, as CreateBinding requires.
		s := newStore(t)
		base := newBinding("", "", "").BindingRequest
		everyField(t, "binding", base, func(t *testing.T, name string, r broker.BindingRequest) broker.BindingRequest {
			id := "i-" + name
			inst := newInstance(id, "prov-"+id)
			inst.ServiceID, inst.PlanID = r.ServiceID, r.PlanID
			provisionOf(t, s, inst)
			op := newBindingOperation(id, "b-1", "bind-"+id, broker.KindBind, at(10))
			b := newBinding(id, "b-1", op.ID)
			b.BindingRequest = r
			must(t, s.CreateBinding(t.Context(), b, op, nil), "CreateBinding")
			got := getBinding(t, s, id, "b-1")
			if got == nil {
				t.Fatal("the binding is not stored")
			}
			return got.BindingRequest
		})
	}},
	{"the largest request the API accepts fits in an instance and in an update operation", func(t *testing.T, newStore NewStore) {
		// A body of broker.MaxRequestBytes spent on parameters and context:
		// every store must keep it (DynamoDB refuses items over 400 KB).
		s := newStore(t)
		half := broker.MaxRequestBytes / 2
		params := json.RawMessage(`{"blob":"` + strings.Repeat("p", half-20) + `"}`)
		ctxt := json.RawMessage(`{"blob":"` + strings.Repeat("c", half-20) + `"}`)
		op := newOperation("i-1", "prov-i-1", broker.KindProvision, at(0))
		inst := newInstance("i-1", op.ID)
		inst.Parameters, inst.Context = params, ctxt
		must(t, s.CreateInstance(t.Context(), inst, op, nil), "CreateInstance")
		equal(t, "instance", getInstance(t, s, "i-1"), &inst)
		ready := *getInstance(t, s, "i-1")
		ready.State, ready.Op, ready.Version = broker.InstanceReady, "", ready.Version+1
		must(t, s.FinishOperation(t.Context(), broker.Finish{Op: finished(op, broker.OperationSucceeded), Instance: &ready}), "FinishOperation")
		upd := newOperation("i-1", "upd-i-1", broker.KindUpdate, at(2))
		upd.Target = &broker.Target{Parameters: params, Context: ctxt}
		locked := *getInstance(t, s, "i-1")
		locked.State, locked.Op, locked.Version = broker.InstanceUpdating, upd.ID, locked.Version+1
		must(t, s.LockInstance(t.Context(), broker.LockInstance{Instance: locked, Version: locked.Version - 1, Op: upd}), "LockInstance")
		got, err := s.GetOperation(t.Context(), "i-1", upd.ID)
		must(t, err, "GetOperation")
		equal(t, "update operation", &got, &upd)
	}},
	{"an instance round-trips exactly", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		op := newOperation("i-1", "prov-i-1", broker.KindProvision, at(0))
		inst := newInstance("i-1", op.ID)
		inst.Metadata.Labels["list"] = []any{"x", 2.0, nil, false}
		must(t, s.CreateInstance(t.Context(), inst, op, nil), "CreateInstance")
		equal(t, "instance", getInstance(t, s, "i-1"), &inst)
	}},
	{"an instance with only required fields round-trips exactly", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		op := newOperation("i-1", "prov-i-1", broker.KindProvision, at(0))
		inst := broker.Instance{ID: "i-1", InstanceRequest: broker.InstanceRequest{ServiceID: "svc-1", PlanID: "plan-small"}, State: broker.InstanceProvisioning, Op: op.ID}
		must(t, s.CreateInstance(t.Context(), inst, op, nil), "CreateInstance")
		equal(t, "instance", getInstance(t, s, "i-1"), &inst)
	}},
	{"a binding with credentials and endpoints round-trips exactly", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		provision(t, s, "i-1")
		op := newBindingOperation("i-1", "b-1", "bind-b-1", broker.KindBind, at(10))
		b := newBinding("i-1", "b-1", op.ID)
		b.Credentials = broker.Credentials{
			"uri":      "postgres://u:p@db.example.com:5432/x?sslmode=require&a=<b>",
			"port":     5432.0,
			"tls":      true,
			"nothing":  nil,
			"hosts":    []any{"a", "b"},
			"settings": map[string]any{"pool": 10.0, "names": []any{"x"}},
		}
		b.Endpoints = []broker.Endpoint{
			{Host: "db.example.com", Ports: []string{"5432", "6000-6010"}, Protocol: "tcp"},
			{Host: "10.0.0.1", Ports: []string{}},
		}
		must(t, s.CreateBinding(t.Context(), b, op, nil), "CreateBinding")
		equal(t, "binding", getBinding(t, s, "i-1", "b-1"), &b)
		equal(t, "operation", getOperation(t, s, "i-1", op.ID), &op)
	}},
	{"an operation with every field set round-trips exactly", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		inst, _ := startProvision(t, s, "i-1")
		upd := newOperation("i-1", "upd-1", broker.KindUpdate, at(5))
		upd.Description = "Mise à jour ✓ <50%> & \"quoted\""
		upd.Async = false
		upd.Target = &broker.Target{
			PlanID:          "plan-large",
			Parameters:      json.RawMessage(`{"size":9}`),
			Context:         json.RawMessage(`{"platform":"kubernetes"}`),
			MaintenanceInfo: &broker.MaintenanceInfo{Version: "2.0.0"},
		}
		upd.RetryAfter = 1500 * time.Millisecond
		upd.InstanceUsable = broker.Bool(false)
		upd.UpdateRepeatable = broker.Bool(true)
		upd.OutageSince, upd.OutageAttempts, upd.OutageInBegin = at(6), 4, true
		upd.FinishedAt = at(7)
		upd.ExpiresAt = at(7).Add(broker.Retention)
		upd.State = broker.OperationFailed
		// A deprovision that halts the provision records both operations;
		// the halted one is the fully populated record under test.
		halted := upd
		halted.ID, halted.Kind = "prov-i-1", broker.KindProvision
		dep := newOperation("i-1", "dep-1", broker.KindDeprovision, at(6))
		next := inst
		next.State, next.Op, next.Version = broker.InstanceDeprovisioning, dep.ID, inst.Version+1
		must(t, s.LockInstance(t.Context(), broker.LockInstance{
			Instance: next, Version: inst.Version, Holder: inst.Op, Op: dep, Halted: &halted,
		}), "LockInstance")
		equal(t, "halted operation", getOperation(t, s, "i-1", "prov-i-1"), &halted)
		equal(t, "deprovision", getOperation(t, s, "i-1", "dep-1"), &dep)
	}},
	{"an unset flag stays unset and a false flag stays false", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		inst, op := startProvision(t, s, "i-1")
		inst.Op = ""
		done := finished(op, broker.OperationFailed)
		done.InstanceUsable, done.UpdateRepeatable = broker.Bool(false), nil
		must(t, s.FinishOperation(t.Context(), broker.Finish{Op: done, Instance: &inst}), "FinishOperation")
		got := getOperation(t, s, "i-1", op.ID)
		if got.InstanceUsable == nil || *got.InstanceUsable || got.UpdateRepeatable != nil {
			t.Errorf("flags: got instance_usable %s, update_repeatable %s; want false and unset",
				show(got.InstanceUsable), show(got.UpdateRepeatable))
		}
	}},
	{"a resource round-trips exactly", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		r := broker.Resource{InstanceID: "i-1", Name: "db/main", Data: json.RawMessage(`{"arn":"arn:aws:x","n":[1,2.5e10]}`), UpdatedAt: at(3)}
		must(t, s.PutResource(t.Context(), r), "PutResource")
		equal(t, "resource", getResource(t, s, "i-1", "db/main"), &r)
	}},
	{"times come back as the same instant in UTC", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		zone := time.FixedZone("UTC+5:30", 5*3600+1800)
		local := time.Now().In(zone) // with a monotonic reading, which no store keeps
		op := newOperation("i-1", "prov-i-1", broker.KindProvision, local)
		op.NextCheckAt = local.Add(time.Second)
		inst := newInstance("i-1", op.ID)
		inst.CreatedAt, inst.UpdatedAt = local, local
		must(t, s.CreateInstance(t.Context(), inst, op, nil), "CreateInstance")
		gotInst, gotOp := getInstance(t, s, "i-1"), getOperation(t, s, "i-1", op.ID)
		times := []struct {
			name      string
			got, want time.Time
		}{
			{"instance created_at", gotInst.CreatedAt, inst.CreatedAt},
			{"instance updated_at", gotInst.UpdatedAt, inst.UpdatedAt},
			{"operation created_at", gotOp.CreatedAt, op.CreatedAt},
			{"operation next_check_at", gotOp.NextCheckAt, op.NextCheckAt},
		}
		for _, tm := range times {
			if !tm.got.Equal(tm.want) || tm.got.Location() != time.UTC {
				t.Errorf("%s: got %s, want %s in UTC", tm.name, tm.got, tm.want.UTC())
			}
		}
		if !gotOp.FinishedAt.IsZero() || !gotOp.ExpiresAt.IsZero() {
			t.Errorf("unset times: got finished_at %s, expires_at %s; want zero", gotOp.FinishedAt, gotOp.ExpiresAt)
		}
	}},
	{"raw JSON values come back byte for byte, or compacted", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		values := []struct{ name, json string }{
			{"object", `{"b":1,"a":{"c":[true,false,null]}}`},
			{"array", `[1,"two",3.5]`},
			{"string", `"text"`},
			{"null", `null`},
			{"number beyond float64 precision", `{"n":123456789012345678901234567890}`},
			{"HTML characters", `{"html":"<b>&amp;</b>"}`},
			{"non-ASCII and escapes", `{"s":"żółw ☃ \u00e9 \n \u2028"}`},
			{"keys out of order and duplicated", `{"z":1,"a":2,"z":3}`},
			{"insignificant whitespace", "{ \"a\" : [ 1 ,\n\t2 ] }"},
		}
		for i, v := range values {
			id := "i-" + string(rune('a'+i))
			op := newOperation(id, "prov-"+id, broker.KindProvision, at(0))
			inst := newInstance(id, op.ID)
			inst.Parameters = json.RawMessage(v.json)
			must(t, s.CreateInstance(t.Context(), inst, op, nil), "CreateInstance "+v.name)
			got := getInstance(t, s, id).Parameters
			var compact bytes.Buffer
			must(t, json.Compact(&compact, []byte(v.json)), "json.Compact")
			if !bytes.Equal(got, []byte(v.json)) && !bytes.Equal(got, compact.Bytes()) {
				t.Errorf("%s: got %s, want %s", v.name, got, v.json)
			}
		}
	}},
}

// everyField checks, for each field of the request type R, that the store
// keeps it: keep stores a record whose R is base with that field set, and
// returns the R read back. A field of a type it cannot fill fails, naming
// the field.
func everyField[R any](t *testing.T, record string, base R, keep func(t *testing.T, name string, r R) R) {
	typ := reflect.TypeFor[R]()
	for _, f := range reflect.VisibleFields(typ) {
		t.Run(f.Name, func(t *testing.T) {
			r := base
			v := reflect.ValueOf(&r).Elem().FieldByIndex(f.Index)
			switch v.Interface().(type) {
			case string:
				v.SetString(f.Name + "-value")
			case json.RawMessage:
				v.Set(reflect.ValueOf(json.RawMessage(`{"` + f.Name + `":[1,"two"]}`)))
			case *broker.MaintenanceInfo:
				v.Set(reflect.ValueOf(&broker.MaintenanceInfo{Version: "9.9.9", Description: f.Name}))
			default:
				t.Fatalf("%s.%s is a %s, which storetest cannot fill yet: add a case here", typ.Name(), f.Name, f.Type)
			}
			got := keep(t, f.Name, r)
			if g := reflect.ValueOf(got).FieldByIndex(f.Index).Interface(); !reflect.DeepEqual(g, v.Interface()) {
				t.Errorf("%s.%s comes back as %s, not %s: the store's %s record does not keep it "+
					"(add it to the store's storage type and its conversions)", typ.Name(), f.Name, show(g), show(v.Interface()), record)
			}
		})
	}
}
