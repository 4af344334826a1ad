package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Mode says how the broker runs the changes (provision, update, deprovision,
// bind, unbind) of a plan's instances and bindings.
type Mode string

const (
	// ModeSync completes every change in the request.
	ModeSync Mode = "sync"
	// ModeAsync runs a change asynchronously when the platform sends
	// accepts_incomplete=true, and synchronously otherwise.
	ModeAsync Mode = "async"
	// ModeAsyncOnly runs every change asynchronously and answers
	// 422 AsyncRequired when the platform does not send accepts_incomplete=true.
	ModeAsyncOnly Mode = "async-only"
)

// Settings are the broker's own settings for a plan: the `broker:` block of
// the plan in catalog.yaml. They are never served.
type Settings struct {
	// Driver names the driver that does the work for the plan's instances;
	// empty when the block names none (the broker's drivers have a default).
	Driver string
	// Mode says whether the plan's changes run synchronously.
	Mode Mode
	// Deprovision says how an instance's resource goes: DeprovisionWait
	// deletes it and answers when it is gone; DeprovisionDetach detaches it,
	// answers at once, and lets the cleanup workflow delete it.
	Deprovision DeprovisionMode
	// CredentialLifetime, when set, is how long a binding's credentials are
	// valid: bindings then carry expires_at, and renew_before
	// CredentialRenewal earlier (default: a fifth of the lifetime), in
	// their bind and fetch answers.
	CredentialLifetime time.Duration
	CredentialRenewal  time.Duration
	// SensitiveParameters says that the request parameters of the plan's
	// instances and bindings may hold secrets: the broker stores them
	// sealed, as it does credentials (`sensitive_parameters: true`).
	SensitiveParameters bool
	// OutageBudget is how long an operation waits out a backend that does
	// not answer (connection refused, timeouts, 5xx, 429, throttling),
	// retrying with backoff, before it fails (`outage_budget`, default
	// DefaultOutageBudget; always shorter than maximum_polling_duration,
	// after which the reaper stops the operation).
	OutageBudget time.Duration
	// Network is where the plan's resources live (broker.network, or the
	// catalog's default network); nil when neither. NetworkNamed says the
	// plan named it, so that a driver whose templates take no network can
	// refuse the setting rather than ignore it.
	Network      *Network
	NetworkNamed bool
	// Networks, when broker.network is a list, are the networks it names,
	// one per account and Region of a placed plan's places (the driver
	// picks the one of each instance's place); Network is then nil.
	Networks []*Network
	// Config holds the driver's own settings: every other key of the block,
	// as decoded from YAML (nil when there are none). The driver checks
	// them when the broker starts.
	Config map[string]any
	// Path is where the block is in the catalog, e.g.
	// "services[0].plans[1].broker", for error messages.
	Path string
}

// DefaultOutageBudget is a plan's OutageBudget when its broker block sets
// none: a backend's deploy or a short outage of its API is waited out.
const DefaultOutageBudget = 30 * time.Minute

// MaxOutageBudget bounds OutageBudget: an operation's execution times out
// after 25 hours, and the reaper stops an operation after 24 by default.
const MaxOutageBudget = 12 * time.Hour

// DeprovisionMode is how a plan deprovisions.
type DeprovisionMode string

// The deprovision modes.
const (
	DeprovisionWait   DeprovisionMode = "wait"
	DeprovisionDetach DeprovisionMode = "detach"
)

// MaintenanceInfo is a plan's maintenance_info. A platform that sends a
// different version on provision or update gets 422 MaintenanceInfoConflict.
type MaintenanceInfo struct {
	Version     string // semantic version 2.0
	Description string // may be empty
}

// Plan is a service plan, as the broker needs it. The served form is
// Catalog.JSON.
type Plan struct {
	ID          string
	Name        string
	Description string
	// Free, Bindable and PlanUpdateable are nil when the catalog leaves them
	// out. The spec's default for free is true; bindable and plan_updateable
	// default to the offering's (see Service.PlanBindable and
	// Service.PlanIsUpdateable).
	Free           *bool
	Bindable       *bool
	PlanUpdateable *bool
	// BindingRotatable says whether bindings may be rotated with
	// predecessor_binding_id (v2.17). Defaults to false.
	BindingRotatable bool
	// MaintenanceInfo is nil when the plan has none.
	MaintenanceInfo *MaintenanceInfo
	// MaximumPollingDuration is the plan's maximum_polling_duration in
	// seconds; 0 when the catalog leaves it out.
	MaximumPollingDuration int
	// Settings are the plan's broker settings, with defaults filled in.
	Settings Settings

	schemas [numSchemaKinds]*paramSchema
}

// Service is a service offering, as the broker needs it.
type Service struct {
	ID                   string
	Name                 string
	Description          string
	Bindable             bool
	PlanUpdateable       bool
	InstancesRetrievable bool
	BindingsRetrievable  bool
	AllowContextUpdates  bool
	// Requires lists the permissions the offering asks for: syslog_drain,
	// route_forwarding, volume_mount.
	Requires []string
	// Plans are in catalog order; there is at least one.
	Plans []*Plan
}

// PlanBindable says whether instances of plan p can be bound: the plan's
// bindable when it sets one, the offering's otherwise.
func (s *Service) PlanBindable(p *Plan) bool {
	if p.Bindable != nil {
		return *p.Bindable
	}
	return s.Bindable
}

// PlanIsUpdateable says whether an instance of plan p may change to another
// plan: the plan's plan_updateable when it sets one, the offering's otherwise.
// Without it a platform may still update parameters and maintenance_info.
func (s *Service) PlanIsUpdateable(p *Plan) bool {
	if p.PlanUpdateable != nil {
		return *p.PlanUpdateable
	}
	return s.PlanUpdateable
}

// Catalog is a checked, immutable catalog.
type Catalog struct {
	// Source names the catalog in errors (its file's base name).
	Source string
	// Dir is the directory the catalog was loaded from: paths in driver
	// settings are relative to it. Empty for a parsed catalog (the
	// working directory).
	Dir string

	services  []*Service
	networks  []*Network
	byService map[string]*Service
	byPlan    map[string]planEntry
	// public is the body of GET /v2/catalog and its entity tag.
	public func() (body []byte, etag string)
}

type planEntry struct {
	service *Service
	plan    *Plan
}

// Errors Lookup wraps, so that callers can tell them apart with errors.Is.
// Every one of them means the request named something the catalog does not
// offer: a 400 Bad Request.
var (
	ErrUnknownService   = errors.New("unknown service_id")
	ErrUnknownPlan      = errors.New("unknown plan_id")
	ErrPlanNotInService = errors.New("plan does not belong to service")
)

// Load reads the catalog file at path and parses it (see Parse). Errors name
// the file by its base name.
func Load(path string) (*Catalog, error) {
	return load(path, false)
}

// LoadChecked is Load for a catalog that Load has already accepted (the
// one make build bundles with the functions, which it loads first): every
// check is made but the compilation of the plans' parameters schemas
// against their drafts' metaschemas, which waits for each schema's first
// use. Compiling them all was most of a Lambda function's start, before
// its first answer, for schemas most containers never use. It reads the
// catalog's pre-parsed form (Preparse) when one made from it is beside it,
// or, when path is missing, the pre-parsed form alone: the bundles ship it
// without the YAML, which no function reads (make build made it from the
// YAML it checked, and the stack's synthesis checks it was that catalog).
func LoadChecked(path string) (*Catalog, error) {
	return load(path, true)
}

func load(path string, lazy bool) (*Catalog, error) {
	data, err := os.ReadFile(path)
	if lazy && errors.Is(err, fs.ErrNotExist) {
		c, perr := loadPreparsedAlone(path)
		if perr != nil {
			return nil, perr
		}
		c.Dir = filepath.Dir(path)
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read catalog: %w", err)
	}
	var c *Catalog
	if lazy {
		c, err = loadPreparsed(path, data)
	} else {
		c, err = parse(filepath.Base(path), data, false)
	}
	if err != nil {
		return nil, err
	}
	c.Dir = filepath.Dir(path)
	return c, nil
}

// Parse parses and checks a YAML catalog. source names it in errors, for
// example "catalog.yaml".
//
// A catalog that breaks any rule gives one error listing every problem found,
// one per line, each as "source: path: problem", for example
//
//	catalog.yaml: services[0].plans[1].maintenance_info.version: "1.0" is not a semantic version (semver 2.0), e.g. "1.0.0"
func Parse(source string, data []byte) (*Catalog, error) {
	return parse(source, data, false)
}

// JSON returns the body of GET /v2/catalog: the catalog's services as
// written, vendor fields included, without the broker blocks. It is computed
// once, at load (LoadChecked: at the first call); each call returns a fresh
// copy.
func (c *Catalog) JSON() []byte {
	body, _ := c.public()
	return slices.Clone(body)
}

// ETag returns the strong entity tag of JSON, quoted as the ETag header
// wants it, e.g. "\"3f2a…\"". Two loads of the same catalog give the same tag.
func (c *Catalog) ETag() string {
	_, etag := c.public()
	return etag
}

// Services returns the offerings in catalog order. Callers must not modify
// the slice.
func (c *Catalog) Services() []*Service {
	return c.services
}

// Service returns the offering with that id, or nil.
func (c *Catalog) Service(id string) *Service {
	return c.byService[id]
}

// SensitiveParameters says whether the plan with that id keeps its
// instances' and bindings' parameters sealed (false for a plan the catalog
// does not have).
func (c *Catalog) SensitiveParameters(planID string) bool {
	_, p := c.PlanByID(planID)
	return p != nil && p.Settings.SensitiveParameters
}

// SensitivePlanIDs are the ids of the plans with sensitive_parameters.
func (c *Catalog) SensitivePlanIDs() []string {
	var ids []string
	for id := range c.byPlan {
		if c.SensitiveParameters(id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// PlanByID returns the plan with that id and its offering, or nils.
func (c *Catalog) PlanByID(id string) (*Service, *Plan) {
	e := c.byPlan[id]
	return e.service, e.plan
}

// Lookup returns the offering and plan a request names. Its error wraps
// ErrUnknownService, ErrUnknownPlan or ErrPlanNotInService and reads well as
// the description of a 400 response.
func (c *Catalog) Lookup(serviceID, planID string) (*Service, *Plan, error) {
	s := c.byService[serviceID]
	if s == nil {
		return nil, nil, fmt.Errorf("%w %q", ErrUnknownService, serviceID)
	}
	e, ok := c.byPlan[planID]
	if !ok {
		return nil, nil, fmt.Errorf("%w %q", ErrUnknownPlan, planID)
	}
	if e.service != s {
		return nil, nil, fmt.Errorf("%w: plan_id %q (plan %q) belongs to service_id %q (offering %q), not to service_id %q (offering %q)",
			ErrPlanNotInService, planID, e.plan.Name, e.service.ID, e.service.Name, s.ID, s.Name)
	}
	return s, e.plan, nil
}

// etagOf returns the strong, quoted entity tag of a representation.
func etagOf(body []byte) string {
	sum := sha256.Sum256(body)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}
