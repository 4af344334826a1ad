package searchusers_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/serverless-osb/broker/internal/dbusers"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/searchusers"
)

// The master user's password, and binding passwords, as the templates'
// GenerateSecretString makes them (every character type).
const (
	masterUser     = "osb_master"
	masterPassword = "Master-Pa55word!"
)

// fixture is the handler against a named fake of the domain's security
// plugin (fakeSecurityPlugin) on 127.0.0.1, its secrets in moto's Secrets
// Manager.
type fixture struct {
	t       *testing.T
	ctx     context.Context
	plugin  *fakeSecurityPlugin
	sm      *secretsmanager.Client
	handler *searchusers.Handler
	props   map[string]any
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: context.Background(), plugin: newFakeSecurityPlugin(t, masterUser, masterPassword)}
	f.sm = secretsmanager.NewFromConfig(mototest.Config(t, "eu-west-1"))
	master, _ := json.Marshal(map[string]string{"username": masterUser, "password": masterPassword})
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(f.plugin.server.URL, "https://"))
	f.props = map[string]any{
		"ServiceToken":    "arn:aws:lambda:eu-west-1:123456789012:function:osb-dbuser-vpc-0123456789abcdef0",
		"Engine":          "opensearch",
		"Host":            host,
		"Port":            port,
		"MasterSecretArn": f.secret("osb-i1-search-master", string(master)),
		"Privileges":      "readwrite",
		"IndexPattern":    "app-*",
	}
	// The fake's certificate is the test server's: its client trusts it.
	f.handler = &searchusers.Handler{Secrets: f.sm, HTTP: f.plugin.server.Client()}
	return f
}

func (f *fixture) secret(name, value string) string {
	f.t.Helper()
	out, err := f.sm.CreateSecret(f.ctx, &secretsmanager.CreateSecretInput{Name: aws.String(mototest.Name(name)), SecretString: aws.String(value)})
	if err != nil {
		f.t.Fatal(err)
	}
	return aws.ToString(out.ARN)
}

// binding is one binding stack's request properties: its own secret, with
// a generated password, and privileges.
type binding struct {
	stackID  string
	props    map[string]any
	password string
}

func (f *fixture) binding(stack, privileges, password string) binding {
	f.t.Helper()
	props := map[string]any{}
	for k, v := range f.props {
		props[k] = v
	}
	value, _ := json.Marshal(map[string]string{"engine": "opensearch", "password": password})
	props["SecretArn"] = f.secret(stack+"-search-user", string(value))
	props["Privileges"] = privileges
	return binding{stackID: "arn:aws:cloudformation:eu-west-1:123456789012:stack/" + stack + "/" + f.t.Name(), props: props, password: password}
}

func (f *fixture) event(kind cfn.RequestType, b binding, physicalID string) cfn.Event {
	return cfn.Event{RequestType: kind, RequestID: mototest.Name("request"), ResourceType: dbusers.ResourceType,
		LogicalResourceID: "SearchUser", PhysicalResourceID: physicalID, StackID: b.stackID, ResourceProperties: b.props}
}

// create binds b and returns the user's name and attributes.
func (f *fixture) create(b binding) (string, map[string]any) {
	f.t.Helper()
	name, data, err := f.handler.Handle(f.ctx, f.event(cfn.RequestCreate, b, ""))
	if err != nil {
		f.t.Fatalf("create: %v", err)
	}
	return name, data
}

func (f *fixture) delete(b binding, name string) {
	f.t.Helper()
	if _, _, err := f.handler.Handle(f.ctx, f.event(cfn.RequestDelete, b, name)); err != nil {
		f.t.Fatalf("delete %s: %v", name, err)
	}
}

// as sends a data-plane request to the domain as user, and returns the
// status.
func (f *fixture) as(user, password, method, path string) int {
	f.t.Helper()
	req, _ := http.NewRequestWithContext(f.ctx, method, f.plugin.server.URL+path, strings.NewReader("{}"))
	req.SetBasicAuth(user, password)
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.plugin.server.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestABindMakesAUserWithItsOwnRole(t *testing.T) {
	f := newFixture(t)
	const password = "Bind1-Pa55word?"
	b := f.binding("osb-i1-b1", "readwrite", password)
	name, data := f.create(b)

	t.Run("the user is named after its stack, mapped to a role of its own that reaches the plan's pattern", func(t *testing.T) {
		if name != dbusers.UserName(b.stackID, "SearchUser") {
			t.Errorf("name %q", name)
		}
		got := f.plugin.snapshot(name)
		for _, want := range []string{`"password":"` + password + `"`,
			`role {"cluster_permissions":["cluster_composite_ops"],"index_permissions":[{"index_patterns":["app-*"],"allowed_actions":["crud","create_index"]}]`,
			`mapping {"users":["` + name + `"]}`} {
			if !strings.Contains(got, want) {
				t.Errorf("the plugin holds %s\nwant it to hold %s", got, want)
			}
		}
	})
	t.Run("its attributes are the credentials, the URI with the password escaped", func(t *testing.T) {
		u, err := url.Parse(data[dbusers.AttributeURI].(string))
		if err != nil {
			t.Fatal(err)
		}
		if p, _ := u.User.Password(); u.Scheme != "https" || u.User.Username() != name || p != password || u.Host != f.props["Host"].(string)+":"+f.props["Port"].(string) {
			t.Errorf("uri %s", u.Redacted())
		}
		if data[dbusers.AttributeUsername] != name || data[dbusers.AttributePassword] != password || data[searchusers.AttributeIndexPattern] != "app-*" {
			t.Errorf("attributes %v", data)
		}
	})
	t.Run("the binding's secret now names the user and the endpoint", func(t *testing.T) {
		out, err := f.sm.GetSecretValue(f.ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(b.props["SecretArn"].(string))})
		if err != nil {
			t.Fatal(err)
		}
		var s map[string]any
		_ = json.Unmarshal([]byte(aws.ToString(out.SecretString)), &s)
		if s["username"] != name || s["password"] != password || s["host"] != f.props["Host"] || s["engine"] != "opensearch" {
			t.Errorf("secret %v", s)
		}
	})
	t.Run("readwrite writes and reads the application's indices, creating them, and deletes none", func(t *testing.T) {
		for _, c := range []struct {
			method, path string
			want         int
		}{
			{http.MethodPut, "/app-orders/_doc/1", http.StatusOK},
			{http.MethodGet, "/app-orders/_search", http.StatusOK},
			{http.MethodDelete, "/app-orders", http.StatusForbidden},
			{http.MethodPut, "/billing/_doc/1", http.StatusForbidden},
		} {
			if got := f.as(name, password, c.method, c.path); got != c.want {
				t.Errorf("%s %s: %d, want %d", c.method, c.path, got, c.want)
			}
		}
		if got := f.as(name, "Wrong-Pa55word!", http.MethodGet, "/app-orders/_search"); got != http.StatusUnauthorized {
			t.Errorf("a wrong password: %d, want 401", got)
		}
	})
}

func TestEachPrivilegeAllowsWhatItSays(t *testing.T) {
	f := newFixture(t)
	// The master writes an application's index.
	if got := f.as(masterUser, masterPassword, http.MethodPut, "/app-logs/_doc/1"); got != http.StatusOK {
		t.Fatalf("the master's write: %d", got)
	}
	t.Run("readonly reads, and writes nothing", func(t *testing.T) {
		const password = "Read1-Pa55word?"
		name, data := f.create(f.binding("osb-i1-ro", "readonly", password))
		if data[searchusers.AttributeIndexPattern] != "app-*" {
			t.Errorf("index pattern %v", data[searchusers.AttributeIndexPattern])
		}
		if got := f.as(name, password, http.MethodGet, "/app-logs/_search"); got != http.StatusOK {
			t.Errorf("search: %d, want 200", got)
		}
		for _, path := range []string{"/app-logs/_doc/2", "/new-index/_doc/1", "/new-index"} {
			if got := f.as(name, password, http.MethodPut, path); got != http.StatusForbidden {
				t.Errorf("PUT %s: %d, want 403", path, got)
			}
		}
	})
	t.Run("owner does anything to the indices named after it, and nothing to others", func(t *testing.T) {
		const password = "Own1-Pa55word?"
		name, data := f.create(f.binding("osb-i1-own", "owner", password))
		own := "/" + name + "-events"
		if data[searchusers.AttributeIndexPattern] != name+"-*" {
			t.Errorf("index pattern %v, want %s-*", data[searchusers.AttributeIndexPattern], name)
		}
		for _, c := range []struct {
			method, path string
			want         int
		}{
			{http.MethodPut, own, http.StatusOK},
			{http.MethodPut, own + "/_doc/1", http.StatusOK},
			{http.MethodGet, own + "/_search", http.StatusOK},
			{http.MethodDelete, own, http.StatusOK},
			{http.MethodGet, "/app-logs/_search", http.StatusForbidden},
			{http.MethodPut, "/app-logs/_doc/3", http.StatusForbidden},
			{http.MethodDelete, "/app-logs", http.StatusForbidden},
		} {
			if got := f.as(name, password, c.method, c.path); got != c.want {
				t.Errorf("%s %s: %d, want %d", c.method, c.path, got, c.want)
			}
		}
	})
	t.Run("a plan's pattern bounds readwrite", func(t *testing.T) {
		const password = "Pat1-Pa55word?"
		b := f.binding("osb-i1-pat", "readwrite", password)
		b.props["IndexPattern"] = "billing-*"
		name, _ := f.create(b)
		if got := f.as(name, password, http.MethodPut, "/billing-2026/_doc/4"); got != http.StatusOK {
			t.Errorf("a write in the pattern: %d, want 200", got)
		}
		if got := f.as(name, password, http.MethodPut, "/app-logs/_doc/5"); got != http.StatusForbidden {
			t.Errorf("a write outside the pattern: %d, want 403", got)
		}
	})
	t.Run("neither readwrite nor readonly reaches an owner binding's indices", func(t *testing.T) {
		const ownerPassword, rwPassword, roPassword = "Own2-Pa55word?", "Rw2-Pa55word?", "Ro2-Pa55word?"
		owner, _ := f.create(f.binding("osb-i1-own2", "owner", ownerPassword))
		if got := f.as(owner, ownerPassword, http.MethodPut, "/"+owner+"-private/_doc/1"); got != http.StatusOK {
			t.Fatalf("the owner's write: %d", got)
		}
		rw, _ := f.create(f.binding("osb-i1-rw2", "readwrite", rwPassword))
		ro, _ := f.create(f.binding("osb-i1-ro2", "readonly", roPassword))
		for _, u := range []struct{ name, password string }{{rw, rwPassword}, {ro, roPassword}} {
			if got := f.as(u.name, u.password, http.MethodGet, "/"+owner+"-private/_search"); got != http.StatusForbidden {
				t.Errorf("%s read the owner's index: %d, want 403", u.name, got)
			}
		}
	})
}

func TestBindingsKeepToTheirOwnUsers(t *testing.T) {
	f := newFixture(t)
	first := f.binding("osb-i1-b1", "readwrite", "First1-Pa55word?")
	firstName, _ := f.create(first)
	before := f.plugin.snapshot(firstName)

	second := f.binding("osb-i1-b2", "readonly", "Second2-Pa55word?")
	secondName, _ := f.create(second)
	t.Run("a second bind (a rotation's successor too) makes another user, and leaves the first's as it was", func(t *testing.T) {
		if secondName == firstName {
			t.Fatalf("both bindings are %s", firstName)
		}
		if after := f.plugin.snapshot(firstName); after != before {
			t.Errorf("the first binding's user changed:\n%s\nto\n%s", before, after)
		}
		if got := f.as(firstName, first.password, http.MethodPut, "/app-orders/_doc/1"); got != http.StatusOK {
			t.Errorf("the first user's write: %d", got)
		}
	})

	f.delete(second, secondName)
	t.Run("unbind removes exactly its own user, role and mapping", func(t *testing.T) {
		if got := f.plugin.snapshot(secondName); got != "" {
			t.Errorf("the unbound user's remains: %s", got)
		}
		if after := f.plugin.snapshot(firstName); after != before {
			t.Errorf("the other binding's user changed:\n%s\nto\n%s", before, after)
		}
		if got := f.plugin.names(); !slices.Equal(got, slices.Sorted(slices.Values([]string{masterUser, firstName}))) {
			t.Errorf("users %v, want the master and the first binding's", got)
		}
		if got := f.as(secondName, second.password, http.MethodGet, "/app-orders/_search"); got != http.StatusUnauthorized {
			t.Errorf("the unbound user: %d, want 401", got)
		}
		if got := f.as(firstName, first.password, http.MethodGet, "/app-orders/_search"); got != http.StatusOK {
			t.Errorf("the remaining user's read: %d", got)
		}
		if got := f.as(masterUser, masterPassword, http.MethodDelete, "/app-orders"); got != http.StatusOK {
			t.Errorf("the master: %d, want 200 (its mappings untouched)", got)
		}
	})
}

func TestRequestsSentAgainChangeNothing(t *testing.T) {
	f := newFixture(t)
	b := f.binding("osb-i1-b1", "readwrite", "Again1-Pa55word?")
	name, _ := f.create(b)
	once := f.plugin.snapshot(name)
	t.Run("a create sent again names the same user and leaves it as it was", func(t *testing.T) {
		again, _ := f.create(b)
		if again != name || f.plugin.snapshot(name) != once {
			t.Errorf("the second create made %s: %s, want %s: %s", again, f.plugin.snapshot(again), name, once)
		}
	})
	t.Run("an update to readonly brings the role to it, the same user", func(t *testing.T) {
		b.props["Privileges"] = "readonly"
		e := f.event(cfn.RequestUpdate, b, name)
		e.OldResourceProperties = f.props
		got, _, err := f.handler.Handle(f.ctx, e)
		if err != nil || got != name {
			t.Fatalf("update: %s %v", got, err)
		}
		if !strings.Contains(f.plugin.snapshot(name), `"allowed_actions":["read"]`) {
			t.Errorf("after the update: %s", f.plugin.snapshot(name))
		}
	})
	t.Run("a delete sent again succeeds, and leaves nothing", func(t *testing.T) {
		f.delete(b, name)
		f.delete(b, name)
		if got := f.plugin.snapshot(name); got != "" {
			t.Errorf("remains: %s", got)
		}
	})
	t.Run("the delete of a create that failed before it named a user calls nothing", func(t *testing.T) {
		calls := len(f.plugin.callsSoFar())
		if _, _, err := f.handler.Handle(f.ctx, f.event(cfn.RequestDelete, b, "2b3c4d5e-request-id")); err != nil {
			t.Fatal(err)
		}
		if got := f.plugin.callsSoFar()[calls:]; len(got) != 0 {
			t.Errorf("calls %v", got)
		}
	})
}

func TestBadRequestsFailWithTheirReason(t *testing.T) {
	f := newFixture(t)
	t.Run("a password the domain would refuse is refused first, naming the rule and not the password", func(t *testing.T) {
		b := f.binding("osb-i1-weak", "readwrite", "alllowercase")
		_, _, err := f.handler.Handle(f.ctx, f.event(cfn.RequestCreate, b, ""))
		if err == nil || !strings.Contains(err.Error(), "RequireEachIncludedType") || strings.Contains(err.Error(), "alllowercase") {
			t.Errorf("error %v", err)
		}
		if got := f.plugin.callsSoFar(); len(got) != 0 {
			t.Errorf("calls %v", got)
		}
	})
	t.Run("a wrong master password fails with the plugin's 401, naming no password", func(t *testing.T) {
		wrong, _ := json.Marshal(map[string]string{"username": masterUser, "password": "Not-The-Pa55word"})
		b := f.binding("osb-i1-b1", "readwrite", "Fine1-Pa55word?")
		b.props["MasterSecretArn"] = f.secret("osb-i2-search-master", string(wrong))
		_, _, err := f.handler.Handle(f.ctx, f.event(cfn.RequestCreate, b, ""))
		if err == nil || !strings.Contains(err.Error(), "HTTP 401") || strings.Contains(err.Error(), "Pa55word") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("a domain whose certificate the handler's roots do not know is refused", func(t *testing.T) {
		h := &searchusers.Handler{Secrets: f.sm, HTTP: &http.Client{}}
		b := f.binding("osb-i1-tls", "readwrite", "Tls1-Pa55word?")
		_, _, err := h.Handle(f.ctx, f.event(cfn.RequestCreate, b, ""))
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("error %v, want a certificate error", err)
		}
	})
	for _, c := range []struct{ key, value, says string }{
		{"Privileges", "admin", "privileges"},
		{"IndexPattern", "/.*/", "index pattern"},
		{"IndexPattern", "_all", "index pattern"},
		{"IndexPattern", "*", "index pattern"},
		{"IndexPattern", "o*", "owner bindings"},
		{"IndexPattern", "osb_0123-*", "owner bindings"},
		{"Host", "evil.example/path", "host"},
		{"Port", "0", "port"},
	} {
		t.Run("the property "+c.key+" "+c.value+" is refused", func(t *testing.T) {
			b := f.binding("osb-i1-bad", "readwrite", "Bad1-Pa55word?")
			b.props[c.key] = c.value
			_, _, err := f.handler.Handle(f.ctx, f.event(cfn.RequestCreate, b, ""))
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Errorf("error %v, want one naming %s", err, c.says)
			}
		})
	}
}

func TestOnlyOpenSearchRequestsAreThisPackages(t *testing.T) {
	for _, c := range []struct {
		name     string
		new, old map[string]any
		want     bool
	}{
		{"a create of engine opensearch", map[string]any{"Engine": "opensearch"}, nil, true},
		{"a database user's", map[string]any{"Engine": "postgres"}, nil, false},
		{"a delete whose old properties name it", nil, map[string]any{"Engine": "opensearch"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := searchusers.Is(cfn.Event{ResourceProperties: c.new, OldResourceProperties: c.old}); got != c.want {
				t.Errorf("Is = %v, want %v", got, c.want)
			}
		})
	}
}
