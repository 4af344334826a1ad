package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/serverless-osb/broker/internal/api"
)

// The api function re-reads the broker's credentials from Secrets Manager,
// so that a password removed from the secret (revoked, or rotated out) is
// refused by warm containers too, not only by new ones.
const (
	// DefaultCredentialsMaxAge is how long the credentials read are used
	// before the next request reads them again: the bound on how long a
	// revoked password keeps working (docs/operate.md).
	DefaultCredentialsMaxAge = 2 * time.Minute
	// DefaultCredentialsRetryGap is the least time between two reads that
	// a failure asks for (a refused password, which may be one just added
	// to the secret; a failed read): a flood of bad passwords makes at most
	// one Secrets Manager call per gap per container.
	DefaultCredentialsRetryGap = 30 * time.Second
	// credentialsReadTimeout bounds a re-read, which the requests arriving
	// meanwhile wait for: a Secrets Manager that hangs costs them this
	// long once, then the last pairs serve until the retry gap passes.
	credentialsReadTimeout = 3 * time.Second
)

// secretCredentials is the api's api.CredentialSource: the pairs of the
// broker's secret, read again once they are older than maxAge, or on a
// refused password at most once per retryGap. A read that fails keeps the
// last good pairs (and says so in the log): a Secrets Manager outage does
// not lock the platform out.
type secretCredentials struct {
	client           *secretsmanager.Client
	secretARN        string
	logger           *slog.Logger
	now              func() time.Time
	maxAge, retryGap time.Duration
	mu               sync.Mutex
	set              *api.CredentialSet
	readAt, triedAt  time.Time
}

var _ api.CredentialSource = (*secretCredentials)(nil)

// newSecretCredentials reads the secret once: a function that cannot read
// its credentials at start does not start.
func newSecretCredentials(ctx context.Context, c LambdaConfig, client *secretsmanager.Client, logger *slog.Logger) (*secretCredentials, error) {
	s := &secretCredentials{client: client, secretARN: c.SecretARN, logger: logger, now: c.Now,
		maxAge: c.CredentialsMaxAge, retryGap: DefaultCredentialsRetryGap}
	if s.now == nil {
		s.now = time.Now
	}
	if s.maxAge <= 0 {
		s.maxAge = DefaultCredentialsMaxAge
	}
	s.retryGap = min(s.retryGap, s.maxAge)
	pairs, err := readCredentials(ctx, client, c.SecretARN)
	if err != nil {
		return nil, err
	}
	s.set, s.readAt, s.triedAt = api.NewCredentialSet(pairs), s.now(), s.now()
	return s, nil
}

// Credentials returns the pairs, read again first when they are older than
// maxAge or when retry asks and the last read is older than retryGap. The
// read holds the lock: concurrent requests wait for one read rather than
// each making one.
func (s *secretCredentials) Credentials(ctx context.Context, retry bool) *api.CredentialSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	due := retry || !now.Before(s.readAt.Add(s.maxAge))
	if !due || now.Before(s.triedAt.Add(s.retryGap)) {
		return s.set
	}
	s.triedAt = now
	// The read serves every request, not only this one: this one's end
	// (the platform gave up) must not cut it short.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), credentialsReadTimeout)
	defer cancel()
	pairs, err := readCredentials(rctx, s.client, s.secretARN)
	if err != nil {
		s.logger.ErrorContext(ctx, "re-read the broker credentials: keeping the last read", "error", err,
			"last_read", s.readAt.UTC().Format(time.RFC3339))
		return s.set
	}
	s.set, s.readAt = api.NewCredentialSet(pairs), now
	return s.set
}

// ParseCredentials reads a JSON list of {"username","password"} pairs.
func ParseCredentials(data []byte) ([]api.Credential, error) {
	var pairs []struct {
		Username string `json:"username"`
		Password string `json:"password"`
	}
	if err := json.Unmarshal(data, &pairs); err != nil {
		return nil, fmt.Errorf("want a JSON list of {\"username\",\"password\"} objects: %w", err)
	}
	out := make([]api.Credential, 0, len(pairs))
	for i, p := range pairs {
		if p.Username == "" || p.Password == "" {
			return nil, fmt.Errorf("pair %d: username and password must be non-empty", i)
		}
		out = append(out, api.Credential(p))
	}
	if len(out) == 0 {
		return nil, errors.New("no credential pairs")
	}
	return out, nil
}
