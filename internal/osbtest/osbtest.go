// Package osbtest drives a broker through the real OSB client library
// (sigs.k8s.io/go-open-service-broker-client/v2) in end-to-end tests: the
// client a platform would use, the polls of last_operation to an end, and
// how to read the client's errors. The app's tests (a broker in-process)
// and the sandbox's (the deployed stack on one machine) share it, so that
// both suites speak to the broker as the same platform.
package osbtest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/waittest"
)

// Client returns the real OSB client library pointed at the broker at url,
// with the broker's basic-auth credentials. It speaks 2.14, the library's
// newest, with its alpha features: GET instance and binding, and
// asynchronous bindings.
func Client(tb testing.TB, url, username, password string) osb.Client {
	tb.Helper()
	cfg := osb.DefaultClientConfiguration()
	cfg.Name, cfg.URL = "serverless-osb", url
	cfg.APIVersion = osb.Version2_14()
	cfg.EnableAlphaFeatures = true
	cfg.AuthConfig = &osb.AuthConfig{BasicAuthConfig: &osb.BasicAuthConfig{Username: username, Password: password}}
	c, err := osb.NewClient(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// Provision provisions instanceID as a Cloud Foundry platform does (the
// organization and space in the request and in its context), and fails tb
// if the broker refuses.
func Provision(tb testing.TB, c osb.Client, instanceID, serviceID, planID string, async bool, params map[string]any) *osb.ProvisionResponse {
	tb.Helper()
	r, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: instanceID, ServiceID: serviceID, PlanID: planID,
		OrganizationGUID: "org", SpaceGUID: "space", AcceptsIncomplete: async, Parameters: params,
		Context: map[string]any{"platform": "cloudfoundry", "organization_guid": "org", "space_guid": "space"}})
	if err != nil {
		tb.Fatalf("provision %s: %v", instanceID, err)
	}
	return r
}

// Gone is the state Poll and PollBinding report when last_operation
// answers 410 Gone: the instance or binding no longer exists, which is how
// a deprovision or unbind ends.
const Gone osb.LastOperationState = "gone"

// An Option adds a check to each answer a poll sees while the operation is
// in progress.
type Option func(*polling)

type polling struct {
	retryAfter time.Duration
}

// RetryAfter makes a poll fail the test when an operation in progress is
// answered without a Retry-After of at least least: the broker tells the
// platform how long to wait between polls.
func RetryAfter(least time.Duration) Option {
	return func(p *polling) { p.retryAfter = least }
}

// Poll polls the instance's last_operation until it leaves "in progress",
// and returns the state it ended in with its description (Gone on a 410).
// Any other error fails tb.
func Poll(tb testing.TB, c osb.Client, instanceID, serviceID string, op *osb.OperationKey, opts ...Option) (state osb.LastOperationState, description string) {
	tb.Helper()
	return poll(tb, "operation on "+instanceID, func() (*osb.LastOperationResponse, error) {
		return c.PollLastOperation(&osb.LastOperationRequest{InstanceID: instanceID, ServiceID: &serviceID, OperationKey: op})
	}, opts)
}

// PollBinding is Poll for the binding's last_operation.
func PollBinding(tb testing.TB, c osb.Client, instanceID, bindingID string, op *osb.OperationKey, opts ...Option) (state osb.LastOperationState, description string) {
	tb.Helper()
	return poll(tb, "binding operation on "+bindingID, func() (*osb.LastOperationResponse, error) {
		return c.PollBindingLastOperation(&osb.BindingLastOperationRequest{InstanceID: instanceID, BindingID: bindingID, OperationKey: op})
	}, opts)
}

func poll(tb testing.TB, what string, get func() (*osb.LastOperationResponse, error), opts []Option) (state osb.LastOperationState, description string) {
	tb.Helper()
	var p polling
	for _, o := range opts {
		o(&p)
	}
	waittest.Until(tb, func() error {
		r, err := get()
		if osb.IsGoneError(err) {
			state = Gone
			return nil
		}
		if err != nil {
			tb.Fatalf("poll the %s: %v", what, err)
		}
		if r.State != osb.StateInProgress {
			state = r.State
			if r.Description != nil {
				description = *r.Description
			}
			return nil
		}
		if p.retryAfter > 0 && (r.PollDelay == nil || *r.PollDelay < p.retryAfter) {
			tb.Fatalf("the %s is in progress without a Retry-After of at least %s: %v", what, p.retryAfter, r.PollDelay)
		}
		return fmt.Errorf("the %s is still in progress", what)
	})
	return state, description
}

// IsStatus says whether err is the client's error for an HTTP status code.
func IsStatus(err error, code int) bool {
	h, ok := httpError(err)
	return ok && h.StatusCode == code
}

// IsOSBError says whether err is the client's error for an HTTP status code
// with an OSB error code ("ConcurrencyError", "AsyncRequired"). The
// library's own IsConcurrencyError and IsAsyncRequiredError also demand
// its fixed descriptions; the spec asks only for the error code.
func IsOSBError(err error, code int, osbError string) bool {
	h, ok := httpError(err)
	return ok && h.StatusCode == code && h.ErrorMessage != nil && *h.ErrorMessage == osbError
}

// httpError finds the client's HTTP error in err, a value or a pointer.
func httpError(err error) (*osb.HTTPStatusCodeError, bool) {
	var h osb.HTTPStatusCodeError
	if errors.As(err, &h) {
		return &h, true
	}
	var hp *osb.HTTPStatusCodeError
	if errors.As(err, &hp) && hp != nil {
		return hp, true
	}
	return nil, false
}
