package sandbox_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/osbtest"
	"github.com/serverless-osb/broker/internal/sandbox"
	"github.com/serverless-osb/broker/internal/waittest"
)

// provisionRaw sends a provision of the demo's synchronous plan to
// rawPath (escaped as it is) with body, and returns the answer's status
// and body.
func provisionRaw(t *testing.T, rawPath string, body []byte) (int, string) {
	t.Helper()
	return putRaw(t, shared, rawPath, body)
}

// provisionBody is a provision of the demo's synchronous plan whose
// parameters hold a string of n bytes (none when n < 0).
func provisionBody(t *testing.T, n int) []byte {
	t.Helper()
	req := map[string]any{"service_id": demoService, "plan_id": demoSync, "organization_guid": "org", "space_guid": "space"}
	if n >= 0 {
		req["parameters"] = map[string]any{"filler": strings.Repeat("a", n)}
	}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestTheFrontAnswersWhatAPIGatewayAnswers: a body over an HTTP API's 10 MB
// payload gets API Gateway's own 413, and so does one whose event is over
// Lambda's 6 MB invocation payload, without the function seeing either;
// an id that percent-decodes to bytes that are not UTF-8 gets a 400, so
// two such ids never land on one instance (replaced by U+FFFD, they did).
func TestTheFrontAnswersWhatAPIGatewayAnswers(t *testing.T) {
	c := client(t, shared)
	for _, tc := range []struct {
		name, id string
		size     int
	}{
		{"a body over the HTTP API's 10 MB", "big-1", 11 << 20},
		{"an event over Lambda's 6 MB", "big-2", 7 << 20},
	} {
		t.Run(tc.name+" is answered 413 by the gateway", func(t *testing.T) {
			status, body := provisionRaw(t, "/v2/service_instances/"+tc.id, provisionBody(t, tc.size))
			if status != http.StatusRequestEntityTooLarge || !strings.Contains(body, `"message"`) {
				t.Fatalf("answered %d %.200s, want API Gateway's 413", status, body)
			}
			if _, err := c.GetInstance(&osb.GetInstanceRequest{InstanceID: tc.id}); !osbtest.IsStatus(err, http.StatusNotFound) {
				t.Fatalf("%s after the 413: %v, want 404", tc.id, err)
			}
		})
	}
	t.Run("a body under Lambda's 6 MB reaches the broker", func(t *testing.T) {
		// The broker refuses a parameter the plan does not know: its 400,
		// not the gateway's.
		status, body := provisionRaw(t, "/v2/service_instances/big-3", provisionBody(t, 1<<20))
		if status == http.StatusRequestEntityTooLarge || !strings.Contains(body, `"description"`) {
			t.Fatalf("answered %d %.300s, want the broker's answer", status, body)
		}
	})
	t.Run("ids that are not UTF-8 are refused, never one instance for two", func(t *testing.T) {
		for _, id := range []string{"%FF", "%FE", "x%C3%28"} {
			status, body := provisionRaw(t, "/v2/service_instances/"+id, provisionBody(t, -1))
			if status != http.StatusBadRequest {
				t.Errorf("id %s: answered %d %.200s, want 400", id, status, body)
			}
		}
		// What a lenient proxy would make of them, U+FFFD, is no id
		// either: the broker refuses it (400), so nothing was ever made
		// under it.
		if _, err := c.GetInstance(&osb.GetInstanceRequest{InstanceID: "\uFFFD"}); !osbtest.IsStatus(err, http.StatusBadRequest) {
			t.Errorf("an instance of id U+FFFD: %v, want 400 (no such id)", err)
		}
	})
}

// TestTheEnvironmentsPerFunctionCanBeSet: a sandbox whose functions may
// run 2 execution environments each (Config.Environments, make sandbox
// ENVIRONMENTS=2, as a reserved concurrency would) serves 12 requests at
// once on at most 2.
func TestTheEnvironmentsPerFunctionCanBeSet(t *testing.T) {
	ctx, cancel := waittest.Context(t)
	defer cancel()
	sb, err := sandbox.Start(ctx, sandbox.Config{Template: template, Dir: t.TempDir(), Environments: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	api := sb.Function(logicalID("ApiFunction"))
	if got := api.Environments(); got != 2 {
		t.Fatalf("the api may run %d environments, want 2", got)
	}
	c := client(t, sb)
	var wg sync.WaitGroup
	var mu sync.Mutex
	most := 0
	errs := make(chan error, 12)
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.GetCatalog()
			mu.Lock()
			most = max(most, len(api.Processes()))
			mu.Unlock()
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a catalog request among 12 at once: %v", err)
		}
	}
	if n := len(api.Processes()); n < 1 || n > 2 || most > 2 {
		t.Fatalf("%d api environments (at most %d seen), want 1 or 2", n, most)
	}
}
