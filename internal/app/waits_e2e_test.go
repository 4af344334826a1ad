package app_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/drivers/function"
	"github.com/serverless-osb/broker/internal/drivers/function/functiontest"
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
