package cfnresource

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
)

// answers is CloudFormation's response URL on loopback: each PUT body.
func answers(t *testing.T) (string, chan cfn.Response) {
	got := make(chan cfn.Response, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var resp cfn.Response
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &resp); err != nil {
			t.Errorf("answer %q: %v", body, err)
		}
		got <- resp
	}))
	t.Cleanup(srv.Close)
	return srv.URL, got
}

// TestAHandlerThatOverrunsIsAnsweredFailed: a handler still at work when
// the function has Margin left is cancelled, and CloudFormation gets a
// FAILED answer with its reason, not silence until the function's timeout.
func TestAHandlerThatOverrunsIsAnsweredFailed(t *testing.T) {
	url, got := answers(t)
	ctx, cancel := context.WithTimeout(context.Background(), Margin+time.Second)
	defer cancel()
	e := cfn.Event{RequestType: cfn.RequestCreate, ResponseURL: url, RequestID: "r-1", LogicalResourceID: "User", StackID: "s"}
	err := Respond(ctx, e, nil, "test user", func(ctx context.Context, _ cfn.Event) (string, map[string]any, error) {
		<-ctx.Done()
		return "", nil, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.Status != cfn.StatusFailed || r.Reason != context.DeadlineExceeded.Error() || r.PhysicalResourceID != "r-1" {
		t.Errorf("answer %+v, want FAILED with the deadline, the request id as physical id", r)
	}
	if ctx.Err() != nil {
		t.Error("the answer came after the function's own deadline")
	}
}

// TestAnAnswerCarriesTheHandlersIdAndData.
func TestAnAnswerCarriesTheHandlersIdAndData(t *testing.T) {
	url, got := answers(t)
	e := cfn.Event{RequestType: cfn.RequestCreate, ResponseURL: url, RequestID: "r-2"}
	err := Respond(context.Background(), e, nil, "test user", func(context.Context, cfn.Event) (string, map[string]any, error) {
		return "user-1", map[string]any{"Username": "u"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.Status != cfn.StatusSuccess || r.PhysicalResourceID != "user-1" || r.Data["Username"] != "u" {
		t.Errorf("answer %+v", r)
	}
}
