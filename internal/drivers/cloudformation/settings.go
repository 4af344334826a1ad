package cloudformation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/cfnregistry"
)

// MaxTemplateBody is CreateStack's and CreateChangeSet's limit on
// TemplateBody, in bytes. The driver hands a larger template (up to
// MaxTemplateURLBody) to CloudFormation from S3, as TemplateURL
// (templates.go).
const MaxTemplateBody = 51200

// DefaultRetryAfter is how long the broker waits between checks of a stack
// when a plan does not say.
const DefaultRetryAfter = 10 * time.Second

// BoundaryParameter is the template parameter the driver sets to the
// deployment's permissions boundary (env.PermissionsBoundaryARN): every
// IAM user or role a template makes names it as its PermissionsBoundary,
// and the service role may make none without it. Neither users nor plans
// may set it.
const BoundaryParameter = "PermissionsBoundaryArn"

// boundedTypes are the resource types that make an IAM identity, which
// must carry the boundary.
var boundedTypes = []string{"AWS::IAM::User", "AWS::IAM::Role"}

// Setting keys of a plan's broker block.
const (
	KeyTemplate          = "template"
	KeyBindingTemplate   = "binding_template"
	KeyParameters        = "parameters"
	KeyBindingParameters = "binding_parameters"
	KeyRetryAfter        = "retry_after"
	KeyAllowReplacement  = "allow_replacement"
)

var settingKeys = []string{KeyTemplate, KeyBindingTemplate, KeyParameters, KeyBindingParameters, KeyRetryAfter, KeyAllowReplacement,
	KeyPlacement, KeyBindingCredentials, KeyTrustAnchorARN}

// Settings are one plan's CloudFormation settings, checked and parsed once
// when the broker starts.
type Settings struct {
	// Template makes each instance's stack.
	Template *Template
	// BindingTemplate makes each binding's stack; nil when bindings only
	// hand out the instance's outputs.
	BindingTemplate *Template
	// Parameters and BindingParameters are the values the plan fixes, as
	// CloudFormation takes them (strings); users cannot override them.
	Parameters        map[string]string
	BindingParameters map[string]string
	// RetryAfter is the time between checks of a stack.
	RetryAfter time.Duration
	// Accepted lists, sorted, the parameters users may set on each kind of
	// request: the properties the plan's schema of that kind names; none
	// when it has no such schema. The driver passes on these alone, so a
	// template parameter the plan neither fixes nor names stays as the
	// operator wrote it (its Default), whatever a schema without
	// additionalProperties: false would let through.
	Accepted map[catalog.SchemaKind][]string
	// AllowReplacement lists the logical ids of the instance template's
	// data-holding resources that an update may replace or remove (the
	// operator's decision; see changeset.go).
	AllowReplacement []string
	// Placement says where the plan's instances live; nil: in the
	// broker's own account and Region (placement.go).
	Placement *Placement
	// Network is the network whose VPC, subnets and client rules the
	// plan's templates are fixed to; nil when they take none (network.go).
	// For a placed plan, PlaceNetworks are its networks by place (account
	// and Region: placeKey), and each instance's stacks take the one of
	// its place (networkAt); Network is then the first one.
	Network       *catalog.Network
	PlaceNetworks map[string]*catalog.Network
	// digest is PlanDigest, computed once, on its first use: a plan's
	// templates JSON-encoded and hashed was a tenth of configuring the
	// deployed catalog at every function's start, and only a version
	// change or the lock check reads it.
	digest *lazyDigest
	// BindingCredentials is what a binding hands out: CredentialsAccessKey
	// (the binding template's IAM user and key) or CredentialsRole (its
	// IAM role, for the bound app's instance identity; roles.go), whose
	// trust anchor is TrustAnchorARN (empty: not registered yet, and
	// every bind is refused).
	BindingCredentials string
	TrustAnchorARN     string
	// UsersWithoutNetwork: the binding template declares the database user
	// function's parameter, but the plan has no network to run it in;
	// every bind is refused until it has one.
	UsersWithoutNetwork bool
}

// AcceptedParameters lists the parameters users may set on a request of
// kind k; the broker refuses (400) a request that sends any other.
func (s *Settings) AcceptedParameters(k catalog.SchemaKind) []string {
	if k == catalog.InstanceCreate && s.Placement != nil && s.Placement.RegionParameter != "" {
		return slices.Sorted(slices.Values(append(slices.Clone(s.Accepted[k]), s.Placement.RegionParameter)))
	}
	return s.Accepted[k]
}

// Template is a CloudFormation template as the driver needs it.
type Template struct {
	// Path is the file, as the catalog names it (for messages).
	Path string
	// Body is sent as TemplateBody, as written, or, over MaxTemplateBody,
	// put in S3 and named by TemplateURL.
	Body string
	// Parameters are the parameters the template declares, by name.
	Parameters map[string]Parameter
	// Resources counts the resources the template declares (with
	// conditional ones: the most a stack can have).
	Resources int
	// Declared are the resources the template declares, by logical id.
	Declared []Resource
	// Outputs are the names of the template's outputs, sorted.
	Outputs []string
	// PrivateOutputs are outputs of an instance template that no binding's
	// credentials carry (a master secret's ARN, which a binding template
	// takes as a parameter for the broker's function alone): the
	// template's Metadata, serverless-osb: {private_outputs: [NAME, ...]}.
	PrivateOutputs []string
	// Macros are the macros the template runs: its top-level Transform
	// (a name or a list of names) and each Fn::Transform (!Transform) it
	// holds, as "Transform NAME" and "Fn::Transform at PATH".
	Macros []string
}

// Resource is one resource a template declares.
type Resource struct {
	LogicalID string
	Type      string
	// Properties are the top-level properties it sets, however
	// conditionally (an !If with AWS::NoValue counts as set).
	Properties map[string]any
	// DeletionPolicy is the template's, if it sets one.
	DeletionPolicy string
}

// RegistryResources are the template's resources as cfnregistry checks
// them.
func (t *Template) RegistryResources() []cfnregistry.Resource {
	out := make([]cfnregistry.Resource, 0, len(t.Declared))
	for _, r := range t.Declared {
		out = append(out, cfnregistry.Resource{File: t.Path, LogicalID: r.LogicalID, Type: r.Type,
			Properties: propertyPaths(r.Properties)})
	}
	return out
}

// propertyPaths are the paths of the properties values sets, sorted: each
// top-level name, and each nested one as "Parent/Child", through lists
// and through intrinsic functions (both branches of an Fn::If).
func propertyPaths(values map[string]any) []string {
	seen := map[string]bool{}
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			for k, child := range v {
				if k == "Ref" || strings.HasPrefix(k, "Fn::") {
					walk(child, at)
					continue
				}
				path := k
				if at != "" {
					path = at + "/" + k
				}
				seen[path] = true
				walk(child, path)
			}
		case []any:
			for _, e := range v {
				walk(e, at)
			}
		}
	}
	walk(values, "")
	return slices.Sorted(maps.Keys(seen))
}

// Parameter is one declared template parameter.
type Parameter struct {
	Type       string
	HasDefault bool
	// Default is the Default's value as CloudFormation takes it (a list's
	// items joined by commas), when HasDefault.
	Default string
	// AllowedValues, when the template lists them, as strings.
	AllowedValues []string
}

// IsList says whether the parameter takes a comma-delimited list.
func (p Parameter) IsList() bool {
	return p.Type == "CommaDelimitedList" || strings.HasPrefix(p.Type, "List<")
}

// Configure checks a plan's settings (its broker block without driver, mode
// and deprovision) and reads its templates; paths are relative to dir, the
// catalog's directory. Users may set exactly the template parameters that
// the plan's schema of the request's kind names in its properties (see
// checkSchemas); a template parameter without a Default must have a value
// from somewhere: the plan's fixed parameters, the instance's outputs
// (binding template), or a property of the create schema.
func Configure(plan *catalog.Plan, config map[string]any, dir string) (*Settings, error) {
	for _, k := range slices.Sorted(maps.Keys(config)) {
		if !slices.Contains(settingKeys, k) {
			return nil, catalog.Settingf(k, "unknown key; the cloudformation driver's settings are %s (%s are the broker's)",
				strings.Join(settingKeys, ", "), catalog.BrokerKeys())
		}
	}
	s := &Settings{RetryAfter: DefaultRetryAfter}

	path, err := pathSetting(config, KeyTemplate, true)
	if err != nil {
		return nil, err
	}
	if s.Template, err = readTemplate(KeyTemplate, path, dir); err != nil {
		return nil, err
	}
	if path, err = pathSetting(config, KeyBindingTemplate, false); err != nil {
		return nil, err
	}
	if path != "" {
		if s.BindingTemplate, err = readTemplate(KeyBindingTemplate, path, dir); err != nil {
			return nil, err
		}
	}

	if err := configureCredentials(config, s); err != nil {
		return nil, err
	}
	if s.Parameters, err = fixedParameters(config, KeyParameters, KeyTemplate, s.Template, nil); err != nil {
		return nil, err
	}
	if plan != nil && plan.BindingRotatable && s.BindingTemplate == nil {
		// A binding without a stack of its own answers the instance's
		// shared credentials: its successor would get the same ones.
		return nil, catalog.Settingf(KeyBindingTemplate, "is missing, but the plan is binding_rotatable: a rotated binding needs credentials of its own, made by a binding template")
	}
	if _, ok := config[KeyBindingParameters]; ok && s.BindingTemplate == nil {
		return nil, catalog.Settingf(KeyBindingParameters, "is set but there is no %s to pass them to; add one or remove %s",
			KeyBindingTemplate, KeyBindingParameters)
	}
	if s.BindingTemplate != nil {
		s.BindingParameters, err = fixedParameters(config, KeyBindingParameters, KeyBindingTemplate, s.BindingTemplate, s.Template.Outputs)
		if err != nil {
			return nil, err
		}
	}

	if s.Placement, err = configurePlacement(plan, config); err != nil {
		return nil, err
	}
	if err := configureNetwork(plan, s); err != nil {
		return nil, err
	}
	if err := checkPlacedHandlers(s); err != nil {
		return nil, err
	}
	s.Accepted = map[catalog.SchemaKind][]string{}
	for _, k := range []catalog.SchemaKind{catalog.InstanceCreate, catalog.InstanceUpdate, catalog.BindingCreate} {
		if plan != nil {
			s.Accepted[k] = plan.SchemaProperties(k)
		}
	}
	if s.Placement != nil && s.Placement.RegionParameter != "" {
		// The Region is the broker's to act on, not a template parameter.
		s.Accepted[catalog.InstanceCreate] = slices.DeleteFunc(slices.Clone(s.Accepted[catalog.InstanceCreate]),
			func(n string) bool { return n == s.Placement.RegionParameter })
	}
	if err := supplied(KeyTemplate, s.Template, s.Parameters, nil, s.Accepted[catalog.InstanceCreate], catalog.InstanceCreate); err != nil {
		return nil, err
	}
	if s.BindingTemplate != nil {
		if err := supplied(KeyBindingTemplate, s.BindingTemplate, s.BindingParameters, s.Template.Outputs, s.Accepted[catalog.BindingCreate], catalog.BindingCreate); err != nil {
			return nil, err
		}
	}
	if err := checkSchemas(plan, s); err != nil {
		return nil, err
	}

	if v, ok := config[KeyRetryAfter]; ok {
		n, ok := wholeNumber(v)
		if !ok || n < 1 || n > 3600 {
			return nil, catalog.Settingf(KeyRetryAfter, "must be a whole number of seconds from 1 to 3600 (how long to wait between checks of a stack), got %s", catalog.Describe(v))
		}
		s.RetryAfter = time.Duration(n) * time.Second
	}
	if s.AllowReplacement, err = allowReplacement(config, s.Template); err != nil {
		return nil, err
	}
	s.digest = &lazyDigest{}
	return s, nil
}

func pathSetting(config map[string]any, key string, required bool) (string, error) {
	v, ok := config[key]
	if !ok {
		if required {
			return "", catalog.Settingf(key, "is missing; name the plan's CloudFormation template file, relative to the catalog, e.g. %s: services/s3-bucket/instance.yaml", key)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok || strings.TrimSpace(s) == "" {
		return "", catalog.Settingf(key, "must be the path of a CloudFormation template file, relative to the catalog, got %s", catalog.Describe(v))
	}
	return s, nil
}

// TemplateResources reads the templates at paths (relative to dir, as a
// catalog names them: drivers.Files) and lists their resources, for
// cfnregistry's check of a role.
func TemplateResources(dir string, paths []string) ([]cfnregistry.Resource, error) {
	var out []cfnregistry.Resource
	var errs []error
	for _, p := range paths {
		t, err := readTemplate(KeyTemplate, p, dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, t.RegistryResources()...)
	}
	return out, errors.Join(errs...)
}

// readTemplate reads and checks a template file.
func readTemplate(key, path, dir string) (*Template, error) {
	full := path
	if !filepath.IsAbs(full) {
		full = filepath.Join(dir, path)
	}
	body, err := os.ReadFile(full)
	if err != nil {
		where := "the catalog's directory"
		if dir != "" {
			where = dir
		}
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, catalog.Settingf(key, "cannot read %s (relative to %s): %v", path, where, err)
	}
	if len(body) > MaxTemplateURLBody {
		return nil, catalog.Settingf(key, "%s is %d bytes; CloudFormation takes a template of at most %d bytes (from S3, as TemplateURL; at most %d as TemplateBody): shorten it, for example by removing comments and descriptions, or split it into nested stacks",
			path, len(body), MaxTemplateURLBody, MaxTemplateBody)
	}
	if withoutS3 && len(body) > MaxTemplateBody {
		return nil, catalog.Settingf(key, "%s is %d bytes, over the %d CloudFormation takes as a TemplateBody: the driver hands it over through S3, which this bootstrap was built without (build tag osb_without_s3, as make build leaves S3 out when every template is within that): build the bundles from this catalog with make build",
			path, len(body), MaxTemplateBody)
	}
	t, err := parsedTemplate(full, body)
	if err != nil {
		return nil, catalog.Settingf(key, "%s is not a usable CloudFormation template: %v", path, err)
	}
	t.Path = path
	if len(t.Macros) > 0 {
		return nil, catalog.Settingf(key, "%s runs %s: the driver creates stacks without CAPABILITY_AUTO_EXPAND, and a macro (a Transform, or Fn::Transform) rewrites the template after the broker checked it, past its view of the IAM identities and resources the template makes; expand it yourself (for AWS::Serverless-2016-10-31, write the resources SAM would make) and name the expanded template",
			path, list(t.Macros))
	}
	if err := t.checkBoundaries(); err != nil {
		return nil, catalog.Settingf(key, "%s: %v", path, err)
	}
	return t, nil
}

// parsed holds the templates read so far, by body: a catalog names most
// templates from several plans, and each is parsed once at start, by the
// first plan that reads it (the plans are configured in parallel: the
// others wait for that parse rather than make it again).
var parsed sync.Map // string → *parseOnce

type parseOnce struct {
	once sync.Once
	t    *Template
	err  error
}

// parsedTemplate is parseTemplate(body), parsed once per body: a copy of
// the first parse (its maps and slices shared, and never written after it).
// The first is read from the pre-parsed form beside file when the build
// made one from body (Preparse).
func parsedTemplate(file string, body []byte) (*Template, error) {
	key := string(body) // one copy of the body, on a miss the stored key
	e, ok := parsed.Load(key)
	if !ok {
		e, _ = parsed.LoadOrStore(key, &parseOnce{})
	}
	p := e.(*parseOnce)
	p.once.Do(func() {
		t, ok := readPreparsed(file, body)
		if !ok {
			t, p.err = parseTemplate(body)
		}
		p.t = t
	})
	if p.err != nil {
		return nil, p.err
	}
	cp := *p.t
	return &cp, nil
}

// checkBoundaries refuses an IAM user or role without the permissions
// boundary: the service role may make none (infra), so its stack would fail
// at that resource, and a template that works only locally is no template.
func (t *Template) checkBoundaries() error {
	var errs []error
	if p, ok := t.Parameters[BoundaryParameter]; ok && (p.Type != "String" || !p.HasDefault) {
		errs = append(errs, fmt.Errorf("parameter %s must be Type String with Default \"\": the broker sets it when it has a boundary (deployed), and a stack made without one (locally) keeps the default",
			BoundaryParameter))
	}
	for _, r := range t.Declared {
		if !slices.Contains(boundedTypes, r.Type) {
			continue
		}
		if _, ok := r.Properties["PermissionsBoundary"]; !ok {
			errs = append(errs, fmt.Errorf("resource %s (%s) has no PermissionsBoundary; declare the parameter %s (Type: String, Default: \"\") and set PermissionsBoundary: !If [HasBoundary, !Ref %s, !Ref AWS::NoValue] with the condition HasBoundary: !Not [!Equals [!Ref %s, \"\"]], as services/*/binding.yaml do",
				r.LogicalID, r.Type, BoundaryParameter, BoundaryParameter, BoundaryParameter))
			continue
		}
		if _, ok := t.Parameters[BoundaryParameter]; !ok {
			errs = append(errs, fmt.Errorf("resource %s (%s) sets a PermissionsBoundary but the template declares no parameter %s, through which the broker hands it the boundary",
				r.LogicalID, r.Type, BoundaryParameter))
		}
	}
	return errors.Join(errs...)
}

// parseTemplate reads what the driver needs of a template, YAML (with
// CloudFormation's short-form tags such as !Ref, which are read as plain
// values) or JSON.
func parseTemplate(body []byte) (*Template, error) { return parseTemplateWith(body, yamlTemplate) }

// parseTemplateWith is parseTemplate with a YAML template read by
// readYAML (yamlTemplate, or the worker's liveYAMLTemplate).
func parseTemplateWith(body []byte, readYAML func([]byte) (map[string]any, []string, error)) (*Template, error) {
	var doc map[string]any
	var tagged []string // the macros of the YAML's !Transform tags
	fromYAML := false
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '{' {
		if err := json.Unmarshal(trimmed, &doc); err != nil {
			return nil, fmt.Errorf("not valid JSON: %v", err)
		}
	} else {
		var err error
		if doc, tagged, err = readYAML(body); err != nil {
			return nil, err
		}
		fromYAML = true
	}
	t := &Template{Body: string(body), Parameters: map[string]Parameter{}}
	t.Macros = macros(doc, tagged, fromYAML)

	resources, ok := doc["Resources"].(map[string]any)
	if !ok || len(resources) == 0 {
		return nil, errors.New("it has no Resources; a template declares at least one resource")
	}
	t.Resources = len(resources)
	for _, id := range slices.Sorted(maps.Keys(resources)) {
		decl, ok := resources[id].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("resource %s must be a mapping with a Type, got %s", id, catalog.Describe(resources[id]))
		}
		typ, _ := decl["Type"].(string)
		if typ == "" {
			return nil, fmt.Errorf("resource %s has no Type", id)
		}
		props, _ := decl["Properties"].(map[string]any)
		policy, _ := decl["DeletionPolicy"].(string)
		t.Declared = append(t.Declared, Resource{LogicalID: id, Type: typ, Properties: props, DeletionPolicy: policy})
	}

	if v, ok := doc["Parameters"]; ok && v != nil {
		params, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("its Parameters section must be a mapping, got %s", catalog.Describe(v))
		}
		for _, name := range slices.Sorted(maps.Keys(params)) {
			decl, ok := params[name].(map[string]any)
			if !ok {
				return nil, fmt.Errorf("parameter %s must be a mapping with a Type, got %s", name, catalog.Describe(params[name]))
			}
			typ, _ := decl["Type"].(string)
			if typ == "" {
				return nil, fmt.Errorf("parameter %s has no Type", name)
			}
			p := Parameter{Type: typ}
			if def, ok := decl["Default"]; ok {
				p.HasDefault, p.Default = true, defaultText(def)
			}
			if list, ok := decl["AllowedValues"].([]any); ok {
				for _, a := range list {
					p.AllowedValues = append(p.AllowedValues, scalarText(a))
				}
			}
			t.Parameters[name] = p
		}
	}

	if v, ok := doc["Outputs"]; ok && v != nil {
		outputs, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("its Outputs section must be a mapping, got %s", catalog.Describe(v))
		}
		t.Outputs = slices.Sorted(maps.Keys(outputs))
	}
	private, err := privateOutputs(doc["Metadata"], t.Outputs)
	if err != nil {
		return nil, err
	}
	t.PrivateOutputs = private
	return t, nil
}

// MetadataKey is the key of a template's Metadata section that the broker
// reads.
const MetadataKey = "serverless-osb"

// privateOutputs reads Metadata's serverless-osb: {private_outputs: [...]},
// each an output the template declares.
func privateOutputs(metadata any, outputs []string) ([]string, error) {
	m, _ := metadata.(map[string]any)
	ours, ok := m[MetadataKey]
	if !ok {
		return nil, nil
	}
	section, ok := ours.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("its Metadata's %s must be a mapping, got %s", MetadataKey, catalog.Describe(ours))
	}
	var out []string
	for k, v := range section {
		if k != "private_outputs" {
			return nil, fmt.Errorf("its Metadata's %s has %s; the broker reads private_outputs only", MetadataKey, k)
		}
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("its Metadata's %s.private_outputs must be a list of output names, got %s", MetadataKey, catalog.Describe(v))
		}
		for _, e := range list {
			name, ok := e.(string)
			switch {
			case !ok:
				return nil, fmt.Errorf("its Metadata's %s.private_outputs must be output names, got %s", MetadataKey, catalog.Describe(e))
			case !slices.Contains(outputs, name):
				return nil, fmt.Errorf("its Metadata's %s.private_outputs names %q, which is not one of its outputs (%s)", MetadataKey, name, strings.Join(outputs, ", "))
			}
			out = append(out, name)
		}
	}
	return out, nil
}

// macros lists the macros doc runs: its Transform section, string or
// list, and every Fn::Transform, long form or, in YAML (fromYAML), the
// !Transform tag that reading the body as plain values loses (tagged:
// yamlTemplate's, which lists the long forms too).
func macros(doc map[string]any, tagged []string, fromYAML bool) []string {
	var out []string
	switch v := doc["Transform"].(type) {
	case nil:
	case []any:
		for _, name := range v {
			out = append(out, "Transform "+scalarText(name))
		}
	default:
		out = append(out, "Transform "+scalarText(v))
	}
	if fromYAML {
		return append(out, tagged...)
	}
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				if k == "Fn::Transform" {
					out = append(out, "Fn::Transform at "+at)
					continue
				}
				walk(v[k], at+"/"+k)
			}
		case []any:
			for i, e := range v {
				walk(e, fmt.Sprintf("%s/%d", at, i))
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(doc)) {
		if k != "Transform" {
			walk(doc[k], k)
		}
	}
	return out
}

// fixedParameters checks and converts the values a plan fixes for a
// template's parameters. outputs, for a binding template, are the instance
// outputs the driver passes itself, which the plan may not fix.
func fixedParameters(config map[string]any, key, templateKey string, t *Template, outputs []string) (map[string]string, error) {
	v, ok := config[key]
	if !ok || v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, catalog.Settingf(key, "must be a mapping of template parameter names to values, got %s", catalog.Describe(v))
	}
	out := make(map[string]string, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		k := key + "." + name
		decl, ok := t.Parameters[name]
		if !ok {
			return nil, catalog.Settingf(k, "the %s %s declares no parameter %s; it declares %s",
				templateKey, t.Path, name, list(slices.Sorted(maps.Keys(t.Parameters))))
		}
		if name == BoundaryParameter {
			return nil, catalog.Settingf(k, "%s is the deployment's permissions boundary, which the driver passes itself; remove it here", name)
		}
		if driverSupplied(name) {
			return nil, catalog.Settingf(k, "%s is %s, which the driver passes itself; remove it here", name, roleParameterMeaning[name])
		}
		if slices.Contains(outputs, name) {
			return nil, catalog.Settingf(k, "%s is an output of the instance template, which the driver passes to the binding stack itself; remove it here", name)
		}
		if m[name] == nil {
			return nil, catalog.Settingf(k, "has no value; give one, or remove the key to let the template's Default apply")
		}
		raw, err := json.Marshal(m[name])
		if err != nil {
			return nil, catalog.Settingf(k, "cannot be encoded: %v", err)
		}
		text, err := parameterValue(raw, decl)
		if err != nil {
			return nil, catalog.Settingf(k, "%v", err)
		}
		if len(decl.AllowedValues) > 0 && decl.Type == "String" && !slices.Contains(decl.AllowedValues, text) {
			return nil, catalog.Settingf(k, "%q is not one of the values the template allows: %s", text, list(decl.AllowedValues))
		}
		out[name] = text
	}
	return out, nil
}

// checkSchemas checks that the plan's schemas say what users may set
// (s.Accepted): a template parameter the plan leaves open (neither
// fixed nor an instance output) is either named by the schema of the
// request that makes the stack, or keeps its Default; so a plan whose
// template has open parameters must have that schema, even one that names
// none (properties: {}), or the operator has not decided. Once users may
// set parameters at create, the plan must also say which of them an update
// may change (schemas.service_instance.update; properties: {} for none). An
// update that only changes the plan or maintenance_info sends no
// parameters, so plan_updateable alone asks for no update schema. A
// property must be a parameter of the template it reaches, and not one the
// plan fixes or the driver passes itself. Every problem is reported, one
// error each.
func checkSchemas(plan *catalog.Plan, s *Settings) error {
	has := func(k catalog.SchemaKind) bool { return plan != nil && plan.HasSchema(k) }
	var problems []error
	missing := func(k catalog.SchemaKind, format string, args ...any) {
		problems = append(problems, catalog.PlanFieldf(schemaField(k), "is missing; "+format, args...))
	}

	if open := openParameters(s.Template, s.Parameters, nil); len(open) > 0 && !has(catalog.InstanceCreate) {
		missing(catalog.InstanceCreate, "the %s %s declares %s that the plan does not fix (%s): name in this schema's properties those users may set at create, or none (properties: {}); the broker passes on only what it names, and the others keep their Default",
			KeyTemplate, s.Template.Path, plural(len(open), "a parameter", "parameters"), list(open))
	}
	if created := s.Accepted[catalog.InstanceCreate]; len(created) > 0 && !has(catalog.InstanceUpdate) {
		missing(catalog.InstanceUpdate, "users set %s at create: name in this schema's properties those an update may change, or none (properties: {}); an update that only changes the plan or maintenance_info needs no parameters",
			list(created))
	}
	problems = append(problems, properties(catalog.InstanceCreate, s.Accepted, s.Template, KeyTemplate, s.Parameters, KeyParameters, nil)...)
	problems = append(problems, properties(catalog.InstanceUpdate, s.Accepted, s.Template, KeyTemplate, s.Parameters, KeyParameters, nil)...)

	if s.BindingTemplate != nil {
		if open := openParameters(s.BindingTemplate, s.BindingParameters, s.Template.Outputs); len(open) > 0 && !has(catalog.BindingCreate) {
			missing(catalog.BindingCreate, "the %s %s declares %s that neither the plan's %s nor the instance's outputs set (%s): name in this schema's properties those users may set at bind, or none (properties: {}); the broker passes on only what it names, and the others keep their Default",
				KeyBindingTemplate, s.BindingTemplate.Path, plural(len(open), "a parameter", "parameters"), KeyBindingParameters, list(open))
		}
		problems = append(problems, properties(catalog.BindingCreate, s.Accepted, s.BindingTemplate, KeyBindingTemplate, s.BindingParameters, KeyBindingParameters, s.Template.Outputs)...)
	} else if names := s.Accepted[catalog.BindingCreate]; len(names) > 0 {
		problems = append(problems, catalog.PlanFieldf(schemaField(catalog.BindingCreate),
			"names %s, but the plan has no %s to pass %s to; add one, or remove the properties",
			list(names), KeyBindingTemplate, plural(len(names), "it", "them")))
	}
	return errors.Join(problems...)
}

// schemaField is where a schema is in the plan: "schemas.service_instance.create.parameters".
func schemaField(k catalog.SchemaKind) string { return "schemas." + k.String() }

// openParameters lists the parameters of t that neither the plan fixes nor
// the driver passes itself (outputs: the instance's, to a binding template;
// the permissions boundary).
func openParameters(t *Template, fixed map[string]string, outputs []string) []string {
	var open []string
	for _, name := range slices.Sorted(maps.Keys(t.Parameters)) {
		if _, ok := fixed[name]; !ok && !slices.Contains(outputs, name) && !driverSupplied(name) {
			open = append(open, name)
		}
	}
	return open
}

// properties checks that every property the schema of kind k names is a
// parameter of t that the plan leaves to users.
func properties(k catalog.SchemaKind, accepted map[catalog.SchemaKind][]string, t *Template, templateKey string,
	fixed map[string]string, fixedKey string, outputs []string) []error {
	var problems []error
	for _, name := range accepted[k] {
		field := schemaField(k) + ".properties." + name
		switch _, isFixed := fixed[name]; {
		case t.Parameters[name].Type == "":
			problems = append(problems, catalog.PlanFieldf(field, "the %s %s declares no parameter %s, so the broker could not pass it on; it declares %s",
				templateKey, t.Path, name, list(slices.Sorted(maps.Keys(t.Parameters)))))
		case isFixed && isNetworkParameter(name):
			problems = append(problems, catalog.PlanFieldf(field, "the plan's network fixes %s (the catalog's networks, broker.network), which users cannot override; remove it from the schema", name))
		case isFixed:
			problems = append(problems, catalog.PlanFieldf(field, "the plan fixes %s (broker.%s.%s), which users cannot override; remove it from the schema, or from %s to let users set it",
				name, fixedKey, name, fixedKey))
		case slices.Contains(outputs, name):
			problems = append(problems, catalog.PlanFieldf(field, "%s is an output of the instance template, which the driver passes to the binding stack itself; remove it from the schema", name))
		case name == BoundaryParameter:
			problems = append(problems, catalog.PlanFieldf(field, "%s is the deployment's permissions boundary, which the driver passes itself; remove it from the schema", name))
		case driverSupplied(name):
			problems = append(problems, catalog.PlanFieldf(field, "%s is %s, which the driver passes itself; remove it from the schema", name, roleParameterMeaning[name]))
		}
	}
	return problems
}

// supplied checks that every parameter of t without a Default gets a value:
// fixed, from the instance's outputs, or named by the schema (named).
func supplied(key string, t *Template, fixed map[string]string, outputs []string, named []string, schema catalog.SchemaKind) error {
	var missing []string
	for _, name := range slices.Sorted(maps.Keys(t.Parameters)) {
		if t.Parameters[name].HasDefault || slices.Contains(outputs, name) || slices.Contains(named, name) || driverSupplied(name) {
			continue
		}
		if _, ok := fixed[name]; ok {
			continue
		}
		missing = append(missing, name)
	}
	if len(missing) == 0 {
		return nil
	}
	fixKey := KeyParameters
	if key == KeyBindingTemplate {
		fixKey = KeyBindingParameters
	}
	what := "parameter " + missing[0] + " has"
	if len(missing) > 1 {
		what = "parameters " + list(missing) + " have"
	}
	return catalog.Settingf(key, "%s: %s no Default, and neither this plan's %s nor the properties of schemas.%s name it, so every stack would fail to create; give a Default in the template, fix the value under %s, or name it in the schema (and list it in required) to ask users for it",
		t.Path, what, fixKey, schema, fixKey)
}

// wholeNumber reads a YAML number that is a whole number.
func wholeNumber(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case uint64:
		if n > math.MaxInt64 {
			return 0, false
		}
		return int64(n), true
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1<<53 {
			return int64(n), true
		}
	}
	return 0, false
}

// scalarText is the text of a YAML scalar as CloudFormation would read it.
// defaultText is a parameter's Default as CloudFormation takes it: a
// scalar's text, a list's items joined by commas.
func defaultText(v any) string {
	if l, ok := v.([]any); ok {
		items := make([]string, len(l))
		for i, a := range l {
			items[i] = scalarText(a)
		}
		return strings.Join(items, ",")
	}
	return scalarText(v)
}

func scalarText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case nil:
		return ""
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

func list(names []string) string {
	switch len(names) {
	case 0:
		return "none"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
