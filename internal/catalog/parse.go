package catalog

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/serverless-osb/broker/internal/jsonenc"
)

// Rules that come from the spec (v2.17) and from Cloud Foundry's Cloud
// Controller, which refuses a broker whose catalog breaks them.
var (
	// allowedRequires are the only permissions an offering may require.
	allowedRequires = []string{"syslog_drain", "route_forwarding", "volume_mount"}
)

// maxSchemaBytes is the spec's limit on one schema, serialized: 64 kB.
const maxSchemaBytes = 64 << 10

// parse turns YAML into a checked catalog; see Parse.
func parse(source string, data []byte, lazy bool) (*Catalog, error) {
	ck := &checker{source: source, owners: map[ownerKey]string{}, lazy: lazy}
	doc, ok := ck.decode(data)
	if !ok {
		return nil, ck.err()
	}
	return ck.catalog(doc)
}

// decode reads YAML into JSON values (normalize), reporting what it cannot.
func (ck *checker) decode(data []byte) (any, bool) {
	raw, problems := yamlValues(data)
	if len(problems) > 0 {
		for _, p := range problems {
			ck.problem("", "%s", p)
		}
		return nil, false
	}
	if raw == nil {
		ck.problem("", `is empty; a catalog is a mapping with a "services" list`)
		return nil, false
	}
	doc := ck.normalize("", raw)
	return doc, len(ck.problems) == 0
}

// catalog checks a decoded catalog and builds it.
func (ck *checker) catalog(doc any) (*Catalog, error) {
	source := ck.source
	root, ok := doc.(map[string]any)
	if !ok {
		ck.problem("", `must be a mapping with a "services" list, got %s`, Describe(doc))
		return nil, ck.err()
	}
	for _, k := range sortedKeys(root) {
		if k != "services" && k != "networks" {
			ck.problem(field("", k), `unknown top-level key; the catalog has "services" and "networks" (broker settings go in each plan's "broker" block)`)
		}
	}
	ck.nets = ck.networks(root)
	list, ok := ck.list(root, "", "services", true)
	if !ok {
		return nil, ck.err()
	}

	c := &Catalog{Source: source, byService: map[string]*Service{}, byPlan: map[string]planEntry{}}
	for _, name := range slices.Sorted(maps.Keys(ck.nets)) {
		c.networks = append(c.networks, ck.nets[name])
	}
	names := map[string]string{} // offering name -> path of its offering
	for i, v := range list {
		p := index("services", i)
		obj, ok := v.(map[string]any)
		if !ok {
			ck.problem(p, "must be an object (a service offering), got %s", Describe(v))
			continue
		}
		s := ck.service(p, obj)
		if s.Name != "" {
			if prev, dup := names[s.Name]; dup {
				ck.problem(field(p, "name"), "%q is already the name of %s; offering names must be unique", s.Name, prev)
			} else {
				names[s.Name] = p
			}
		}
		c.services = append(c.services, s)
	}
	if len(ck.problems) > 0 {
		return nil, ck.err()
	}

	for _, s := range c.services {
		c.byService[s.ID] = s
		for _, pl := range s.Plans {
			c.byPlan[pl.ID] = planEntry{service: s, plan: pl}
		}
	}
	// The checks above took every broker block out of doc, so what is left
	// is what a platform may see.
	public := map[string]any{"services": list}
	if ck.lazy {
		// A checked catalog (LoadChecked: a function's bundle, whose build
		// encoded this very catalog at its check) encodes it when first
		// asked: the worker never is, nor the api at a cold start for
		// anything but the catalog, and encoding it took a quarter of the
		// load. Read from JSON, its values are JSON's: it cannot fail.
		c.public = sync.OnceValues(func() ([]byte, string) {
			body, err := jsonenc.Marshal(public)
			if err != nil {
				panic(fmt.Sprintf("%s: encode catalog as JSON: %v", source, err))
			}
			return body, etagOf(body)
		})
		return c, nil
	}
	body, err := jsonenc.Marshal(public)
	if err != nil {
		return nil, fmt.Errorf("%s: encode catalog as JSON: %w", source, err)
	}
	etag := etagOf(body)
	c.public = func() ([]byte, string) { return body, etag }
	return c, nil
}

// checker collects every problem with a catalog while it builds one.
type checker struct {
	source   string
	problems []string
	// owners maps each offering and plan id, and each dashboard client id,
	// to the path of the first thing that used it.
	owners   map[ownerKey]string
	compiled int // schemas compiled so far, to name each one
	// lazy leaves each parameters schema to be compiled on its first use
	// (LoadChecked).
	lazy bool
	// nets are the catalog's networks, by name, which plans resolve.
	nets map[string]*Network
}

// ownerKey is an id of some kind; see checker.unique.
type ownerKey struct{ kind, id string }

// problem records that the value at path (a field path such as
// services[0].plans[1].id, or "" for the whole file) is wrong.
func (ck *checker) problem(path, format string, args ...any) {
	var b strings.Builder
	b.WriteString(ck.source)
	b.WriteString(": ")
	if path != "" {
		b.WriteString(path)
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, format, args...)
	ck.problems = append(ck.problems, b.String())
}

// err returns every problem as one error, one per line.
func (ck *checker) err() error {
	return errors.New(strings.Join(ck.problems, "\n"))
}

// service checks an offering and builds it, plans included.
func (ck *checker) service(p string, obj map[string]any) *Service {
	s := &Service{}
	s.ID = ck.str(obj, p, "id", true)
	ck.unique(field(p, "id"), "id", s.ID, p)
	s.Name = ck.str(obj, p, "name", true)
	s.Description = ck.str(obj, p, "description", true)
	s.Bindable, _ = ck.boolean(obj, p, "bindable", true)
	s.PlanUpdateable, _ = ck.boolean(obj, p, "plan_updateable", false)
	s.InstancesRetrievable, _ = ck.boolean(obj, p, "instances_retrievable", false)
	s.BindingsRetrievable, _ = ck.boolean(obj, p, "bindings_retrievable", false)
	s.AllowContextUpdates, _ = ck.boolean(obj, p, "allow_context_updates", false)
	ck.stringList(obj, p, "tags")
	s.Requires = ck.stringList(obj, p, "requires")
	for i, r := range s.Requires {
		if !slices.Contains(allowedRequires, r) {
			ck.problem(index(field(p, "requires"), i), "%q is not a permission the spec defines; use %s", r, strings.Join(allowedRequires, ", "))
		}
	}
	ck.object(obj, p, "metadata")
	ck.dashboardClient(obj, p)
	ck.misspelled(obj, p)
	if _, ok := obj["broker"]; ok {
		ck.problem(field(p, "broker"), "broker settings belong in each plan, not in the offering")
	}

	plans, ok := ck.list(obj, p, "plans", true)
	if !ok {
		return s
	}
	if len(plans) == 0 {
		ck.problem(field(p, "plans"), "must list at least one plan")
	}
	names := map[string]string{} // plan name -> path of its plan
	for i, v := range plans {
		pp := index(field(p, "plans"), i)
		po, ok := v.(map[string]any)
		if !ok {
			ck.problem(pp, "must be an object (a service plan), got %s", Describe(v))
			continue
		}
		pl := ck.plan(pp, po)
		if pl.Name != "" {
			if prev, dup := names[pl.Name]; dup {
				ck.problem(field(pp, "name"), "%q is already the name of %s; plan names must be unique within their offering", pl.Name, prev)
			} else {
				names[pl.Name] = pp
			}
		}
		s.Plans = append(s.Plans, pl)
	}
	return s
}

// plan checks a plan and builds it. It takes the plan's broker block out of
// obj, so that it is never served.
func (ck *checker) plan(p string, obj map[string]any) *Plan {
	pl := &Plan{}
	pl.ID = ck.str(obj, p, "id", true)
	ck.unique(field(p, "id"), "id", pl.ID, p)
	pl.Name = ck.str(obj, p, "name", true)
	pl.Description = ck.str(obj, p, "description", true)
	ck.object(obj, p, "metadata")
	pl.Free = ck.optionalBool(obj, p, "free")
	pl.Bindable = ck.optionalBool(obj, p, "bindable")
	pl.PlanUpdateable = ck.optionalBool(obj, p, "plan_updateable")
	pl.BindingRotatable, _ = ck.boolean(obj, p, "binding_rotatable", false)
	ck.misspelled(obj, p)

	if mi, ok := ck.object(obj, p, "maintenance_info"); ok {
		mp := field(p, "maintenance_info")
		info := &MaintenanceInfo{}
		switch v := mi["version"].(type) {
		case int, int64, uint64, float64:
			ck.problem(field(mp, "version"), `must be a string, got a number (%v); quote it, e.g. "1.0.0"`, v)
		default:
			info.Version = ck.str(mi, mp, "version", true)
			if info.Version != "" && !isSemver(info.Version) {
				ck.problem(field(mp, "version"), `%q is not a semantic version (semver 2.0), e.g. "1.0.0"`, info.Version)
			}
		}
		info.Description = ck.str(mi, mp, "description", false)
		pl.MaintenanceInfo = info
	}

	if v, ok := obj["maximum_polling_duration"]; ok {
		mp := field(p, "maximum_polling_duration")
		switch n := v.(type) {
		case int:
			if n <= 0 {
				ck.problem(mp, "must be a positive integer (seconds), got %d", n)
			}
			pl.MaximumPollingDuration = n
		case uint64:
			ck.problem(mp, "%d seconds is too large", n)
		default:
			ck.problem(mp, "must be a positive integer (seconds), got %s", Describe(v))
		}
	}

	if sch, ok := ck.object(obj, p, "schemas"); ok {
		pl.schemas = ck.schemas(field(p, "schemas"), sch)
	}

	pl.Settings = ck.settings(p, obj)
	ck.outageBudget(pl)
	delete(obj, "broker")
	return pl
}

// settings checks a plan's broker block and fills in its defaults: mode
// sync, deprovision wait. The driver's own settings (every other key) are
// kept for the driver to check (see Settings.Config).
func (ck *checker) settings(p string, plan map[string]any) Settings {
	bp := field(p, "broker")
	st := Settings{Mode: ModeSync, Deprovision: DeprovisionWait, Path: bp}
	b, ok := ck.object(plan, p, "broker")
	if !ok {
		return st
	}
	for _, k := range sortedKeys(b) {
		if !slices.Contains(brokerKeys, k) {
			if st.Config == nil {
				st.Config = map[string]any{}
			}
			st.Config[k] = b[k]
		}
	}
	if _, ok := b["driver"]; ok {
		st.Driver = ck.str(b, bp, "driver", true)
	}
	if _, ok := b["mode"]; ok {
		switch m := Mode(ck.str(b, bp, "mode", true)); m {
		case ModeSync, ModeAsync, ModeAsyncOnly:
			st.Mode = m
		case "":
			// ck.str has said why.
		default:
			ck.problem(field(bp, "mode"), "%q is not a mode; use %s, %s or %s", m, ModeSync, ModeAsync, ModeAsyncOnly)
		}
	}
	if _, ok := b["deprovision"]; ok {
		switch d := DeprovisionMode(ck.str(b, bp, "deprovision", true)); d {
		case DeprovisionWait, DeprovisionDetach:
			st.Deprovision = d
		case "":
		default:
			ck.problem(field(bp, "deprovision"), "%q is not a deprovision mode; use %s or %s", d, DeprovisionWait, DeprovisionDetach)
		}
	}
	ck.network(&st, b, ck.nets)
	st.SensitiveParameters, _ = ck.boolean(b, bp, "sensitive_parameters", false)
	st.OutageBudget = ck.duration(b, bp, "outage_budget")
	st.CredentialLifetime = ck.duration(b, bp, "credential_lifetime")
	st.CredentialRenewal = ck.duration(b, bp, "credential_renewal")
	switch {
	case st.CredentialRenewal != 0 && st.CredentialLifetime == 0:
		ck.problem(field(bp, "credential_renewal"), "is set without credential_lifetime; set both, or neither")
	case st.CredentialRenewal >= st.CredentialLifetime && st.CredentialLifetime != 0:
		ck.problem(field(bp, "credential_renewal"), "must be shorter than credential_lifetime (%s), to leave time to renew", st.CredentialLifetime)
	case st.CredentialLifetime != 0 && st.CredentialRenewal == 0:
		st.CredentialRenewal = st.CredentialLifetime / 5
	}
	return st
}

// brokerKeys are the broker block's keys that are the broker's; every
// other key is the driver's.
var brokerKeys = []string{"driver", "mode", "deprovision", "credential_lifetime", "credential_renewal", "sensitive_parameters", "outage_budget", "network"}

// outageBudget checks a plan's outage_budget against its
// maximum_polling_duration, after which the reaper stops an operation (the
// budget must run out first, so that the failure says why), and fills in
// the default: DefaultOutageBudget, or half the maximum polling duration
// when that is shorter.
func (ck *checker) outageBudget(pl *Plan) {
	st := &pl.Settings
	maxPolling := time.Duration(pl.MaximumPollingDuration) * time.Second
	switch {
	case st.OutageBudget > MaxOutageBudget:
		ck.problem(field(st.Path, "outage_budget"), "must be at most %s, got %s", MaxOutageBudget, st.OutageBudget)
	case st.OutageBudget != 0 && maxPolling > 0 && st.OutageBudget >= maxPolling:
		ck.problem(field(st.Path, "outage_budget"), "must be shorter than the plan's maximum_polling_duration (%s), after which the operation is stopped; got %s", maxPolling, st.OutageBudget)
	case st.OutageBudget == 0 && maxPolling > 0 && maxPolling <= DefaultOutageBudget:
		st.OutageBudget = maxPolling / 2
	case st.OutageBudget == 0:
		st.OutageBudget = DefaultOutageBudget
	}
}

// BrokerKeys lists the broker block's keys that are the broker's ("driver,
// mode, … and credential_renewal"), for the drivers' messages about the
// keys that are theirs.
func BrokerKeys() string {
	last := len(brokerKeys) - 1
	return strings.Join(brokerKeys[:last], ", ") + " and " + brokerKeys[last]
}

// SettingError is a problem with one key of a plan's driver settings (its
// broker block); the drivers return it, and the broker names the catalog
// file and the plan's field with it. A driver whose settings depend on
// another field of the plan (its schemas) names that field, with InPlan.
type SettingError struct {
	Key     string
	Problem string
	// InPlan: Key is a field of the plan (e.g.
	// "schemas.service_instance.create.parameters"), not of its broker block.
	InPlan bool
}

func (e *SettingError) Error() string { return e.Key + ": " + e.Problem }

// Settingf returns a *SettingError.
func Settingf(key, format string, args ...any) error {
	return &SettingError{Key: key, Problem: fmt.Sprintf(format, args...)}
}

// PlanFieldf returns a *SettingError about a field of the plan outside its
// broker block.
func PlanFieldf(field, format string, args ...any) error {
	return &SettingError{Key: field, Problem: fmt.Sprintf(format, args...), InPlan: true}
}

// PlanPath is where the plan of a broker block is in the catalog, e.g.
// "services[0].plans[1]" for the block at "services[0].plans[1].broker".
func (s Settings) PlanPath() string { return strings.TrimSuffix(s.Path, ".broker") }

// duration reads an optional positive duration such as "720h" or "90m".
func (ck *checker) duration(obj map[string]any, p, key string) time.Duration {
	if _, ok := obj[key]; !ok {
		return 0
	}
	s := ck.str(obj, p, key, true)
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Minute {
		ck.problem(field(p, key), "must be a duration of a minute or more, such as \"720h\" or \"90m\", got %s", Describe(s))
		return 0
	}
	return d
}

// dashboardClient checks the Cloud Foundry dashboard_client extension, which
// Cloud Controller requires to be complete and unique.
func (ck *checker) dashboardClient(obj map[string]any, p string) {
	dc, ok := ck.object(obj, p, "dashboard_client")
	if !ok {
		return
	}
	dp := field(p, "dashboard_client")
	id := ck.str(dc, dp, "id", true)
	ck.unique(field(dp, "id"), "dashboard_client id", id, p)
	ck.str(dc, dp, "secret", true)
	ck.str(dc, dp, "redirect_uri", true)
}

// misspelled refuses plan_updatable: the spec spells the field
// plan_updateable, and a platform would ignore the other spelling.
func (ck *checker) misspelled(obj map[string]any, p string) {
	if _, ok := obj["plan_updatable"]; ok {
		ck.problem(field(p, "plan_updatable"), "the spec spells this field plan_updateable")
	}
}

// unique records that the thing at owner uses id as its kind of id ("id"
// for offerings and plans, "dashboard_client id"), and reports an id that
// something else already uses. Offering and plan ids share one namespace:
// the spec wants each globally unique.
func (ck *checker) unique(path, kind, id, owner string) {
	if id == "" {
		return
	}
	key := ownerKey{kind, id}
	if prev, dup := ck.owners[key]; dup {
		ck.problem(path, "%q is already the %s of %s; %ss must be unique across the catalog", id, kind, prev, kind)
		return
	}
	ck.owners[key] = owner
}

// str returns obj[key] if it is a string that is not blank. A required field
// must be present; an optional one may be absent, but when present it too
// must be a non-empty string, as the spec wants of every string.
func (ck *checker) str(obj map[string]any, p, key string, required bool) string {
	v, present := obj[key]
	if required && (!present || v == nil) {
		ck.problem(field(p, key), "is required")
		return ""
	}
	if !present {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		ck.problem(field(p, key), "must be a string, got %s", Describe(v))
		return ""
	}
	if strings.TrimSpace(s) == "" {
		ck.problem(field(p, key), "must not be empty")
		return ""
	}
	return s
}

// boolean returns obj[key] and whether it is set, reporting a value that is
// not true or false.
func (ck *checker) boolean(obj map[string]any, p, key string, required bool) (value, set bool) {
	v, present := obj[key]
	if required && (!present || v == nil) {
		ck.problem(field(p, key), "is required (true or false)")
		return false, false
	}
	if !present {
		return false, false
	}
	b, ok := v.(bool)
	if !ok {
		ck.problem(field(p, key), "must be a boolean (true or false), got %s", Describe(v))
		return false, false
	}
	return b, true
}

// optionalBool is boolean for a field whose absence means "inherit".
func (ck *checker) optionalBool(obj map[string]any, p, key string) *bool {
	if b, ok := ck.boolean(obj, p, key, false); ok {
		return &b
	}
	return nil
}

// object returns obj[key] if it is present and an object.
func (ck *checker) object(obj map[string]any, p, key string) (map[string]any, bool) {
	v, present := obj[key]
	if !present {
		return nil, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		ck.problem(field(p, key), "must be an object, got %s", Describe(v))
	}
	return m, ok
}

// list returns obj[key] if it is a list.
func (ck *checker) list(obj map[string]any, p, key string, required bool) ([]any, bool) {
	v, present := obj[key]
	if required && (!present || v == nil) {
		ck.problem(field(p, key), "is required (a list)")
		return nil, false
	}
	if !present {
		return nil, false
	}
	l, ok := v.([]any)
	if !ok {
		ck.problem(field(p, key), "must be a list, got %s", Describe(v))
	}
	return l, ok
}

// stringList returns obj[key] if it is a list of strings.
func (ck *checker) stringList(obj map[string]any, p, key string) []string {
	l, ok := ck.list(obj, p, key, false)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(l))
	for i, v := range l {
		s, ok := v.(string)
		if !ok {
			ck.problem(index(field(p, key), i), "must be a string, got %s", Describe(v))
			continue
		}
		out = append(out, s)
	}
	return out
}

// normalize turns what yaml.v3 decodes into values encoding/json can
// encode, reporting what JSON cannot hold: mapping keys that are not
// strings, NaN and infinities, and YAML-only types.
func (ck *checker) normalize(p string, v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for _, k := range sortedKeys(v) { // sorted, so that problems come in a stable order
			out[k] = ck.normalize(field(p, k), v[k])
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			ks, ok := k.(string)
			if !ok {
				ck.problem(p, "mapping key %v is not a string; JSON object keys are strings (quote it)", k)
				continue
			}
			out[ks] = ck.normalize(field(p, ks), e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = ck.normalize(index(p, i), e)
		}
		return out
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			ck.problem(p, "%v cannot be written in JSON", v)
		}
		return v
	case nil, string, bool, int, int64, uint64:
		return v
	default:
		ck.problem(p, "a YAML %T cannot be written in JSON", v)
		return nil
	}
}

// Describe says what a configuration value is, for "must be X, got Y"
// messages, the catalog's and the drivers' settings' alike.
func Describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("a boolean (%t)", v)
	case string:
		if r := []rune(v); len(r) > 40 {
			v = string(r[:40]) + "…"
		}
		return fmt.Sprintf("a string (%q)", v)
	case int, int64, uint64, float64:
		return fmt.Sprintf("a number (%v)", v)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("a %T", v)
	}
}

// field returns the path of key within the value at p.
func field(p, key string) string {
	if key == "" || strings.ContainsAny(key, ".[]\"' \t\n") {
		return p + "[" + strconv.Quote(key) + "]"
	}
	if p == "" {
		return key
	}
	return p + "." + key
}

// index returns the path of item i of the list at p.
func index(p string, i int) string {
	return p + "[" + strconv.Itoa(i) + "]"
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// isSemver reports whether v is a semantic version 2.0, by semver.org's
// grammar: MAJOR.MINOR.PATCH, numbers without leading zeros, then an
// optional pre-release (-, dot-separated identifiers of [0-9A-Za-z-], a
// numeric one without leading zeros) and build metadata (+, dot-separated
// identifiers of [0-9A-Za-z-]). Written out rather than semver.org's
// regular expression, whose compilation took about 0.1 ms of every
// function's cold start (TestIsSemverIsSemverOrgsPattern holds it to it).
func isSemver(v string) bool {
	v, build, hasBuild := strings.Cut(v, "+")
	if hasBuild && !semverIdentifiers(build, false) {
		return false
	}
	core, pre, hasPre := strings.Cut(v, "-")
	if hasPre && !semverIdentifiers(pre, true) {
		return false
	}
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return false
	}
	for _, n := range parts {
		if !semverNumber(n) {
			return false
		}
	}
	return true
}

// semverNumber is a numeric identifier: digits, no leading zero.
func semverNumber(s string) bool {
	if s == "" || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// semverIdentifiers are dot-separated identifiers of [0-9A-Za-z-]; in a
// pre-release, one of digits alone is a number (no leading zero).
func semverIdentifiers(s string, pre bool) bool {
	for id := range strings.SplitSeq(s, ".") {
		if id == "" {
			return false
		}
		digits := true
		for i := range len(id) {
			c := id[i]
			switch {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-':
				digits = false
			default:
				return false
			}
		}
		if pre && digits && !semverNumber(id) {
			return false
		}
	}
	return true
}
