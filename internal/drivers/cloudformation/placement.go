package cloudformation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/deploy"
)

// KeyPlacement is the broker block's key that says where a plan's
// instances live: which account (through the role the broker assumes
// there) and which Region.
const KeyPlacement = "placement"

// The keys of a placement, and of each target in its map.
const (
	keyRegion          = "region"
	keyRoleARN         = "role_arn"
	keyExternalID      = "external_id"
	keyExternalIDEnv   = "external_id_env"
	keyExternalIDSec   = "external_id_secret"
	keyServiceRoleARN  = "service_role_arn"
	keyBoundaryARN     = "permissions_boundary_arn"
	keyBy              = "by"
	keyMap             = "map"
	keyDefault         = "default"
	keyRegions         = "regions"
	keyRegionParameter = "region_parameter"
	keyRetired         = "retired"
	keyPool            = "pool"
	keyStackQuota      = "stack_quota"
	keyMaxShare        = "max_share"
)

var (
	targetKeys    = []string{keyRegion, keyRoleARN, keyExternalID, keyExternalIDEnv, keyExternalIDSec, keyServiceRoleARN, keyBoundaryARN, keyPool, keyStackQuota, keyMaxShare}
	roleKeys      = []string{keyRoleARN, keyExternalID, keyExternalIDEnv, keyExternalIDSec, keyServiceRoleARN, keyBoundaryARN}
	placementKeys = append(slices.Clone(targetKeys), keyBy, keyMap, keyDefault, keyRegions, keyRegionParameter, keyRetired)
)

// What a placement may follow in the platform's context: Cloud Foundry's
// organization or space, Kubernetes' namespace, SAP BTP's subaccount.
const (
	ByOrganization = "organization"
	BySpace        = "space"
	ByNamespace    = "namespace"
	BySubaccount   = "subaccount"
)

var byValues = []string{ByOrganization, BySpace, ByNamespace, BySubaccount}

var (
	// externalIDPattern is STS's characters; its length, 2 to 1224, is
	// checked apart (a regexp repeats at most 1000 times).
	externalIDPattern = lazyPattern(`^[\w+=,.@:/-]+$`)
	envNamePattern    = lazyPattern(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// A secret of Secrets Manager, by ARN (of any Region and account) or
	// by name (the broker's Region and account). The name's length, 1 to
	// maxSecretName, is checked apart (isSecret): a counted repetition
	// compiles into that many copies, which cost 0.7 MB and half a
	// millisecond of every cold start.
	secretARNPattern  = lazyPattern(`^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:([\w/+=.@-]+)$`)
	secretNamePattern = lazyPattern(`^[\w/+=.@-]+$`)
)

const maxSecretName = 512

// isSecret says whether s names a secret of Secrets Manager, by ARN or
// by name.
func isSecret(s string) bool {
	if m := secretARNPattern().FindStringSubmatch(s); m != nil {
		return len(m[1]) <= maxSecretName
	}
	return len(s) <= maxSecretName && secretNamePattern().MatchString(s)
}

// ExternalID is the external id the broker gives STS when it assumes a
// target's role. It is no password, but it is what keeps another
// customer of the same broker from pointing it at a role (the confused
// deputy): it never reaches a log line or an error.
type ExternalID string

func (ExternalID) String() string { return "[REDACTED]" }

// LogValue keeps it out of structured logs.
func (ExternalID) LogValue() slog.Value { return slog.StringValue("[REDACTED]") }

// GoString keeps it out of %#v.
func (ExternalID) GoString() string { return "[REDACTED]" }

// Target is one place instances may live in: a Region of an account.
// Neither field set is the broker's own account and Region.
type Target struct {
	// Region is the target's Region; empty: the broker's.
	Region string
	// RoleARN is the role the broker assumes in the target's account;
	// empty: the broker's own account, with its own credentials.
	RoleARN string
	// ExternalID, or ExternalIDEnv (the variable that holds it where the
	// broker runs), or ExternalIDSecret (the Secrets Manager secret, ARN
	// or name, that holds it, read at first use), is given to STS with the
	// role.
	ExternalID       ExternalID
	ExternalIDEnv    string
	ExternalIDSecret string
	// ServiceRoleARN is the CloudFormation service role of the target's
	// account that its stacks are made under, and BoundaryARN the
	// permissions boundary its templates' IAM identities get; both in the
	// role's account (the target stack makes them, docs/deploy.md).
	// Empty: none (the assumed role's own permissions; no boundary).
	ServiceRoleARN string
	BoundaryARN    string
	// Pool, when set, are accounts (each a role, its external id, service
	// role and boundary) in the target's Region, of which a new instance
	// goes to the one with the most room under StackQuota stacks, counting
	// the broker's stacks there (pool.go); when every one holds MaxShare of
	// its quota or more, provisions fail.
	Pool       []Target
	StackQuota int
	MaxShare   float64
	// pooled: the target is an account of a pool (Targets), which the api
	// function reaches too, to count its stacks at the request.
	pooled bool
}

// Default quota and share of a pool: CloudFormation's default quota of
// stacks per account and Region, and room left for the bindings of the
// instances already there.
const (
	DefaultStackQuota = 2000
	DefaultMaxShare   = 0.9
)

// Account is the target's account, from its role; empty: the broker's.
func (t Target) Account() string { return roleAccount(t.RoleARN) }

// roleAccount is the account of a role ARN (arn:aws:iam::<account>:role/…).
func roleAccount(arn string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) < 6 {
		return ""
	}
	return parts[4]
}

// Placement says where a plan's instances live: one Target for all, or
// one per value of the platform's context (By), with a default.
type Placement struct {
	// Target, without By: where every instance lives.
	Target Target
	// By names what of the request's context chooses the target in Map:
	// ByOrganization, BySpace, ByNamespace or BySubaccount. Default takes
	// every value Map does not name; without it, a request whose context
	// maps nowhere is refused.
	By      string
	Map     map[string]Target
	Default *Target
	// Regions, when set, are the Regions the plan allows; every target
	// names one of them. RegionParameter, when set, is the parameter of a
	// provision by which users choose among them (the target's own is the
	// default).
	Regions         []string
	RegionParameter string
	// Retired are places no new instance goes to, where instances made
	// before the placement changed still live: the broker keeps assuming
	// their roles for those instances' operations, bindings and cleanup.
	Retired []Target
}

// Targets lists every target the placement may choose, and the retired
// ones.
func (p *Placement) Targets() []Target {
	var out []Target
	for _, kt := range p.keyedTargets() {
		out = append(out, kt.t)
	}
	return out
}

// keyedTarget is a target and the catalog key that names it.
type keyedTarget struct {
	key string
	t   Target
}

// keyedTargets are Targets, each with its key (placement,
// placement.map.K, placement.default, placement.retired[i], and
// placement…pool[j] for each account of a pool, which takes its pool's
// Region).
func (p *Placement) keyedTargets() []keyedTarget {
	if p == nil {
		return nil
	}
	var all []keyedTarget
	for i, t := range p.Retired {
		all = append(all, keyedTarget{fmt.Sprintf("%s.%s[%d]", KeyPlacement, keyRetired, i), t})
	}
	if p.By == "" {
		all = append(all, keyedTarget{KeyPlacement, p.Target})
	}
	for _, k := range slices.Sorted(maps.Keys(p.Map)) {
		all = append(all, keyedTarget{KeyPlacement + "." + keyMap + "." + k, p.Map[k]})
	}
	if p.Default != nil {
		all = append(all, keyedTarget{KeyPlacement + "." + keyDefault, *p.Default})
	}
	var out []keyedTarget
	for _, kt := range all {
		if len(kt.t.Pool) == 0 {
			out = append(out, kt)
			continue
		}
		for j, m := range kt.t.Pool {
			m.Region, m.pooled = kt.t.Region, true
			out = append(out, keyedTarget{fmt.Sprintf("%s.%s[%d]", kt.key, keyPool, j), m})
		}
	}
	return out
}

// configurePlacement reads a plan's placement (KeyPlacement of config);
// nil when it has none.
func configurePlacement(plan *catalog.Plan, config map[string]any) (*Placement, error) {
	v, ok := config[KeyPlacement]
	if !ok {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, catalog.Settingf(KeyPlacement, "must be a mapping (region, role_arn, external_id, external_id_env or external_id_secret; or by, map and default), got %s", catalog.Describe(v))
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(placementKeys, k) {
			return nil, catalog.Settingf(KeyPlacement+"."+k, "unknown key; a placement's keys are %s", strings.Join(placementKeys, ", "))
		}
	}
	p := &Placement{}
	var err error
	if p.Regions, err = regionList(m); err != nil {
		return nil, err
	}
	if v, ok := m[keyBy]; ok {
		by, _ := v.(string)
		if !slices.Contains(byValues, by) {
			return nil, catalog.Settingf(KeyPlacement+"."+keyBy, "must be one of %s (what of the platform's context chooses the place), got %s",
				strings.Join(byValues, ", "), catalog.Describe(v))
		}
		p.By = by
		for _, k := range targetKeys {
			if _, ok := m[k]; ok {
				return nil, catalog.Settingf(KeyPlacement+"."+k, "is set beside by: %s; with by, each place is an entry of map, and default the place of what map does not name: move %s there", by, k)
			}
		}
		raw, ok := m[keyMap].(map[string]any)
		if !ok || len(raw) == 0 {
			return nil, catalog.Settingf(KeyPlacement+"."+keyMap, "must be a mapping of each %s's id (%s) to its place, with at least one entry, got %s",
				by, contextField(by), catalog.Describe(m[keyMap]))
		}
		p.Map = map[string]Target{}
		for _, k := range slices.Sorted(maps.Keys(raw)) {
			t, err := target(KeyPlacement+"."+keyMap+"."+k, raw[k], p.Regions)
			if err != nil {
				return nil, err
			}
			p.Map[k] = t
		}
		if v, ok := m[keyDefault]; ok {
			t, err := target(KeyPlacement+"."+keyDefault, v, p.Regions)
			if err != nil {
				return nil, err
			}
			p.Default = &t
		}
	} else {
		for _, k := range []string{keyMap, keyDefault} {
			if _, ok := m[k]; ok {
				return nil, catalog.Settingf(KeyPlacement+"."+k, "needs by (%s): what of the platform's context the map's keys are", strings.Join(byValues, ", "))
			}
		}
		targetOnly := map[string]any{}
		for _, k := range targetKeys {
			if v, ok := m[k]; ok {
				targetOnly[k] = v
			}
		}
		if p.Target, err = target(KeyPlacement, targetOnly, p.Regions); err != nil {
			return nil, err
		}
	}
	if err := p.regionParameter(plan, m); err != nil {
		return nil, err
	}
	if p.Retired, err = retired(m); err != nil {
		return nil, err
	}
	return p, p.checkRoles()
}

// regionList reads the Regions a placement allows.
func regionList(m map[string]any) ([]string, error) {
	v, ok := m[keyRegions]
	if !ok {
		return nil, nil
	}
	key := KeyPlacement + "." + keyRegions
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, catalog.Settingf(key, "must be a list of Region names (eu-west-1, …), got %s", catalog.Describe(v))
	}
	var out []string
	for i, e := range list {
		s, ok := e.(string)
		if !ok || !catalog.RegionName().MatchString(s) {
			return nil, catalog.Settingf(fmt.Sprintf("%s[%d]", key, i), "must be a Region name such as eu-west-1, got %s", catalog.Describe(e))
		}
		if slices.Contains(out, s) {
			return nil, catalog.Settingf(fmt.Sprintf("%s[%d]", key, i), "%s is listed twice", s)
		}
		out = append(out, s)
	}
	return out, nil
}

// retired reads the places no new instance goes to.
func retired(m map[string]any) ([]Target, error) {
	v, ok := m[keyRetired]
	if !ok {
		return nil, nil
	}
	key := KeyPlacement + "." + keyRetired
	items, ok := v.([]any)
	if !ok || len(items) == 0 {
		return nil, catalog.Settingf(key, "must be a list of places (role_arn with its external id), got %s", catalog.Describe(v))
	}
	var out []Target
	for i, item := range items {
		k := fmt.Sprintf("%s[%d]", key, i)
		t, err := target(k, item, nil)
		if err != nil {
			return nil, err
		}
		if t.RoleARN == "" {
			return nil, catalog.Settingf(k+"."+keyRoleARN, "is missing: a retired place is kept for the role the broker still assumes there")
		}
		out = append(out, t)
	}
	return out, nil
}

// target reads one place at key.
func target(key string, v any, allowed []string) (Target, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Target{}, catalog.Settingf(key, "must be a mapping of %s, got %s", strings.Join(targetKeys, ", "), catalog.Describe(v))
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(targetKeys, k) {
			return Target{}, catalog.Settingf(key+"."+k, "unknown key; a place's keys are %s", strings.Join(targetKeys, ", "))
		}
	}
	str := func(k string) (string, error) {
		v, ok := m[k]
		if !ok {
			return "", nil
		}
		s, isString := v.(string)
		if !isString || s == "" {
			if k == keyExternalID {
				return "", catalog.Settingf(key+"."+k, "must be a non-empty string")
			}
			return "", catalog.Settingf(key+"."+k, "must be a non-empty string, got %s", catalog.Describe(v))
		}
		return s, nil
	}
	var t Target
	var err error
	if t.Region, err = str(keyRegion); err != nil {
		return t, err
	}
	if t.Region != "" && !catalog.RegionName().MatchString(t.Region) {
		return t, catalog.Settingf(key+"."+keyRegion, "%q is not a Region name; name one such as eu-west-1", t.Region)
	}
	if len(allowed) > 0 && !slices.Contains(allowed, t.Region) {
		if t.Region == "" {
			return t, catalog.Settingf(key+"."+keyRegion, "is missing; the placement allows the Regions %s, so every place names one of them", list(allowed))
		}
		return t, catalog.Settingf(key+"."+keyRegion, "%s is not one of the Regions the placement allows (%s): add it to %s.%s, or name one of them", t.Region, list(allowed), KeyPlacement, keyRegions)
	}
	if _, ok := m[keyPool]; ok {
		return pool(key, m, t.Region)
	}
	for _, k := range []string{keyStackQuota, keyMaxShare} {
		if _, ok := m[k]; ok {
			return t, catalog.Settingf(key+"."+k, "goes with %s: the quota of each account of a pool", keyPool)
		}
	}
	if t.RoleARN, err = str(keyRoleARN); err != nil {
		return t, err
	}
	if t.RoleARN != "" && !roleARNPattern().MatchString(t.RoleARN) {
		return t, catalog.Settingf(key+"."+keyRoleARN, "%q is not an IAM role ARN (arn:aws:iam::<account>:role/<name>): name the role the broker assumes in the target account", t.RoleARN)
	}
	id, err := str(keyExternalID)
	if err != nil {
		return t, err
	}
	t.ExternalID = ExternalID(id)
	if id != "" && (len(id) < 2 || len(id) > 1224 || !externalIDPattern().MatchString(id)) {
		// Never quote it: it is kept out of messages as out of logs.
		return t, catalog.Settingf(key+"."+keyExternalID, "must be 2 to 1224 letters, digits or the characters _+=,.@:/- (what STS accepts as an external id)")
	}
	if t.ExternalIDEnv, err = str(keyExternalIDEnv); err != nil {
		return t, err
	}
	if t.ExternalIDEnv != "" && !envNamePattern().MatchString(t.ExternalIDEnv) {
		return t, catalog.Settingf(key+"."+keyExternalIDEnv, "%q is not an environment variable's name", t.ExternalIDEnv)
	}
	if t.ExternalIDSecret, err = str(keyExternalIDSec); err != nil {
		return t, err
	}
	if t.ExternalIDSecret != "" && !isSecret(t.ExternalIDSecret) {
		return t, catalog.Settingf(key+"."+keyExternalIDSec, "%q is neither a secret's ARN (arn:aws:secretsmanager:<region>:<account>:secret:<name>) nor a secret's name (letters, digits and /_+=.@-)", t.ExternalIDSecret)
	}
	var ways []string
	for k, v := range map[string]string{keyExternalID: id, keyExternalIDEnv: t.ExternalIDEnv, keyExternalIDSec: t.ExternalIDSecret} {
		if v != "" {
			ways = append(ways, k)
		}
	}
	slices.Sort(ways)
	switch {
	case len(ways) > 1:
		return t, catalog.Settingf(key+"."+ways[0], "is set with %s: give the external id one way", strings.Join(ways[1:], " and "))
	case t.RoleARN == "" && len(ways) > 0:
		return t, catalog.Settingf(key+"."+keyRoleARN, "is missing: an external id goes with the role the broker assumes")
	case t.RoleARN != "" && len(ways) == 0:
		return t, catalog.Settingf(key+"."+keyExternalID, "is missing: the broker assumes %s with an external id, which the role's trust policy requires (so that no one else can point a broker at it); set %s, or %s to name the variable that holds it, or %s to name the Secrets Manager secret that holds it",
			t.RoleARN, keyExternalID, keyExternalIDEnv, keyExternalIDSec)
	}
	if t.ServiceRoleARN, err = str(keyServiceRoleARN); err != nil {
		return t, err
	}
	if t.BoundaryARN, err = str(keyBoundaryARN); err != nil {
		return t, err
	}
	for k, arn := range map[string]string{keyServiceRoleARN: t.ServiceRoleARN, keyBoundaryARN: t.BoundaryARN} {
		switch {
		case arn == "":
		case t.RoleARN == "":
			return t, catalog.Settingf(key+"."+k, "is set without %s: in the broker's own account, its own service role and boundary apply", keyRoleARN)
		case k == keyServiceRoleARN && !roleARNPattern().MatchString(arn):
			return t, catalog.Settingf(key+"."+k, "%q is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)", arn)
		case k == keyBoundaryARN && !policyARNPattern().MatchString(arn):
			return t, catalog.Settingf(key+"."+k, "%q is not a managed policy ARN (arn:aws:iam::<account>:policy/<name>)", arn)
		case roleAccount(arn) != t.Account():
			return t, catalog.Settingf(key+"."+k, "is in account %s, but %s is in account %s: the stacks are made in the role's account, under a service role of that account",
				roleAccount(arn), keyRoleARN, t.Account())
		}
	}
	return t, nil
}

// pool reads a place that is a pool of accounts in one Region.
func pool(key string, m map[string]any, region string) (Target, error) {
	t := Target{Region: region, StackQuota: DefaultStackQuota, MaxShare: DefaultMaxShare}
	for _, k := range roleKeys {
		if _, ok := m[k]; ok {
			return t, catalog.Settingf(key+"."+k, "is set beside %s: each account of the pool names its own role", keyPool)
		}
	}
	items, ok := m[keyPool].([]any)
	if !ok || len(items) == 0 {
		return t, catalog.Settingf(key+"."+keyPool, "must be a list of accounts (each role_arn with its external id), got %s", catalog.Describe(m[keyPool]))
	}
	for i, item := range items {
		k := fmt.Sprintf("%s.%s[%d]", key, keyPool, i)
		if im, ok := item.(map[string]any); ok {
			for _, nested := range []string{keyRegion, keyPool, keyStackQuota, keyMaxShare} {
				if _, ok := im[nested]; ok {
					return t, catalog.Settingf(k+"."+nested, "is the pool's, not an account's: the accounts of a pool share its Region and quota")
				}
			}
		}
		member, err := target(k, item, nil)
		if err != nil {
			return t, err
		}
		if member.RoleARN == "" {
			return t, catalog.Settingf(k+"."+keyRoleARN, "is missing: each account of a pool is reached through its role")
		}
		for _, other := range t.Pool {
			if other.Account() == member.Account() {
				return t, catalog.Settingf(k+"."+keyRoleARN, "is in account %s, which the pool names already", member.Account())
			}
		}
		t.Pool = append(t.Pool, member)
	}
	if v, ok := m[keyStackQuota]; ok {
		n, isWhole := wholeNumber(v)
		if !isWhole || n < 1 || n > 1000000 {
			return t, catalog.Settingf(key+"."+keyStackQuota, "must be a whole number of stacks (the account's CloudFormation quota in the Region, default %d), got %s", DefaultStackQuota, catalog.Describe(v))
		}
		t.StackQuota = int(n)
	}
	if v, ok := m[keyMaxShare]; ok {
		f, isNumber := v.(float64)
		if n, isWhole := wholeNumber(v); isWhole {
			f, isNumber = float64(n), true
		}
		if !isNumber || f <= 0 || f > 1 {
			return t, catalog.Settingf(key+"."+keyMaxShare, "must be a share of the quota above 0 and at most 1 (default %g), got %s", DefaultMaxShare, catalog.Describe(v))
		}
		t.MaxShare = f
	}
	return t, nil
}

// regionParameter checks the parameter by which users choose the Region:
// a property of the plan's create schema, and of no other (an instance
// keeps its Region), which the template does not declare (the stack's
// Region is AWS::Region).
func (p *Placement) regionParameter(plan *catalog.Plan, m map[string]any) error {
	v, ok := m[keyRegionParameter]
	if !ok {
		return nil
	}
	key := KeyPlacement + "." + keyRegionParameter
	name, _ := v.(string)
	if name == "" {
		return catalog.Settingf(key, "must be the name of a parameter, got %s", catalog.Describe(v))
	}
	if len(p.Regions) == 0 {
		return catalog.Settingf(key, "is set without %s.%s: list the Regions users may choose from", KeyPlacement, keyRegions)
	}
	p.RegionParameter = name
	if plan == nil {
		return nil
	}
	if !slices.Contains(plan.SchemaProperties(catalog.InstanceCreate), name) {
		return catalog.Settingf(key, "names %s, which the plan's schemas.%s does not: add the property (type: string, enum: %s) so that platforms offer it",
			name, catalog.InstanceCreate, list(p.Regions))
	}
	for _, k := range []catalog.SchemaKind{catalog.InstanceUpdate, catalog.BindingCreate} {
		if slices.Contains(plan.SchemaProperties(k), name) {
			return catalog.PlanFieldf(schemaField(k)+".properties."+name, "is the placement's region parameter: an instance keeps the Region it was made in, so only schemas.%s may name it", catalog.InstanceCreate)
		}
	}
	return nil
}

// checkRoles refuses a role named twice with different external ids,
// service roles or boundaries: the broker keeps one set of credentials per
// role (and external id), and an instance's later operations find its
// role's settings by its ARN.
func (p *Placement) checkRoles() error {
	seen := map[string]Target{}
	for _, t := range p.Targets() {
		if t.RoleARN == "" {
			continue
		}
		if prev, ok := seen[t.RoleARN]; ok && !sameRole(prev, t) {
			return catalog.Settingf(KeyPlacement, "names the role %s twice with different external ids, service roles or boundaries; give it the same ones everywhere", t.RoleARN)
		}
		seen[t.RoleARN] = t
	}
	return nil
}

func sameRole(a, b Target) bool {
	return a.ExternalID == b.ExternalID && a.ExternalIDEnv == b.ExternalIDEnv && a.ExternalIDSecret == b.ExternalIDSecret &&
		a.ServiceRoleARN == b.ServiceRoleARN && a.BoundaryARN == b.BoundaryARN
}

// contextField names where a request says what By follows.
func contextField(by string) string {
	switch by {
	case ByOrganization:
		return "organization_guid"
	case BySpace:
		return "space_guid"
	case ByNamespace:
		return "context.namespace"
	case BySubaccount:
		return "context.subaccount_id"
	}
	return by
}

// placementContext is what a placement reads of an OSB context object.
type placementContext struct {
	OrganizationGUID string `json:"organization_guid"`
	SpaceGUID        string `json:"space_guid"`
	Namespace        string `json:"namespace"`
	SubaccountID     string `json:"subaccount_id"`
}

// Resolve says where the instance a provision request describes lives.
// Its error, a *broker.Failure, says what of the request to change, in
// words for the user (the broker answers 400 with it).
func (p *Placement) Resolve(req broker.InstanceRequest) (Target, error) {
	if p == nil {
		return Target{}, nil
	}
	t := p.Target
	if p.By != "" {
		var ctx placementContext
		if len(bytes.TrimSpace(req.Context)) > 0 {
			_ = json.Unmarshal(req.Context, &ctx) // a context of another shape names nothing
		}
		key := map[string]string{
			ByOrganization: firstOf(req.OrganizationGUID, ctx.OrganizationGUID),
			BySpace:        firstOf(req.SpaceGUID, ctx.SpaceGUID),
			ByNamespace:    ctx.Namespace,
			BySubaccount:   ctx.SubaccountID,
		}[p.By]
		mapped, ok := p.Map[key]
		switch {
		case ok && key != "":
			t = mapped
		case p.Default != nil:
			t = *p.Default
		case key == "":
			return Target{}, refusal("The plan places each instance by its %s, and the request names none (%s): send it from a platform that does, or ask the platform operator for a plan with a default place.",
				p.By, contextField(p.By))
		default:
			return Target{}, refusal("The plan places each instance by its %s, and %s %s has no place (the plan has no default): ask the platform operator to map it in the catalog.",
				p.By, p.By, key)
		}
	}
	if p.RegionParameter == "" {
		return t, nil
	}
	var params map[string]json.RawMessage
	if raw := bytes.TrimSpace(req.Parameters); len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &params); err != nil {
			return Target{}, refusal("parameters: must be a JSON object")
		}
	}
	raw, ok := params[p.RegionParameter]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return t, nil
	}
	var region string
	if err := json.Unmarshal(raw, &region); err != nil || !slices.Contains(p.Regions, region) {
		return Target{}, refusal("parameters.%s: is not a Region the plan allows; choose one of %s", p.RegionParameter, list(p.Regions))
	}
	t.Region = region
	return t, nil
}

// templateParameters are a request's parameters without the placement's
// region parameter, which is the broker's, not the template's.
func (p *Placement) templateParameters(raw json.RawMessage) json.RawMessage {
	if p == nil || p.RegionParameter == "" || len(bytes.TrimSpace(raw)) == 0 {
		return raw
	}
	var params map[string]json.RawMessage
	if err := json.Unmarshal(raw, &params); err != nil {
		return raw // requestParameters says what is wrong with it
	}
	if _, ok := params[p.RegionParameter]; !ok {
		return raw
	}
	delete(params, p.RegionParameter)
	out, err := json.Marshal(params)
	if err != nil {
		return raw
	}
	return out
}

// CheckProvision refuses (the broker answers 400, before anything is
// written) a provision whose instance the plan has no place for: a
// context it does not map, a Region it does not allow.
func (s *Settings) CheckProvision(req broker.InstanceRequest) error {
	_, err := s.Placement.Resolve(req)
	return err
}

var _ broker.ProvisionCheck = (*Settings)(nil)

// Ready checks, where the broker runs, that every external id the
// placement reads from a variable is there.
func (p *Placement) Ready(getenv func(string) string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	for _, t := range p.Targets() {
		if t.ExternalIDEnv != "" && getenv(t.ExternalIDEnv) == "" {
			return catalog.Settingf(KeyPlacement, "the variable %s, which holds the external id of the role %s, is not set (or empty) where the broker runs: set it",
				t.ExternalIDEnv, t.RoleARN)
		}
	}
	return nil
}

// refusal is a request the placement has no place for, in words for users.
func refusal(format string, args ...any) *broker.Failure {
	return &broker.Failure{Description: fmt.Sprintf(format, args...)}
}

// checkPlacedHandlers refuses a placed plan whose templates declare a
// custom resource the broker's own functions answer (a binding's database,
// search or cache user) where no function can answer it: CloudFormation
// calls a custom resource's function in the stack's own account and
// Region, and outside the broker's own the target stack deploys them
// (infra, from the manifest's InTargetCustomResources), so every place of
// the plan is an account with a role (and its target stack). The database
// user's function is in the plan's network's VPC, which configureNetwork
// holds to the places.
func checkPlacedHandlers(s *Settings) error {
	if s.Placement == nil {
		return nil
	}
	for _, t := range []*Template{s.Template, s.BindingTemplate} {
		if t == nil {
			continue
		}
		i := slices.IndexFunc(t.Declared, func(r Resource) bool { return slices.Contains(deploy.BrokerHandled, r.Type) })
		if i < 0 {
			continue
		}
		for _, place := range s.Placement.Targets() {
			if place.RoleARN == "" {
				return catalog.Settingf(KeyPlacement, "has a place in the broker's own account but another Region (%s), and %s declares %s, whose function the broker deploys in its own Region and the target stack where it is deployed: no function could answer it there; deploy the target stack in that Region (of the broker's own account too) and place the plan with its role (role_arn), or use a template without it",
					place.Region, t.Path, t.Declared[i].Type)
			}
		}
	}
	return nil
}
