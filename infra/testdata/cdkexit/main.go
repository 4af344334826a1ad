// Command cdkexit synthesizes a small stack through infra.RunCDK, as the
// broker's CDK app does, for TestTheCDKRuntimeEndsQuietly.
package main

import (
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/infra"
)

func main() {
	os.Exit(infra.RunCDK(func() int {
		app := awscdk.NewApp(nil)
		stack := awscdk.NewStack(app, jsii.String("Small"), nil)
		awscdk.NewCfnOutput(stack, jsii.String("Answer"), &awscdk.CfnOutputProps{Value: jsii.String("42")})
		app.Synth(nil)
		return 0
	}))
}
