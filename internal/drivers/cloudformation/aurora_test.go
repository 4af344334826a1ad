package cloudformation

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
)

// shippedNetwork is the network an operator declares in the shipped
// catalog (its default) before its VPC services' bindings can be made.
const shippedNetwork = `networks:
  apps:
    default: true
    vpc_id: vpc-0123456789abcdef0
    subnet_ids: [subnet-0123456789abcdef0, subnet-0123456789abcdef1]
    client_security_group_id: sg-0123456789abcdef0
`

// shippedNetworkParameters are what the driver fixes from shippedNetwork.
var shippedNetworkParameters = map[string]string{"VpcId": "vpc-0123456789abcdef0",
	"SubnetIds": "subnet-0123456789abcdef0,subnet-0123456789abcdef1", "ClientCidr": "", "ClientSecurityGroupId": "sg-0123456789abcdef0"}

// shippedCatalogWithNetwork is services/catalog.yaml with shippedNetwork.
func shippedCatalogWithNetwork(t *testing.T) *catalog.Catalog {
	t.Helper()
	path := filepath.Join(servicesDir, "catalog.yaml")
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Parse(path, append([]byte(shippedNetwork), text...))
	if err != nil {
		t.Fatal(err)
	}
	cat.Dir = servicesDir
	return cat
}

// auroraPlan is a plan of services/catalog.yaml (with shippedNetwork), by
// service and plan name, with its broker block and the catalog's directory.
func auroraPlan(t *testing.T, service, plan string) (*catalog.Plan, map[string]any, string) {
	t.Helper()
	cat := shippedCatalogWithNetwork(t)
	for _, s := range cat.Services() {
		if s.Name != service {
			continue
		}
		for _, p := range s.Plans {
			if p.Name == plan {
				return p, maps.Clone(p.Settings.Config), cat.Dir
			}
		}
	}
	t.Fatalf("services/catalog.yaml has no plan %s of %s", plan, service)
	return nil, nil, ""
}

// withDefaults are a stack's parameters as CloudFormation resolves them:
// those given, and the template's Default for the others.
func withDefaults(tmpl *Template, given map[string]string) map[string]string {
	out := map[string]string{}
	for name, p := range tmpl.Parameters {
		if p.HasDefault {
			out[name] = p.Default
		}
	}
	maps.Copy(out, given)
	return out
}

// TestAuroraLifecycles drives the shipped Aurora plans through the driver
// over a named fake of CloudFormation (fakeStacks: moto's CloudFormation
// has no AWS::RDS::DBCluster, nor runs a Custom::DatabaseUser's function),
// with the plans' fixed parameters and schemas as the catalog has them and
// each stack's outputs evaluated from the real template as CloudFormation
// would: provision, bind, rotation (a second binding, a user of its own,
// while the first lives), unbind of each, deprovision.
func TestAuroraLifecycles(t *testing.T) {
	const (
		region     = "eu-west-1"
		function   = "osb-dbuser-vpc-0123456789abcdef0"
		clusterID  = "osb-7f1c2a5e-cluster-abcdef123456"
		clusterArn = "arn:aws:rds:eu-west-1:123456789012:cluster:" + clusterID
		masterArn  = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:rds!cluster-0a1b2c3d-AbCdEf"
		writer     = clusterID + ".cluster-c0ffee.eu-west-1.rds.amazonaws.com"
		reader     = clusterID + ".cluster-ro-c0ffee.eu-west-1.rds.amazonaws.com"
	)
	for _, tt := range []struct {
		service, plan, folder, port, scheme, jdbc string
		// fixed are the plan's own parameters.
		fixed map[string]string
		// given are a user's provision parameters, want what reaches
		// the stack for them.
		given string
		want  map[string]string
	}{
		{"aws-aurora-postgresql", "serverless-dev", "aurora-postgresql", "5432", "postgresql", "jdbc:postgresql://%s:5432/app?user=%s&password=%s&sslmode=require",
			map[string]string{"MinCapacity": "0", "MaxCapacity": "4", "DataApi": "true"},
			`{"SecondsUntilAutoPause":900,"BackupRetentionPeriod":14}`, map[string]string{"SecondsUntilAutoPause": "900", "BackupRetentionPeriod": "14"}},
		{"aws-aurora-postgresql", "serverless-standard", "aurora-postgresql", "5432", "postgresql", "jdbc:postgresql://%s:5432/app?user=%s&password=%s&sslmode=require",
			map[string]string{"MinCapacity": "0.5", "MaxCapacity": "16", "DataApi": "false"},
			`{"EngineVersion":"16.6","PublishLogs":false}`, map[string]string{"EngineVersion": "16.6", "PublishLogs": "false"}},
		{"aws-aurora-mysql", "serverless-dev", "aurora-mysql", "3306", "mysql", "jdbc:mysql://%s:3306/app?user=%s&password=%s&sslMode=REQUIRED",
			map[string]string{"MinCapacity": "0", "MaxCapacity": "4", "DataApi": "true"},
			`{"SecondsUntilAutoPause":3600}`, map[string]string{"SecondsUntilAutoPause": "3600"}},
		{"aws-aurora-mysql", "serverless-standard", "aurora-mysql", "3306", "mysql", "jdbc:mysql://%s:3306/app?user=%s&password=%s&sslMode=REQUIRED",
			map[string]string{"MinCapacity": "0.5", "MaxCapacity": "16", "DataApi": "false"},
			`{"EngineVersion":"8.0.mysql_aurora.3.08.2","MasterUsername":"root_admin"}`,
			map[string]string{"EngineVersion": "8.0.mysql_aurora.3.08.2", "MasterUsername": "root_admin"}},
	} {
		t.Run(tt.service+" "+tt.plan, func(t *testing.T) {
			plan, config, dir := auroraPlan(t, tt.service, tt.plan)
			if !plan.BindingRotatable || config[KeyTemplate] != tt.folder+"/instance.yaml" || config[KeyBindingTemplate] != tt.folder+"/binding.yaml" {
				t.Fatalf("the plan's broker block %v, rotatable %v", config, plan.BindingRotatable)
			}
			s, err := Configure(plan, config, dir)
			if err != nil {
				t.Fatal(err)
			}
			h := harnessOf(t, s, Deployment{StackPrefix: "osb", RoleARN: "arn:aws:iam::123456789012:role/cfn",
				BoundaryARN: "arn:aws:iam::123456789012:policy/osb-boundary"})
			change := func(kind broker.OperationKind, op string) broker.Change {
				c := h.change(kind, op)
				c.Plan = plan
				c.Instance.PlanID = plan.ID
				c.Instance.Parameters = nil
				return c
			}

			// Provision: the plan's capacity and Data API, the user's
			// parameters, and the template's defaults for the rest.
			provision := change(broker.KindProvision, "op-provision")
			provision.Instance.Parameters = json.RawMessage(tt.given)
			if _, err := h.driver.Begin(h.ctx, h.fresh(provision)); err != nil {
				t.Fatal(err)
			}
			created := params(h.cfn.get(h.instanceStack()).create.Parameters)
			want := maps.Clone(tt.fixed)
			maps.Copy(want, tt.want)
			maps.Copy(want, shippedNetworkParameters)
			if !maps.Equal(created, want) {
				t.Errorf("instance parameters %v, want %v", created, want)
			}
			instance := templateValues{Parameters: withDefaults(s.Template, created), Attributes: map[string]string{
				"Cluster.Endpoint.Address": writer, "Cluster.ReadEndpoint.Address": reader, "Cluster.Endpoint.Port": tt.port,
				"Cluster.DBClusterArn": clusterArn, "Cluster.MasterUserSecret.SecretArn": masterArn}}
			instance.Parameters["AWS::Region"], instance.Parameters["Cluster"] = region, clusterID
			outs := instance.outputs(t, readTemplateNode(t, filepath.Join(dir, tt.folder, "instance.yaml")))
			h.cfn.outputs(h.instanceStack(), flatten(outs)...)
			h.cfn.set(h.instanceStack(), types.StackStatusCreateComplete, "")
			p, err := h.driver.Check(h.ctx, h.fresh(provision))
			if err != nil || !p.Done {
				t.Fatalf("provision check: %+v %v", p, err)
			}
			if want := "https://console.aws.amazon.com/rds/home?region=" + region + "#database:id=" + clusterID + ";is-cluster=true"; p.DashboardURL != want {
				t.Errorf("dashboard %q, want %q", p.DashboardURL, want)
			}

			// A bind and its rotation: each a binding stack of its own
			// (hence a database user of its own), made from the instance's
			// outputs, the user's privileges and the plan's function.
			bind := func(id, op, parameters string) (broker.Change, broker.Credentials) {
				t.Helper()
				c := change(broker.KindBind, op)
				c.Operation.BindingID, c.Binding.ID = id, id
				c.Binding.Parameters = json.RawMessage(parameters)
				if id != bindingID {
					c.Binding.PredecessorID = bindingID
				}
				if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil {
					t.Fatal(err)
				}
				stack := BindingStackName("osb", instanceID, id)
				got := params(h.cfn.get(stack).create.Parameters)
				want := map[string]string{"Host": writer, "ReaderHost": reader, "Port": tt.port, "DatabaseName": "app",
					"ClusterArn": clusterArn, "MasterUserSecretArn": masterArn, "Privileges": "readonly", "DatabaseUserFunction": function}
				if !maps.Equal(got, want) {
					t.Errorf("binding parameters %v, want %v", got, want)
				}
				user := "osb_" + strings.Repeat(id[len(id)-1:], 24)
				const password = "Zq7uM2xV9kP4sT1wY6bN3cR8dF5gH0jL"
				values := templateValues{Parameters: withDefaults(s.BindingTemplate, got), Attributes: map[string]string{
					"DatabaseUser.Username": user, "DatabaseUser.Password": password,
					"DatabaseUser.Uri": tt.scheme + "://" + user + ":" + password + "@" + writer + ":" + tt.port + "/app"}}
				values.Parameters["AWS::Region"] = region
				values.Parameters["Secret"] = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:" + stack + "-db-user-AbCdEf"
				h.cfn.outputs(stack, flatten(values.outputs(t, readTemplateNode(t, filepath.Join(dir, tt.folder, "binding.yaml"))))...)
				h.cfn.set(stack, types.StackStatusCreateComplete, "")
				p, err := h.driver.Check(h.ctx, h.fresh(c))
				if err != nil || !p.Done {
					t.Fatalf("bind check: %+v %v", p, err)
				}
				wantCredentials := broker.Credentials{"host": writer, "reader_host": reader, "port": tt.port, "database_name": "app",
					"username": user, "password": password, "uri": values.Attributes["DatabaseUser.Uri"],
					"jdbc_url":    fmt.Sprintf(tt.jdbc, writer, user, password),
					"cluster_arn": clusterArn, "secret_arn": values.Parameters["Secret"], "region": region}
				// The master secret's ARN, an instance output the template
				// keeps private, reaches the binding's function alone.
				if got := params(h.cfn.get(stack).create.Parameters)["MasterUserSecretArn"]; got != masterArn {
					t.Errorf("the binding stack's MasterUserSecretArn %q, want %q", got, masterArn)
				}
				if !maps.Equal(p.Credentials, wantCredentials) {
					t.Errorf("credentials\n%v\nwant\n%v", p.Credentials, wantCredentials)
				}
				return c, p.Credentials
			}
			first, firstCredentials := bind(bindingID, "op-bind", `{"Privileges":"readonly"}`)
			// The broker gives a rotation its predecessor's parameters.
			second, secondCredentials := bind("b-0002", "op-rotate", `{"Privileges":"readonly"}`)
			if firstCredentials["username"] == secondCredentials["username"] || firstCredentials["secret_arn"] == secondCredentials["secret_arn"] {
				t.Errorf("the rotation shares its predecessor's user: %v, %v", firstCredentials["username"], secondCredentials["username"])
			}

			// Unbinding the predecessor deletes its stack (its user) alone;
			// the successor's stays until its own unbind.
			unbind := func(c broker.Change, op string) {
				t.Helper()
				u := change(broker.KindUnbind, op)
				u.Operation.BindingID, u.Binding.ID = c.Binding.ID, c.Binding.ID
				if _, err := h.driver.Begin(h.ctx, h.fresh(u)); err != nil {
					t.Fatal(err)
				}
				stack := BindingStackName("osb", instanceID, c.Binding.ID)
				if len(h.cfn.get(stack).deletes) != 1 {
					t.Fatalf("%s: DeleteStack calls %d", stack, len(h.cfn.get(stack).deletes))
				}
				h.cfn.set(stack, types.StackStatusDeleteComplete, "")
				if p, err := h.driver.Check(h.ctx, h.fresh(u)); err != nil || !p.Done {
					t.Fatalf("unbind check: %+v %v", p, err)
				}
			}
			unbind(first, "op-unbind-1")
			if s := h.cfn.get(BindingStackName("osb", instanceID, "b-0002")); s == nil || len(s.deletes) != 0 {
				t.Fatal("the successor's stack went with its predecessor's")
			}
			unbind(second, "op-unbind-2")

			deprovision := change(broker.KindDeprovision, "op-deprovision")
			if _, err := h.driver.Begin(h.ctx, h.fresh(deprovision)); err != nil {
				t.Fatal(err)
			}
			if n := len(h.cfn.get(h.instanceStack()).deletes); n != 1 {
				t.Fatalf("DeleteStack calls %d", n)
			}
			h.cfn.set(h.instanceStack(), types.StackStatusDeleteComplete, "")
			if p, err := h.driver.Check(h.ctx, h.fresh(deprovision)); err != nil || !p.Done {
				t.Fatalf("deprovision check: %+v %v", p, err)
			}
			if h.cfn.live() != 0 {
				t.Errorf("%d stacks left", h.cfn.live())
			}
		})
	}
}

func flatten(m map[string]string) []string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kv = append(kv, k, m[k])
	}
	return kv
}
