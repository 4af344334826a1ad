package cloudformation

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
)

// searchHarness is the driver over a named fake of CloudFormation
// (fakeStacks), configured from the shipped catalog's aws-opensearch plan
// (its schemas, fixed parameters and templates) as the broker configures it:
// moto's CloudFormation has no OpenSearch Service.
func searchHarness(t *testing.T, planName string) *harness {
	t.Helper()
	cat := shippedCatalogWithNetwork(t)
	var plan *catalog.Plan
	for _, svc := range cat.Services() {
		for _, p := range svc.Plans {
			if svc.Name == "aws-opensearch" && p.Name == planName {
				plan = p
			}
		}
	}
	if plan == nil {
		t.Fatalf("services/catalog.yaml has no aws-opensearch plan %s", planName)
	}
	s, err := Configure(plan, plan.Settings.Config, cat.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return harnessOf(t, s, Deployment{StackPrefix: "osb", RoleARN: "arn:aws:iam::123456789012:role/cfn",
		BoundaryARN: "arn:aws:iam::123456789012:policy/osb-boundary"})
}

// The instance's outputs, as the instance template makes them from the
// domain's attributes.
const (
	searchEndpoint = "vpc-osb-7f1c2a5e-domain-abcdefghijkl.eu-west-1.es.amazonaws.com"
	searchDomain   = "arn:aws:es:eu-west-1:123456789012:domain/osb-7f1c2a5e-domain-abc"
	searchMaster   = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:osb-7f1c2a5e-search-master-AbCdEf"
)

// stackOutputs sets the stack's outputs to those the template makes from
// values, and returns them.
func stackOutputs(h *harness, stack, template string, values templateValues) map[string]string {
	h.t.Helper()
	outs := values.outputs(h.t, readTemplateNode(h.t, filepath.Join(servicesDir, "opensearch", template)))
	var kv []string
	for k, v := range outs {
		kv = append(kv, k, v)
	}
	h.cfn.outputs(stack, kv...)
	return outs
}

func searchProvisioned(h *harness) broker.Change {
	h.t.Helper()
	c := h.change(broker.KindProvision, "op-provision")
	c.Instance.Parameters = json.RawMessage(`{"VolumeSize":20,"EngineVersion":"OpenSearch_2.19"}`)
	if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil {
		h.t.Fatal(err)
	}
	stackOutputs(h, h.instanceStack(), "instance.yaml", templateValues{
		Parameters: map[string]string{"AWS::Region": "eu-west-1", "MasterSecret": searchMaster, "Domain": "osb-7f1c2a5e-domain-abc"},
		Attributes: map[string]string{"Domain.DomainEndpoint": searchEndpoint, "Domain.Arn": searchDomain}})
	h.cfn.set(h.instanceStack(), types.StackStatusCreateComplete, "")
	if p, err := h.driver.Check(h.ctx, h.fresh(c)); err != nil || !p.Done {
		h.t.Fatalf("provision check: %+v %v", p, err)
	}
	return c
}

func TestSearchBindings(t *testing.T) {
	t.Run("a provision passes the plan's node type, count and zones and the user's volume; the domain's console is the dashboard", func(t *testing.T) {
		for _, tt := range []struct{ plan, instanceType, count, zones string }{
			{"small", "t3.small.search", "1", "false"},
			{"medium-ha", "m6g.large.search", "2", "true"},
		} {
			h := searchHarness(t, tt.plan)
			c := searchProvisioned(h)
			got := params(h.cfn.get(h.instanceStack()).create.Parameters)
			want := map[string]string{"InstanceType": tt.instanceType, "InstanceCount": tt.count, "ZoneAwareness": tt.zones,
				"VolumeSize": "20", "EngineVersion": "OpenSearch_2.19"}
			maps.Copy(want, shippedNetworkParameters)
			if len(got) != len(want) {
				t.Errorf("%s: parameters %v, want %v", tt.plan, got, want)
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: parameter %s = %q, want %q", tt.plan, k, got[k], v)
				}
			}
			p, err := h.driver.Check(h.ctx, h.fresh(c))
			if err != nil || !strings.Contains(p.DashboardURL, "/aos/home?region=eu-west-1#opensearch/domains/osb-7f1c2a5e-domain-abc") {
				t.Errorf("%s: dashboard %q %v", tt.plan, p.DashboardURL, err)
			}
		}
	})

	bind := func(h *harness, id, params string) broker.Change {
		c := h.change(broker.KindBind, "op-bind-"+id)
		c.Operation.BindingID, c.Binding.ID = id, id
		c.Binding.Parameters = json.RawMessage(params)
		return c
	}
	// bound runs a bind to its end, the binding stack's outputs those the
	// template makes, and returns its credentials.
	bound := func(h *harness, c broker.Change, user string) broker.Credentials {
		t.Helper()
		if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil {
			t.Fatal(err)
		}
		stack := BindingStackName("osb", instanceID, c.Binding.ID)
		values := templateValues{Parameters: map[string]string{"AWS::Region": "eu-west-1",
			"Secret": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:" + stack + "-search-user-XyZ123"},
			Attributes: map[string]string{"SearchUser.Username": user, "SearchUser.Password": "Gen3rated-Pa55word?",
				"SearchUser.Uri": "https://" + user + ":Gen3rated-Pa55word%3F@" + searchEndpoint + ":443", "SearchUser.IndexPattern": user + "-*"}}
		for k, v := range params(h.cfn.get(stack).create.Parameters) {
			values.Parameters[k] = v
		}
		stackOutputs(h, stack, "binding.yaml", values)
		h.cfn.set(stack, types.StackStatusCreateComplete, "")
		p, err := h.driver.Check(h.ctx, h.fresh(c))
		if err != nil || !p.Done {
			t.Fatalf("bind check: %+v %v", p, err)
		}
		return p.Credentials
	}

	t.Run("a bind passes the instance's endpoint and secret, the user's privileges and the plan's function; its credentials are a user and password, no AWS key", func(t *testing.T) {
		h := searchHarness(t, "small")
		searchProvisioned(h)
		c := bind(h, bindingID, `{"Privileges":"owner"}`)
		creds := bound(h, c, "osb_0123456789abcdef01234567")
		got := params(h.cfn.get(h.bindingStack()).create.Parameters)
		want := map[string]string{"Endpoint": searchEndpoint, "MasterUserSecretArn": searchMaster, "Privileges": "owner",
			"DatabaseUserFunction": "osb-dbuser-vpc-0123456789abcdef0"}
		if len(got) != len(want) {
			t.Errorf("parameters %v, want %v", got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("parameter %s = %q, want %q", k, got[k], v)
			}
		}
		wantCredentials := broker.Credentials{"endpoint": searchEndpoint, "url": "https://" + searchEndpoint,
			"username": "osb_0123456789abcdef01234567", "password": "Gen3rated-Pa55word?",
			"uri":           "https://osb_0123456789abcdef01234567:Gen3rated-Pa55word%3F@" + searchEndpoint + ":443",
			"index_pattern": "osb_0123456789abcdef01234567-*", "region": "eu-west-1",
			"secret_arn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:" + h.bindingStack() + "-search-user-XyZ123",
			// Not the master secret's ARN: the instance template keeps it
			// private (its Metadata), for the binding's function alone.
			"domain_arn": searchDomain}
		if len(creds) != len(wantCredentials) {
			t.Errorf("credentials %v, want %v", creds, wantCredentials)
		}
		for k, v := range wantCredentials {
			if creds[k] != v {
				t.Errorf("credential %s = %q, want %q", k, creds[k], v)
			}
		}
	})

	for _, tt := range []struct{ name, params, says string }{
		{"that names another function", `{"DatabaseUserFunction":"osb-dbuser-vpc-0fedcba987654321f"}`, "The parameter DatabaseUserFunction is not one the plan accepts"},
		{"that widens the index pattern", `{"IndexPattern":"*"}`, "The parameter IndexPattern is not one the plan accepts"},
		{"that names the master's secret", `{"MasterUserSecretArn":"arn:aws:secretsmanager:eu-west-1:123456789012:secret:other-AbCdEf"}`, "MasterUserSecretArn"},
	} {
		t.Run("a bind "+tt.name+" fails, and no stack is asked for", func(t *testing.T) {
			h := searchHarness(t, "small")
			searchProvisioned(h)
			_, err := h.driver.Begin(h.ctx, h.fresh(bind(h, bindingID, tt.params)))
			if f := failureOf(t, err); !strings.Contains(f.Description, tt.says) {
				t.Errorf("description %q", f.Description)
			}
			if h.cfn.get(h.bindingStack()) != nil {
				t.Error("a binding stack was asked for")
			}
		})
	}

	t.Run("a rotation's successor is another stack, hence another user; unbinding the predecessor deletes its stack alone", func(t *testing.T) {
		h := searchHarness(t, "medium-ha")
		searchProvisioned(h)
		first := bound(h, bind(h, "b-first", `{"Privileges":"readonly"}`), "osb_aaaaaaaaaaaaaaaaaaaaaaaa")
		second := bound(h, bind(h, "b-second", `{"Privileges":"readonly"}`), "osb_bbbbbbbbbbbbbbbbbbbbbbbb")
		if first["username"] == second["username"] || first["secret_arn"] == second["secret_arn"] {
			t.Fatalf("both bindings have %s, %s", first["username"], first["secret_arn"])
		}
		unbind := h.change(broker.KindUnbind, "op-unbind")
		unbind.Operation.BindingID, unbind.Binding.ID = "b-first", "b-first"
		if _, err := h.driver.Begin(h.ctx, h.fresh(unbind)); err != nil {
			t.Fatal(err)
		}
		if d := h.cfn.get(BindingStackName("osb", instanceID, "b-first")).deletes; len(d) != 1 {
			t.Errorf("the predecessor's stack got %d deletes", len(d))
		}
		if d := h.cfn.get(BindingStackName("osb", instanceID, "b-second")).deletes; len(d) != 0 {
			t.Errorf("the successor's stack got %d deletes", len(d))
		}
	})

	t.Run("the instance template refuses a domain outside a VPC, in a rule CloudFormation checks before it makes anything", func(t *testing.T) {
		doc := readTemplateNode(t, filepath.Join(servicesDir, "opensearch", "instance.yaml"))
		rule := nodeAt(doc, "Rules", "AVpcAndItsSubnets")
		if rule == nil || !strings.Contains(nodeAt(rule, "Assertions").Content[0].Content[3].Value, "VPC only") {
			t.Fatal("no rule AVpcAndItsSubnets asserting a VPC")
		}
		for _, name := range []string{"VpcId", "SubnetIds"} {
			if nodeAt(doc, "Parameters", name, "Default").Value != "" {
				t.Errorf("%s has a default", name)
			}
		}
	})

	t.Run("a deprovision keeps the domain, the secret that opens it and the security group its interfaces use; an unbind keeps nothing", func(t *testing.T) {
		instance := readTemplateNode(t, filepath.Join(servicesDir, "opensearch", "instance.yaml"))
		for _, id := range []string{"Domain", "MasterSecret", "SecurityGroup"} {
			for _, policy := range []string{"DeletionPolicy", "UpdateReplacePolicy"} {
				if n := nodeAt(instance, "Resources", id, policy); n == nil || n.Value != "Retain" {
					t.Errorf("the instance's %s has no %s Retain", id, policy)
				}
			}
		}
		binding := readTemplateNode(t, filepath.Join(servicesDir, "opensearch", "binding.yaml"))
		if n := nodeAt(binding, "Resources", "Secret", "DeletionPolicy"); n == nil || n.Value != "Delete" {
			t.Error("the binding's secret is not deleted with it")
		}
	})
}
