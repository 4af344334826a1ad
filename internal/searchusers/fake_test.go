package searchusers_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeSecurityPlugin is a named fake of an OpenSearch Service domain's
// security plugin (fine-grained access control with the internal user
// database), on 127.0.0.1 over TLS: its REST API for internal users, roles
// and role mappings (_plugins/_security/api/…, as
// https://docs.opensearch.org/latest/security/access-control/api/ documents
// it: the keys each body may hold, 200 for an update and 201 for a creation,
// 404 for what is not there, 403 for what is reserved, only the master user
// may call it), and a data plane just large enough to tell what a user may
// do: search, index a document, create and delete an index, each
// authorized by the user's roles as the plugin does (a role's index
// patterns, * a wildcard, and its action groups). A body of the wrong shape
// fails the test that sent it.
type fakeSecurityPlugin struct {
	t      *testing.T
	server *httptest.Server
	master struct{ user, password string }

	mu       sync.Mutex
	users    map[string]fakeUser
	roles    map[string]fakeRole
	mappings map[string]fakeMapping
	reserved map[string]bool // names of reserved users, roles and mappings
	indices  map[string]bool
	calls    []string // "METHOD kind/name" of the API's calls
}

type fakeUser struct {
	Password    string            `json:"password,omitempty"`
	Hash        string            `json:"hash,omitempty"`
	BackendRole []string          `json:"backend_roles,omitempty"`
	Attributes  map[string]string `json:"attributes,omitempty"`
	Description string            `json:"description,omitempty"`
	Roles       []string          `json:"opendistro_security_roles,omitempty"`
}

type fakeRole struct {
	ClusterPermissions []string `json:"cluster_permissions"`
	IndexPermissions   []struct {
		IndexPatterns  []string `json:"index_patterns"`
		AllowedActions []string `json:"allowed_actions"`
		DLS            string   `json:"dls,omitempty"`
		FLS            []string `json:"fls,omitempty"`
		MaskedFields   []string `json:"masked_fields,omitempty"`
	} `json:"index_permissions"`
	TenantPermissions []any  `json:"tenant_permissions,omitempty"`
	Description       string `json:"description,omitempty"`
}

type fakeMapping struct {
	BackendRoles    []string `json:"backend_roles,omitempty"`
	Hosts           []string `json:"hosts,omitempty"`
	Users           []string `json:"users"`
	AndBackendRoles []string `json:"and_backend_roles,omitempty"`
	Description     string   `json:"description,omitempty"`
}

// The documented keys of each body.
var fakeKeys = map[string][]string{
	"internalusers": {"password", "hash", "backend_roles", "attributes", "description", "opendistro_security_roles"},
	"roles":         {"cluster_permissions", "index_permissions", "tenant_permissions", "description"},
	"rolesmapping":  {"backend_roles", "hosts", "users", "and_backend_roles", "description"},
}

var fakeIndexPermissionKeys = []string{"index_patterns", "allowed_actions", "dls", "fls", "masked_fields"}

// The plugin's default action groups (its static action_groups.yml) that a
// role may name, and which of the data plane's actions each allows.
var fakeActionGroups = map[string][]string{
	"indices_all":  {"search", "index", "create_index", "delete_index"},
	"crud":         {"search", "index"},
	"read":         {"search"},
	"search":       {"search"},
	"write":        {"index"},
	"index":        {"index"},
	"create_index": {"create_index"},
	"delete":       {},
	"manage":       {"create_index", "delete_index"},
	"get":          {"search"},
}

var fakeClusterGroups = []string{"cluster_all", "cluster_monitor", "cluster_composite_ops", "cluster_composite_ops_ro", "cluster_manage_index_templates", "manage_snapshots"}

func newFakeSecurityPlugin(t *testing.T, masterUser, masterPassword string) *fakeSecurityPlugin {
	f := &fakeSecurityPlugin{t: t, users: map[string]fakeUser{}, roles: map[string]fakeRole{}, mappings: map[string]fakeMapping{},
		reserved: map[string]bool{}, indices: map[string]bool{}}
	f.master.user, f.master.password = masterUser, masterPassword
	// A new domain: the master user, mapped to the reserved all_access
	// and security_manager roles.
	f.users[masterUser] = fakeUser{Password: masterPassword}
	for _, r := range []string{"all_access", "security_manager"} {
		f.roles[r] = fakeRole{ClusterPermissions: []string{"cluster_all"}}
		f.mappings[r] = fakeMapping{Users: []string{masterUser}}
		f.reserved[r] = true
	}
	f.server = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.server.Close)
	return f
}

func answer(w http.ResponseWriter, status int, body map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func (f *fakeSecurityPlugin) serve(w http.ResponseWriter, r *http.Request) {
	user, password, ok := r.BasicAuth()
	f.mu.Lock()
	defer f.mu.Unlock()
	if u, found := f.users[user]; !ok || !found || u.Password != password {
		answer(w, http.StatusUnauthorized, map[string]any{"status": "UNAUTHORIZED", "message": "Authentication finally failed"})
		return
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, "/_plugins/_security/api/"); ok {
		f.api(w, r, user, rest)
		return
	}
	f.data(w, r, user)
}

func (f *fakeSecurityPlugin) api(w http.ResponseWriter, r *http.Request, user, rest string) {
	kind, name, ok := strings.Cut(rest, "/")
	if _, known := fakeKeys[kind]; !known || !ok || name == "" || strings.Contains(name, "/") {
		answer(w, http.StatusBadRequest, map[string]any{"status": "error", "reason": "no such endpoint " + r.URL.Path})
		f.t.Errorf("the handler called %s %s, not an endpoint of the security API", r.Method, r.URL.Path)
		return
	}
	f.calls = append(f.calls, r.Method+" "+kind+"/"+name)
	if !slices.Contains(f.rolesOf(user), "all_access") && !slices.Contains(f.rolesOf(user), "security_manager") {
		answer(w, http.StatusForbidden, map[string]any{"status": "FORBIDDEN", "message": "No permission to access REST API: " + user})
		return
	}
	switch r.Method {
	case http.MethodPut:
		f.put(w, r, kind, name)
	case http.MethodDelete:
		if f.reserved[name] || (kind == "internalusers" && name == f.master.user) {
			answer(w, http.StatusForbidden, map[string]any{"status": "FORBIDDEN", "message": "Resource '" + name + "' is reserved."})
			return
		}
		if !f.exists(kind, name) {
			answer(w, http.StatusNotFound, map[string]any{"status": "NOT_FOUND", "message": "'" + name + "' not found."})
			return
		}
		switch kind {
		case "internalusers":
			delete(f.users, name)
		case "roles":
			delete(f.roles, name)
		case "rolesmapping":
			delete(f.mappings, name)
		}
		answer(w, http.StatusOK, map[string]any{"status": "OK", "message": "'" + name + "' deleted."})
	default:
		answer(w, http.StatusMethodNotAllowed, map[string]any{"status": "error", "reason": r.Method + " is not used here"})
		f.t.Errorf("the handler called %s %s", r.Method, r.URL.Path)
	}
}

func (f *fakeSecurityPlugin) exists(kind, name string) bool {
	switch kind {
	case "internalusers":
		_, ok := f.users[name]
		return ok
	case "roles":
		_, ok := f.roles[name]
		return ok
	}
	_, ok := f.mappings[name]
	return ok
}

// put checks the body's shape as the plugin does (a JSON object of the
// documented keys), then creates or replaces.
func (f *fakeSecurityPlugin) put(w http.ResponseWriter, r *http.Request, kind, name string) {
	bad := func(reason string) {
		answer(w, http.StatusBadRequest, map[string]any{"status": "error", "reason": reason})
		f.t.Errorf("PUT %s/%s: %s", kind, name, reason)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		bad("Content-Type header [" + ct + "] is not supported")
		return
	}
	text, _ := io.ReadAll(r.Body)
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(text, &raw); err != nil {
		bad("the body is not a JSON object")
		return
	}
	for k := range raw {
		if !slices.Contains(fakeKeys[kind], k) {
			bad("Invalid configuration: invalid key " + k)
			return
		}
	}
	if f.reserved[name] || (kind == "internalusers" && name == f.master.user) {
		answer(w, http.StatusForbidden, map[string]any{"status": "FORBIDDEN", "message": "Resource '" + name + "' is reserved."})
		return
	}
	existed := f.exists(kind, name)
	switch kind {
	case "internalusers":
		var u fakeUser
		if err := json.Unmarshal(text, &u); err != nil {
			bad("a value of the wrong type: " + err.Error())
			return
		}
		if u.Password == "" && u.Hash == "" && !existed {
			bad("Please specify either 'hash' or 'password' when creating a new internal user.")
			return
		}
		if u.Password != "" && !strongEnough(u.Password) {
			answer(w, http.StatusBadRequest, map[string]any{"status": "error", "reason": "Password must be minimum 8 characters long and must contain at least one uppercase letter, one lowercase letter, one digit, and one special character."})
			return
		}
		if u.Password == "" {
			u.Password = f.users[name].Password
		}
		f.users[name] = u
	case "roles":
		var role fakeRole
		if err := json.Unmarshal(text, &role); err != nil {
			bad("a value of the wrong type: " + err.Error())
			return
		}
		var perms []map[string]json.RawMessage
		_ = json.Unmarshal(raw["index_permissions"], &perms)
		for _, p := range perms {
			for k := range p {
				if !slices.Contains(fakeIndexPermissionKeys, k) {
					bad("Invalid configuration: invalid index permission key " + k)
					return
				}
			}
		}
		for _, g := range role.ClusterPermissions {
			if !slices.Contains(fakeClusterGroups, g) && !strings.HasPrefix(g, "cluster:") && !strings.HasPrefix(g, "indices:") {
				bad("no such cluster action group " + g)
				return
			}
		}
		for _, p := range role.IndexPermissions {
			if len(p.IndexPatterns) == 0 || len(p.AllowedActions) == 0 {
				bad("an index permission without patterns or actions")
				return
			}
			for _, a := range p.AllowedActions {
				if _, ok := fakeActionGroups[a]; !ok && !strings.HasPrefix(a, "indices:") {
					bad("no such index action group " + a)
					return
				}
			}
		}
		f.roles[name] = role
	case "rolesmapping":
		var m fakeMapping
		if err := json.Unmarshal(text, &m); err != nil {
			bad("a value of the wrong type: " + err.Error())
			return
		}
		if _, ok := f.roles[name]; !ok {
			answer(w, http.StatusNotFound, map[string]any{"status": "NOT_FOUND", "message": "Role '" + name + "' is not available for role-mapping."})
			return
		}
		f.mappings[name] = m
	}
	if existed {
		answer(w, http.StatusOK, map[string]any{"status": "OK", "message": "'" + name + "' updated."})
		return
	}
	answer(w, http.StatusCreated, map[string]any{"status": "CREATED", "message": "'" + name + "' created."})
}

func strongEnough(p string) bool {
	has := func(set string) bool { return strings.ContainsAny(p, set) }
	special := strings.IndexFunc(p, func(r rune) bool {
		return !strings.ContainsRune("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", r)
	}) >= 0
	return len(p) >= 8 && has("ABCDEFGHIJKLMNOPQRSTUVWXYZ") && has("abcdefghijklmnopqrstuvwxyz") && has("0123456789") && special
}

// rolesOf are the roles mapped to user.
func (f *fakeSecurityPlugin) rolesOf(user string) []string {
	var out []string
	for role, m := range f.mappings {
		if slices.Contains(m.Users, user) {
			out = append(out, role)
		}
	}
	out = append(out, f.users[user].Roles...)
	slices.Sort(out)
	return out
}

// allows says whether user's roles allow action on index.
func (f *fakeSecurityPlugin) allows(user, action, index string) bool {
	for _, name := range f.rolesOf(user) {
		if name == "all_access" {
			return true
		}
		for _, p := range f.roles[name].IndexPermissions {
			matches := slices.ContainsFunc(p.IndexPatterns, func(pattern string) bool { ok, _ := path.Match(pattern, index); return ok })
			if matches && slices.ContainsFunc(p.AllowedActions, func(g string) bool { return slices.Contains(fakeActionGroups[g], action) }) {
				return true
			}
		}
	}
	return false
}

// data serves GET /INDEX/_search, PUT /INDEX/_doc/ID, PUT /INDEX and
// DELETE /INDEX for an authenticated user.
func (f *fakeSecurityPlugin) data(w http.ResponseWriter, r *http.Request, user string) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	index := parts[0]
	var action string
	switch {
	case r.Method == http.MethodGet && len(parts) == 2 && parts[1] == "_search":
		action = "search"
	case r.Method == http.MethodPut && len(parts) == 3 && parts[1] == "_doc":
		action = "index"
		if !f.indices[index] {
			// Writing to a missing index creates it: the user needs both.
			if !f.allows(user, "create_index", index) {
				answer(w, http.StatusForbidden, map[string]any{"status": "FORBIDDEN", "message": "no permissions for [indices:admin/create] and User [name=" + user + "]"})
				return
			}
		}
	case r.Method == http.MethodPut && len(parts) == 1:
		action = "create_index"
	case r.Method == http.MethodDelete && len(parts) == 1:
		action = "delete_index"
	default:
		answer(w, http.StatusBadRequest, map[string]any{"status": "error", "reason": "not served by the fake"})
		return
	}
	if !f.allows(user, action, index) {
		answer(w, http.StatusForbidden, map[string]any{"status": "FORBIDDEN", "message": fmt.Sprintf("no permissions for [%s] and User [name=%s]", action, user)})
		return
	}
	switch action {
	case "index", "create_index":
		f.indices[index] = true
	case "delete_index":
		delete(f.indices, index)
	case "search":
		if !f.indices[index] {
			answer(w, http.StatusNotFound, map[string]any{"status": "NOT_FOUND", "message": "no such index [" + index + "]"})
			return
		}
	}
	answer(w, http.StatusOK, map[string]any{"acknowledged": true})
}

// snapshot is what the plugin holds of name: its user, role and mapping,
// as JSON (empty where there is none).
func (f *fakeSecurityPlugin) snapshot(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var parts []string
	if u, ok := f.users[name]; ok {
		b, _ := json.Marshal(u)
		parts = append(parts, "user "+string(b))
	}
	if r, ok := f.roles[name]; ok {
		b, _ := json.Marshal(r)
		parts = append(parts, "role "+string(b))
	}
	if m, ok := f.mappings[name]; ok {
		b, _ := json.Marshal(m)
		parts = append(parts, "mapping "+string(b))
	}
	return strings.Join(parts, "; ")
}

// names are the users the plugin holds, sorted.
func (f *fakeSecurityPlugin) names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for n := range f.users {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// callsSoFar are the API's calls so far.
func (f *fakeSecurityPlugin) callsSoFar() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}
