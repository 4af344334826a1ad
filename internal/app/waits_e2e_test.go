package app_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/drivers/function"
	"github.com/serverless-osb/broker/internal/drivers/function/functiontest"
	"github.com/serverless-osb/broker/internal/engine/local"
	"github.com/serverless-osb/broker/internal/osbtest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// TestATargetAskingNoWaitIsCheckedAtTheFloorAndBoundedWithinARequest: a
// function target that answers every call of a synchronous provision "not
// done, check again in 0 s" gets a call at most every MinRetryAfter, and at
// most SyncChecks checks after the begin; the request then ends as one past
// SyncWait does: 503, and what the target began goes to the cleanup. The
// broker's waits are recorded, not waited (the local broker's Sleep), so no
// wall time is measured: the clock stays put, and only the bound on checks
// can end the request.
func TestATargetAskingNoWaitIsCheckedAtTheFloorAndBoundedWithinARequest(t *testing.T) {
	target := functiontest.Start(t, functionSecret)
	var mu sync.Mutex
	var waits []time.Duration
	o := functionOptions(t, target, functionSecret)
	o.ReapInterval = -1
	o.Sleep = func(ctx context.Context, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, d)
	}
	b := apptest.StartWith(t, o)
	e := newE2E(t, b)

	_, err := e.c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "no-wait", ServiceID: e.service, PlanID: e.sync,
		OrganizationGUID: "org", SpaceGUID: "space",
		Parameters: map[string]any{"answer": `{"version":2,"done":false,"retry_after":0,"description":"Working."}`}})
	mu.Lock()
	waited := append([]time.Duration(nil), waits...)
	mu.Unlock()
	calls := 0
	for _, r := range target.Requests() {
		if r.Instance.ID == "no-wait" && r.Call != function.CallCleanup {
			calls++
		}
	}
	if calls > 1+broker.SyncChecks {
		t.Errorf("the target was called %d times within one request, want at most %d (a begin and %d checks)", calls, 1+broker.SyncChecks, broker.SyncChecks)
	}
	if len(waited) == 0 && calls > 1 {
		t.Errorf("the request called the target %d times without waiting in between", calls)
	}
	for _, d := range waited {
		if d < broker.MinRetryAfter {
			t.Errorf("the request waited %s between two calls, want at least %s: %v", d, broker.MinRetryAfter, waited)
			break
		}
	}
	h, ok := osb.IsHTTPError(err)
	if !ok || h.StatusCode != http.StatusServiceUnavailable || h.Description == nil ||
		!strings.HasPrefix(*h.Description, "This service's backend did not complete the provision within ") {
		t.Fatalf("provision: %v, want 503 saying the backend did not complete it", err)
	}
	// Nothing half-written: no instance, and what the target began is
	// cleaned up.
	waitNothingLeft(t, b, "no-wait")
}

// isolationCatalog writes a catalog of two asynchronous plans whose work the
// target at url does: slow-plan, whose requests may take 50 s, and
// quick-plan.
func isolationCatalog(t *testing.T, url string) string {
	t.Helper()
	block := func(timeout int) string {
		return fmt.Sprintf("{driver: function, mode: async-only, url: '%s', secret_env: TEST_FUNCTION_SECRET, timeout: %d, retry_after: 1}", url, timeout)
	}
	cat := `services:
  - id: 6d1f7a52-0c53-4b51-9f0e-2f6b8a3d9c21
    name: isolation-service
    description: Two plans on one target.
    bindable: false
    instances_retrievable: true
    plans:
      - id: 0b7c8e0e-5d4b-4a8f-8d51-1b9b8b1f6a11
        name: slow-plan
        description: Its target may hang.
        broker: ` + block(50) + `
      - id: 0b7c8e0e-5d4b-4a8f-8d51-1b9b8b1f6a12
        name: quick-plan
        description: Its target answers at once.
        broker: ` + block(1) + `
`
	path := filepath.Join(t.TempDir(), "isolation-catalog.yaml")
	if err := os.WriteFile(path, []byte(cat), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAHangingTargetHoldsOnlyItsPlansShareOfTheTasks: on the local broker,
// the Tasks of a plan whose target hangs on every request, more of them
// than the engine runs at once (local.DefaultMaxTasks), call the target at
// most MaxTasksPerPlan at a time, and the others wait their turn, saying
// so; a provision of another plan meanwhile succeeds while every hanging
// request is still held. Once the target answers again, every waiting
// provision completes.
func TestAHangingTargetHoldsOnlyItsPlansShareOfTheTasks(t *testing.T) {
	target := functiontest.Start(t, functionSecret)
	o := functionOptions(t, target, functionSecret)
	o.Catalog, o.ReapInterval = isolationCatalog(t, target.URL), -1
	o.Sleep = nil
	b := apptest.StartWith(t, o)
	t.Cleanup(target.Unblock) // before the broker closes (cleanups run last first): it waits for its calls
	c := client(t, b.URL)
	service, slow := b.Plan("slow-plan")
	_, quick := b.Plan("quick-plan")
	perPlan := max(1, local.DefaultMaxTasks()/4)

	n := local.DefaultMaxTasks() + 1
	ops := map[string]*osb.OperationKey{}
	for i := range n {
		id := fmt.Sprintf("slow-%d", i)
		ops[id] = osbtest.Provision(t, c, id, service, slow, true, map[string]any{"fault": "hang"}).OperationKey
	}
	// Every slow provision is in: its begin held by the target, or waiting
	// for a turn.
	waittest.Until(t, func() error {
		called := map[string]bool{}
		for _, r := range target.Requests() {
			called[r.Instance.ID] = true
		}
		for id, op := range ops {
			if called[id] {
				continue
			}
			lo, err := c.PollLastOperation(&osb.LastOperationRequest{InstanceID: id, ServiceID: &service, OperationKey: op})
			if err != nil || lo.Description == nil || !strings.HasPrefix(*lo.Description, "Waiting for a turn") {
				return fmt.Errorf("provision %s has neither called the target nor waits for a turn", id)
			}
		}
		return nil
	})
	r := osbtest.Provision(t, c, "quick", service, quick, true, nil)
	if state, desc := osbtest.Poll(t, c, "quick", service, r.OperationKey, retryAfter); state != osb.StateSucceeded {
		t.Fatalf("the quick plan's provision ended %s %q", state, desc)
	}
	if now, most, ended := target.Hanging(); ended != 0 || now == 0 || most > perPlan {
		t.Fatalf("when the quick plan's provision succeeded the target held %d requests (%d at most, %d let go), want some, at most %d, none let go",
			now, most, ended, perPlan)
	}

	target.Unblock()
	for id, op := range ops {
		if state, desc := osbtest.Poll(t, c, id, service, op, retryAfter); state != osb.StateSucceeded {
			t.Errorf("provision %s ended %s %q once the target answered", id, state, desc)
		}
	}
	if _, most, _ := target.Hanging(); most > perPlan {
		t.Errorf("the slow plan's Tasks called its target %d at once, want at most %d", most, perPlan)
	}
}
