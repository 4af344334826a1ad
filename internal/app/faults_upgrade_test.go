package app_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awscfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/google/uuid"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// TestAnUpgradeCrashedAtEveryCallEndsOnOneVersion: the S3 example's
// instance, provisioned on template v1, is upgraded (an update carrying
// the plan's raised maintenance_info) by a broker that dies at every call
// through the ports and to CloudFormation in turn, before the call or
// after it took effect; a new broker then starts on the same data and
// ends what was left. Every time, the instance's record and its stack
// agree: both on v1 (the upgrade failed, or never began) or both on v2,
// never the record on one and the stack on the other; and no stack is
// stray.
func TestAnUpgradeCrashedAtEveryCallEndsOnOneVersion(t *testing.T) {
	cfg := mototest.Config(t, "us-east-1")
	prefix := "osbfu" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	total := upgradeFaultRun(t, cfg, prefix, 0, false)
	if total < 10 {
		t.Fatalf("the upgrade made %d calls: too few to be the upgrade of a stack", total)
	}
	for _, after := range []bool{false, true} {
		when := "before"
		if after {
			when = "after"
		}
		for k := 1; k <= total; k++ {
			t.Run(fmt.Sprintf("the upgrade crashes %s call %d of %d", when, k, total), func(t *testing.T) {
				t.Parallel()
				upgradeFaultRun(t, cfg, prefix, k, after)
			})
		}
	}
}

// upgradeFaultRun runs the upgrade with a crash at call k (0: none) and
// returns how many calls it made through the ports and to CloudFormation.
func upgradeFaultRun(t *testing.T, cfg aws.Config, prefix string, k int, after bool) int {
	catalogPath, raise := shippedServices(t)
	r := cfnFaultRun{k: k, after: after, prefix: prefix, cfg: cfg, catalog: catalogPath}
	dir := t.TempDir()
	f := &faultFixture{instance: uuid.NewString()}
	path := "/v2/service_instances/" + f.instance

	v1 := r.start(t, dir, nil)
	f.service, f.plan = planOf(t, v1, "aws-s3-bucket", "standard")
	prov := v1.Do(apptest.Request{Method: http.MethodPut, Path: path + "?accepts_incomplete=true", Body: provisionBody(f.service, f.plan, map[string]any{})})
	if lo := v1.WaitLastOperation(path + "/last_operation?operation=" + prov.Str("operation")); prov.Status != http.StatusAccepted || lo.Str("state") != "succeeded" {
		t.Fatalf("provision on v1: %d %s; %s", prov.Status, prov.Raw, lo.Raw)
	}
	before, _ := v1.Local.Broker.CurrentVersion(f.service, f.plan)
	v1.Stop()
	raise()

	c := &crasher{k: k, after: after}
	a := r.start(t, dir, c)
	a.Local.Broker.Backoff = time.Millisecond
	c.arm()
	resp := a.Do(apptest.Request{Method: http.MethodPatch, Path: path + "?accepts_incomplete=true",
		Body: map[string]any{"service_id": f.service, "maintenance_info": map[string]any{"version": upgradeTo}}})
	if op := resp.Str("operation"); op != "" {
		waittest.Until(t, func() error {
			exec, err := a.Local.Engine.Describe(context.Background(), op)
			if c.crashed() || err == nil && exec.Status != broker.ExecutionRunning {
				return nil
			}
			return fmt.Errorf("execution %s: %s %v; %d calls so far", op, exec.Status, err, c.calls())
		})
	}
	if resp.Status >= 500 && resp.Str("description") == "" {
		t.Fatalf("a 5xx without a description: %s", resp.Raw)
	}
	if k == 0 {
		if resp.Status != http.StatusAccepted {
			t.Fatalf("the fault-free upgrade answered %d %s", resp.Status, resp.Raw)
		}
	}
	calls := c.calls()
	a.Stop()

	b := r.start(t, dir, nil)
	b.Local.Broker.RepairAfter = -time.Hour
	quiesce(t, b, f)
	checkNoStrayStack(t, b, f, awscfn.NewFromConfig(cfg), prefix)
	inst, err := b.Local.Store.GetInstance(context.Background(), f.instance)
	if err != nil {
		t.Fatalf("the instance after the upgrade: %v", err)
	}
	runs := inst.RunsVersion()
	current, _ := b.Local.Broker.CurrentVersion(f.service, f.plan)
	template := stackTemplate(t, awscfn.NewFromConfig(cfg), prefix, f.instance)
	switch {
	case runs == before && strings.Contains(template, templateV1):
	case runs == current && strings.Contains(template, templateV2):
	default:
		t.Errorf("the instance runs %+v (the plan is at %+v) and its stack's template has %q: want both on %s (%q) or both on %s (%q)",
			runs, current, templateLine(template), upgradeFrom, templateV1, upgradeTo, templateV2)
	}
	if before.Version != upgradeFrom || current.Version != upgradeTo || before.Digest == current.Digest {
		t.Fatalf("the plan's versions: %+v before, %+v after the raise", before, current)
	}
	if k == 0 && runs != current {
		t.Errorf("the fault-free upgrade left the instance on %+v, want %+v", runs, current)
	}
	return calls
}

// templateLine is the line of a template that tells v1 from v2.
func templateLine(template string) string {
	for _, line := range strings.Split(template, "\n") {
		if strings.Contains(line, "DaysAfterInitiation") {
			return strings.TrimSpace(line)
		}
	}
	return "no DaysAfterInitiation"
}
