// Package deploy is what the broker's code and its deployment (the CDK
// stack, infra) agree on, as plain data, so that infra builds the stack
// without the domain: it imports nothing of the broker.
//
// Each driver kind declares what the plans of a catalog that name it need
// of the stack (Needs): the IAM statements each function's role must
// grant, whether its work runs under the CloudFormation service role the
// stack makes, and the environment the stack sets for it. The build (make
// build) asks the drivers and writes their declarations into the bundles
// (Manifest, deploy.json beside catalog.yaml); infra grants, makes and sets
// exactly what it reads there, and names no driver; the sandbox's
// permission proof reads the same declarations.
//
// It also names the few things both sides spell: the front door's header,
// the sealing key's encryption context key, and the stack prefix's rule.
package deploy

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Function is one of the broker's Lambda functions, whose role a
// statement goes in and whose environment a variable is set in.
type Function string

// The broker's functions.
const (
	// API serves the OSB API: it runs a plan's changes that may run
	// synchronously, within the platform's request.
	API Function = "api"
	// Worker runs the workflows' Tasks: every asynchronous change and
	// every cleanup.
	Worker Function = "worker"
)

// Functions lists them.
var Functions = []Function{API, Worker}

// The placeholders a declaration's resources, condition values and
// variable values may hold, which the stack fills in with its own.
const (
	Partition   = "${Partition}"
	Region      = "${Region}"
	Account     = "${Account}"
	StackPrefix = "${StackPrefix}"
	// ServiceRoleARN and PermissionsBoundaryARN are the CloudFormation
	// service role's and the boundary of the identities its stacks make:
	// only a kind that declares ServiceRole may name them.
	ServiceRoleARN         = "${ServiceRoleArn}"
	PermissionsBoundaryARN = "${PermissionsBoundaryArn}"
	// TemplateBucket and TemplateBucketARN are the name and ARN of the
	// bucket the stack makes beside the service role, where the service
	// stacks' templates over CloudFormation's TemplateBody limit go: only
	// a kind that declares ServiceRole may name them too.
	TemplateBucket    = "${TemplateBucket}"
	TemplateBucketARN = "${TemplateBucketArn}"
)

// Placeholders lists them.
var Placeholders = []string{Partition, Region, Account, StackPrefix, ServiceRoleARN, PermissionsBoundaryARN,
	TemplateBucket, TemplateBucketARN}

// ARN is the ARN of resource (its type and name, as the service writes
// them) of service in the stack's partition, Region and account.
func ARN(service, resource string) string {
	return "arn:" + Partition + ":" + service + ":" + Region + ":" + Account + ":" + resource
}

// Statement is one statement a function's role must grant (Allow).
type Statement struct {
	Function Function `json:"function"`
	// Sid names the statement in the role's policy, unique per function.
	Sid     string   `json:"sid"`
	Actions []string `json:"actions"`
	// Resources are ARNs, which may hold placeholders (ARN helps).
	Resources []string `json:"resources"`
	// Conditions are by operator, then by key, each a value that may hold
	// placeholders: {"StringEquals": {"iam:PassedToService": "..."}}.
	Conditions map[string]map[string]string `json:"conditions,omitempty"`
	// WildcardReason says why a resource with a wildcard (*) is as narrow
	// as it can be: the stack's checks (cdk-nag) ask it of every such grant,
	// so a statement with one must say it.
	WildcardReason string `json:"wildcard_reason,omitempty"`
}

// Variable is one environment variable the stack sets for a function
// (internal/env names it).
type Variable struct {
	Function Function `json:"function"`
	Name     string   `json:"name"`
	// Value may hold placeholders.
	Value string `json:"value"`
}

// Needs is what a driver kind needs of the stack for the plans of a
// catalog that name it.
type Needs struct {
	Statements []Statement `json:"statements,omitempty"`
	Env        []Variable  `json:"env,omitempty"`
	// ServiceRole says that the kind's work runs under the CloudFormation
	// service role the stack makes (with the permissions boundary of the
	// identities its stacks make): the stack makes them only for a kind
	// that says so.
	ServiceRole bool `json:"service_role,omitempty"`
	// InTargets are what the worker does in each target account of a
	// placement (another account the catalog places instances in),
	// through the role it assumes there: the target stack grants them to
	// that role, with its own account's values for the placeholders (the
	// service role and boundary the target stack makes). Their Function is
	// the worker's.
	InTargets []Statement `json:"in_targets,omitempty"`
	// LogAlarms are alarms on a log line of a function: the stack counts
	// the lines whose message is Message and alarms at the first.
	LogAlarms []LogAlarm `json:"log_alarms,omitempty"`
	// CustomResources are the custom resource types (Custom::NAME) the
	// plans' templates declare, sorted: the stack deploys the broker's
	// function of each one it has (CacheUserGroupMember), and only then.
	CustomResources []string `json:"custom_resources,omitempty"`
	// InTargetCustomResources are those of them the templates of plans
	// placed in another account declare, sorted: the target stack deploys
	// the broker's function of each there (the Custom::DatabaseUser
	// function in the VPC of each of the catalog's networks in another
	// account), from the code bucket its operator names.
	InTargetCustomResources []string `json:"in_target_custom_resources,omitempty"`
}

// CacheUserGroupMember is the custom resource a binding template declares
// to put its cache user in its cache's user group (internal/cacheusers):
// the stack deploys its function, PREFIX-cacheuser, when a plan's
// template declares one.
const CacheUserGroupMember = "Custom::CacheUserGroupMember"

// DatabaseUser is the custom resource a binding template declares for a
// database (or search) user of its own (internal/dbusers): the stack
// deploys its function in each of the catalog's networks' VPCs.
const DatabaseUser = "Custom::DatabaseUser"

// BrokerHandled are the custom resources whose functions the broker's
// stack deploys in its own account and Region, and the target stack in
// the accounts of placements.
var BrokerHandled = []string{CacheUserGroupMember, DatabaseUser}

// LogAlarm is an alarm on the log lines of Function whose message (slog's
// "msg") is Message; ID names it in the stack (letters and digits).
type LogAlarm struct {
	ID          string   `json:"id"`
	Function    Function `json:"function"`
	Message     string   `json:"message"`
	Description string   `json:"description"`
}

// Driver is one driver kind's needs, by its name.
type Driver struct {
	Name  string `json:"name"`
	Needs Needs  `json:"needs"`
}

// Manifest is what the build writes beside the bundled catalog: the files
// the catalog's driver settings read (relative to the catalog's folder,
// bundled beside it), and the needs of each driver kind the catalog uses.
type Manifest struct {
	Files   []string `json:"files"`
	Drivers []Driver `json:"drivers"`
}

// ManifestName is the manifest's file name in a bundle.
const ManifestName = "deploy.json"

// ServiceRole says whether a driver needs the service role.
func (m Manifest) ServiceRole() bool {
	return slices.ContainsFunc(m.Drivers, func(d Driver) bool { return d.Needs.ServiceRole })
}

// CustomResource says whether a plan's template declares the custom
// resource type typ (Needs.CustomResources).
func (m Manifest) CustomResource(typ string) bool {
	return slices.ContainsFunc(m.Drivers, func(d Driver) bool { return slices.Contains(d.Needs.CustomResources, typ) })
}

// InTargetCustomResource says whether a placed plan's template declares
// the custom resource type typ (Needs.InTargetCustomResources).
func (m Manifest) InTargetCustomResource(typ string) bool {
	return slices.ContainsFunc(m.Drivers, func(d Driver) bool { return slices.Contains(d.Needs.InTargetCustomResources, typ) })
}

// Check says what is wrong with m, every problem at once: a statement of
// no function, without a Sid, an action or a resource, with a Sid
// another statement of its function has, or with a wildcard resource and
// no reason for it; a placeholder that is not one,
// or that names the service role that its kind does not ask for; a custom
// resource type that is not Custom::NAME.
func (m Manifest) Check() error {
	var errs []error
	sids := map[Function]map[string]string{}
	for _, d := range m.Drivers {
		known := func(where, s string) {
			for _, p := range placeholderPattern().FindAllString(s, -1) {
				switch {
				case !slices.Contains(Placeholders, p):
					errs = append(errs, fmt.Errorf("driver %s: %s: %s is no placeholder; they are %s", d.Name, where, p, strings.Join(Placeholders, ", ")))
				case slices.Contains([]string{ServiceRoleARN, PermissionsBoundaryARN, TemplateBucket, TemplateBucketARN}, p) && !d.Needs.ServiceRole:
					errs = append(errs, fmt.Errorf("driver %s: %s: %s names the service role, which the driver does not declare it needs", d.Name, where, p))
				}
			}
		}
		// values checks a statement's resources and conditions: known
		// placeholders, and a reason for every wildcard.
		values := func(where string, s Statement) {
			for _, r := range s.Resources {
				known(where, r)
				if strings.Contains(r, "*") && s.WildcardReason == "" {
					errs = append(errs, fmt.Errorf("driver %s: %s: resource %s has a wildcard: say why it is as narrow as it can be (WildcardReason)", d.Name, where, r))
				}
			}
			for _, byKey := range s.Conditions {
				for _, v := range byKey {
					known(where, v)
				}
			}
		}
		for _, s := range d.Needs.Statements {
			where := fmt.Sprintf("statement %q", s.Sid)
			if !slices.Contains(Functions, s.Function) {
				errs = append(errs, fmt.Errorf("driver %s: %s: no function %q", d.Name, where, s.Function))
			}
			if s.Sid == "" || len(s.Actions) == 0 || len(s.Resources) == 0 {
				errs = append(errs, fmt.Errorf("driver %s: %s: a statement needs a Sid, actions and resources", d.Name, where))
			}
			if sids[s.Function] == nil {
				sids[s.Function] = map[string]string{}
			}
			if other, taken := sids[s.Function][s.Sid]; taken {
				errs = append(errs, fmt.Errorf("driver %s: %s: driver %s has a statement of the %s function with that Sid", d.Name, where, other, s.Function))
			}
			sids[s.Function][s.Sid] = d.Name
			values(where, s)
		}
		for _, s := range d.Needs.InTargets {
			where := fmt.Sprintf("target statement %q", s.Sid)
			if s.Sid == "" || len(s.Actions) == 0 || len(s.Resources) == 0 {
				errs = append(errs, fmt.Errorf("driver %s: %s: a statement needs a Sid, actions and resources", d.Name, where))
			}
			values(where, s)
		}
		for _, a := range d.Needs.LogAlarms {
			if !slices.Contains(Functions, a.Function) || !alarmIDPattern().MatchString(a.ID) || a.Message == "" || a.Description == "" {
				errs = append(errs, fmt.Errorf("driver %s: log alarm %q: an alarm needs an id of letters and digits, a function, a message and a description", d.Name, a.ID))
			}
		}
		for _, t := range append(slices.Clone(d.Needs.CustomResources), d.Needs.InTargetCustomResources...) {
			if !customResourcePattern().MatchString(t) {
				errs = append(errs, fmt.Errorf("driver %s: custom resource %q: want a type Custom::NAME", d.Name, t))
			}
		}
		for _, v := range d.Needs.Env {
			if !slices.Contains(Functions, v.Function) {
				errs = append(errs, fmt.Errorf("driver %s: variable %s: no function %q", d.Name, v.Name, v.Function))
			}
			known("variable "+v.Name, v.Value)
		}
	}
	return errors.Join(errs...)
}

// The manifest's patterns, compiled on first use: the build and infra
// read manifests, the functions do not, and compiling them at package init
// was about 0.1 ms of every function's cold start.
var (
	placeholderPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$\{[^}]*\}`) })
	alarmIDPattern     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`) })
	// customResourcePattern is CloudFormation's rule for a custom
	// resource's type name.
	customResourcePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^Custom::[A-Za-z0-9_@-]{1,60}$`) })
)

// Fill replaces each placeholder of s by its value; values holds one for
// every placeholder that Check lets a manifest use.
func Fill(s string, values map[string]string) string {
	return placeholderPattern().ReplaceAllStringFunc(s, func(p string) string { return cmp.Or(values[p], p) })
}

// Encode is m as a bundle holds it (ManifestName).
func (m Manifest) Encode() ([]byte, error) {
	data, err := json.MarshalIndent(m, "", "  ")
	return append(data, '\n'), err
}

// ReadManifest reads the manifest a bundle holds in dir, and checks it.
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	data, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("%s: %w", filepath.Join(dir, ManifestName), err)
	}
	if err := m.Check(); err != nil {
		return m, fmt.Errorf("%s: %w", filepath.Join(dir, ManifestName), err)
	}
	return m, nil
}
