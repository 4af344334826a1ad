// Command dbuser is the handler of the binding templates' Custom::DatabaseUser
// (internal/dbusers): CloudFormation invokes it, in the database's VPC, to
// make a binding's database user and to drop it at unbind; with the Engine
// opensearch, a search domain's user (internal/searchusers).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/serverless-osb/broker/internal/dbusers"
	"github.com/serverless-osb/broker/internal/searchusers"
)

// caBundle is the RDS certificate bundle, beside the bootstrap when the
// build put it there.
const caBundle = "rds-ca-bundle.pem"

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "serverless-osb dbuser:", err)
		os.Exit(1)
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if pem, err := os.ReadFile(caBundle); err == nil {
		t.RootCAs = x509.NewCertPool()
		t.RootCAs.AppendCertsFromPEM(pem)
	} else {
		// Encrypted still, but the server is not authenticated.
		t.InsecureSkipVerify = true
		log.Warn("no RDS certificate bundle: database servers' certificates are not verified", "file", caBundle)
	}
	secrets := secretsmanager.NewFromConfig(cfg)
	h := &dbusers.Handler{Secrets: secrets, TLS: t, Log: log}
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
