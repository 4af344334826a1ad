package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// TestAnIdleLocalBrokerGivesBackWhatItsBurstFreed runs the local broker as
// `make run` does, sends it a burst of asynchronous provisions at once,
// and waits for the process, quiet again, to hold little more heap memory
// than its live objects. Before, an idle broker kept what its busiest
// moment had needed until the runtime's next collection, and returned it
// slowly after that (docs/performance.md: about 60 MiB of anonymous memory
// idle after the load run's bursts).
func TestAnIdleLocalBrokerGivesBackWhatItsBurstFreed(t *testing.T) {
	localEnv(t, "warn")
	url := runLocal(t)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 200}}
	defer client.CloseIdleConnections()
	send := sender(client, url)
	_, data, err := send(http.MethodGet, "/v2/catalog", "")
	if err != nil {
		t.Fatal(err)
	}
	serviceID, planID := planIDs(t, data, "fake-async-plan")
	body := fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"o","space_guid":"s","parameters":{"duration_seconds":600}}`, serviceID, planID)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Go(func() {
			code, data, err := send(http.MethodPut, fmt.Sprintf("/v2/service_instances/burst-%d?accepts_incomplete=true", i), body)
			if err == nil && code != http.StatusAccepted {
				err = fmt.Errorf("provision %d: %d %s", i, code, data)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Held: the heap memory the process keeps in RAM that it could give
	// back (its objects, live or not yet collected, and the free pages it
	// has not returned); live: its objects at the last collection.
	heap := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/free:bytes"},
		{Name: "/gc/heap/live:bytes"}}
	waittest.Until(t, func() error {
		metrics.Read(heap)
		held := heap[0].Value.Uint64() + heap[1].Value.Uint64()
		live := heap[2].Value.Uint64()
		if limit := live + live/4 + 1<<20; held > limit {
			return fmt.Errorf("the idle broker holds %.1f MiB of heap for %.1f MiB of live objects, want at most %.1f MiB (a quarter more, and a MiB)",
				mib(held), mib(live), mib(limit))
		}
		return nil
	})
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// sender sends requests to the local broker at url, as a platform does.
func sender(client *http.Client, url string) func(method, path, body string) (int, []byte, error) {
	return func(method, path, body string) (int, []byte, error) {
		req, err := http.NewRequest(method, url+path, strings.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.SetBasicAuth(apptest.Username, apptest.Password)
		req.Header.Set("X-Broker-API-Version", "2.17")
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		return resp.StatusCode, data, err
	}
}

// planIDs finds a plan's service and plan ids in a catalog answer.
func planIDs(t *testing.T, catalog []byte, name string) (serviceID, planID string) {
	t.Helper()
	var cat struct {
		Services []struct {
			ID    string `json:"id"`
			Plans []struct {
				ID   string `json:"id"`
				Name string `json:"name"`
			} `json:"plans"`
		} `json:"services"`
	}
	if err := json.Unmarshal(catalog, &cat); err != nil {
		t.Fatalf("catalog: %v", err)
	}
	for _, s := range cat.Services {
		for _, p := range s.Plans {
			if p.Name == name {
				return s.ID, p.ID
			}
		}
	}
	t.Fatalf("no plan %s in the catalog", name)
	return "", ""
}
