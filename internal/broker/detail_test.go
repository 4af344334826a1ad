package broker_test

import (
	"encoding/json"
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

// TestCaught: what the user and the operator see of an error a workflow
// caught, as Failure.Cause encodes a permanent failure.
func TestCaught(t *testing.T) {
	generic := broker.FailureDescription("", "")
	tests := []struct {
		name, errName, cause, description, detail string
	}{
		{"a permanent failure with a detail gives both", "PermanentError", cause("The quota is exhausted.", "LimitExceeded: 100 buckets"),
			"The quota is exhausted.", "LimitExceeded: 100 buckets"},
		{"in a Lambda error document too", "PermanentError", `{"errorMessage":` + quote(cause("The quota is exhausted.", "LimitExceeded")) + `,"errorType":"PermanentError"}`,
			"The quota is exhausted.", "LimitExceeded"},
		{"a permanent failure without a detail is its description, as before details", "PermanentError", cause("The quota is exhausted.", ""),
			"The quota is exhausted.", ""},
		{"any other error is the operator's detail alone", "States.TaskFailed", "dial tcp 10.0.0.1:443: connection refused",
			generic, "States.TaskFailed: dial tcp 10.0.0.1:443: connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := broker.Caught(tt.errName, tt.cause)
			if f.Description != tt.description || f.Detail != tt.detail {
				t.Fatalf("Caught(%q, %q) = %q, %q; want %q, %q", tt.errName, tt.cause, f.Description, f.Detail, tt.description, tt.detail)
			}
		})
	}
	t.Run("a failed update's flags travel with the description", func(t *testing.T) {
		f := broker.Failure{Description: "Not rolled back.", InstanceUsable: broker.Bool(false), UpdateRepeatable: broker.Bool(true)}
		got := broker.Caught("PermanentError", f.Cause())
		if got.Description != f.Description || got.Detail != "" || got.InstanceUsable == nil || *got.InstanceUsable ||
			got.UpdateRepeatable == nil || !*got.UpdateRepeatable {
			t.Fatalf("Caught(%q) = %+v", f.Cause(), got)
		}
	})
	t.Run("a description that is a JSON object (a user's, through the demo driver) cannot pass for a detail or flags", func(t *testing.T) {
		f := broker.Failure{Description: `{"description":"x","detail":"y","instance_usable":false}`}
		got := broker.Caught("PermanentError", f.Cause())
		if got.Description != f.Description || got.Detail != "" || got.InstanceUsable != nil {
			t.Fatalf("Caught(%q) = %+v, want the description as it was", f.Cause(), got)
		}
	})
	if got := cause("d", strings.Repeat("x", 3*broker.MaxDetail)); len(got) > broker.MaxDetail+100 {
		t.Errorf("a cause of %d bytes, want the detail capped", len(got))
	}
}

// cause is the cause of a workflow's error for a permanent failure with
// this description and detail (Failure.Cause).
func cause(description, detail string) string {
	return (&broker.Failure{Description: description, Detail: detail}).Cause()
}

// quote is s as a JSON string.
func quote(s string) string {
	data, _ := json.Marshal(s)
	return string(data)
}
