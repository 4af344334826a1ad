package broker_test

import (
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// failsUnusable: an update failed and left the instance unusable (a stack
// that could not be rolled back), as a driver says it.
func failsUnusable(description, detail string) answer {
	return answer{err: &broker.Failure{Description: description, Detail: detail,
		InstanceUsable: broker.Bool(false), UpdateRepeatable: broker.Bool(false)}}
}

// flags shows a pair of optional flags for a failure message.
func flags(usable, repeatable *bool) string {
	show := func(b *bool) string {
		if b == nil {
			return "unset"
		}
		if *b {
			return "true"
		}
		return "false"
	}
	return "instance_usable " + show(usable) + ", update_repeatable " + show(repeatable)
}

func wantFlags(t *testing.T, what string, usable, repeatable *bool, wantUsable, wantRepeatable bool) {
	t.Helper()
	if usable == nil || *usable != wantUsable || repeatable == nil || *repeatable != wantRepeatable {
		t.Fatalf("%s: %s; want instance_usable %v, update_repeatable %v", what, flags(usable, repeatable), wantUsable, wantRepeatable)
	}
}

// TestAFailedUpdateSaysWhetherTheInstanceIsUsable: what a driver says of
// the instance after a failed update reaches last_operation, through the
// workflow's error on the asynchronous path and on the synchronous one.
func TestAFailedUpdateSaysWhetherTheInstanceIsUsable(t *testing.T) {
	const (
		description = "The update failed and could not be rolled back; the platform operator must act."
		detail      = "stack osb-i-1 UPDATE_ROLLBACK_FAILED: Bucket (AWS::S3::Bucket) UPDATE_FAILED: the bucket was deleted outside CloudFormation"
	)
	t.Run("an asynchronous update that leaves the instance unusable says so in last_operation; the instance stays ready, for the operator to mend", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.readyWith("i-1", planAsync, `{"size":1}`)
		h.driver.on("begin", broker.KindUpdate, running("Resizing.", time.Second))
		h.driver.on("check", broker.KindUpdate, failsUnusable(description, detail))
		op := h.updating("i-1", `{"size":2}`)
		h.mustBegin("i-1", op)
		h.failTask("i-1", op, "check")
		lo, err := h.b.LastOperation(ctx, of(op))
		if err != nil || lo.State != broker.OperationFailed || lo.Description != description {
			t.Fatalf("last_operation %+v %v, want failed with the driver's description", lo, err)
		}
		wantFlags(t, "last_operation", lo.InstanceUsable, lo.UpdateRepeatable, false, false)
		if got := h.op("i-1", op).Detail; got != detail {
			t.Fatalf("detail %q, want %q", got, detail)
		}
		if inst := h.instance("i-1"); inst.State != broker.InstanceReady || inst.Op != "" || string(inst.Parameters) != `{"size":1}` {
			t.Fatalf("instance %+v, want ready and idle with its old parameters", inst)
		}
	})
	t.Run("an asynchronous update whose driver says nothing of the instance leaves it usable and the update repeatable, as before", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.readyWith("i-1", planAsync, `{"size":1}`)
		h.driver.on("begin", broker.KindUpdate, running("Resizing.", time.Second))
		h.driver.on("check", broker.KindUpdate, fails("The resize failed."))
		op := h.updating("i-1", `{"size":2}`)
		h.mustBegin("i-1", op)
		h.failTask("i-1", op, "check")
		lo, err := h.b.LastOperation(ctx, of(op))
		if err != nil || lo.State != broker.OperationFailed {
			t.Fatalf("last_operation %+v %v", lo, err)
		}
		wantFlags(t, "last_operation", lo.InstanceUsable, lo.UpdateRepeatable, true, true)
	})
	t.Run("an asynchronous update rolled back, usable but not to be repeated, says exactly that", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.readyWith("i-1", planAsync, `{"size":1}`)
		h.driver.on("begin", broker.KindUpdate, running("Resizing.", time.Second))
		h.driver.on("check", broker.KindUpdate, answer{err: &broker.Failure{Description: "Rolled back, skipping Bucket.",
			InstanceUsable: broker.Bool(true), UpdateRepeatable: broker.Bool(false)}})
		op := h.updating("i-1", `{"size":2}`)
		h.mustBegin("i-1", op)
		h.failTask("i-1", op, "check")
		lo, err := h.b.LastOperation(ctx, of(op))
		if err != nil {
			t.Fatal(err)
		}
		wantFlags(t, "last_operation", lo.InstanceUsable, lo.UpdateRepeatable, true, false)
	})
	t.Run("a synchronous update's answer and its operation's record agree that the instance is unusable", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.readyWith("i-1", planSync, `{"size":1}`)
		h.driver.on("begin", broker.KindUpdate, failsUnusable(description, detail))
		_, err := h.b.Update(ctx, updateOf("i-1", "", false, `{"size":2}`))
		e, ok := err.(*broker.Error)
		if !ok || e.Code != broker.CodeUnprocessable {
			t.Fatalf("update: %v, want 422", err)
		}
		wantFlags(t, "the answer", e.InstanceUsable, e.UpdateRepeatable, false, false)
		got := h.lastOp("i-1")
		wantFlags(t, "the operation", got.InstanceUsable, got.UpdateRepeatable, false, false)
	})
	t.Run("a failed provision carries no flags, whatever the driver says (OSB has them for updates and deprovisions)", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.driver.on("begin", broker.KindProvision, failsUnusable(description, detail))
		op := h.provisioning("i-1", planAsync, "")
		h.failTask("i-1", op, "begin")
		if got := h.op("i-1", op); got.InstanceUsable != nil || got.UpdateRepeatable != nil {
			t.Fatalf("provision's %s, want neither", flags(got.InstanceUsable, got.UpdateRepeatable))
		}
	})
}
