package cloudformation

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/serverless-osb/broker/internal/broker"
)

// rollbackFailed runs an update whose stack fails to update the Bucket and
// then fails to roll back the Queue (deleted outside CloudFormation), the
// Topic's rollback being cancelled: the stack is UPDATE_ROLLBACK_FAILED.
func rollbackFailed(t *testing.T) (*harness, broker.Change) {
	t.Helper()
	h := newHarness(t, false)
	h.provisioned()
	s := h.instanceStack()
	c := h.change(broker.KindUpdate, "op-update")
	c.Operation.Target = &broker.Target{Parameters: json.RawMessage(`{"Size":7}`)}
	if _, err := h.driver.Begin(h.ctx, h.fresh(c)); err != nil {
		t.Fatal(err)
	}
	h.cfn.resource(s, "Queue", "AWS::SQS::Queue", types.ResourceStatusUpdateComplete, "")
	h.cfn.resource(s, "Bucket", "AWS::S3::Bucket", types.ResourceStatusUpdateFailed, "Versioning cannot be suspended on this bucket")
	h.cfn.set(s, types.StackStatusUpdateRollbackInProgress, "The following resource(s) failed to update: [Bucket].")
	h.cfn.resource(s, "Bucket", "AWS::S3::Bucket", types.ResourceStatusUpdateComplete, "")
	h.cfn.resource(s, "Topic", "AWS::SNS::Topic", types.ResourceStatusUpdateFailed, "Resource update cancelled")
	h.cfn.resource(s, "Queue", "AWS::SQS::Queue", types.ResourceStatusUpdateFailed,
		"Queue https://sqs.us-east-1.amazonaws.com/123456789012/osb-q does not exist (Service: Sqs, Status Code: 400)")
	h.cfn.set(s, types.StackStatusUpdateRollbackFailed, "The following resource(s) failed to update: [Queue].")
	return h, c
}

func wantFlags(t *testing.T, f *broker.Failure, usable, repeatable bool) {
	t.Helper()
	if f.InstanceUsable == nil || *f.InstanceUsable != usable || f.UpdateRepeatable == nil || *f.UpdateRepeatable != repeatable {
		t.Fatalf("flags usable %v repeatable %v, want %v and %v (%q)", f.InstanceUsable, f.UpdateRepeatable, usable, repeatable, f.Description)
	}
}

func TestUpdateRollbackFailed(t *testing.T) {
	t.Run("the rollback is continued once, skipping only what CloudFormation could not roll back; once it completes the instance is usable, and the description names what was skipped", func(t *testing.T) {
		h, c := rollbackFailed(t)
		p, err := h.driver.Check(h.ctx, h.fresh(c))
		if err != nil || p.Done || !strings.Contains(p.Description, "continuing the rollback, skipping Queue") {
			t.Fatalf("check: %+v %v", p, err)
		}
		calls := h.cfn.get(h.instanceStack()).continues
		if len(calls) != 1 {
			t.Fatalf("%d ContinueUpdateRollback calls, want 1", len(calls))
		}
		in := calls[0]
		if !slices.Equal(in.ResourcesToSkip, []string{"Queue"}) || aws.ToString(in.RoleARN) != "arn:aws:iam::123456789012:role/cfn" ||
			aws.ToString(in.ClientRequestToken) != token("continue-rollback", "op-update") {
			t.Errorf("ContinueUpdateRollback skips %v as %q with %q", in.ResourcesToSkip, aws.ToString(in.RoleARN), aws.ToString(in.ClientRequestToken))
		}
		if p, err := h.driver.Check(h.ctx, h.fresh(c)); err != nil || p.Done || !strings.Contains(p.Description, "skipping Queue") {
			t.Fatalf("check while the rollback goes on: %+v %v", p, err)
		}
		h.cfn.set(h.instanceStack(), types.StackStatusUpdateRollbackComplete, "")
		_, err = h.driver.Check(h.ctx, h.fresh(c))
		f := failureOf(t, err)
		// Usable; the skipped Queue may not match the template, which
		// CloudFormation warns makes a later update fail: not repeatable.
		wantFlags(t, f, true, false)
		for _, part := range []string{"the broker continued the rollback, skipping Queue, which CloudFormation could not roll back",
			"back on its previous configuration, except that Queue may not match it", `The S3 Bucket "Bucket" could not be updated`} {
			if !strings.Contains(f.Description, part) {
				t.Errorf("description %q lacks %q", f.Description, part)
			}
		}
		if strings.Contains(f.Description, "123456789012") || strings.Contains(f.Description, "sqs.us-east-1") {
			t.Errorf("description %q quotes CloudFormation's reason", f.Description)
		}
		if n := h.cfn.count("ContinueUpdateRollback"); n != 1 {
			t.Errorf("%d ContinueUpdateRollback calls, want 1", n)
		}
		// The next update starts afresh: no continued rollback of its own
		// until its own rollback fails.
		next := h.change(broker.KindUpdate, "op-update-2")
		if _, err := h.driver.Begin(h.ctx, h.fresh(next)); err != nil {
			t.Fatal(err)
		}
		if rec, _ := h.record(instanceRecord); rec.Continued != nil || rec.Op != "op-update-2" {
			t.Errorf("record %+v, want no continued rollback on record for the next update", rec)
		}
	})

	t.Run("a continued rollback that fails again leaves the instance unusable: the description names the operator, the detail has CloudFormation's reasons", func(t *testing.T) {
		h, c := rollbackFailed(t)
		if _, err := h.driver.Check(h.ctx, h.fresh(c)); err != nil {
			t.Fatal(err)
		}
		s := h.instanceStack()
		h.cfn.resource(s, "Table", "AWS::DynamoDB::Table", types.ResourceStatusUpdateFailed, "User: arn:aws:sts::123456789012:assumed-role/cfn is not authorized to perform: dynamodb:UpdateTable")
		h.cfn.set(s, types.StackStatusUpdateRollbackFailed, "The following resource(s) failed to update: [Table].")
		_, err := h.driver.Check(h.ctx, h.fresh(c))
		f := failureOf(t, err)
		wantFlags(t, f, false, false)
		for _, part := range []string{"could not be rolled back, even after the broker continued the rollback (CloudFormation could not roll back Table)",
			"the platform operator mends stack " + s, "ops operation"} {
			if !strings.Contains(f.Description, part) {
				t.Errorf("description %q lacks %q", f.Description, part)
			}
		}
		if strings.Contains(f.Description, "dynamodb:UpdateTable") || !strings.Contains(f.Detail, "dynamodb:UpdateTable") {
			t.Errorf("description %q, detail %q: want the reason in the detail alone", f.Description, f.Detail)
		}
		if _, err := h.driver.Check(h.ctx, h.fresh(c)); err == nil || h.cfn.count("ContinueUpdateRollback") != 1 {
			t.Errorf("a check again: %v, %d ContinueUpdateRollback calls; want the failure again and one call", err, h.cfn.count("ContinueUpdateRollback"))
		}
	})

	t.Run("a crash after ContinueUpdateRollback, before the record of it: the next check finds the rollback going on, waits, and calls nothing twice", func(t *testing.T) {
		h, c := rollbackFailed(t)
		h.store.failPut = 2 // the record of what to skip goes in, the call goes through, the record of it does not
		if _, err := h.driver.Check(h.ctx, h.fresh(c)); err == nil {
			t.Fatal("Check did not fail with the store")
		}
		p, err := h.driver.Check(h.ctx, h.fresh(c))
		if err != nil || p.Done || !strings.Contains(p.Description, "skipping Queue") {
			t.Fatalf("check after the crash: %+v %v", p, err)
		}
		h.cfn.set(h.instanceStack(), types.StackStatusUpdateRollbackComplete, "")
		_, err = h.driver.Check(h.ctx, h.fresh(c))
		wantFlags(t, failureOf(t, err), true, false)
		if n := h.cfn.count("ContinueUpdateRollback"); n != 1 {
			t.Errorf("%d ContinueUpdateRollback calls, want 1", n)
		}
	})

	t.Run("a crash after ContinueUpdateRollback, and the continued rollback failed before the next check: its token in the events says it ran", func(t *testing.T) {
		h, c := rollbackFailed(t)
		h.store.failPut = 2
		h.driver.Check(h.ctx, h.fresh(c))
		h.cfn.set(h.instanceStack(), types.StackStatusUpdateRollbackFailed, "")
		_, err := h.driver.Check(h.ctx, h.fresh(c))
		wantFlags(t, failureOf(t, err), false, false)
		if n := h.cfn.count("ContinueUpdateRollback"); n != 1 {
			t.Errorf("%d ContinueUpdateRollback calls, want 1", n)
		}
	})

	t.Run("ContinueUpdateRollback refused because the stack is rolling back already does not fail the operation", func(t *testing.T) {
		h, c := rollbackFailed(t)
		// As CloudFormation answers a call that meets the rollback it
		// started (a retried call whose first answer was lost).
		h.cfn.failNext("ContinueUpdateRollback", apiErr("ValidationError",
			"Stack "+h.instanceStack()+" is in UPDATE_ROLLBACK_IN_PROGRESS state and can not continue the update rollback."))
		p, err := h.driver.Check(h.ctx, h.fresh(c))
		if err != nil || p.Done {
			t.Fatalf("check: %+v %v", p, err)
		}
		h.cfn.set(h.instanceStack(), types.StackStatusUpdateRollbackComplete, "")
		_, err = h.driver.Check(h.ctx, h.fresh(c))
		wantFlags(t, failureOf(t, err), true, false)
	})

	t.Run("ContinueUpdateRollback refused for good leaves the instance unusable and names the stack for the operator", func(t *testing.T) {
		h, c := rollbackFailed(t)
		h.cfn.failNext("ContinueUpdateRollback", apiErr("AccessDenied", "User: arn:aws:sts::123456789012:assumed-role/worker is not authorized to perform: cloudformation:ContinueUpdateRollback"))
		_, err := h.driver.Check(h.ctx, h.fresh(c))
		f := failureOf(t, err)
		wantFlags(t, f, false, false)
		if !strings.Contains(f.Description, "continues the rollback of stack "+h.instanceStack()) || strings.Contains(f.Description, "123456789012") {
			t.Errorf("description %q", f.Description)
		}
	})

	t.Run("a rollback that failed with nothing left in UPDATE_FAILED is continued skipping nothing: the instance is as it was, and the update repeatable", func(t *testing.T) {
		h := newHarness(t, false)
		h.provisioned()
		s := h.instanceStack()
		c := h.change(broker.KindUpdate, "op-update")
		h.driver.Begin(h.ctx, h.fresh(c))
		h.cfn.resource(s, "Bucket", "AWS::S3::Bucket", types.ResourceStatusUpdateFailed, "Rate exceeded")
		h.cfn.set(s, types.StackStatusUpdateRollbackInProgress, "")
		h.cfn.resource(s, "Bucket", "AWS::S3::Bucket", types.ResourceStatusUpdateFailed, "Resource update cancelled")
		h.cfn.set(s, types.StackStatusUpdateRollbackFailed, "")
		if p, err := h.driver.Check(h.ctx, h.fresh(c)); err != nil || p.Done || strings.Contains(p.Description, "skipping") {
			t.Fatalf("check: %+v %v", p, err)
		}
		if in := h.cfn.get(s).continues; len(in) != 1 || len(in[0].ResourcesToSkip) != 0 {
			t.Fatalf("ContinueUpdateRollback calls %+v, want one skipping nothing", in)
		}
		h.cfn.set(s, types.StackStatusUpdateRollbackComplete, "")
		_, err := h.driver.Check(h.ctx, h.fresh(c))
		f := failureOf(t, err)
		wantFlags(t, f, true, true)
		if !strings.Contains(f.Description, "the broker continued the rollback and the service instance is as it was before") {
			t.Errorf("description %q", f.Description)
		}
	})
}

// TestUpdateOfAStackStuckInRollbackFailed: once a continued rollback failed
// too, the stack stays UPDATE_ROLLBACK_FAILED until the operator repairs
// it, and takes no update: a new update fails at once, saying so and
// naming the command that shows why, without asking CloudFormation for a
// change set (which it would refuse with its generic message).
func TestUpdateOfAStackStuckInRollbackFailed(t *testing.T) {
	h, c := rollbackFailed(t)
	if _, err := h.driver.Check(h.ctx, h.fresh(c)); err != nil { // continues the rollback
		t.Fatal(err)
	}
	s := h.instanceStack()
	h.cfn.set(s, types.StackStatusUpdateRollbackFailed, "The following resource(s) failed to update: [Queue].")
	if _, err := h.driver.Check(h.ctx, h.fresh(c)); err == nil {
		t.Fatal("the continued rollback failed again, but the update did not fail")
	}
	changeSets := h.cfn.count("CreateChangeSet")

	for _, kind := range []string{"parameters", "upgrade"} {
		t.Run("an update of its "+kind+" fails at once, naming the operator's repair", func(t *testing.T) {
			next := h.change(broker.KindUpdate, "op-"+kind)
			next.Operation.Target = &broker.Target{Parameters: json.RawMessage(`{"Size":8}`)}
			if kind == "upgrade" {
				next.Operation.Target = &broker.Target{MaintenanceInfo: &broker.MaintenanceInfo{Version: "2.0.0"}, PlanDigest: "sha256:new"}
			}
			_, err := h.driver.Begin(h.ctx, h.fresh(next))
			f := failureOf(t, err)
			wantFlags(t, f, false, true)
			for _, part := range []string{"stack " + s + " could not be rolled back", "UPDATE_ROLLBACK_FAILED",
				"the platform operator must repair it and continue its rollback", "ops operation", "Nothing was changed"} {
				if !strings.Contains(f.Description, part) {
					t.Errorf("description %q lacks %q", f.Description, part)
				}
			}
			if n := h.cfn.count("CreateChangeSet"); n != changeSets {
				t.Errorf("%d CreateChangeSet calls, want none", n-changeSets)
			}
			if n := h.cfn.count("ContinueUpdateRollback"); n != 1 {
				t.Errorf("%d ContinueUpdateRollback calls, want only the failed update's one", n)
			}
		})
	}
}
