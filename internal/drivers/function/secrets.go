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
// values never reach a log line or an error.
type secretCache struct {
	mu      sync.Mutex
	entries map[string]cachedSecret
}

type cachedSecret struct {
	value  []byte
	readAt time.Time
}

// secretFromARN returns the secret of arn: the cached value while it is
// younger than the driver's SecretTTL, else (or when fresh is set) the
// current value, read again. cached reports whether the value came from
// the cache.
func (d *Driver) secretFromARN(ctx context.Context, arn string, fresh bool) (value []byte, cached bool, err error) {
	now := d.secretClock()
	ttl := d.SecretTTL
	if ttl <= 0 {
		ttl = DefaultSecretTTL
	}
	d.secrets.mu.Lock()
	defer d.secrets.mu.Unlock()
	if e, ok := d.secrets.entries[arn]; ok && !fresh && now.Sub(e.readAt) < ttl && now.Sub(e.readAt) >= 0 {
		return e.value, true, nil
	}
	value, err = d.readSecret(ctx, arn)
	if err != nil {
		return nil, false, err
	}
	if d.secrets.entries == nil {
		d.secrets.entries = map[string]cachedSecret{}
	}
	d.secrets.entries[arn] = cachedSecret{value: value, readAt: now}
	return value, false, nil
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
		return nil, &broker.Failure{Description: misconfigured}
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
				return nil, &broker.Failure{Description: misconfigured}
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
		return nil, &broker.Failure{Description: misconfigured}
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
