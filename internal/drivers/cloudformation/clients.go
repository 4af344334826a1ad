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
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	cfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/serverless-osb/broker/internal/broker"
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
	ExternalID     ExternalID
	ExternalIDEnv  string
	ServiceRoleARN string
	BoundaryARN    string
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
			r := Role{ExternalID: t.ExternalID, ExternalIDEnv: t.ExternalIDEnv, ServiceRoleARN: t.ServiceRoleARN, BoundaryARN: t.BoundaryARN}
			prev, ok := roles[t.RoleARN]
			if ok && (prev.ExternalID != r.ExternalID || prev.ExternalIDEnv != r.ExternalIDEnv ||
				prev.ServiceRoleARN != r.ServiceRoleARN || prev.BoundaryARN != r.BoundaryARN) {
				return nil, fmt.Errorf("the catalog names the role %s in two plans with different external ids, service roles or boundaries; give it the same ones everywhere", t.RoleARN)
			}
			r.Pooled = prev.Pooled || t.pooled
			roles[t.RoleARN] = r
		}
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
	// STS assumes the roles; sts.NewFromConfig(Base) unless a test says.
	STS stscreds.AssumeRoleAPIClient
	// NewAPI makes a client from a configuration; cfn.NewFromConfig
	// unless a test says.
	NewAPI func(aws.Config) API

	mu    sync.Mutex
	creds map[credentialsKey]*aws.CredentialsCache
	apis  map[clientKey]API
}

type credentialsKey struct{ role, externalID string }

type clientKey struct {
	credentialsKey
	region string
}

// NewClients returns the clients of places reached from base.
func NewClients(base aws.Config) *Clients {
	return &Clients{Base: base, STS: sts.NewFromConfig(base), NewAPI: func(c aws.Config) API { return cfn.NewFromConfig(c) }}
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
	key := clientKey{credentialsKey{role, string(externalID)}, firstOf(region, c.Base.Region)}
	c.mu.Lock()
	if c.apis == nil {
		c.apis, c.creds = map[clientKey]API{}, map[credentialsKey]*aws.CredentialsCache{}
	}
	api, ok := c.apis[key]
	creds := c.creds[key.credentialsKey]
	if !ok {
		cfg := c.Base.Copy()
		cfg.Region = key.region
		if role != "" {
			if creds == nil {
				id := string(externalID)
				creds = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(c.STS, role, func(o *stscreds.AssumeRoleOptions) {
					o.ExternalID, o.RoleSessionName, o.Duration = aws.String(id), roleSessionName, assumedDuration
				}), func(o *aws.CredentialsCacheOptions) { o.ExpiryWindow = credentialsWindow })
				c.creds[key.credentialsKey] = creds
			}
			cfg.Credentials = creds
		}
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
// there, and the service role and boundary of p's account. No place, or
// the broker's own account and Region, is d itself.
func (d *Driver) at(ctx context.Context, p *Place) (*Driver, error) {
	if p == nil || (p.RoleARN == "" && (p.Region == "" || p.Region == d.homeRegion())) {
		return d, nil
	}
	if d.Clients == nil {
		return nil, &broker.Failure{Description: fmt.Sprintf(
			"The stack is in Region %s of account %s, which this broker is not set up to reach.", p.Region, firstOf(p.Account, "(the broker's)"))}
	}
	var role Role
	var externalID ExternalID
	if p.RoleARN != "" {
		var ok bool
		if role, ok = d.Roles[p.RoleARN]; !ok {
			return nil, &broker.Failure{Description: fmt.Sprintf(
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
				return nil, &broker.Failure{Description: fmt.Sprintf(
					"The external id of the role %s is to be in the variable %s, which is not set where the broker runs. Ask the platform operator to set it.",
					p.RoleARN, role.ExternalIDEnv)}
			}
		}
	}
	api, err := d.Clients.For(ctx, p.Region, p.RoleARN, externalID)
	if err != nil {
		return nil, err
	}
	placed := *d
	placed.API = api
	placed.Logger = d.Logger.With("region", p.Region, "account", p.Account)
	// The templates' bucket is the broker's own, which CloudFormation in
	// another account or Region, under the role assumed there, does not
	// read: a template over the TemplateBody limit is not placed.
	placed.Templates, placed.placed = nil, true
	if p.RoleARN != "" {
		placed.Deployment.RoleARN, placed.Deployment.BoundaryARN = role.ServiceRoleARN, role.BoundaryARN
	}
	return &placed, nil
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
