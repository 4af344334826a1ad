package cacheusers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/elasticache"
	ectypes "github.com/aws/aws-sdk-go-v2/service/elasticache/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/serverless-osb/broker/internal/cfnresource"
	"github.com/serverless-osb/broker/internal/deploy"
)

// MemberResourceType is the custom resource that puts a binding's user in
// its cache's user group (services/elasticache-valkey/binding.yaml).
// Membership is a property of the user group, which the instance's stack
// owns: were the binding stacks to set it, every bind would update the
// instance's stack; the function changes the group itself instead, one user
// at a time (ModifyUserGroup's UserIdsToAdd and UserIdsToRemove).
const MemberResourceType = deploy.CacheUserGroupMember

// The attributes the binding template reads with Fn::GetAtt.
const (
	AttributeUsername = "Username"
	AttributePassword = "Password"
	AttributeURI      = "Uri"
)

// User groups' states (DescribeUserGroups): ModifyUserGroup is refused
// unless the group is active.
const (
	groupActive   = "active"
	groupDeleting = "deleting"
)

// UserGroupsAPI is the part of ElastiCache the function calls.
type UserGroupsAPI interface {
	DescribeUserGroups(context.Context, *elasticache.DescribeUserGroupsInput, ...func(*elasticache.Options)) (*elasticache.DescribeUserGroupsOutput, error)
	ModifyUserGroup(context.Context, *elasticache.ModifyUserGroupInput, ...func(*elasticache.Options)) (*elasticache.ModifyUserGroupOutput, error)
}

// SecretsAPI is the part of Secrets Manager the function calls: it reads
// the binding's password from the binding's secret, since a dynamic
// reference to a secret may not reach a custom resource or an output.
type SecretsAPI interface {
	GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// MemberProperties are the custom resource's properties (CloudFormation
// passes every value as a string).
type MemberProperties struct {
	UserGroupID string
	UserID      string
	// SecretArn is the binding's secret, JSON with the password.
	SecretArn string
	Host      string
	Port      string
}

// ParseMemberProperties decodes and checks the properties.
func ParseMemberProperties(raw map[string]any) (MemberProperties, error) {
	str := func(k string) string { s, _ := raw[k].(string); return s }
	p := MemberProperties{UserGroupID: str("UserGroupId"), UserID: str("UserId"), SecretArn: str("SecretArn"),
		Host: str("Host"), Port: str("Port")}
	for _, k := range []struct{ name, value string }{{"UserGroupId", p.UserGroupID}, {"UserId", p.UserID},
		{"SecretArn", p.SecretArn}, {"Host", p.Host}, {"Port", p.Port}} {
		if k.value == "" {
			return p, fmt.Errorf("the property %s is missing", k.name)
		}
	}
	for _, id := range []string{p.UserGroupID, p.UserID} {
		if !idPattern.MatchString(id) {
			return p, fmt.Errorf("%q is not an ElastiCache user or user group id", id)
		}
	}
	return p, nil
}

// idPattern is ElastiCache's for user and user group ids, lower case as
// the templates make them.
var idPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,99}$`)

// memberID is the resource's physical id: the group's and the user's ids,
// neither of which holds a slash.
func memberID(group, user string) string { return group + "/" + user }

// Membership answers CloudFormation's requests for
// Custom::CacheUserGroupMember.
type Membership struct {
	Groups  UserGroupsAPI
	Secrets SecretsAPI
	Log     *slog.Logger
	// Backoff is the first wait between two looks at a busy group; each
	// next wait doubles, up to MaxBackoff, with jitter, so that binds that
	// wait on one group do not come back together. Zero: 1 s and 20 s.
	Backoff, MaxBackoff time.Duration
}

// Handle runs one request: it returns the physical id (group/user) and, on
// create and update, the user's credentials as the resource's attributes.
// It returns when the group is active with the user in it (or out of it,
// on delete), so that a binding's credentials work when the bind ends, and
// the user is out of every group when CloudFormation deletes it.
func (m *Membership) Handle(ctx context.Context, e cfn.Event) (string, map[string]any, error) {
	if e.RequestType == cfn.RequestDelete {
		group, user, ok := strings.Cut(e.PhysicalResourceID, "/")
		if !ok || !idPattern.MatchString(group) || !idPattern.MatchString(user) {
			// A create that failed before it named the membership made
			// nothing.
			return e.PhysicalResourceID, nil, nil
		}
		return e.PhysicalResourceID, nil, m.leave(ctx, group, user)
	}
	p, err := ParseMemberProperties(e.ResourceProperties)
	if err != nil {
		return e.PhysicalResourceID, nil, err
	}
	if e.RequestType != cfn.RequestCreate && e.RequestType != cfn.RequestUpdate {
		return e.PhysicalResourceID, nil, fmt.Errorf("request type %q: want Create, Update or Delete", e.RequestType)
	}
	// An update to another group or user is a new membership: CloudFormation
	// deletes the old one (its old physical id) after this succeeds. A
	// create that fails names the membership all the same, so that the
	// rollback's delete takes out a user whose change went through before
	// the failure (and finds nothing to do otherwise).
	id := memberID(p.UserGroupID, p.UserID)
	if err := m.join(ctx, p.UserGroupID, p.UserID); err != nil {
		if e.RequestType == cfn.RequestCreate {
			return id, nil, err
		}
		return e.PhysicalResourceID, nil, err
	}
	data, err := m.credentials(ctx, p)
	return id, data, err
}

// join adds user to group, waiting while the group is busy.
func (m *Membership) join(ctx context.Context, group, user string) error {
	return m.change(ctx, group, user, true)
}

// leave takes user out of group; a group or user already gone is left.
func (m *Membership) leave(ctx context.Context, group, user string) error {
	return m.change(ctx, group, user, false)
}

// change moves the group towards having (in) or not having the user, and
// waits for it to be active so. ModifyUserGroup is refused while the group
// is not active (another bind's change, a cache's creation): that is
// waited out, with backoff, until ctx ends.
func (m *Membership) change(ctx context.Context, group, user string, in bool) error {
	verb := map[bool]string{true: "add", false: "remove"}[in]
	status := ""
	for attempt := 0; ; attempt++ {
		g, err := m.describe(ctx, group)
		var gone *ectypes.UserGroupNotFoundFault
		switch {
		case errors.As(err, &gone) && !in:
			m.log().InfoContext(ctx, "cache user group gone, and its members with it", "user_group", group, "user", user)
			return nil
		case errors.As(err, &gone):
			return fmt.Errorf("the cache's user group %s does not exist", group)
		case err != nil:
			return fmt.Errorf("describe the user group %s: %w", group, err)
		}
		status = aws.ToString(g.Status)
		member := slices.Contains(g.UserIds, user)
		switch {
		case status == groupActive && member == in:
			m.log().InfoContext(ctx, "cache user group changed", "action", verb, "user_group", group, "user", user, "tries", attempt+1)
			return nil
		case status == groupDeleting:
			if !in {
				return nil
			}
			return fmt.Errorf("the cache's user group %s is being deleted", group)
		case status == groupActive:
			req := &elasticache.ModifyUserGroupInput{UserGroupId: aws.String(group)}
			if member {
				req.UserIdsToRemove = []string{user}
			} else {
				req.UserIdsToAdd = []string{user}
			}
			_, err := m.Groups.ModifyUserGroup(ctx, req)
			var busy *ectypes.InvalidUserGroupStateFault
			var noUser *ectypes.UserNotFoundFault
			switch {
			case err == nil, errors.As(err, &busy):
				// Made, or another change came first: look again.
			case errors.As(err, &noUser) && member:
				return nil // the user went already, and with it its place
			case errors.As(err, &noUser):
				return fmt.Errorf("the cache user %s does not exist", user)
			default:
				return fmt.Errorf("%s the user %s in the user group %s: %w", verb, user, group, err)
			}
		}
		if err := m.wait(ctx, attempt); err != nil {
			return fmt.Errorf("%s the user %s in the user group %s: the group stayed %s: %w", verb, user, group, status, err)
		}
	}
}

func (m *Membership) describe(ctx context.Context, group string) (ectypes.UserGroup, error) {
	out, err := m.Groups.DescribeUserGroups(ctx, &elasticache.DescribeUserGroupsInput{UserGroupId: aws.String(group)})
	if err != nil {
		return ectypes.UserGroup{}, err
	}
	for _, g := range out.UserGroups {
		if aws.ToString(g.UserGroupId) == group {
			return g, nil
		}
	}
	return ectypes.UserGroup{}, &ectypes.UserGroupNotFoundFault{Message: aws.String("no user group " + group)}
}

// wait sleeps the attempt's backoff, or until ctx ends.
func (m *Membership) wait(ctx context.Context, attempt int) error {
	base, most := m.Backoff, m.MaxBackoff
	if base <= 0 {
		base = time.Second
	}
	if most <= 0 {
		most = 20 * time.Second
	}
	d := base << min(attempt, 16)
	if d > most || d <= 0 {
		d = most
	}
	// Full jitter over the upper half.
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// credentials are the attributes: the user's name (its id, as the
// template names it), the password from the binding's secret, and a
// rediss:// URI.
func (m *Membership) credentials(ctx context.Context, p MemberProperties) (map[string]any, error) {
	out, err := m.Secrets.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(p.SecretArn)})
	if err != nil {
		return nil, fmt.Errorf("read the binding's secret: %w", err)
	}
	var s struct {
		Password string `json:"password"`
	}
	// The error names no part of the value.
	if json.Unmarshal([]byte(aws.ToString(out.SecretString)), &s) != nil || s.Password == "" {
		return nil, errors.New("the binding's secret is not a JSON object with a password")
	}
	uri := url.URL{Scheme: "rediss", User: url.UserPassword(p.UserID, s.Password), Host: net.JoinHostPort(p.Host, p.Port)}
	return map[string]any{AttributeUsername: p.UserID, AttributePassword: s.Password, AttributeURI: uri.String()}, nil
}

func (m *Membership) log() *slog.Logger {
	if m.Log != nil {
		return m.Log
	}
	return slog.Default()
}

// Respond runs Handle and sends its answer to CloudFormation's URL: the
// Lambda function's handler. The reason sent and logged is the error's,
// which names no password.
func (m *Membership) Respond(ctx context.Context, e cfn.Event) error {
	return cfnresource.Respond(ctx, e, m.log(), "cache user group", m.Handle)
}
