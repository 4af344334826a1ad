package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/api"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
)

// The contract tests guide whoever adds a field to an OSB request
// (provision, update, bind). A contract has a row for every field of the
// broker's details type: where the request carries it, what the details
// then hold, which field of the instance or binding keeps it, and which key
// of the GET answer returns it. The test fails, naming the field and the
// places to change,
//   - for a field of the details type without a row, a row that names no
//     field, and a key of the api's request body that reaches no field;
//   - when the api's decode does not put the sent value into the field;
//   - when the broker, after a real request (bolt store, local engine, demo
//     driver), does not keep it where the row says, or GET does not return it.
// Whether the field is part of the request's fingerprint (a re-sent
// request is told from a different one by it) is internal/broker's
// fingerprint_test.go's to check.

// Where a row's field travels besides the request body.
const (
	inInstancePath = "{instance_id}"
	inBindingPath  = "{binding_id}"
	inQuery        = "?accepts_incomplete"
)

// contractRow is one field of a details type.
type contractRow struct {
	field string // the details type's field
	in    string // inInstancePath, inBindingPath, inQuery, or the request body's key
	send  any    // the value the request sends there (a string in the path and query)
	want  any    // what the details field holds then
	kept  string // the field of the instance or binding that keeps it; "" if none does
	back  string // the key of the GET answer that returns it; "" if none does
}

// contract is the fields of one request.
type contract struct {
	name            string
	details         reflect.Type // the broker's details type
	body            reflect.Type // the api's request body
	method, pattern string       // the route
	decode          func(*http.Request) (any, error)
	// checkedOnly are keys of the body the api checks but hands to no field.
	checkedOnly map[string]string
	rows        []contractRow
	// before makes what the request needs (the instance it updates, say);
	// wantStatus is the request's answer (202: the test waits for the
	// operation to succeed).
	before     func(t *testing.T)
	wantStatus int
	// places says where a field of this request goes, besides the
	// fingerprint and this test.
	places string
}

func TestEveryOSBRequestFieldReachesTheBrokerAndComesBack(t *testing.T) {
	b := apptest.Start(t, "")
	for _, c := range contracts(b) {
		t.Run(c.name, func(t *testing.T) {
			c.checkRows(t)
			if t.Failed() {
				return
			}
			path, query, body := c.request()
			c.checkDecode(t, path+query, body)
			if t.Failed() {
				return
			}
			c.checkRoundTrip(t, b, path, query, body)
		})
	}
}

func contracts(b *apptest.Broker) []contract {
	service, plan := b.Plan("fake-plan")
	_, asyncPlan := b.Plan("fake-async-plan")
	const instanceID, updatedID, boundID = "contract-instance", "contract-updated", "contract-bound"
	const predecessorID, bindingID = "contract-predecessor", "contract-binding"
	// The plans' version, with a description of the test's own.
	miRow := contractRow{field: "MaintenanceInfo", in: "maintenance_info",
		send: map[string]any{"version": "1.0.0", "description": "As the contract test sends it."},
		want: &broker.MaintenanceInfo{Version: "1.0.0", Description: "As the contract test sends it."}, kept: "MaintenanceInfo", back: "maintenance_info"}
	asyncRow := contractRow{field: "AcceptsIncomplete", in: inQuery, send: "true", want: true}
	provision := func(t *testing.T, id string) {
		r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/" + id, Body: map[string]any{
			"service_id": service, "plan_id": plan, "organization_guid": "org", "space_guid": "space"}})
		if r.Status != http.StatusCreated {
			t.Fatalf("provision %s: %d %s", id, r.Status, r.Raw)
		}
	}
	return []contract{
		{
			name: "provision", details: reflect.TypeFor[broker.ProvisionDetails](), body: reflect.TypeFor[api.ProvisionBody](),
			method: http.MethodPut, pattern: "/v2/service_instances/{instance_id}",
			decode: func(r *http.Request) (any, error) { return api.DecodeProvision(r) },
			rows: []contractRow{
				{field: "InstanceID", in: inInstancePath, send: instanceID, want: instanceID, kept: "ID"},
				{field: "ServiceID", in: "service_id", send: service, want: service, kept: "ServiceID", back: "service_id"},
				{field: "PlanID", in: "plan_id", send: plan, want: plan, kept: "PlanID", back: "plan_id"},
				{field: "OrganizationGUID", in: "organization_guid", send: "contract-org", want: "contract-org", kept: "OrganizationGUID"},
				{field: "SpaceGUID", in: "space_guid", send: "contract-space", want: "contract-space", kept: "SpaceGUID"},
				{field: "Parameters", in: "parameters", send: map[string]any{"duration_seconds": 1},
					want: json.RawMessage(`{"duration_seconds":1}`), kept: "Parameters", back: "parameters"},
				{field: "Context", in: "context", send: map[string]any{"platform": "cloudfoundry", "instance_name": "contract"},
					want: json.RawMessage(`{"platform":"cloudfoundry","instance_name":"contract"}`), kept: "Context"},
				miRow, asyncRow,
			},
			wantStatus: http.StatusCreated,
			places: `- the request: provisionBody and decodeProvision, internal/api/instances.go
- the details: broker.InstanceRequest (internal/broker/model.go) if the instance keeps it (ProvisionDetails and Instance both embed it: nothing to copy), else broker.ProvisionDetails (internal/broker/provision.go)
- if the instance keeps it: each store's instance record (instanceItem in internal/store/bolt/item.go and internal/store/dynamo/item.go)
- if GET instance returns it: fetchedInstanceBody and encodeFetchInstance, internal/api/instances.go`,
		},
		{
			name: "update", details: reflect.TypeFor[broker.UpdateDetails](), body: reflect.TypeFor[api.UpdateBody](),
			method: http.MethodPatch, pattern: "/v2/service_instances/{instance_id}",
			decode:      func(r *http.Request) (any, error) { return api.DecodeUpdate(r) },
			checkedOnly: map[string]string{"previous_values": "the broker knows the instance's values"},
			rows: []contractRow{
				{field: "InstanceID", in: inInstancePath, send: updatedID, want: updatedID, kept: "ID"},
				{field: "ServiceID", in: "service_id", send: service, want: service, kept: "ServiceID", back: "service_id"},
				{field: "PlanID", in: "plan_id", send: asyncPlan, want: asyncPlan, kept: "PlanID", back: "plan_id"},
				{field: "Parameters", in: "parameters", send: map[string]any{"duration_seconds": 0},
					want: json.RawMessage(`{"duration_seconds":0}`), kept: "Parameters", back: "parameters"},
				{field: "Context", in: "context", send: map[string]any{"platform": "cloudfoundry", "instance_name": "renamed"},
					want: json.RawMessage(`{"platform":"cloudfoundry","instance_name":"renamed"}`), kept: "Context"},
				miRow, asyncRow,
			},
			before:     func(t *testing.T) { provision(t, updatedID) },
			wantStatus: http.StatusAccepted,
			places: `- the request: updateBody and decodeUpdate, internal/api/instances.go
- the details: broker.UpdateDetails, internal/broker/update.go
- if an update changes it: broker.Target and broker.Instance (internal/broker/model.go), UpdateDetails.target and Target.Apply (internal/broker/update.go), and the stores' instance and operation records
- if GET instance returns it: fetchedInstanceBody and encodeFetchInstance, internal/api/instances.go`,
		},
		{
			name: "bind", details: reflect.TypeFor[broker.BindDetails](), body: reflect.TypeFor[api.BindBody](),
			method: http.MethodPut, pattern: "/v2/service_instances/{instance_id}/service_bindings/{binding_id}",
			decode: func(r *http.Request) (any, error) { return api.DecodeBind(r) },
			rows: []contractRow{
				{field: "InstanceID", in: inInstancePath, send: boundID, want: boundID, kept: "InstanceID"},
				{field: "BindingID", in: inBindingPath, send: bindingID, want: bindingID, kept: "ID"},
				{field: "ServiceID", in: "service_id", send: service, want: service, kept: "ServiceID"},
				{field: "PlanID", in: "plan_id", send: plan, want: plan, kept: "PlanID"},
				{field: "AppGUID", in: "app_guid", send: "contract-app", want: "contract-app", kept: "AppGUID"},
				{field: "BindResource", in: "bind_resource", send: map[string]any{"app_guid": "contract-app"},
					want: json.RawMessage(`{"app_guid":"contract-app"}`), kept: "BindResource"},
				{field: "Parameters", in: "parameters", send: map[string]any{"duration_seconds": 2},
					want: json.RawMessage(`{"duration_seconds":2}`), kept: "Parameters", back: "parameters"},
				{field: "Context", in: "context", send: map[string]any{"platform": "cloudfoundry", "space_name": "contract"},
					want: json.RawMessage(`{"platform":"cloudfoundry","space_name":"contract"}`), kept: "Context"},
				{field: "PredecessorID", in: "predecessor_binding_id", send: predecessorID, want: predecessorID, kept: "PredecessorID"},
				asyncRow,
			},
			before: func(t *testing.T) {
				provision(t, boundID)
				r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/" + boundID + "/service_bindings/" + predecessorID,
					Body: map[string]any{"service_id": service, "plan_id": plan}})
				if r.Status != http.StatusCreated {
					t.Fatalf("bind the predecessor: %d %s", r.Status, r.Raw)
				}
			},
			wantStatus: http.StatusCreated,
			places: `- the request: bindBody and decodeBind, internal/api/bindings.go
- the details: broker.BindingRequest (internal/broker/model.go) if the binding keeps it (BindDetails and Binding both embed it: nothing to copy), else broker.BindDetails (internal/broker/bind.go)
- if the binding keeps it: each store's binding record (bindingItem in internal/store/bolt/item.go and internal/store/dynamo/item.go)
- if GET binding returns it: fetchedBindingBody and encodeFetchBinding, internal/api/bindings.go`,
		},
	}
}

// fail reports a break of the contract, with the places a field goes.
func (c contract) fail(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Errorf("%s: %s\nA field of the %s request goes in:\n%s\n"+
		"- the fingerprint, or the list of fields left out of it: internal/broker/fingerprint_test.go\n"+
		"- this test: the %s contract's rows, internal/api/contract_test.go",
		c.name, fmt.Sprintf(format, args...), c.name, c.places, c.name)
}

// checkRows checks that the rows and the types agree, both ways.
func (c contract) checkRows(t *testing.T) {
	t.Helper()
	rows := map[string]contractRow{}
	ins := map[string]bool{}
	for _, row := range c.rows {
		rows[row.field] = row
		ins[row.in] = true
		if _, ok := c.details.FieldByName(row.field); !ok {
			c.fail(t, "the row %q names no field of %s: was the field renamed or removed? Change the row.", row.field, c.details)
		}
		if reflect.ValueOf(row.want).IsZero() {
			c.fail(t, "the row %q wants the zero value, which cannot tell whether the field arrived: send something else.", row.field)
		}
	}
	for _, f := range reflect.VisibleFields(c.details) { // an embedded struct's fields count as the details'
		if !f.Anonymous && rows[f.Name].field == "" {
			c.fail(t, "%s.%s has no row: a new field? Say in a row where the request carries it, where the broker keeps it and where GET returns it.",
				c.details, f.Name)
		}
	}
	keys := map[string]bool{}
	for i := range c.body.NumField() {
		key, _, _ := strings.Cut(c.body.Field(i).Tag.Get("json"), ",")
		keys[key] = true
		if _, checked := c.checkedOnly[key]; !ins[key] && !checked {
			c.fail(t, "the request body's %q (field %s of the api's body) reaches no field of %s: add the field to %s and copy it in the decode, "+
				"then give it a row.", key, c.body.Field(i).Name, c.details, c.details)
		}
	}
	for key := range c.checkedOnly {
		if !keys[key] {
			c.fail(t, "%q is listed as checked only, but the api's request body has no such key: was it renamed?", key)
		}
	}
}

// request is the path and the body of a request that sends every row's
// value; the path without the query is the GET of what it makes.
func (c contract) request() (path, query string, body map[string]any) {
	path, body = c.pattern, map[string]any{}
	for _, row := range c.rows {
		switch row.in {
		case inInstancePath, inBindingPath:
			path = strings.Replace(path, row.in, row.send.(string), 1)
		case inQuery:
			query = row.in + "=" + row.send.(string)
		default:
			body[row.in] = row.send
		}
	}
	return path, query, body
}

// checkDecode decodes the request as the endpoint does, and checks that
// each field holds what its row sent.
func (c contract) checkDecode(t *testing.T, path string, body map[string]any) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	var got any
	var decodeErr error
	mux := http.NewServeMux()
	mux.HandleFunc(c.method+" "+c.pattern, func(_ http.ResponseWriter, r *http.Request) { got, decodeErr = c.decode(r) })
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(c.method, path, strings.NewReader(string(data))))
	if decodeErr != nil || got == nil {
		t.Fatalf("%s: the api refuses the contract's request %s %s: %v", c.name, path, data, decodeErr)
	}
	v := reflect.ValueOf(got)
	for _, row := range c.rows {
		if f := v.FieldByName(row.field).Interface(); !sameValue(f, row.want) {
			c.fail(t, "the request sends %v in %s, yet %s.%s is %s after the api's decode: copy it there.",
				show(row.send), row.in, c.details, row.field, show(f))
		}
	}
}

// checkRoundTrip sends the request to the broker, then checks that what
// it keeps and what GET returns are what the rows say.
func (c contract) checkRoundTrip(t *testing.T, b *apptest.Broker, path, query string, body map[string]any) {
	t.Helper()
	if c.before != nil {
		c.before(t)
	}
	if r := b.Do(apptest.Request{Method: c.method, Path: path + query, Body: body}); r.Status != c.wantStatus {
		t.Fatalf("%s %s: %d %s, want %d", c.method, path+query, r.Status, r.Raw, c.wantStatus)
	}
	if c.wantStatus == http.StatusAccepted {
		if r := b.WaitLastOperation(path + "/last_operation"); r.Str("state") != "succeeded" {
			t.Fatalf("%s %s did not succeed: %s", c.method, path, r.Raw)
		}
	}
	kept := reflect.ValueOf(keptAt(t, b, path))
	for _, row := range c.rows {
		if row.kept == "" {
			continue
		}
		f := kept.FieldByName(row.kept)
		if !f.IsValid() {
			c.fail(t, "the row %q says %s keeps it in %s, which is no field of it.", row.field, kept.Type(), row.kept)
			continue
		}
		if !sameValue(f.Interface(), row.want) {
			c.fail(t, "%s.%s is %s after the request, not %s: the broker does not keep %s.%s there, or a store loses it.",
				kept.Type(), row.kept, show(f.Interface()), show(row.want), c.details, row.field)
		}
	}
	answer := b.Do(apptest.Request{Method: http.MethodGet, Path: path})
	if answer.Status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, answer.Status, answer.Raw)
	}
	for _, row := range c.rows {
		if row.back == "" {
			continue
		}
		if got, ok := answer.Body[row.back]; !ok || !sameJSON(got, row.send) {
			c.fail(t, "GET %s answers %q: %s, not what the request sent (%s): the answer body does not return %s.%s.",
				path, row.back, show(got), show(row.send), c.details, row.field)
		}
	}
}

// keptAt is what the broker keeps of the instance or binding at path (the
// domain value a fetch reads).
func keptAt(t *testing.T, b *apptest.Broker, path string) any {
	t.Helper()
	instanceID, bindingID, isBinding := strings.Cut(strings.TrimPrefix(path, "/v2/service_instances/"), "/service_bindings/")
	var kept any
	var err error
	if isBinding {
		kept, err = b.Local.Broker.FetchBinding(context.Background(), broker.FetchBindingDetails{InstanceID: instanceID, BindingID: bindingID})
	} else {
		kept, err = b.Local.Broker.FetchInstance(context.Background(), broker.FetchInstanceDetails{InstanceID: instanceID})
	}
	if err != nil {
		t.Fatalf("fetch %s from the broker: %v", path, err)
	}
	return kept
}

// sameValue compares a field with what a row wants: JSON documents as
// documents, anything else deeply.
func sameValue(got, want any) bool {
	if g, ok := got.(json.RawMessage); ok {
		return sameJSON(g, want)
	}
	return reflect.DeepEqual(got, want)
}

// sameJSON reports whether a and b encode the same JSON document; a
// json.RawMessage is taken as the document it holds.
func sameJSON(a, b any) bool {
	norm := func(v any) any {
		data, err := json.Marshal(v)
		if err != nil {
			return err.Error()
		}
		var out any
		if err := json.Unmarshal(data, &out); err != nil {
			return err.Error()
		}
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// show spells a value for a failure message, as JSON where it can.
func show(v any) string {
	if raw, ok := v.(json.RawMessage); ok {
		return string(raw)
	}
	if data, err := json.Marshal(v); err == nil {
		return string(data)
	}
	return fmt.Sprintf("%#v", v)
}
