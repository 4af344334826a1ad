package cloudformation

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"gopkg.in/yaml.v3"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/cacheusers"
)

// TestTheValkeyTemplatesThroughTheDriver runs the ElastiCache for Valkey
// plan's lifecycle through the driver over a named fake of CloudFormation
// (moto has no ElastiCache): each stack is made with the parameters the
// driver sends, and its outputs are what the real template makes of them
// (evaluated here, with the attributes ElastiCache and the membership
// function would give); the binding's user is named and given the access
// string internal/cacheusers makes for its privileges, and joins the group
// through the broker's function.
func TestTheValkeyTemplatesThroughTheDriver(t *testing.T) {
	const (
		region, account = "us-east-1", "123456789012"
		stackUUID       = "1b2c3d4e-5f60-4718-9a0b-c1d2e3f40516"
	)
	instanceTemplate := filepath.Join(servicesDir, "elasticache-valkey", "instance.yaml")
	bindingTemplate := filepath.Join(servicesDir, "elasticache-valkey", "binding.yaml")
	plan, dir := shippedPlan(t, "elasticache-valkey")
	s, err := Configure(plan, plan.Settings.Config, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, privileges := range []cacheusers.Privileges{cacheusers.Owner, cacheusers.ReadWrite, cacheusers.ReadOnly} {
		t.Run(string(privileges)+" binding", func(t *testing.T) {
			h := harnessOf(t, s, Deployment{StackPrefix: "osb", RoleARN: "arn:aws:iam::123456789012:role/cfn"})
			pseudo := func(stack string) map[string]string {
				return map[string]string{"AWS::StackName": stack, "AWS::Region": region, "AWS::AccountId": account, "AWS::Partition": "aws",
					"AWS::StackId": "arn:aws:cloudformation:" + region + ":" + account + ":stack/" + stack + "/" + stackUUID}
			}

			// Provision: the plan's limits and the user's parameters.
			c := h.change(broker.KindProvision, "op-provision")
			c.Instance.Parameters = json.RawMessage(`{"MajorEngineVersion":"7","SnapshotRetentionLimit":7}`)
			if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil {
				t.Fatal(err)
			}
			instance := h.instanceStack()
			got := params(h.cfn.get(instance).create.Parameters)
			for k, v := range map[string]string{"DataStorageMaximumGB": "1", "ECPUPerSecondMaximum": "5000", "MajorEngineVersion": "7",
				"SnapshotRetentionLimit": "7"} {
				if got[k] != v {
					t.Errorf("instance parameter %s = %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
			host := instance + "-abc123.serverless.use1.cache.amazonaws.com"
			iv := templateValues{Parameters: pseudo(instance), Attributes: map[string]string{
				"Cache.Endpoint.Address": host, "Cache.Endpoint.Port": "6379",
				"Cache.ReaderEndpoint.Address": host, "Cache.ReaderEndpoint.Port": "6380"}}
			for k, v := range got {
				iv.Parameters[k] = v
			}
			// Ref of the user group and of the cache is their id, the stack's name.
			iv.Parameters["UserGroup"], iv.Parameters["Cache"] = instance, instance
			doc := readTemplateNode(t, instanceTemplate)
			iv.Parameters = withDefaults(h.settings.Template, iv.Parameters)
			iv.conditions(t, doc)
			h.cfn.outputs(instance, flat(iv.outputs(t, doc))...)
			h.cfn.set(instance, types.StackStatusCreateComplete, "")
			if p, err := h.driver.Check(h.ctx, h.fresh(c)); err != nil || !p.Done {
				t.Fatalf("provision check: %+v %v", p, err)
			}

			// Bind: the instance's outputs the binding declares, the plan's
			// key prefix, the user's privileges.
			c = h.change(broker.KindBind, "op-bind")
			c.Binding.Parameters = json.RawMessage(`{"Privileges":"` + string(privileges) + `"}`)
			if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil {
				t.Fatal(err)
			}
			binding := h.bindingStack()
			got = params(h.cfn.get(binding).create.Parameters)
			want := map[string]string{"Host": host, "Port": "6379", "UserGroupId": instance, "KeyPrefix": "app", "Privileges": string(privileges)}
			if len(got) != len(want) {
				t.Errorf("binding parameters %v, want %v", got, want)
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("binding parameter %s = %q, want %q", k, got[k], v)
				}
			}

			bv := templateValues{Parameters: pseudo(binding), Attributes: map[string]string{}}
			for k, v := range got {
				bv.Parameters[k] = v
			}
			bdoc := readTemplateNode(t, bindingTemplate)
			bv.Parameters = withDefaults(h.settings.BindingTemplate, bv.Parameters)
			bv.conditions(t, bdoc)
			user := evalString(t, bv, nodeAt(bdoc, "Resources", "User", "Properties", "UserId"))
			if name := evalString(t, bv, nodeAt(bdoc, "Resources", "User", "Properties", "UserName")); name != user {
				t.Errorf("user name %q, id %q: the access strings and the outputs take them for one", name, user)
			}
			if want := instance + "-c1d2e3f40516"; user != want || len(user) > 53 || !regexp.MustCompile(`^[a-z][a-z0-9-]*$`).MatchString(user) {
				t.Errorf("user id %q, want %q (ElastiCache's pattern, at most 53 characters)", user, want)
			}
			access := evalString(t, bv, nodeAt(bdoc, "Resources", "User", "Properties", "AccessString"))
			if want, err := cacheusers.AccessString(privileges, user, "app"); err != nil || access != want {
				t.Errorf("the template's access string %q, want cacheusers' %q (%v)", access, want, err)
			}

			// The membership's properties, as the function reads them.
			bv.Parameters["User"] = user
			bv.Parameters["Secret"] = "arn:aws:secretsmanager:" + region + ":" + account + ":secret:" + binding + "-cache-user-AbCdEf"
			props, err := bv.eval(nodeAt(bdoc, "Resources", "Membership", "Properties"))
			if err != nil {
				t.Fatal(err)
			}
			m, err := cacheusers.ParseMemberProperties(props.(map[string]any))
			if err != nil {
				t.Fatalf("the function refuses the template's properties: %v", err)
			}
			if m.UserGroupID != instance || m.UserID != user || m.Host != host || m.Port != "6379" {
				t.Errorf("membership %+v", m)
			}
			if token := props.(map[string]any)["ServiceToken"]; token != "arn:aws:lambda:"+region+":"+account+":function:osb-cacheuser" {
				t.Errorf("ServiceToken %v, want the broker's osb-cacheuser function", token)
			}

			// The outputs, with the function's attributes.
			const password = "Gen3ratedPassw0rdOfThirtyTwoChar"
			uri := "rediss://" + user + ":" + password + "@" + host + ":6379"
			bv.Attributes = map[string]string{"Membership.Username": user, "Membership.Password": password, "Membership.Uri": uri}
			h.cfn.outputs(binding, flat(bv.outputs(t, bdoc))...)
			h.cfn.set(binding, types.StackStatusCreateComplete, "")
			p, err := h.driver.Check(h.ctx, h.fresh(c))
			if err != nil || !p.Done {
				t.Fatalf("bind check: %+v %v", p, err)
			}
			prefix := "app"
			if privileges == cacheusers.Owner {
				prefix = user
			}
			// The binding's outputs, and the instance's the binding does not
			// override (but the console's URL, and the user group and the
			// cache's name, which are private).
			wantCreds := broker.Credentials{"host": host, "port": "6379", "tls": "true", "username": user, "password": password,
				"uri": uri, "key_prefix": prefix, "secret_arn": bv.Parameters["Secret"],
				"reader_host": host, "reader_port": "6380"}
			if got, want := slices.Sorted(maps.Keys(p.Credentials)), slices.Sorted(maps.Keys(wantCreds)); !slices.Equal(got, want) {
				t.Errorf("credentials %v, want %v", got, want)
			}
			for k, v := range wantCreds {
				if p.Credentials[k] != v {
					t.Errorf("credential %s = %v, want %v", k, p.Credentials[k], v)
				}
			}

			// Unbind, then deprovision: each stack deleted.
			for _, step := range []struct {
				kind  broker.OperationKind
				stack string
			}{{broker.KindUnbind, binding}, {broker.KindDeprovision, instance}} {
				c := h.change(step.kind, "op-"+string(step.kind))
				if p, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil || p.Done {
					t.Fatalf("%s: %+v %v", step.kind, p, err)
				}
				if st := h.cfn.get(step.stack); len(st.deletes) != 1 {
					t.Fatalf("%s: %d DeleteStack calls", step.kind, len(st.deletes))
				}
				h.cfn.set(step.stack, types.StackStatusDeleteComplete, "")
				if p, err := h.driver.Check(h.ctx, h.fresh(c)); err != nil || !p.Done {
					t.Fatalf("%s check: %+v %v", step.kind, p, err)
				}
			}
			if n := h.cfn.live(); n != 0 {
				t.Errorf("%d stacks left", n)
			}
		})
	}
}

func flat(m map[string]string) []string {
	var kv []string
	for k, v := range m {
		kv = append(kv, k, v)
	}
	return kv
}

func evalString(t *testing.T, v templateValues, node *yaml.Node) string {
	t.Helper()
	if node == nil {
		t.Fatal("no such node in the template")
	}
	got, err := v.eval(node)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := got.(string)
	if !ok {
		t.Fatalf("%v is not a string", got)
	}
	return s
}
