package infra

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/infra/servicerole"
	"github.com/serverless-osb/broker/internal/cfnregistry"
	"github.com/serverless-osb/broker/internal/drivers/cloudformation"
)

// synthesizedPolicy is the service role's inline policy as synthesized,
// for cfnregistry's check.
func synthesizedPolicy(t *testing.T, template map[string]any) cfnregistry.Policy {
	t.Helper()
	// What each statement serves is servicerole's word, by Sid.
	forSid := map[string][]string{}
	for _, s := range append(servicerole.Grants("osb", nil), servicerole.DatabaseUserGrants("osb")...) {
		forSid[s.Sid] = s.For
	}
	var p cfnregistry.Policy
	for sid, s := range serviceRoleStatements(t, template) {
		p = append(p, cfnregistry.Statement{Sid: sid, Deny: s["Effect"] == "Deny", Actions: actions(s), Conditional: s["Condition"] != nil,
			Scoped: s["Resource"] != "*", For: forSid[sid]})
	}
	return p
}

// bundledResources are the resources of every template the build bundles
// with the deployed catalog.
func bundledResources(t *testing.T) []cfnregistry.Resource {
	t.Helper()
	catalogPath := broker.context[ContextCatalog].(string)
	files, err := catalogFiles(catalogPath)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cloudformation.TemplateResources(filepath.Dir(catalogPath), files)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) == 0 {
		t.Fatal("the deployed catalog's templates declare no resource")
	}
	return res
}

// bundledTypes are the resource types of resources, each once.
func bundledTypes(resources []cfnregistry.Resource) []string {
	var types []string
	for _, r := range resources {
		if !slices.Contains(types, r.Type) {
			types = append(types, r.Type)
		}
	}
	return types
}

// TestServiceRoleGrantsWhatTheTemplatesNeed is the proof that the service
// role is complete: every action the CloudFormation registry lists for the
// create, read, update and delete handlers of every resource type of every
// template the build bundles is granted by the synthesized policy, or is
// listed as needed only for a property no template sets
// (servicerole.Unused), or is refused on purpose (servicerole.Refused).
func TestServiceRoleGrantsWhatTheTemplatesNeed(t *testing.T) {
	policy := synthesizedPolicy(t, broker.json)
	resources := bundledResources(t)
	report, err := cfnregistry.Check(resources, policy, servicerole.Unused, slices.Concat(servicerole.Refused, servicerole.Withheld))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("every type of the bundled templates has registry data", func(t *testing.T) {
		for _, r := range report.Unknown {
			t.Errorf("no registry data for %s: add its schema to internal/cfnregistry/schemas (SOURCE.md says how)", r)
		}
	})
	t.Run("every handler's action is granted", func(t *testing.T) {
		for _, m := range report.Missing {
			t.Errorf("the service role lacks %s", m)
		}
	})
	t.Run("no template sets a property whose actions are listed as unused", func(t *testing.T) {
		for _, u := range report.SetUnused {
			t.Errorf("%s sets %s: grant %s (listed as unused: %s)", u.Resource, u.Property, u.Action, u.Why)
		}
	})
	t.Run("what the role refuses on purpose it does not grant", func(t *testing.T) {
		for _, r := range report.GrantedRefused {
			t.Errorf("%s is granted: %s", r.Action, r.Why)
		}
	})
	t.Run("every unused entry names a property of its type's schema", func(t *testing.T) {
		for _, u := range report.NoSuchProperty {
			t.Errorf("%s has no property %s: the entry for %s would excuse it for ever (see the schema's properties)", u.Type, u.Property, u.Action)
		}
	})
	t.Run("every unused entry is an action of its type's handlers that the role does not grant, nor is a withheld action granted", func(t *testing.T) {
		schemas, _ := cfnregistry.Schemas()
		for _, w := range servicerole.Withheld {
			if policy.Grants(w.Action) {
				t.Errorf("%s is withheld but granted (%s)", w.Action, w.Why)
			}
		}
		for _, u := range servicerole.Unused {
			s, ok := schemas[u.Type]
			if !ok {
				t.Errorf("%+v: no schema for the type", u)
				continue
			}
			var all []string
			for _, h := range cfnregistry.StackHandlers {
				all = append(all, s.Actions(h)...)
			}
			if !slices.ContainsFunc(all, func(a string) bool { return strings.EqualFold(a, u.Action) }) {
				t.Errorf("%s %s: no handler of %s lists it", u.Property, u.Action, u.Type)
			}
			if policy.For(u.Type).Grants(cfnregistry.IAMAction(u.Action)) {
				t.Errorf("%s %s is listed as unused but granted", u.Type, u.Action)
			}
		}
	})
	t.Run("nothing granted is unused: every action an Allow grants is one a handler of a bundled type needs, or listed with its reason", func(t *testing.T) {
		excess, err := cfnregistry.Excess(policy, bundledTypes(resources), servicerole.Extra)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range excess {
			t.Errorf("the service role grants %s, which no handler of the bundled templates' types lists: remove it, or list it in servicerole.Extra with its reason", a)
		}
		t.Run("as sqs:PurgeQueue added to the queues' statement would be", func(t *testing.T) {
			widened := slices.Clone(policy)
			i := slices.IndexFunc(widened, func(s cfnregistry.Statement) bool { return s.Sid == "Queues" })
			if i < 0 {
				t.Fatal("no Queues statement")
			}
			widened[i].Actions = append(slices.Clone(widened[i].Actions), "sqs:PurgeQueue")
			excess, err := cfnregistry.Excess(widened, bundledTypes(resources), servicerole.Extra)
			if err != nil || !slices.Equal(excess, []string{"sqs:PurgeQueue"}) {
				t.Errorf("excess %v %v, want sqs:PurgeQueue", excess, err)
			}
		})
	})
	t.Run("the bucket's tagging and the managed keys' grants, which a check by hand found missing, are granted", func(t *testing.T) {
		for _, a := range []string{"s3:TagResource", "s3:UntagResource", "kms:CreateGrant", "kms:DescribeKey"} {
			if !policy.Grants(a) {
				t.Errorf("%s is not granted", a)
			}
		}
	})
}

// TestPermissionsBoundary checks the boundary the service role holds
// every IAM identity of the service stacks to.
func TestPermissionsBoundary(t *testing.T) {
	boundaryRef := object{"Ref": logicalID(t, "BindingBoundary")}
	statements := serviceRoleStatements(t, broker.json)
	policy := synthesizedPolicy(t, broker.json)

	t.Run("the stack makes the boundary, a managed policy on the broker's resources only", func(t *testing.T) {
		r := resource(t, "BindingBoundary")
		if r["Type"] != "AWS::IAM::ManagedPolicy" {
			t.Fatalf("BindingBoundary is %v", r["Type"])
		}
		doc := r["Properties"].(object)["PolicyDocument"].(object)
		for _, s := range doc["Statement"].([]any) {
			s := s.(object)
			// Only the secrets' statement has a condition: their names
			// are RDS's, their tag names the database.
			want := any(nil)
			if s["Sid"] == "ReadTheDatabaseSecrets" {
				want = object{"StringLike": object{"secretsmanager:ResourceTag/aws:rds:primaryDBInstanceArn": regional("rds", "db:osb-*")}}
			}
			if s["Effect"] != "Allow" || !jsonEqual(s["Condition"], want) {
				t.Errorf("statement %v, want condition %v", s, want)
			}
			text := jsonString(s["Resource"])
			if !strings.Contains(text, ":osb-*") && !strings.Contains(text, "table/osb-*") && !strings.Contains(text, "stream/osb-*") &&
				!strings.Contains(text, "secret:rds!db-*") {
				t.Errorf("%s is granted on %s, not the broker's resources", s["Sid"], text)
			}
			for _, a := range actions(s) {
				if strings.Contains(a, "*") || strings.HasPrefix(a, "iam:") {
					t.Errorf("%s grants %s", s["Sid"], a)
				}
			}
		}
	})
	t.Run("the worker is told the boundary, which the driver hands the templates", func(t *testing.T) {
		env := properties(t, "WorkerFunction")["Environment"].(object)["Variables"].(object)
		if !jsonEqual(env["BROKER_PERMISSIONS_BOUNDARY_ARN"], boundaryRef) {
			t.Errorf("BROKER_PERMISSIONS_BOUNDARY_ARN = %v, want %v", env["BROKER_PERMISSIONS_BOUNDARY_ARN"], boundaryRef)
		}
	})
	withBoundary := object{"StringEquals": object{"iam:PermissionsBoundary": boundaryRef}}
	t.Run("every Allow of an action that makes or empowers an identity is on the boundary's condition", func(t *testing.T) {
		for _, a := range servicerole.Governed {
			for _, s := range policy.Allowing(a) {
				if got := statements[s.Sid]["Condition"]; !jsonEqual(got, withBoundary) {
					t.Errorf("%s grants %s on condition %v, want %v", s.Sid, a, got, withBoundary)
				}
			}
		}
		if len(policy.Allowing("iam:CreateUser")) == 0 || len(policy.Allowing("iam:PutUserPolicy")) == 0 {
			t.Error("binding users can no longer be made")
		}
	})
	t.Run("and a Deny refuses them with any other boundary or none, whatever policy the operator attaches", func(t *testing.T) {
		want := object{"StringNotEquals": object{"iam:PermissionsBoundary": boundaryRef}}
		for _, a := range servicerole.Governed {
			denied := false
			for _, s := range policy.Denying(a) {
				if jsonEqual(statements[s.Sid]["Condition"], want) && statements[s.Sid]["Resource"] == "*" {
					denied = true
				}
			}
			if !denied {
				t.Errorf("no Deny of %s on %v", a, want)
			}
		}
	})
	t.Run("no identity's boundary may be removed, nor the boundary policy changed", func(t *testing.T) {
		for _, r := range servicerole.Refused {
			if policy.Grants(r.Action) || len(policy.Denying(r.Action)) == 0 {
				t.Errorf("%s is not refused", r.Action)
			}
		}
		s, ok := statements["KeepTheBoundary"]
		if !ok || s["Effect"] != "Deny" || !jsonEqual(s["Resource"], boundaryRef) || s["Condition"] != nil ||
			!containsAll(actions(s), []string{"iam:CreatePolicyVersion", "iam:SetDefaultPolicyVersion", "iam:DeletePolicy"}) {
			t.Errorf("KeepTheBoundary %v", s)
		}
	})
	t.Run("every IAM user and role of every bundled template carries the boundary the broker hands it", func(t *testing.T) {
		n := 0
		for _, r := range bundledResources(t) {
			if r.Type != "AWS::IAM::User" && r.Type != "AWS::IAM::Role" {
				continue
			}
			n++
			if !slices.Contains(r.Properties, "PermissionsBoundary") {
				t.Errorf("%s has no PermissionsBoundary", r)
			}
		}
		if n == 0 {
			t.Error("no bundled template makes an IAM user")
		}
	})
	t.Run("the boundary allows every action the example binding templates give their users and roles", func(t *testing.T) {
		bound := servicerole.Policy(servicerole.Boundary("osb"))
		action := regexp.MustCompile(`^[a-z0-9-]+:[A-Za-z*]+$`)
		files, _ := filepath.Glob("services/*/binding*.yaml")
		if len(files) < 2 {
			t.Fatalf("binding templates %v", files)
		}
		for _, f := range files {
			text, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range strings.Fields(withoutTrustPolicies(string(text))) {
				if action.MatchString(s) && !strings.HasPrefix(s, "arn:") && !bound.Grants(s) {
					t.Errorf("%s gives %s, which the boundary does not allow", f, s)
				}
			}
		}
	})
}

// withoutTrustPolicies is a template's text without its roles' trust
// policies (AssumeRolePolicyDocument), whose actions (sts:AssumeRole) and
// condition keys are what another principal may do to the role, not what
// the role may do.
func withoutTrustPolicies(text string) string {
	var out []string
	skip := -1 // the indentation of the trust policy being skipped
	for _, line := range strings.Split(text, "\n") {
		indent := len(line) - len(strings.TrimLeft(line, " "))
		if skip >= 0 && (indent > skip || strings.TrimSpace(line) == "") {
			continue
		}
		skip = -1
		if strings.HasPrefix(strings.TrimSpace(line), "AssumeRolePolicyDocument:") {
			skip = indent
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}
