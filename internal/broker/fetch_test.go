package broker_test

import (
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
)

// TestFetchInstance: GET /v2/service_instances/:instance_id. OSB: 404 when
// the instance does not exist or its provision is still in progress, 422
// ConcurrencyError while it is being updated.
func TestFetchInstance(t *testing.T) {
	tests := []struct {
		name  string
		given func(h *harness)
		code  broker.Code
		then  func(t *testing.T, got broker.Instance)
	}{
		{
			name:  "a ready instance is its plan, parameters, maintenance_info and dashboard",
			given: func(h *harness) { h.readyWith("i-1", planSync, `{"size":1}`) },
			then: func(t *testing.T, got broker.Instance) {
				if got.ServiceID != serviceID || got.PlanID != planSync || string(got.Parameters) != `{"size":1}` ||
					got.DashboardURL != "https://dashboard.example/i-1" || got.MaintenanceInfo == nil || got.MaintenanceInfo.Version != "1.0.0" {
					t.Fatalf("fetched %+v", got)
				}
			},
		},
		{
			name: "an instance the broker never had is 404 NotFound",
			code: broker.CodeNotFound,
		},
		{
			name:  "an instance being provisioned is 404 NotFound",
			given: func(h *harness) { h.provisioning("i-1", planAsync, "") },
			code:  broker.CodeNotFound,
		},
		{
			name:  "an instance whose provision failed is 404 NotFound",
			given: func(h *harness) { h.failedInstance("i-1", planAsync) },
			code:  broker.CodeNotFound,
		},
		{
			name: "an instance being updated is 422 ConcurrencyError",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				h.updating("i-1", `{"size":2}`)
			},
			code: broker.CodeConcurrencyError,
		},
		{
			name: "an instance whose deprovision failed is still there to fetch",
			given: func(h *harness) {
				h.ready("i-1", planSync)
				h.driver.on("begin", broker.KindDeprovision, fails("The database refuses to be deleted."))
				if _, err := h.b.Deprovision(ctx, deprovisionOf("i-1", planSync, false)); broker.ErrorCode(err) != broker.CodeUnprocessable {
					h.t.Fatalf("the deprovision: %v, want it to fail", err)
				}
			},
			then: func(t *testing.T, got broker.Instance) {
				if got.PlanID != planSync {
					t.Fatalf("fetched %+v", got)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			if tt.given != nil {
				tt.given(h)
			}
			got, err := h.b.FetchInstance(ctx, broker.FetchInstanceDetails{InstanceID: "i-1"})
			switch {
			case tt.code != "":
				wantCode(t, err, tt.code)
			case err != nil:
				t.Fatal(err)
			}
			if tt.then != nil {
				tt.then(t, got)
			}
		})
	}
}

// TestFetchBinding: GET .../service_bindings/:binding_id. OSB: 404 when
// the binding does not exist or its bind is still in progress.
func TestFetchBinding(t *testing.T) {
	tests := []struct {
		name  string
		given func(h *harness)
		code  broker.Code
		then  func(t *testing.T, got broker.Binding)
	}{
		{
			name: "a ready binding is its credentials, and when they expire and are to be renewed",
			given: func(h *harness) {
				h.ready("i-1", planSync)
				h.bound("i-1", "b-1", planSync)
			},
			then: func(t *testing.T, got broker.Binding) {
				if got.Credentials["username"] != "u-b-1" {
					t.Fatalf("credentials %v", got.Credentials)
				}
				if !got.ExpiresAt.Equal(epoch.Add(lifetime)) || !got.RenewBefore.Equal(epoch.Add(lifetime-renewal)) {
					t.Fatalf("expires at %v, renew before %v; want %v, %v", got.ExpiresAt, got.RenewBefore,
						epoch.Add(lifetime), epoch.Add(lifetime-renewal))
				}
			},
		},
		{
			name:  "a binding the broker never had is 404 NotFound",
			given: func(h *harness) { h.ready("i-1", planSync) },
			code:  broker.CodeNotFound,
		},
		{
			name: "a binding being created is 404 NotFound",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				h.bindingAsync("i-1", "b-1", planAsync)
			},
			code: broker.CodeNotFound,
		},
		{
			name: "a binding whose bind failed is 404 NotFound",
			given: func(h *harness) {
				h.ready("i-1", planAsync)
				h.failedBinding("i-1", "b-1", planAsync)
			},
			code: broker.CodeNotFound,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			if tt.given != nil {
				tt.given(h)
			}
			got, err := h.b.FetchBinding(ctx, broker.FetchBindingDetails{InstanceID: "i-1", BindingID: "b-1"})
			switch {
			case tt.code != "":
				wantCode(t, err, tt.code)
			case err != nil:
				t.Fatal(err)
			}
			if tt.then != nil {
				tt.then(t, got)
			}
		})
	}
}
