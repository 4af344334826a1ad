package broker_test

import (
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
)

// acceptingSettings are plan settings that name the parameters their driver
// passes on, as the CloudFormation driver's do.
type acceptingSettings map[catalog.SchemaKind][]string

func (s acceptingSettings) AcceptedParameters(k catalog.SchemaKind) []string { return s[k] }

// acceptingDrivers drives every plan with one driver and those settings.
type acceptingDrivers struct {
	d        broker.Driver
	settings acceptingSettings
}

func (s acceptingDrivers) For(*catalog.Plan) (broker.Driver, any, bool) { return s.d, s.settings, true }

func TestParametersThePlanDoesNotAcceptAreRefused(t *testing.T) {
	newAccepting := func(t *testing.T) *harness {
		h := newHarness(t)
		h.b.Drivers = acceptingDrivers{h.driver, acceptingSettings{
			catalog.InstanceCreate: {"size", "tier"},
			catalog.InstanceUpdate: {"size"},
		}}
		return h
	}
	badRequest := func(t *testing.T, err error, says ...string) {
		t.Helper()
		if broker.ErrorCode(err) != broker.CodeBadRequest {
			t.Fatalf("error %v, want 400 BadRequest", err)
		}
		for _, want := range says {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q does not say %q", err.Error(), want)
			}
		}
	}

	t.Run("a provision naming a parameter no schema names gets 400 naming it and those the plan accepts, and nothing is made", func(t *testing.T) {
		h := newAccepting(t)
		// plan-async has no schema: only the settings say what passes.
		_, err := h.b.Provision(ctx, provisionOf("i-1", planAsync, true, `{"size":1,"ClientCidr":"0.0.0.0/0","VpcId":"vpc-1"}`))
		badRequest(t, err,
			"parameters.ClientCidr: is not a parameter the plan async accepts on provision (it accepts: size, tier)",
			"parameters.VpcId: is not a parameter")
		if strings.Contains(err.Error(), "0.0.0.0") {
			t.Errorf("the description quotes a value: %q", err.Error())
		}
		if h.instance("i-1") != nil || len(h.engine.Started()) != 0 {
			t.Fatal("a refused provision left an instance or started a workflow")
		}
	})
	t.Run("parameters that are not an object get 400", func(t *testing.T) {
		h := newAccepting(t)
		_, err := h.b.Provision(ctx, provisionOf("i-1", planAsync, true, `[1]`))
		badRequest(t, err, "parameters: must be a JSON object")
	})
	t.Run("a provision naming only accepted parameters goes ahead", func(t *testing.T) {
		h := newAccepting(t)
		if _, err := h.b.Provision(ctx, provisionOf("i-1", planAsync, true, `{"size":1,"tier":"a"}`)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("an update with a parameter that may be set at create but not changed gets 400", func(t *testing.T) {
		h := newAccepting(t)
		// plan-large has no schema: only the settings say what passes.
		if _, err := h.b.Provision(ctx, provisionOf("i-1", planLarge, false, `{"size":1}`)); err != nil {
			t.Fatal(err)
		}
		_, err := h.b.Update(ctx, updateOf("i-1", "", false, `{"tier":"b"}`))
		badRequest(t, err, "parameters.tier: is not a parameter the plan large accepts on update (it accepts: size)")
		if inst := h.instance("i-1"); inst.Op != "" || inst.State != broker.InstanceReady {
			t.Fatalf("instance %+v after a refused update", inst)
		}
	})
	t.Run("a bind with parameters, when the plan accepts none on bind, gets 400 saying so", func(t *testing.T) {
		h := newAccepting(t)
		if _, err := h.b.Provision(ctx, provisionOf("i-1", planLarge, false, `{"size":1}`)); err != nil {
			t.Fatal(err)
		}
		_, err := h.b.Bind(ctx, bindOf("i-1", "b-1", planLarge, false, `{"BucketArn":"arn:aws:s3:::other"}`))
		badRequest(t, err, "parameters.BucketArn: is not a parameter the plan large accepts on bind (it accepts: none)")
	})
	t.Run("an update that only changes the plan needs no accepted parameters", func(t *testing.T) {
		h := newAccepting(t)
		if _, err := h.b.Provision(ctx, provisionOf("i-1", planSync, false, `{"size":1}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := h.b.Update(ctx, updateOf("i-1", planLarge, false, "")); err != nil {
			t.Fatal(err)
		}
	})
}
