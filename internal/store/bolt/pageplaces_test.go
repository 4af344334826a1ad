package bolt_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	googleuuid "github.com/google/uuid"
	"go.etcd.io/bbolt"

	"github.com/serverless-osb/broker/internal/broker"
)

// TestWherePagesGo lists where the pages of synchronous provisions go,
// commit by commit, with items the size of the demo broker's (`make run`'s
// demo driver: an instance, its operation and a sealed record) and random
// instance ids, as platforms make them, in a file of 2,000 instances. The
// pages it finds in the trees are those bbolt counts (TxStats.Write, but
// for the meta page); the figures it logs are docs/performance.md's. It
// pins the pages a provision writes: 6.60 with layout 3's text keys (a
// tree of 4 levels), 5.55 with layout 4's (keys.go: 3 levels), 5.49 with
// layout 6's values (itembin.go's short forms). Then binds on one instance
// with 2,000 bindings, with random binding ids and parameters of random
// lengths, as platforms send them: 8.60 pages a bind in layout 4 (the
// binding's leaf, where its random id falls, and its operation's with the
// instance). In layout 5 a bind's items go into the leaf of the instance's
// newest item, just before the instance: one leaf (5.51 a bind with
// bindings all of one size, which this test had until session 44), until a
// split leaves the instance first in its leaf. bbolt puts a key in the
// leaf of the key before it, so from then on every bind writes that leaf
// and the instance's (6.51): with parameters of random lengths, most
// instances with thousands of bindings come to it (docs/performance.md,
// session 44). In layout 7 the items are the root bucket's, so that no
// commit writes the root bucket's page besides theirs (4.48 a provision),
// and a leaf that would split after a bind's last item and before the
// instance splits before that item (bbolt's SplitBeforeLastInsert,
// third_party/bbolt/PATCH.md): the next bind's items go to the instance's
// leaf, and a bind writes one leaf (4.34 a bind).
func TestWherePagesGo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broker.db")
	s := open(t, path)
	defer s.Close()
	db := s.DB()
	pageSize := db.Info().PageSize
	rng := rand.New(rand.NewPCG(1, 2))
	uuid := func() string {
		return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", rng.Uint32(), rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint64()&0xffffffffffff)
	}
	now := time.Date(2026, 11, 28, 12, 0, 0, 123456789, time.UTC)
	fp := strings.Repeat("0956781685a518cf", 4)
	sealed := json.RawMessage(`{"v":1,"alg":"A256GCM","kid":"k20261128T212712.353951045Z-14d3626e","ctx":"5MEBTXF0ZLw=","nonce":"9zItlJLuBIz9IfeC","ct":"` + strings.Repeat("twka/vJLJvEG+zrNGhHf", 12) + `"}`)
	provision := func(id string) {
		op := broker.Operation{ID: uuid(), InstanceID: id, Kind: broker.KindProvision, State: broker.OperationSucceeded,
			Description: "The service instance was provisioned.", Fingerprint: fp, PlanID: uuid(),
			CreatedAt: now, UpdatedAt: now, NextCheckAt: now, FinishedAt: now, ExpiresAt: now}
		inst := broker.Instance{ID: id, InstanceRequest: broker.InstanceRequest{ServiceID: uuid(), PlanID: op.PlanID,
			OrganizationGUID: "o", SpaceGUID: "s", Parameters: json.RawMessage(`{}`),
			MaintenanceInfo: &broker.MaintenanceInfo{Version: "1.0.0", Description: "First release of the fake service."}},
			DashboardURL: "https://demo.serverless-osb.invalid/instances/" + id, State: broker.InstanceReady, LastOp: op.ID,
			Fingerprint: fp, Version: 3, CreatedAt: now, UpdatedAt: now}
		rec := broker.Resource{InstanceID: id, Name: "instance", Data: sealed, UpdatedAt: now}
		if err := s.CreateInstance(t.Context(), inst, op, &broker.Settled{Records: broker.RecordChanges{Save: []broker.Resource{rec}}}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(name string, n int, do func(i int)) float64 {
		t.Helper()
		tally := map[string]int{}
		before := readPageMap(t, path, pageSize)
		writes := func() int64 { st := db.Stats(); return st.TxStats.GetWrite() }
		w0 := writes()
		for i := range n {
			w := writes()
			do(i)
			after := readPageMap(t, path, pageSize)
			found := 0
			for _, p := range written(before, after) {
				place, c, _ := strings.Cut(p, " ×")
				var k int
				fmt.Sscan(c, &k)
				tally[place] += k
				found += k
			}
			if got := writes() - w; got != int64(found)+1 {
				t.Fatalf("%s %d: bbolt wrote %d pages, the trees hold %d new ones and a meta page", name, i, got, found)
			}
			before = after
		}
		var parts []string
		for p, c := range tally {
			parts = append(parts, fmt.Sprintf("%s %.2f", p, float64(c)/float64(n)))
		}
		slices.Sort(parts)
		got := float64(writes()-w0) / float64(n)
		t.Logf("%s: %.2f pages a request (TxStats.Write, with the meta page): %s", name, got, strings.Join(parts, ", "))
		return got
	}
	for range 2000 {
		provision(uuid())
	}
	if got, most := count("synchronous provision", 300, func(int) { provision(uuid()) }), 4.8; got > most {
		t.Errorf("%.2f pages written per provision, want at most %g", got, most)
	}
	// Binds on one instance with random binding ids, as platforms make
	// them, each with its operation and sealed record (the demo driver's).
	bound := uuid()
	provision(bound)
	var inst *broker.Instance
	bind := func(int) {
		t.Helper()
		if inst == nil {
			got, err := s.GetInstance(t.Context(), bound)
			if err != nil {
				t.Fatal(err)
			}
			inst = &got
		}
		// The broker's operation ids are UUIDv7s (newest last).
		id := uuid()
		op := broker.Operation{ID: googleuuid.Must(googleuuid.NewV7()).String(), InstanceID: bound, BindingID: id, Kind: broker.KindBind, State: broker.OperationSucceeded,
			Description: "The service binding was created.", Fingerprint: fp, PlanID: inst.PlanID,
			CreatedAt: now, UpdatedAt: now, NextCheckAt: now, FinishedAt: now, ExpiresAt: now}
		b := broker.Binding{ID: id, InstanceID: bound, State: broker.BindingReady, LastOp: op.ID, Fingerprint: fp,
			Version: 1, CreatedAt: now, UpdatedAt: now, Sealed: sealed}
		b.ServiceID, b.PlanID = inst.ServiceID, inst.PlanID
		b.Parameters = json.RawMessage(fmt.Sprintf(`{"name":%q}`, strings.Repeat("a", rng.IntN(60))))
		rec := broker.Resource{InstanceID: bound, Name: broker.BindingRecord(id), Data: sealed, UpdatedAt: now}
		err := s.CreateBinding(t.Context(), b, op, &broker.Settled{Records: broker.RecordChanges{Save: []broker.Resource{rec}}, InstanceVersion: inst.Version})
		if err != nil {
			t.Fatal(err)
		}
		inst.Version++
	}
	for i := range 2000 {
		bind(i)
	}
	if got, most := count("bind on an instance with 2,000 bindings", 300, bind), 4.6; got > most {
		t.Errorf("%.2f pages written per bind, want at most %g", got, most)
	}
	err := db.View(func(tx *bbolt.Tx) error {
		st := tx.Root().Stats()
		t.Logf("the items: a tree of %d levels, %d branch pages, %d leaves, %d bytes in them", st.Depth, st.BranchPageN, st.LeafPageN, st.LeafInuse)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
