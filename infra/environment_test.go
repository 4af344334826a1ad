package infra

import (
	"maps"
	"slices"
	"testing"

	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/env"
)

// brokerFunctions are the stack's Lambda functions and the app's function
// each runs.
var brokerFunctions = map[string]app.Function{"ApiFunction": app.FunctionAPI, "WorkerFunction": app.FunctionWorker}

// handlerFunctions are the stack's other Lambda functions, which run no
// app function but a custom resource's handler, and read no variable: why
// the stack as cdk.json configures it has each.
var handlerFunctions = map[string]string{
	"CacheUserFunction": "functions/cacheuser, Custom::CacheUserGroupMember, which the shipped catalog's Valkey binding template declares",
}

// setByLambda are the variables the functions read that Lambda sets, not
// the stack.
var setByLambda = []string{env.Region, env.TaskRoot}

// TestFunctionsEnvironmentIsTheApps ties the functions' environment in the
// template to what the app reads: the stack sets only variables that
// internal/env names (each of which something in the functions reads, as
// that package's tests check), and every variable a function refuses to
// start without (app.RequiredEnv) is set for that function.
func TestFunctionsEnvironmentIsTheApps(t *testing.T) {
	read := envNames(t)
	t.Run("the broker's functions are the stack's only Lambda functions", func(t *testing.T) {
		want := map[string]bool{}
		for id := range brokerFunctions {
			want[logicalID(t, id)] = true
		}
		for id := range handlerFunctions {
			want[logicalID(t, id)] = true
		}
		for id := range resources(t, "AWS::Lambda::Function") {
			if !want[id] {
				t.Errorf("%s is a Lambda function this test does not know: say which app function it runs", id)
			}
		}
	})
	for _, id := range slices.Sorted(maps.Keys(handlerFunctions)) {
		t.Run("the "+id+" is set no variable", func(t *testing.T) {
			environment, _ := properties(t, id)["Environment"].(object)
			if vars, _ := environment["Variables"].(object); len(vars) > 0 {
				t.Errorf("%s (%s) is set %v", id, handlerFunctions[id], vars)
			}
		})
	}
	for _, id := range slices.Sorted(maps.Keys(brokerFunctions)) {
		fn := brokerFunctions[id]
		vars := properties(t, id)["Environment"].(object)["Variables"].(object)
		t.Run("the "+id+" is set only variables internal/env names", func(t *testing.T) {
			for _, name := range slices.Sorted(maps.Keys(vars)) {
				if !read[name] {
					t.Errorf("%s sets %s, which internal/env does not name: the app does not read it", id, name)
				}
			}
		})
		t.Run("the "+id+" is set every variable the "+string(fn)+" function requires", func(t *testing.T) {
			required := app.RequiredEnv(fn)
			if len(required) == 0 {
				t.Fatalf("app.RequiredEnv(%s) is empty", fn)
			}
			for _, name := range required {
				if _, set := vars[name]; !set && !slices.Contains(setByLambda, name) {
					t.Errorf("the %s function requires %s, which the stack does not set on %s", fn, name, id)
				}
			}
		})
	}
}

// TestSealedOnlyByDefault: by default (cdk.json's sealedOnly true, as
// when the key is absent) both functions are given BROKER_SEALED_ONLY=true,
// so that a new deployment refuses from the start any secret a writer of
// the table planted in clear (TestStackFromContext checks that
// sealedOnly=false leaves it out).
func TestSealedOnlyByDefault(t *testing.T) {
	for _, id := range slices.Sorted(maps.Keys(brokerFunctions)) {
		vars := properties(t, id)["Environment"].(object)["Variables"].(object)
		if v := vars[env.SealedOnly]; v != "true" {
			t.Errorf("%s has %s=%v by default, want true", id, env.SealedOnly, v)
		}
	}
}

// envNames are the variables internal/env names (env.Names, which its own
// tests hold to every constant it declares): the variables the functions
// read.
func envNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, n := range env.Names() {
		names[n] = true
	}
	return names
}

// TestFunctionsSealWithTheSealingKey: both functions are given the sealing
// key's ARN to seal with, not the key that encrypts the table, and ops
// --stack finds it among the stack's outputs.
func TestFunctionsSealWithTheSealingKey(t *testing.T) {
	sealKey := object{"Fn::GetAtt": []any{logicalID(t, "SealingKey"), "Arn"}}
	for _, id := range slices.Sorted(maps.Keys(brokerFunctions)) {
		vars := properties(t, id)["Environment"].(object)["Variables"].(object)
		if got := vars[env.SealingKeyARN]; !jsonEqual(got, sealKey) {
			t.Errorf("%s seals with %v, want the sealing key %v", id, got, sealKey)
		}
	}
	check(t, func() { broker.template.HasOutput(jsii.String(OutputSealingKeyARN), object{"Value": sealKey}) })
	if OutputSealingKeyARN != app.OutputSealingKey {
		t.Errorf("the stack outputs %s where ops --stack reads %s", OutputSealingKeyARN, app.OutputSealingKey)
	}
}
