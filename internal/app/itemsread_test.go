package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/steps"
)

// itemsRead counts the DynamoDB items that reads look at, as DynamoDB
// charges them: each key a GetItem, BatchGetItem or TransactGetItems asks
// for (found or not), and each item a Query or Scan reads before its
// filter (ScannedCount, as moto reports it); and the read units DynamoDB
// charges for them (its pricing of strongly consistent reads of items
// under 4 KB, as the broker's are): a GetItem 1, a BatchGetItem 1 a key,
// a TransactGetItems 2 a key, a Query or Scan 1 for each started 4 KB it
// reads (these read far less: 1), found or not. Not moto's
// ConsumedCapacity, which charges a GetItem 0.5 whether consistent or
// not, and a TransactGetItems only for the items it finds.
type itemsRead struct {
	mu    sync.Mutex
	n     int
	units float64
}

func (r *itemsRead) Register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("CountItemsRead",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			n, units := 0, 0.0
			switch o := out.Result.(type) {
			case *dynamodb.QueryOutput:
				n, units = int(o.ScannedCount), 1
			case *dynamodb.ScanOutput:
				n, units = int(o.ScannedCount), 1
			case *dynamodb.GetItemOutput:
				n, units = 1, 1
			case *dynamodb.BatchGetItemOutput:
				for _, ka := range in.Parameters.(*dynamodb.BatchGetItemInput).RequestItems {
					n += len(ka.Keys)
				}
				units = float64(n)
			case *dynamodb.TransactGetItemsOutput:
				n = len(in.Parameters.(*dynamodb.TransactGetItemsInput).TransactItems)
				units = float64(2 * n)
			}
			r.mu.Lock()
			r.n += n
			r.units += units
			r.mu.Unlock()
			return out, md, err
		}), middleware.After)
}

// reading is what one request or Task read: items and read units.
type reading struct {
	items int
	units float64
}

// Take returns the items read since the last Take.
func (r *itemsRead) Take() int {
	n, _ := r.TakeBoth()
	return n
}

// TakeBoth returns the items read and the read units consumed since the
// last Take.
func (r *itemsRead) TakeBoth() (int, float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, units := r.n, r.units
	r.n, r.units = 0, 0
	return n, units
}

// TestItemsReadDoNotGrowWithHistory: every request and Task that changes an
// instance or a binding reads as many DynamoDB items on an instance with
// hundreds of bindings, binding records and finished operations as on a
// fresh one: it reads what it needs by key or key range, never the
// instance's whole partition.
func TestItemsReadDoNotGrowWithHistory(t *testing.T) {
	const history = 500 // bindings, each with its record and finished bind; and finished updates
	items := &itemsRead{}
	cb := newCallsBroker(t, items.Register)
	ctx := context.Background()
	var svc, syncPlan, asyncPlan string
	for _, s := range cb.catalog.Services() {
		for _, p := range s.Plans {
			switch p.Name {
			case "fake-plan":
				svc, syncPlan = s.ID, p.ID
			case "fake-async-plan":
				asyncPlan = p.ID
			}
		}
	}
	clock := time.Now().UTC()
	cb.demo.Now = func() time.Time { return clock }
	take := func() reading {
		n, units := items.TakeBoth()
		return reading{n, units}
	}

	request := func(method, path, body string, want int) string {
		t.Helper()
		code, got, _ := cb.do(method, path, body)
		if code != want {
			t.Fatalf("%s %s: %d, want %d: %s", method, path, code, want, got)
		}
		return got
	}
	// tasks runs an asynchronous operation's Tasks to its end through the
	// worker's handler, as the workflow would, and returns the items each
	// read.
	tasks := func(instanceID, op string) []reading {
		t.Helper()
		var read []reading
		input := cb.input(t, op)
		items.Take()
		if _, err := cb.task(steps.StepBegin, instanceID, op, input); err != nil {
			t.Fatalf("begin %s: %v", op, err)
		}
		read = append(read, take())
		clock = clock.Add(time.Hour)
		if p, err := cb.task(steps.StepCheck, instanceID, op, input); err != nil || !p.Done {
			t.Fatalf("check %s: %+v %v, want done", op, p, err)
		}
		read = append(read, take())
		if _, err := cb.task(steps.StepFinish, instanceID, op, input); err != nil {
			t.Fatalf("finish %s: %v", op, err)
		}
		return append(read, take())
	}
	// grow gives an instance its history: a binding settled in memory,
	// with its finished bind and its record, and a finished update,
	// through the store; then as many copies of these items as history
	// asks, each under its own key and ids, written in batches (moto
	// copies its whole table for every transaction).
	grow := func(instanceID string) {
		t.Helper()
		inst, err := cb.store.GetInstance(ctx, instanceID)
		if err != nil {
			t.Fatal(err)
		}
		const first = "old-0000"
		op := broker.Operation{ID: "bind-" + first, InstanceID: instanceID, BindingID: first, Kind: broker.KindBind,
			State: broker.OperationSucceeded, PlanID: inst.PlanID, CreatedAt: clock, UpdatedAt: clock, FinishedAt: clock,
			ExpiresAt: clock.Add(broker.Retention)}
		bd := broker.Binding{InstanceID: instanceID, ID: first, BindingRequest: broker.BindingRequest{ServiceID: inst.ServiceID, PlanID: inst.PlanID},
			State: broker.BindingReady, LastOp: op.ID, Version: 1, CreatedAt: clock, UpdatedAt: clock}
		rec := broker.Resource{InstanceID: instanceID, Name: broker.BindingRecord(first), Data: json.RawMessage(`{"user":"u"}`), UpdatedAt: clock}
		if err := cb.store.CreateBinding(ctx, bd, op, &broker.Settled{Records: broker.RecordChanges{Save: []broker.Resource{rec}}, InstanceVersion: inst.Version}); err != nil {
			t.Fatalf("binding %s: %v", first, err)
		}
		inst.Version++
		up := broker.Operation{ID: "update-" + first, InstanceID: instanceID, Kind: broker.KindUpdate, State: broker.OperationInProgress,
			PlanID: inst.PlanID, CreatedAt: clock, UpdatedAt: clock}
		held := inst
		held.State, held.Op, held.LastOp, held.Version = broker.InstanceUpdating, up.ID, up.ID, inst.Version+1
		if err := cb.store.LockInstance(ctx, broker.LockInstance{Instance: held, Version: inst.Version, Op: up}); err != nil {
			t.Fatalf("update %s: %v", up.ID, err)
		}
		done := held
		done.State, done.Op, done.Version = broker.InstanceReady, "", held.Version+1
		up.State, up.FinishedAt, up.ExpiresAt = broker.OperationSucceeded, clock, clock.Add(broker.Retention)
		if err := cb.store.FinishOperation(ctx, broker.Finish{Op: up, Instance: &done}); err != nil {
			t.Fatalf("finish update %s: %v", up.ID, err)
		}

		// The copies: the items as stored (keys as DESIGN.md lays them
		// out), with the ids that name them changed.
		stored := map[string]map[string]types.AttributeValue{}
		for _, sk := range []string{"b#" + first, "op#bind-" + first, "r#" + broker.BindingRecord(first), "op#update-" + first} {
			out, err := cb.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(cb.table), Key: map[string]types.AttributeValue{
				"PK": &types.AttributeValueMemberS{Value: "i#" + instanceID}, "SK": &types.AttributeValueMemberS{Value: sk}}})
			if err != nil || len(out.Item) == 0 {
				t.Fatalf("read %s: %v (%d attributes)", sk, err, len(out.Item))
			}
			stored[sk] = out.Item
		}
		str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
		var writes []types.WriteRequest
		for i := 1; i < history; i++ {
			id := fmt.Sprintf("old-%04d", i)
			for sk, changes := range map[string]map[string]string{
				"b#" + first:                       {"SK": "b#" + id, "id": id},
				"op#bind-" + first:                 {"SK": "op#bind-" + id, "id": "bind-" + id, "binding_id": id},
				"r#" + broker.BindingRecord(first): {"SK": "r#" + broker.BindingRecord(id), "name": broker.BindingRecord(id)},
				"op#update-" + first:               {"SK": "op#update-" + id, "id": "update-" + id},
			} {
				copied := maps.Clone(stored[sk])
				for attr, v := range changes {
					copied[attr] = str(v)
				}
				writes = append(writes, types.WriteRequest{PutRequest: &types.PutRequest{Item: copied}})
			}
		}
		for len(writes) > 0 {
			n := min(25, len(writes))
			out, err := cb.ddb.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{cb.table: writes[:n]}})
			if err != nil {
				t.Fatalf("write the history: %v", err)
			}
			writes = append(writes[n:], out.UnprocessedItems[cb.table]...)
		}
	}

	// run makes the same requests and Tasks on instance id (history or
	// none) and returns the items each read, by name.
	run := func(id string, withHistory bool) map[string]reading {
		t.Helper()
		read := map[string]reading{}
		measure := func(name, method, path, body string, want int) string {
			t.Helper()
			items.Take()
			got := request(method, path, body, want)
			read[name] = take()
			return got
		}
		s, a := id+"-s", id+"-a"
		provision := func(plan string) string {
			return fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"o","space_guid":"s","parameters":{"duration_seconds":60}}`, svc, plan)
		}
		request(http.MethodPut, "/v2/service_instances/"+s, provision(syncPlan), 201)
		op := operationOf(request(http.MethodPut, "/v2/service_instances/"+a+"?accepts_incomplete=true", provision(asyncPlan), 202))
		tasks(a, op)
		if withHistory {
			grow(s)
			grow(a)
		}

		// Synchronous requests.
		bindBody := func(plan string) string { return fmt.Sprintf(`{"service_id":%q,"plan_id":%q}`, svc, plan) }
		del := func(plan string) string { return "service_id=" + svc + "&plan_id=" + plan }
		measure("bind (sync)", http.MethodPut, "/v2/service_instances/"+s+"/service_bindings/new", bindBody(syncPlan), 201)
		measure("bind again (200)", http.MethodPut, "/v2/service_instances/"+s+"/service_bindings/new", bindBody(syncPlan), 200)
		measure("last_operation of a binding (without operation)", http.MethodGet, "/v2/service_instances/"+s+"/service_bindings/new/last_operation", "", 200)
		measure("update (sync)", http.MethodPatch, "/v2/service_instances/"+s,
			fmt.Sprintf(`{"service_id":%q,"parameters":{"duration_seconds":1}}`, svc), 200)
		measure("unbind (sync)", http.MethodDelete, "/v2/service_instances/"+s+"/service_bindings/new?"+del(syncPlan), "", 200)
		measure("last_operation (with operation)", http.MethodGet, "/v2/service_instances/"+a+"/last_operation?operation="+op, "", 200)
		measure("last_operation (without operation)", http.MethodGet, "/v2/service_instances/"+a+"/last_operation", "", 200)

		// Asynchronous requests, and their Tasks.
		for _, c := range []struct{ name, method, path, body string }{
			{"update", http.MethodPatch, "/v2/service_instances/" + a + "?accepts_incomplete=true",
				fmt.Sprintf(`{"service_id":%q,"parameters":{"duration_seconds":2}}`, svc)},
			{"bind", http.MethodPut, "/v2/service_instances/" + a + "/service_bindings/new?accepts_incomplete=true", bindBody(asyncPlan)},
			{"unbind", http.MethodDelete, "/v2/service_instances/" + a + "/service_bindings/new?accepts_incomplete=true&" + del(asyncPlan), ""},
		} {
			op := operationOf(measure(c.name+" (async, the 202)", c.method, c.path, c.body, 202))
			for i, n := range tasks(a, op) {
				read[fmt.Sprintf("%s: %s Task", c.name, []string{"Begin", "Check (done)", "Finish"}[i])] = n
			}
		}
		return read
	}

	fresh := run("fresh", false)
	grown := run("grown", true)
	var report strings.Builder
	for _, name := range slices.Sorted(maps.Keys(fresh)) {
		fmt.Fprintf(&report, "| %s | %d, %g | %d, %g |\n", name, fresh[name].items, fresh[name].units, grown[name].items, grown[name].units)
		if grown[name].items != fresh[name].items {
			t.Errorf("%s read %d items on an instance with %d bindings and %d operations, %d on a fresh one",
				name, grown[name].items, history, 2*history, fresh[name].items)
		}
	}
	t.Logf("DynamoDB items read and read units charged, on a fresh instance and on one with %d bindings, their records and %d finished operations "+
		"(target: the same on both):\n"+
		"| request or Task | fresh: items, read units | with history: items, read units |\n| --- | ---: | ---: |\n%s", history, 2*history, report.String())
}
