// Package mototest connects tests to the moto_server that `make test`
// starts (see ./withmoto): real implementations of the DynamoDB and Step
// Functions APIs on 127.0.0.1. A test that needs moto and finds none fails
// with a message that says how to get one; it never skips.
package mototest

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
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
