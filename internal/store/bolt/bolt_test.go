package bolt_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/store/bolt"
	"github.com/serverless-osb/broker/internal/store/storetest"
	"github.com/serverless-osb/broker/internal/waittest"
)

func open(t testing.TB, path string) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestContract(t *testing.T) {
	newStore := func(t *testing.T) broker.Store {
		s := open(t, filepath.Join(t.TempDir(), "broker.db"))
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return s
	}
	storetest.Run(t, newStore)
	// bolt reads and writes in one transaction: nothing comes between.
	storetest.RunSecrets(t, func(t *testing.T) (broker.Store, storetest.Interleave) {
		return newStore(t), func(write func()) { write() }
	})
}

func TestData(t *testing.T) {
	t.Run("items survive closing and opening the file again", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "data", "broker.db") // the directory does not exist yet
		s := open(t, path)
		now := time.Date(2025, 3, 1, 12, 0, 0, 1, time.UTC)
		op := broker.Operation{ID: "op-1", InstanceID: "i-1", Kind: broker.KindProvision, State: broker.OperationInProgress, CreatedAt: now}
		inst := broker.Instance{ID: "i-1", InstanceRequest: broker.InstanceRequest{ServiceID: "s", PlanID: "p", Parameters: json.RawMessage(`{"a":1}`)}, State: broker.InstanceProvisioning, Op: op.ID,
			CreatedAt: now}
		res := broker.Resource{InstanceID: "i-1", Name: "r", Data: json.RawMessage(`[1]`), UpdatedAt: now}
		if err := s.CreateInstance(t.Context(), inst, op, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.PutResource(t.Context(), res); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		s = open(t, path)
		defer s.Close()
		gotInst, err := s.GetInstance(t.Context(), "i-1")
		if err != nil || !reflect.DeepEqual(gotInst, inst) {
			t.Errorf("instance after reopening: got %+v, %v; want %+v", gotInst, err, inst)
		}
		gotRes, err := storetest.Record(t.Context(), s, "i-1", "r")
		if err != nil || !reflect.DeepEqual(gotRes, res) {
			t.Errorf("resource after reopening: got %+v, %v; want %+v", gotRes, err, res)
		}
		inProgress, err := s.ListInProgress(t.Context())
		if err != nil || len(inProgress) != 1 || inProgress[0].ID != "op-1" {
			t.Errorf("in progress after reopening: got %+v, %v; want op-1", inProgress, err)
		}
	})

	t.Run("a second Open of the same file fails, rather than waiting for the lock, with a clear error", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "broker.db")
		s := open(t, path)
		defer s.Close()
		// The first store keeps the lock until the test ends: a second Open
		// that waited for it would never return.
		opened := make(chan error, 1)
		go func() {
			second, err := bolt.Open(path)
			if err == nil {
				second.Close()
			}
			opened <- err
		}()
		err := waittest.Recv(t, opened, "the second Open's return")
		if err == nil {
			t.Fatal("second Open succeeded, want ErrLocked")
		}
		if !errors.Is(err, bolt.ErrLocked) || !strings.Contains(err.Error(), path) {
			t.Errorf("got %q, want bolt.ErrLocked naming %s", err, path)
		}
	})

	t.Run("items are keyed as the DynamoDB table keys them, but the instance after its operations and a binding's record beside the binding", func(t *testing.T) {
		s := open(t, filepath.Join(t.TempDir(), "broker.db"))
		defer s.Close()
		ctx := t.Context()
		op := broker.Operation{ID: "op-1", InstanceID: "i-1", Kind: broker.KindProvision, State: broker.OperationInProgress}
		inst := broker.Instance{ID: "i-1", State: broker.InstanceProvisioning, Op: op.ID}
		finish := func(op broker.Operation, f broker.Finish) {
			t.Helper()
			op.State = broker.OperationSucceeded
			f.Op = op
			if err := s.FinishOperation(ctx, f); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.CreateInstance(ctx, inst, op, nil); err != nil {
			t.Fatal(err)
		}
		inst.State, inst.Op = broker.InstanceReady, ""
		finish(op, broker.Finish{Instance: &inst})
		storetest.Detach(t, s, broker.Resource{InstanceID: "i-1", Name: "old"}, broker.Detached{ID: "d-1", InstanceID: "i-1", Name: "old"})
		bindOp := broker.Operation{ID: "op-2", InstanceID: "i-1", BindingID: "b-1", Kind: broker.KindBind, State: broker.OperationInProgress}
		if err := s.CreateBinding(ctx, broker.Binding{InstanceID: "i-1", ID: "b-1", Op: bindOp.ID}, bindOp, nil); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"db", broker.BindingRecord("b-1")} {
			if err := s.PutResource(ctx, broker.Resource{InstanceID: "i-1", Name: name}); err != nil {
				t.Fatal(err)
			}
		}

		var keys []string
		err := s.DB().View(func(tx *bbolt.Tx) error {
			if tx.Bucket([]byte("operations_in_progress")) != nil {
				t.Error("the bucket of the operations in progress of layout 1 exists")
			}
			return bolt.ForEachItem(tx, func(k, v []byte) error {
				// Shown as layout 3 wrote them (keys.go).
				keys = append(keys, bolt.ShowKey(k))
				// An instance's items are in binary (itembin.go), an
				// in-progress key empty.
				binary := len(v) > 0 && v[0] == 0x01
				if !json.Valid(v) && !binary && (len(v) > 0 || !strings.Contains(bolt.ShowKey(k), `\x00op$`)) {
					t.Errorf("item %q is neither JSON nor binary: %s", k, v)
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		// The bind (op-2) is in progress: its in-progress key follows the
		// operations.
		want := []string{"detached\x00d-1", "i#i-1\x00b#b-1", "i#i-1\x00b#b-1\x00r", "i#i-1\x00op#detach-d-1", "i#i-1\x00op#op-1", "i#i-1\x00op#op-2",
			"i#i-1\x00op$op-2", "i#i-1\x00p#instance", "i#i-1\x00r#db"}
		for i, k := range want {
			want[i] = strconv.Quote(k)
		}
		if strings.Join(keys, "|") != strings.Join(want, "|") {
			t.Errorf("keys: got %q, want %q", keys, want)
		}
	})

	t.Run("New shares a DB and leaves other buckets and the file to their owner", func(t *testing.T) {
		db, err := bbolt.Open(filepath.Join(t.TempDir(), "shared.db"), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		err = db.Update(func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucket([]byte("executions"))
			if err != nil {
				return err
			}
			return b.Put([]byte("exec-1"), []byte("running"))
		})
		if err != nil {
			t.Fatal(err)
		}
		s, err := bolt.New(db)
		if err != nil {
			t.Fatal(err)
		}
		if s.DB() != db {
			t.Error("DB() is not the DB passed to New")
		}
		if err := s.PutResource(t.Context(), broker.Resource{InstanceID: "i-1", Name: "r"}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		err = db.View(func(tx *bbolt.Tx) error {
			if got := string(tx.Bucket([]byte("executions")).Get([]byte("exec-1"))); got != "running" {
				t.Errorf("executions bucket: got %q, want it untouched", got)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("the shared DB is unusable after Close: %v", err)
		}
	})

	t.Run("ids that cannot be keys are refused", func(t *testing.T) {
		s := open(t, filepath.Join(t.TempDir(), "broker.db"))
		defer s.Close()
		ctx := t.Context()
		r := broker.Resource{InstanceID: "i-1", Name: "r", Data: json.RawMessage(`{}`)}
		if err := s.PutResource(ctx, r); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"", "a\x00b"} {
			calls := []struct {
				name string
				call func() error
			}{
				{"CreateInstance", func() error {
					op := broker.Operation{ID: "op", InstanceID: id, State: broker.OperationInProgress}
					return s.CreateInstance(ctx, broker.Instance{ID: id}, op, nil)
				}},
				{"UpdateDetached", func() error {
					return s.UpdateDetached(ctx, broker.Detached{ID: id, InstanceID: r.InstanceID, Name: r.Name}, 0)
				}},
				{"DeleteDetached", func() error { return s.DeleteDetached(ctx, id) }},
			}
			for _, c := range calls {
				var conflict *broker.ConflictError
				if err := c.call(); err == nil || errors.As(err, &conflict) || errors.Is(err, broker.ErrNotFound) {
					t.Errorf("%s(%q): got %v, want an invalid id error", c.name, id, err)
				}
			}
		}
		if got, err := storetest.Record(ctx, s, r.InstanceID, r.Name); err != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("resource: got %+v, %v; want it still attached", got, err)
		}
		if ds, err := s.ListDetached(ctx); err != nil || len(ds) != 0 {
			t.Errorf("detached: got %+v, %v; want none", ds, err)
		}
	})

	t.Run("a cancelled context stops a call before it starts", func(t *testing.T) {
		s := open(t, filepath.Join(t.TempDir(), "broker.db"))
		defer s.Close()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := s.GetInstance(ctx, "i-1"); !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
	})
}

// TestPlanIndexFilledOnOpen: the plan index, in memory, is filled from the
// file's instances when it is opened (a file written before the index, or
// by an earlier run), so that ListInstances of a plan lists the instances
// the file holds.
func TestPlanIndexFilledOnOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broker.db")
	s := open(t, path)
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct{ id, plan string }{{"i-1", "p-1"}, {"i-2", "p-2"}, {"i-3", "p-1"}} {
		op := broker.Operation{ID: "prov-" + c.id, InstanceID: c.id, Kind: broker.KindProvision, State: broker.OperationInProgress, CreatedAt: now}
		inst := broker.Instance{ID: c.id, InstanceRequest: broker.InstanceRequest{ServiceID: "s", PlanID: c.plan}, State: broker.InstanceProvisioning, Op: op.ID, CreatedAt: now}
		if err := s.CreateInstance(t.Context(), inst, op, nil); err != nil {
			t.Fatal(err)
		}
	}
	// A partition without its instance, between two instances.
	if err := s.PutResource(t.Context(), broker.Resource{InstanceID: "i-2a", Name: "r", Data: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	defer s.Close()
	list, next, err := s.ListInstances(t.Context(), broker.InstanceFilter{PlanID: "p-1"}, "")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, inst := range list {
		ids = append(ids, inst.ID)
	}
	if !reflect.DeepEqual(ids, []string{"i-1", "i-3"}) || next != "" {
		t.Errorf("instances of p-1 after opening: %v, next %q; want [i-1 i-3]", ids, next)
	}
}

// TestInstancePagesOfUUIDsAndOtherIDs: ListInstances pages the instances,
// whose ids are UUIDs (16 bytes in their keys) and other text, in one
// order, with or without a plan, each instance once, over pages of 100.
func TestInstancePagesOfUUIDsAndOtherIDs(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "broker.db"))
	defer s.Close()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(3, 4))
	var ids []string
	for i := range 250 {
		id := fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", rng.Uint32(), rng.Uint32()&0xffff, rng.Uint32()&0xfff, rng.Uint32()&0xfff, rng.Uint64()&0xffffffffffff)
		switch i % 3 {
		case 1:
			id = strings.ToUpper(id)
		case 2:
			id = fmt.Sprintf("i-%03d", i)
		}
		ids = append(ids, id)
		op := broker.Operation{ID: "prov-" + id, InstanceID: id, Kind: broker.KindProvision, State: broker.OperationInProgress, CreatedAt: now}
		inst := broker.Instance{ID: id, InstanceRequest: broker.InstanceRequest{ServiceID: "s", PlanID: "p-1"}, State: broker.InstanceProvisioning, Op: op.ID, CreatedAt: now}
		if err := s.CreateInstance(t.Context(), inst, op, nil); err != nil {
			t.Fatal(err)
		}
	}
	all := func(f broker.InstanceFilter) []string {
		var got []string
		page := ""
		for {
			list, next, err := s.ListInstances(t.Context(), f, page)
			if err != nil {
				t.Fatal(err)
			}
			for _, inst := range list {
				got = append(got, inst.ID)
			}
			if next == "" {
				return got
			}
			page = next
		}
	}
	byKey, byPlan := all(broker.InstanceFilter{}), all(broker.InstanceFilter{PlanID: "p-1"})
	if !slices.Equal(byKey, byPlan) {
		t.Errorf("the pages without a plan and with one differ:\n%q\n%q", byKey, byPlan)
	}
	slices.Sort(ids)
	sorted := slices.Clone(byKey)
	slices.Sort(sorted)
	if !slices.Equal(sorted, ids) {
		t.Errorf("listed %d instances, want each of the %d once", len(byKey), len(ids))
	}
}

// TestTheOperationsInProgressAreIndexed: ListInProgress, which reads the
// operations the index of those in progress names (progress.go), lists
// every operation in progress and no other, as operations start and
// finish, and again once the file is opened anew (the index filled from
// the file's in-progress keys).
func TestTheOperationsInProgressAreIndexed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broker.db")
	s := open(t, path)
	ctx := t.Context()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	want := map[string]bool{}
	check := func(s *bolt.Store, when string) {
		t.Helper()
		ops, err := s.ListInProgress(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, op := range ops {
			got[op.ID] = true
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: in progress %v, want %v", when, got, want)
		}
	}
	for i := range 40 {
		id := fmt.Sprintf("%08x-0000-4000-8000-%012x", i*7919, i)
		if i%3 == 0 {
			id = fmt.Sprintf("i-%d", i)
		}
		op := broker.Operation{ID: fmt.Sprintf("01936f7e-%04x-7000-8000-%012x", i, i), InstanceID: id, Kind: broker.KindProvision,
			State: broker.OperationInProgress, CreatedAt: now.Add(time.Duration(i) * time.Second)}
		inst := broker.Instance{ID: id, InstanceRequest: broker.InstanceRequest{ServiceID: "s", PlanID: "p-1"}, State: broker.InstanceProvisioning, Op: op.ID, CreatedAt: now}
		if err := s.CreateInstance(ctx, inst, op, nil); err != nil {
			t.Fatal(err)
		}
		want[op.ID] = true
		if i%4 != 0 {
			op.State, op.FinishedAt = broker.OperationSucceeded, now
			inst.State, inst.Op, inst.LastOp = broker.InstanceReady, "", op.ID
			if err := s.FinishOperation(ctx, broker.Finish{Op: op, Instance: &inst}); err != nil {
				t.Fatal(err)
			}
			delete(want, op.ID)
		}
		check(s, fmt.Sprintf("after instance %d", i))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	defer s.Close()
	check(s, "once opened anew")
}
