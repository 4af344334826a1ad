package infra

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/infra/servicerole"
	"github.com/serverless-osb/broker/internal/cfnregistry"
	"github.com/serverless-osb/broker/internal/drivers/cloudformation"
)

// networkCatalog writes a copy of services/ whose catalog declares
// networks before the shipped catalog's text, and returns the synthesis
// context for it (its assets included).
func networkCatalog(t *testing.T, networks string) map[string]any {
	t.Helper()
	tmp := t.TempDir()
	services := filepath.Join(tmp, "services")
	if err := os.CopyFS(services, os.DirFS("services")); err != nil {
		t.Fatal(err)
	}
	shipped, err := os.ReadFile(filepath.Join(services, "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cat := filepath.Join(services, "catalog.yaml")
	if err := os.WriteFile(cat, []byte(networks+string(shipped)), 0o644); err != nil {
		t.Fatal(err)
	}
	extra := map[string]any{ContextCatalog: cat, ContextDatabaseUserVPCs: ""}
	for key, name := range map[string]string{ContextAPICode: "api", ContextWorkerCode: "worker", ContextDatabaseUserCode: "dbuser"} {
		dir := filepath.Join(tmp, name)
		if err := dummyAsset(dir, cat); err != nil {
			t.Fatal(err)
		}
		extra[key] = dir
	}
	return extra
}

// TestTheCatalogsNetworksGetADatabaseUserFunction synthesizes the stack
// with a catalog that declares two networks in one VPC and one in another,
// and no databaseUserVpcs context: a Custom::DatabaseUser function runs in
// each VPC, named as the CloudFormation driver passes it to binding
// templates, in the first network's subnets, a member of its own security
// group and of the networks' client security groups (which the databases
// admit); cdk-nag clean.
func TestTheCatalogsNetworksGetADatabaseUserFunction(t *testing.T) {
	const networks = `networks:
  apps:
    vpc_id: vpc-0123456789abcdef0
    subnet_ids: [subnet-0123456789abcdef0, subnet-0123456789abcdef1]
    client_security_group_id: sg-0123456789abcdef0
  batch:
    vpc_id: vpc-0123456789abcdef0
    subnet_ids: [subnet-0123456789abcdef2, subnet-0123456789abcdef3]
    client_cidr: 10.0.0.0/16
    client_security_group_id: sg-0123456789abcdef1
  edge:
    vpc_id: vpc-0fedcba9876543210
    subnet_ids: [subnet-0fedcba9876543210, subnet-0fedcba9876543211]
    client_cidr: 10.1.0.0/16
`
	_, template := synthWith(t, "Networks", networkCatalog(t, networks))
	var tpl struct {
		Resources map[string]struct {
			Type       string         `json:"Type"`
			Properties map[string]any `json:"Properties"`
		}
	}
	text, _ := json.Marshal(template.ToJSON())
	if err := json.Unmarshal(text, &tpl); err != nil {
		t.Fatal(err)
	}
	functions := map[string]string{}
	for _, r := range tpl.Resources {
		if name, ok := r.Properties["FunctionName"].(string); ok && r.Type == "AWS::Lambda::Function" && strings.Contains(name, "-dbuser-") {
			b, _ := json.Marshal(r.Properties["VpcConfig"])
			functions[name] = string(b)
		}
	}
	if len(functions) != 2 {
		t.Fatalf("dbuser functions %v, want one in each of the two VPCs", slices.Sorted(maps.Keys(functions)))
	}
	for name, want := range map[string][]string{
		"osb-dbuser-vpc-0123456789abcdef0": {`"subnet-0123456789abcdef0","subnet-0123456789abcdef1"]`, `"sg-0123456789abcdef0"`, `"sg-0123456789abcdef1"`},
		"osb-dbuser-vpc-0fedcba9876543210": {`"subnet-0fedcba9876543210","subnet-0fedcba9876543211"]`},
	} {
		config, ok := functions[name]
		if !ok {
			t.Errorf("no function %s among %v", name, slices.Sorted(maps.Keys(functions)))
			continue
		}
		for _, w := range want {
			if !strings.Contains(config, w) {
				t.Errorf("%s's VpcConfig %s lacks %s", name, config, w)
			}
		}
	}
	if strings.Contains(functions["osb-dbuser-vpc-0fedcba9876543210"], "sg-0") {
		t.Errorf("the function of a network without a client security group joins one: %s", functions["osb-dbuser-vpc-0fedcba9876543210"])
	}
}

// TestTheServiceRoleGrantsWhatTheDatabaseUsersNeed is the permission proof
// for the database-user binding templates: with the shipped catalog, whose
// RDS plans make a user per binding, given a default network, the service role
// grants every action their resources' handlers need (the binding's
// secret, and the invocation of the dbuser function for
// Custom::DatabaseUser), nothing more, cdk-nag clean.
func TestTheServiceRoleGrantsWhatTheDatabaseUsersNeed(t *testing.T) {
	const networks = `networks:
  apps:
    default: true
    vpc_id: vpc-0123456789abcdef0
    subnet_ids: [subnet-0123456789abcdef0, subnet-0123456789abcdef1]
    client_security_group_id: sg-0123456789abcdef0
`
	extra := networkCatalog(t, networks)
	_, template := synthWith(t, "DatabaseUsers", extra)
	policy := synthesizedPolicy(t, *template.ToJSON())
	cat := extra[ContextCatalog].(string)
	files, err := catalogFiles(cat)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"rds-postgresql/binding-user.yaml", "rds-mysql/binding-user.yaml"} {
		if !slices.Contains(files, want) {
			t.Fatalf("the catalog bundles %v, not %s", files, want)
		}
	}
	resources, err := cloudformation.TemplateResources(filepath.Dir(cat), files)
	if err != nil {
		t.Fatal(err)
	}
	report, err := cfnregistry.Check(resources, policy, servicerole.Unused, slices.Concat(servicerole.Refused, servicerole.Withheld))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range report.Unknown {
		t.Errorf("no registry data for %s", r)
	}
	for _, m := range report.Missing {
		t.Errorf("the service role lacks %s", m)
	}
	for _, u := range report.SetUnused {
		t.Errorf("%s sets %s: grant %s", u.Resource, u.Property, u.Action)
	}
	excess, err := cfnregistry.Excess(policy, bundledTypes(resources), servicerole.Extra)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range excess {
		t.Errorf("the service role grants %s, which no handler of the templates' types lists", a)
	}
	for _, a := range []string{"lambda:InvokeFunction", "secretsmanager:GetRandomPassword", "secretsmanager:DeleteSecret"} {
		if !policy.Grants(a) {
			t.Errorf("%s is not granted", a)
		}
	}
	statements, _ := json.Marshal(serviceRoleStatements(t, *template.ToJSON()))
	if !strings.Contains(string(statements), ":function:osb-dbuser-*") {
		t.Errorf("lambda:InvokeFunction is not on the dbuser functions alone: %s", statements)
	}
}
