package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"github.com/google/uuid"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/drivers/function"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// Outages through the real OSB client: a backend that does not answer for
// longer than the minute the workflow's Retry used to allow, and shorter
// than the plan's outage budget (30 minutes), is waited out, with
// last_operation saying so in between; one past the budget fails the
// operation, saying since when. No test sleeps: the broker's and the
// engine's clock is outageClock, which each of the workflow's waits moves
// at once.

// outageClock is the broker's clock and the local engine's Sleep: a wait
// moves the clock by its length at once, except the first wait of each
// length in hold, which it hands to the test (held) and keeps until the
// test lets it pass (release), so that the test can look at the broker
// while the workflow waits.
type outageClock struct {
	mu      sync.Mutex
	now     time.Time
	hold    map[time.Duration]bool
	held    chan time.Duration
	release chan struct{}
}

func newOutageClock(hold ...time.Duration) *outageClock {
	c := &outageClock{now: time.Now().UTC(), hold: map[time.Duration]bool{}, held: make(chan time.Duration), release: make(chan struct{})}
	for _, d := range hold {
		c.hold[d] = true
	}
	return c
}

func (c *outageClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *outageClock) Sleep(ctx context.Context, d time.Duration) {
	c.mu.Lock()
	hold := c.hold[d]
	delete(c.hold, d)
	c.mu.Unlock()
	if hold {
		select {
		case c.held <- d:
		case <-ctx.Done():
			return
		}
		select {
		case <-c.release:
		case <-ctx.Done():
			return
		}
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// downTarget is a function target (protocol version 2, signature checked)
// whose answers a test scripts: answer gets each request and how many of
// its call came so far (this one included), and says what to answer, or
// false to answer HTTP 503.
type downTarget struct {
	URL    string
	answer func(req function.Request, n int) (function.Answer, bool)
	mu     sync.Mutex
	calls  map[string]int
}

func startTarget(t *testing.T, answer func(req function.Request, n int) (function.Answer, bool)) *downTarget {
	dt := &downTarget{answer: answer, calls: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(dt.serve))
	t.Cleanup(srv.Close)
	dt.URL = srv.URL
	return dt
}

// startDownTarget starts a target whose Begin answers "not done" and whose
// first `down` checks answer HTTP 503; then it is done.
func startDownTarget(t *testing.T, down int) *downTarget {
	return startTarget(t, func(req function.Request, n int) (function.Answer, bool) {
		a := function.Answer{Version: req.Version, Done: true}
		switch req.Call {
		case function.CallBegin:
			a.Done, a.Description = false, "Creating the tenant."
		case function.CallCheck:
			return a, n > down
		}
		return a, true
	})
}

func (dt *downTarget) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || function.VerifyRequest([]byte(functionSecret), r, dt.URL, body, time.Now()) != nil {
		http.Error(w, "refused", http.StatusUnauthorized)
		return
	}
	var req function.Request
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "not a request", http.StatusBadRequest)
		return
	}
	dt.mu.Lock()
	dt.calls[req.Call]++
	n := dt.calls[req.Call]
	dt.mu.Unlock()
	a, up := dt.answer(req, n)
	if !up {
		http.Error(w, "deploying", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(a)
}

// Calls is how many requests of call (begin, check, cleanup, ...) came.
func (dt *downTarget) Calls(call string) int {
	dt.mu.Lock()
	defer dt.mu.Unlock()
	return dt.calls[call]
}

// startOutageBroker starts a broker whose plans delegate to dt, on clock,
// with store (nil: bolt).
func startOutageBroker(t *testing.T, dt *downTarget, clock *outageClock, store broker.Store) (*apptest.Broker, *e2e) {
	b := apptest.StartWith(t, apptest.Options{
		Catalog: functionCatalog(t, dt.URL),
		Getenv: func(k string) string {
			if k == "TEST_FUNCTION_SECRET" {
				return functionSecret
			}
			return ""
		},
		Store: store,
		Sleep: clock.Sleep, Now: clock.Now,
		// The reaper would run on the real clock; last_operation repairs
		// on the broker's.
		ReapInterval: -1,
	})
	return b, newE2E(t, b)
}

// pollHeld polls last_operation while the operation waits at the held
// wait, and checks what it says.
func pollHeld(t *testing.T, c osb.Client, instanceID, serviceID string, op *osb.OperationKey, clock *outageClock, description string, retryAfter time.Duration) {
	t.Helper()
	waittest.Until(t, func() error {
		select {
		case <-clock.held:
			return nil
		default:
		}
		r, err := c.PollLastOperation(&osb.LastOperationRequest{InstanceID: instanceID, ServiceID: &serviceID, OperationKey: op})
		if err == nil && r.State != osb.StateInProgress {
			t.Fatalf("the operation ended (%s: %q) before it waited as long as the test holds", r.State, deref(r.Description))
		}
		return errors.New("the operation has not waited as long as the test holds yet")
	})
	r, err := c.PollLastOperation(&osb.LastOperationRequest{InstanceID: instanceID, ServiceID: &serviceID, OperationKey: op})
	if err != nil {
		t.Fatal(err)
	}
	if r.State != osb.StateInProgress || deref(r.Description) != description {
		t.Errorf("last_operation while the backend is down: %s %q, want in progress, %q", r.State, deref(r.Description), description)
	}
	if r.PollDelay == nil || *r.PollDelay != retryAfter {
		t.Errorf("Retry-After %v, want %s: the next try", r.PollDelay, retryAfter)
	}
	clock.release <- struct{}{}
}

func TestAnOutageOfAFunctionTargetShorterThanTheBudgetIsWaitedOut(t *testing.T) {
	t.Parallel()
	// Eight checks answer 503: waits of 15 s, 30 s, 1, 2, 4, then 5
	// minutes, 22 m 45 s in all; the workflow's Retry used to give up
	// after the seventh call, 63 s in.
	dt := startDownTarget(t, 8)
	clock := newOutageClock(2 * time.Minute)
	_, e := startOutageBroker(t, dt, clock, nil)
	began := clock.Now()

	r := e.provision("out-1", e.async, true, nil)
	if !r.Async {
		t.Fatal("answered synchronously")
	}
	pollHeld(t, e.c, "out-1", e.service, r.OperationKey, clock,
		"The service's backend is unreachable (HTTP 503); retrying, attempt 4, next in 2 minutes.", 2*time.Minute)
	state, description := e.poll("out-1", r.OperationKey)
	if state != osb.StateSucceeded {
		t.Fatalf("provision %s: %q, want succeeded", state, description)
	}
	if n := dt.Calls(function.CallCheck); n != 9 {
		t.Errorf("the target was checked %d times, want 9: eight down, then done", n)
	}
	if took, want := clock.Now().Sub(began), time.Second+22*time.Minute+45*time.Second; took != want {
		t.Errorf("the provision took %s of the broker's time, want %s: Begin's retry_after and the outage's waits", took, want)
	}
}

func TestAnOutageOfAFunctionTargetPastTheBudgetFailsSayingSinceWhen(t *testing.T) {
	t.Parallel()
	dt := startDownTarget(t, 1_000_000)
	clock := newOutageClock()
	_, e := startOutageBroker(t, dt, clock, nil)
	since := clock.Now()

	r := e.provision("out-2", e.async, true, nil)
	state, description := e.poll("out-2", r.OperationKey)
	if state != osb.StateFailed {
		t.Fatalf("provision %s: %q, want failed", state, description)
	}
	// The outage began at the first check, after Begin's retry_after (1 s).
	want := "The provision failed: the service's backend has been unreachable (HTTP 503) since " +
		since.Add(time.Second).Format("2006-01-02 15:04:05 UTC")
	if !strings.HasPrefix(description, want) || !strings.HasSuffix(description, "over 30 minutes, the plan's limit); try again later.") {
		t.Errorf("description %q, want it to start %q and name the budget", description, want)
	}
	if took := clock.Now().Sub(since); took < 30*time.Minute || took > 31*time.Minute {
		t.Errorf("failed after %s of the broker's time, want the budget, 30 minutes", took)
	}
}

// throttle makes the first n calls of operation answer Throttling, as
// CloudFormation does when an account's API rate is used up.
func throttle(operation string, n int) func(*middleware.Stack) error {
	var mu sync.Mutex
	return func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("Throttle",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if middleware.GetOperationName(ctx) == operation {
					mu.Lock()
					throttled := n > 0
					n--
					mu.Unlock()
					if throttled {
						return middleware.InitializeOutput{}, middleware.Metadata{}, &smithy.GenericAPIError{Code: "Throttling", Message: "Rate exceeded"}
					}
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	}
}

// startThrottledBroker starts a broker serving the example services on
// moto, whose first `throttled` DescribeStacks calls are throttled.
func startThrottledBroker(t *testing.T, throttled int, clock *outageClock) (*apptest.Broker, osb.Client) {
	cfg := mototest.Config(t, "us-east-1")
	cfg.APIOptions = append(cfg.APIOptions, throttle("DescribeStacks", throttled))
	prefix := "osbout" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	b := apptest.StartWith(t, apptest.Options{
		Catalog: "services/catalog.yaml",
		AWS:     func(context.Context) (aws.Config, error) { return cfg, nil },
		Getenv: func(k string) string {
			if k == "BROKER_STACK_PREFIX" {
				return prefix
			}
			return ""
		},
		Sleep: clock.Sleep, Now: clock.Now, ReapInterval: -1,
	})
	return b, client(t, b.URL)
}

// provisionBucket provisions an S3 bucket of the example services, async.
func provisionBucket(t *testing.T, b *apptest.Broker, c osb.Client, id string) (serviceID string, op *osb.OperationKey) {
	t.Helper()
	serviceID, planID := planOf(t, b, "aws-s3-bucket", "standard")
	r, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: id, ServiceID: serviceID, PlanID: planID,
		OrganizationGUID: "org", SpaceGUID: "space", AcceptsIncomplete: true, Parameters: map[string]any{}})
	if err != nil || !r.Async {
		t.Fatalf("provision: %+v %v", r, err)
	}
	return serviceID, r.OperationKey
}

func TestThrottledCloudFormationIsWaitedOutWithinTheBudget(t *testing.T) {
	t.Parallel()
	clock := newOutageClock(2 * time.Minute)
	b, c := startThrottledBroker(t, 8, clock)
	id := uuid.NewString()
	serviceID, op := provisionBucket(t, b, c, id)
	pollHeld(t, c, id, serviceID, op, clock,
		"The service's backend is unreachable (CloudFormation answered Throttling); retrying, attempt 4, next in 2 minutes.", 2*time.Minute)
	e := &e2e{t: t, c: c, service: serviceID}
	if state, description := e.poll(id, op); state != osb.StateSucceeded {
		t.Fatalf("provision %s: %q, want succeeded", state, description)
	}
}

func TestThrottledCloudFormationPastTheBudgetFailsSayingSinceWhen(t *testing.T) {
	t.Parallel()
	clock := newOutageClock()
	b, c := startThrottledBroker(t, 1_000_000, clock)
	id := uuid.NewString()
	serviceID, op := provisionBucket(t, b, c, id)
	e := &e2e{t: t, c: c, service: serviceID}
	state, description := e.poll(id, op)
	if state != osb.StateFailed || !strings.Contains(description, "the service's backend has been unreachable (CloudFormation answered Throttling) since ") ||
		!strings.HasSuffix(description, "over 30 minutes, the plan's limit); try again later.") {
		t.Fatalf("provision %s: %q, want failed, unreachable since a time, within the budget", state, description)
	}
}
