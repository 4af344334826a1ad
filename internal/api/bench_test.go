package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/api"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// benchBroker calls the broker's HTTP handler in-process: the figures are
// the handler's own (routing, auth, decoding, the bolt store, the engine),
// without a network in between.
type benchBroker struct {
	b       *apptest.Broker
	handler http.Handler
	service string
}

func newBench(b *testing.B) *benchBroker {
	br := apptest.Start(b, "")
	s, _ := br.Plan("fake-plan")
	return &benchBroker{b: br, handler: br.Local.Handler, service: s}
}

// countCommits counts the bbolt commits (each one fsync) from now; the
// function it returns reports them per iteration, as commits/op.
func (bb *benchBroker) countCommits(b *testing.B) func() {
	before := bb.b.Local.Committer.Commits()
	return func() {
		b.ReportMetric(float64(bb.b.Local.Committer.Commits()-before)/float64(b.N), "commits/op")
	}
}

func (bb *benchBroker) serve(b *testing.B, method, path string, body []byte, want int) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.SetBasicAuth(apptest.Username, apptest.Password)
	req.Header.Set(api.HeaderAPIVersion, "2.17")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	bb.handler.ServeHTTP(rec, req)
	if rec.Code != want {
		b.Fatalf("%s %s: %d, want %d: %s", method, path, rec.Code, want, rec.Body)
	}
	return rec
}

func (bb *benchBroker) provisionBody(plan string, params string) []byte {
	return fmt.Appendf(nil, `{"service_id":%q,"plan_id":%q,"organization_guid":"o","space_guid":"s","parameters":%s}`,
		bb.service, plan, params)
}

func BenchmarkCatalog(b *testing.B) {
	bb := newBench(b)
	b.ReportAllocs()
	for b.Loop() {
		bb.serve(b, http.MethodGet, "/v2/catalog", nil, http.StatusOK)
	}
}

func BenchmarkSyncProvision(b *testing.B) {
	bb := newBench(b)
	_, plan := bb.b.Plan("fake-plan")
	body := bb.provisionBody(plan, `{}`)
	report := bb.countCommits(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		bb.serve(b, http.MethodPut, fmt.Sprintf("/v2/service_instances/sync-%d", i), body, http.StatusCreated)
	}
	report()
}

func BenchmarkAsyncProvision(b *testing.B) {
	bb := newBench(b)
	_, plan := bb.b.Plan("fake-async-plan")
	body := bb.provisionBody(plan, `{"duration_seconds":3600}`)
	report := bb.countCommits(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		bb.serve(b, http.MethodPut, fmt.Sprintf("/v2/service_instances/async-%d?accepts_incomplete=true", i), body, http.StatusAccepted)
	}
	report()
}

func BenchmarkLastOperation(b *testing.B) {
	bb := newBench(b)
	_, plan := bb.b.Plan("fake-async-plan")
	rec := bb.serve(b, http.MethodPut, "/v2/service_instances/lo?accepts_incomplete=true",
		bb.provisionBody(plan, `{"duration_seconds":3600}`), http.StatusAccepted)
	var accepted struct{ Operation string }
	_ = json.Unmarshal(rec.Body.Bytes(), &accepted)
	path := "/v2/service_instances/lo/last_operation?operation=" + accepted.Operation
	report := bb.countCommits(b)
	b.ReportAllocs()
	for b.Loop() {
		bb.serve(b, http.MethodGet, path, nil, http.StatusOK)
	}
	report()
}

func BenchmarkBind(b *testing.B) {
	bb := newBench(b)
	_, plan := bb.b.Plan("fake-plan")
	bb.serve(b, http.MethodPut, "/v2/service_instances/bind", bb.provisionBody(plan, `{}`), http.StatusCreated)
	body := fmt.Appendf(nil, `{"service_id":%q,"plan_id":%q,"bind_resource":{"app_guid":"app"}}`, bb.service, plan)
	report := bb.countCommits(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		bb.serve(b, http.MethodPut, fmt.Sprintf("/v2/service_instances/bind/service_bindings/b-%d", i), body, http.StatusCreated)
	}
	report()
}

// BenchmarkAsyncProvisionToSucceeded measures the broker's overhead on an
// asynchronous provision whose driver is done at once (duration_seconds 0):
// from the 202 until last_operation says succeeded. Reported as
// ms-202-to-succeeded; polling every 0.5 ms adds at most that much.
func BenchmarkAsyncProvisionToSucceeded(b *testing.B) {
	bb := newBench(b)
	_, plan := bb.b.Plan("fake-async-plan")
	body := bb.provisionBody(plan, `{"duration_seconds":0}`)
	var total time.Duration
	i := 0
	for b.Loop() {
		i++
		id := fmt.Sprintf("fast-%d", i)
		rec := bb.serve(b, http.MethodPut, "/v2/service_instances/"+id+"?accepts_incomplete=true", body, http.StatusAccepted)
		start, deadline := time.Now(), waittest.Deadline(b)
		var accepted struct{ Operation string }
		_ = json.Unmarshal(rec.Body.Bytes(), &accepted)
		for {
			lo := bb.serve(b, http.MethodGet, "/v2/service_instances/"+id+"/last_operation?operation="+accepted.Operation, nil, http.StatusOK)
			if bytes.Contains(lo.Body.Bytes(), []byte(`"succeeded"`)) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("not succeeded after %s: %s", time.Since(start), lo.Body)
			}
			time.Sleep(500 * time.Microsecond)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(i), "ms-202-to-succeeded")
}
