package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
)

// TestFailureDescription: what the user sees of an error a workflow
// caught. Only a driver's permanent failure is shown as it is.
func TestFailureDescription(t *testing.T) {
	generic := Caught("", "").Description
	tests := []struct {
		name, errName, cause, want string
	}{
		{"a permanent failure is shown as the driver wrote it", "PermanentError", "The quota is exhausted.", "The quota is exhausted."},
		{"a permanent failure in a Lambda error document is unwrapped", "PermanentError", `{"errorMessage":"The quota is exhausted.","errorType":"Failure"}`, "The quota is exhausted."},
		{"a permanent failure with no description is summarised", "PermanentError", "", generic},
		{"a timeout says so", "States.Timeout", "", "The operation timed out; try again later."},
		{"any other error is summarised, its cause never shown", "States.TaskFailed", "dial tcp 10.0.0.1:443: connection refused", generic},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Caught(tt.errName, tt.cause).Description
			if got != tt.want {
				t.Fatalf("Caught(%q, %q).Description = %q, want %q", tt.errName, tt.cause, got, tt.want)
			}
			if strings.Contains(got, "10.0.0.1") {
				t.Fatalf("%q shows an internal cause", got)
			}
		})
	}
}

// TestCaught: what the user and the operator see of an error a workflow
// caught, as a PermanentError's message (cause) encodes a permanent failure.
func TestCaught(t *testing.T) {
	generic := Caught("", "").Description
	tests := []struct {
		name, errName, cause, description, detail string
	}{
		{"a permanent failure with a detail gives both", "PermanentError", causeOf("The quota is exhausted.", "LimitExceeded: 100 buckets"),
			"The quota is exhausted.", "LimitExceeded: 100 buckets"},
		{"in a Lambda error document too", "PermanentError", `{"errorMessage":` + quote(causeOf("The quota is exhausted.", "LimitExceeded")) + `,"errorType":"PermanentError"}`,
			"The quota is exhausted.", "LimitExceeded"},
		{"a permanent failure without a detail is its description, as before details", "PermanentError", causeOf("The quota is exhausted.", ""),
			"The quota is exhausted.", ""},
		{"any other error is the operator's detail alone", "States.TaskFailed", "dial tcp 10.0.0.1:443: connection refused",
			generic, "States.TaskFailed: dial tcp 10.0.0.1:443: connection refused"},
		{"a timeout gives the operator Step Functions' error", "States.Timeout", "",
			"The operation timed out; try again later.", "States.Timeout:"},
		{"nothing caught at all is the generic description alone", "", "", broker.GenericFailure, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Caught(tt.errName, tt.cause)
			if f.Description != tt.description || f.Detail != tt.detail {
				t.Fatalf("Caught(%q, %q) = %q, %q; want %q, %q", tt.errName, tt.cause, f.Description, f.Detail, tt.description, tt.detail)
			}
		})
	}
	t.Run("a failed update's flags travel with the description", func(t *testing.T) {
		f := broker.Failure{Description: "Not rolled back.", InstanceUsable: broker.Bool(false), UpdateRepeatable: broker.Bool(true)}
		got := Caught("PermanentError", cause(f))
		if got.Description != f.Description || got.Detail != "" || got.InstanceUsable == nil || *got.InstanceUsable ||
			got.UpdateRepeatable == nil || !*got.UpdateRepeatable {
			t.Fatalf("Caught(%q) = %+v", cause(f), got)
		}
	})
	t.Run("a description that is a JSON object (a user's, through the demo driver) cannot pass for a detail or flags", func(t *testing.T) {
		f := broker.Failure{Description: `{"description":"x","detail":"y","instance_usable":false}`}
		got := Caught("PermanentError", cause(f))
		if got.Description != f.Description || got.Detail != "" || got.InstanceUsable != nil {
			t.Fatalf("Caught(%q) = %+v, want the description as it was", cause(f), got)
		}
	})
	t.Run("a long detail is capped in the cause", func(t *testing.T) {
		if got := causeOf("d", strings.Repeat("x", 3*broker.MaxDetail)); len(got) > broker.MaxDetail+100 {
			t.Errorf("a cause of %d bytes, want the detail capped", len(got))
		}
	})
}

// TestClassify: every error of a step leaves bare, as one of the two names
// the workflows match, and a driver's failure keeps all it said.
func TestClassify(t *testing.T) {
	failure := &broker.Failure{Description: "The quota is exhausted.", Detail: "LimitExceeded", InstanceUsable: broker.Bool(true)}
	permanent := &PermanentError{broker.Failure{Description: "The plan is gone."}}
	transient := &TransientError{Err: errors.New("throttled")}
	tests := []struct {
		name    string
		err     error
		want    string // the error's name
		failure *broker.Failure
	}{
		{"a driver's failure is a PermanentError with its description, detail and flags", failure, ErrorPermanent, failure},
		{"a wrapped driver's failure too", fmt.Errorf("begin: %w", failure), ErrorPermanent, failure},
		{"a PermanentError stays as it is", permanent, ErrorPermanent, &permanent.Failure},
		{"a wrapped PermanentError is unwrapped", fmt.Errorf("step: %w", permanent), ErrorPermanent, &permanent.Failure},
		{"a TransientError stays as it is", transient, ErrorTransient, nil},
		{"an unclassified error is a TransientError", errors.New("connection reset"), ErrorTransient, nil},
		{"a deadline is a TransientError", context.DeadlineExceeded, ErrorTransient, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := classify(tt.err)
			if name := errorName(got); name != tt.want {
				t.Fatalf("classify(%v) is named %s, want %s", tt.err, name, tt.want)
			}
			if tt.failure == nil {
				if got.Error() != tt.err.Error() {
					t.Errorf("message %q, want %q", got, tt.err)
				}
				return
			}
			if p := got.(*PermanentError); p.Error() != cause(*tt.failure) || Caught(p.ErrorName(), p.Error()).Description != tt.failure.Description {
				t.Errorf("message %q, want %q", p.Error(), cause(*tt.failure))
			}
		})
	}
}

// causeOf is the cause of a workflow's error for a permanent failure with
// this description and detail.
func causeOf(description, detail string) string {
	return cause(broker.Failure{Description: description, Detail: detail})
}

// quote is s as a JSON string.
func quote(s string) string {
	data, _ := json.Marshal(s)
	return string(data)
}
