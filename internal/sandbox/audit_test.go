package sandbox_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/env"
	"github.com/serverless-osb/broker/internal/osbtest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// TestOpsAuditOnTheSandboxsStack runs ops --stack NAME audit on the
// synthesized stack: the prefix and boundary it reads from the stack's
// outputs are the ones the worker and the service role make binding users
// with, so a binding's user is no finding; a user made by hand under the
// broker's path and prefix, without the boundary, is one (exit 1), and
// gone once deleted as the audit says.
func TestOpsAuditOnTheSandboxsStack(t *testing.T) {
	ctx, cancel := waittest.Context(t)
	defer cancel()
	c := client(t, shared)
	e := &e2e{t: t, c: c}
	service, plan := planIDs(t, c, "aws-sqs-queue", "standard")
	instance, binding := "audit-i", "audit-b"
	r, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: instance, ServiceID: service, PlanID: plan,
		OrganizationGUID: "org", SpaceGUID: "space", AcceptsIncomplete: true})
	if err != nil || !r.Async {
		t.Fatalf("provision: %+v %v", r, err)
	}
	if state, desc := e.pollService(instance, service, r.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("provision ended %s: %s", state, desc)
	}
	br, err := c.Bind(&osb.BindRequest{InstanceID: instance, BindingID: binding, ServiceID: service, PlanID: plan,
		AcceptsIncomplete: true, BindResource: &osb.BindResource{AppGUID: ptr("app-1")}})
	if err != nil || !br.Async {
		t.Fatalf("bind: %+v %v", br, err)
	}
	if state := e.pollBinding(instance, binding, br.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("bind ended %s", state)
	}
	defer func() {
		ur, err := c.Unbind(&osb.UnbindRequest{InstanceID: instance, BindingID: binding, ServiceID: service, PlanID: plan, AcceptsIncomplete: true})
		if err == nil {
			e.pollBinding(instance, binding, ur.OperationKey)
		}
		dr, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: instance, ServiceID: service, PlanID: plan, AcceptsIncomplete: true})
		if err == nil {
			if state, desc := e.pollService(instance, service, dr.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
				t.Errorf("deprovision ended %s: %s", state, desc)
			}
		}
	}()

	// The operator's environment: the stack's account (moto) and Region,
	// an administrator's credentials.
	asOperator(t, ctx, map[string]string{env.Table: "", env.StackPrefix: "", env.PermissionsBoundaryARN: ""})

	audit := func() (app.AuditReport, error) {
		t.Helper()
		out, err := ops(ctx, "--json", "audit")
		var report app.AuditReport
		if jerr := json.Unmarshal([]byte(out), &report); jerr != nil {
			t.Fatalf("ops audit: %v %v\n%s", jerr, err, out)
		}
		return report, err
	}
	report, err := audit()
	if err != nil || report.Checked == 0 || len(report.Findings) != 0 || report.Scope.Prefix != "osb" || report.Scope.Boundary == "" {
		t.Fatalf("with one binding: %+v %v, want its user checked and nothing found, in the stack's prefix and boundary", report, err)
	}

	users := iam.NewFromConfig(shared.Admin)
	byHand := fmt.Sprintf("osb-by-hand-%d", report.Checked)
	if _, err := users.CreateUser(ctx, &iam.CreateUserInput{UserName: aws.String(byHand), Path: aws.String("/serverless-osb/")}); err != nil {
		t.Fatal(err)
	}
	report, err = audit()
	if !errors.Is(err, app.ErrAuditFound) || len(report.Findings) != 1 || report.Findings[0].User != byHand ||
		!slices.Contains(report.Findings[0].Problems, "it has no permissions boundary") {
		t.Fatalf("with a user made by hand: %+v %v, want it found, without the boundary", report, err)
	}
	if want := []string{"aws iam delete-user --user-name " + byHand}; !slices.Equal(report.Findings[0].Commands, want) {
		t.Errorf("commands %q, want %q", report.Findings[0].Commands, want)
	}
	if _, err := users.DeleteUser(ctx, &iam.DeleteUserInput{UserName: aws.String(byHand)}); err != nil {
		t.Fatal(err)
	}
	if report, err := audit(); err != nil || len(report.Findings) != 0 {
		t.Errorf("after the deletion: %+v %v", report, err)
	}
}
