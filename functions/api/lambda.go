//go:build lambda.norpc

package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/serverless-osb/broker/internal/app"
)

// main serves the api function under the Lambda runtime, and only that:
// the local broker and the operator command are the other build's
// (main.go), and would make this bootstrap larger and slower to start.
func main() {
	if !app.InLambda() {
		fmt.Fprintln(os.Stderr, "serverless-osb: this is the Lambda build of the api function, which runs under the Lambda runtime only; for the local broker or the operator command, build ./functions/api without -tags lambda.norpc (make run, make ops)")
		os.Exit(2)
	}
	h, err := app.NewLambdaAPI(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "serverless-osb:", err)
		os.Exit(1)
	}
	lambda.Start(app.LambdaHTTP(h))
}
