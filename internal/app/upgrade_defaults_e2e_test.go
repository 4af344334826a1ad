package app_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awscfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/drivers"
	cfndriver "github.com/serverless-osb/broker/internal/drivers/cloudformation"
	"github.com/serverless-osb/broker/internal/mototest"
)

// TestAnUpgradeGivesTheNewDefaultsTheUserNeverSet: two queues of the SQS
// example on moto, one on the template's defaults (messages kept 4 days,
// hidden 30 s once received), one whose user set 1 day and 20 s; the
// operator's new version makes the defaults 7 days and 60 s. ops upgrade
// start --dry-run says, for the first queue only, "MessageRetentionPeriod:
// 345600 → 604800 (new default)" (and the visibility's); the upgrade gives
// the first queue's stack the new defaults and keeps what the user of the
// second set. moto's CloudFormation updates a queue's visibility timeout,
// not its retention, so the queue itself is checked for the first and the
// stack's parameters for both.
func TestAnUpgradeGivesTheNewDefaultsTheUserNeverSet(t *testing.T) {
	cfg := mototest.Config(t, "us-east-1")
	prefix := "osbdf" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	services := filepath.Join(t.TempDir(), "services")
	if err := os.CopyFS(services, os.DirFS(filepath.Join(apptest.Root(), "services"))); err != nil {
		t.Fatal(err)
	}
	catalogPath := filepath.Join(services, "catalog.yaml")
	opts := apptest.Options{Dir: t.TempDir(), Catalog: catalogPath, ReapInterval: -1, Sleep: noSleep,
		AWS: func(context.Context) (aws.Config, error) { return cfg, nil },
		Getenv: func(k string) string {
			if k == "BROKER_STACK_PREFIX" {
				return prefix
			}
			return ""
		},
	}
	b := apptest.StartWith(t, opts)
	service, plan := planOf(t, b, "aws-sqs-queue", "standard")
	e := &e2e{t: t, c: client(t, b.URL), service: service}
	suffix := uuid.NewString()[:8]
	byDefault, bySetting := "df-default-"+suffix, "df-set-"+suffix
	for id, params := range map[string]map[string]any{byDefault: {}, bySetting: {"MessageRetentionPeriod": 86400, "VisibilityTimeout": 20}} {
		r := e.provision(id, plan, true, params)
		if state, desc := e.poll(id, r.OperationKey); state != osb.StateSucceeded {
			t.Fatalf("provision %s ended %s: %s", id, state, desc)
		}
	}
	// queue is what the instance's stack runs (its parameters) and what its
	// queue has (the attributes), by name.
	queue := func(id string) (params, attrs map[string]string) {
		t.Helper()
		out, err := awscfn.NewFromConfig(cfg).DescribeStacks(t.Context(), &awscfn.DescribeStacksInput{StackName: aws.String(cfndriver.InstanceStackName(prefix, id))})
		if err != nil || len(out.Stacks) != 1 {
			t.Fatalf("the stack of %s: %v", id, err)
		}
		params = map[string]string{}
		for _, p := range out.Stacks[0].Parameters {
			params[aws.ToString(p.ParameterKey)] = aws.ToString(p.ParameterValue)
		}
		var url string
		for _, o := range out.Stacks[0].Outputs {
			if aws.ToString(o.OutputKey) == "QueueUrl" {
				url = aws.ToString(o.OutputValue)
			}
		}
		got, err := sqs.NewFromConfig(cfg).GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
		if err != nil {
			t.Fatalf("the queue of %s (%s): %v", id, url, err)
		}
		return params, got.Attributes
	}
	const retention, visibility = "MessageRetentionPeriod", "VisibilityTimeout"
	if p, a := queue(byDefault); p[retention] != "345600" || a[retention] != "345600" || a[visibility] != "30" {
		t.Fatalf("before the upgrade %s runs %v with %v, want the defaults: 345600 s, 30 s", byDefault, p, a)
	}
	if p, a := queue(bySetting); p[retention] != "86400" || a[retention] != "86400" || a[visibility] != "20" {
		t.Fatalf("before the upgrade %s runs %v with %v, want what its user set: 86400 s, 20 s", bySetting, p, a)
	}

	// The new version: 7 days and 60 s by default.
	b.Stop()
	replaceOnce(t, filepath.Join(services, "sqs-queue", "instance.yaml"), "    Default: 345600\n", "    Default: 604800\n")
	replaceOnce(t, filepath.Join(services, "sqs-queue", "instance.yaml"), "    Default: 30\n", "    Default: 60\n")
	replaceOnce(t, catalogPath, `version: "1.0.0"
          description: First release of the SQS queue template.`, `version: "1.1.0"
          description: Messages are kept 7 days by default, not 4, and hidden 60 s once received, not 30.`)
	cat, err := catalog.Load(catalogPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := drivers.WriteLock(cat, catalogPath); err != nil {
		t.Fatal(err)
	}
	b = apptest.StartWith(t, opts)

	const line = "MessageRetentionPeriod: 345600 → 604800 (new default)"
	dry, err := startCampaignOps(t, b.Local.Broker, true, "--plan", plan, "--dry-run")
	if err != nil {
		t.Fatalf("ops upgrade start --dry-run: %v", err)
	}
	status, _ := campaignStatusJSON(t, b.Local.Broker, dry)
	for _, it := range status["items"].([]any) {
		it := it.(map[string]any)
		changes := fmt.Sprint(it["changes"])
		switch id := it["instance_id"]; {
		case it["state"] != "would_change":
			t.Errorf("dry run: %s %s %v, want would_change", id, it["state"], it["description"])
		case id == byDefault && !strings.Contains(changes, line):
			t.Errorf("dry run: %s would change %s, want %q", id, changes, line)
		case id == byDefault && !strings.Contains(changes, "VisibilityTimeout: 30 → 60 (new default)"):
			t.Errorf("dry run: %s would change %s, want its visibility timeout to the new default", id, changes)
		case id == bySetting && (strings.Contains(changes, retention) || strings.Contains(changes, visibility)):
			t.Errorf("dry run: %s would change %s, want its retention, which its user set, kept", id, changes)
		}
	}
	var text bytes.Buffer
	if err := app.OpsUpgrade(t.Context(), b.Local.Broker, []string{"status", dry}, false, true, &text); err != nil || !strings.Contains(text.String(), line) {
		t.Errorf("ops upgrade status %s (text): %v\n%s\nwant %q", dry, err, text.String(), line)
	}

	id, err := startCampaignOps(t, b.Local.Broker, true, "--plan", plan)
	if err != nil {
		t.Fatalf("ops upgrade start: %v", err)
	}
	if _, ok := upgradedEachOnce(t, b, id, []string{byDefault, bySetting}); !ok {
		t.FailNow()
	}
	if p, a := queue(byDefault); p[retention] != "604800" || p[visibility] != "60" || a[visibility] != "60" {
		t.Errorf("after the upgrade %s runs %v with %v, want the new defaults: 604800 s, 60 s", byDefault, p, a)
	}
	if p, a := queue(bySetting); p[retention] != "86400" || p[visibility] != "20" || a[retention] != "86400" || a[visibility] != "20" {
		t.Errorf("after the upgrade %s runs %v with %v, want what its user set: 86400 s, 20 s", bySetting, p, a)
	}
}

// replaceOnce replaces old, which path holds once, with new.
func replaceOnce(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte(old)); n != 1 {
		t.Fatalf("%s holds %q %d times, want once", path, old, n)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}
