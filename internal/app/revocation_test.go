package app_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/logging"
	"github.com/serverless-osb/broker/internal/logging/logtest"
	"github.com/serverless-osb/broker/internal/mototest"
)

// testClock is a clock the test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestRevokedBrokerPasswordIsRefusedByAWarmAPI builds the api function as
// deployed (Secrets Manager, DynamoDB and Step Functions: moto's) and
// changes its secret under it: once the credentials' age passes, the old
// password is refused and the new one served, without a new container; a
// failed read keeps the last good credentials; a flood of bad passwords
// does not make a read each.
func TestRevokedBrokerPasswordIsRefusedByAWarmAPI(t *testing.T) {
	ctx := context.Background()
	const region = "us-east-1"
	awsCfg := mototest.Config(t, region)
	env := deployedOnMoto(t, ctx, awsCfg, region, "revoke")
	secrets := secretsmanager.NewFromConfig(awsCfg)
	old, revoked := "old-"+mototest.Name("p"), "new-"+mototest.Name("p")
	created, err := secrets.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name: aws.String(mototest.Name("broker-credentials")), SecretString: aws.String(`{"username":"broker","password":"` + old + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	env["BROKER_SECRET_ARN"] = aws.ToString(created.ARN)
	setEnv(t, env)
	cfg, err := app.LambdaConfigFromEnv(app.FunctionAPI)
	if err != nil {
		t.Fatal(err)
	}
	clock := &testClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg.Now = clock.Now
	logs := &apptest.SyncBuffer{}
	h, err := app.BuildLambdaAPI(ctx, cfg, logging.New(logs, slog.LevelDebug))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := os.ReadFile(filepath.Join(eventsDir(), "catalog.json"))
	if err != nil {
		t.Fatal(err)
	}
	status := func(pass string) string {
		t.Helper()
		out, err := app.LambdaHTTP(h).Invoke(ctx, withPassword(t, payload, "broker", pass))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"200", "401"} {
			if strings.Contains(string(out), `"statusCode":`+s) {
				return s
			}
		}
		t.Fatalf("answer %.300s: neither 200 nor 401", out)
		return ""
	}
	readFailures := func() int {
		t.Helper()
		lines, err := logtest.Lines(logs.String())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, l := range lines {
			if l["msg"] == "re-read the broker credentials: keeping the last read" {
				n++
			}
		}
		return n
	}

	if got := status(old); got != "200" {
		t.Fatalf("the secret's password: %s, want 200", got)
	}
	if _, err := secrets.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: created.ARN,
		SecretString: aws.String(`{"username":"broker","password":"` + revoked + `"}`)}); err != nil {
		t.Fatal(err)
	}
	t.Run("once the credentials' age passes, the old password is refused and the new one served", func(t *testing.T) {
		clock.Add(app.DefaultCredentialsMaxAge)
		if got := status(old); got != "401" {
			t.Errorf("the password removed from the secret: %s, want 401", got)
		}
		if got := status(revoked); got != "200" {
			t.Errorf("the secret's new password: %s, want 200", got)
		}
	})
	if _, err := secrets.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: created.ARN,
		ForceDeleteWithoutRecovery: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	t.Run("a read that fails keeps the last good credentials, and says so", func(t *testing.T) {
		clock.Add(app.DefaultCredentialsMaxAge)
		if got := status(revoked); got != "200" {
			t.Errorf("the last good password after a failed read: %s, want 200", got)
		}
		if got := status(old); got != "401" {
			t.Errorf("the revoked password after a failed read: %s, want 401", got)
		}
		if n := readFailures(); n != 1 {
			t.Errorf("%d failed reads logged, want 1", n)
		}
	})
	t.Run("a flood of bad passwords makes no read until the retry gap passes", func(t *testing.T) {
		before := readFailures()
		for range 20 {
			if got := status("wrong"); got != "401" {
				t.Fatalf("a wrong password: %s", got)
			}
		}
		if n := readFailures() - before; n != 0 {
			t.Errorf("20 bad passwords made %d reads, want none within %v", n, app.DefaultCredentialsRetryGap)
		}
		clock.Add(app.DefaultCredentialsRetryGap)
		status("wrong")
		if n := readFailures() - before; n != 1 {
			t.Errorf("a bad password after the retry gap made %d reads, want 1", n)
		}
	})
}
