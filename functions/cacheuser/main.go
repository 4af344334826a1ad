// Command cacheuser is the handler of the cache binding template's
// Custom::CacheUserGroupMember (internal/cacheusers): CloudFormation invokes
// it to put a binding's ElastiCache user in its cache's user group and to
// take it out at unbind. The ElastiCache and Secrets Manager APIs are
// public endpoints: the function runs in no VPC.
package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/elasticache"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/serverless-osb/broker/internal/awsenv"
	"github.com/serverless-osb/broker/internal/cacheusers"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	cfg, err := awsenv.Config("")
	if err != nil {
		fmt.Fprintln(os.Stderr, "serverless-osb cacheuser:", err)
		os.Exit(1)
	}
	m := &cacheusers.Membership{Groups: elasticache.NewFromConfig(cfg), Secrets: secretsmanager.NewFromConfig(cfg), Log: log}
	lambda.Start(m.Respond)
}
