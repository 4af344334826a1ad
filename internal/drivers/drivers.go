// Package drivers is the one list of the drivers a catalog may name. It
// checks every plan's driver settings when the broker starts and builds,
// once, each driver the catalog uses: the local broker, the api function
// and the worker all build theirs here.
package drivers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/deploy"
)

// Env is what a driver may use.
type Env struct {
	// Resources is where a driver keeps its records.
	Resources broker.Resources
	// AWS returns the AWS configuration, loaded on first use, so that a
	// catalog without AWS drivers needs no AWS configuration.
	AWS func(context.Context) (aws.Config, error)
	// Getenv reads a driver's deployment settings (for example the
	// CloudFormation service role); os.Getenv outside tests.
	Getenv func(string) string
	Logger *slog.Logger
	// Settings returns the parsed settings of a plan of the catalog, by
	// id, as the catalog has them now (Build sets it): a driver whose
	// cleanup must go by the plan as it is, not as a detached resource's
	// record remembers it, looks them up here.
	Settings func(planID string) (settings any, ok bool)
	// Plans are every plan of the catalog with its parsed settings (Build
	// sets it): a driver that needs what all its plans say together (the
	// roles the CloudFormation driver assumes) reads them here.
	Plans []Configured
	// Stacks is what the CloudFormation driver does with stacks: RunStacks
	// changes them (the worker and the local broker), AdmitStacks only
	// answers a request (the api function, whose bootstrap then links no
	// client that changes a stack). A catalog with a cloudformation plan
	// needs one: a function that set none would fail at start rather than
	// link both.
	Stacks Stacks
}

// Kind is one driver a plan may name in its broker block.
type Kind struct {
	// Name is what a plan's broker.driver says.
	Name string
	// Configure checks one plan's driver settings (the broker block's keys
	// other than driver, mode and deprovision) and returns them parsed; the
	// value reaches the driver in every Change of the plan. Paths are
	// relative to dir, the catalog's directory. A *catalog.SettingError names the
	// key at fault.
	Configure func(plan *catalog.Plan, config map[string]any, dir string) (any, error)
	// New builds the driver, once, for every plan that names it.
	New func(ctx context.Context, env Env) (broker.Driver, error)
	// Ready, when set, checks at start what a plan's parsed settings need
	// from where the broker runs (a secret's variable or file), which
	// Configure cannot: the build of a bundle and cdk synth configure
	// the catalog without that environment. A *catalog.SettingError names
	// the key at fault.
	Ready func(settings any, env Env) error
	// Files, when set, lists the files a plan's parsed settings were read
	// from (templates), relative to the catalog's directory: the Lambda
	// bundles carry them beside the catalog.
	Files func(settings any) []string
	// Needs, when set, declares what the plans that name the kind need of
	// the stack (IAM statements of the functions' roles, the service role,
	// the environment it sets), from their parsed settings: the build
	// writes it into the bundles (Manifest) and infra grants it, naming no
	// driver.
	Needs func(plans []Configured) deploy.Needs
	// Warning, when set, says what a plan's parsed settings opt into that
	// is weaker than the default (a function plan on protocol 1), or "":
	// Build logs it once, naming the plan, when the broker starts.
	Warning func(settings any) string
}

// Stacks builds the CloudFormation driver for where it runs (Env.Stacks).
// Its signature names no type of the driver's own: a type that a func
// type reachable from an interface names keeps every method an interface
// call names, Begin's whole call tree included.
type Stacks func(ctx context.Context, env Env) (broker.Driver, error)

// Configured is one plan of a catalog and its parsed settings.
type Configured struct {
	Plan     *catalog.Plan
	Settings any
}

// Default is the driver of a plan whose broker block names none.
const Default = "demo"

// Kinds are the drivers, by name. This is the only list of them.
func Kinds() []Kind {
	return []Kind{demoKind(), cloudformationKind(), functionKind()}
}

// Omittable are the kinds a bootstrap may be built without, with the
// build tag osb_without_<name>: the build leaves out those its catalog
// names in no plan, and with them the SDK clients only they call (the
// function driver's Lambda client in a bundle of CloudFormation plans).
var Omittable = []string{"cloudformation", "function"}

// WithoutTags are the build tags that leave out of a bootstrap every
// omittable kind that none of used names.
func WithoutTags(used []string) []string {
	var tags []string
	for _, name := range Omittable {
		if !slices.Contains(used, name) {
			tags = append(tags, "osb_without_"+name)
		}
	}
	return tags
}

// omitted is a kind this bootstrap was built without (WithoutTags): a
// plan that names it is refused at start, saying how to build one with it.
func omitted(name string) Kind {
	return Kind{
		Name: name,
		Configure: func(*catalog.Plan, map[string]any, string) (any, error) {
			return nil, catalog.Settingf("driver", "this bootstrap was built without the %s driver, for a catalog that names it in no plan; build the bundles from this catalog (make build)", name)
		},
		New: func(context.Context, Env) (broker.Driver, error) { return nil, errOmitted(name) },
	}
}

func errOmitted(name string) error {
	return fmt.Errorf("this bootstrap was built without the %s driver (build tag osb_without_%s)", name, name)
}

// Names lists the drivers' names, for messages.
func Names() []string {
	var names []string
	for _, k := range Kinds() {
		names = append(names, k.Name)
	}
	return names
}

// Set is the drivers a catalog uses, built once, and each plan's settings.
type Set struct {
	byName map[string]broker.Driver
	plans  map[string]planDriver // by plan id
}

type planDriver struct {
	name     string
	settings any
}

// Build checks every plan's driver and settings and builds each driver the
// catalog uses. A catalog with problems gives one error, one problem per
// line, each naming the catalog file, the plan's field and the problem.
func Build(ctx context.Context, cat *catalog.Catalog, env Env) (*Set, error) {
	configured, err := configureAll(cat)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, c := range configured {
		if c.kind.Ready == nil {
			continue
		}
		if err := c.kind.Ready(c.settings, env); err != nil {
			problems = append(problems, problemLines(cat, c.plan, err)...)
		}
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	if err := checkLockAtStart(cat, configured); err != nil {
		return nil, err
	}
	if env.Logger != nil {
		for _, c := range configured {
			if c.kind.Warning == nil {
				continue
			}
			if w := c.kind.Warning(c.settings); w != "" {
				env.Logger.WarnContext(ctx, w, "driver", c.kind.Name, "plan_id", c.plan.ID, "plan", c.plan.Name)
			}
		}
	}
	s := &Set{byName: map[string]broker.Driver{}, plans: map[string]planDriver{}}
	kinds := map[string]Kind{}
	for _, c := range configured {
		s.plans[c.plan.ID] = planDriver{name: c.kind.Name, settings: c.settings}
		kinds[c.kind.Name] = c.kind
	}
	for _, c := range configured {
		env.Plans = append(env.Plans, Configured{Plan: c.plan, Settings: c.settings})
	}
	env.Settings = func(planID string) (any, bool) {
		pd, ok := s.plans[planID]
		return pd.settings, ok
	}
	for _, name := range slices.Sorted(maps.Keys(kinds)) {
		d, err := kinds[name].New(ctx, env)
		if err != nil {
			return nil, fmt.Errorf("driver %s: %w", name, err)
		}
		s.byName[name] = d
	}
	return s, nil
}

// Files lists the files the catalog's driver settings read, relative to
// the catalog's directory, each once, sorted. It checks the settings as
// Build does, without building any driver.
func Files(cat *catalog.Catalog) ([]string, error) {
	configured, err := configureAll(cat)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, c := range configured {
		if c.kind.Files != nil {
			for _, f := range c.kind.Files(c.settings) {
				seen[f] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// Manifest is what the catalog's deployment needs: the files its driver
// settings read (Files) and each used driver kind's declaration of what
// its plans need of the stack (Kind.Needs), the kinds by name. It checks
// the settings as Build does, without building any driver.
func Manifest(cat *catalog.Catalog) (deploy.Manifest, error) {
	var m deploy.Manifest
	files, err := Files(cat)
	if err != nil {
		return m, err
	}
	m.Files = files
	configured, err := configureAll(cat)
	if err != nil {
		return m, err
	}
	byKind := map[string][]Configured{}
	kinds := map[string]Kind{}
	for _, c := range configured {
		byKind[c.kind.Name] = append(byKind[c.kind.Name], Configured{Plan: c.plan, Settings: c.settings})
		kinds[c.kind.Name] = c.kind
	}
	for _, name := range slices.Sorted(maps.Keys(kinds)) {
		d := deploy.Driver{Name: name}
		if k := kinds[name]; k.Needs != nil {
			d.Needs = k.Needs(byKind[name])
		}
		m.Drivers = append(m.Drivers, d)
	}
	return m, m.Check()
}

// configured is one plan's driver and settings.
type configured struct {
	plan     *catalog.Plan
	kind     Kind
	settings any
}

// configureAll checks every plan's driver settings; its error lists every
// problem, one per line, in the catalog's order. The plans are configured
// on every processor at once: reading and checking the templates of the
// deployed catalog's plans, one after the other, was the largest part of
// the api's cold start after package init. A Kind's Configure is safe to
// call concurrently (it reads its plan and its files, and a driver's
// caches are safe for concurrent use).
func configureAll(cat *catalog.Catalog) ([]configured, error) {
	var plans []*catalog.Plan
	for _, svc := range cat.Services() {
		plans = append(plans, svc.Plans...)
	}
	type result struct {
		kind     Kind
		settings any
		err      error
	}
	results := make([]result, len(plans))
	var next atomic.Int64
	work := func() {
		for i := int(next.Add(1) - 1); i < len(plans); i = int(next.Add(1) - 1) {
			r := &results[i]
			r.kind, r.settings, r.err = configure(cat, plans[i])
		}
	}
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(plans)) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	out := make([]configured, 0, len(plans))
	var problems []string
	for i, r := range results {
		if r.err != nil {
			problems = append(problems, r.err.Error())
			continue
		}
		out = append(out, configured{plan: plans[i], kind: r.kind, settings: r.settings})
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	return out, nil
}

// configure finds a plan's kind and checks its settings; its error names
// the catalog file, the field and the problem.
func configure(cat *catalog.Catalog, p *catalog.Plan) (Kind, any, error) {
	name := p.Settings.Driver
	if name == "" {
		name = Default
	}
	for _, k := range Kinds() {
		if k.Name != name {
			continue
		}
		settings, err := k.Configure(p, p.Settings.Config, cat.Dir)
		if err == nil {
			return k, settings, nil
		}
		return k, nil, errors.New(strings.Join(problemLines(cat, p, err), "\n"))
	}
	return Kind{}, nil, fmt.Errorf("%s: %s.driver: no driver %q in this broker; the drivers are %s",
		cat.Source, p.Settings.Path, name, strings.Join(Names(), ", "))
}

// problemLines are the lines of a plan's settings' problems, each naming
// the catalog file, the plan's field and the problem; a driver may report
// several at once (errors.Join).
func problemLines(cat *catalog.Catalog, p *catalog.Plan, err error) []string {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	lines := make([]string, len(errs))
	for i, e := range errs {
		var se *catalog.SettingError
		switch {
		case errors.As(e, &se) && se.InPlan:
			lines[i] = fmt.Sprintf("%s: %s.%s: %s", cat.Source, p.Settings.PlanPath(), se.Key, se.Problem)
		case errors.As(e, &se):
			lines[i] = fmt.Sprintf("%s: %s.%s: %s", cat.Source, p.Settings.Path, se.Key, se.Problem)
		default:
			lines[i] = fmt.Sprintf("%s: %s: %v", cat.Source, p.Settings.Path, e)
		}
	}
	return lines
}

// For returns the driver of a plan and the plan's settings for it.
func (s *Set) For(p *catalog.Plan) (broker.Driver, any, bool) {
	pd, ok := s.plans[p.ID]
	if !ok {
		return nil, nil, false
	}
	return s.byName[pd.name], pd.settings, true
}

// Wrap replaces every driver d with wrap(d): fault injection in tests.
func (s *Set) Wrap(wrap func(broker.Driver) broker.Driver) {
	for name, d := range s.byName {
		s.byName[name] = wrap(d)
	}
}

// Single returns a Set that gives d, with no settings, for every plan of
// cat: for tests that drive a catalog with a driver of their own.
func Single(cat *catalog.Catalog, d broker.Driver) *Set {
	s := &Set{byName: map[string]broker.Driver{"test": d}, plans: map[string]planDriver{}}
	for _, svc := range cat.Services() {
		for _, p := range svc.Plans {
			s.plans[p.ID] = planDriver{name: "test"}
		}
	}
	return s
}
