// Package searchusers owns the OpenSearch user of one binding: an internal
// user of the domain's security plugin, a role of its own with the
// privileges the plan allows, and the mapping of the one to the other, made
// and deleted through the plugin's REST API (_plugins/_security/api) as the
// domain's master user. It is the "opensearch" engine of the
// Custom::DatabaseUser handler (functions/dbuser), which runs in the
// domain's VPC: every call is idempotent, since CloudFormation may send a
// request again.
//
// An internal user rather than an IAM role mapped in the plugin: an
// application then needs a user name and a password (HTTP basic
// authentication, which every OpenSearch client speaks), not AWS
// credentials and SigV4 signing, and the binding makes no IAM identity, so
// no long-lived access key.
package searchusers

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/serverless-osb/broker/internal/dbusers"
)

// Engine is the Custom::DatabaseUser property Engine that names this kind.
const Engine = "opensearch"

// AttributeIndexPattern is the attribute, besides dbusers' Username,
// Password and Uri, that a template reads with Fn::GetAtt: the indices the
// user reaches.
const AttributeIndexPattern = "IndexPattern"

// Privileges are dbusers': owner, readwrite, readonly.
type Privileges = dbusers.Privileges

// DefaultIndexPattern is the application's indices when the plan names
// none, as the database users' application schema is app.
const DefaultIndexPattern = "app-*"

// indexPattern is a plan's IndexPattern: lower-case names, digits, _ - and
// the * wildcard, starting with a letter or a digit (index names are lower
// case; this refuses the plugin's regular expressions, /…/, and * alone).
var indexPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_*-]{0,99}$`)

// ownerPrefix starts every binding user's name, hence every owner's
// indices.
const ownerPrefix = "osb_"

// CheckIndexPattern refuses a pattern the template would refuse, and one
// that could match an owner's indices (<user>-*, the user osb_…): a
// readwrite or readonly binding reaches the application's indices, never
// another binding's own.
func CheckIndexPattern(p string) error {
	if !indexPattern.MatchString(p) {
		return fmt.Errorf("index pattern %q: want lower-case letters, digits, _, - or *, starting with a letter or a digit", p)
	}
	literal, _, wild := strings.Cut(p, "*")
	if strings.HasPrefix(literal, ownerPrefix) || (wild && strings.HasPrefix(ownerPrefix, literal)) {
		return fmt.Errorf("index pattern %q could match the indices of owner bindings (%s…): give one that cannot, app-* say", p, ownerPrefix)
	}
	return nil
}

// OwnPattern is the indices an owner's user reaches: those named after it.
func OwnPattern(user string) string { return user + "-*" }

// IndexPermission is one entry of a role's index_permissions.
type IndexPermission struct {
	IndexPatterns  []string `json:"index_patterns"`
	AllowedActions []string `json:"allowed_actions"`
}

// Role is the body of PUT _plugins/_security/api/roles/<name>.
type Role struct {
	ClusterPermissions []string          `json:"cluster_permissions"`
	IndexPermissions   []IndexPermission `json:"index_permissions"`
	Description        string            `json:"description,omitempty"`
}

// RoleFor is the role of a user with privileges p: owner may do anything to
// its own indices (create, write, read, delete, map, alias them);
// readwrite may read and write documents of pattern's indices and create
// such an index, not delete one; readonly may read them. The action groups
// are the security plugin's default ones.
func RoleFor(user string, p Privileges, pattern string) (Role, error) {
	if err := dbusers.CheckName(user); err != nil {
		return Role{}, err
	}
	if err := CheckIndexPattern(pattern); err != nil {
		return Role{}, err
	}
	r := Role{Description: "serverless-osb binding user " + user + ": " + string(p)}
	switch p {
	case dbusers.Owner:
		r.ClusterPermissions = []string{"cluster_composite_ops"}
		r.IndexPermissions = []IndexPermission{{IndexPatterns: []string{OwnPattern(user)}, AllowedActions: []string{"indices_all"}}}
	case dbusers.ReadWrite:
		r.ClusterPermissions = []string{"cluster_composite_ops"}
		r.IndexPermissions = []IndexPermission{{IndexPatterns: []string{pattern}, AllowedActions: []string{"crud", "create_index"}}}
	case dbusers.ReadOnly:
		r.ClusterPermissions = []string{"cluster_composite_ops_ro"}
		r.IndexPermissions = []IndexPermission{{IndexPatterns: []string{pattern}, AllowedActions: []string{"read"}}}
	default:
		return Role{}, fmt.Errorf("privileges %q: want owner, readwrite or readonly", p)
	}
	return r, nil
}

// Reaches is the index pattern a user with privileges p reaches.
func Reaches(user string, p Privileges, pattern string) string {
	if p == dbusers.Owner {
		return OwnPattern(user)
	}
	return pattern
}

// checkPassword is OpenSearch Service's rule for internal users' passwords
// (fine-grained access control): at least 8 characters, with an upper-case
// letter, a lower-case letter, a digit and a special character. The
// template's generated passwords follow it; this names the fault before the
// plugin refuses it with less.
func checkPassword(p string) error {
	has := func(f func(rune) bool) bool { return strings.IndexFunc(p, f) >= 0 }
	upper := func(r rune) bool { return r >= 'A' && r <= 'Z' }
	lower := func(r rune) bool { return r >= 'a' && r <= 'z' }
	digit := func(r rune) bool { return r >= '0' && r <= '9' }
	special := func(r rune) bool { return !upper(r) && !lower(r) && !digit(r) }
	if len(p) < 8 || !has(upper) || !has(lower) || !has(digit) || !has(special) {
		return fmt.Errorf("the binding's password does not meet OpenSearch Service's rule (8 characters or more, with an " +
			"upper-case letter, a lower-case letter, a digit and a special character): generate it with RequireEachIncludedType")
	}
	return nil
}
