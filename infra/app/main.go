// Command app is the broker's CDK app: cdk.json runs it (go run ./infra/app)
// from the repository root, and it defines the stack from the CDK context
// (see infra.PropsFromContext for the keys).
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/infra"
)

// defaultStackName is the stack's name unless the context sets stackName.
const defaultStackName = "ServerlessOsb"

func main() {
	os.Exit(infra.RunCDK(func() int {
		app := awscdk.NewApp(nil)
		if err := define(app); err != nil {
			fmt.Fprintln(os.Stderr, "serverless-osb infra:", err)
			return 1
		}
		app.Synth(nil)
		return 0
	}))
}

func define(app awscdk.App) error {
	if target, ok, err := infra.TargetPropsFromContext(app.Node()); err != nil || ok {
		if err != nil {
			return err
		}
		// The stack each target account of a placement gets (-c target=true).
		target.Description = jsii.String("serverless-osb: the role a broker assumes in this account, and the service role its stacks are made under.")
		_, err = infra.NewTargetStack(app, defaultStackName+"Target", &target)
		return err
	}
	props, err := infra.PropsFromContext(app.Node())
	if err != nil {
		return err
	}
	name := defaultStackName
	if v, ok := app.Node().TryGetContext(jsii.String(infra.ContextStackName)).(string); ok && v != "" {
		name = v
	}
	// Environment-agnostic: synthesis needs no AWS account, and cdk deploy
	// deploys to the account and region of the caller's credentials.
	props.Description = jsii.String("serverless-osb: an Open Service Broker on API Gateway, Lambda, Step Functions and DynamoDB.")
	_, err = infra.NewBrokerStack(app, name, &props)
	return err
}
