package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"gopkg.in/yaml.v3"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/env"
	"github.com/serverless-osb/broker/internal/osbtest"
	"github.com/serverless-osb/broker/internal/sandbox"
	"github.com/serverless-osb/broker/internal/waittest"
)

// raisedVersion is the version deployRaised gives the plan, and the words
// its changed template adds to the template's Description.
const (
	raisedVersion = "1.1.0"
	raisedMark    = "Version 1.1.0: the sandbox's fleet upgrade moved this stack here."
)

// deployRaised deploys, as an operator does after a template changed, a
// new bundle: the suite's catalog with plan's maintenance_info raised to
// raisedVersion and a changed copy of its template (its other plans keep
// theirs, unchanged under their version, as the lock file asks),
// synthesized as make synth does, and deployed into the running sandbox as
// make sandbox-deploy does (sandbox.RequestDeploy: each function's code
// and configuration replaced, the table and the stacks kept). It returns
// the new catalog, which ops reads as the broker's; the test's cleanup
// deploys the bundle before.
func deployRaised(t *testing.T, ctx context.Context, plan string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "catalog")
	if err := os.CopyFS(dir, os.DirFS(filepath.Dir(catalogPath))); err != nil {
		t.Fatal(err)
	}
	catalog := filepath.Join(dir, filepath.Base(catalogPath))
	data, err := os.ReadFile(catalog)
	if err != nil {
		t.Fatal(err)
	}
	var cat map[string]any
	if err := yaml.Unmarshal(data, &cat); err != nil {
		t.Fatal(err)
	}
	raised := false
	for _, svc := range cat["services"].([]any) {
		for _, p := range svc.(map[string]any)["plans"].([]any) {
			p := p.(map[string]any)
			if p["id"] != plan {
				continue
			}
			settings := p["broker"].(map[string]any)
			from := fmt.Sprint(settings["template"])
			body, err := os.ReadFile(filepath.Join(dir, from))
			if err != nil {
				t.Fatal(err)
			}
			changed := strings.Replace(string(body), "Description: >-\n", "Description: >-\n  "+raisedMark+"\n", 1)
			if changed == string(body) {
				t.Fatalf("template %s: no folded Description to change", from)
			}
			to := strings.TrimSuffix(from, ".yaml") + "-" + raisedVersion + ".yaml"
			if err := os.WriteFile(filepath.Join(dir, to), []byte(changed), 0o644); err != nil {
				t.Fatal(err)
			}
			settings["template"] = to
			p["maintenance_info"] = map[string]any{"version": raisedVersion, "description": "The template's description says that the sandbox upgraded it."}
			raised = true
		}
	}
	if !raised {
		t.Fatalf("the suite's catalog has no plan %s", plan)
	}
	if data, err = yaml.Marshal(cat); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(catalog, data, 0o644); err != nil {
		t.Fatal(err)
	}
	second, err := sandbox.Synthesize(ctx, sandbox.Synthesis{Root: "../..", Catalog: catalog, Out: filepath.Join(t.TempDir(), "synth"), Arch: runtime.GOARCH})
	if err != nil {
		t.Fatalf("synthesize the second bundle: %v", err)
	}
	before := map[string]string{}
	for _, prefix := range []string{"ApiFunction", "WorkerFunction"} {
		before[prefix] = shared.Function(logicalID(prefix)).Code()
	}
	report, err := sandbox.RequestDeploy(ctx, shared.Dir, second)
	if err != nil {
		t.Fatalf("deploy the second bundle: %v\n%s", err, strings.Join(report, "\n"))
	}
	t.Cleanup(func() {
		ctx, cancel := waittest.Context(t)
		defer cancel()
		if report, err := sandbox.RequestDeploy(ctx, shared.Dir, template); err != nil {
			t.Errorf("deploy the bundle before: %v\n%s", err, strings.Join(report, "\n"))
		}
	})
	for _, prefix := range []string{"ApiFunction", "WorkerFunction"} {
		id := logicalID(prefix)
		if !slices.ContainsFunc(report, func(l string) bool { return strings.HasPrefix(l, "function "+id+": code and configuration replaced") }) {
			t.Errorf("the deploy's report does not replace %s's code:\n%s", id, strings.Join(report, "\n"))
		}
		if now := shared.Function(id).Code(); now == before[prefix] {
			t.Errorf("%s still runs the code before the deploy (%s)", id, now)
		}
	}
	return shared.Catalog()
}

// ops runs the operator command on the sandbox's stack, as an operator
// runs `go run ./functions/api ops --stack NAME ...` with the stack's
// credentials: the error is the command's (a non-zero exit), its log
// added.
func ops(ctx context.Context, args ...string) (string, error) {
	var out, log bytes.Buffer
	err := app.RunCommand(ctx, append([]string{"ops", "--stack", shared.StackName}, args...), &out, &log)
	if err != nil {
		err = fmt.Errorf("ops %s: %w\n%s", strings.Join(args, " "), err, log.String())
	}
	return out.String(), err
}

// opsCampaign is what ops upgrade status --json says of a campaign.
type opsCampaign struct {
	ID      string `json:"campaign_id"`
	State   string `json:"state"`
	Outcome string `json:"outcome"`
	Tally   struct {
		Items, Upgraded, Failed, Skipped int
		WouldChange                      int `json:"would_change"`
		WouldRefuse                      int `json:"would_refuse"`
		NotAttempted                     int `json:"not_attempted"`
	} `json:"tally"`
	Items []opsItem `json:"items"`
}

// opsItem is one instance's result in opsCampaign.
type opsItem struct {
	InstanceID  string   `json:"instance_id"`
	Canary      bool     `json:"canary"`
	State       string   `json:"state"`
	FromVersion string   `json:"from_version"`
	ToVersion   string   `json:"to_version"`
	Description string   `json:"description"`
	Changes     []string `json:"changes"`
}

// runCampaign starts a campaign with ops upgrade start, then asks ops
// upgrade status until it has ended, and returns its last answer and
// status's error (a non-zero exit).
func runCampaign(ctx context.Context, t *testing.T, args ...string) (opsCampaign, error) {
	t.Helper()
	out, err := ops(ctx, append([]string{"--json", "upgrade", "start"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var started struct {
		ID string `json:"campaign_id"`
	}
	if err := json.Unmarshal([]byte(out), &started); err != nil || started.ID == "" {
		t.Fatalf("upgrade start answered %q (%v), want its campaign's id", out, err)
	}
	var c opsCampaign
	var statusErr error
	waittest.Until(t, func() error {
		out, err := ops(ctx, "--json", "upgrade", "status", started.ID)
		if out == "" {
			if err != nil && strings.Contains(err.Error(), "was not planned") {
				t.Fatal(err)
			}
			return fmt.Errorf("campaign %s: no status yet: %v", started.ID, err) // being planned
		}
		c = opsCampaign{}
		if jerr := json.Unmarshal([]byte(out), &c); jerr != nil {
			return fmt.Errorf("upgrade status %s: %v\n%s", started.ID, jerr, out)
		}
		if c.State == "running" {
			return fmt.Errorf("campaign %s still running: %s", started.ID, out)
		}
		statusErr = err
		return nil
	})
	return c, statusErr
}

// stackTemplate is the template the instance's stack runs now.
func stackTemplate(ctx context.Context, t *testing.T, instance string) string {
	t.Helper()
	stacks := liveStacks(ctx, t, instance)
	if len(stacks) != 1 {
		t.Fatalf("instance %s has stacks %v, want one", instance, stacks)
	}
	out, err := cloudformation.NewFromConfig(shared.Admin).GetTemplate(ctx, &cloudformation.GetTemplateInput{StackName: aws.String(stacks[0])})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.TemplateBody)
}

// TestAFleetUpgradeThroughOps is a day two of the example queue service, as
// an operator lives it on the deployed stack: instances on the plan's
// version 1.0.0; a bundle deployed whose plan has a changed template under
// a raised version; `ops --stack NAME upgrade start` of a dry run, then of
// the upgrade, each followed with `ops upgrade status` until it ends. ops
// finds the broker from the stack's outputs and starts the upgrade state
// machine on moto's Step Functions, whose Tasks run the worker under its
// role: Plan lists the plan's instances (a Query of the table's ByPlan
// index and a BatchGetItem), the lanes claim and upgrade
// them (change sets, the stack policy), Tally and Finish end it.
func TestAFleetUpgradeThroughOps(t *testing.T) {
	ctx, cancel := waittest.Context(t)
	defer cancel()
	c := client(t, shared)
	e := &e2e{t: t, c: c}
	service, plan := planIDs(t, c, "aws-sqs-queue", "standard")
	instances := []string{"fleet-1", "fleet-2"}
	for _, id := range instances {
		r, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: id, ServiceID: service, PlanID: plan,
			OrganizationGUID: "org", SpaceGUID: "space", AcceptsIncomplete: true})
		if err != nil || !r.Async {
			t.Fatalf("provision %s: %+v %v", id, r, err)
		}
		if state, desc := e.pollService(id, service, r.OperationKey); state != osb.StateSucceeded {
			t.Fatalf("provision %s ended %s: %s", id, state, desc)
		}
	}
	before := map[string]string{}
	for _, id := range instances {
		before[id] = stackTemplate(ctx, t, id)
	}

	deployed := deployRaised(t, ctx, plan)
	asOperator(t, ctx, map[string]string{env.Catalog: deployed, env.Table: "", env.DynamoDBEndpoint: ""})

	t.Run("the deployed catalog offers the raised version", func(t *testing.T) {
		cat, err := c.GetCatalog()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range cat.Services {
			for _, p := range s.Plans {
				if p.ID == plan && (p.MaintenanceInfo == nil || p.MaintenanceInfo.Version != raisedVersion) {
					t.Fatalf("plan %s offers maintenance_info %+v, want version %s", plan, p.MaintenanceInfo, raisedVersion)
				}
			}
		}
	})
	t.Run("ops lists the instances as behind", func(t *testing.T) {
		out, err := ops(ctx, "--json", "instances", "--plan", plan, "--behind")
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range instances {
			if !strings.Contains(out, `"instance_id": "`+id+`"`) {
				t.Errorf("ops instances --behind does not list %s:\n%s", id, out)
			}
		}
	})
	t.Run("a dry run previews each upgrade by a change set and changes nothing", func(t *testing.T) {
		got, err := runCampaign(ctx, t, "--plan", plan, "--dry-run", "--max-in-flight", "2")
		if err != nil {
			t.Fatalf("the dry run's status: %v", err)
		}
		if got.State != "finished" || got.Tally.Items != len(instances) || got.Tally.WouldChange != len(instances) {
			t.Fatalf("dry run %s ended %s (%s), tally %+v, want every instance would change: %+v", got.ID, got.State, got.Outcome, got.Tally, got.Items)
		}
		for _, it := range got.Items {
			if it.FromVersion != "1.0.0" || it.ToVersion != raisedVersion {
				t.Errorf("item %s from %q to %q, want 1.0.0 to %s", it.InstanceID, it.FromVersion, it.ToVersion, raisedVersion)
			}
		}
		for _, id := range instances {
			if now := stackTemplate(ctx, t, id); now != before[id] {
				t.Errorf("the dry run changed %s's stack's template:\n%s", id, now)
			}
		}
	})
	t.Run("the upgrade moves every instance to the raised version, canary first", func(t *testing.T) {
		got, err := runCampaign(ctx, t, "--plan", plan, "--canaries", "1", "--max-in-flight", "2")
		if err != nil {
			t.Fatalf("the upgrade's status: %v", err)
		}
		if got.State != "finished" || got.Tally.Upgraded != len(instances) || got.Tally.Failed+got.Tally.NotAttempted+got.Tally.Skipped != 0 {
			t.Fatalf("upgrade %s ended %s (%s), tally %+v, want every instance upgraded: %+v", got.ID, got.State, got.Outcome, got.Tally, got.Items)
		}
		if !slices.ContainsFunc(got.Items, func(it opsItem) bool { return it.Canary }) {
			t.Errorf("no canary among the items: %+v", got.Items)
		}
		for _, id := range instances {
			if now := stackTemplate(ctx, t, id); !strings.Contains(now, raisedMark) {
				t.Errorf("%s's stack's template after the upgrade is not the raised one:\n%s", id, now)
			}
		}
		out, err := ops(ctx, "--json", "instances", "--plan", plan)
		if err != nil {
			t.Fatal(err)
		}
		var listed []struct {
			ID   string `json:"instance_id"`
			Runs struct {
				Version string `json:"version"`
			} `json:"runs"`
			Behind bool `json:"behind"`
		}
		if err := json.Unmarshal([]byte(out), &listed); err != nil {
			t.Fatalf("ops instances --json: %v\n%s", err, out)
		}
		for _, l := range listed {
			if slices.Contains(instances, l.ID) && (l.Runs.Version != raisedVersion || l.Behind) {
				t.Errorf("ops instances: %s runs %q (behind %v), want %s", l.ID, l.Runs.Version, l.Behind, raisedVersion)
			}
		}
	})

	for _, id := range instances {
		dr, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: id, ServiceID: service, PlanID: plan, AcceptsIncomplete: true})
		if err != nil {
			t.Fatalf("deprovision %s: %v", id, err)
		}
		if state, desc := e.pollService(id, service, dr.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
			t.Fatalf("deprovision %s ended %s: %s", id, state, desc)
		}
	}
}

// asOperator sets the environment of an operator running ops --stack on the
// sandbox's stack: its account (moto) and Region, an administrator's
// credentials, and more.
func asOperator(t *testing.T, ctx context.Context, more map[string]string) {
	t.Helper()
	t.Setenv("AWS_ENDPOINT_URL", shared.Moto)
	t.Setenv("AWS_REGION", shared.Outputs["Region"])
	for name, value := range more {
		t.Setenv(name, value)
	}
	creds, err := shared.Admin.Credentials.Retrieve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", creds.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", creds.SecretAccessKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
}
