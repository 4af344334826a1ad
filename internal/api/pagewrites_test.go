package api_test

import (
	"fmt"
	"net/http"
	"testing"
)

// TestPageWritesPerRequest pins the bbolt pages one request writes on the
// local broker (bbolt's TxStats.Write: each page a commit writes, and its
// meta page), over 200 requests of each kind in a row: an exact count of
// the file's writes, not a time, the same on a busy machine. On f925401 a
// synchronous provision wrote 6.6 pages and a bind on an instance with
// hundreds of bindings 10.8 (the freelist, rewritten with every commit,
// was one of them); on 7b0e725 5.28 and 9.70 (a bind changed four leaves:
// its binding, the instance, its operation, its record); the peer on
// brokerapi with bbolt, 5.1 and 5.1 (docs/performance.md). The bolt key
// layout of internal/store/bolt/layout.go puts a binding's record beside
// it and the instance beside its newest operations: 5.005 and 7.21; and
// items stored in binary (internal/store/bolt/itembin.go), an operation
// and an instance about half their JSON's bytes, fill fewer pages: 4.54
// and 6.51; and short keys (layout 4, internal/store/bolt/keys.go: a UUID
// in 16 bytes), more of them in a branch page and a leaf: 4.34 and 6.09;
// and each binding at a slot among the operations, made when it is first
// written (layout 5, internal/store/bolt/bindings.go), so that a bind's
// items lie in one leaf with its operation and the instance, not two: 5.18
// (the peer, measured in the same `make bench` run: 5.8); and the items in
// the file's root bucket (layout 7), so that no commit writes a page above
// theirs, and a leaf that splits keeps a bind's last item with the
// instance after it (third_party/bbolt/PATCH.md: Tx.Root,
// SplitBeforeLastInsert): 3.25 and 3.73 (on 4fc0b1e, 4.25 and 4.73).
func TestPageWritesPerRequest(t *testing.T) {
	br, serve := localBroker(t)
	service, plan := br.Plan("fake-plan")
	db := br.Local.Committer.DB()
	written := func() int64 { st := db.Stats(); return st.TxStats.GetWrite() }
	provision := fmt.Appendf(nil, `{"service_id":%q,"plan_id":%q,"organization_guid":"o","space_guid":"s","parameters":{}}`, service, plan)
	bind := fmt.Appendf(nil, `{"service_id":%q,"plan_id":%q,"bind_resource":{"app_guid":"app"}}`, service, plan)
	serve(http.MethodPut, "/v2/service_instances/bound", provision, http.StatusCreated)

	const n = 200
	for _, c := range []struct {
		name  string
		most  float64
		serve func(i int)
	}{
		{"a synchronous provision writes at most 3.5 pages (the peer 5.1)", 3.5, func(i int) {
			serve(http.MethodPut, fmt.Sprintf("/v2/service_instances/sync-%d", i), provision, http.StatusCreated)
		}},
		{"a synchronous bind writes at most 4 pages", 4, func(i int) {
			serve(http.MethodPut, fmt.Sprintf("/v2/service_instances/bound/service_bindings/b-%d", i), bind, http.StatusCreated)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := written()
			for i := range n {
				c.serve(i)
			}
			got := float64(written()-before) / n
			t.Logf("%.2f pages written per request", got)
			if got > c.most {
				t.Errorf("%.2f pages written per request, want at most %g", got, c.most)
			}
		})
	}
}
