// Package storetest is the contract every broker.Store must pass: the
// conditions of each write, what a failed condition reports and leaves
// unchanged, round-trip fidelity, listing order and races. It uses the
// broker.Store interface only, so the bolt and DynamoDB stores run the very
// same cases:
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) broker.Store { ... an empty store, closed by t.Cleanup ... })
//	}
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
)

// NewStore returns an empty store for one test and registers its cleanup.
type NewStore func(t *testing.T) broker.Store

type testCase struct {
	name string
	run  func(t *testing.T, newStore NewStore)
}

// Run runs every contract case as a subtest, each on a fresh store from
// newStore.
func Run(t *testing.T, newStore func(t *testing.T) broker.Store) {
	groups := [][]testCase{
		readCases, roundTripCases, instanceCases, bindingCases,
		operationCases, loadCases, listCases, resourceCases, detachedCases,
		expiryCases, refusedCases, sealingCases, campaignCases, raceCases,
	}
	for _, group := range groups {
		for _, c := range group {
			t.Run(c.name, func(t *testing.T) { c.run(t, newStore) })
		}
	}
}

// RunSecrets runs the cases of broker.SecretStore, which a store that
// keeps the items itself has (a decorator, such as the sealing store,
// hands out values opened and has not), each on a fresh store.
func RunSecrets(t *testing.T, newStore NewSecretStore) {
	for _, c := range secretCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, func(t *testing.T) broker.Store { s, _ := newStore(t); return s }) })
	}
	for _, c := range interleavedSecretCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newStore) })
	}
}

// NewSecretStore returns an empty store for one test, registers its
// cleanup, and returns the store's Interleave.
type NewSecretStore func(t *testing.T) (broker.Store, Interleave)

// Interleave has the store run write once in the middle of its next call
// that reads an item to write it (ReplaceSecret): after the read, before
// the write, where another writer may come between them. A store that
// reads and writes in one transaction, which no writer comes between,
// runs write at once, before that call.
type Interleave func(write func())

// The ids that snapshot reads: every case that checks "nothing changed" uses
// only these.
var (
	snapshotInstances = []string{"i-1", "i-2"}
	snapshotBindings  = []string{"b-1", "b-2", "b-3"}
	snapshotResources = []string{"r-1"}
)

// world is everything a store holds under the snapshot ids, and every
// detached resource.
type world struct {
	Instances  map[string]*broker.Instance
	Bindings   map[string]*broker.Binding // by instance id + "/" + binding id
	Operations map[string][]broker.Operation
	Resources  map[string]*broker.Resource
	InProgress []broker.Operation
	Detached   []broker.Detached
}

func (w world) instance(id string) *broker.Instance { return w.Instances[id] }

func (w world) binding(instanceID, id string) *broker.Binding {
	return w.Bindings[instanceID+"/"+id]
}

// snapshot reads every item under the snapshot ids, through the port.
func snapshot(t *testing.T, s broker.Store) world {
	t.Helper()
	w := world{
		Instances:  map[string]*broker.Instance{},
		Bindings:   map[string]*broker.Binding{},
		Operations: map[string][]broker.Operation{},
		Resources:  map[string]*broker.Resource{},
	}
	for _, id := range snapshotInstances {
		w.Instances[id] = getInstance(t, s, id)
		for _, b := range snapshotBindings {
			w.Bindings[id+"/"+b] = getBinding(t, s, id, b)
		}
		for _, r := range snapshotResources {
			w.Resources[id+"/"+r] = getResource(t, s, id, r)
		}
		ops, err := s.ListOperations(t.Context(), id)
		must(t, err, "ListOperations")
		w.Operations[id] = ops
	}
	ops, err := s.ListInProgress(t.Context())
	must(t, err, "ListInProgress")
	w.InProgress = ops
	w.Detached = listDetached(t, s)
	return w
}

// unchanged fails the test when the store differs from before.
func unchanged(t *testing.T, s broker.Store, before world) {
	t.Helper()
	equal(t, "store after the failed write", snapshot(t, s), before)
}

func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// conflict returns the *broker.ConflictError in err, failing the test when
// there is none.
func conflict(t *testing.T, err error) *broker.ConflictError {
	t.Helper()
	var c *broker.ConflictError
	if !errors.As(err, &c) {
		t.Fatalf("got error %v, want a *broker.ConflictError", err)
	}
	return c
}

func equal(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %s\nwant %s", what, show(got), show(want))
	}
}

// show prints values as JSON: %v would hide Credentials behind [REDACTED]
// and print pointers as addresses.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func notFound(t *testing.T, err error, what string) bool {
	t.Helper()
	if errors.Is(err, broker.ErrNotFound) {
		return true
	}
	must(t, err, what)
	return false
}

func getInstance(t *testing.T, s broker.Store, id string) *broker.Instance {
	t.Helper()
	inst, err := s.GetInstance(t.Context(), id)
	if notFound(t, err, "GetInstance "+id) {
		return nil
	}
	return &inst
}

func getBinding(t *testing.T, s broker.Store, instanceID, id string) *broker.Binding {
	t.Helper()
	b, err := s.GetBinding(t.Context(), instanceID, id)
	if notFound(t, err, "GetBinding "+instanceID+"/"+id) {
		return nil
	}
	return &b
}

func getOperation(t *testing.T, s broker.Store, instanceID, id string) *broker.Operation {
	t.Helper()
	op, err := s.GetOperation(t.Context(), instanceID, id)
	if notFound(t, err, "GetOperation "+instanceID+"/"+id) {
		return nil
	}
	return &op
}

func getResource(t *testing.T, s broker.Store, instanceID, name string) *broker.Resource {
	t.Helper()
	r, err := Record(t.Context(), s, instanceID, name)
	if notFound(t, err, "Record "+instanceID+"/"+name) {
		return nil
	}
	return &r
}

// records are an instance's resource records as Load reads them (an
// instance gets every record), by name.
func records(t *testing.T, s broker.Store, instanceID string) []broker.Resource {
	t.Helper()
	rs, err := Records(t.Context(), s, instanceID)
	must(t, err, "Load "+instanceID)
	return rs
}

func getDetached(t *testing.T, s broker.Store, id string) *broker.Detached {
	t.Helper()
	d, err := s.GetDetached(t.Context(), id)
	if notFound(t, err, "GetDetached "+id) {
		return nil
	}
	return &d
}

func listDetached(t *testing.T, s broker.Store) []broker.Detached {
	t.Helper()
	ds, err := s.ListDetached(t.Context())
	must(t, err, "ListDetached")
	return ds
}

func inProgressIDs(t *testing.T, s broker.Store) []string {
	t.Helper()
	ops, err := s.ListInProgress(t.Context())
	must(t, err, "ListInProgress")
	out := ids(ops)
	slices.Sort(out) // the port promises no order
	return out
}

func ids(ops []broker.Operation) []string {
	out := []string{}
	for _, op := range ops {
		out = append(out, op.ID)
	}
	return out
}

// Records returns every resource record of an instance, its bindings'
// too (LoadWhole), by name: what other packages' tests use to see what a
// driver or the broker stored.
func Records(ctx context.Context, s broker.Repository, instanceID string) ([]broker.Resource, error) {
	snap, err := s.LoadWhole(ctx, instanceID, "")
	return snap.Records, err
}

// Record returns one of an instance's resource records, or an error that
// wraps broker.ErrNotFound.
func Record(ctx context.Context, s broker.Repository, instanceID, name string) (broker.Resource, error) {
	rs, err := Records(ctx, s, instanceID)
	if err != nil {
		return broker.Resource{}, err
	}
	for _, r := range rs {
		if r.Name == name {
			return r, nil
		}
	}
	return broker.Resource{}, fmt.Errorf("record %s/%s: %w", instanceID, name, broker.ErrNotFound)
}
