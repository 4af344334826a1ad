package function_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/drivers/function"
	"github.com/serverless-osb/broker/internal/store/bolt"
)

// fakeLambda is a fake of Lambda's HTTP API: an http.RoundTripper that
// answers every request as the test scripts it, and records the requests.
type fakeLambda struct {
	mu     sync.Mutex
	status int
	header map[string]string
	body   string
	paths  []string
	heads  []http.Header
	bodies [][]byte
}

func (f *fakeLambda) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
	}
	f.paths, f.heads, f.bodies = append(f.paths, r.URL.Path), append(f.heads, r.Header.Clone()), append(f.bodies, body)
	h := http.Header{"Content-Type": {"application/json"}}
	for k, v := range f.header {
		h.Set(k, v)
	}
	return &http.Response{StatusCode: f.status, Header: h, Body: io.NopCloser(strings.NewReader(f.body)), Request: r,
		ContentLength: int64(len(f.body))}, nil
}

// lambdaDriver returns a driver whose Lambda client reaches cfg, and a
// change for the Lambda target fn.
func lambdaDriver(t *testing.T, cfg aws.Config, fn string) (*function.Driver, broker.Change) {
	t.Helper()
	store, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	d := function.New(store, func(context.Context) (aws.Config, error) { return cfg, nil }, nil, nil)
	s, err := function.Configure(nil, map[string]any{"function": fn}, "")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{s: s}
	return d, f.change(broker.KindBind, "op-1", true, `{}`)
}

func TestLambdaTransportWithStubbedResponses(t *testing.T) {
	const fn = "arn:aws:lambda:eu-west-1:123456789012:function:my-broker:live"
	for _, tc := range []struct {
		name      string
		status    int
		header    map[string]string
		body      string
		permanent bool
		ok        bool
		notIn     string // what the error must not quote
	}{
		{name: "an answer is read from the payload", status: 200,
			body: `{"version":1,"done":true,"results":{"credentials":{"password":"pw-1"}}}`, ok: true},
		{name: "a function error (the function threw) is transient and its message is not quoted", status: 200,
			header: map[string]string{"X-Amz-Function-Error": "Unhandled"},
			body:   `{"errorType":"Runtime.ExitError","errorMessage":"connection to postgres://admin:pw@db failed"}`, notIn: "admin:pw"},
		{name: "throttling (429 TooManyRequestsException) is transient", status: 429,
			header: map[string]string{"X-Amzn-Errortype": "TooManyRequestsException"},
			body:   `{"Reason":"ReservedFunctionConcurrentInvocationLimitExceeded","Type":"User","message":"Rate Exceeded."}`},
		{name: "a service error is transient", status: 500,
			header: map[string]string{"X-Amzn-Errortype": "ServiceException"}, body: `{"message":"internal"}`},
		{name: "a missing function is permanent", status: 404, permanent: true,
			header: map[string]string{"X-Amzn-Errortype": "ResourceNotFoundException"}, body: `{"Type":"User","message":"Function not found"}`},
		{name: "a broker that may not invoke the function is told so", status: 403, permanent: true,
			header: map[string]string{"X-Amzn-Errortype": "AccessDeniedException"}, body: `{"message":"not authorized"}`},
		{name: "an oversized payload is permanent: retrying cannot help", status: 200, permanent: true,
			body: `{"version":1,"done":true,"description":"` + strings.Repeat("x", function.MaxAnswerBytes) + `"}`},
		{name: "a payload that is not an answer is permanent", status: 200, permanent: true, body: `"Simple Lambda happy path OK"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeLambda{status: tc.status, header: tc.header, body: tc.body}
			cfg := aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String("https://lambda.fake.test"),
				Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
				HTTPClient:  &http.Client{Transport: fake}, Retryer: func() aws.Retryer { return aws.NopRetryer{} }}
			d, c := lambdaDriver(t, cfg, fn)
			p, err := d.Begin(context.Background(), c)
			var fail *broker.Failure
			switch {
			case tc.ok && (err != nil || !p.Done || p.Credentials["password"] != "pw-1"):
				t.Fatalf("%+v %v", p, err)
			case !tc.ok && err == nil:
				t.Fatalf("no error: %+v", p)
			case !tc.ok && errors.As(err, &fail) != tc.permanent:
				t.Fatalf("error %v: permanent %v, want %v", err, !tc.permanent, tc.permanent)
			case err != nil && tc.notIn != "" && strings.Contains(err.Error(), tc.notIn):
				t.Errorf("the error quotes the function's message: %v", err)
			}
			if len(fake.paths) != 1 {
				t.Fatalf("%d calls, want 1", len(fake.paths))
			}
			if want := "/2015-03-31/functions/" + fn + "/invocations"; fake.paths[0] != want {
				t.Errorf("path %s, want %s", fake.paths[0], want)
			}
			if got := fake.heads[0].Get("X-Amz-Invocation-Type"); got != "RequestResponse" {
				t.Errorf("invocation type %q, want RequestResponse (synchronous)", got)
			}
			if !bytes.Contains(fake.bodies[0], []byte(`"call":"begin"`)) || !bytes.Contains(fake.bodies[0], []byte(`"version":2`)) {
				t.Errorf("payload %s is not a begin request", fake.bodies[0])
			}
		})
	}
}
