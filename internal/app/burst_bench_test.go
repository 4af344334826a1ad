package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/waittest"
)

// beginCounter counts the changes begun: an asynchronous provision's first
// Task.
type beginCounter struct {
	broker.Driver
	n *atomic.Int64
}

func (d beginCounter) Begin(ctx context.Context, c broker.Change) (broker.Progress, error) {
	d.n.Add(1)
	return d.Driver.Begin(ctx, c)
}

// pageWrites is how many pages db's transactions wrote so far.
func pageWrites(db *bbolt.DB) int64 {
	stats := db.Stats()
	return stats.TxStats.GetWrite()
}

// BenchmarkBurstOfProvisions sends 1,000 asynchronous provisions at once,
// on connections already open, to the local broker's server, and reports
// per burst what its requests shared the processors and the bolt file with
// until the last 202: the provisions' first Tasks that ran (Begin), and the
// commits and bbolt page writes made. Counts, not times: the load tool's
// burst ratios move with whatever else the machine runs; these do not
// (docs/performance.md).
func BenchmarkBurstOfProvisions(b *testing.B) {
	const burst = 1000
	var begins atomic.Int64
	br := apptest.StartWith(b, apptest.Options{Wrap: &app.Wrappers{
		Driver: func(d broker.Driver) broker.Driver { return beginCounter{d, &begins} }}})
	service, plan := br.Plan("fake-async-plan")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: burst, MaxConnsPerHost: burst}}
	defer client.CloseIdleConnections()
	send := func(method, path, body string, want int) error {
		req, err := http.NewRequest(method, br.URL+path, strings.NewReader(body))
		if err != nil {
			return err
		}
		req.SetBasicAuth(apptest.Username, apptest.Password)
		req.Header.Set("X-Broker-API-Version", "2.17")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != want {
			return fmt.Errorf("%s %s: %d, want %d", method, path, resp.StatusCode, want)
		}
		return nil
	}
	all := func(each func(i int) error) {
		b.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, burst)
		for i := range burst {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := each(i); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	// The connections open, then idle in the pool.
	all(func(int) error { return send(http.MethodGet, "/v2/catalog", "", http.StatusOK) })

	db := br.Local.Committer.DB()
	var tasks, commits, pages, bursts int64
	for b.Loop() {
		// Each burst on a quiet broker: the last one's first Tasks done.
		sent := bursts * burst
		waittest.Until(b, func() error {
			if n := begins.Load(); n < sent {
				return fmt.Errorf("%d of the %d provisions' first Tasks ran", n, sent)
			}
			return nil
		})
		begins0, commits0, pages0 := begins.Load(), br.Local.Committer.Commits(), pageWrites(db)
		all(func(i int) error {
			body := fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"o","space_guid":"s","parameters":{"duration_seconds":600}}`, service, plan)
			return send(http.MethodPut, fmt.Sprintf("/v2/service_instances/burst-%d-%d?accepts_incomplete=true", bursts, i), body, http.StatusAccepted)
		})
		tasks += begins.Load() - begins0
		commits += int64(br.Local.Committer.Commits() - commits0)
		pages += pageWrites(db) - pages0
		bursts++
	}
	b.ReportMetric(float64(tasks)/float64(bursts), "tasks-before-last-202/burst")
	b.ReportMetric(float64(commits)/float64(bursts), "commits/burst")
	b.ReportMetric(float64(pages)/float64(bursts), "page-writes/burst")
}
