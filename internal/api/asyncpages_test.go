package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/serverless-osb/broker/internal/api"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// TestPageWritesPerAsyncProvision pins the bbolt pages an asynchronous
// provision costs on the local broker, all told: its 202's commit, its
// first Task's (the Begin Task records the change's progress) and its
// execution's record, in its Wait of an hour. 200 provisions one at a
// time, each once the one before it is in its Wait, so that no commit is
// shared by chance, then the engine closed (it writes what it holds): an
// exact count of the file's writes, not a time, the same on every run. On
// 981785a 13.56: each execution's record was written twice (its start with
// its first Task's commit, then in its Wait), each time alone in its
// commit, and the executions' pages split half full; now once, 16 at a
// time (local.Options.Restarted): 8.55 on 4fc0b1e; with the items in the
// root bucket (layout 7), no commit writes the root bucket's page besides
// theirs: 6.55. The peer on brokerapi with bbolt, which
// starts no workflow, writes 5.3 (docs/performance.md; `make bench`
// shares commits as a busy broker does, this test none).
func TestPageWritesPerAsyncProvision(t *testing.T) {
	br, _ := localBroker(t)
	service, plan := br.Plan("fake-async-plan")
	body := fmt.Appendf(nil, `{"service_id":%q,"plan_id":%q,"organization_guid":"o","space_guid":"s","parameters":{"duration_seconds":3600}}`, service, plan)
	c := br.Local.Committer
	written := func() int64 { st := c.DB().Stats(); return st.TxStats.GetWrite() }

	const n, most = 200, 7.0
	before := written()
	for i := range n {
		req := httptest.NewRequest(http.MethodPut, fmt.Sprintf("/v2/service_instances/async-%d?accepts_incomplete=true", i), bytes.NewReader(body))
		req.SetBasicAuth(apptest.Username, apptest.Password)
		req.Header.Set(api.HeaderAPIVersion, "2.17")
		rec := httptest.NewRecorder()
		br.Local.Handler.ServeHTTP(rec, req)
		var accepted struct{ Operation string }
		if rec.Code != http.StatusAccepted || json.Unmarshal(rec.Body.Bytes(), &accepted) != nil {
			t.Fatalf("provision %d: %d %s", i, rec.Code, rec.Body)
		}
		// One at a time: the next provision waits for this one's execution
		// to reach its Wait, so that no commit is shared by chance.
		waittest.Until(t, func() error {
			states, err := br.Local.Engine.History(t.Context(), accepted.Operation)
			if err != nil || !slices.Equal(states, []string{"Begin", "Done?", "Wait"}) {
				return fmt.Errorf("execution %s: states %q (%v), want it in its Wait", accepted.Operation, states, err)
			}
			return nil
		})
	}
	// Closed, the engine writes what it holds: the records of the last
	// to park.
	if err := br.Local.Engine.Close(); err != nil {
		t.Fatal(err)
	}
	got := float64(written()-before) / n
	t.Logf("%.2f pages written per asynchronous provision, its first Task and its execution's record included", got)
	if got > most {
		t.Errorf("%.2f pages written per asynchronous provision, want at most %g", got, most)
	}
}
