package app_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// TestCommitsPerOperation counts the fsynced bbolt commits that each
// operation costs the local broker (store and engine together), one request
// at a time: a synchronous provision or bind of the demo driver, which
// works in memory, is one commit; another synchronous change is one commit
// to take its hold and one for its outcome; an asynchronous provision adds
// one for the progress its driver reports, and the engine's records ride
// those commits.
func TestCommitsPerOperation(t *testing.T) {
	b := apptest.StartWith(t, apptest.Options{ReapInterval: -1})
	svc, syncPlan := b.Plan("fake-plan")
	_, asyncPlan := b.Plan("fake-async-plan")
	var report strings.Builder
	commits := func(name string, want uint64, do func()) {
		t.Helper()
		before := b.Local.Committer.Commits()
		do()
		// A commit is visible to readers a moment before it is counted.
		waittest.Until(t, func() error {
			if got := b.Local.Committer.Commits() - before; got < want {
				return fmt.Errorf("%s: %d commits so far, want %d", name, got, want)
			}
			return nil
		})
		got := b.Local.Committer.Commits() - before
		fmt.Fprintf(&report, "| %s | %d |\n", name, got)
		if got != want {
			t.Errorf("%s: %d commits, want %d", name, got, want)
		}
	}
	defer func() {
		t.Logf("fsynced bbolt commits per operation (store and engine together):\n| operation | commits |\n| --- | ---: |\n%s", report.String())
	}()
	expect := func(r apptest.Response, status int) apptest.Response {
		t.Helper()
		if r.Status != status {
			t.Fatalf("got %d %s, want %d", r.Status, r.Raw, status)
		}
		return r
	}
	commits("synchronous provision", 1, func() {
		expect(b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/s1", Body: provisionBody(svc, syncPlan, map[string]any{})}), 201)
	})
	commits("synchronous bind", 1, func() {
		expect(b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/s1/service_bindings/b1",
			Body: map[string]any{"service_id": svc, "plan_id": syncPlan}}), 201)
	})
	commits("last_operation and fetches", 0, func() {
		expect(b.Do(apptest.Request{Method: http.MethodGet, Path: "/v2/service_instances/s1/service_bindings/b1"}), 200)
		expect(b.Do(apptest.Request{Method: http.MethodGet, Path: "/v2/service_instances/s1"}), 200)
	})
	async := func(id string, seconds int) {
		r := expect(b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/" + id + "?accepts_incomplete=true",
			Body: provisionBody(svc, asyncPlan, map[string]any{"duration_seconds": seconds})}), 202)
		lo := b.WaitLastOperation(fmt.Sprintf("/v2/service_instances/%s/last_operation?operation=%s", id, r.Str("operation")))
		if lo.Str("state") != "succeeded" {
			t.Fatalf("%s: %s", id, lo.Raw)
		}
	}
	commits("asynchronous provision done at once, 202 to succeeded", 2, func() { async("a0", 0) })
	commits("asynchronous provision that takes a second, 202 to succeeded", 3, func() { async("a1", 1) })
	commits("synchronous unbind", 2, func() {
		expect(b.Do(apptest.Request{Method: http.MethodDelete,
			Path: "/v2/service_instances/s1/service_bindings/b1?service_id=" + svc + "&plan_id=" + syncPlan}), 200)
	})
	commits("synchronous update", 2, func() {
		expect(b.Do(apptest.Request{Method: http.MethodPatch, Path: "/v2/service_instances/s1",
			Body: map[string]any{"service_id": svc, "parameters": map[string]any{"duration_seconds": 2}}}), 200)
	})
	commits("synchronous deprovision", 2, func() {
		expect(b.Do(apptest.Request{Method: http.MethodDelete, Path: "/v2/service_instances/s1?service_id=" + svc + "&plan_id=" + syncPlan}), 200)
	})
}
