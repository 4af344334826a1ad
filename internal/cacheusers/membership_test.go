package cacheusers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/elasticache"
	ectypes "github.com/aws/aws-sdk-go-v2/service/elasticache/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/serverless-osb/broker/internal/cacheusers"
)

// fakeUserGroups is a named fake of ElastiCache's user groups (moto has
// none), as the API documents them: ModifyUserGroup is refused with
// InvalidUserGroupStateFault unless the group is active, and a change
// leaves the group modifying, its users unchanged, until settle more
// DescribeUserGroups calls have seen it so (how long ElastiCache takes is
// not the point; that it takes a while is).
type fakeUserGroups struct {
	mu     sync.Mutex
	groups map[string]*fakeGroup
	users  map[string]bool
	settle int
	// refused counts the ModifyUserGroup calls refused for a busy group;
	// modified those made.
	refused, modified int
	// busyNext makes the next ModifyUserGroup find the group modifying, as
	// when another client's change comes between a Describe and it.
	busyNext int
	// onDescribe, when set, runs (without the lock) after each describe.
	onDescribe func(n int)
	describes  int
}

type fakeGroup struct {
	status        string
	users         []string
	add, remove   []string
	describesLeft int
}

func newFakeUserGroups(settle int, users ...string) *fakeUserGroups {
	f := &fakeUserGroups{groups: map[string]*fakeGroup{}, users: map[string]bool{}, settle: settle}
	for _, u := range users {
		f.users[u] = true
	}
	return f
}

func (f *fakeUserGroups) group(id, status string, users ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.groups[id] = &fakeGroup{status: status, users: users, describesLeft: f.settle}
}

func (f *fakeUserGroups) members(id string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(slices.Values(f.groups[id].users))
}

func (f *fakeUserGroups) DescribeUserGroups(_ context.Context, in *elasticache.DescribeUserGroupsInput, _ ...func(*elasticache.Options)) (*elasticache.DescribeUserGroupsOutput, error) {
	f.mu.Lock()
	f.describes++
	n := f.describes
	g, ok := f.groups[aws.ToString(in.UserGroupId)]
	var out *elasticache.DescribeUserGroupsOutput
	if ok {
		if g.status == "modifying" {
			if g.describesLeft--; g.describesLeft <= 0 {
				for _, u := range g.add {
					if !slices.Contains(g.users, u) {
						g.users = append(g.users, u)
					}
				}
				g.users = slices.DeleteFunc(g.users, func(u string) bool { return slices.Contains(g.remove, u) })
				g.add, g.remove, g.status = nil, nil, "active"
			}
		}
		out = &elasticache.DescribeUserGroupsOutput{UserGroups: []ectypes.UserGroup{{
			UserGroupId: in.UserGroupId, Status: aws.String(g.status), UserIds: slices.Clone(g.users), Engine: aws.String("valkey"),
			PendingChanges: &ectypes.UserGroupPendingChanges{UserIdsToAdd: slices.Clone(g.add), UserIdsToRemove: slices.Clone(g.remove)},
		}}}
	}
	hook := f.onDescribe
	f.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	if !ok {
		return nil, &ectypes.UserGroupNotFoundFault{Message: aws.String("User group not found")}
	}
	return out, nil
}

func (f *fakeUserGroups) ModifyUserGroup(_ context.Context, in *elasticache.ModifyUserGroupInput, _ ...func(*elasticache.Options)) (*elasticache.ModifyUserGroupOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.groups[aws.ToString(in.UserGroupId)]
	if !ok {
		return nil, &ectypes.UserGroupNotFoundFault{Message: aws.String("User group not found")}
	}
	if f.busyNext > 0 {
		f.busyNext--
		g.status, g.describesLeft = "modifying", f.settle
	}
	if g.status != "active" {
		f.refused++
		return nil, &ectypes.InvalidUserGroupStateFault{Message: aws.String("User group " + aws.ToString(in.UserGroupId) + " is not in active state.")}
	}
	for _, u := range slices.Concat(in.UserIdsToAdd, in.UserIdsToRemove) {
		if !f.users[u] {
			return nil, &ectypes.UserNotFoundFault{Message: aws.String("User " + u + " not found")}
		}
	}
	f.modified++
	g.status, g.describesLeft, g.add, g.remove = "modifying", f.settle, in.UserIdsToAdd, in.UserIdsToRemove
	return &elasticache.ModifyUserGroupOutput{UserGroupId: in.UserGroupId, Status: aws.String("modifying")}, nil
}

// fakeSecrets is a named fake of Secrets Manager's GetSecretValue.
type fakeSecrets map[string]string

func (f fakeSecrets) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	v, ok := f[aws.ToString(in.SecretId)]
	if !ok {
		return nil, errors.New("ResourceNotFoundException: no such secret")
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(v)}, nil
}

const group = "osb-cache-1a2b3c4d5e"

func secretOf(user string) string {
	return "arn:aws:secretsmanager:us-east-1:123456789012:secret:" + user
}

func passwordOf(user string) string {
	return "Pw0" + strings.ReplaceAll(user, "-", "") + "xxxxxxxxxxxxxxxx"
}

func membership(groups *fakeUserGroups, users ...string) (*cacheusers.Membership, *bytes.Buffer) {
	secrets := fakeSecrets{}
	for _, u := range users {
		secrets[secretOf(u)] = `{"engine":"valkey","password":"` + passwordOf(u) + `"}`
	}
	logs := &bytes.Buffer{}
	// Waits of a microsecond: the fake moves by calls, not by time.
	return &cacheusers.Membership{Groups: groups, Secrets: secrets, Log: slog.New(slog.NewJSONHandler(logs, nil)),
		Backoff: time.Microsecond, MaxBackoff: 10 * time.Microsecond}, logs
}

func event(kind cfn.RequestType, user, physicalID string) cfn.Event {
	return cfn.Event{RequestType: kind, RequestID: "req-" + user, LogicalResourceID: "Membership",
		StackID:            "arn:aws:cloudformation:us-east-1:123456789012:stack/osb-b/" + user,
		PhysicalResourceID: physicalID,
		ResourceProperties: map[string]any{"ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:osb-cacheuser",
			"UserGroupId": group, "UserId": user, "SecretArn": secretOf(user), "Host": "c.serverless.use1.cache.amazonaws.com", "Port": "6379"}}
}

func userID(i int) string { return fmt.Sprintf("%s-%012x", group, i) }

func TestConcurrentBindsEachJoinTheGroupAndUnbindsEachLeaveIt(t *testing.T) {
	const n = 8
	var users []string
	for i := range n {
		users = append(users, userID(i))
	}
	groups := newFakeUserGroups(3, append([]string{group + "-default"}, users...)...)
	groups.group(group, "active", group+"-default")
	m, logs := membership(groups, users...)

	run := func(kind cfn.RequestType, physical func(string) string) []string {
		ids := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i, u := range users {
			wg.Go(func() {
				var data map[string]any
				ids[i], data, errs[i] = m.Handle(context.Background(), event(kind, u, physical(u)))
				if kind == cfn.RequestCreate && errs[i] == nil {
					want := map[string]any{"Username": u, "Password": passwordOf(u),
						"Uri": "rediss://" + u + ":" + passwordOf(u) + "@c.serverless.use1.cache.amazonaws.com:6379"}
					for k, v := range want {
						if data[k] != v {
							t.Errorf("%s: attribute %s is %v, want %v", u, k, data[k], v)
						}
					}
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("%s %s: %v", kind, users[i], err)
			}
		}
		return ids
	}

	ids := run(cfn.RequestCreate, func(string) string { return "" })
	if got, want := groups.members(group), slices.Sorted(slices.Values(append([]string{group + "-default"}, users...))); !slices.Equal(got, want) {
		t.Fatalf("after %d binds at once the group holds %v, want %v", n, got, want)
	}
	for i, id := range ids {
		if id != group+"/"+users[i] {
			t.Errorf("physical id %q, want %q", id, group+"/"+users[i])
		}
	}
	// Eight binds at once on one group: at most one change at a time went
	// through, each bind made its own.
	if groups.modified != n {
		t.Errorf("%d changes made, want one per bind (%d)", groups.modified, n)
	}

	run(cfn.RequestDelete, func(u string) string { return group + "/" + u })
	if got := groups.members(group); !slices.Equal(got, []string{group + "-default"}) {
		t.Fatalf("after the unbinds the group holds %v, want the default user alone", got)
	}
	for _, u := range users {
		if strings.Contains(logs.String(), passwordOf(u)) {
			t.Fatalf("a log line holds %s's password:\n%s", u, logs.String())
		}
	}
}

func TestABindWaitsOutABusyGroup(t *testing.T) {
	user := userID(1)
	t.Run("a group modifying when the bind comes is waited for, then joined", func(t *testing.T) {
		groups := newFakeUserGroups(5, user)
		groups.group(group, "modifying")
		m, _ := membership(groups, user)
		if _, _, err := m.Handle(context.Background(), event(cfn.RequestCreate, user, "")); err != nil {
			t.Fatal(err)
		}
		if got := groups.members(group); !slices.Equal(got, []string{user}) {
			t.Errorf("the group holds %v, want %s", got, user)
		}
		if groups.refused != 0 {
			t.Errorf("%d changes were sent to a modifying group: the handler should look first", groups.refused)
		}
	})
	t.Run("a change refused because another came first is tried again", func(t *testing.T) {
		groups := newFakeUserGroups(2, user)
		groups.group(group, "active")
		groups.busyNext = 2
		m, _ := membership(groups, user)
		if _, _, err := m.Handle(context.Background(), event(cfn.RequestCreate, user, "")); err != nil {
			t.Fatal(err)
		}
		if groups.refused != 2 || groups.modified != 1 {
			t.Errorf("%d refused and %d made, want 2 refused then 1 made", groups.refused, groups.modified)
		}
		if got := groups.members(group); !slices.Equal(got, []string{user}) {
			t.Errorf("the group holds %v, want %s", got, user)
		}
	})
	t.Run("a group that stays modifying fails the bind with CloudFormation's answer in time, saying so", func(t *testing.T) {
		groups := newFakeUserGroups(1<<30, user)
		groups.group(group, "modifying")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		groups.onDescribe = func(n int) {
			if n == 20 {
				cancel() // the function's time runs out
			}
		}
		m, _ := membership(groups, user)
		id, _, err := m.Handle(ctx, event(cfn.RequestCreate, user, ""))
		if err == nil || !strings.Contains(err.Error(), "the group stayed modifying") || !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want one saying the group stayed modifying", err)
		}
		// So that the rollback's delete takes out what a change made
		// before the failure.
		if id != group+"/"+user {
			t.Errorf("the failed create's physical id is %q, want the membership's", id)
		}
	})
	t.Run("a create whose change went through before it failed is undone by the rollback's delete", func(t *testing.T) {
		groups := newFakeUserGroups(50, user)
		groups.group(group, "active")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		groups.onDescribe = func(n int) {
			if n == 5 {
				cancel() // the function's time runs out while the group adds the user
			}
		}
		m, _ := membership(groups, user)
		id, _, err := m.Handle(ctx, event(cfn.RequestCreate, user, ""))
		if err == nil || groups.modified != 1 {
			t.Fatalf("err %v after %d changes, want a failure after the one change", err, groups.modified)
		}
		groups.mu.Lock()
		groups.groups[group].describesLeft, groups.onDescribe = 1, nil // the change completes
		groups.mu.Unlock()
		if _, _, err := m.Handle(context.Background(), event(cfn.RequestDelete, user, id)); err != nil {
			t.Fatal(err)
		}
		if got := groups.members(group); len(got) != 0 {
			t.Errorf("after the rollback the group holds %v, want nobody", got)
		}
	})
}

func TestAnUnbindLeavesWhatIsAlreadyGone(t *testing.T) {
	user := userID(2)
	for _, tc := range []struct {
		name, physical string
		setup          func(*fakeUserGroups)
	}{
		{"the cache's group went first", group + "/" + user, func(*fakeUserGroups) {}},
		{"the user is no longer in the group", group + "/" + user, func(f *fakeUserGroups) { f.group(group, "active", "other") }},
		{"the group is being deleted", group + "/" + user, func(f *fakeUserGroups) { f.group(group, "deleting", user) }},
		{"a failed create named no membership", "req-1", func(f *fakeUserGroups) { f.group(group, "active", user) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			groups := newFakeUserGroups(1, user)
			tc.setup(groups)
			m, _ := membership(groups, user)
			if _, _, err := m.Handle(context.Background(), event(cfn.RequestDelete, user, tc.physical)); err != nil {
				t.Fatal(err)
			}
			if groups.modified != 0 {
				t.Errorf("%d changes made, want none", groups.modified)
			}
		})
	}
}

func TestABindFailsClearly(t *testing.T) {
	user := userID(3)
	for _, tc := range []struct {
		name  string
		props map[string]any
		setup func(*fakeUserGroups)
		want  string
	}{
		{"without its group", nil, func(*fakeUserGroups) {}, "user group " + group + " does not exist"},
		{"for a user that does not exist", nil, func(f *fakeUserGroups) { f.group(group, "active"); delete(f.users, user) }, "cache user " + user + " does not exist"},
		{"with a property missing", map[string]any{"SecretArn": ""}, func(f *fakeUserGroups) { f.group(group, "active") }, "SecretArn is missing"},
		{"with an id no access string may name", map[string]any{"UserId": "osb*"}, func(f *fakeUserGroups) { f.group(group, "active") }, "not an ElastiCache user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			groups := newFakeUserGroups(1, user)
			tc.setup(groups)
			m, _ := membership(groups, user)
			e := event(cfn.RequestCreate, user, "")
			for k, v := range tc.props {
				e.ResourceProperties[k] = v
			}
			if _, _, err := m.Handle(context.Background(), e); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// Respond is the function's handler: it answers CloudFormation's URL with
// the result, and a failure's reason, which names no password.
func TestRespondAnswersCloudFormation(t *testing.T) {
	user := userID(4)
	answers := make(chan map[string]any, 2)
	cfnURL := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if r.Method != http.MethodPut || json.NewDecoder(r.Body).Decode(&body) != nil {
			t.Errorf("%s with a body that is not JSON", r.Method)
		}
		answers <- body
	}))
	defer cfnURL.Close()

	groups := newFakeUserGroups(1, user)
	groups.group(group, "active")
	m, logs := membership(groups, user)
	e := event(cfn.RequestCreate, user, "")
	e.ResponseURL = cfnURL.URL
	if err := m.Respond(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	got := <-answers
	data, _ := got["Data"].(map[string]any)
	if got["Status"] != "SUCCESS" || got["PhysicalResourceId"] != group+"/"+user || data["Password"] != passwordOf(user) || data["Username"] != user {
		t.Errorf("answer %v", got)
	}

	e = event(cfn.RequestCreate, user, "")
	e.ResponseURL = cfnURL.URL
	e.ResourceProperties["UserGroupId"] = "osb-gone"
	if err := m.Respond(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	got = <-answers
	if got["Status"] != "FAILED" || !strings.Contains(fmt.Sprint(got["Reason"]), "user group osb-gone does not exist") || got["Data"] != nil {
		t.Errorf("answer %v, want FAILED saying the group does not exist", got)
	}
	if strings.Contains(logs.String(), passwordOf(user)) || !strings.Contains(logs.String(), `"msg":"cache user group request failed"`) {
		t.Errorf("logs:\n%s", logs)
	}
}
