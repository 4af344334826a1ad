package broker_test

import (
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
)

// versionedSettings are plan settings with a digest of what the plan
// deploys, as the CloudFormation driver's have: the digest is the plan's
// id and the current "release" of the test's catalog.
type versionedDrivers struct {
	d       broker.Driver
	release *string
}

type versionedSettings string

func (s versionedSettings) PlanDigest() string { return string(s) }

func (v versionedDrivers) For(p *catalog.Plan) (broker.Driver, any, bool) {
	return v.d, versionedSettings(p.ID + "@" + *v.release), true
}

func TestInstancesRememberThePlanVersionTheyRun(t *testing.T) {
	setup := func(t *testing.T) (*harness, *string) {
		h := newHarness(t)
		release := "r1"
		h.b.Drivers = versionedDrivers{h.driver, &release}
		if _, err := h.b.Provision(ctx, provisionOf("i-1", planSync, false, `{"size":1}`)); err != nil {
			t.Fatal(err)
		}
		if got := h.instance("i-1").PlanDigest; got != planSync+"@r1" {
			t.Fatalf("plan digest after provision %q", got)
		}
		release = "r2" // the catalog's templates changed (and, with them, the version)
		return h, &release
	}

	t.Run("an update with parameters only keeps the digest it runs", func(t *testing.T) {
		h, _ := setup(t)
		if _, err := h.b.Update(ctx, updateOf("i-1", "", false, `{"size":2}`)); err != nil {
			t.Fatal(err)
		}
		if got := h.instance("i-1").PlanDigest; got != planSync+"@r1" {
			t.Errorf("plan digest %q, want the one it was provisioned on", got)
		}
	})
	t.Run("a plan change takes the new plan's digest", func(t *testing.T) {
		h, _ := setup(t)
		if _, err := h.b.Update(ctx, updateOf("i-1", planLarge, false, "")); err != nil {
			t.Fatal(err)
		}
		if got := h.instance("i-1").PlanDigest; got != planLarge+"@r2" {
			t.Errorf("plan digest %q", got)
		}
	})
	t.Run("an upgrade (another maintenance_info version) takes the digest the update carries; the same version keeps the instance's", func(t *testing.T) {
		inst := broker.Instance{InstanceRequest: broker.InstanceRequest{PlanID: planSync,
			MaintenanceInfo: &broker.MaintenanceInfo{Version: "1.0.0"}}, PlanDigest: "d1"}
		up := broker.Target{MaintenanceInfo: &broker.MaintenanceInfo{Version: "1.1.0"}, PlanDigest: "d2"}
		if got := up.Apply(inst); got.PlanDigest != "d2" || got.MaintenanceInfo.Version != "1.1.0" {
			t.Errorf("after an upgrade: %q %v", got.PlanDigest, got.MaintenanceInfo)
		}
		same := broker.Target{MaintenanceInfo: &broker.MaintenanceInfo{Version: "1.0.0"}}
		if same.MovesTemplate(inst) || same.Apply(inst).PlanDigest != "d1" {
			t.Error("an update with the version the instance runs moved it")
		}
	})
}

func TestPlanVersionBehind(t *testing.T) {
	current := broker.PlanVersion{Version: "2.0.0", Digest: "d2"}
	for _, tt := range []struct {
		name string
		runs broker.PlanVersion
		want bool
	}{
		{"an instance on the current version and digest is not behind", broker.PlanVersion{Version: "2.0.0", Digest: "d2"}, false},
		{"an instance on an older maintenance_info version is behind", broker.PlanVersion{Version: "1.0.0", Digest: "d2"}, true},
		{"an instance on another digest is behind", broker.PlanVersion{Version: "2.0.0", Digest: "d1"}, true},
		{"an instance without maintenance_info is behind a plan that has one", broker.PlanVersion{Digest: "d2"}, true},
		{"an instance that kept no digest is judged by its version", broker.PlanVersion{Version: "2.0.0"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.runs.Behind(current); got != tt.want {
				t.Errorf("%+v behind %+v: %v, want %v", tt.runs, current, got, tt.want)
			}
		})
	}
}
