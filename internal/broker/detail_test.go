package broker_test

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/serverless-osb/broker/internal/broker"
)

// failsWithDetail: the change failed for good, with a detail for the
// operator beside the description for users.
func failsWithDetail(description, detail string) answer {
	return answer{err: &broker.Failure{Description: description, Detail: detail}}
}

// TestTheOperatorsDetailOfAFailure: a driver's full reason reaches the
// operation's record (Operation.Detail) through the workflow's error and
// on the synchronous path; users never see it.
func TestTheOperatorsDetailOfAFailure(t *testing.T) {
	const (
		description = "The bucket could not be created: the broker's service role lacks a permission."
		detail      = "Bucket (AWS::S3::Bucket) CREATE_FAILED: User: arn:aws:sts::123456789012:assumed-role/cfn is not authorized to perform: s3:CreateBucket"
	)
	t.Run("an asynchronous failure's detail travels in the workflow's error cause and is kept on the operation; last_operation shows the description alone", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.driver.on("begin", broker.KindProvision, failsWithDetail(description, detail))
		op := h.provisioning("i-1", planAsync, "")
		h.failTask("i-1", op, "begin")
		got := h.op("i-1", op)
		if got.Description != description || got.Detail != detail {
			t.Fatalf("operation: description %q, detail %q; want %q and %q", got.Description, got.Detail, description, detail)
		}
		lo, err := h.b.LastOperation(ctx, of(op))
		if err != nil || lo.Description != description {
			t.Fatalf("last_operation %+v %v, want the description", lo, err)
		}
	})
	t.Run("a synchronous update's failure keeps its detail too", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.readyWith("i-1", planSync, `{"size":1}`)
		h.driver.on("begin", broker.KindUpdate, failsWithDetail(description, detail))
		if _, err := h.b.Update(ctx, updateOf("i-1", "", false, `{"size":2}`)); broker.ErrorCode(err) != broker.CodeUnprocessable {
			t.Fatalf("update: %v, want 422", err)
		}
		if got := h.lastOp("i-1"); got.State != broker.OperationFailed || got.Detail != detail {
			t.Fatalf("operation %s, detail %q; want failed with %q", got.State, got.Detail, detail)
		}
	})
	t.Run("a detail that repeats a request parameter is withheld, as the log withholds it", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.driver.on("begin", broker.KindProvision, failsWithDetail(description, "Invalid value Enabled-by-mallory for Status"))
		op := h.provisioning("i-1", planAsync, `{"name":"Enabled-by-mallory"}`)
		h.failTask("i-1", op, "begin")
		if got := h.op("i-1", op).Detail; strings.Contains(got, "mallory") || !strings.Contains(got, "repeats a request parameter") {
			t.Fatalf("detail %q, want it withheld", got)
		}
	})
	t.Run("a long detail is capped at MaxDetail, at a character's boundary", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.driver.on("begin", broker.KindProvision, failsWithDetail(description, strings.Repeat("é", broker.MaxDetail)))
		op := h.provisioning("i-1", planAsync, "")
		h.failTask("i-1", op, "begin")
		if got := h.op("i-1", op).Detail; len(got) > broker.MaxDetail || len(got) < broker.MaxDetail/2 || !utf8.ValidString(got) {
			t.Fatalf("detail of %d bytes (valid UTF-8: %v), want at most %d", len(got), utf8.ValidString(got), broker.MaxDetail)
		}
	})
	t.Run("a transient error that ends a synchronous change leaves its text for the operator, not for users", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.b.Backoff = time.Millisecond
		h.readyWith("i-1", planSync, `{"size":1}`)
		h.driver.on("begin", broker.KindUpdate, answer{err: errTransient}, answer{err: errTransient}, answer{err: errTransient}, answer{err: errTransient})
		_, err := h.b.Update(ctx, updateOf("i-1", "", false, `{"size":2}`))
		if err == nil {
			t.Fatal("update succeeded, want its failure")
		}
		got := h.lastOp("i-1")
		if strings.Contains(got.Description, errTransient.Error()) || !strings.Contains(got.Detail, errTransient.Error()) {
			t.Fatalf("description %q, detail %q: want the error in the detail alone", got.Description, got.Detail)
		}
	})
}
