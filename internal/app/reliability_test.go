package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/drivers"
	"github.com/serverless-osb/broker/internal/logging/logtest"
	"github.com/serverless-osb/broker/internal/steps"
	"github.com/serverless-osb/broker/internal/store/storetest"
	"github.com/serverless-osb/broker/internal/waittest"
)

func provisionBody(service, plan string, params any) map[string]any {
	return map[string]any{"service_id": service, "plan_id": plan, "organization_guid": "o", "space_guid": "s", "parameters": params}
}

// TestEveryStepIsIdempotent runs each step of each kind of operation twice
// and checks that the outcome is that of running it once.
func TestEveryStepIsIdempotent(t *testing.T) {
	b := apptest.Start(t, "")
	service, plan := b.Plan("fake-async-plan")
	st, br, store, ctx := b.Local.Steps, b.Local.Broker, b.Local.Store, context.Background()

	// twice runs a step twice and fails on any error.
	twice := func(t *testing.T, name string, f func() error) {
		t.Helper()
		for i := range 2 {
			if err := f(); err != nil {
				t.Fatalf("%s (run %d): %v", name, i+1, err)
			}
		}
	}
	// run drives op through begin, check, finish, each twice, the way a Task
	// retry or a restarted execution would.
	run := func(t *testing.T, instanceID, opID string) {
		t.Helper()
		twice(t, "begin", func() error {
			_, err := br.BeginTask(ctx, broker.OperationTask{InstanceID: instanceID, OperationID: opID})
			return err
		})
		twice(t, "check", func() error {
			_, err := br.CheckTask(ctx, broker.OperationTask{InstanceID: instanceID, OperationID: opID})
			return err
		})
		twice(t, "finish", func() error {
			return br.FinishTask(ctx, broker.OperationTask{InstanceID: instanceID, OperationID: opID})
		})
	}
	// accepted creates an operation the way the API does, then stops its
	// execution so that only this test runs its steps.
	accepted := func(t *testing.T, method, path string, body any) string {
		t.Helper()
		r := b.Do(apptest.Request{Method: method, Path: path, Body: body})
		if r.Status != http.StatusAccepted {
			t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Raw)
		}
		if err := b.Local.Engine.Stop(ctx, r.Str("operation"), "the test runs the steps"); err != nil {
			t.Fatal(err)
		}
		return r.Str("operation")
	}
	params := map[string]any{"duration_seconds": 0}

	op := accepted(t, http.MethodPut, "/v2/service_instances/idem?accepts_incomplete=true", provisionBody(service, plan, params))
	run(t, "idem", op)
	inst, err := store.GetInstance(ctx, "idem")
	if err != nil || inst.State != broker.InstanceReady || inst.Op != "" || inst.Version != 2 {
		t.Fatalf("after provision steps twice: %+v %v (want ready, idle, version 2)", inst, err)
	}

	op = accepted(t, http.MethodPut, "/v2/service_instances/idem/service_bindings/b?accepts_incomplete=true",
		map[string]any{"service_id": service, "plan_id": plan, "parameters": params})
	run(t, "idem", op)
	binding, err := store.GetBinding(ctx, "idem", "b")
	if err != nil || binding.State != broker.BindingReady || binding.Credentials["password"] == nil {
		t.Fatalf("after bind steps twice: %+v %v", binding, err)
	}
	if inst, _ := store.GetInstance(ctx, "idem"); inst.BindingOps != 0 {
		t.Fatalf("binding operations counted %d after one bind, want 0", inst.BindingOps)
	}

	op = accepted(t, http.MethodDelete, "/v2/service_instances/idem/service_bindings/b?accepts_incomplete=true&service_id="+service+"&plan_id="+plan, nil)
	run(t, "idem", op)
	if _, err := store.GetBinding(ctx, "idem", "b"); err == nil {
		t.Fatal("the binding survived its unbind")
	}

	op = accepted(t, http.MethodPatch, "/v2/service_instances/idem?accepts_incomplete=true",
		map[string]any{"service_id": service, "parameters": map[string]any{"duration_seconds": 30, "fail": true}})
	twice(t, "begin", func() error {
		_, err := br.BeginTask(ctx, broker.OperationTask{InstanceID: "idem", OperationID: op})
		return err
	})
	twice(t, "record failure", func() error {
		return br.RecordFailure(ctx, broker.OperationTask{InstanceID: "idem", OperationID: op}, "failed on purpose")
	})
	failed, _ := store.GetOperation(ctx, "idem", op)
	if inst, _ := store.GetInstance(ctx, "idem"); failed.State != broker.OperationFailed || inst.State != broker.InstanceReady || inst.Op != "" {
		t.Fatalf("after a failed update recorded twice: op %+v, instance %+v", failed, inst)
	}
	if kept := failed.ExpiresAt.Sub(failed.FinishedAt); kept < 7*24*time.Hour {
		t.Fatalf("a finished operation is kept %s, want at least 7 days", kept)
	}

	op = accepted(t, http.MethodDelete, "/v2/service_instances/idem?accepts_incomplete=true&service_id="+service+"&plan_id="+plan, nil)
	run(t, "idem", op)
	if _, err := store.GetInstance(ctx, "idem"); err == nil {
		t.Fatal("the instance survived its deprovision")
	}
	if _, err := storetest.Record(ctx, store, "idem", "instance"); err == nil {
		t.Fatal("the demo resource survived the deprovision")
	}

	// The worker entry point: a finish for an operation that already
	// finished is a no-op, not an error.
	out, err := st.Handle(ctx, json.RawMessage(fmt.Sprintf(`{"step":"finish","operation_id":%q,"instance_id":"idem"}`, op)))
	if err != nil || string(out) != "{}" {
		t.Fatalf("finish of a finished operation: %s %v", out, err)
	}
	if _, err := st.Handle(ctx, json.RawMessage(`{"step":"dance","operation_id":"x","instance_id":"y"}`)); err == nil ||
		!strings.Contains(err.Error(), "unknown step") {
		t.Fatalf("an unknown step: %v", err)
	}
	var perm *steps.PermanentError
	if _, err := st.Handle(ctx, json.RawMessage(`{`)); err == nil || !asPermanent(err, &perm) {
		t.Fatalf("a malformed payload: %v, want a PermanentError", err)
	}
}

func asPermanent(err error, target **steps.PermanentError) bool {
	p, ok := err.(*steps.PermanentError)
	*target = p
	return ok
}

// TestLastOperationRepairsWhatItsExecutionCannot covers the two repairs: an
// execution that ended without recording a result, and one that never
// started (a crash between the write and StartExecution).
func TestLastOperationRepairsWhatItsExecutionCannot(t *testing.T) {
	b := apptest.Start(t, "")
	service, plan := b.Plan("fake-async-plan")
	b.Local.Broker.RepairAfter = -time.Hour // every in-progress record is due for a look
	ctx := context.Background()

	t.Run("an execution stopped without a result leaves a failed operation", func(t *testing.T) {
		r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/stopped?accepts_incomplete=true",
			Body: provisionBody(service, plan, map[string]any{"duration_seconds": 60})})
		op := r.Str("operation")
		if err := b.Local.Engine.Stop(ctx, op, "an operator stopped it"); err != nil {
			t.Fatal(err)
		}
		lo := b.Do(apptest.Request{Method: http.MethodGet, Path: "/v2/service_instances/stopped/last_operation?operation=" + op})
		if lo.Str("state") != "failed" || !strings.Contains(lo.Str("description"), "stopped") {
			t.Fatalf("last_operation after the execution stopped: %s", lo.Raw)
		}
		del := b.Do(apptest.Request{Method: http.MethodDelete, Path: "/v2/service_instances/stopped?service_id=" + service + "&plan_id=" + plan})
		if del.Status != http.StatusOK {
			t.Fatalf("deleting the failed instance: %d %s", del.Status, del.Raw)
		}
	})
	t.Run("an operation whose execution never started is started and succeeds", func(t *testing.T) {
		now := time.Now().UTC()
		op := broker.Operation{ID: "never-started-op", InstanceID: "orphan", Kind: broker.KindProvision,
			State: broker.OperationInProgress, Async: true, PlanID: plan, CreatedAt: now, UpdatedAt: now, NextCheckAt: now}
		inst := broker.Instance{ID: "orphan", InstanceRequest: broker.InstanceRequest{ServiceID: service, PlanID: plan}, State: broker.InstanceProvisioning,
			Op: op.ID, LastOp: op.ID, Version: 1, CreatedAt: now, UpdatedAt: now}
		if err := b.Local.Store.CreateInstance(ctx, inst, op, nil); err != nil {
			t.Fatal(err)
		}
		lo := b.WaitLastOperation("/v2/service_instances/orphan/last_operation?operation=" + op.ID)
		if lo.Str("state") != "succeeded" {
			t.Fatalf("repaired operation ended %s", lo.Raw)
		}
	})
}

// TestRacingOperationsOnOneInstance races conflicting requests: exactly one
// wins each round, the rest get 422 ConcurrencyError, and binds never
// overlap an update.
func TestRacingOperationsOnOneInstance(t *testing.T) {
	b := apptest.Start(t, "")
	service, plan := b.Plan("fake-async-plan")
	for round := range 5 {
		id := fmt.Sprintf("race-%d", round)
		if r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/" + id,
			Body: provisionBody(service, plan, map[string]any{})}); r.Status != http.StatusCreated {
			t.Fatalf("provision: %d %s", r.Status, r.Raw)
		}
		const racers = 16
		var wg sync.WaitGroup
		statuses := make([]apptest.Response, racers)
		for i := range racers {
			wg.Go(func() {
				req := apptest.Request{Method: http.MethodPatch, Path: "/v2/service_instances/" + id + "?accepts_incomplete=true",
					Body: map[string]any{"service_id": service, "parameters": map[string]any{"duration_seconds": 60 + i}}}
				if i%2 == 1 { // half of them bind instead
					req = apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/v2/service_instances/%s/service_bindings/b-%d?accepts_incomplete=true", id, i),
						Body: map[string]any{"service_id": service, "plan_id": plan, "parameters": map[string]any{"duration_seconds": 60}}}
				}
				statuses[i] = b.Do(req)
			})
		}
		wg.Wait()
		updates, binds := 0, 0
		for i, r := range statuses {
			switch {
			case r.Status == http.StatusAccepted && i%2 == 0:
				updates++
			case r.Status == http.StatusAccepted:
				binds++
			case r.Status == http.StatusUnprocessableEntity && r.Str("error") == "ConcurrencyError":
			default:
				t.Fatalf("round %d racer %d: %d %s", round, i, r.Status, r.Raw)
			}
		}
		if updates > 1 || (updates == 1 && binds > 0) || updates+binds == 0 {
			t.Fatalf("round %d: %d updates and %d binds were accepted together", round, updates, binds)
		}
		inst, _ := b.Local.Store.GetInstance(context.Background(), id)
		if (inst.Op != "") == (inst.BindingOps > 0) || inst.BindingOps != binds {
			t.Fatalf("round %d: instance holds op %q and %d binding ops after %d binds", round, inst.Op, inst.BindingOps, binds)
		}
	}
}

// TestLogsCarryNoSecrets drives a whole lifecycle with parameters and
// credentials that would be recognisable, and reads every log line.
func TestLogsCarryNoSecrets(t *testing.T) {
	b := apptest.Start(t, "")
	service, plan := b.Plan("fake-plan")
	const marker = "parameter-value-that-must-not-be-logged"
	r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/quiet",
		Body: provisionBody(service, plan, map[string]any{"fail_description": marker})})
	if r.Status != http.StatusCreated {
		t.Fatalf("provision: %s", r.Raw)
	}
	bind := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/quiet/service_bindings/b",
		Body: map[string]any{"service_id": service, "plan_id": plan}})
	password, _ := bind.Body["credentials"].(map[string]any)["password"].(string)
	if password == "" {
		t.Fatalf("bind: %s", bind.Raw)
	}
	b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/quiet",
		Body: provisionBody(service, plan, map[string]any{"fail": "not a bool " + marker})})
	logs := b.Logs.String()
	for _, secret := range []string{marker, password, apptest.Password} {
		if strings.Contains(logs, secret) {
			t.Fatalf("the log holds %q:\n%s", secret, logs)
		}
	}
	if _, err := logtest.Lines(logs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs, `"instance_id":"quiet"`) {
		t.Fatal("the request log lines lack the instance id")
	}
}

// TestLogLinesAreWellFormed drives whole lifecycles, synchronous and
// asynchronous, succeeding and failing, and reads every log line strictly:
// one JSON object with each key once (encoding/json alone would keep the
// last of two), durations named with their unit, a failed operation's line
// saying why without repeating a parameter, and the execution that recorded
// a failure not ending as a plain SUCCEEDED.
func TestLogLinesAreWellFormed(t *testing.T) {
	b := apptest.Start(t, "")
	service, syncPlan := b.Plan("fake-plan")
	_, asyncPlan := b.Plan("fake-async-plan")
	const marker = "fail-description-that-must-not-be-logged"

	// call sends a request, waits for the operation it accepted, and
	// returns the operation's id and final state.
	call := func(t *testing.T, method, path string, body any, want int) (op, state string) {
		t.Helper()
		r := b.Do(apptest.Request{Method: method, Path: path, Body: body})
		if r.Status != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, r.Status, r.Raw, want)
		}
		if r.Status != http.StatusAccepted {
			return "", ""
		}
		base, _, _ := strings.Cut(path, "?")
		lo := b.WaitLastOperation(base + "/last_operation?operation=" + r.Str("operation"))
		return r.Str("operation"), lo.Str("state")
	}
	lifecycle := func(t *testing.T, id, plan string, async bool) {
		t.Helper()
		query, done, created := "", http.StatusOK, http.StatusCreated
		if async {
			query, done, created = "?accepts_incomplete=true", http.StatusAccepted, http.StatusAccepted
		}
		inst, bind := "/v2/service_instances/"+id, "/v2/service_instances/"+id+"/service_bindings/b"
		del := "service_id=" + service + "&plan_id=" + plan
		params := map[string]any{"duration_seconds": 0}
		if _, state := call(t, http.MethodPut, inst+query, provisionBody(service, plan, params), created); async && state != "succeeded" {
			t.Fatalf("provision %s: %s", id, state)
		}
		call(t, http.MethodPut, bind+query, map[string]any{"service_id": service, "plan_id": plan, "parameters": params}, created)
		call(t, http.MethodDelete, bind+"?"+strings.TrimPrefix(query+"&", "?")+del, nil, done)
		call(t, http.MethodPatch, inst+query, map[string]any{"service_id": service, "parameters": map[string]any{"duration_seconds": 0, "fail": false}}, done)
		call(t, http.MethodDelete, inst+"?"+strings.TrimPrefix(query+"&", "?")+del, nil, done)
	}
	lifecycle(t, "sync-life", syncPlan, false)
	lifecycle(t, "async-life", asyncPlan, true)

	asyncFailed, state := call(t, http.MethodPut, "/v2/service_instances/async-failed?accepts_incomplete=true",
		provisionBody(service, asyncPlan, map[string]any{"duration_seconds": 0, "fail": true, "fail_description": marker}), http.StatusAccepted)
	if state != "failed" {
		t.Fatalf("the provision asked to fail ended %s", state)
	}
	call(t, http.MethodPut, "/v2/service_instances/sync-failed",
		provisionBody(service, syncPlan, map[string]any{"fail": true}), http.StatusUnprocessableEntity)

	// The execution logs its end just after the operation's failure is
	// recorded.
	var lines []map[string]any
	waittest.Until(t, func() error {
		var err error
		if lines, err = logtest.Lines(b.Logs.String()); err != nil {
			t.Fatal(err)
		}
		if find(lines, "execution ended", "execution", asyncFailed) == nil {
			return fmt.Errorf("no end of execution %s logged:\n%s", asyncFailed, b.Logs.String())
		}
		return nil
	})

	if strings.Contains(b.Logs.String(), marker) {
		t.Fatalf("the log repeats the fail_description parameter:\n%s", b.Logs.String())
	}
	for _, line := range lines {
		for k, v := range line {
			if !strings.Contains(k, "duration") && !strings.Contains(k, "elapsed") && !strings.Contains(k, "latency") {
				continue
			}
			if n, ok := v.(json.Number); !strings.HasSuffix(k, "_ms") || !ok || strings.ContainsAny(n.String(), ".eE") {
				t.Errorf("%s=%v: a duration is an integer under a key ending in _ms, in %v", k, v, line)
			}
		}
		if line["msg"] == "operation finished" && (line["operation_id"] == nil || line["instance_id"] == nil) {
			t.Errorf("an operation's line does not say which: %v", line)
		}
	}
	tests := []struct {
		name       string
		msg, k, v  string
		want, lack map[string]any
	}{
		{name: "the failed asynchronous operation's line has a reason that is not its fail_description",
			msg: "operation finished", k: "operation_id", v: asyncFailed,
			want: map[string]any{"state": "failed", "level": "WARN", "instance_id": "async-failed",
				"reason": "The description repeats a request parameter, so the log leaves it out; last_operation shows it."}},
		{name: "the failed synchronous operation's line has its description as its reason",
			msg: "operation finished", k: "instance_id", v: "sync-failed",
			want: map[string]any{"state": "failed", "reason": "The provision failed as requested (fail: true)."}},
		{name: "the execution that recorded a failure says what it caught",
			msg: "execution ended", k: "execution", v: asyncFailed,
			want: map[string]any{"status": "SUCCEEDED", "end_state": "FailureRecorded", "caught_error": "PermanentError", "level": "WARN"}},
		{name: "a succeeded operation's line has no reason",
			msg: "operation finished", k: "instance_id", v: "async-life",
			want: map[string]any{"state": "succeeded", "kind": "provision"}, lack: map[string]any{"reason": nil}},
		{name: "an execution that caught nothing ends a plain SUCCEEDED",
			msg: "execution ended", k: "workflow", v: "operation",
			want: map[string]any{"status": "SUCCEEDED", "end_state": "Succeeded", "level": "INFO"}, lack: map[string]any{"caught_error": nil}},
		{name: "a binding's operation names the binding, and the step that finished it",
			msg: "operation finished", k: "instance_id", v: "async-life",
			want: map[string]any{"kind": "bind", "binding_id": "b", "step": "begin"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var line map[string]any
			for _, l := range lines {
				if l["msg"] == tt.msg && l[tt.k] == tt.v && (tt.want["kind"] == nil || l["kind"] == tt.want["kind"]) {
					line = l
					break
				}
			}
			if line == nil {
				t.Fatalf("no %q line with %s=%s:\n%s", tt.msg, tt.k, tt.v, b.Logs.String())
			}
			for k, v := range tt.want {
				if line[k] != v {
					t.Errorf("%s = %v, want %v in %v", k, line[k], v, line)
				}
			}
			for k := range tt.lack {
				if _, ok := line[k]; ok {
					t.Errorf("%s is present in %v", k, line)
				}
			}
		})
	}
}

// find returns the first line with msg whose key k is v.
func find(lines []map[string]any, msg, k, v string) map[string]any {
	for _, l := range lines {
		if l["msg"] == msg && l[k] == v {
			return l
		}
	}
	return nil
}

// TestStartUpRecoversOperationsInProgress leaves behind what a crash would:
// an async operation whose execution never started, and a synchronous one
// whose request died. A new broker on the same data ends both.
func TestStartUpRecoversOperationsInProgress(t *testing.T) {
	dir := t.TempDir()
	first := apptest.Start(t, dir)
	service, plan := first.Plan("fake-async-plan")
	now := time.Now().UTC()
	ctx := context.Background()
	for _, async := range []bool{true, false} {
		id := fmt.Sprintf("crashed-%v", async)
		op := broker.Operation{ID: "op-" + id, InstanceID: id, Kind: broker.KindProvision, State: broker.OperationInProgress,
			Async: async, PlanID: plan, CreatedAt: now, UpdatedAt: now, NextCheckAt: now.Add(time.Hour)}
		inst := broker.Instance{ID: id, InstanceRequest: broker.InstanceRequest{ServiceID: service, PlanID: plan}, State: broker.InstanceProvisioning,
			Op: op.ID, LastOp: op.ID, Version: 1, CreatedAt: now, UpdatedAt: now}
		if err := first.Local.Store.CreateInstance(ctx, inst, op, nil); err != nil {
			t.Fatal(err)
		}
	}
	first.Stop()

	second := apptest.Start(t, dir)
	lo := second.WaitLastOperation("/v2/service_instances/crashed-true/last_operation")
	if lo.Str("state") != "succeeded" {
		t.Fatalf("the async operation whose execution never started: %s", lo.Raw)
	}
	lo = second.Do(apptest.Request{Method: http.MethodGet, Path: "/v2/service_instances/crashed-false/last_operation"})
	if lo.Str("state") != "failed" || !strings.Contains(lo.Str("description"), "interrupted") {
		t.Fatalf("the interrupted sync operation: %s", lo.Raw)
	}
}

// haltingDriver is a fake Driver that blocks a synchronous change until the
// test lets it go, standing in for a slow backend so that another request
// can take the instance over meanwhile.
type haltingDriver struct {
	broker.Driver
	started, release chan struct{}
}

func (d haltingDriver) Begin(ctx context.Context, c broker.Change) (broker.Progress, error) {
	if c.Operation.Kind == broker.KindProvision {
		close(d.started)
		<-d.release
	}
	return d.Driver.Begin(ctx, c)
}

// TestASyncProvisionHaltedByADeprovisionIsNotReportedCreated: a deprovision
// that takes over a synchronous provision in flight makes that provision's
// request fail with ConcurrencyError, never 201.
func TestASyncProvisionHaltedByADeprovisionIsNotReportedCreated(t *testing.T) {
	b := apptest.Start(t, "")
	service, plan := b.Plan("fake-plan")
	_, p := b.Catalog.PlanByID(plan)
	base, _, _ := b.Local.Broker.Drivers.For(p)
	d := haltingDriver{Driver: base, started: make(chan struct{}), release: make(chan struct{})}
	b.Local.Broker.Drivers = drivers.Single(b.Catalog, d)

	done := make(chan apptest.Response)
	go func() {
		done <- b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/halted",
			Body: provisionBody(service, plan, map[string]any{})})
	}()
	<-d.started
	del := b.Do(apptest.Request{Method: http.MethodDelete, Path: "/v2/service_instances/halted?service_id=" + service + "&plan_id=" + plan})
	close(d.release)
	prov := <-done
	if prov.Status != http.StatusUnprocessableEntity || prov.Str("error") != "ConcurrencyError" {
		t.Fatalf("the halted provision answered %d %s", prov.Status, prov.Raw)
	}
	if del.Status != http.StatusOK {
		t.Fatalf("the deprovision answered %d %s", del.Status, del.Raw)
	}
	if _, err := b.Local.Store.GetInstance(context.Background(), "halted"); err == nil {
		t.Fatal("the instance survived its deprovision")
	}
}

// TestTheReaperStopsWhatOutlivesItsPollingDuration: an operation older than
// its plan's maximum_polling_duration is stopped and failed, with a reason.
func TestTheReaperStopsWhatOutlivesItsPollingDuration(t *testing.T) {
	b := apptest.StartWith(t, apptest.Options{ReapInterval: -1})
	service, plan := b.Plan("fake-async-plan") // maximum_polling_duration: 7200
	r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/slow?accepts_incomplete=true",
		Body: provisionBody(service, plan, map[string]any{"duration_seconds": 3600})})
	op := r.Str("operation")
	// The clock moves once the execution waits: its steps read it too.
	waittest.Until(t, func() error {
		if h, err := b.Local.Engine.History(context.Background(), op); err != nil || !slices.Contains(h, "Wait") {
			return fmt.Errorf("execution %s is not waiting yet: %q %v", op, h, err)
		}
		return nil
	})
	b.Local.Broker.Now = func() time.Time { return time.Now().UTC().Add(3 * time.Hour) }
	rep, err := b.Local.Broker.Reap(context.Background())
	if err != nil || rep.TimedOut != 1 {
		t.Fatalf("reap: %+v %v, want one operation timed out", rep, err)
	}
	lo := b.Do(apptest.Request{Method: http.MethodGet, Path: "/v2/service_instances/slow/last_operation?operation=" + op})
	if lo.Str("state") != "failed" || !strings.Contains(lo.Str("description"), "did not complete within 2h0m0s") {
		t.Fatalf("last_operation: %s", lo.Raw)
	}
	exec, err := b.Local.Engine.Describe(context.Background(), op)
	if err != nil || exec.Status != broker.ExecutionAborted {
		t.Fatalf("the execution is %s (%v), want ABORTED", exec.Status, err)
	}
	if del := b.Do(apptest.Request{Method: http.MethodDelete, Path: "/v2/service_instances/slow?service_id=" + service + "&plan_id=" + plan}); del.Status != http.StatusOK {
		t.Fatalf("deleting the failed instance: %d %s", del.Status, del.Raw)
	}
}

// TestTheReaperRemovesOperationsPastRetention: finished operation records
// go once they are older than their retention, and no sooner.
func TestTheReaperRemovesOperationsPastRetention(t *testing.T) {
	b := apptest.StartWith(t, apptest.Options{ReapInterval: -1})
	service, plan := b.Plan("fake-plan")
	b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/old", Body: provisionBody(service, plan, map[string]any{})})
	ctx := context.Background()
	if rep, _ := b.Local.Broker.Reap(ctx); rep.Expired != 0 {
		t.Fatalf("a fresh operation was removed: %+v", rep)
	}
	b.Local.Broker.Now = func() time.Time { return time.Now().UTC().Add(broker.Retention + time.Hour) }
	rep, err := b.Local.Broker.Reap(ctx)
	if err != nil || rep.Expired != 1 {
		t.Fatalf("reap after the retention: %+v %v, want one record removed", rep, err)
	}
	if ops, _ := b.Local.Store.ListOperations(ctx, "old"); len(ops) != 0 {
		t.Fatalf("operations left: %+v", ops)
	}
}

// stubbornDriver is a fake Driver whose Cleanup fails permanently until
// the test lets it through, standing in for a backend that refuses to
// delete.
type stubbornDriver struct {
	broker.Driver
	mu      *sync.Mutex
	refuses *bool
}

func (d stubbornDriver) Cleanup(ctx context.Context, x broker.Detached) (broker.Progress, error) {
	d.mu.Lock()
	refuses := *d.refuses
	d.mu.Unlock()
	if refuses {
		return broker.Progress{}, &broker.Failure{Description: "the backend refuses to delete it"}
	}
	return d.Driver.Cleanup(ctx, x)
}

// TestACleanupThatGivesUpIsListedAndAnOperatorRetriesIt: the resource of a
// failed provision whose cleanup gave up stays listed (ops detached), and
// `ops cleanup ID` deletes it once the cause is fixed.
func TestACleanupThatGivesUpIsListedAndAnOperatorRetriesIt(t *testing.T) {
	var mu sync.Mutex
	refuses := true
	b := apptest.StartWith(t, apptest.Options{ReapInterval: -1, Sleep: noSleep,
		Wrap: &app.Wrappers{Driver: func(d broker.Driver) broker.Driver { return stubbornDriver{d, &mu, &refuses} }}})
	service, plan := b.Plan("fake-async-plan")
	r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/stuck?accepts_incomplete=true",
		Body: provisionBody(service, plan, map[string]any{"duration_seconds": 1, "fail": true})})
	lo := b.WaitLastOperation("/v2/service_instances/stuck/last_operation?operation=" + r.Str("operation"))
	if lo.Str("state") != "failed" {
		t.Fatalf("provision: %s", lo.Raw)
	}
	ctx := context.Background()
	var failed broker.Detached
	waittest.Until(t, func() error {
		ds, _ := b.Local.Store.ListDetached(ctx)
		for _, d := range ds {
			if d.InstanceID == "stuck" && d.State == broker.DetachedFailed {
				failed = d
				return nil
			}
		}
		return fmt.Errorf("no failed cleanup listed: %+v", ds)
	})
	var out strings.Builder
	if err := app.Ops(ctx, b.Local.Broker, []string{"detached"}, &out); err != nil || !strings.Contains(out.String(), failed.ID) ||
		!strings.Contains(out.String(), "refuses to delete") {
		t.Fatalf("ops detached: %v\n%s", err, out.String())
	}
	mu.Lock()
	refuses = false
	mu.Unlock()
	out.Reset()
	if err := app.Ops(ctx, b.Local.Broker, []string{"cleanup", failed.ID}, &out); err != nil || !strings.Contains(out.String(), failed.CleanupName(2)) {
		t.Fatalf("ops cleanup: %v\n%s", err, out.String())
	}
	waittest.Until(t, func() error {
		if _, err := b.Local.Store.GetDetached(ctx, failed.ID); !errors.Is(err, broker.ErrNotFound) {
			return fmt.Errorf("the retried cleanup did not delete the resource (GetDetached: %v)", err)
		}
		return nil
	})
}
