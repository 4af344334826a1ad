//go:build osb_without_roles

package cloudformation

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/serverless-osb/broker/internal/catalog"
)

// TestRolesWithoutSTS runs in the bootstraps' build without the clients
// that reach a placement's role (make build's osb_without_roles, when the
// manifest grants no sts:AssumeRole; TestTheBootstrapsBuiltWithoutLeaveItOut
// in internal/tools/build runs it): a plan placed through a role is
// refused at start, saying to build the bundles; a plan placed without
// one is not; the clients have no STS and no Secrets Manager.
func TestRolesWithoutSTS(t *testing.T) {
	// A JSON template and a plan of no schema: this build may read no
	// YAML.
	dir := templateDir(t, map[string]string{"instance.json": `{"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}`})
	plan := &catalog.Plan{ID: "p", Name: "p"}
	config := func(p map[string]any) map[string]any {
		return map[string]any{"template": "instance.json", KeyPlacement: p}
	}
	placed, err := Configure(plan, config(map[string]any{"region": "eu-west-1", "role_arn": paymentsRole, "external_id": paymentsExternalID}), dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = RolesOf([]*Settings{placed})
	if err == nil || !strings.Contains(err.Error(), "built without") || !strings.Contains(err.Error(), "make build") {
		t.Errorf("a plan placed through a role: error %v, want one saying to build the bundles", err)
	}
	own, err := Configure(plan, config(map[string]any{"region": "eu-west-1"}), dir)
	if err != nil {
		t.Fatal(err)
	}
	if roles, err := RolesOf([]*Settings{own}); err != nil || len(roles) != 0 {
		t.Errorf("a plan placed in another Region of the broker's account: roles %v, %v", roles, err)
	}
	if c := NewClients(aws.Config{Region: "us-east-1"}); c.Roles != nil || c.Secrets != nil {
		t.Errorf("clients %+v: STS or Secrets Manager in a build without them", c)
	}
}
