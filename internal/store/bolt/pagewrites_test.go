package bolt_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// TestAnOperationInProgressWritesNoOtherLeaf counts bbolt's page writes
// (TxStats.Write, exact) of provisions that start an asynchronous
// operation, 300 in a row: the instance, its operation and the key that
// marks it in progress lie in one leaf of the items, which the commit
// writes with its branches, the buckets' root page and the meta page. On
// 7b0e725 the operations in progress were indexed in a bucket of their own,
// whose leaf and root each such commit wrote too: 7.16 pages, then 4.18;
// with the items in binary (itembin.go), smaller, 4.07.
func TestAnOperationInProgressWritesNoOtherLeaf(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "broker.db"))
	defer s.Close()
	db := s.DB()
	written := func() int64 { st := db.Stats(); return st.TxStats.GetWrite() }
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	create := func(i int) {
		t.Helper()
		id := fmt.Sprintf("i-%05d", i)
		op := broker.Operation{ID: fmt.Sprintf("op-%05d", i), InstanceID: id, Kind: broker.KindProvision,
			State: broker.OperationInProgress, Async: true, PlanID: "p", CreatedAt: now, UpdatedAt: now, NextCheckAt: now}
		inst := broker.Instance{ID: id, InstanceRequest: broker.InstanceRequest{ServiceID: "s", PlanID: "p",
			Parameters: json.RawMessage(`{"size":3}`)}, State: broker.InstanceProvisioning, Op: op.ID, LastOp: op.ID,
			CreatedAt: now, UpdatedAt: now}
		if err := s.CreateInstance(t.Context(), inst, op, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 300 { // a tree of more than one level, and an index too big to be inline
		create(i)
	}
	const n, most = 300, 4.1
	before := written()
	for i := range n {
		create(300 + i)
	}
	got := float64(written()-before) / n
	t.Logf("%.2f pages written per provision", got)
	if got > most {
		t.Errorf("%.2f pages written per provision, want at most %g", got, most)
	}
}
