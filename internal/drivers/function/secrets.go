package function

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"

	"github.com/serverless-osb/broker/internal/broker"
)

// SecretsAPI is the part of Secrets Manager the driver calls.
type SecretsAPI interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

var _ SecretsAPI = (*secretsmanager.Client)(nil)

// DefaultSecretTTL is how long a secret read from Secrets Manager is used
// before it is read again: a rotated secret takes effect within it, and a
// busy broker reads each secret about once per period, not per request.
const DefaultSecretTTL = 5 * time.Minute

// secretCache keeps the secrets read from Secrets Manager, by ARN. Its
// values never reach a log line or an error. The lock guards the maps only:
// a read of Secrets Manager happens outside it, so a slow read of one
// secret stalls no request to a target with another; and at most one read
// of a secret is in flight, which every caller that needs it then waits for.
type secretCache struct {
	mu      sync.Mutex
	entries map[string]cachedSecret
	reads   map[string]*secretRead // in flight, by ARN
}

type cachedSecret struct {
	value  []byte
	readAt time.Time
}

// secretRead is one read of a secret in flight; done is closed once value
// or err is set.
type secretRead struct {
	done  chan struct{}
	value []byte
	err   error
}

// secretReadTimeout bounds one read of Secrets Manager, which outlives the
// request that started it (others may be waiting for it).
const secretReadTimeout = 30 * time.Second

// secretFromARN returns the secret of arn: the cached value while it is
// younger than the driver's SecretTTL, else (or when fresh is set) the
// current value, read again, or the one a read in flight returns. cached
// reports whether the value came from the cache.
func (d *Driver) secretFromARN(ctx context.Context, arn string, fresh bool) (value []byte, cached bool, err error) {
	now := d.secretClock()
	ttl := d.SecretTTL
	if ttl <= 0 {
		ttl = DefaultSecretTTL
	}
	c := &d.secrets
	c.mu.Lock()
	if e, ok := c.entries[arn]; ok && !fresh && now.Sub(e.readAt) < ttl && now.Sub(e.readAt) >= 0 {
		c.mu.Unlock()
		return e.value, true, nil
	}
	r, inFlight := c.reads[arn]
	if !inFlight {
		r = &secretRead{done: make(chan struct{})}
		if c.reads == nil {
			c.reads = map[string]*secretRead{}
		}
		c.reads[arn] = r
		// The read goes on when the request that started it ends (others
		// may wait for it), within its own time limit; it keeps the
		// context's values (the log attributes, the trace).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), secretReadTimeout)
		go func() {
			defer cancel()
			value, err := d.readSecret(rctx, arn)
			c.mu.Lock()
			if err == nil {
				if c.entries == nil {
					c.entries = map[string]cachedSecret{}
				}
				c.entries[arn] = cachedSecret{value: value, readAt: now}
			}
			delete(c.reads, arn)
			c.mu.Unlock()
			r.value, r.err = value, err
			close(r.done)
		}()
	}
	c.mu.Unlock()
	select {
	case <-r.done:
		if r.err != nil {
			return nil, false, r.err
		}
		return r.value, false, nil
	case <-ctx.Done():
		return nil, false, fmt.Errorf("read the secret %s: %w", arn, ctx.Err())
	}
}

func (d *Driver) secretClock() time.Time {
	if d.SecretClock != nil {
		return d.SecretClock()
	}
	return time.Now()
}

// readSecret reads the current value of a secret. A secret that does not
// exist, that the broker may not read or decrypt, or that is empty is a
// permanent failure (only the operator can fix it); throttling and the
// service's own errors are transient.
func (d *Driver) readSecret(ctx context.Context, arn string) ([]byte, error) {
	if d.Secrets == nil {
		d.Logger.ErrorContext(ctx, "function target secret unreadable: the broker has no AWS configuration", "secret_arn", arn)
		return nil, &broker.Failure{Description: misconfigured, Detail: "The secret " + arn + " is unreadable: the broker has no AWS configuration."}
	}
	api, err := d.Secrets(ctx)
	if err != nil {
		return nil, err
	}
	out, err := api.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) {
			switch code := ae.ErrorCode(); code {
			case "ResourceNotFoundException", "AccessDeniedException", "AccessDenied", "DecryptionFailure",
				"InvalidRequestException", "InvalidParameterException":
				d.Logger.ErrorContext(ctx, "function target secret unreadable", "secret_arn", arn, "code", code)
				return nil, &broker.Failure{Description: misconfigured,
					Detail: fmt.Sprintf("The secret %s is unreadable (Secrets Manager answered %s): check that it exists and that the broker's roles may read and decrypt it.", arn, code)}
			}
		}
		return nil, fmt.Errorf("read the secret %s: %w", arn, err)
	}
	var value []byte
	if out.SecretString != nil {
		value = []byte(strings.TrimSpace(*out.SecretString))
	} else {
		value = out.SecretBinary
	}
	if len(value) == 0 {
		d.Logger.ErrorContext(ctx, "function target secret missing: the secret is empty", "secret_arn", arn)
		return nil, &broker.Failure{Description: misconfigured, Detail: "The secret " + arn + " is empty."}
	}
	return value, nil
}

// lazy returns load's value once it has loaded, loading it on first use
// and again after a failure.
func lazy[T any](load func(context.Context) (T, error)) func(context.Context) (T, error) {
	var mu sync.Mutex
	var value T
	loaded := false
	return func(ctx context.Context) (T, error) {
		mu.Lock()
		defer mu.Unlock()
		if loaded {
			return value, nil
		}
		v, err := load(ctx)
		if err != nil {
			var zero T
			return zero, err
		}
		value, loaded = v, true
		return value, nil
	}
}
