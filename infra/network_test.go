package infra

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTheCatalogsNetworksGetADatabaseUserFunction synthesizes the stack
// with a catalog that declares two networks in one VPC and one in another,
// and no databaseUserVpcs context: a Custom::DatabaseUser function runs in
// each VPC, named as the CloudFormation driver passes it to binding
// templates, in the first network's subnets, a member of its own security
// group and of the networks' client security groups (which the databases
// admit); cdk-nag clean.
func TestTheCatalogsNetworksGetADatabaseUserFunction(t *testing.T) {
	tmp := t.TempDir()
	services := filepath.Join(tmp, "services")
	if err := os.CopyFS(services, os.DirFS("services")); err != nil {
		t.Fatal(err)
	}
	shipped, err := os.ReadFile(filepath.Join(services, "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
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
	cat := filepath.Join(services, "catalog.yaml")
	if err := os.WriteFile(cat, append([]byte(networks), shipped...), 0o644); err != nil {
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
	_, template := synthWith(t, "Networks", extra)
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
