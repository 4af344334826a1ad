package cacheusers_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/cacheusers"
	"github.com/serverless-osb/broker/internal/dbtest"
)

// user makes a user with the access string AccessString gives, as
// ElastiCache applies one (the whole string replaces the user's rules), and
// logs in as it.
func user(t *testing.T, s dbtest.Server, admin *dbtest.RedisConn, p cacheusers.Privileges, name string) *dbtest.RedisConn {
	t.Helper()
	access, err := cacheusers.AccessString(p, name, "app")
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"ACL", "SETUSER", name, "reset"}, strings.Fields(access)...)
	if _, err := admin.Do(append(args, ">password-of-"+name)...); err != nil {
		t.Fatalf("ACL SETUSER %s %s: %v", name, access, err)
	}
	c, err := dbtest.RedisConnect(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Do("AUTH", name, "password-of-"+name); err != nil {
		t.Fatalf("AUTH %s: %v", name, err)
	}
	return c
}

func may(t *testing.T, who string, c *dbtest.RedisConn, args ...string) {
	t.Helper()
	if _, err := c.Do(args...); err != nil {
		t.Errorf("%s may %v, but: %v", who, args, err)
	}
}

func mayNot(t *testing.T, who string, c *dbtest.RedisConn, args ...string) {
	t.Helper()
	_, err := c.Do(args...)
	if err == nil {
		t.Errorf("%s may not %v, but did", who, args)
	} else if !errors.Is(err, dbtest.ErrRedis) || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("%s %v: %v, want a NOPERM refusal", who, args, err)
	}
}

func TestACacheBindingsUserMayDoWhatItsAccessStringSaysAndNothingMore(t *testing.T) {
	s := dbtest.Redis(t)
	admin, err := dbtest.RedisConnect(s)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	may(t, "the default user", admin, "SET", "app:seed", "1")

	owner := user(t, s, admin, cacheusers.Owner, "osb-b1")
	other := user(t, s, admin, cacheusers.Owner, "osb-b2")
	rw := user(t, s, admin, cacheusers.ReadWrite, "osb-b3")
	ro := user(t, s, admin, cacheusers.ReadOnly, "osb-b4")

	may(t, "an owner", owner, "SET", "osb-b1:k", "v")
	may(t, "an owner", owner, "GET", "osb-b1:k")
	may(t, "an owner", owner, "PUBLISH", "osb-b1:news", "hi")
	mayNot(t, "an owner", owner, "GET", "app:seed")
	mayNot(t, "another owner", other, "GET", "osb-b1:k")
	mayNot(t, "another owner", other, "DEL", "osb-b1:k")
	mayNot(t, "another owner", other, "PUBLISH", "osb-b1:news", "hi")

	may(t, "readwrite", rw, "GET", "app:seed")
	may(t, "readwrite", rw, "SET", "app:k", "v")
	may(t, "readwrite", rw, "HSET", "app:h", "f", "v")
	may(t, "readwrite", rw, "DEL", "app:k")
	mayNot(t, "readwrite", rw, "GET", "osb-b1:k")
	mayNot(t, "readwrite", rw, "SET", "osb-b1:k", "x")

	may(t, "readonly", ro, "GET", "app:seed")
	may(t, "readonly", ro, "HGET", "app:h", "f")
	mayNot(t, "readonly", ro, "SET", "app:seed", "2")
	mayNot(t, "readonly", ro, "DEL", "app:seed")
	mayNot(t, "readonly", ro, "GET", "osb-b1:k")

	for who, c := range map[string]*dbtest.RedisConn{"an owner": owner, "readwrite": rw, "readonly": ro} {
		// These ignore key patterns, or walk every key, or run the server.
		for _, cmd := range [][]string{{"FLUSHALL"}, {"FLUSHDB"}, {"KEYS", "*"}, {"CONFIG", "GET", "*"}, {"ACL", "LIST"}, {"SHUTDOWN"}, {"DEBUG", "SLEEP", "0"}} {
			mayNot(t, who, c, cmd...)
		}
	}
	if got, err := admin.Do("GET", "app:seed"); err != nil || got != "1" {
		t.Errorf("app:seed is %q (%v) after the refusals, want 1", got, err)
	}
}

func TestAccessStringsRefuseWhatNoRuleMayCarry(t *testing.T) {
	for _, tc := range []struct {
		p         cacheusers.Privileges
		user, app string
	}{
		{cacheusers.Owner, "osb*", "app"},
		{cacheusers.Owner, "osb b", "app"},
		{cacheusers.ReadWrite, "osb", "app ~*"},
		{cacheusers.ReadOnly, "osb", ""},
		{"admin", "osb", "app"},
	} {
		if s, err := cacheusers.AccessString(tc.p, tc.user, tc.app); err == nil {
			t.Errorf("%s %q %q: %q, want an error", tc.p, tc.user, tc.app, s)
		}
	}
}
