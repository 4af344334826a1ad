package bolt

import (
	"errors"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// bindingAt is a binding of instance i-1 for the tests below.
func bindingAt(id string) broker.Binding {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	return broker.Binding{ID: id, InstanceID: "i-1", State: broker.BindingReady, Version: 1, CreatedAt: at, UpdatedAt: at}
}

func slots(s *Store) int {
	s.bindings.mu.RLock()
	defer s.bindings.mu.RUnlock()
	n := 0
	for _, t := range s.bindings.of {
		n += t.len()
	}
	return n
}

// TestABindingsSlotGoesWithItsLastItem: the index keeps a binding's slot
// while the binding or its record is stored, and lets it go once neither
// is, so that it holds what the file holds and no more.
func TestABindingsSlotGoesWithItsLastItem(t *testing.T) {
	s := openStore(t)
	ctx := t.Context()
	rec := broker.Resource{InstanceID: "i-1", Name: broker.BindingRecord("b-1"), Data: []byte(`{"a":1}`)}
	if err := s.update(ctx, func(t tx) error {
		if err := t.putBinding(bindingAt("b-1")); err != nil {
			return err
		}
		return t.putResource(rec)
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.update(ctx, func(t tx) error { return t.deleteBinding("i-1", "b-1") }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetBinding(ctx, "i-1", "b-1"); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("deleted binding: %v, want not found", err)
	}
	snap, err := s.Load(ctx, "i-1", "", "b-1")
	if err != nil || len(snap.Records) != 1 || snap.Records[0].Name != rec.Name {
		t.Errorf("the record a deleted binding left: %+v, %v", snap.Records, err)
	}
	if n := slots(s); n != 1 {
		t.Errorf("%d slots with the record left, want 1", n)
	}
	if err := s.DeleteResource(ctx, "i-1", rec.Name); err != nil {
		t.Fatal(err)
	}
	if n := slots(s); n != 0 {
		t.Errorf("%d slots once neither item is left, want 0", n)
	}
}

// TestABindingDeletedAndMadeAgainInOneCommitIsFound: a commit that deletes
// a binding and then makes it again (writers of one group, groupcommit)
// keeps its slot: the slot that the delete left empty is not let go after
// the commit, which would lose the binding made again.
func TestABindingDeletedAndMadeAgainInOneCommitIsFound(t *testing.T) {
	s := openStore(t)
	ctx := t.Context()
	if err := s.update(ctx, func(t tx) error { return t.putBinding(bindingAt("b-1")) }); err != nil {
		t.Fatal(err)
	}
	if err := s.update(ctx, func(t tx) error {
		if err := t.deleteBinding("i-1", "b-1"); err != nil {
			return err
		}
		return t.putBinding(bindingAt("b-1"))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetBinding(ctx, "i-1", "b-1"); err != nil {
		t.Errorf("the binding made again: %v", err)
	}
	if n := slots(s); n != 1 {
		t.Errorf("%d slots, want 1", n)
	}
}

// TestAFailedWriteLeavesNoBinding: a write that fails after it took a slot
// leaves no binding behind (the slot reads as none), and the binding can be
// made later, at that slot.
func TestAFailedWriteLeavesNoBinding(t *testing.T) {
	s := openStore(t)
	ctx := t.Context()
	failed := errors.New("failed")
	err := s.update(ctx, func(t tx) error {
		if err := t.putBinding(bindingAt("b-1")); err != nil {
			return err
		}
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("got %v, want the write's error", err)
	}
	if _, err := s.GetBinding(ctx, "i-1", "b-1"); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("binding after a failed write: %v, want not found", err)
	}
	if snap, err := s.LoadWhole(ctx, "i-1", ""); err != nil || len(snap.BindingIDs) != 0 {
		t.Errorf("bindings after a failed write: %q, %v, want none", snap.BindingIDs, err)
	}
	if err := s.update(ctx, func(t tx) error { return t.putBinding(bindingAt("b-1")) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetBinding(ctx, "i-1", "b-1"); err != nil {
		t.Errorf("the binding made later: %v", err)
	}
}

// TestBindingsAreFoundAgainWhenTheFileIsOpened: the index is filled from
// the bindings' keys (each holds its binding's id): every binding and
// every record a binding left is found by its id in a file opened again,
// and a binding's operations are listed without it.
func TestBindingsAreFoundAgainWhenTheFileIsOpened(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broker.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ids := []string{"b-2", "0e4bc3f0-6f2a-4c1e-9d3b-7a1f2e3d4c5b", "b-1"}
	op := broker.Operation{ID: "01936f7e-0000-7000-8000-000000000001", InstanceID: "i-1", Kind: broker.KindBind, BindingID: "b-1",
		State: broker.OperationSucceeded, CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()}
	err = s.update(ctx, func(t tx) error {
		for _, id := range ids {
			if err := t.putBinding(bindingAt(id)); err != nil {
				return err
			}
			if err := t.putOperation(op); err != nil {
				return err
			}
		}
		return t.putResource(broker.Resource{InstanceID: "i-1", Name: broker.BindingRecord("gone"), Data: []byte(`{}`)})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	for _, id := range ids {
		if _, err := s.GetBinding(ctx, "i-1", id); err != nil {
			t.Errorf("binding %s: %v", id, err)
		}
	}
	snap, err := s.LoadWhole(ctx, "i-1", "")
	want := slices.Clone(ids)
	slices.SortFunc(want, compareIDs)
	if err != nil || !slices.Equal(snap.BindingIDs, want) || len(snap.Records) != 1 || snap.Records[0].Name != broker.BindingRecord("gone") {
		t.Errorf("LoadWhole: bindings %q, records %+v, %v; want %q and the record of gone", snap.BindingIDs, snap.Records, err, want)
	}
	ops, err := s.ListOperations(ctx, "i-1")
	if err != nil || len(ops) != 1 || ops[0].ID != op.ID {
		t.Errorf("operations: %+v, %v; want the one", ops, err)
	}
}

// TestBindingSlotsAgreeWithAModel runs random writes of bindings and their
// records (puts and deletes, several to a commit, some commits failing)
// and checks after each commit, and in a file opened again, that the store
// finds what a model of plain maps holds: each binding by its id, each
// instance's bindings and records (LoadWhole), and no slot more than the
// items left need.
func TestBindingSlotsAgreeWithAModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broker.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(40, 1))
	insts := []string{"i-1", "0e4bc3f0-6f2a-4c1e-9d3b-7a1f2e3d4c5b"}
	ids := []string{"b-1", "b-2", "5a7d2c1e-0b3f-4e6a-8c9d-1f2e3a4b5c6d", "6B8E3D2F-1C40-4F7B-9DAE-2A3F4B5C6D7E"}
	type key struct{ inst, id string }
	bindings, records := map[key]bool{}, map[key]bool{}
	check := func(step int) {
		t.Helper()
		want := 0
		for _, inst := range insts {
			var wantIDs, wantRecords []string
			for _, id := range ids {
				k := key{inst, id}
				_, err := s.GetBinding(ctx, inst, id)
				if found := err == nil; found != bindings[k] {
					t.Fatalf("step %d: binding %s/%s found %v (%v), want %v", step, inst, id, found, err, bindings[k])
				}
				if bindings[k] {
					wantIDs = append(wantIDs, id)
				}
				if records[k] {
					wantRecords = append(wantRecords, broker.BindingRecord(id))
				}
				if bindings[k] || records[k] {
					want++
				}
			}
			slices.SortFunc(wantIDs, compareIDs)
			slices.Sort(wantRecords)
			snap, err := s.LoadWhole(ctx, inst, "")
			if err != nil || !slices.Equal(snap.BindingIDs, wantIDs) || !slices.Equal(recordNames(snap.Records), wantRecords) {
				t.Fatalf("step %d: %s holds bindings %q and records %q (%v), want %q and %q", step, inst, snap.BindingIDs, recordNames(snap.Records), err, wantIDs, wantRecords)
			}
		}
		if n := slots(s); n != want {
			t.Fatalf("step %d: %d slots, want %d", step, n, want)
		}
	}
	failed := errors.New("failed")
	for step := range 400 {
		nb, nr := maps.Clone(bindings), maps.Clone(records)
		fail := rng.IntN(8) == 0
		err := s.update(ctx, func(t tx) error {
			for range 1 + rng.IntN(4) {
				k := key{insts[rng.IntN(len(insts))], ids[rng.IntN(len(ids))]}
				var err error
				switch rng.IntN(4) {
				case 0:
					b := bindingAt(k.id)
					b.InstanceID = k.inst
					err, nb[k] = t.putBinding(b), true
				case 1:
					err, nb[k] = t.deleteBinding(k.inst, k.id), false
				case 2:
					err, nr[k] = t.putResource(broker.Resource{InstanceID: k.inst, Name: broker.BindingRecord(k.id), Data: []byte(`{}`)}), true
				case 3:
					err, nr[k] = t.deleteResource(k.inst, broker.BindingRecord(k.id)), false
				}
				if err != nil {
					return err
				}
			}
			if fail {
				return failed
			}
			return nil
		})
		switch {
		case fail && !errors.Is(err, failed):
			t.Fatalf("step %d: %v, want the write's error", step, err)
		case !fail && err != nil:
			t.Fatalf("step %d: %v", step, err)
		case !fail:
			bindings, records = nb, nr
		}
		if fail {
			// The failed write's slots read as nothing; they stay until
			// the file is opened again, and are not counted.
			s.Close()
			if s, err = Open(path); err != nil {
				t.Fatal(err)
			}
		}
		check(step)
	}
}
