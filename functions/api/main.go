//go:build !lambda.norpc

// Command api serves the OSB API. Under the Lambda runtime it answers API
// Gateway HTTP API events on DynamoDB and Step Functions (see
// internal/app/lambda.go for its environment). Run locally (`make run`) it
// is a complete broker on 127.0.0.1 with an embedded store and an
// in-process workflow engine; see the README for its environment variables.
// `api ops ...` is the operator command (see internal/app/ops.go).
//
// The Lambda build (-tags lambda.norpc, as make build builds it) is
// lambda.go instead: the api function alone, without the local broker and
// the operator command, which its cold start and bundle would only carry.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/serverless-osb/broker/internal/app"
)

func main() {
	if app.InLambda() {
		h, err := app.NewLambdaAPI(context.Background())
		exitOn(err)
		lambda.Start(app.LambdaHTTP(h))
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := app.RunCommand(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !app.IsHelp(err) {
		fmt.Fprintln(os.Stderr, "serverless-osb:", err)
	}
	os.Exit(app.ExitCode(err))
}

func exitOn(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "serverless-osb:", err)
		os.Exit(1)
	}
}
