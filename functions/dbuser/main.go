// Command dbuser is the handler of the binding templates' Custom::DatabaseUser
// (internal/dbusers): CloudFormation invokes it, in the database's VPC, to
// make a binding's database user and to drop it at unbind; with the Engine
// opensearch, a search domain's user (internal/searchusers).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/serverless-osb/broker/internal/awsenv"
	"github.com/serverless-osb/broker/internal/dbusers"
	"github.com/serverless-osb/broker/internal/searchusers"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	cfg, err := awsenv.Config("")
	if err != nil {
		fmt.Fprintln(os.Stderr, "serverless-osb dbuser:", err)
		os.Exit(1)
	}
	secrets := secretsmanager.NewFromConfig(cfg)
	h := &dbusers.Handler{Secrets: secrets, Log: log}
	// Without the bundle the handler refuses to connect rather than send
	// the master's password to a server it cannot authenticate.
	if pem, err := os.ReadFile(dbusers.BundleFile); err != nil {
		h.Unavailable = dbusers.ErrNoBundle
		log.Error("no RDS certificate bundle: every request fails", "file", dbusers.BundleFile)
	} else if h.TLS, err = dbusers.VerifyingTLS(pem); err != nil {
		h.Unavailable = fmt.Errorf("%s: %w", dbusers.BundleFile, err)
		log.Error("the RDS certificate bundle is unusable: every request fails", "file", dbusers.BundleFile)
	}
	// The domains' certificates are public ones: the system's roots verify
	// them.
	search := &searchusers.Handler{Secrets: secrets, HTTP: &http.Client{Timeout: 30 * time.Second}, Log: log}
	lambda.Start(func(ctx context.Context, e cfn.Event) error {
		if searchusers.Is(e) {
			return search.Respond(ctx, e)
		}
		return h.Respond(ctx, e)
	})
}
