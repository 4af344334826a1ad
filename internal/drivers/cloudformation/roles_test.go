package cloudformation

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
)

// servicesDir holds the example services, whose S3 templates these tests
// configure as the shipped catalog's standard-app-identity plan does.
var servicesDir = filepath.Join("..", "..", "..", "services")

// rolePlanConfig is that plan's broker block, with a trust anchor.
func rolePlanConfig() map[string]any {
	return map[string]any{"template": "s3-bucket/instance.yaml", "binding_template": "s3-bucket/binding-role.yaml",
		"binding_credentials": "role", "trust_anchor_arn": trustAnchor}
}

// s3Plan decides the S3 templates' user parameters as the shipped plans do.
func s3Plan(t *testing.T) *catalog.Plan {
	return schemaPlan(t, map[catalog.SchemaKind][]string{
		catalog.InstanceCreate: {}, catalog.BindingCreate: {"Access"}})
}

func TestRolePlanSettings(t *testing.T) {
	t.Run("the shipped role template configures as a role plan, with its trust anchor", func(t *testing.T) {
		s, err := Configure(s3Plan(t), rolePlanConfig(), servicesDir)
		if err != nil {
			t.Fatal(err)
		}
		if s.BindingCredentials != CredentialsRole || s.TrustAnchorARN != trustAnchor || s.Warning() != "" {
			t.Errorf("settings %s %s, warning %q", s.BindingCredentials, s.TrustAnchorARN, s.Warning())
		}
	})
	t.Run("a plan says nothing of its credentials: access keys, as before", func(t *testing.T) {
		s, err := Configure(s3Plan(t), map[string]any{"template": "s3-bucket/instance.yaml", "binding_template": "s3-bucket/binding.yaml"}, servicesDir)
		if err != nil {
			t.Fatal(err)
		}
		if s.BindingCredentials != CredentialsAccessKey || s.CheckBind(broker.BindingRequest{}) != nil {
			t.Errorf("credentials %s, bind check %v", s.BindingCredentials, s.CheckBind(broker.BindingRequest{}))
		}
	})
	t.Run("a role plan without its trust anchor starts, warned", func(t *testing.T) {
		config := rolePlanConfig()
		delete(config, "trust_anchor_arn")
		s, err := Configure(s3Plan(t), config, servicesDir)
		if err != nil {
			t.Fatal(err)
		}
		if w := s.Warning(); !strings.Contains(w, "every bind is refused until the platform operator registers the platform's instance identity CA") {
			t.Errorf("warning %q", w)
		}
	})

	refused := []struct {
		name   string
		change func(config map[string]any)
		want   string
	}{
		{"binding_credentials of another kind", func(c map[string]any) { c["binding_credentials"] = "oidc" },
			`binding_credentials: must be access_key (an IAM user with an access key, the default) or role`},
		{"a trust anchor that is not one", func(c map[string]any) { c["trust_anchor_arn"] = "arn:aws:iam::123456789012:role/ca" },
			"trust_anchor_arn: must be the ARN of an IAM Roles Anywhere trust anchor"},
		{"a trust anchor on a plan of access keys", func(c map[string]any) {
			c["binding_credentials"] = "access_key"
			c["binding_template"] = "s3-bucket/binding.yaml"
		}, "trust_anchor_arn: is set, but the plan's bindings are access keys"},
		{"a role plan whose binding template makes a user", func(c map[string]any) { c["binding_template"] = "s3-bucket/binding.yaml" },
			"s3-bucket/binding.yaml must declare the parameter AppGuid"},
		{"the role template on a plan of access keys, whose AppGuid no one would set", func(c map[string]any) {
			delete(c, "binding_credentials")
			delete(c, "trust_anchor_arn")
		}, "s3-bucket/binding-role.yaml declares the parameter AppGuid, which the driver passes only to the binding template of a plan with binding_credentials: role"},
		{"a role plan without a binding template", func(c map[string]any) { delete(c, "binding_template") },
			"binding_credentials: is role, but the plan has no binding_template"},
		{"a plan that fixes the app", func(c map[string]any) { c["binding_parameters"] = map[string]any{"AppGuid": boundApp} },
			"binding_parameters.AppGuid: AppGuid is the bound app's GUID (the bind request's app_guid), which the driver passes itself"},
		{"a plan that fixes the trust anchor as a parameter", func(c map[string]any) { c["binding_parameters"] = map[string]any{"TrustAnchorArn": otherAnchor} },
			"binding_parameters.TrustAnchorArn: TrustAnchorArn is the plan's trust_anchor_arn, which the driver passes itself"},
	}
	for _, tt := range refused {
		t.Run(tt.name+" is refused at start", func(t *testing.T) {
			config := rolePlanConfig()
			tt.change(config)
			_, err := Configure(s3Plan(t), config, servicesDir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want it to say %q", err, tt.want)
			}
		})
	}
	t.Run("a binding schema that lets users set the app is refused at start", func(t *testing.T) {
		plan := schemaPlan(t, map[catalog.SchemaKind][]string{catalog.InstanceCreate: {}, catalog.BindingCreate: {"Access", "AppGuid"}})
		_, err := Configure(plan, rolePlanConfig(), servicesDir)
		if err == nil || !strings.Contains(err.Error(), "properties.AppGuid: AppGuid is the bound app's GUID (the bind request's app_guid), which the driver passes itself") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("the trust anchor is part of the plan's version: another one is another digest", func(t *testing.T) {
		a, _ := Configure(s3Plan(t), rolePlanConfig(), servicesDir)
		config := rolePlanConfig()
		config["trust_anchor_arn"] = otherAnchor
		b, _ := Configure(s3Plan(t), config, servicesDir)
		if a == nil || b == nil || a.PlanDigest() == b.PlanDigest() {
			t.Error("the digests are equal")
		}
	})
}

func TestRoleBindRequests(t *testing.T) {
	s, err := Configure(s3Plan(t), rolePlanConfig(), servicesDir)
	if err != nil {
		t.Fatal(err)
	}
	noAnchor := *s
	noAnchor.TrustAnchorARN = ""
	tests := []struct {
		name     string
		settings *Settings
		request  broker.BindingRequest
		code     broker.Code // "" for none
		says     string
	}{
		{"a bind to an app passes", s, broker.BindingRequest{AppGUID: boundApp}, "", ""},
		{"a service key (no app) is refused: OSB's RequiresApp", s, broker.BindingRequest{},
			broker.CodeRequiresApp, "bind the service instance to an app (cf bind-service) rather than create a service key"},
		{"an app GUID that is no Cloud Foundry GUID is refused", s, broker.BindingRequest{AppGUID: "*"},
			broker.CodeBadRequest, "app_guid: must be a Cloud Foundry app GUID in lower case"},
		{"an app GUID in upper case is refused: the certificate has it in lower case", s, broker.BindingRequest{AppGUID: strings.ToUpper(boundApp)},
			broker.CodeBadRequest, "app_guid: must be a Cloud Foundry app GUID in lower case"},
		{"every bind is refused while the plan names no trust anchor", &noAnchor, broker.BindingRequest{AppGUID: boundApp},
			broker.CodeUnprocessable, "Ask the platform operator to set the plan's trust_anchor_arn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.settings.CheckBind(tt.request)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *broker.Error
			if !errors.As(err, &e) || e.Code != tt.code || !strings.Contains(e.Description, tt.says) {
				t.Errorf("error %v, want %s saying %q", err, tt.code, tt.says)
			}
		})
	}
}

// roleHarness is the driver over a named fake of CloudFormation
// (fakeStacks), on the shipped S3 templates and the role plan's settings.
func roleHarness(t *testing.T) *harness {
	t.Helper()
	s, err := Configure(s3Plan(t), rolePlanConfig(), servicesDir)
	if err != nil {
		t.Fatal(err)
	}
	return harnessOf(t, s, Deployment{StackPrefix: "osb", RoleARN: "arn:aws:iam::123456789012:role/cfn",
		BoundaryARN: "arn:aws:iam::123456789012:policy/osb-boundary"})
}

// roleProvisioned runs a provision of the S3 instance template to its end.
func roleProvisioned(h *harness) {
	h.t.Helper()
	c := h.change(broker.KindProvision, "op-provision")
	c.Instance.Parameters = nil
	if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil {
		h.t.Fatal(err)
	}
	h.cfn.outputs(h.instanceStack(), "BucketName", "bucket-1", "BucketArn", "arn:aws:s3:::bucket-1", "DashboardUrl", "https://console.example/bucket-1")
	h.cfn.set(h.instanceStack(), types.StackStatusCreateComplete, "")
	if p, err := h.driver.Check(h.ctx, h.fresh(c)); err != nil || !p.Done {
		h.t.Fatalf("provision check: %+v %v", p, err)
	}
}

func TestRoleBindings(t *testing.T) {
	bind := func(h *harness, app string) broker.Change {
		c := h.change(broker.KindBind, "op-bind")
		c.Binding.AppGUID = app
		c.Binding.Parameters = json.RawMessage(`{"Access":"ReadOnly"}`)
		return c
	}

	t.Run("the binding stack gets the app, the trust anchor and the boundary from the driver; its outputs are the credentials", func(t *testing.T) {
		h := roleHarness(t)
		roleProvisioned(h)
		c := bind(h, boundApp)
		if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil {
			t.Fatal(err)
		}
		got := params(h.cfn.get(h.bindingStack()).create.Parameters)
		want := map[string]string{"BucketName": "bucket-1", "BucketArn": "arn:aws:s3:::bucket-1", "Access": "ReadOnly",
			AppGUIDParameter: boundApp, TrustAnchorParameter: trustAnchor, BoundaryParameter: "arn:aws:iam::123456789012:policy/osb-boundary"}
		if len(got) != len(want) {
			t.Errorf("parameters %v, want %v", got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("parameter %s = %q, want %q", k, got[k], v)
			}
		}

		// The stack's outputs, as the real template makes them from
		// those parameters.
		const roleARN = "arn:aws:iam::123456789012:role/serverless-osb/osb-7f1c2a5e-b-0001-Role-ABCDEF123456"
		const profileARN = "arn:aws:rolesanywhere:eu-west-1:123456789012:profile/1b2c3d4e-5f60-4718-9a0b-c1d2e3f40516"
		values := templateValues{Parameters: map[string]string{"AWS::Region": "eu-west-1"}, Attributes: map[string]string{
			"Role.Arn": roleARN, "Profile.ProfileArn": profileARN}}
		for k, v := range got {
			values.Parameters[k] = v
		}
		outs := values.outputs(t, readTemplateNode(t, filepath.Join("..", "..", "..", "services", "s3-bucket", "binding-role.yaml")))
		var kv []string
		for k, v := range outs {
			kv = append(kv, k, v)
		}
		h.cfn.outputs(h.bindingStack(), kv...)
		h.cfn.set(h.bindingStack(), types.StackStatusCreateComplete, "")
		p, err := h.driver.Check(h.ctx, h.fresh(c))
		if err != nil || !p.Done {
			t.Fatalf("check: %+v %v", p, err)
		}
		wantCredentials := broker.Credentials{"bucket_name": "bucket-1", "bucket_arn": "arn:aws:s3:::bucket-1", "region": "eu-west-1",
			"role_arn": roleARN, "profile_arn": profileARN, "trust_anchor_arn": trustAnchor,
			"credential_process": "aws_signing_helper credential-process --certificate $CF_INSTANCE_CERT --private-key $CF_INSTANCE_KEY" +
				" --trust-anchor-arn " + trustAnchor + " --profile-arn " + profileARN + " --role-arn " + roleARN + " --region eu-west-1"}
		if len(p.Credentials) != len(wantCredentials) {
			t.Errorf("credentials %v, want %v", p.Credentials, wantCredentials)
		}
		for k, v := range wantCredentials {
			if p.Credentials[k] != v {
				t.Errorf("credential %s = %q, want %q", k, p.Credentials[k], v)
			}
		}
		for _, k := range []string{"access_key_id", "secret_access_key"} {
			if _, ok := p.Credentials[k]; ok {
				t.Errorf("a role binding hands out %s", k)
			}
		}
	})

	for _, tt := range []struct{ name, app, says string }{
		{"without an app (accepted under an earlier catalog)", "", "so a binding needs an app"},
		{"with an app GUID that would widen the trust policy", "*", "app_guid: must be a Cloud Foundry app GUID"},
	} {
		t.Run("a bind "+tt.name+" fails, and no stack is asked for", func(t *testing.T) {
			h := roleHarness(t)
			roleProvisioned(h)
			_, err := h.driver.Begin(h.ctx, h.fresh(bind(h, tt.app)))
			if f := failureOf(t, err); !strings.Contains(f.Description, tt.says) {
				t.Errorf("description %q", f.Description)
			}
			if h.cfn.get(h.bindingStack()) != nil {
				t.Error("a binding stack was asked for")
			}
		})
	}

	t.Run("no user sets the app: a bind that sends AppGuid fails, and no stack is asked for", func(t *testing.T) {
		h := roleHarness(t)
		roleProvisioned(h)
		c := bind(h, boundApp)
		c.Binding.Parameters = json.RawMessage(`{"AppGuid":"` + otherApp + `"}`)
		_, err := h.driver.Begin(h.ctx, h.fresh(c))
		if f := failureOf(t, err); !strings.Contains(f.Description, "The parameter AppGuid is not one the plan accepts") {
			t.Errorf("description %q", f.Description)
		}
		if h.cfn.get(h.bindingStack()) != nil {
			t.Error("a binding stack was asked for")
		}
	})
}
