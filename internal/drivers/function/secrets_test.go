package function_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
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

// fakeSecrets is a Secrets Manager that holds the reads of the secrets in
// block until the test releases them (moto answers at once), and counts
// the reads of each secret.
type fakeSecrets struct {
	values  map[string]string
	mu      sync.Mutex
	block   map[string]chan struct{} // closed to release the reads of an ARN
	started chan string              // each read's ARN, as it starts
	reads   map[string]int
}

func newFakeSecrets(values map[string]string) *fakeSecrets {
	return &fakeSecrets{values: values, block: map[string]chan struct{}{}, started: make(chan string, 100), reads: map[string]int{}}
}

// hold makes the next reads of arn wait until the returned function runs.
func (f *fakeSecrets) hold(arn string) (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{})
	f.block[arn] = ch
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.block, arn)
		close(ch)
	}
}

// waitStarted waits until a read of arn has started.
func (f *fakeSecrets) waitStarted(arn string) {
	for a := range f.started {
		if a == arn {
			return
		}
	}
}

func (f *fakeSecrets) count(arn string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads[arn]
}

func (f *fakeSecrets) GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	arn := aws.ToString(in.SecretId)
	f.mu.Lock()
	f.reads[arn]++
	ch := f.block[arn]
	f.mu.Unlock()
	f.started <- arn
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &secretsmanager.GetSecretValueOutput{ARN: in.SecretId, SecretString: aws.String(f.values[arn])}, nil
}

// TestTheSecretCacheReadsOutsideItsLock: a read of Secrets Manager that
// hangs stalls only the requests that need that secret, and the requests
// that need a secret being read wait for that one read.
func TestTheSecretCacheReadsOutsideItsLock(t *testing.T) {
	const slowARN = "arn:aws:secretsmanager:eu-west-3:123456789012:secret:osb/slow-AbCdEf"
	const quickARN = "arn:aws:secretsmanager:eu-west-3:123456789012:secret:osb/quick-AbCdEf"
	fake := newFakeSecrets(map[string]string{slowARN: firstSecret, quickARN: secondSecret})
	f := newFixture(t)
	f.d.Secrets = func(context.Context) (function.SecretsAPI, error) { return fake, nil }
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var clock sync.Mutex
	f.d.SecretClock = func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
	slowTarget := functiontest.Start(t, firstSecret)
	quickTarget := functiontest.Start(t, secondSecret)
	settings := func(url, arn string) *function.Settings {
		s, err := function.Configure(nil, map[string]any{"url": url, "secret_arn": arn, "timeout": 50}, "")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	slow, quick := settings(slowTarget.URL, slowARN), settings(quickTarget.URL, quickARN)
	// provision provisions an instance of its own under the settings s.
	provision := func(instanceID string, s *function.Settings) error {
		c := f.change(broker.KindProvision, "op-"+instanceID, false, `{}`)
		c.Instance.ID, c.Operation.InstanceID, c.Settings = instanceID, instanceID, s
		p, err := f.d.Begin(context.Background(), f.fresh(c))
		if err == nil && !p.Done {
			err = errors.New("not done")
		}
		return err
	}

	t.Run("a request to a target with another secret goes on while one secret's read hangs", func(t *testing.T) {
		release := sync.OnceFunc(fake.hold(slowARN))
		defer release()
		slowDone := make(chan error, 1)
		go func() { slowDone <- provision("i-slow", slow) }()
		fake.waitStarted(slowARN)
		if err := provision("i-quick", quick); err != nil {
			t.Fatalf("the request to the other target: %v", err)
		}
		select {
		case err := <-slowDone:
			t.Fatalf("the slow secret's request ended (%v) before its read was released: the other request waited for it", err)
		default:
		}
		release()
		if err := <-slowDone; err != nil {
			t.Fatalf("the slow secret's request, once its read ended: %v", err)
		}
		if len(quickTarget.Requests()) != 1 || len(slowTarget.Requests()) != 1 {
			t.Errorf("the targets took %d and %d requests, want 1 each", len(quickTarget.Requests()), len(slowTarget.Requests()))
		}
	})
	t.Run("concurrent requests that need an expired secret read it once", func(t *testing.T) {
		clock.Lock()
		now = now.Add(function.DefaultSecretTTL)
		clock.Unlock()
		reads := fake.count(slowARN)
		release := sync.OnceFunc(fake.hold(slowARN))
		defer release()
		const n = 8
		errs := make(chan error, n)
		for i := range n {
			go func() { errs <- provision(fmt.Sprintf("i-%d", i), slow) }()
		}
		fake.waitStarted(slowARN)
		release()
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if got := fake.count(slowARN) - reads; got != 1 {
			t.Errorf("%d reads of the expired secret for %d concurrent requests, want 1", got, n)
		}
	})
}
