package bolt

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/store/storetest"
)

// TestLayout1FileIsMoved opens testdata/layout1.db, a file that the store of
// 7b0e725 wrote (its putInstance, putBinding, putOperation, putResource and
// putDetached of layout1Items, in one update, on bbolt v1.4.3), and finds
// every item where the store now reads it.
func TestLayout1FileIsMoved(t *testing.T) {
	path := testMovedFile(t, "layout1.db", func(id string) string { return id })
	t.Run("a file of a later layout is refused", func(t *testing.T) {
		v, _ := strconv.Atoi(layoutVersion)
		later := strconv.Itoa(v + 1)
		setLayout(t, path, later)
		s, err := Open(path)
		if err == nil {
			s.Close()
			t.Fatal("Open succeeded, want the layout refused")
		}
		if !strings.Contains(err.Error(), "layout "+later) {
			t.Errorf("got %q, want it to name layout %s", err, later)
		}
	})
}

// TestLayout3FileIsMoved opens testdata/layout3.db, a file that the store of
// cb0ab17 wrote in layout 3 (text keys, binary values; then bbolt.Compact
// made it smaller, the same items), with the items of
// layout1Items under layout3IDs (UUIDs, an uppercase UUID, and other ids),
// and finds every item where the store now reads it (keys.go).
func TestLayout3FileIsMoved(t *testing.T) {
	path := testMovedFile(t, "layout3.db", layout3ID)
	t.Run("the keys are short", func(t *testing.T) {
		viewItems(t, path, func(c *bbolt.Cursor) {
			// i-1's operation op-i1: both ids UUIDs, 1+17+1+17 bytes.
			want := operationKey(layout3ID("i-1"), layout3ID("op-i1"))
			if k, v := c.Seek(want); !bytes.Equal(k, want) || len(k) != 36 || v == nil {
				t.Errorf("operation key %q (%d bytes), want %q (36)", k, len(k), want)
			}
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				if bytes.HasPrefix(k, []byte("i#")) {
					t.Errorf("key %q of layout 3 left", k)
				}
			}
		})
	})
}

// viewItems calls fn with a cursor on the items of the file at path: in
// the bucket "items" of a file of layout 6 or before, else in the root
// bucket, where the cursor also finds the top-level buckets (with a nil
// value, where an item's is not nil in a read).
func viewItems(t *testing.T, path string, fn func(c *bbolt.Cursor)) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bbolt.Tx) error {
		if b := tx.Bucket([]byte(itemsBucket)); b != nil {
			fn(b.Cursor())
		} else {
			fn(tx.Root().Cursor())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLayout4FileIsMoved opens testdata/layout4.db, a file that the store
// of d011d57 wrote in layout 4 (bindings keyed by their ids; then
// bbolt.Compact made it smaller, the same items), with the items of
// layout1Items under layout3IDs, and finds every item where the store now
// reads it: each binding and its record at a slot among the operations.
func TestLayout4FileIsMoved(t *testing.T) {
	path := testMovedFile(t, "layout4.db", layout3ID)
	t.Run("the bindings are at slots", func(t *testing.T) {
		viewItems(t, path, func(c *bbolt.Cursor) {
			var bindings, records int
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				sk, ok := skOf(k)
				if !ok {
					continue
				}
				if sk[0] == layout4Binding {
					t.Errorf("key %s of layout 4 left", showKey(k))
				}
				if _, _, record, isBinding, _ := slotSK(sk[1:]); sk[0] == skOperation && isBinding {
					if record {
						records++
					} else {
						bindings++
					}
				}
			}
			if bindings != 2 || records != 2 {
				t.Errorf("%d bindings and %d records at slots, want 2 and 2", bindings, records)
			}
		})
	})
}

// TestLayout5FileIsMoved opens testdata/layout5.db, layout4.db as the
// store of 609f2fd moved it to layout 5 (then bbolt.Compact made it
// smaller, the same items), and finds every item where it was: layout 6
// keeps layout 5's keys and reads its values as they are. An operation
// written since has its ids and fingerprint in their short forms.
func TestLayout5FileIsMoved(t *testing.T) {
	before := itemKeys(t, filepath.Join("testdata", "layout5.db"))
	path := testMovedFile(t, "layout5.db", layout3ID)
	if after := itemKeys(t, path); !slices.Equal(after, before) {
		t.Errorf("keys after the move:\n%q\nwant layout 5's:\n%q", after, before)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	inst := layout3ID("i-1")
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	op := broker.Operation{ID: "01936f7e-0009-7000-8000-000000000009", InstanceID: inst, Kind: broker.KindUpdate,
		State: broker.OperationSucceeded, Fingerprint: strings.Repeat("0956781685a518cf", 4), CreatedAt: now, UpdatedAt: now}
	if err := s.db.Update(func(t *bbolt.Tx) error { return buckets(t).putOperation(op) }); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetOperation(t.Context(), inst, op.ID); err != nil || got != op {
		t.Errorf("the operation written since: got %+v, %v; want %+v", got, err, op)
	}
	err = s.db.View(func(tx *bbolt.Tx) error {
		v := tx.Root().Get(operationKey(inst, op.ID))
		if !bytes.Contains(v, append([]byte{opID | formUUID}, mustUUID(op.ID)...)) || !bytes.Contains(v, []byte{opFingerprint | formHex, 32}) {
			t.Errorf("the operation written since is % x, want its id and fingerprint in their short forms", v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLayout6FileIsMoved opens testdata/layout6.db, layout5.db as the
// store of 4fc0b1e moved it to layout 6 and wrote op-i1 again, in layout
// 6's short forms (then bbolt.Compact made it smaller, the same items),
// and finds every item where it was, in the root bucket now (layout 7):
// op-i1 as layout 6 wrote it, the bucket "items" gone, the file whole.
func TestLayout6FileIsMoved(t *testing.T) {
	src := filepath.Join("testdata", "layout6.db")
	if v := layoutOf(t, src); v != "6" {
		t.Fatalf("%s is of layout %q, want 6", src, v)
	}
	opKey := operationKey(layout3ID("i-1"), layout3ID("op-i1"))
	short := append([]byte{opID | formUUID}, mustUUID(layout3ID("op-i1"))...)
	before := itemKeys(t, src)
	path := testMovedFile(t, "layout6.db", layout3ID)
	if after := itemKeys(t, path); !slices.Equal(after, before) || len(after) == 0 {
		t.Errorf("keys after the move:\n%q\nwant layout 6's:\n%q", after, before)
	}
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bbolt.Tx) error {
		if v := tx.Root().Get(opKey); !bytes.Contains(v, short) {
			t.Errorf("op-i1 is % x, want its id in its short form, as layout 6 wrote it", v)
		}
		for err := range tx.Check() {
			t.Errorf("check: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// itemKeys is the keys of the items of the file at path (viewItems).
func itemKeys(t *testing.T, path string) (out []string) {
	t.Helper()
	viewItems(t, path, func(c *bbolt.Cursor) {
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if v != nil { // not a bucket
				out = append(out, string(k))
			}
		}
	})
	return out
}

// layoutOf is the layout version that the file at path records.
func layoutOf(t *testing.T, path string) (v string) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bbolt.Tx) error {
		if b := tx.Bucket([]byte(layoutBucket)); b != nil {
			v = string(b.Get([]byte(layoutKey)))
		}
		return nil
	})
	return v
}

func mustUUID(s string) []byte {
	u, ok := uuidBytes(s)
	if !ok {
		panic(s + " is no UUID")
	}
	return u[:]
}

// layout3IDs are the ids of layout1Items in testdata/layout3.db: i-1 and its
// operations and first binding UUIDs (i-1's operations UUIDv7s, in the
// order of their times), b-2 a UUID in uppercase (kept as text), i-2 and
// its operation as they are.
var layout3IDs = map[string]string{
	"i-1":     "0e4bc3f0-6f2a-4c1e-9d3b-7a1f2e3d4c5b",
	"b-1":     "5a7d2c1e-0b3f-4e6a-8c9d-1f2e3a4b5c6d",
	"b-2":     "6B8E3D2F-1C40-4F7B-9DAE-2A3F4B5C6D7E",
	"op-i1":   "01936f7e-0000-7000-8000-000000000001",
	"op-b1":   "01936f7e-0002-7000-8000-000000000002",
	"op-b2":   "01936f7e-0003-7000-8000-000000000003",
	"op-gone": "01936f7e-0001-7000-8000-00000000000f",
}

func layout3ID(id string) string {
	if u, ok := layout3IDs[id]; ok {
		return u
	}
	return id
}

func setLayout(t *testing.T, path, v string) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error { return tx.Bucket([]byte(layoutBucket)).Put([]byte(layoutKey), []byte(v)) })
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
}

// testMovedFile opens a copy of testdata/name, a file of an earlier layout
// that holds layout1Items(id), twice, and finds every item each time. It
// returns the copy's path.
func testMovedFile(t *testing.T, name string, id func(string) string) string {
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "broker.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	insts, bindings, ops, records, detached := layout1Items(id)
	check := func(t *testing.T, s *Store) {
		ctx := t.Context()
		for _, want := range insts {
			if got, err := s.GetInstance(ctx, want.ID); err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("instance %s: got %+v, %v; want %+v", want.ID, got, err, want)
			}
		}
		for _, want := range bindings {
			if got, err := s.GetBinding(ctx, want.InstanceID, want.ID); err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("binding %s: got %+v, %v; want %+v", want.ID, got, err, want)
			}
		}
		for _, want := range ops {
			if got, err := s.GetOperation(ctx, want.InstanceID, want.ID); err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("operation %s: got %+v, %v; want %+v", want.ID, got, err, want)
			}
		}
		for _, want := range records {
			if got, err := storetest.Record(ctx, s, want.InstanceID, want.Name); err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("record %s/%s: got %+v, %v; want %+v", want.InstanceID, want.Name, got, err, want)
			}
		}
		for _, want := range detached {
			if got, err := s.GetDetached(ctx, want.ID); err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("detached %s: got %+v, %v; want %+v", want.ID, got, err, want)
			}
		}
		inProgress, err := s.ListInProgress(ctx)
		if ids := opIDs(inProgress); err != nil || !slices.Equal(ids, []string{id("op-b2"), id("op-i2")}) {
			t.Errorf("in progress: got %q, %v; want op-b2, op-i2", ids, err)
		}
		listed, _, err := s.ListInstances(ctx, broker.InstanceFilter{}, "")
		if err != nil || len(listed) != 2 || listed[0].ID != id("i-1") || listed[1].ID != id("i-2") {
			t.Errorf("instances listed: got %+v, %v; want i-1, i-2", listed, err)
		}
		listed, _, err = s.ListInstances(ctx, broker.InstanceFilter{PlanID: "plan-small"}, "")
		if err != nil || len(listed) != 2 {
			t.Errorf("instances of plan-small: got %+v, %v; want i-1, i-2", listed, err)
		}
		listedOps, err := s.ListOperations(ctx, id("i-1"))
		if ids := opIDs(listedOps); err != nil || !slices.Equal(ids, []string{id("op-i1"), id("op-b1"), id("op-b2")}) {
			t.Errorf("operations of i-1: got %q, %v", ids, err)
		}
		snap, err := s.Load(ctx, id("i-1"), id("op-b1"), "")
		if names := recordNames(snap.Records); err != nil || snap.Binding == nil || snap.Binding.ID != id("b-1") ||
			!slices.Equal(names, []string{"binding-" + id("b-1"), "db", "zone"}) {
			t.Errorf("Load of op-b1: binding %+v, records %q, %v; want b-1 with binding-b-1, db, zone", snap.Binding, names, err)
		}
		snap, err = s.LoadWhole(ctx, id("i-1"), id("op-i1"))
		if names := recordNames(snap.Records); err != nil || !slices.Equal(snap.BindingIDs, []string{id("b-1"), id("b-2")}) ||
			!slices.Equal(names, []string{"binding-" + id("b-1"), "binding-" + id("b-2"), "db", "zone"}) {
			t.Errorf("LoadWhole: bindings %q, records %q, %v; want b-1, b-2 and every record", snap.BindingIDs, names, err)
		}
		err = s.db.View(func(tx *bbolt.Tx) error {
			if v := string(tx.Bucket([]byte(layoutBucket)).Get([]byte(layoutKey))); v != layoutVersion {
				t.Errorf("layout version %q, want %q", v, layoutVersion)
			}
			if tx.Bucket([]byte(layout1InProgress)) != nil {
				t.Errorf("bucket %s of layout 1 left", layout1InProgress)
			}
			if tx.Bucket([]byte(itemsBucket)) != nil {
				t.Errorf("bucket %s of layouts 1 to 6 left", itemsBucket)
			}
			return ForEachItem(tx, func(k, _ []byte) error {
				if bytes.HasPrefix(k, []byte("i#")) {
					t.Errorf("key %q of an earlier layout left", k)
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("every item is found", func(t *testing.T) { check(t, s) })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	t.Run("and found again once the file is opened again", func(t *testing.T) {
		s, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		check(t, s)
	})
	return path
}

func opIDs(ops []broker.Operation) []string {
	var ids []string
	for _, op := range ops {
		ids = append(ids, op.ID)
	}
	return ids
}

func recordNames(rs []broker.Resource) []string {
	var names []string
	for _, r := range rs {
		names = append(names, r.Name)
	}
	return names
}

// layout1Items are the items of testdata/layout1.db, a file that the store
// of 7b0e725 wrote in the first key layout (PK + NUL + SK, a binding's
// record at r#binding-<id>, the instance at SK "instance"): two instances,
// one with two bindings, their operations (finished and in progress),
// records (the instance's own and the bindings'), and a detached record.
func layout1Items(ids func(string) string) ([]broker.Instance, []broker.Binding, []broker.Operation, []broker.Resource, []broker.Detached) {
	at := func(s int) time.Time { return time.Date(2026, 11, 1, 12, 0, s, 123456789, time.UTC) }
	op := func(instanceID, bindingID, id string, kind broker.OperationKind, state broker.OperationState, s int) broker.Operation {
		id = ids(id)
		o := broker.Operation{ID: id, InstanceID: ids(instanceID), BindingID: ids(bindingID), Kind: kind, State: state,
			Fingerprint: "fp-" + id, PlanID: "plan-small", CreatedAt: at(s), UpdatedAt: at(s), NextCheckAt: at(s + 30)}
		if state != broker.OperationInProgress {
			o.FinishedAt, o.ExpiresAt, o.Description = at(s+1), at(s+7*86400), "done"
		}
		return o
	}
	inst := func(id, opID string, state broker.InstanceState, bindingOps int) broker.Instance {
		id = ids(id)
		return broker.Instance{ID: id, InstanceRequest: broker.InstanceRequest{ServiceID: "svc-1", PlanID: "plan-small",
			OrganizationGUID: "org-1", SpaceGUID: "space-1", Parameters: json.RawMessage(`{"size":3}`)},
			State: state, LastOp: ids(opID), BindingOps: bindingOps, Fingerprint: "fp-" + id, Version: 4, CreatedAt: at(0), UpdatedAt: at(5)}
	}
	i2 := inst("i-2", "op-i2", broker.InstanceProvisioning, 0)
	i2.Op = ids("op-i2")
	bd := func(id, opID string, state broker.BindingState) broker.Binding {
		id = ids(id)
		return broker.Binding{InstanceID: ids("i-1"), ID: id, BindingRequest: broker.BindingRequest{ServiceID: "svc-1", PlanID: "plan-small", AppGUID: "app-" + id},
			State: state, Credentials: map[string]any{"user": "u-" + id}, LastOp: ids(opID), Fingerprint: "fp-" + id, Version: 1, CreatedAt: at(2), UpdatedAt: at(3)}
	}
	b2 := bd("b-2", "op-b2", broker.BindingCreating)
	b2.Op = ids("op-b2")
	rec := func(instanceID, name string) broker.Resource {
		return broker.Resource{InstanceID: ids(instanceID), Name: name, Data: json.RawMessage(`{"name":"` + name + `"}`), UpdatedAt: at(4)}
	}
	return []broker.Instance{inst("i-1", "op-i1", broker.InstanceReady, 1), i2},
		[]broker.Binding{bd("b-1", "op-b1", broker.BindingReady), b2},
		[]broker.Operation{
			op("i-1", "", "op-i1", broker.KindProvision, broker.OperationSucceeded, 0),
			op("i-1", "b-1", "op-b1", broker.KindBind, broker.OperationSucceeded, 2),
			op("i-1", "b-2", "op-b2", broker.KindBind, broker.OperationInProgress, 3),
			op("i-2", "", "op-i2", broker.KindProvision, broker.OperationInProgress, 6),
			op("gone", "", "op-gone", broker.KindDeprovision, broker.OperationSucceeded, 1),
		},
		[]broker.Resource{rec("i-1", "db"), rec("i-1", "binding-"+ids("b-1")), rec("i-1", "binding-"+ids("b-2")), rec("i-1", "zone"), rec("i-2", "db")},
		[]broker.Detached{{ID: "d-1", InstanceID: ids("gone"), Name: "db", Data: json.RawMessage(`{"name":"db"}`), PlanID: "plan-small",
			OperationID: ids("op-gone"), Reason: "deprovision", State: broker.DetachedPending, CreatedAt: at(1), UpdatedAt: at(1)}}
}
