// Package mototest connects tests to the moto_server that `make test`
// starts (see ./withmoto): real implementations of the DynamoDB and Step
// Functions APIs on 127.0.0.1. A test that needs moto and finds none fails
// with a message that says how to get one; it never skips.
package mototest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/middleware"
)

// EnvEndpoint names the variable that holds moto's URL.
const EnvEndpoint = "MOTO_ENDPOINT"

// Endpoint returns moto's URL, or fails the test.
func Endpoint(tb testing.TB) string {
	tb.Helper()
	e := os.Getenv(EnvEndpoint)
	if e == "" {
		tb.Fatalf("%s is not set: this test needs moto_server. Run it through `make test`, or "+
			"`go run ./internal/mototest/withmoto -- go test ./...`, which start one.", EnvEndpoint)
	}
	return e
}

// Config returns an AWS configuration for moto in region: static test
// credentials, moto as the endpoint of every service.
func Config(tb testing.TB, region string) aws.Config {
	tb.Helper()
	return aws.Config{
		Region:           region,
		Credentials:      credentials.NewStaticCredentialsProvider("testing", "testing", ""),
		BaseEndpoint:     aws.String(Endpoint(tb)),
		RetryMaxAttempts: 3,
	}
}

// Name returns a name unique to this test run, for tables and state
// machines that tests running side by side on one moto must not share.
// The clock tells runs apart; the process and a counter tell apart the
// names that test binaries running at once ask for in the same instant.
func Name(prefix string) string {
	return fmt.Sprintf("%s-%d-%d-%d", prefix, time.Now().UnixNano(), os.Getpid(), names.Add(1))
}

var names atomic.Int64

// Calls counts the AWS API calls of the clients it is registered with
// (Register, as an APIOptions entry), once per call the caller makes: the
// SDK's own retries of one call are not counted. Keys are operation names
// ("GetItem"), or with ByService the service's too ("DynamoDB.GetItem").
type Calls struct {
	ByService bool

	mu    sync.Mutex
	count map[string]int
}

// Register adds the counting to a client's middleware stack.
func (c *Calls) Register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("CountCalls",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			name := awsmiddleware.GetOperationName(ctx)
			if c.ByService {
				name = awsmiddleware.GetServiceID(ctx) + "." + name
			}
			c.mu.Lock()
			if c.count == nil {
				c.count = map[string]int{}
			}
			c.count[name]++
			c.mu.Unlock()
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}

// Take returns the calls counted since the last Take and starts again.
func (c *Calls) Take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.count
	if out == nil {
		out = map[string]int{}
	}
	c.count = map[string]int{}
	return out
}
