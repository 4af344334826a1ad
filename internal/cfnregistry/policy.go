package cfnregistry

import (
	"fmt"
	"slices"
	"strings"
)

// authorizedAs are the names the registry lists that are API operations,
// not IAM actions: IAM authorizes each as the action given (S3 authorizes
// deleting a bucket configuration as putting it; the S3 API reference's
// "Permissions" of each operation; OpenSearch Service's UpdateDomainConfig,
// which its domain's registry schema lists as es:UpdateDomain, no IAM
// action).
var authorizedAs = map[string]string{
	"es:updatedomain":                       "es:UpdateDomainConfig",
	"s3:deletebucketencryption":             "s3:PutEncryptionConfiguration",
	"s3:deletebucketlifecycle":              "s3:PutLifecycleConfiguration",
	"s3:deletebucketcors":                   "s3:PutBucketCORS",
	"s3:deletebucketanalyticsconfiguration": "s3:PutAnalyticsConfiguration",
	"s3:deletebucketmetricsconfiguration":   "s3:PutMetricsConfiguration",
	"s3:deletebucketreplication":            "s3:PutReplicationConfiguration",
}

// IAMAction is the IAM action that authorizes what the registry lists as
// action.
func IAMAction(action string) string {
	if a, ok := authorizedAs[strings.ToLower(action)]; ok {
		return a
	}
	return action
}

// Statement is one statement of an IAM policy, as far as actions go.
type Statement struct {
	Sid string
	// Deny is a Deny statement; otherwise an Allow.
	Deny bool
	// Actions are action names or patterns (IAM's * and ?).
	Actions []string
	// Conditional: the statement has a Condition.
	Conditional bool
	// Scoped: the statement names resources rather than every one ("*"):
	// a Deny then refuses the action on those alone.
	Scoped bool
	// For are the resource types whose handlers the statement serves, when
	// its resources or conditions hold for those alone (iam:PassRole of
	// the binding roles to Roles Anywhere is no PassRole for another
	// type's role); none: any type's.
	For []string
}

// Policy is the statements of a role's policies.
type Policy []Statement

// MatchAction says whether IAM matches action to pattern: case-insensitive,
// * any run of characters, ? any one.
func MatchAction(pattern, action string) bool {
	return glob(strings.ToLower(pattern), strings.ToLower(action))
}

func glob(p, s string) bool {
	// The classic backtracking match: on a mismatch, let the last * take
	// one more character.
	star, mark := -1, 0
	i, j := 0, 0
	for j < len(s) {
		switch {
		case i < len(p) && (p[i] == '?' || p[i] == s[j]):
			i++
			j++
		case i < len(p) && p[i] == '*':
			star, mark = i, j
			i++
		case star >= 0:
			mark++
			i, j = star+1, mark
		default:
			return false
		}
	}
	for i < len(p) && p[i] == '*' {
		i++
	}
	return i == len(p)
}

// Allowing are the Allow statements that grant action.
func (p Policy) Allowing(action string) []Statement { return p.matching(action, false) }

// Denying are the Deny statements that cover action.
func (p Policy) Denying(action string) []Statement { return p.matching(action, true) }

func (p Policy) matching(action string, deny bool) []Statement {
	var out []Statement
	for _, s := range p {
		if s.Deny != deny {
			continue
		}
		if slices.ContainsFunc(s.Actions, func(pattern string) bool { return MatchAction(pattern, action) }) {
			out = append(out, s)
		}
	}
	return out
}

// For are the statements of p that serve type typ's handlers (Statement.For).
func (p Policy) For(typ string) Policy {
	var out Policy
	for _, s := range p {
		if len(s.For) == 0 || slices.Contains(s.For, typ) {
			out = append(out, s)
		}
	}
	return out
}

// Grants says whether the policy may grant action: some Allow statement
// names it, and no Deny statement without a condition, on every resource,
// does. A conditional Allow counts: the conditions that govern IAM
// identities are checked on their own (Governed), as are the resources a
// Deny names (the broker's own keys).
func (p Policy) Grants(action string) bool {
	if len(p.Allowing(action)) == 0 {
		return false
	}
	for _, d := range p.Denying(action) {
		if !d.Conditional && !d.Scoped {
			return false
		}
	}
	return true
}

// Resource is one resource a template declares.
type Resource struct {
	// File is the template, as the catalog names it.
	File      string
	LogicalID string
	Type      string
	// Properties are the properties the template sets (however
	// conditionally): each top-level name, and each nested property's path
	// from it, names joined by "/" (StreamSpecification/ResourcePolicy), as
	// Unused entries name them.
	Properties []string
}

func (r Resource) String() string { return fmt.Sprintf("%s (%s, in %s)", r.LogicalID, r.Type, r.File) }

// Unused is an action a type's handler needs only for a property the
// templates do not set, so a role may leave it out: granting it would be
// a permission no stack uses.
type Unused struct {
	Type     string
	Property string
	Action   string
	Why      string
}

// Refused is an action a role refuses on purpose, whatever a handler
// needs it for: the policy must not grant it.
type Refused struct {
	Action string
	Why    string
}

// Missing is an action a resource's handler needs that the policy does not
// grant.
type Missing struct {
	Type    string
	Handler string
	Action  string
	// Resources are the template resources of the type.
	Resources []Resource
}

func (m Missing) String() string {
	return fmt.Sprintf("%s, %s handler: %s (for %s)", m.Type, m.Handler, m.Action, m.Resources[0])
}

// Report is what Check finds.
type Report struct {
	// Missing are the actions the policy lacks, by type, handler and
	// action.
	Missing []Missing
	// Unknown are the types with no kept schema (or no handlers): their
	// actions are unknown here.
	Unknown []Resource
	// SetUnused are the Unused entries whose property a template sets:
	// the role needs their action after all.
	SetUnused []UnusedSet
	// GrantedRefused are the refused actions the policy grants.
	GrantedRefused []Refused
	// NoSuchProperty are the Unused entries whose property is not one of
	// their type's (a misspelling, or a property the schema dropped): such
	// an entry would excuse its action for ever.
	NoSuchProperty []Unused
}

// Problems says whether the report finds anything the role must fix
// (unknown types are for a person to check).
func (r Report) Problems() bool {
	return len(r.Missing)+len(r.SetUnused)+len(r.GrantedRefused)+len(r.NoSuchProperty) > 0
}

// UnusedSet is an Unused entry whose property a resource sets.
type UnusedSet struct {
	Unused
	Resource Resource
}

// Check lists what the resources' handlers need that policy does not
// grant (leaving out what unused says no template needs, and what refused
// says the role refuses on purpose), the types it knows nothing of, the
// unused entries a template contradicts, and the refused actions the
// policy grants.
func Check(resources []Resource, policy Policy, unused []Unused, refused []Refused) (Report, error) {
	schemas, err := Schemas()
	if err != nil {
		return Report{}, err
	}
	var r Report
	byType := map[string][]Resource{}
	var types []string
	for _, res := range resources {
		if _, ok := byType[res.Type]; !ok {
			types = append(types, res.Type)
		}
		byType[res.Type] = append(byType[res.Type], res)
		for _, u := range unused {
			if u.Type == res.Type && slices.Contains(res.Properties, u.Property) {
				r.SetUnused = append(r.SetUnused, UnusedSet{Unused: u, Resource: res})
			}
		}
	}
	slices.Sort(types)
	for _, u := range unused {
		if s, ok := schemas[u.Type]; !ok || !s.HasProperty(u.Property) {
			r.NoSuchProperty = append(r.NoSuchProperty, u)
		}
	}
	isRefused := map[string]bool{}
	for _, f := range refused {
		isRefused[strings.ToLower(f.Action)] = true
		if policy.Grants(f.Action) {
			r.GrantedRefused = append(r.GrantedRefused, f)
		}
	}
	for _, t := range types {
		s, ok := schemaOf(schemas, t)
		if !ok || len(s.Handlers) == 0 {
			r.Unknown = append(r.Unknown, byType[t][0])
			continue
		}
		for _, h := range StackHandlers {
			seen := map[string]bool{}
			for _, a := range s.Actions(h) {
				a = IAMAction(a)
				if seen[strings.ToLower(a)] {
					continue
				}
				seen[strings.ToLower(a)] = true
				if isRefused[strings.ToLower(a)] || policy.For(t).Grants(a) || unusedBy(unused, t, a, byType[t]) {
					continue
				}
				r.Missing = append(r.Missing, Missing{Type: t, Handler: h, Action: a, Resources: byType[t]})
			}
		}
	}
	return r, nil
}

// Extra is an action a role grants that no handler of its types lists,
// with the reason it is granted all the same.
type Extra struct {
	Action string
	Why    string
}

// Excess lists the actions (or patterns) that the Allow statements of
// policy grant and no create, read, update or delete handler of types
// needs (as IAM authorizes what it lists, IAMAction), unless extra lists
// them: a permission no stack of those types uses. A pattern is excess
// unless extra lists it, whatever it matches.
func Excess(policy Policy, types []string, extra []Extra) ([]string, error) {
	schemas, err := Schemas()
	if err != nil {
		return nil, err
	}
	needed := map[string]bool{}
	for _, t := range types {
		s, ok := schemaOf(schemas, t)
		if !ok {
			return nil, fmt.Errorf("%s: no kept schema", t)
		}
		for _, h := range StackHandlers {
			for _, a := range s.Actions(h) {
				needed[strings.ToLower(IAMAction(a))] = true
			}
		}
	}
	listed := map[string]bool{}
	for _, e := range extra {
		listed[strings.ToLower(e.Action)] = true
	}
	var out []string
	seen := map[string]bool{}
	for _, st := range policy {
		if st.Deny {
			continue
		}
		for _, a := range st.Actions {
			key := strings.ToLower(a)
			if seen[key] || listed[key] || needed[key] {
				continue
			}
			seen[key] = true
			out = append(out, a)
		}
	}
	return out, nil
}

// unusedBy says whether unused lists action for type t, and none of
// resources sets a property it is listed under (those that do are
// reported apart).
func unusedBy(unused []Unused, t, action string, resources []Resource) bool {
	listed := false
	for _, u := range unused {
		if u.Type != t || !strings.EqualFold(u.Action, action) {
			continue
		}
		listed = true
		if slices.ContainsFunc(resources, func(r Resource) bool { return slices.Contains(r.Properties, u.Property) }) {
			return false
		}
	}
	return listed
}
