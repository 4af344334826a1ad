package cloudformation

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
)

// networkCatalog is a catalog with two networks (other is the default)
// and one plan whose broker block is the given YAML (indented for it).
func networkCatalog(t *testing.T, broker string) *catalog.Plan {
	t.Helper()
	doc := `networks:
  main:
    vpc_id: vpc-0123456789abcdef0
    subnet_ids: [subnet-0123456789abcdef0, subnet-0123456789abcdef1]
    client_cidr: 10.0.0.0/16
    client_security_group_id: sg-0123456789abcdef0
  other:
    default: true
    vpc_id: vpc-0fedcba9876543210
    subnet_ids: [subnet-0fedcba9876543210, subnet-0fedcba9876543211]
    client_cidr: 10.1.0.0/16
  away:
    account: "111111111111"
    region: eu-west-1
    vpc_id: vpc-0aaaaaaaaaaaaaaa0
    subnet_ids: [subnet-0aaaaaaaaaaaaaaa0, subnet-0aaaaaaaaaaaaaaa1]
    client_security_group_id: sg-0aaaaaaaaaaaaaaa0
  away2:
    account: "222222222222"
    region: eu-west-1
    vpc_id: vpc-0bbbbbbbbbbbbbbb0
    subnet_ids: [subnet-0bbbbbbbbbbbbbbb0, subnet-0bbbbbbbbbbbbbbb1]
    client_security_group_id: sg-0bbbbbbbbbbbbbbb0
services:
  - id: 9a8f4c43-0000-4000-8000-000000000001
    name: pg
    description: databases
    bindable: true
    plans:
      - id: 9a8f4c43-0000-4000-8000-000000000002
        name: micro
        description: a database
        schemas:
          service_instance:
            create: {parameters: {$schema: "http://json-schema.org/draft-04/schema#", type: object, properties: {AllocatedStorage: {}}}}
            update: {parameters: {$schema: "http://json-schema.org/draft-04/schema#", type: object, properties: {AllocatedStorage: {}}}}
          service_binding:
            create: {parameters: {$schema: "http://json-schema.org/draft-04/schema#", type: object, properties: {Privileges: {}}}}
        broker:
` + broker
	cat, err := catalog.Parse("catalog.yaml", []byte(doc))
	if err != nil {
		t.Fatalf("parse test catalog: %v\n%s", err, doc)
	}
	return cat.Services()[0].Plans[0]
}

const rdsPlan = `          driver: cloudformation
          template: rds-postgresql/instance.yaml
          binding_template: rds-postgresql/binding-user.yaml
          binding_parameters: {Schema: app, OnDelete: drop}
`

// TestThePlansNetworkFixesTheTemplatesNetworkParameters: a plan's network
// (named, or the catalog's default) becomes the instance template's VpcId,
// SubnetIds, ClientCidr and ClientSecurityGroupId, and the binding
// template's DatabaseUserFunction is the function infra deploys in its VPC;
// a user cannot set any of them.
func TestThePlansNetworkFixesTheTemplatesNetworkParameters(t *testing.T) {
	for _, tt := range []struct {
		name, broker                        string
		vpc, subnets, cidr, group, function string
	}{
		{"named", rdsPlan + "          network: main\n", "vpc-0123456789abcdef0", "subnet-0123456789abcdef0,subnet-0123456789abcdef1",
			"10.0.0.0/16", "sg-0123456789abcdef0", "osb-dbuser-vpc-0123456789abcdef0"},
		{"the default", rdsPlan, "vpc-0fedcba9876543210", "subnet-0fedcba9876543210,subnet-0fedcba9876543211",
			"10.1.0.0/16", "", "osb-dbuser-vpc-0fedcba9876543210"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			plan := networkCatalog(t, tt.broker)
			s, err := Configure(plan, plan.Settings.Config, "../../../services")
			if err != nil {
				t.Fatal(err)
			}
			h := harnessOf(t, s, Deployment{StackPrefix: "osb", RoleARN: "arn:aws:iam::123456789012:role/cfn"})
			c := h.change(broker.KindProvision, "op-provision")
			c.Instance.Parameters = []byte(`{"AllocatedStorage":30}`)
			c.Plan = plan
			if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil {
				t.Fatal(err)
			}
			got := stackParameters(h, h.instanceStack())
			want := map[string]string{"VpcId": tt.vpc, "SubnetIds": tt.subnets, "ClientCidr": tt.cidr, "ClientSecurityGroupId": tt.group, "AllocatedStorage": "30"}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("the instance stack's %s = %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
			h.cfn.outputs(h.instanceStack(), "Host", "db.example", "Port", "5432", "DatabaseName", "app",
				"MasterUserSecretArn", "arn:aws:secretsmanager:us-east-1:123456789012:secret:rds!db-1")
			h.cfn.set(h.instanceStack(), types.StackStatusCreateComplete, "")
			if p, err := h.driver.Check(h.ctx, h.fresh(c)); err != nil || !p.Done {
				t.Fatalf("provision check: %+v %v", p, err)
			}
			b := h.change(broker.KindBind, "op-bind")
			b.Plan = plan
			b.Binding.Parameters = []byte(`{"Privileges":"readonly"}`)
			if _, err := h.driver.Begin(h.ctx, h.fresh(b)); err != nil {
				t.Fatal(err)
			}
			got = stackParameters(h, h.bindingStack())
			if got["DatabaseUserFunction"] != tt.function || got["Privileges"] != "readonly" || got["Host"] != "db.example" {
				t.Errorf("the binding stack's parameters are %v, want DatabaseUserFunction %s", got, tt.function)
			}
		})
	}
}

func stackParameters(h *harness, name string) map[string]string {
	h.t.Helper()
	h.cfn.mu.Lock()
	defer h.cfn.mu.Unlock()
	s := h.cfn.find(name)
	if s == nil {
		h.t.Fatalf("no stack %s", name)
	}
	out := map[string]string{}
	for _, p := range s.create.Parameters {
		out[aws.ToString(p.ParameterKey)] = aws.ToString(p.ParameterValue)
	}
	return out
}

// TestConfigureRefusesWhatTheNetworkFixes: the network's parameters are
// the catalog's alone, and a template that needs a network gets one.
func TestConfigureRefusesWhatTheNetworkFixes(t *testing.T) {
	for _, tt := range []struct {
		name, broker, want string
		schema             string // replaces the instance create schema's properties
	}{
		{"the plan fixing VpcId itself", rdsPlan + "          network: main\n          parameters: {VpcId: vpc-0123456789abcdef1}\n",
			"parameters.VpcId: the plan's network main fixes VpcId; remove it here", ""},
		{"the plan fixing the function itself", strings.Replace(rdsPlan, "{Schema: app,", "{DatabaseUserFunction: mine, Schema: app,", 1),
			"binding_parameters.DatabaseUserFunction: DatabaseUserFunction is the broker's Custom::DatabaseUser function in the plan's network's VPC, which the driver passes itself", ""},
		{"a schema naming SubnetIds", rdsPlan, "schemas.service_instance.create.parameters.properties.SubnetIds: the plan's network fixes SubnetIds", "{AllocatedStorage: {}, SubnetIds: {}}"},
		{"a plan naming a network its templates do not take", "          driver: cloudformation\n          template: s3-bucket/instance.yaml\n          binding_template: s3-bucket/binding.yaml\n          network: main\n",
			"network: names the network main, but the plan's templates declare none of VpcId, SubnetIds, ClientCidr and ClientSecurityGroupId nor DatabaseUserFunction", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			broker := tt.broker
			plan := networkCatalog(t, broker)
			if tt.schema != "" {
				plan = networkCatalogWithSchema(t, broker, tt.schema)
			}
			_, err := Configure(plan, plan.Settings.Config, "../../../services")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Configure() = %v, want an error with %q", err, tt.want)
			}
		})
	}

	// As a role plan without its trust anchor: the broker starts (the
	// shipped catalog's Aurora and OpenSearch plans have no network until
	// the operator gives them one), warns, and refuses every bind.
	t.Run("a binding template that makes database users, without a network, starts, warns, and refuses every bind", func(t *testing.T) {
		cat, err := catalog.Parse("catalog.yaml", []byte(`services:
  - id: 9a8f4c43-0000-4000-8000-000000000001
    name: pg
    description: databases
    bindable: true
    plans:
      - id: 9a8f4c43-0000-4000-8000-000000000002
        name: micro
        description: a database
        schemas:
          service_instance:
            create: {parameters: {$schema: "http://json-schema.org/draft-04/schema#", type: object, properties: {}}}
          service_binding:
            create: {parameters: {$schema: "http://json-schema.org/draft-04/schema#", type: object, properties: {}}}
        broker:
`+rdsPlan))
		if err != nil {
			t.Fatal(err)
		}
		plan := cat.Services()[0].Plans[0]
		s, err := Configure(plan, plan.Settings.Config, "../../../services")
		if err != nil {
			t.Fatal(err)
		}
		if w := s.Warning(); !strings.Contains(w, "rds-postgresql/binding-user.yaml declares DatabaseUserFunction") || !strings.Contains(w, "every bind is refused") {
			t.Errorf("warning %q", w)
		}
		err = s.CheckBind(broker.BindingRequest{AppGUID: "3a6f2c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b"})
		var e *broker.Error
		if !errors.As(err, &e) || e.Code != broker.CodeUnprocessable || !strings.Contains(e.Description, "Ask the platform operator to set the plan's network") {
			t.Errorf("CheckBind() = %v, want 422 asking for the plan's network", err)
		}
	})
}

// TestAPlacedPlansNetworkIsWhereItIsPlaced: a network in another account
// and Region serves the plans placed there, and only those; a placed plan
// takes no network beside the broker (the default passes it by), and its
// every place is in its network's account and Region.
func TestAPlacedPlansNetworkIsWhereItIsPlaced(t *testing.T) {
	const away = "          placement: {role_arn: \"arn:aws:iam::111111111111:role/serverless-osb-target-osb\", external_id: x-12345, region: eu-west-1}\n"
	const bySpace = "          placement:\n            by: space\n            map:\n" +
		"              s1: {role_arn: \"arn:aws:iam::111111111111:role/serverless-osb-target-osb\", external_id: x-12345, region: eu-west-1}\n" +
		"              s2: {role_arn: \"arn:aws:iam::222222222222:role/serverless-osb-target-osb\", external_id: y-12345, region: eu-west-1}\n"
	t.Run("placed there, with the network there", func(t *testing.T) {
		plan := networkCatalog(t, rdsPlan+"          network: away\n"+away)
		s, err := Configure(plan, plan.Settings.Config, "../../../services")
		if err != nil {
			t.Fatal(err)
		}
		if s.Network == nil || s.Network.Name != "away" || s.Parameters["VpcId"] != "vpc-0aaaaaaaaaaaaaaa0" ||
			s.Parameters["ClientSecurityGroupId"] != "sg-0aaaaaaaaaaaaaaa0" || s.UsersWithoutNetwork {
			t.Errorf("network %+v, parameters %v, users without network %v: want away's", s.Network, s.Parameters, s.UsersWithoutNetwork)
		}
		if got := databaseUserFunction("osb", s.Network, s.BindingTemplate); got[DatabaseUserFunctionParameter] != "osb-dbuser-vpc-0aaaaaaaaaaaaaaa0" {
			t.Errorf("DatabaseUserFunction = %v, want the function in away's VPC", got)
		}
	})
	t.Run("placed in two accounts, a network in each", func(t *testing.T) {
		plan := networkCatalog(t, rdsPlan+"          network: [away2, away]\n"+bySpace)
		s, err := Configure(plan, plan.Settings.Config, "../../../services")
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct{ account, vpc string }{{"111111111111", "vpc-0aaaaaaaaaaaaaaa0"}, {"222222222222", "vpc-0bbbbbbbbbbbbbbb0"}} {
			n, err := s.networkAt(&Place{Account: tt.account, Region: "eu-west-1"})
			if err != nil || n.VpcID != tt.vpc {
				t.Errorf("the network of an instance in %s is %+v (%v), want the one of %s", tt.account, n, err, tt.vpc)
				continue
			}
			if got := networkAtPlace(s.Template, n); got["VpcId"] != tt.vpc || got["SubnetIds"] == "" {
				t.Errorf("its instance stack's network parameters %v, want %s's", got, tt.vpc)
			}
			if got := databaseUserFunction("osb", n, s.BindingTemplate); got[DatabaseUserFunctionParameter] != "osb-dbuser-"+tt.vpc {
				t.Errorf("its binding's DatabaseUserFunction %v, want the function in %s", got, tt.vpc)
			}
		}
		var f *broker.Failure
		if _, err := s.networkAt(&Place{Account: "333333333333", Region: "eu-west-1"}); !errors.As(err, &f) || !strings.Contains(f.Description, "account 333333333333, eu-west-1") {
			t.Errorf("an instance in a place without a network: %v, want a failure naming the place", err)
		}
	})
	t.Run("placed there, without a network: the default is the broker's, so binds wait for one", func(t *testing.T) {
		plan := networkCatalog(t, rdsPlan+away)
		s, err := Configure(plan, plan.Settings.Config, "../../../services")
		if err != nil {
			t.Fatal(err)
		}
		if s.Network != nil || !s.UsersWithoutNetwork || !strings.Contains(s.Warning(), "for a placed plan, a network with the account and region it is placed in") {
			t.Errorf("network %+v, warning %q: want none, and a warning asking for a network where it is placed", s.Network, s.Warning())
		}
	})
	for _, tt := range []struct{ name, broker, want string }{
		{"not placed, with a network in another account", rdsPlan + "          network: away\n",
			"network: names the network away, which is in account 111111111111, eu-west-1, but the plan is not placed there"},
		{"placed, with a network beside the broker", rdsPlan + "          network: main\n" + away,
			"network: names the network main, which is beside the broker, but the plan is placed (placement) in another account or Region"},
		{"placed in another account than the network's", rdsPlan + "          network: away\n" + strings.Replace(away, "111111111111", "222222222222", 1),
			"placement: places instances in account 222222222222, eu-west-1, but the plan's network away is in account 111111111111, eu-west-1: name a network per place (network: a list of them)"},
		{"placed in another Region than the network's", rdsPlan + "          network: away\n" + strings.Replace(away, "eu-west-1", "eu-central-1", 1),
			"placement: places instances in account 111111111111, eu-central-1, but the plan's network away is in account 111111111111, eu-west-1"},
		{"placed in the network's account, in the broker's Region", rdsPlan + "          network: away\n" + strings.Replace(away, ", region: eu-west-1", "", 1),
			"placement: is in account 111111111111 in the broker's own Region (it names none): name the region of the plan's network there"},
		{"placed with Regions users choose among", rdsPlan + "          network: away\n" +
			"          placement: {role_arn: \"arn:aws:iam::111111111111:role/serverless-osb-target-osb\", external_id: x-12345, region: eu-west-1, regions: [eu-west-1, eu-central-1]}\n",
			"placement.regions: places instances in account 111111111111, eu-central-1, but the plan's network away is in account 111111111111, eu-west-1"},
		{"a list, on a plan that is not placed", rdsPlan + "          network: [away, away2]\n",
			"network: names a list of networks (away, away2), one per place of a placed plan, but the plan is not placed"},
		{"a list without a network of a place", rdsPlan + "          network: [away]\n" + bySpace,
			"placement.map.s2: places instances in account 222222222222, eu-west-1, where none of the plan's networks (away) is"},
		{"a list with a network of no place", rdsPlan + "          network: [away, away2]\n" + away,
			"network: names the network away2, in account 222222222222, eu-west-1, where the placement puts no instance"},
		{"placed in the broker's own account, another Region", rdsPlan + "          placement: {region: eu-west-1}\n",
			"placement: has a place in the broker's own account but another Region (eu-west-1), and rds-postgresql/binding-user.yaml declares Custom::DatabaseUser"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			plan := networkCatalog(t, tt.broker)
			_, err := Configure(plan, plan.Settings.Config, "../../../services")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Configure() = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func networkCatalogWithSchema(t *testing.T, broker, props string) *catalog.Plan {
	t.Helper()
	doc := `networks:
  main:
    default: true
    vpc_id: vpc-0123456789abcdef0
    subnet_ids: [subnet-0123456789abcdef0, subnet-0123456789abcdef1]
    client_cidr: 10.0.0.0/16
services:
  - id: 9a8f4c43-0000-4000-8000-000000000001
    name: pg
    description: databases
    bindable: true
    plans:
      - id: 9a8f4c43-0000-4000-8000-000000000002
        name: micro
        description: a database
        schemas:
          service_instance:
            create: {parameters: {$schema: "http://json-schema.org/draft-04/schema#", type: object, properties: ` + props + `}}
            update: {parameters: {$schema: "http://json-schema.org/draft-04/schema#", type: object, properties: {}}}
          service_binding:
            create: {parameters: {$schema: "http://json-schema.org/draft-04/schema#", type: object, properties: {}}}
        broker:
` + broker
	cat, err := catalog.Parse("catalog.yaml", []byte(doc))
	if err != nil {
		t.Fatalf("parse test catalog: %v\n%s", err, doc)
	}
	return cat.Services()[0].Plans[0]
}
