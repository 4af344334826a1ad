package cloudformation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	cfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/deploy"
)

// Place is where a stack lives, as its record keeps it: the Region, and
// the role the broker assumed in the stack's account (none: the broker's
// own). Every later call about the stack goes there, whatever the
// catalog's placement says by then.
type Place struct {
	Region  string `json:"region,omitempty"`
	RoleARN string `json:"role_arn,omitempty"`
	// Account is the role's, for the operator's eyes (ops instances).
	Account string `json:"account,omitempty"`
}

// placeOf is where a target puts a stack; home is the broker's Region.
func placeOf(t Target, home string) *Place {
	return &Place{Region: firstOf(t.Region, home), RoleARN: t.RoleARN, Account: t.Account()}
}

// Role is what the broker knows of a role it assumes, from the catalog.
type Role struct {
	ExternalID       ExternalID
	ExternalIDEnv    string
	ExternalIDSecret string
	ServiceRoleARN   string
	BoundaryARN      string
	// Pooled: an account of a pool, whose stacks the api function counts
	// at a provision request (CheckRoom).
	Pooled bool
}

// Roles are the roles every plan's placement names, by ARN: an instance's
// later operations find their role's external id, service role and
// boundary here, by the role its record names.
type Roles map[string]Role

// RolesOf gathers the roles of every plan's settings; a role named with
// different settings by two plans is an error.
func RolesOf(settings []*Settings) (Roles, error) {
	roles := Roles{}
	for _, s := range settings {
		for _, t := range s.Placement.Targets() {
			if t.RoleARN == "" {
				continue
			}
			r := Role{ExternalID: t.ExternalID, ExternalIDEnv: t.ExternalIDEnv, ExternalIDSecret: t.ExternalIDSecret,
				ServiceRoleARN: t.ServiceRoleARN, BoundaryARN: t.BoundaryARN}
			prev, ok := roles[t.RoleARN]
			if ok && (prev.ExternalID != r.ExternalID || prev.ExternalIDEnv != r.ExternalIDEnv || prev.ExternalIDSecret != r.ExternalIDSecret ||
				prev.ServiceRoleARN != r.ServiceRoleARN || prev.BoundaryARN != r.BoundaryARN) {
				return nil, fmt.Errorf("the catalog names the role %s in two plans with different external ids, service roles or boundaries; give it the same ones everywhere", t.RoleARN)
			}
			r.Pooled = prev.Pooled || t.pooled
			roles[t.RoleARN] = r
		}
	}
	if withoutRoles && len(roles) > 0 {
		return nil, errors.New("the catalog places stacks through roles, and this bootstrap was built without the clients that assume them (build tag osb_without_roles): build the bundles from the catalog with make build")
	}
	return roles, nil
}

// Clients gives the driver a CloudFormation client per place: per Region
// with the broker's own credentials, and per role, external id and Region
// with the credentials of the role, which STS gives (AssumeRole with the
// external id) and a cache per role and external id keeps for their
// lifetime, refreshing them before they expire.
type Clients struct {
	// Base is the broker's own configuration: its Region, credentials,
	// endpoints and instrumentation, which every client starts from.
	Base aws.Config
	// Roles gives a role's credentials: STS's AssumeRole with the external
	// id (AssumeWith(sts.NewFromConfig(Base)), roles_sts.go) unless a test
	// says; nil in a build without roles (roles_without.go).
	Roles RoleCredentials
	// NewAPI makes a client from a configuration; cfn.NewFromConfig
	// unless a test says.
	NewAPI func(aws.Config) API
	// NewS3 makes the S3 client of a target account's templates' bucket;
	// NewS3 (the package's) unless a test says.
	NewS3 func(aws.Config) S3API
	// Secrets reads the external ids kept in Secrets Manager, with the
	// broker's own credentials; secretsmanager.NewFromConfig(Base) unless
	// a test says.
	Secrets SecretsAPI

	mu      sync.Mutex
	creds   map[credentialsKey]*aws.CredentialsCache
	apis    map[clientKey]API
	s3s     map[clientKey]S3API
	secrets map[string]secretValue
}

// RoleCredentials gives the credentials of a role assumed with an external
// id; configFor keeps them in a cache per role and external id. In the
// driver's own terms, so that a build without roles links nothing of STS
// (roles_without.go).
type RoleCredentials interface {
	Credentials(role string, externalID ExternalID) aws.CredentialsProvider
}

// SecretsAPI is the part of Secrets Manager the driver calls to read an
// external id.
type SecretsAPI interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

var _ SecretsAPI = (*secretsmanager.Client)(nil)

// secretValue is an external id read from Secrets Manager, and when it is
// to be read again.
type secretValue struct {
	id      ExternalID
	expires time.Time
}

type credentialsKey struct{ role, externalID string }

type clientKey struct {
	credentialsKey
	region string
}

// NewClients returns the clients of places reached from base.
func NewClients(base aws.Config) *Clients {
	roles, secrets := newRoleClients(base)
	return &Clients{Base: base, Roles: roles, NewAPI: func(c aws.Config) API { return cfn.NewFromConfig(c) }, Secrets: secrets}
}

// credentialsWindow is how long before they expire the role's credentials
// are refreshed: a stack call that starts with them must not see them run
// out (AssumeRole's credentials last an hour here).
const credentialsWindow = 5 * time.Minute

// roleSessionName names the broker's sessions in the target accounts'
// CloudTrail.
const roleSessionName = "serverless-osb"

// assumedDuration is how long the role's credentials last.
const assumedDuration = time.Hour

// For returns the client of a Region (empty: the broker's) reached
// through role with externalID (no role: the broker's own credentials).
// It has the role's credentials first, so that a refused AssumeRole fails
// here, as a *broker.Failure that names the role and the likely causes.
func (c *Clients) For(ctx context.Context, region, role string, externalID ExternalID) (API, error) {
	c.mu.Lock()
	key, cfg, creds := c.configFor(region, role, externalID)
	api, ok := c.apis[key]
	if !ok {
		api = c.NewAPI(cfg)
		c.apis[key] = api
	}
	c.mu.Unlock()
	if creds != nil {
		// Cached: a call to STS only when the credentials are missing or
		// about to expire.
		if _, err := creds.Retrieve(ctx); err != nil {
			return nil, assumeRoleError(role, err)
		}
	}
	return api, nil
}

// S3For is the S3 client of a Region reached through role with
// externalID, with the credentials For keeps: what puts a template over
// MaxTemplateBody in the target account's bucket.
func (c *Clients) S3For(region, role string, externalID ExternalID) S3API {
	c.mu.Lock()
	defer c.mu.Unlock()
	key, cfg, _ := c.configFor(region, role, externalID)
	if c.s3s == nil {
		c.s3s = map[clientKey]S3API{}
	}
	client, ok := c.s3s[key]
	if !ok {
		newS3 := c.NewS3
		if newS3 == nil {
			newS3 = NewS3
		}
		client = newS3(cfg)
		c.s3s[key] = client
	}
	return client
}

// configFor is the configuration of a place, and the role's credentials
// (nil: the broker's own), made once per role and external id; c.mu is
// held.
func (c *Clients) configFor(region, role string, externalID ExternalID) (clientKey, aws.Config, *aws.CredentialsCache) {
	key := clientKey{credentialsKey{role, string(externalID)}, firstOf(region, c.Base.Region)}
	if c.apis == nil {
		c.apis, c.creds = map[clientKey]API{}, map[credentialsKey]*aws.CredentialsCache{}
	}
	cfg := c.Base.Copy()
	cfg.Region = key.region
	if role == "" {
		return key, cfg, nil
	}
	creds := c.creds[key.credentialsKey]
	if creds == nil {
		creds = aws.NewCredentialsCache(c.Roles.Credentials(role, externalID),
			func(o *aws.CredentialsCacheOptions) { o.ExpiryWindow = credentialsWindow })
		c.creds[key.credentialsKey] = creds
	}
	cfg.Credentials = creds
	return key, cfg, creds
}

// assumeRoleError is a failed AssumeRole as the Driver port wants it: a
// refusal is a *broker.Failure naming the role and what usually causes it
// (never the external id); anything else an outage of STS.
func assumeRoleError(role string, err error) error {
	code, _, ok := apiError(err)
	if ok && (code == "AccessDenied" || code == "AccessDeniedException" || code == "InvalidClientTokenId" ||
		code == "RegionDisabledException" || code == "ExpiredTokenException" || code == "MalformedPolicyDocument") {
		return &broker.Failure{Description: fmt.Sprintf(
			"The broker could not assume the role %s in account %s (STS answered %s): the role's trust policy must trust the broker's worker and api roles and require the external id the catalog gives for it, and the broker's own roles must be allowed to assume it (the broker's stack grants the roles its catalog names). Ask the platform operator to check the role and the plan's placement.",
			role, roleAccount(role), code)}
	}
	// Throttling, 5xx, no answer: STS's outage, which the operation waits
	// out (unreachable names STS, the innermost service).
	return unreachable("assume the role "+role, err)
}

// ExternalIDOf reads the external id a secret holds (its SecretString,
// without surrounding white space), with the broker's own credentials,
// and keeps it as long as the role's credentials last: a rotated id is
// seen within the hour, and every other use costs no call. Its errors
// name the secret and never its value.
func (c *Clients) ExternalIDOf(ctx context.Context, role, secret string) (ExternalID, error) {
	now := time.Now()
	c.mu.Lock()
	v, ok := c.secrets[secret]
	c.mu.Unlock()
	if ok && now.Before(v.expires) {
		return v.id, nil
	}
	if c.Secrets == nil {
		return "", &broker.Failure{Description: fmt.Sprintf("The external id of the role %s is to be in the secret %s, and this broker is not set up to read secrets.", role, secret)}
	}
	out, err := c.Secrets.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(secret)})
	if err != nil {
		code, _, ok := apiError(err)
		if ok && (code == "ResourceNotFoundException" || code == "AccessDeniedException" || code == "AccessDenied" ||
			code == "DecryptionFailure" || code == "InvalidRequestException") {
			return "", &broker.Failure{Description: fmt.Sprintf(
				"The broker could not read the external id of the role %s from the secret %s (Secrets Manager answered %s): the secret must exist in the Region and account the catalog names (its ARN, or its name in the broker's own), hold the external id as its text, and be readable by the broker's roles (the broker's stack grants the secrets its catalog names; a secret under a customer managed key needs kms:Decrypt too). Ask the platform operator to check the secret and the plan's placement.",
				role, secret, code)}
		}
		return "", unreachable("read the secret "+secret, err)
	}
	id := ExternalID(strings.TrimSpace(aws.ToString(out.SecretString)))
	if len(id) < 2 || len(id) > 1224 || !externalIDPattern().MatchString(string(id)) {
		// Never quote it, as anywhere else.
		return "", &broker.Failure{Description: fmt.Sprintf(
			"The secret %s, which holds the external id of the role %s, does not hold one STS accepts: its text must be 2 to 1224 letters, digits or the characters _+=,.@:/-. Ask the platform operator to put the external id in it.",
			secret, role)}
	}
	c.mu.Lock()
	if c.secrets == nil {
		c.secrets = map[string]secretValue{}
	}
	c.secrets[secret] = secretValue{id: id, expires: now.Add(assumedDuration)}
	c.mu.Unlock()
	return id, nil
}

// homeRegion is the broker's own Region, where a stack without a place
// lives ("" when the driver reaches no other: tests).
func (d *Driver) homeRegion() string {
	if d.Clients == nil {
		return ""
	}
	return d.Clients.Base.Region
}

// placeFor says where a new stack goes: an instance's where its plan's
// placement puts the provision's request (the broker checked it at the
// request; a catalog changed since may refuse it now), a binding's where
// its instance's stack is.
func (d *Driver) placeFor(ctx context.Context, c broker.Change, s *Settings, binding bool) (*Place, error) {
	if binding {
		inst, _, err := d.get(c, instanceRecord)
		return inst.Place, err
	}
	t, err := s.Placement.Resolve(c.Instance.InstanceRequest)
	if err != nil {
		return nil, err
	}
	if t, err = d.choose(ctx, t); err != nil {
		var full *poolFull
		if errors.As(err, &full) {
			return nil, &broker.Failure{Description: full.description}
		}
		return nil, err
	}
	return placeOf(t, d.homeRegion()), nil
}

// at is the driver as it acts in place p: its CloudFormation client
// there, the service role and boundary of p's account, and the bucket its
// templates go through. No place, or the broker's own account and Region,
// is d itself.
func (d *Driver) at(ctx context.Context, p *Place) (*Driver, error) {
	placed, externalID, err := d.reach(ctx, p)
	if err != nil || placed == d || p.RoleARN == "" {
		return placed, err
	}
	// CloudFormation reads a TemplateURL with the caller's credentials,
	// here the assumed role's, which reach no bucket of the broker's
	// account: a template over the TemplateBody limit goes to the bucket
	// the target stack makes in the stack's own account and Region, under
	// a name the driver knows.
	region := firstOf(p.Region, d.homeRegion())
	placed.Templates = &Templates{S3: d.Clients.S3For(region, p.RoleARN, externalID), Region: region,
		Bucket: deploy.TargetTemplateBucket(d.Deployment.StackPrefix, p.Account, region), ExpectedOwner: p.Account}
	return placed, nil
}

// reach is at without the templates' bucket: what counting a pool's
// stacks needs (the api function's CheckRoom, which then links no S3
// client), with the external id it reached p's role with.
func (d *Driver) reach(ctx context.Context, p *Place) (*Driver, ExternalID, error) {
	if p == nil || (p.RoleARN == "" && (p.Region == "" || p.Region == d.homeRegion())) {
		return d, "", nil
	}
	if d.Clients == nil {
		return nil, "", &broker.Failure{Description: fmt.Sprintf(
			"The stack is in Region %s of account %s, which this broker is not set up to reach.", p.Region, firstOf(p.Account, "(the broker's)"))}
	}
	var role Role
	var externalID ExternalID
	if p.RoleARN != "" {
		var ok bool
		if role, ok = d.Roles[p.RoleARN]; !ok {
			return nil, "", &broker.Failure{Description: fmt.Sprintf(
				"The stack is in account %s, reached through the role %s, which the catalog no longer names: the broker needs the role's external id, and may assume only the roles its catalog names. Ask the platform operator to keep a placement with that role in the catalog while instances live there.",
				p.Account, p.RoleARN)}
		}
		externalID = role.ExternalID
		if role.ExternalIDEnv != "" {
			getenv := d.Getenv
			if getenv == nil {
				getenv = os.Getenv
			}
			if externalID = ExternalID(getenv(role.ExternalIDEnv)); externalID == "" {
				return nil, "", &broker.Failure{Description: fmt.Sprintf(
					"The external id of the role %s is to be in the variable %s, which is not set where the broker runs. Ask the platform operator to set it.",
					p.RoleARN, role.ExternalIDEnv)}
			}
		}
		if role.ExternalIDSecret != "" {
			var err error
			if externalID, err = d.Clients.ExternalIDOf(ctx, p.RoleARN, role.ExternalIDSecret); err != nil {
				return nil, "", err
			}
		}
	}
	api, err := d.Clients.For(ctx, p.Region, p.RoleARN, externalID)
	if err != nil {
		return nil, "", err
	}
	placed := *d
	placed.API = api
	placed.Logger = d.Logger.With("region", p.Region, "account", p.Account)
	if p.RoleARN != "" {
		placed.Deployment.RoleARN, placed.Deployment.BoundaryARN = role.ServiceRoleARN, role.BoundaryARN
	}
	// In the broker's own account, another Region's stack reads the
	// broker's bucket with the broker's credentials (templates.go).
	return &placed, externalID, nil
}

var _ broker.Placed = (*Driver)(nil)

// Place says where an instance's stack is (its record's place; the
// broker's own account and Region for a record made before placement),
// and where its plan's placement, as the catalog has it now, would put it.
func (d *Driver) Place(inst broker.Instance, records []broker.Resource, settings any) (broker.Place, bool) {
	var rec record
	if found, err := (broker.Change{Records: records}).DecodeRecord(instanceRecord, &rec); err != nil || !found {
		return broker.Place{}, false
	}
	at := rec.Place
	if at == nil {
		at = &Place{Region: d.homeRegion()}
	}
	out := broker.Place{Account: at.Account, Region: firstOf(at.Region, d.homeRegion())}
	s, ok := settings.(*Settings)
	if !ok || s == nil {
		return out, true
	}
	t, err := s.Placement.Resolve(inst.InstanceRequest)
	if err != nil {
		out.Moved = true
		return out, true
	}
	now := placeOf(t, d.homeRegion())
	inPool := slices.ContainsFunc(t.Pool, func(m Target) bool { return m.RoleARN == at.RoleARN })
	if (len(t.Pool) == 0 && now.RoleARN != at.RoleARN) || (len(t.Pool) > 0 && !inPool) || firstOf(now.Region, d.homeRegion()) != out.Region {
		out.Moved, out.Now = true, &broker.Place{Account: now.Account, Region: now.Region}
		if len(t.Pool) > 0 {
			// A pool: any of its accounts.
			var accounts []string
			for _, m := range t.Pool {
				accounts = append(accounts, m.Account())
			}
			out.Now.Account = strings.Join(accounts, ",")
		}
	}
	return out, true
}
