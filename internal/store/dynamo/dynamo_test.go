package dynamo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/store/dynamo"
	"github.com/serverless-osb/broker/internal/store/storetest"
	"github.com/serverless-osb/broker/internal/waittest"
)

const region = "us-east-1"

// env is a fresh table on moto, a client that counts its calls, and a
// store on them.
type env struct {
	client *dynamodb.Client
	table  string
	calls  *mototest.Calls
	// lost loses the answers it is told to (a fake network: nothing to lose
	// unless a test says so).
	lost  *mototest.LostAnswers
	store *dynamo.Store
	// afterGet is run once, after the client's next GetItem has answered.
	afterGet atomic.Pointer[func()]
}

func newEnv(t *testing.T, opts ...func(*dynamodb.Options)) *env {
	t.Helper()
	e := &env{calls: &mototest.Calls{}, lost: &mototest.LostAnswers{}}
	cfg := mototest.Config(t, region)
	client := dynamodb.NewFromConfig(cfg, append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, e.calls.Register, e.registerAfterGet, e.lost.Register)
	}}, opts...)...)
	table := mototest.Name("dynamo-store")
	if err := dynamo.CreateTable(t.Context(), client, table); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := waittest.Context(t) // t.Context() has ended by now
		defer cancel()
		// A retried DeleteTable (moto, busy, timed out the first answer)
		// finds the table gone: deleted is what was asked.
		var gone *types.ResourceNotFoundException
		if _, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil && !errors.As(err, &gone) {
			t.Errorf("DeleteTable %s: %v", table, err)
		}
	})
	e.calls.Take()
	e.client, e.table, e.store = client, table, dynamo.New(client, table)
	return e
}

// afterNextGet is the store's storetest.Interleave: write runs once the
// store's next GetItem has answered, before the store goes on.
func (e *env) afterNextGet(write func()) { e.afterGet.Store(&write) }

// registerAfterGet adds to a client's middleware stack the running of
// afterGet, taken first so that the GetItems of its own write pass by.
func (e *env) registerAfterGet(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("AfterGet",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			if awsmiddleware.GetOperationName(ctx) == "GetItem" {
				if write := e.afterGet.Swap(nil); write != nil {
					(*write)()
				}
			}
			return out, md, err
		}), middleware.After)
}

func TestContract(t *testing.T) {
	newStore := func(t *testing.T) broker.Store { return newEnv(t).store }
	storetest.Run(t, newStore)
	storetest.RunSecrets(t, func(t *testing.T) (broker.Store, storetest.Interleave) {
		e := newEnv(t)
		return e.store, e.afterNextGet
	})
}

// The helpers below drive the store through the port, as storetest does.

var t0 = time.Date(2025, time.March, 1, 12, 0, 0, 0, time.UTC)

func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func operation(instanceID, id string, kind broker.OperationKind) broker.Operation {
	return broker.Operation{
		ID: id, InstanceID: instanceID, Kind: kind, State: broker.OperationInProgress,
		Async: true, PlanID: "plan-small", CreatedAt: t0, UpdatedAt: t0, NextCheckAt: t0.Add(time.Minute),
	}
}

func finished(op broker.Operation, state broker.OperationState) broker.Operation {
	op.State, op.UpdatedAt, op.FinishedAt = state, t0.Add(time.Minute), t0.Add(time.Minute)
	op.ExpiresAt = op.FinishedAt.Add(broker.Retention)
	return op
}

// startProvision creates instance id held by provision "prov-<id>".
func startProvision(t *testing.T, s broker.Store, id string) (broker.Instance, broker.Operation) {
	t.Helper()
	op := operation(id, "prov-"+id, broker.KindProvision)
	inst := broker.Instance{
		ID: id, InstanceRequest: broker.InstanceRequest{ServiceID: "svc-1", PlanID: "plan-small", Parameters: json.RawMessage(`{"size":3}`)}, State: broker.InstanceProvisioning,
		Op: op.ID, LastOp: op.ID, Version: 1, CreatedAt: t0, UpdatedAt: t0,
	}
	must(t, s.CreateInstance(t.Context(), inst, op, nil), "CreateInstance "+id)
	return inst, op
}

// provision creates instance id, ready and idle.
func provision(t *testing.T, s broker.Store, id string) broker.Instance {
	t.Helper()
	inst, op := startProvision(t, s, id)
	inst.State, inst.Op, inst.Version = broker.InstanceReady, "", inst.Version+1
	must(t, s.FinishOperation(t.Context(), broker.Finish{Op: finished(op, broker.OperationSucceeded), Instance: &inst}),
		"FinishOperation provision "+id)
	return inst
}

func bindingOf(instanceID, id, op string) broker.Binding {
	return broker.Binding{
		InstanceID: instanceID, ID: id, BindingRequest: broker.BindingRequest{ServiceID: "svc-1", PlanID: "plan-small"}, State: broker.BindingCreating,
		Op: op, LastOp: op, Version: 1, CreatedAt: t0, UpdatedAt: t0,
	}
}

// startBind creates binding id held by bind "bind-<id>".
func startBind(t *testing.T, s broker.Store, instanceID, id string) (broker.Binding, broker.Operation) {
	t.Helper()
	op := operation(instanceID, "bind-"+id, broker.KindBind)
	op.BindingID = id
	b := bindingOf(instanceID, id, op.ID)
	must(t, s.CreateBinding(t.Context(), b, op, nil), "CreateBinding "+id)
	return b, op
}

// bind creates binding id, ready and idle.
func bind(t *testing.T, s broker.Store, instanceID, id string) broker.Binding {
	t.Helper()
	b, op := startBind(t, s, instanceID, id)
	b.State, b.Op, b.Version = broker.BindingReady, "", b.Version+1
	must(t, s.FinishOperation(t.Context(), broker.Finish{
		Op: finished(op, broker.OperationSucceeded), Binding: &b, ReleaseBinding: true,
	}), "FinishOperation bind "+id)
	return b
}

// lockFor returns the LockInstance that starts kind "<kind>-<id>" of inst.
func lockFor(inst broker.Instance, kind broker.OperationKind, opID string) broker.LockInstance {
	op := operation(inst.ID, opID, kind)
	next := inst
	next.State, next.Op, next.LastOp, next.Version = broker.InstanceUpdating, op.ID, op.ID, inst.Version+1
	if kind == broker.KindDeprovision {
		next.State = broker.InstanceDeprovisioning
	}
	return broker.LockInstance{Instance: next, Version: inst.Version, Op: op}
}

func isConflict(err error) bool {
	var c *broker.ConflictError
	return errors.As(err, &c)
}

func TestClientOptions(t *testing.T) {
	cases := []struct {
		name   string
		config dynamo.Config
	}{
		{"sets the region and the endpoint", dynamo.Config{Table: "broker", Region: "eu-west-1", Endpoint: "http://127.0.0.1:8000"}},
		{"leaves DynamoDB's endpoint when none is given", dynamo.Config{Table: "broker", Region: "eu-west-1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var o dynamodb.Options
			tc.config.ClientOptions(&o)
			if o.Region != tc.config.Region || aws.ToString(o.BaseEndpoint) != tc.config.Endpoint {
				t.Errorf("client options: region %q, endpoint %q; want %q, %q",
					o.Region, aws.ToString(o.BaseEndpoint), tc.config.Region, tc.config.Endpoint)
			}
		})
	}
}

func TestCreateTable(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	t.Run("creates the keys, on-demand billing, the in-progress and by-plan indexes and time to live", func(t *testing.T) {
		d, err := e.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(e.table)})
		must(t, err, "DescribeTable")
		table := d.Table
		if got := keySchema(table.KeySchema); got != "PK:HASH SK:RANGE" {
			t.Errorf("key schema: got %s", got)
		}
		if table.BillingModeSummary == nil || table.BillingModeSummary.BillingMode != types.BillingModePayPerRequest {
			t.Errorf("billing mode: got %+v, want PAY_PER_REQUEST", table.BillingModeSummary)
		}
		want := map[string]string{
			"InProgress": "inprogress:HASH SK:RANGE " + string(types.ProjectionTypeAll),
			"ByPlan":     "plan_id:HASH SK:RANGE " + string(types.ProjectionTypeKeysOnly),
		}
		got := map[string]string{}
		for _, gsi := range table.GlobalSecondaryIndexes {
			projection := ""
			if gsi.Projection != nil {
				projection = string(gsi.Projection.ProjectionType)
			}
			got[aws.ToString(gsi.IndexName)] = keySchema(gsi.KeySchema) + " " + projection
		}
		if !maps.Equal(got, want) {
			t.Errorf("indexes: got %v, want %v", got, want)
		}
		ttl, err := e.client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(e.table)})
		must(t, err, "DescribeTimeToLive")
		if d := ttl.TimeToLiveDescription; d == nil || aws.ToString(d.AttributeName) != "expires_at_epoch" ||
			d.TimeToLiveStatus != types.TimeToLiveStatusEnabled {
			t.Errorf("time to live: got %+v, want enabled on expires_at_epoch", d)
		}
	})
	t.Run("takes an existing table as it is", func(t *testing.T) {
		must(t, dynamo.CreateTable(ctx, e.client, e.table), "CreateTable again")
	})
}

func keySchema(ks []types.KeySchemaElement) string {
	var parts []string
	for _, k := range ks {
		parts = append(parts, aws.ToString(k.AttributeName)+":"+string(k.KeyType))
	}
	return strings.Join(parts, " ")
}

func TestItems(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	s := e.store
	provision(t, s, "i-1")
	storetest.Detach(t, s, broker.Resource{InstanceID: "i-1", Name: "old", Data: json.RawMessage(`{"z":1,"y":2}`)},
		broker.Detached{ID: "d-1", InstanceID: "i-1", Name: "old", Data: json.RawMessage(`{"z":1,"y":2}`), State: broker.DetachedPending, Attempts: 2})
	_, bindOp := startBind(t, s, "i-1", "b-1")
	must(t, s.PutResource(ctx, broker.Resource{InstanceID: "i-1", Name: "db", Data: json.RawMessage(`{"b":1,"a":2}`)}), "PutResource")

	out, err := e.client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(e.table)})
	must(t, err, "Scan")
	items := map[string]map[string]types.AttributeValue{}
	for _, item := range out.Items {
		items[str(item["PK"])+" "+str(item["SK"])] = item
	}
	t.Run("are keyed as DESIGN.md says", func(t *testing.T) {
		got := slices.Sorted(maps.Keys(items))
		want := []string{"detached d-1", "i#i-1 b#b-1", "i#i-1 instance", "i#i-1 op#bind-b-1", "i#i-1 op#detach-d-1", "i#i-1 op#prov-i-1", "i#i-1 r#db"}
		if !slices.Equal(got, want) {
			t.Errorf("keys: got %q, want %q", got, want)
		}
	})
	t.Run("keep the fields that conditions name as top-level attributes", func(t *testing.T) {
		inst := items["i#i-1 instance"]
		checks := []struct {
			name string
			got  types.AttributeValue
			want types.AttributeValue
		}{
			{"instance version", inst["version"], &types.AttributeValueMemberN{Value: "4"}}, // provisioned, a failed update detached, a bind
			{"instance binding_ops", inst["binding_ops"], &types.AttributeValueMemberN{Value: "1"}},
			{"instance state", inst["state"], &types.AttributeValueMemberS{Value: "ready"}},
			{"instance parameters (JSON text)", inst["parameters"], &types.AttributeValueMemberS{Value: `{"size":3}`}},
			{"binding op", items["i#i-1 b#b-1"]["op"], &types.AttributeValueMemberS{Value: "bind-b-1"}},
			{"operation state", items["i#i-1 op#bind-b-1"]["state"], &types.AttributeValueMemberS{Value: "in progress"}},
			{"in-progress mark of the bind", items["i#i-1 op#bind-b-1"]["inprogress"], &types.AttributeValueMemberS{Value: "1"}},
			{"expiry of the finished provision", items["i#i-1 op#prov-i-1"]["expires_at_epoch"],
				&types.AttributeValueMemberN{Value: strconv.FormatInt(t0.Add(time.Minute+broker.Retention).Unix(), 10)}},
			{"resource data (JSON text)", items["i#i-1 r#db"]["data"], &types.AttributeValueMemberS{Value: `{"b":1,"a":2}`}},
			{"detached attempts", items["detached d-1"]["attempts"], &types.AttributeValueMemberN{Value: "2"}},
			{"detached state", items["detached d-1"]["state"], &types.AttributeValueMemberS{Value: "pending"}},
			{"detached data (JSON text)", items["detached d-1"]["data"], &types.AttributeValueMemberS{Value: `{"z":1,"y":2}`}},
		}
		for _, c := range checks {
			if !reflect.DeepEqual(c.got, c.want) {
				t.Errorf("%s: got %#v, want %#v", c.name, c.got, c.want)
			}
		}
		absent := []struct{ item, attr string }{
			{"i#i-1 instance", "op"},
			{"i#i-1 op#prov-i-1", "inprogress"},
			{"i#i-1 op#bind-b-1", "expires_at_epoch"},
		}
		for _, a := range absent {
			if v, ok := items[a.item][a.attr]; ok {
				t.Errorf("%s has %s = %#v, want none", a.item, a.attr, v)
			}
		}
	})
	t.Run("put exactly the operations in progress in the index", func(t *testing.T) {
		out, err := e.client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(e.table), IndexName: aws.String("InProgress")})
		must(t, err, "Scan InProgress")
		if len(out.Items) != 1 || str(out.Items[0]["SK"]) != "op#"+bindOp.ID {
			t.Errorf("index: got %d items (%v), want the bind only", len(out.Items), out.Items)
		}
	})
}

func str(av types.AttributeValue) string {
	if s, ok := av.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return fmt.Sprintf("%#v", av)
}

// TestCalls pins how many API calls each method makes, so a change in the
// cost of an OSB request shows here.
func TestCalls(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	s := e.store
	var inst broker.Instance
	var prov, bindOp, dep broker.Operation
	var b broker.Binding
	res := broker.Resource{InstanceID: "i-2", Name: "db", Data: json.RawMessage(`{"n":1}`)}
	detached := broker.Detached{ID: "d-1", InstanceID: res.InstanceID, Name: res.Name, Data: res.Data, State: broker.DetachedPending}
	steps := []struct {
		name string
		call func() error
		want map[string]int
	}{
		{"CreateInstance", func() error {
			inst, prov = startProvision(t, s, "i-1")
			return nil
		}, map[string]int{"TransactWriteItems": 1}},
		{"CreateInstance of an existing id", func() error {
			return wantConflict(s.CreateInstance(ctx, inst, operation("i-1", "prov-2", broker.KindProvision), nil))
		}, map[string]int{"TransactWriteItems": 1}},
		{"GetInstance", func() error { _, err := s.GetInstance(ctx, "i-1"); return err }, map[string]int{"GetItem": 1}},
		{"GetOperation", func() error { _, err := s.GetOperation(ctx, "i-1", prov.ID); return err }, map[string]int{"GetItem": 1}},
		{"UpdateOperation", func() error { return s.UpdateOperation(ctx, prov, broker.RecordChanges{}) }, map[string]int{"PutItem": 1}},
		{"FinishOperation of a provision", func() error {
			inst.State, inst.Op, inst.Version = broker.InstanceReady, "", inst.Version+1
			return s.FinishOperation(ctx, broker.Finish{Op: finished(prov, broker.OperationSucceeded), Instance: &inst})
		}, map[string]int{"TransactWriteItems": 1}},
		{"UpdateOperation of a finished operation", func() error { return wantConflict(s.UpdateOperation(ctx, prov, broker.RecordChanges{})) },
			map[string]int{"PutItem": 1}},
		{"CreateBinding", func() error {
			b, bindOp = startBind(t, s, "i-1", "b-1")
			return nil
		}, map[string]int{"TransactWriteItems": 1}},
		{"CreateBinding of an existing id (reads the instance, whose condition held)", func() error {
			op := operation("i-1", "bind-2", broker.KindBind)
			return wantConflict(s.CreateBinding(ctx, bindingOf("i-1", "b-1", op.ID), op, nil))
		}, map[string]int{"TransactWriteItems": 1, "TransactGetItems": 1}},
		{"GetBinding", func() error { _, err := s.GetBinding(ctx, "i-1", "b-1"); return err }, map[string]int{"GetItem": 1}},
		{"Load of a bind given its binding: every key at once, and the instance's own records", func() error {
			snap, err := s.Load(ctx, "i-1", bindOp.ID, "b-1")
			if err == nil && (snap.Operation == nil || snap.Binding == nil) {
				err = fmt.Errorf("Load gave %+v", snap)
			}
			return err
		}, map[string]int{"BatchGetItem": 1, "Query": 1}},
		{"Load of a bind given only its operation: its binding once the operation is read", func() error {
			snap, err := s.Load(ctx, "i-1", bindOp.ID, "")
			if err == nil && (snap.Operation == nil || snap.Binding == nil) {
				err = fmt.Errorf("Load gave %+v", snap)
			}
			return err
		}, map[string]int{"BatchGetItem": 2, "Query": 1}},
		{"LockBinding halting the bind", func() error {
			op := operation("i-1", "unbind-1", broker.KindUnbind)
			op.BindingID = "b-1"
			next := b
			next.State, next.Op, next.Version = broker.BindingDeleting, op.ID, b.Version+1
			halted := finished(bindOp, broker.OperationFailed)
			err := s.LockBinding(ctx, broker.LockBinding{Binding: next, Version: b.Version, Holder: bindOp.ID, Op: op, Halted: &halted})
			b, bindOp = next, op
			return err
		}, map[string]int{"TransactWriteItems": 1}},
		{"FinishOperation of an unbind", func() error {
			return s.FinishOperation(ctx, broker.Finish{Op: finished(bindOp, broker.OperationSucceeded), DeleteBinding: true, ReleaseBinding: true})
		}, map[string]int{"TransactWriteItems": 1}},
		{"FinishOperation of an unbind again (every condition fails: no read)", func() error {
			return wantConflict(s.FinishOperation(ctx, broker.Finish{Op: finished(bindOp, broker.OperationSucceeded), DeleteBinding: true, ReleaseBinding: true}))
		}, map[string]int{"TransactWriteItems": 1}},
		{"LockInstance", func() error {
			inst, err := s.GetInstance(ctx, "i-1")
			if err != nil {
				return err
			}
			l := lockFor(inst, broker.KindDeprovision, "dep-1")
			dep = l.Op
			return s.LockInstance(ctx, l)
		}, map[string]int{"GetItem": 1, "TransactWriteItems": 1}},
		{"LockInstance of a held instance", func() error {
			return wantConflict(s.LockInstance(ctx, lockFor(inst, broker.KindUpdate, "upd-1")))
		}, map[string]int{"TransactWriteItems": 1}},
		{"Load with an operation", func() error {
			snap, err := s.Load(ctx, "i-1", dep.ID, "")
			if err == nil && (snap.Instance == nil || snap.Operation == nil || snap.Operation.ID != dep.ID) {
				err = fmt.Errorf("Load gave %+v", snap)
			}
			return err
		}, map[string]int{"BatchGetItem": 1, "Query": 3}}, // a deprovision's: whole (its own records, then its bindings' keys and records)
		{"UpdateOperation with record changes (one transaction)", func() error {
			return s.UpdateOperation(ctx, dep, broker.RecordChanges{Save: []broker.Resource{{InstanceID: "i-1", Name: "progress"}}})
		}, map[string]int{"TransactWriteItems": 1}},
		{"ListOperations", func() error { _, err := s.ListOperations(ctx, "i-1"); return err }, map[string]int{"Query": 1}},
		{"ListInProgress", func() error { _, err := s.ListInProgress(ctx); return err }, map[string]int{"Query": 1}},
		{"PutResource", func() error { return s.PutResource(ctx, broker.Resource{InstanceID: "i-1", Name: "r"}) }, map[string]int{"PutItem": 1}},
		{"DeleteResource", func() error { return s.DeleteResource(ctx, "i-1", "r") }, map[string]int{"DeleteItem": 1}},
		{"PutResource of a resource to detach", func() error { return s.PutResource(ctx, res) }, map[string]int{"PutItem": 1}},
		{"CreateInstance, and FinishOperation of a failed provision that detaches a resource (one transaction)", func() error {
			failed, op := startProvision(t, s, res.InstanceID)
			failed.State, failed.Op, failed.Version = broker.InstanceFailed, "", failed.Version+1
			return s.FinishOperation(ctx, broker.Finish{Op: finished(op, broker.OperationFailed), Instance: &failed, Detach: []broker.Detached{detached}})
		}, map[string]int{"TransactWriteItems": 2}},
		{"GetDetached", func() error { _, err := s.GetDetached(ctx, detached.ID); return err }, map[string]int{"GetItem": 1}},
		{"ListDetached", func() error { _, err := s.ListDetached(ctx); return err }, map[string]int{"Query": 1}},
		{"UpdateDetached", func() error {
			d := detached
			d.Attempts = 1
			return s.UpdateDetached(ctx, d, 0)
		}, map[string]int{"PutItem": 1}},
		{"UpdateDetached at stale attempts (no read)", func() error { return wantConflict(s.UpdateDetached(ctx, detached, 0)) },
			map[string]int{"PutItem": 1}},
		{"DeleteDetached", func() error { return s.DeleteDetached(ctx, detached.ID) }, map[string]int{"DeleteItem": 1}},
		{"UpdateDetached of a missing record (no read)", func() error {
			if err := s.UpdateDetached(ctx, detached, 1); !errors.Is(err, broker.ErrNotFound) {
				return fmt.Errorf("got %v, want ErrNotFound", err)
			}
			return nil
		}, map[string]int{"PutItem": 1}},
		{"DeleteExpiredOperations (left to time to live: no call)", func() error {
			n, err := s.DeleteExpiredOperations(ctx, t0.Add(365*24*time.Hour))
			if err == nil && n != 0 {
				err = fmt.Errorf("removed %d, want 0", n)
			}
			return err
		}, map[string]int{}},
		{"FinishOperation of a deprovision (the bindings it names: no read)", func() error {
			return s.FinishOperation(ctx, broker.Finish{Op: finished(dep, broker.OperationSucceeded), DeleteInstance: true, Bindings: []string{"b-1"}})
		}, map[string]int{"TransactWriteItems": 1}},
	}
	for _, step := range steps {
		e.calls.Take()
		if err := step.call(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got := e.calls.Take(); !maps.Equal(got, step.want) {
			t.Errorf("%s: got calls %v, want %v", step.name, got, step.want)
		}
	}
}

// wantConflict turns the expected conflict into success and anything else
// into an error.
func wantConflict(err error) error {
	if isConflict(err) {
		return nil
	}
	return fmt.Errorf("got %v, want a *broker.ConflictError", err)
}

func TestDeprovisionOfManyBindings(t *testing.T) {
	const bindings = 98 + 5 // two transactions: one batch ahead and the final one
	e := newEnv(t)
	ctx := t.Context()
	s := e.store
	provision(t, s, "i-1")
	for i := range bindings {
		bind(t, s, "i-1", fmt.Sprintf("b-%03d", i))
	}
	provision(t, s, "i-2")
	other := bind(t, s, "i-2", "b-000")
	countBindings := func() int {
		t.Helper()
		out, err := e.client.Query(ctx, &dynamodb.QueryInput{
			TableName: aws.String(e.table), ConsistentRead: aws.Bool(true), Select: types.SelectCount,
			KeyConditionExpression:    aws.String("PK = :pk AND begins_with(SK, :b)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "i#i-1"}, ":b": &types.AttributeValueMemberS{Value: "b#"}},
		})
		must(t, err, "Query")
		return int(out.Count)
	}

	t.Run("a finish that does not hold the instance deletes no binding", func(t *testing.T) {
		prov, err := s.GetOperation(ctx, "i-1", "prov-i-1")
		must(t, err, "GetOperation")
		err = s.FinishOperation(ctx, broker.Finish{Op: prov, DeleteInstance: true})
		var c *broker.ConflictError
		if !errors.As(err, &c) || c.Operation == nil || c.Operation.ID != prov.ID || c.Instance == nil || c.Instance.Op != "" {
			t.Fatalf("got %v (%+v), want a conflict with the finished provision and the idle instance", err, c)
		}
		if got := countBindings(); got != bindings {
			t.Errorf("bindings: got %d, want %d", got, bindings)
		}
	})
	t.Run("a deprovision deletes every binding, 98 at a time", func(t *testing.T) {
		inst, err := s.GetInstance(ctx, "i-1")
		must(t, err, "GetInstance")
		l := lockFor(inst, broker.KindDeprovision, "dep-1")
		must(t, s.LockInstance(ctx, l), "LockInstance")
		snap, err := s.LoadWhole(ctx, "i-1", l.Op.ID)
		must(t, err, "LoadWhole")
		e.calls.Take()
		must(t, s.FinishOperation(ctx, broker.Finish{Op: finished(l.Op, broker.OperationSucceeded), DeleteInstance: true, Bindings: snap.BindingIDs}), "FinishOperation")
		if got, want := e.calls.Take(), map[string]int{"TransactWriteItems": 2}; !maps.Equal(got, want) {
			t.Errorf("calls: got %v, want %v", got, want)
		}
		if got := countBindings(); got != 0 {
			t.Errorf("bindings: got %d, want 0", got)
		}
		if _, err := s.GetInstance(ctx, "i-1"); !errors.Is(err, broker.ErrNotFound) {
			t.Errorf("GetInstance: got %v, want ErrNotFound", err)
		}
		if got, err := s.GetBinding(ctx, "i-2", "b-000"); err != nil || !reflect.DeepEqual(got, other) {
			t.Errorf("binding of another instance: got %+v, %v", got, err)
		}
	})
}

// TestRefusedCalls: the calls the contract refuses (storetest) are refused
// before any DynamoDB call.
func TestRefusedCalls(t *testing.T) {
	e := newEnv(t)
	storetest.CheckRefusedCalls(t, e.store, func(calls func()) {
		e.calls.Take()
		calls()
		if got := e.calls.Take(); len(got) != 0 {
			t.Errorf("calls: got %v, want none", got)
		}
	})
}

func TestCancelledContext(t *testing.T) {
	s := newEnv(t).store
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.GetInstance(ctx, "i-1"); !errors.Is(err, context.Canceled) {
		t.Errorf("GetInstance: got %v, want context.Canceled", err)
	}
	if err := s.PutResource(ctx, broker.Resource{InstanceID: "i-1", Name: "r"}); !errors.Is(err, context.Canceled) {
		t.Errorf("PutResource: got %v, want context.Canceled", err)
	}
}
