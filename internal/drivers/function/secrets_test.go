package function_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/drivers/function"
	"github.com/serverless-osb/broker/internal/drivers/function/functiontest"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/store/bolt"
)

// countingSecrets counts the driver's reads of Secrets Manager.
type countingSecrets struct {
	api   function.SecretsAPI
	reads int
}

func (c *countingSecrets) GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	c.reads++
	return c.api.GetSecretValue(ctx, in, optFns...)
}

// The secrets of the test: long enough that a log line holding one is
// found.
const (
	firstSecret  = "first-shared-secret-7f3c9a1e"
	secondSecret = "second-shared-secret-0b5d2e84"
	thirdSecret  = "third-shared-secret-c61a4f09"
)

// TestSecretsFromSecretsManagerOnMoto: an HTTPS target whose secret is in
// Secrets Manager (moto's), read through the driver's AWS configuration,
// cached for SecretTTL on a clock the test turns.
func TestSecretsFromSecretsManagerOnMoto(t *testing.T) {
	cfg := mototest.Config(t, "eu-west-3")
	ctx := context.Background()
	sm := secretsmanager.NewFromConfig(cfg)
	created, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(mototest.Name("osb/fn-secret")),
		SecretString: aws.String(firstSecret)})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(created.ARN)

	store, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	logs := &bytes.Buffer{}
	d := function.New(store, func(context.Context) (aws.Config, error) { return cfg, nil }, nil,
		slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	// The driver's own client, as New builds it from the configuration,
	// with its reads counted.
	built, err := d.Secrets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	counted := &countingSecrets{api: built}
	d.Secrets = func(context.Context) (function.SecretsAPI, error) { return counted, nil }
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	d.SecretClock = func() time.Time { return now }

	target := functiontest.Start(t, firstSecret)
	s, err := function.Configure(nil, map[string]any{"url": target.URL, "secret_arn": arn, "timeout": 5}, "")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, d: d, store: store, target: target, s: s, logs: logs}
	update := 0
	change := func() (broker.Progress, error) {
		update++
		return f.run(f.change(broker.KindUpdate, "op-u"+string(rune('0'+update)), false, `{}`))
	}
	rotate := func(t *testing.T, value string) {
		t.Helper()
		if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String(arn), SecretString: aws.String(value)}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("a request is signed with the secret read from Secrets Manager", func(t *testing.T) {
		if p, err := f.run(f.change(broker.KindProvision, "op-1", false, `{}`)); err != nil || !p.Done {
			t.Fatalf("%+v %v", p, err)
		}
		if counted.reads != 1 || target.Refused() != 0 {
			t.Fatalf("%d reads, %d refused requests; want 1 and 0", counted.reads, target.Refused())
		}
	})
	t.Run("within the cache's time the secret is not read again", func(t *testing.T) {
		now = now.Add(function.DefaultSecretTTL - time.Second)
		if p, err := change(); err != nil || !p.Done {
			t.Fatalf("%+v %v", p, err)
		}
		if counted.reads != 1 {
			t.Fatalf("%d reads, want 1", counted.reads)
		}
	})
	t.Run("a secret rotated in Secrets Manager is picked up once the cache's time has passed", func(t *testing.T) {
		rotate(t, secondSecret)
		// Until then the target still takes the previous secret, as a
		// target must during a rotation.
		if p, err := change(); err != nil || !p.Done || counted.reads != 1 {
			t.Fatalf("%+v %v after %d reads, want done with the cached secret", p, err, counted.reads)
		}
		target.SetSecret(secondSecret)
		now = now.Add(time.Second)
		if p, err := change(); err != nil || !p.Done {
			t.Fatalf("%+v %v", p, err)
		}
		if counted.reads != 2 || target.Refused() != 0 {
			t.Fatalf("%d reads, %d refused requests; want 2 and 0", counted.reads, target.Refused())
		}
	})
	t.Run("a target that moved to a rotated secret first gets the request again, signed with it", func(t *testing.T) {
		rotate(t, thirdSecret)
		target.SetSecret(thirdSecret)
		if p, err := change(); err != nil || !p.Done {
			t.Fatalf("%+v %v", p, err)
		}
		if counted.reads != 3 || target.Refused() != 1 {
			t.Fatalf("%d reads, %d refused requests; want 3 and 1", counted.reads, target.Refused())
		}
	})
	t.Run("a refusal with a secret just read is not retried", func(t *testing.T) {
		target.SetSecret("not-the-broker-secret")
		now = now.Add(function.DefaultSecretTTL)
		_, err := change()
		var fail *broker.Failure
		if !errors.As(err, &fail) || !strings.Contains(fail.Description, "HTTP 401") {
			t.Fatalf("error %v, want a permanent failure naming HTTP 401", err)
		}
		if counted.reads != 4 || target.Refused() != 2 {
			t.Fatalf("%d reads, %d refused requests; want 4 and 2", counted.reads, target.Refused())
		}
		target.SetSecret(thirdSecret)
	})
	t.Run("a secret that does not exist fails the change without a request", func(t *testing.T) {
		missing, err := function.Configure(nil, map[string]any{"url": target.URL, "secret_arn": arn[:len(arn)-6] + "Zz9Zz9"}, "")
		if err != nil {
			t.Fatal(err)
		}
		c := f.change(broker.KindUpdate, "op-missing", false, `{}`)
		c.Settings = missing
		requests := len(target.Requests()) + target.Refused()
		_, err = f.d.Begin(ctx, f.fresh(c))
		var fail *broker.Failure
		if !errors.As(err, &fail) || len(target.Requests())+target.Refused() != requests {
			t.Fatalf("error %v, want a permanent failure and no request", err)
		}
	})
	t.Run("no log line holds a secret", func(t *testing.T) {
		for _, secret := range []string{firstSecret, secondSecret, thirdSecret} {
			if strings.Contains(logs.String(), secret) {
				t.Errorf("a log line holds %s:\n%s", secret, logs)
			}
		}
	})
}
