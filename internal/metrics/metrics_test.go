package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/logging"
	"github.com/serverless-osb/broker/internal/store/bolt"
	"github.com/serverless-osb/broker/internal/store/storetest"
)

// testCatalog has one offering with two plans.
const testCatalog = `
services:
  - id: 0b7f4b0e-5a56-4b8e-9f3c-1f1f7f0d7a01
    name: fake-db
    description: A database that is not one.
    bindable: true
    plans:
      - id: plan-small
        name: small
        description: The small one.
      - id: plan-large
        name: large
        description: The large one.
`

var stamp = time.Date(2025, time.March, 1, 12, 0, 0, 0, time.UTC)

// document is an EMF document as CloudWatch Logs reads it.
type document struct {
	AWS struct {
		Timestamp         int64 `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Namespace  string     `json:"Namespace"`
			Dimensions [][]string `json:"Dimensions"`
			Metrics    []struct {
				Name string `json:"Name"`
				Unit string `json:"Unit"`
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	} `json:"_aws"`
	// Root holds every member, the dimensions' and metrics' values with
	// the rest.
	Root map[string]any `json:"-"`
}

// documents reads the JSON lines in out, checking that each is one EMF
// document of one directive whose every dimension and metric has a value.
func documents(t *testing.T, out *bytes.Buffer) []document {
	t.Helper()
	var docs []document
	for _, line := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var d document
		if err := json.Unmarshal(line, &d); err != nil {
			t.Fatalf("not JSON: %s: %v", line, err)
		}
		if err := json.Unmarshal(line, &d.Root); err != nil {
			t.Fatal(err)
		}
		if len(d.AWS.CloudWatchMetrics) != 1 {
			t.Fatalf("want one metric directive, got %s", line)
		}
		dir := d.AWS.CloudWatchMetrics[0]
		for _, set := range dir.Dimensions {
			for _, name := range set {
				if _, ok := d.Root[name].(string); !ok {
					t.Errorf("dimension %s has no string value in %s", name, line)
				}
			}
		}
		for _, m := range dir.Metrics {
			if _, ok := d.Root[m.Name].(float64); !ok {
				t.Errorf("metric %s has no number in %s", m.Name, line)
			}
		}
		docs = append(docs, d)
	}
	out.Reset()
	return docs
}

// want is what a test expects of one document.
type want struct {
	dimensions [][]string
	values     map[string]any    // every dimension's and metric's value
	units      map[string]string // every metric's unit
}

func (w want) check(t *testing.T, d document) {
	t.Helper()
	dir := d.AWS.CloudWatchMetrics[0]
	if dir.Namespace != "Test/Broker" {
		t.Errorf("namespace %q, want Test/Broker", dir.Namespace)
	}
	if d.AWS.Timestamp != stamp.UnixMilli() {
		t.Errorf("timestamp %d, want %d", d.AWS.Timestamp, stamp.UnixMilli())
	}
	if !reflect.DeepEqual(dir.Dimensions, w.dimensions) {
		t.Errorf("dimension sets %v, want %v", dir.Dimensions, w.dimensions)
	}
	units := map[string]string{}
	for _, m := range dir.Metrics {
		units[m.Name] = m.Unit
	}
	if !reflect.DeepEqual(units, w.units) {
		t.Errorf("metrics and units %v, want %v", units, w.units)
	}
	got := map[string]any{}
	for k, v := range d.Root {
		if k != "_aws" {
			got[k] = v
		}
	}
	if !reflect.DeepEqual(got, w.values) {
		t.Errorf("values %v, want %v", got, w.values)
	}
}

func newRecorder(t *testing.T) (*Recorder, *bytes.Buffer) {
	t.Helper()
	cat, err := catalog.Parse("test.yaml", []byte(testCatalog))
	if err != nil {
		t.Fatal(err)
	}
	out := &bytes.Buffer{}
	w := NewWriter(out, "Test/Broker")
	w.Now = func() time.Time { return stamp }
	return New(w, cat), out
}

var byPlanAndKind = [][]string{{"Service", "Plan", "Kind"}, {"Kind"}, {}}

func operation(id string, kind broker.OperationKind, planID string) broker.Operation {
	return broker.Operation{ID: id, InstanceID: "i-1", Kind: kind, State: broker.OperationInProgress, PlanID: planID,
		Async: true, CreatedAt: stamp, UpdatedAt: stamp, NextCheckAt: stamp.Add(time.Minute)}
}

func finished(op broker.Operation, state broker.OperationState, after time.Duration) broker.Operation {
	op.State, op.UpdatedAt, op.FinishedAt, op.ExpiresAt = state, op.CreatedAt.Add(after), op.CreatedAt.Add(after), op.CreatedAt.Add(after+broker.Retention)
	return op
}

func TestStoreRecordsOperations(t *testing.T) {
	ctx := context.Background()
	rec, out := newRecorder(t)
	bs, err := bolt.Open(filepath.Join(t.TempDir(), "broker.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bs.Close() })
	s := NewStore(bs, rec)

	prov := operation("op-prov", broker.KindProvision, "plan-small")
	inst := broker.Instance{ID: "i-1", InstanceRequest: broker.InstanceRequest{ServiceID: "0b7f4b0e-5a56-4b8e-9f3c-1f1f7f0d7a01", PlanID: "plan-small"}, State: broker.InstanceProvisioning, Op: prov.ID, LastOp: prov.ID, Version: 1, CreatedAt: stamp, UpdatedAt: stamp}
	started := func(kind, plan string) want {
		return want{byPlanAndKind,
			map[string]any{"Service": "fake-db", "Plan": plan, "Kind": kind, "OperationStarted": 1.0},
			map[string]string{"OperationStarted": "Count"}}
	}
	ended := func(kind string, succeeded, failed, ms float64) want {
		return want{byPlanAndKind,
			map[string]any{"Service": "fake-db", "Plan": "small", "Kind": kind,
				"OperationSucceeded": succeeded, "OperationFailed": failed, "OperationDuration": ms},
			map[string]string{"OperationSucceeded": "Count", "OperationFailed": "Count", "OperationDuration": "Milliseconds"}}
	}
	ready := inst
	ready.State, ready.Op, ready.Version = broker.InstanceReady, "", 2
	upd := operation("op-upd", broker.KindUpdate, "plan-small")
	updating := ready
	updating.State, updating.Op, updating.LastOp, updating.Version = broker.InstanceUpdating, upd.ID, upd.ID, 3
	bind := operation("op-bind", broker.KindBind, "plan-small")
	bind.BindingID = "b-1"
	binding := broker.Binding{InstanceID: "i-1", ID: "b-1", BindingRequest: broker.BindingRequest{ServiceID: inst.ServiceID, PlanID: "plan-small"}, State: broker.BindingCreating,
		Op: bind.ID, LastOp: bind.ID, Version: 1, CreatedAt: stamp, UpdatedAt: stamp}
	unbind := operation("op-unbind", broker.KindUnbind, "plan-small")
	unbind.BindingID = "b-1"
	deleting := binding
	deleting.State, deleting.Op, deleting.LastOp, deleting.Version = broker.BindingDeleting, unbind.ID, unbind.ID, 2
	deprov := operation("op-deprov", broker.KindDeprovision, "plan-small")

	steps := []struct {
		name string
		call func() error
		want []want
	}{
		{"a provision that starts counts one provision started, by service, plan and kind",
			func() error { return s.CreateInstance(ctx, inst, prov, nil) },
			[]want{started("provision", "small")}},
		{"a provision whose write fails its condition counts nothing",
			func() error { return s.CreateInstance(ctx, inst, prov, nil) }, nil},
		{"a provision that succeeds counts one succeeded, none failed, and its duration",
			func() error {
				return s.FinishOperation(ctx, broker.Finish{Op: finished(prov, broker.OperationSucceeded, 1500*time.Millisecond), Instance: &ready})
			},
			[]want{ended("provision", 1, 0, 1500)}},
		{"a finish whose write fails its condition counts nothing",
			func() error {
				return s.FinishOperation(ctx, broker.Finish{Op: finished(prov, broker.OperationSucceeded, time.Second), Instance: &ready})
			}, nil},
		{"an update that starts counts one update started",
			func() error { return s.LockInstance(ctx, broker.LockInstance{Instance: updating, Version: 2, Op: upd}) },
			[]want{started("update", "small")}},
		{"an update that fails counts one failed and its duration",
			func() error {
				back := ready
				back.Version = 4
				return s.FinishOperation(ctx, broker.Finish{Op: finished(upd, broker.OperationFailed, time.Minute), Instance: &back})
			},
			[]want{ended("update", 0, 1, 60000)}},
		{"a bind that starts counts one bind started",
			func() error { return s.CreateBinding(ctx, binding, bind, nil) },
			[]want{started("bind", "small")}},
		{"an unbind that halts its bind counts the bind failed, then the unbind started",
			func() error {
				halted := finished(bind, broker.OperationFailed, 2*time.Second)
				return s.LockBinding(ctx, broker.LockBinding{Binding: deleting, Version: 1, Holder: bind.ID, Op: unbind, Halted: &halted})
			},
			[]want{ended("bind", 0, 1, 2000), started("unbind", "small")}},
		{"an unbind that succeeds counts one succeeded",
			func() error {
				return s.FinishOperation(ctx, broker.Finish{Op: finished(unbind, broker.OperationSucceeded, 0), DeleteBinding: true, ReleaseBinding: true})
			},
			[]want{ended("unbind", 1, 0, 0)}},
		{"a deprovision of a plan the catalog no longer has counts under service unknown and the plan's id",
			func() error {
				cur, err := bs.GetInstance(ctx, "i-1")
				if err != nil {
					return err
				}
				next := cur
				next.State, next.Op, next.LastOp, next.Version, next.PlanID = broker.InstanceDeprovisioning, deprov.ID, deprov.ID, cur.Version+1, "plan-gone"
				op := deprov
				op.PlanID = "plan-gone"
				return s.LockInstance(ctx, broker.LockInstance{Instance: next, Version: cur.Version, Op: op})
			},
			[]want{{byPlanAndKind,
				map[string]any{"Service": "unknown", "Plan": "plan-gone", "Kind": "deprovision", "OperationStarted": 1.0},
				map[string]string{"OperationStarted": "Count"}}}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			err := st.call()
			var conflict *broker.ConflictError
			if st.want == nil && !errors.As(err, &conflict) {
				t.Fatalf("want a conflict, got %v", err)
			}
			if st.want != nil && err != nil {
				t.Fatal(err)
			}
			docs := documents(t, out)
			if len(docs) != len(st.want) {
				t.Fatalf("%d documents, want %d", len(docs), len(st.want))
			}
			for i, w := range st.want {
				w.check(t, docs[i])
			}
		})
	}
}

func TestStoreRecordsCleanupsThatGiveUp(t *testing.T) {
	ctx := context.Background()
	rec, out := newRecorder(t)
	bs, err := bolt.Open(filepath.Join(t.TempDir(), "broker.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bs.Close() })
	s := NewStore(bs, rec)
	d := broker.Detached{ID: "d1", InstanceID: "i-1", Name: "db", Data: json.RawMessage(`{}`), PlanID: "plan-large",
		OperationID: "op-1", State: broker.DetachedPending, CreatedAt: stamp, UpdatedAt: stamp}
	storetest.Detach(t, bs, broker.Resource{InstanceID: "i-1", Name: "db", Data: json.RawMessage(`{}`)}, d)
	t.Run("a cleanup that starts counts nothing", func(t *testing.T) {
		cleaning := d
		cleaning.State, cleaning.Attempts = broker.DetachedCleaning, 1
		if err := s.UpdateDetached(ctx, cleaning, 0); err != nil {
			t.Fatal(err)
		}
		if docs := documents(t, out); len(docs) != 0 {
			t.Errorf("%d documents, want none", len(docs))
		}
	})
	t.Run("a cleanup that gives up counts one failed cleanup, by service and plan", func(t *testing.T) {
		failed := d
		failed.State, failed.Attempts, failed.Failure = broker.DetachedFailed, 1, "gave up"
		if err := s.UpdateDetached(ctx, failed, 1); err != nil {
			t.Fatal(err)
		}
		docs := documents(t, out)
		if len(docs) != 1 {
			t.Fatalf("%d documents, want 1", len(docs))
		}
		want{[][]string{{"Service", "Plan"}, {}},
			map[string]any{"Service": "fake-db", "Plan": "large", "CleanupFailed": 1.0},
			map[string]string{"CleanupFailed": "Count"}}.check(t, docs[0])
	})
	t.Run("a failed record whose write fails its condition counts nothing", func(t *testing.T) {
		failed := d
		failed.State, failed.Attempts = broker.DetachedFailed, 1
		if err := s.UpdateDetached(ctx, failed, 0); err == nil {
			t.Fatal("want a conflict")
		}
		if docs := documents(t, out); len(docs) != 0 {
			t.Errorf("%d documents, want none", len(docs))
		}
	})
}

func TestCountPolls(t *testing.T) {
	rec, out := newRecorder(t)
	h := CountPolls(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	}), rec)
	polls := func(target string) []want {
		return []want{{[][]string{{"Target"}, {}},
			map[string]any{"Target": target, "LastOperationPolls": 1.0},
			map[string]string{"LastOperationPolls": "Count"}}}
	}
	tests := []struct {
		name, method, path string
		authenticated      bool
		want               []want
	}{
		{"an instance's poll counts one poll of an instance", "GET", "/v2/service_instances/i-1/last_operation", true, polls("instance")},
		{"a binding's poll counts one poll of a binding", "GET", "/v2/service_instances/i-1/service_bindings/b-1/last_operation", true, polls("binding")},
		{"a poll with a query counts", "GET", "/v2/service_instances/i-1/last_operation?operation=x&plan_id=p", true, polls("instance")},
		{"an unauthenticated poll counts nothing", "GET", "/v2/service_instances/i-1/last_operation", false, nil},
		{"another route counts nothing", "GET", "/v2/service_instances/i-1", true, nil},
		{"another method counts nothing", "DELETE", "/v2/service_instances/i-1/last_operation", true, nil},
		{"the catalog counts nothing", "GET", "/v2/catalog", true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.path, nil)
			if tt.authenticated {
				r.SetBasicAuth("broker", "secret")
			}
			h.ServeHTTP(httptest.NewRecorder(), r)
			docs := documents(t, out)
			if len(docs) != len(tt.want) {
				t.Fatalf("%d documents, want %d", len(docs), len(tt.want))
			}
			for i, w := range tt.want {
				w.check(t, docs[i])
			}
		})
	}
}

func TestReap(t *testing.T) {
	rec, out := newRecorder(t)
	rec.Reap(broker.ReapReport{InProgress: 7, Restarted: 1, Failed: 2, TimedOut: 3, Detached: 4, CleanupsStarted: 5, CleanupsFailed: 6, Expired: 8})
	docs := documents(t, out)
	if len(docs) != 1 {
		t.Fatalf("%d documents, want 1", len(docs))
	}
	want{[][]string{{}},
		map[string]any{"ReaperRestarted": 1.0, "ReaperFailed": 2.0, "ReaperTimedOut": 3.0, "ReaperCleanupsStarted": 5.0,
			"DetachedResources": 4.0, "OperationsInProgress": 7.0},
		map[string]string{"ReaperRestarted": "Count", "ReaperFailed": "Count", "ReaperTimedOut": "Count",
			"ReaperCleanupsStarted": "Count", "DetachedResources": "Count", "OperationsInProgress": "Count"}}.check(t, docs[0])
}

func TestUpgrade(t *testing.T) {
	rec, out := newRecorder(t)
	rep := broker.UpgradeReport{Ended: true, Tally: broker.Tally{Upgraded: 5, Failed: 1, NotAttempted: 3, Skipped: 2, Blocked: 6}}
	rec.Upgrade(rep)
	rep.Ended = false
	rec.Upgrade(rep) // a Finish run again
	rec.Upgrade(broker.UpgradeReport{Ended: true, Tally: broker.Tally{WouldChange: 4}})
	docs := documents(t, out)
	if len(docs) != 1 {
		t.Fatalf("%d documents, want 1: a campaign is counted once, a dry run not at all", len(docs))
	}
	want{[][]string{{}},
		map[string]any{"UpgradeUpgraded": 5.0, "UpgradeFailed": 4.0, "UpgradeBlocked": 6.0, "UpgradeSkipped": 2.0},
		map[string]string{"UpgradeUpgraded": "Count", "UpgradeFailed": "Count", "UpgradeBlocked": "Count", "UpgradeSkipped": "Count"}}.check(t, docs[0])
}

func TestNilRecorderRecordsNothing(t *testing.T) {
	var rec *Recorder
	bs := &Store{}
	if got := NewStore(bs, nil); got != broker.Store(bs) {
		t.Error("NewStore with no recorder wraps the store")
	}
	h := http.NotFoundHandler()
	if got := CountPolls(h, nil); reflect.ValueOf(got).Pointer() != reflect.ValueOf(h).Pointer() {
		t.Error("CountPolls with no recorder wraps the handler")
	}
	// None of these may panic.
	rec.OperationStarted(broker.Operation{})
	rec.OperationFinished(broker.Operation{State: broker.OperationFailed})
	rec.CleanupFailed(broker.Detached{})
	rec.LastOperationPoll("instance")
	rec.Reap(broker.ReapReport{})
	rec.Upgrade(broker.UpgradeReport{Ended: true})
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriterNeverFailsWhatItMeasures(t *testing.T) {
	w := NewWriter(failingWriter{}, "Test/Broker")
	var logs bytes.Buffer
	w.Logger = logging.New(&logs, slog.LevelInfo)
	w.Write(nil, nil, Metric{"X", Count, 1})
	if !bytes.Contains(logs.Bytes(), []byte("disk full")) {
		t.Errorf("the failed write was not logged: %q", logs.String())
	}
}

// TestTheSealingModePassesThrough: the sealing store, wrapped around this
// one in the functions, reads and records its mode in the store beneath.
func TestTheSealingModePassesThrough(t *testing.T) {
	bs, err := bolt.Open(filepath.Join(t.TempDir(), "broker.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bs.Close() })
	rec, _ := newRecorder(t)
	modes, ok := NewStore(bs, rec).(broker.SealingModes)
	if !ok {
		t.Fatal("the metrics store records no sealing mode")
	}
	want := broker.SealingMode{SealedOnly: true, KeyID: "k-1"}
	if err := modes.SetSealingMode(t.Context(), want); err != nil {
		t.Fatal(err)
	}
	if got, err := bs.SealingMode(t.Context()); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("the store beneath holds %+v %v, want %+v", got, err, want)
	}
	if got, err := modes.SealingMode(t.Context()); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("read through: %+v %v, want %+v", got, err, want)
	}
}
