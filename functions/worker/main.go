// Command worker runs the Task states of statemachines/ on AWS Lambda: Step
// Functions invokes it with {"step", "operation_id", "instance_id"} and it
// runs that step on the DynamoDB store. Its errors reach Step Functions
// named TransientError (retried) or PermanentError (recorded).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/serverless-osb/broker/internal/app"
)

func main() {
	handler, err := app.NewWorker(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "serverless-osb worker:", err)
		os.Exit(1)
	}
	lambda.Start(handler)
}
