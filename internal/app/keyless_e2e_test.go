package app_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/google/uuid"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/drivers"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/osbtest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// TestARolePlanBindsAppsAloneThroughTheOSBClient drives the shipped
// catalog's S3 plan whose bindings are IAM roles (binding_credentials:
// role, docs/app-identity.md) through the real OSB client, on moto: what
// the plan refuses, it refuses before anything is written, with the
// description a user needs. moto 5.2.1 has no IAM Roles Anywhere, so the
// role binding itself is tested on the driver (roles_test.go).
func TestARolePlanBindsAppsAloneThroughTheOSBClient(t *testing.T) {
	cfg := mototest.Config(t, "us-east-1")
	prefix := "osbkl" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	start := func(catalogPath string) (*apptest.Broker, osb.Client) {
		b := apptest.StartWith(t, apptest.Options{Dir: t.TempDir(), Catalog: catalogPath, ReapInterval: -1,
			AWS: func(context.Context) (aws.Config, error) { return cfg, nil },
			Getenv: func(k string) string {
				if k == "BROKER_STACK_PREFIX" {
					return prefix
				}
				return ""
			},
			Sleep: func(ctx context.Context, _ time.Duration) {}, // moto completes stacks at once
		})
		return b, client(t, b.URL)
	}
	const app = "3a6f2c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b"

	t.Run("as shipped, with no trust anchor named, every bind is refused with 422 saying what the operator must do", func(t *testing.T) {
		b, c := start("services/catalog.yaml")
		service, plan := planOf(t, b, "aws-s3-bucket", "standard-app-identity")
		_, err := c.Bind(&osb.BindRequest{InstanceID: uuid.NewString(), BindingID: uuid.NewString(), ServiceID: service, PlanID: plan,
			AcceptsIncomplete: true, BindResource: &osb.BindResource{AppGUID: ptr(app)}})
		if code, desc := clientError(t, err); code != 422 || !strings.Contains(desc, "Ask the platform operator to set the plan's trust_anchor_arn") {
			t.Errorf("bind: %d %q, want 422 naming trust_anchor_arn", code, desc)
		}
	})

	// The operator names the trust anchor, a change of what the plan
	// deploys: they raise its version, and make build writes the lock
	// file again.
	catalogPath, _ := shippedServices(t)
	text, err := os.ReadFile(catalogPath)
	if err != nil {
		t.Fatal(err)
	}
	// The S3 role plan's setting: the first after its binding template.
	const commented = "# trust_anchor_arn: arn:aws:rolesanywhere:REGION:ACCOUNT:trust-anchor/ID"
	head, tail, ok := strings.Cut(string(text), "binding_template: s3-bucket/binding-role.yaml")
	if !ok || !strings.Contains(tail, commented) {
		t.Fatalf("%s does not show the S3 role plan's trust anchor setting", catalogPath)
	}
	text = []byte(head + "binding_template: s3-bucket/binding-role.yaml" + strings.Replace(tail, commented,
		"trust_anchor_arn: arn:aws:rolesanywhere:us-east-1:123456789012:trust-anchor/4e3d2c1b-a098-4765-b432-10fedcba9876", 1))
	const version = `version: "1.0.0"
          description: First release of the S3 bucket template.`
	if strings.Count(string(text), version) != 1 {
		t.Fatalf("%s does not show the S3 plans' version once", catalogPath)
	}
	text = []byte(strings.Replace(string(text), version, `version: "1.1.0"
          description: Role bindings trust the platform's instance identity CA.`, 1))
	if err := os.WriteFile(catalogPath, text, 0o644); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Load(catalogPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := drivers.WriteLock(cat, filepath.Clean(catalogPath)); err != nil {
		t.Fatal(err)
	}
	b, c := start(catalogPath)
	service, plan := planOf(t, b, "aws-s3-bucket", "standard-app-identity")
	e := &e2e{t: t, c: c, service: service}
	instanceID := uuid.NewString()
	r := e.provision(instanceID, plan, true, nil)
	if state, desc := e.poll(instanceID, r.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("provision ended %s: %s", state, desc)
	}

	refusals := []struct {
		name     string
		resource *osb.BindResource
		status   int
		osbError string
		says     string
	}{
		{"a service key (no app) is refused with 422 RequiresApp", nil, 422, "RequiresApp",
			"bind the service instance to an app (cf bind-service) rather than create a service key"},
		{"an app_guid that is no Cloud Foundry GUID is refused with 400", &osb.BindResource{AppGUID: ptr("app-1")}, 400, "",
			"app_guid: must be a Cloud Foundry app GUID in lower case"},
	}
	for _, tt := range refusals {
		t.Run(tt.name+", and nothing is written", func(t *testing.T) {
			bindingID := uuid.NewString()
			_, err := c.Bind(&osb.BindRequest{InstanceID: instanceID, BindingID: bindingID, ServiceID: service, PlanID: plan,
				AcceptsIncomplete: true, BindResource: tt.resource, Parameters: map[string]any{"Access": "ReadOnly"}})
			code, desc := clientError(t, err)
			if code != tt.status || !strings.Contains(desc, tt.says) {
				t.Errorf("bind: %d %q, want %d saying %q", code, desc, tt.status, tt.says)
			}
			if tt.osbError != "" && !osbtest.IsOSBError(err, tt.status, tt.osbError) {
				t.Errorf("bind: %v, want the OSB error %s", err, tt.osbError)
			}
			if _, err := c.GetBinding(&osb.GetBindingRequest{InstanceID: instanceID, BindingID: bindingID}); !osbtest.IsStatus(err, 404) {
				t.Errorf("fetch of the refused binding: %v, want 404", err)
			}
		})
	}

	dr, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: instanceID, ServiceID: service, PlanID: plan, AcceptsIncomplete: true})
	if err != nil {
		t.Fatalf("deprovision: %v", err)
	}
	if state, desc := e.poll(instanceID, dr.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
		t.Fatalf("deprovision ended %s: %s", state, desc)
	}
	ctx, cancel := waittest.Context(t)
	defer cancel()
	if stacks := stacksNamed(ctx, t, cloudformation.NewFromConfig(cfg), prefix); len(stacks) != 0 {
		t.Errorf("stacks left: %v", stacks)
	}
}
