package app_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/osbtest"
	"github.com/serverless-osb/broker/internal/store/dynamo"
	"github.com/serverless-osb/broker/internal/store/storetest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// client returns the real OSB client library pointed at the broker.
func client(t *testing.T, url string) osb.Client {
	t.Helper()
	return osbtest.Client(t, url, apptest.Username, apptest.Password)
}

type e2e struct {
	t                               *testing.T
	c                               osb.Client
	service, sync, async, asyncOnly string
}

func newE2E(t *testing.T, b *apptest.Broker) *e2e {
	e := &e2e{t: t, c: client(t, b.URL)}
	e.service, e.sync = b.Plan("fake-plan")
	_, e.async = b.Plan("fake-async-plan")
	_, e.asyncOnly = b.Plan("fake-async-only-plan")
	return e
}

func ptr[T any](v T) *T { return &v }

// retryAfter is what every answer in progress must carry: the broker asks
// platforms to wait at least a second between polls.
var retryAfter = osbtest.RetryAfter(time.Second)

// poll polls the instance's last_operation until it leaves "in progress"
// (osbtest.Gone on a 410).
func (e *e2e) poll(instanceID string, op *osb.OperationKey) (state osb.LastOperationState, description string) {
	e.t.Helper()
	return osbtest.Poll(e.t, e.c, instanceID, e.service, op, retryAfter)
}

func (e *e2e) pollBinding(instanceID, bindingID string, op *osb.OperationKey) osb.LastOperationState {
	e.t.Helper()
	state, _ := osbtest.PollBinding(e.t, e.c, instanceID, bindingID, op, retryAfter)
	return state
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func (e *e2e) provision(id, plan string, async bool, params map[string]any) *osb.ProvisionResponse {
	e.t.Helper()
	return osbtest.Provision(e.t, e.c, id, e.service, plan, async, params)
}

func TestClientDrivesSyncLifecycle(t *testing.T) { eachStore(t, testClientDrivesSyncLifecycle) }

func testClientDrivesSyncLifecycle(t *testing.T, start starter) {
	b := start(t, "")
	e := newE2E(t, b)

	cat, err := e.c.GetCatalog()
	if err != nil {
		t.Fatal(err)
	}
	if len(cat.Services) != 1 || len(cat.Services[0].Plans) != 3 || !cat.Services[0].InstancesRetrievable || !cat.Services[0].BindingsRetrievable {
		t.Fatalf("catalog: %+v", cat)
	}

	if r := e.provision("sync-1", e.sync, false, map[string]any{"duration_seconds": 5}); r.Async {
		t.Fatal("a sync plan answered asynchronously")
	}
	inst, err := e.c.GetInstance(&osb.GetInstanceRequest{InstanceID: "sync-1"})
	if err != nil || inst.PlanID != e.sync || inst.Parameters["duration_seconds"] != float64(5) {
		t.Fatalf("get instance: %+v %v", inst, err)
	}
	bind, err := e.c.Bind(&osb.BindRequest{InstanceID: "sync-1", BindingID: "b-1", ServiceID: e.service, PlanID: e.sync,
		BindResource: &osb.BindResource{AppGUID: ptr("app")}})
	if err != nil || bind.Async || bind.Credentials["password"] == nil {
		t.Fatalf("bind: %+v %v", bind, err)
	}
	got, err := e.c.GetBinding(&osb.GetBindingRequest{InstanceID: "sync-1", BindingID: "b-1"})
	if err != nil || got.Credentials["password"] != bind.Credentials["password"] {
		t.Fatalf("get binding: %+v %v", got, err)
	}
	if _, err := e.c.Unbind(&osb.UnbindRequest{InstanceID: "sync-1", BindingID: "b-1", ServiceID: e.service, PlanID: e.sync}); err != nil {
		t.Fatalf("unbind: %v", err)
	}
	up, err := e.c.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: "sync-1", ServiceID: e.service,
		Parameters: map[string]any{"duration_seconds": 6}})
	if err != nil || up.Async {
		t.Fatalf("update: %+v %v", up, err)
	}
	if inst, _ := e.c.GetInstance(&osb.GetInstanceRequest{InstanceID: "sync-1"}); inst.Parameters["duration_seconds"] != float64(6) {
		t.Fatalf("update not applied: %+v", inst)
	}
	if _, err := e.c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "sync-1", ServiceID: e.service, PlanID: e.sync}); err != nil {
		t.Fatalf("deprovision: %v", err)
	}
	if _, err := e.c.GetInstance(&osb.GetInstanceRequest{InstanceID: "sync-1"}); !osbtest.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("get after deprovision: %v, want 404", err)
	}
}

func TestClientDrivesAsyncLifecycle(t *testing.T) { eachStore(t, testClientDrivesAsyncLifecycle) }

func testClientDrivesAsyncLifecycle(t *testing.T, start starter) {
	b := start(t, "")
	e := newE2E(t, b)
	params := map[string]any{"duration_seconds": 1}

	// The provision is held in progress while the test checks what may
	// happen during one, however slow the machine.
	b.Hold("async-1")
	r := e.provision("async-1", e.async, true, params)
	if !r.Async || r.OperationKey == nil {
		t.Fatalf("async provision: %+v", r)
	}
	if again := e.provision("async-1", e.async, true, params); !again.Async || *again.OperationKey != *r.OperationKey {
		t.Fatalf("re-sent provision: %+v, want operation %s", again, *r.OperationKey)
	}
	_, err := e.c.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: "async-1", ServiceID: e.service, AcceptsIncomplete: true,
		Parameters: map[string]any{"duration_seconds": 0}})
	// The library's IsConcurrencyError also demands its own fixed
	// description; the spec asks only for the error code.
	if !osbtest.IsOSBError(err, http.StatusUnprocessableEntity, "ConcurrencyError") {
		t.Fatalf("update during provision: %v, want ConcurrencyError", err)
	}
	b.Release("async-1")
	if state, _ := e.poll("async-1", r.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("provision ended %s", state)
	}
	if _, err := e.c.GetInstance(&osb.GetInstanceRequest{InstanceID: "async-1"}); err != nil {
		t.Fatalf("get instance after provision: %v", err)
	}

	bind, err := e.c.Bind(&osb.BindRequest{InstanceID: "async-1", BindingID: "ab-1", ServiceID: e.service, PlanID: e.async,
		AcceptsIncomplete: true, Parameters: params})
	if err != nil || !bind.Async || bind.Credentials != nil {
		t.Fatalf("async bind: %+v %v", bind, err)
	}
	if state := e.pollBinding("async-1", "ab-1", bind.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("bind ended %s", state)
	}
	got, err := e.c.GetBinding(&osb.GetBindingRequest{InstanceID: "async-1", BindingID: "ab-1"})
	if err != nil || got.Credentials["uri"] == nil {
		t.Fatalf("get binding: %+v %v", got, err)
	}
	unbind, err := e.c.Unbind(&osb.UnbindRequest{InstanceID: "async-1", BindingID: "ab-1", ServiceID: e.service, PlanID: e.async, AcceptsIncomplete: true})
	if err != nil || !unbind.Async {
		t.Fatalf("async unbind: %+v %v", unbind, err)
	}
	if state := e.pollBinding("async-1", "ab-1", unbind.OperationKey); state != osbtest.Gone {
		t.Fatalf("unbind ended %s, want gone (410)", state)
	}

	// A plan change runs in the target plan's mode: async-only here.
	up, err := e.c.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: "async-1", ServiceID: e.service, AcceptsIncomplete: true,
		PlanID: ptr(e.asyncOnly), Parameters: map[string]any{"duration_seconds": 0}})
	if err != nil || !up.Async {
		t.Fatalf("async update: %+v %v", up, err)
	}
	if state, _ := e.poll("async-1", up.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("update ended %s", state)
	}
	if inst, _ := e.c.GetInstance(&osb.GetInstanceRequest{InstanceID: "async-1"}); inst.PlanID != e.asyncOnly || inst.Parameters["duration_seconds"] != float64(0) {
		t.Fatalf("instance after update: %+v", inst)
	}
	// Back to the sync plan: that update completes in the request.
	up, err = e.c.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: "async-1", ServiceID: e.service, AcceptsIncomplete: true, PlanID: ptr(e.sync)})
	if err != nil || up.Async {
		t.Fatalf("update to the sync plan: %+v %v", up, err)
	}
	del, err := e.c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "async-1", ServiceID: e.service, PlanID: e.sync, AcceptsIncomplete: true})
	if err != nil || del.Async {
		t.Fatalf("deprovision: %+v %v", del, err)
	}

	// An async deprovision, polled to gone.
	p := e.provision("async-2", e.async, true, map[string]any{"duration_seconds": 0})
	e.poll("async-2", p.OperationKey)
	del, err = e.c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "async-2", ServiceID: e.service, PlanID: e.async, AcceptsIncomplete: true})
	if err != nil || !del.Async {
		t.Fatalf("async deprovision: %+v %v", del, err)
	}
	if state, _ := e.poll("async-2", del.OperationKey); state != osbtest.Gone {
		t.Fatalf("deprovision ended %s, want gone (410)", state)
	}
}

func TestClientSeesAFailedOperation(t *testing.T) { eachStore(t, testClientSeesAFailedOperation) }

func testClientSeesAFailedOperation(t *testing.T, start starter) {
	b := start(t, "")
	e := newE2E(t, b)
	r := e.provision("fails-1", e.asyncOnly, true, map[string]any{"fail": true, "fail_description": "the demo was told to fail"})
	state, description := e.poll("fails-1", r.OperationKey)
	if state != osb.StateFailed || description != "the demo was told to fail" {
		t.Fatalf("failed provision reads %s %q", state, description)
	}
	// Orphan mitigation: the platform deletes the failed instance; it is instant.
	del, err := e.c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "fails-1", ServiceID: e.service, PlanID: e.asyncOnly, AcceptsIncomplete: true})
	if err != nil || del.Async {
		t.Fatalf("deprovision of a failed instance: %+v %v", del, err)
	}
	waitNothingLeft(t, b, "fails-1")
	// A sync provision that fails is refused with a 422 and leaves nothing.
	_, err = e.c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "fails-2", ServiceID: e.service, PlanID: e.sync,
		OrganizationGUID: "org", SpaceGUID: "space", Parameters: map[string]any{"fail": true}})
	if !osbtest.IsStatus(err, http.StatusUnprocessableEntity) {
		t.Fatalf("failing sync provision: %v, want 422", err)
	}
	if _, err := e.c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "fails-2", ServiceID: e.service, PlanID: e.sync}); err != nil {
		t.Fatalf("orphan mitigation of what was never created: %v (want 410, which the client treats as success)", err)
	}
	waitNothingLeft(t, b, "fails-2")

	// Orphan mitigation for an instance the broker never saw: 410, and
	// nothing is written.
	gone := b.Do(apptest.Request{Method: http.MethodDelete, Path: "/v2/service_instances/never-created?service_id=" + e.service + "&plan_id=" + e.sync})
	if gone.Status != http.StatusGone || string(gone.Raw) != "{}" {
		t.Fatalf("DELETE of a never-created instance: %d %s, want 410 {}", gone.Status, gone.Raw)
	}
	if ops, err := b.Local.Store.ListOperations(t.Context(), "never-created"); err != nil || len(ops) != 0 {
		t.Fatalf("the DELETE recorded operations: %v %v", ops, err)
	}
	waitNothingLeft(t, b, "never-created")
}

// waitNothingLeft waits until nothing of instance id is left: no instance,
// no resource record, no detached resource (its cleanup ran).
func waitNothingLeft(t *testing.T, b *apptest.Broker, id string) {
	t.Helper()
	waittest.Until(t, func() error {
		_, instErr := b.Local.Store.GetInstance(t.Context(), id)
		records, err := storetest.Records(t.Context(), b.Local.Store, id)
		if err != nil {
			t.Fatal(err)
		}
		detached, err := b.Local.Store.ListDetached(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		left := len(records)
		for _, d := range detached {
			if d.InstanceID == id {
				left++
			}
		}
		if left != 0 || instErr == nil {
			return fmt.Errorf("instance %s: instance error %v, %d resource records or detached resources left", id, instErr, left)
		}
		return nil
	})
}

func TestAsyncProvisionSurvivesABrokerRestart(t *testing.T) {
	eachStore(t, testAsyncProvisionSurvivesABrokerRestart)
}

func testAsyncProvisionSurvivesABrokerRestart(t *testing.T, start starter) {
	dir := t.TempDir()
	first := start(t, dir)
	e := newE2E(t, first)
	first.Hold("restart-1") // so that it stops mid-provision, however slow the machine
	r := e.provision("restart-1", e.async, true, map[string]any{"duration_seconds": 0})
	first.Stop()

	second := start(t, dir)
	e2 := newE2E(t, second)
	if state, _ := e2.poll("restart-1", r.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("provision across a restart ended %s", state)
	}
	if _, err := e2.c.GetInstance(&osb.GetInstanceRequest{InstanceID: "restart-1"}); err != nil {
		t.Fatalf("get instance after restart: %v", err)
	}
}

// starter starts a broker with its bolt data in dir ("" for a new one).
type starter func(t *testing.T, dir string) *apptest.Broker

// eachStore runs test on the bolt store and on the DynamoDB store (moto),
// both with the local engine executing the real steps.
func eachStore(t *testing.T, test func(t *testing.T, start starter)) {
	t.Run("bolt", func(t *testing.T) {
		test(t, func(t *testing.T, dir string) *apptest.Broker { return apptest.Start(t, dir) })
	})
	t.Run("dynamodb", func(t *testing.T) {
		store := dynamoStore(t)
		test(t, func(t *testing.T, dir string) *apptest.Broker {
			return apptest.StartWith(t, apptest.Options{Dir: dir, Store: store})
		})
	})
}

// dynamoStore returns a DynamoDB store on a new table in moto.
func dynamoStore(t *testing.T) broker.Store {
	t.Helper()
	client := dynamodb.NewFromConfig(mototest.Config(t, "us-east-1"))
	table := mototest.Name("e2e")
	if err := dynamo.CreateTable(t.Context(), client, table); err != nil {
		t.Fatalf("create table %s: %v", table, err)
	}
	return dynamo.New(client, table)
}
