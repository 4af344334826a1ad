package sandbox_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/osbtest"
	"github.com/serverless-osb/broker/internal/sandbox"
)

// The suite shares one sandbox (and one synthesis): each is most of a
// minute on a busy machine.
var (
	shared   *sandbox.Sandbox
	template string
	// manifest is what the catalog's drivers declared they need of the
	// stack.
	manifest deploy.Manifest
	// catalogPath is the suite's catalog, the templates beside it.
	catalogPath string
	// target is the account (and Region) of the placed plan, where the
	// sandbox deploys the target stack.
	target = sandbox.Target{Account: "222222222222", Region: "eu-west-1", ExternalID: "sandbox-target-7f3a"}
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sandbox-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	if err := functionFront.start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer functionFront.stop()
	catalog, err := testCatalog(dir)
	catalogPath = catalog
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Bundles for this machine: the template is the stack's, and the
	// sandbox runs its assets as they are.
	template, err = sandbox.Synthesize(ctx, sandbox.Synthesis{Root: "../..", Catalog: catalog, Out: dir, Arch: runtime.GOARCH})
	if err != nil {
		fmt.Fprintln(os.Stderr, "synthesize the stack:", err)
		return 1
	}
	// What the catalog's drivers declared, as the build wrote it beside
	// the worker's catalog and the stack granted it: the least-privilege
	// check reads the same declarations.
	if manifest, err = deploy.ReadManifest(filepath.Join(dir, "dist", "worker")); err != nil {
		fmt.Fprintln(os.Stderr, "the drivers' declarations:", err)
		return 1
	}
	// The target stack, for the placed plan's account.
	if target.Template, err = sandbox.SynthesizeTarget(ctx, sandbox.Synthesis{Root: "../..", Catalog: catalog, Out: dir}); err != nil {
		fmt.Fprintln(os.Stderr, "synthesize the target stack:", err)
		return 1
	}
	shared, err = sandbox.Start(ctx, sandbox.Config{Template: template, Dir: filepath.Join(dir, "sandbox"),
		ScheduleInterval: 3 * time.Second, Log: os.Stderr, Targets: []sandbox.Target{target}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start the sandbox:", err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		for _, f := range []string{"ApiFunction", "WorkerFunction"} {
			fmt.Fprintf(os.Stderr, "--- the %s's log:\n%s\n", f, tail(shared.FunctionLog(logicalID(f)), 8000))
		}
	} else if wholeSuite() {
		// Only a whole suite that passed has made the functions call what
		// they need.
		if problems := leastPrivilege(ctx, shared); len(problems) > 0 {
			fmt.Fprintf(os.Stderr, "--- FAIL: least privilege (%d)\n", len(problems))
			for _, p := range problems {
				fmt.Fprintln(os.Stderr, "    "+p)
			}
			code = 1
		}
	}
	shared.Close()
	return code
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// logicalID is the logical id of the template's resource whose id starts
// with prefix ("ApiFunction": ApiFunctionCE271BD4).
func logicalID(prefix string) string {
	t, err := sandbox.ReadTemplate(template)
	if err != nil {
		return prefix
	}
	for id := range t.Resources {
		if len(id) == len(prefix)+8 && id[:len(prefix)] == prefix {
			return id
		}
	}
	return prefix
}

// testCatalog writes the suite's catalog in dir, with the files it names,
// and returns its path: the demo catalog's service, the example services
// (services/catalog.yaml, their templates beside it, checked every second
// rather than every 10: moto makes stacks at once), and a service whose
// asynchronous plan's work the function target does (function_test.go).
func testCatalog(dir string) (string, error) {
	out := filepath.Join(dir, "catalog")
	if err := os.CopyFS(out, os.DirFS("../../services")); err != nil {
		return "", err
	}
	secret := filepath.Join(dir, "function.secret")
	if err := os.WriteFile(secret, []byte(functionSecret), 0o600); err != nil {
		return "", err
	}
	var services []any
	for _, path := range []string{"../../catalog.yaml", "../../services/catalog.yaml"} {
		data, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		var cat map[string]any
		if err := yaml.Unmarshal(data, &cat); err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		list, _ := cat["services"].([]any)
		services = append(services, list...)
	}
	for _, svc := range services {
		for _, plan := range svc.(map[string]any)["plans"].([]any) {
			if settings := plan.(map[string]any)["broker"].(map[string]any); settings["driver"] == "cloudformation" {
				settings["retry_after"] = 1
			}
		}
	}
	// The demo's asynchronous plan, with a maximum polling duration the
	// reaper (every 3 s here) finds exceeded: it stops the execution.
	for _, svc := range services {
		if svc := svc.(map[string]any); svc["id"] == demoService {
			data, err := yaml.Marshal(svc)
			if err != nil {
				return "", err
			}
			var short map[string]any
			if err := yaml.Unmarshal(data, &short); err != nil {
				return "", err
			}
			for _, plan := range short["plans"].([]any) {
				if plan := plan.(map[string]any); plan["id"] == demoAsync {
					plan["id"], plan["name"], plan["maximum_polling_duration"] = shortPlan, "short-async-plan", 1
					delete(plan, "binding_rotatable")
					short["plans"] = []any{plan}
				}
			}
			short["id"], short["name"] = shortService, "short-service"
			services = append(services, short)
			break
		}
	}
	services = append(services, map[string]any{
		"id": functionService, "name": "function-service", "description": "A service whose work a function does, on loopback.",
		"bindable": true, "instances_retrievable": true, "bindings_retrievable": true,
		"plans": []any{map[string]any{"id": functionPlan, "name": "function-async-plan", "description": "Asynchronous changes, done by the function.",
			"broker": map[string]any{"driver": "function", "mode": "async", "url": functionFront.URL(), "secret_file": secret, "timeout": 5, "retry_after": 1}}},
	})
	// The S3 service with a plan placed in the target account and Region,
	// where the sandbox deploys the target stack (placement_test.go); and
	// the Valkey service with a plan placed there too: its bindings' cache
	// users are the cacheuser function's, which the target stack then
	// deploys in that account. moto cannot make its cache: the sandbox
	// refuses its provisions (plans_test.go).
	for _, p := range []struct{ from, service, plan, name string }{
		{s3Service, placedService, placedPlan, "placed-s3-bucket"},
		{valkeyService, placedCacheService, placedCachePlan, "placed-valkey"},
	} {
		placed, err := placedCopy(services, p.from)
		if err != nil {
			return "", err
		}
		plan := placed["plans"].([]any)[0].(map[string]any)
		plan["id"], plan["name"] = p.plan, "placed"
		placed["plans"] = []any{plan}
		placed["id"], placed["name"] = p.service, p.name
		services = append(services, placed)
	}
	// A plan moto's CloudFormation cannot make (it has no ElastiCache),
	// which the sandbox must refuse at once (plans_test.go).
	if err := os.MkdirAll(filepath.Join(out, "moto-cannot"), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(out, "moto-cannot", "instance.yaml"), []byte(cacheTemplate), 0o600); err != nil {
		return "", err
	}
	services = append(services, map[string]any{
		"id": cacheService, "name": "moto-cannot-run", "description": "A serverless cache, which moto's CloudFormation cannot make.",
		"bindable": false, "plans": []any{map[string]any{"id": cachePlan, "name": "cache", "description": "A Valkey serverless cache.",
			"broker": map[string]any{"driver": "cloudformation", "mode": "async-only", "template": "moto-cannot/instance.yaml", "retry_after": 1}}},
	})
	data, err := yaml.Marshal(map[string]any{"services": services})
	if err != nil {
		return "", err
	}
	path := filepath.Join(out, "catalog.yaml")
	return path, os.WriteFile(path, data, 0o600)
}

// placedCopy is a copy of the service whose id is id, each of its plans
// placed in the target account and Region (with the target stack's roles
// and boundary).
func placedCopy(services []any, id string) (map[string]any, error) {
	for _, svc := range services {
		if svc := svc.(map[string]any); svc["id"] == id {
			data, err := yaml.Marshal(svc)
			if err != nil {
				return nil, err
			}
			var placed map[string]any
			if err := yaml.Unmarshal(data, &placed); err != nil {
				return nil, err
			}
			for _, plan := range placed["plans"].([]any) {
				plan.(map[string]any)["broker"].(map[string]any)["placement"] = map[string]any{
					"region": target.Region, "role_arn": "arn:aws:iam::" + target.Account + ":role/serverless-osb-target-" + deploy.DefaultStackPrefix,
					"external_id":              target.ExternalID,
					"service_role_arn":         "arn:aws:iam::" + target.Account + ":role/serverless-osb-target-cfn-" + deploy.DefaultStackPrefix,
					"permissions_boundary_arn": "arn:aws:iam::" + target.Account + ":policy/serverless-osb-target-boundary-" + deploy.DefaultStackPrefix,
				}
			}
			return placed, nil
		}
	}
	return nil, fmt.Errorf("the catalog has no service %s to place", id)
}

// client is the real OSB client, pointed at a sandbox.
func client(t *testing.T, sb *sandbox.Sandbox) osb.Client {
	t.Helper()
	return osbtest.Client(t, sb.URL, sb.Username, sb.Password)
}

// The demo catalog's service and plans.
const (
	demoService   = "4618c717-e0da-4a48-8d9c-b1f789bf2f5e"
	demoSync      = "e3daf424-4de7-4619-b0ff-5de8cd16cc5e"
	demoAsync     = "c52e2627-5352-4580-9094-a22ec37edd8e"
	demoAsyncOnly = "a87515c4-15ab-4a11-a9e0-703b961e67f7"
	// The demo's asynchronous plan with a maximum polling duration of 1 s.
	shortService = "2b9c5d1e-7a43-4f0e-9c61-3d8e5f0a7b24"
	shortPlan    = "9e4f2a6b-1c38-4d7a-8b05-6f3e2d1c0a98"
	// The example S3 service, and its copy whose plan is placed in the
	// target account.
	s3Service     = "319021a7-ff81-4506-bf4c-07545d1bfc47"
	valkeyService = "b809d601-bd94-4ba5-af1e-7ab6db938300"
	placedService = "8c3f1a2e-6b4d-4e7f-9a15-2d0c7e9b3f48"
	placedPlan    = "4e7a9c1b-3d5f-4a8e-b2c6-9f0d1e3a5b72"
	// The Valkey service's copy whose plan is placed there too.
	placedCacheService = "5d2e8b4a-9c1f-4e6d-a3b7-0f8e2c4d6a19"
	placedCachePlan    = "b7c3e9a1-4f2d-4b8e-9a6c-1d3f5e7a9b20"
	// A service whose stack moto cannot make.
	cacheService = "6d0e4b8a-3f1c-4a2e-9b7d-5c8f1e2a4d60"
	cachePlan    = "1a7c9e3b-5d2f-4b8a-8e6c-0f4d2b9a7c13"
)

// cacheTemplate is the instance template of cacheService: moto 5.2.1's
// CloudFormation has no AWS::ElastiCache::ServerlessCache, and fails on it.
const cacheTemplate = `AWSTemplateFormatVersion: "2010-09-09"
Description: A serverless Valkey cache, which moto's CloudFormation cannot make.
Resources:
  Cache:
    Type: AWS::ElastiCache::ServerlessCache
    Properties:
      Engine: valkey
      ServerlessCacheName: !Sub "${AWS::StackName}-cache"
Outputs:
  Endpoint:
    Value: !GetAtt Cache.Endpoint.Address
`

type e2e struct {
	t *testing.T
	c osb.Client
}

func ptr[T any](v T) *T { return &v }

func (e *e2e) provision(id, plan string, async bool, params map[string]any) *osb.ProvisionResponse {
	e.t.Helper()
	return osbtest.Provision(e.t, e.c, id, demoService, plan, async, params)
}

// poll polls the demo instance's last_operation until it leaves "in
// progress" (osbtest.Gone on a 410).
func (e *e2e) poll(instanceID string, op *osb.OperationKey) (state osb.LastOperationState, description string) {
	e.t.Helper()
	return osbtest.Poll(e.t, e.c, instanceID, demoService, op)
}

func (e *e2e) pollService(instanceID, service string, op *osb.OperationKey) (state osb.LastOperationState, description string) {
	e.t.Helper()
	return osbtest.Poll(e.t, e.c, instanceID, service, op)
}

func (e *e2e) pollBinding(instanceID, bindingID string, op *osb.OperationKey) osb.LastOperationState {
	e.t.Helper()
	state, _ := osbtest.PollBinding(e.t, e.c, instanceID, bindingID, op)
	return state
}

// TestTheDemoCatalogsLifecycles drives the demo catalog's lifecycles with
// the real OSB client through the sandbox: API Gateway's events to the api
// bootstrap, Step Functions' executions of the worker bootstrap, each
// function with its role's permissions only.
func TestTheDemoCatalogsLifecycles(t *testing.T) {
	e := &e2e{t: t, c: client(t, shared)}
	t.Run("the stack's output names the front as the broker's URL", func(t *testing.T) {
		if got := shared.Outputs["BrokerUrl"]; got != shared.URL {
			t.Fatalf("output BrokerUrl %q, want the front's URL %s", got, shared.URL)
		}
	})
	t.Run("the catalog is the bundled one", func(t *testing.T) {
		cat, err := e.c.GetCatalog()
		if err != nil {
			t.Fatal(err)
		}
		bundled, err := catalog.Load(catalogPath)
		if err != nil {
			t.Fatal(err)
		}
		if len(cat.Services) != len(bundled.Services()) || len(cat.Services[0].Plans) != 3 {
			t.Fatalf("the catalog has %d services (the first with %d plans), want the suite's %d (the demo's first, with 3)",
				len(cat.Services), len(cat.Services[0].Plans), len(bundled.Services()))
		}
	})
	t.Run("concurrent requests are all served, by at most 4 environments", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 12)
		for range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := e.c.GetCatalog()
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("a catalog request among 12 at once: %v", err)
			}
		}
		if n := len(shared.Function(logicalID("ApiFunction")).Processes()); n < 1 || n > 4 {
			t.Fatalf("%d api environments, want 1 to 4", n)
		}
	})
	t.Run("a synchronous lifecycle completes in the requests", func(t *testing.T) {
		e := &e2e{t: t, c: e.c}
		if r := e.provision("sync-1", demoSync, false, map[string]any{"duration_seconds": 5}); r.Async {
			t.Fatal("a sync plan answered asynchronously")
		}
		inst, err := e.c.GetInstance(&osb.GetInstanceRequest{InstanceID: "sync-1"})
		if err != nil || inst.PlanID != demoSync || inst.Parameters["duration_seconds"] != float64(5) {
			t.Fatalf("get instance: %+v %v", inst, err)
		}
		bind, err := e.c.Bind(&osb.BindRequest{InstanceID: "sync-1", BindingID: "b-1", ServiceID: demoService, PlanID: demoSync,
			BindResource: &osb.BindResource{AppGUID: ptr("app")}})
		if err != nil || bind.Async || bind.Credentials["password"] == nil {
			t.Fatalf("bind: %+v %v", bind, err)
		}
		got, err := e.c.GetBinding(&osb.GetBindingRequest{InstanceID: "sync-1", BindingID: "b-1"})
		if err != nil || got.Credentials["password"] != bind.Credentials["password"] {
			t.Fatalf("get binding (its credentials sealed by the stack's KMS key): %+v %v", got, err)
		}
		if _, err := e.c.Unbind(&osb.UnbindRequest{InstanceID: "sync-1", BindingID: "b-1", ServiceID: demoService, PlanID: demoSync}); err != nil {
			t.Fatalf("unbind: %v", err)
		}
		if _, err := e.c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "sync-1", ServiceID: demoService, PlanID: demoSync}); err != nil {
			t.Fatalf("deprovision: %v", err)
		}
		if _, err := e.c.GetInstance(&osb.GetInstanceRequest{InstanceID: "sync-1"}); !osbtest.IsStatus(err, http.StatusNotFound) {
			t.Fatalf("get after deprovision: %v, want 404", err)
		}
	})
	t.Run("an asynchronous lifecycle runs the workflows on the worker", func(t *testing.T) {
		e := &e2e{t: t, c: e.c}
		params := map[string]any{"duration_seconds": 1}
		r := e.provision("async-1", demoAsync, true, params)
		if !r.Async || r.OperationKey == nil {
			t.Fatalf("async provision: %+v", r)
		}
		if state, _ := e.poll("async-1", r.OperationKey); state != osb.StateSucceeded {
			t.Fatalf("provision ended %s", state)
		}
		bind, err := e.c.Bind(&osb.BindRequest{InstanceID: "async-1", BindingID: "ab-1", ServiceID: demoService, PlanID: demoAsync,
			AcceptsIncomplete: true, Parameters: params})
		if err != nil || !bind.Async {
			t.Fatalf("async bind: %+v %v", bind, err)
		}
		if state := e.pollBinding("async-1", "ab-1", bind.OperationKey); state != osb.StateSucceeded {
			t.Fatalf("bind ended %s", state)
		}
		got, err := e.c.GetBinding(&osb.GetBindingRequest{InstanceID: "async-1", BindingID: "ab-1"})
		if err != nil || got.Credentials["uri"] == nil {
			t.Fatalf("get binding: %+v %v", got, err)
		}
		unbind, err := e.c.Unbind(&osb.UnbindRequest{InstanceID: "async-1", BindingID: "ab-1", ServiceID: demoService, PlanID: demoAsync, AcceptsIncomplete: true})
		if err != nil || !unbind.Async {
			t.Fatalf("async unbind: %+v %v", unbind, err)
		}
		if state := e.pollBinding("async-1", "ab-1", unbind.OperationKey); state != osbtest.Gone {
			t.Fatalf("unbind ended %s, want gone (410)", state)
		}
		up, err := e.c.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: "async-1", ServiceID: demoService, AcceptsIncomplete: true,
			PlanID: ptr(demoAsyncOnly), Parameters: map[string]any{"duration_seconds": 0}})
		if err != nil || !up.Async {
			t.Fatalf("async update: %+v %v", up, err)
		}
		if state, _ := e.poll("async-1", up.OperationKey); state != osb.StateSucceeded {
			t.Fatalf("update ended %s", state)
		}
		// async-only, detached: the deprovision answers at once and the
		// cleanup workflow deletes the resource.
		del, err := e.c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "async-1", ServiceID: demoService, PlanID: demoAsyncOnly, AcceptsIncomplete: true})
		if err != nil {
			t.Fatalf("deprovision: %+v %v", del, err)
		}
		if del.Async {
			if state, _ := e.poll("async-1", del.OperationKey); state != osbtest.Gone {
				t.Fatalf("deprovision ended %s, want gone", state)
			}
		}
	})
	t.Run("an async-only plan refuses a synchronous request", func(t *testing.T) {
		_, err := e.c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "only-1", ServiceID: demoService, PlanID: demoAsyncOnly,
			OrganizationGUID: "org", SpaceGUID: "space"})
		if !osbtest.IsOSBError(err, http.StatusUnprocessableEntity, "AsyncRequired") {
			t.Fatalf("a synchronous provision of an async-only plan: %v, want 422 AsyncRequired", err)
		}
	})
	t.Run("a failed operation is reported with its description", func(t *testing.T) {
		e := &e2e{t: t, c: e.c}
		r := e.provision("fail-1", demoAsync, true, map[string]any{"duration_seconds": 0, "fail": true, "fail_description": "the sandbox says no"})
		state, description := e.poll("fail-1", r.OperationKey)
		if state != osb.StateFailed || description != "the sandbox says no" {
			t.Fatalf("provision ended %s %q, want failed with its description", state, description)
		}
		// The description repeats a request parameter: no log line holds it,
		// not even the Lambda runtime's report of the function error.
		if log := shared.FunctionLog(logicalID("WorkerFunction")); strings.Contains(log, "the sandbox says no") {
			t.Fatalf("the worker's log holds the failure's description, a request parameter:\n%s", tail(log, 3000))
		}
	})
	t.Run("a deprovision during a provision stops it and deletes the instance", func(t *testing.T) {
		e := &e2e{t: t, c: e.c}
		// 30 s, not 600: when the provision's Begin wins the race, the demo's
		// deprovision of what it began takes the instance's duration too.
		e.provision("halt-1", demoAsync, true, map[string]any{"duration_seconds": 30})
		del, err := e.c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "halt-1", ServiceID: demoService, PlanID: demoAsync, AcceptsIncomplete: true})
		if err != nil {
			t.Fatalf("deprovision during the provision: %v", err)
		}
		if del.Async {
			if state, _ := e.poll("halt-1", del.OperationKey); state != osbtest.Gone {
				t.Fatalf("deprovision ended %s, want gone", state)
			}
		}
		if _, err := e.c.GetInstance(&osb.GetInstanceRequest{InstanceID: "halt-1"}); !osbtest.IsStatus(err, http.StatusNotFound) {
			t.Fatalf("get after deprovision: %v, want 404", err)
		}
	})
	t.Run("an unbind during an asynchronous bind stops it and the binding is gone", func(t *testing.T) {
		e := &e2e{t: t, c: e.c}
		r := e.provision("halt-b", demoAsync, true, map[string]any{"duration_seconds": 0})
		if state, _ := e.poll("halt-b", r.OperationKey); state != osb.StateSucceeded {
			t.Fatalf("provision ended %s", state)
		}
		// Long enough for the unbind to meet the bind in flight, short
		// because the demo's unbind of a binding whose bind already wrote
		// its record takes the binding's duration_seconds too (600 s
		// stalled the suite ten minutes whenever the bind's Begin won).
		bind, err := e.c.Bind(&osb.BindRequest{InstanceID: "halt-b", BindingID: "hb-1", ServiceID: demoService, PlanID: demoAsync,
			AcceptsIncomplete: true, Parameters: map[string]any{"duration_seconds": 30}})
		if err != nil || !bind.Async {
			t.Fatalf("async bind: %+v %v", bind, err)
		}
		// The unbind takes over the bind's hold on the instance: its
		// transaction only checks the instance (ConditionCheckItem).
		unbind, err := e.c.Unbind(&osb.UnbindRequest{InstanceID: "halt-b", BindingID: "hb-1", ServiceID: demoService, PlanID: demoAsync, AcceptsIncomplete: true})
		if err != nil {
			t.Fatalf("unbind during the bind: %v", err)
		}
		if unbind.Async {
			if state := e.pollBinding("halt-b", "hb-1", unbind.OperationKey); state != osbtest.Gone {
				t.Fatalf("unbind ended %s, want gone (410)", state)
			}
		}
		if _, err := e.c.GetBinding(&osb.GetBindingRequest{InstanceID: "halt-b", BindingID: "hb-1"}); !osbtest.IsStatus(err, http.StatusNotFound) {
			t.Fatalf("get after unbind: %v, want 404", err)
		}
	})
	t.Run("the reaper stops an operation that outlives its plan's maximum polling duration", func(t *testing.T) {
		e := &e2e{t: t, c: e.c}
		r, err := e.c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "short-1", ServiceID: shortService, PlanID: shortPlan,
			OrganizationGUID: "org", SpaceGUID: "space", AcceptsIncomplete: true, Parameters: map[string]any{"duration_seconds": 600}})
		if err != nil || !r.Async {
			t.Fatalf("async provision: %+v %v", r, err)
		}
		if state, desc := e.pollService("short-1", shortService, r.OperationKey); state != osb.StateFailed || !strings.Contains(desc, "did not complete within 1s") {
			t.Fatalf("provision ended %s %q, want failed by the reaper", state, desc)
		}
	})
	t.Run("a binding is rotated into a successor with credentials of its own", func(t *testing.T) {
		e := &e2e{t: t, c: e.c}
		e.provision("rot-1", demoSync, false, nil)
		first, err := e.c.Bind(&osb.BindRequest{InstanceID: "rot-1", BindingID: "r-1", ServiceID: demoService, PlanID: demoSync,
			BindResource: &osb.BindResource{AppGUID: ptr("app")}})
		if err != nil {
			t.Fatalf("bind: %v", err)
		}
		// The client library predates predecessor_binding_id: a plain
		// request, as a 2.17 platform sends it.
		second := rawBind(t, shared, "rot-1", "r-2", `{"service_id":"`+demoService+`","plan_id":"`+demoSync+`","predecessor_binding_id":"r-1"}`)
		if second == "" || second == first.Credentials["password"] {
			t.Fatalf("the successor's password %q, the predecessor's %q: want new credentials", second, first.Credentials["password"])
		}
	})
}
