package infra

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"

	"github.com/serverless-osb/broker/internal/deploy"
)

// BrokerStackProps configures the broker's stack. The zero value of each
// field but StackProps means its default; paths are relative to the
// working directory, which is the repository root when the CDK CLI runs the
// app.
type BrokerStackProps struct {
	awscdk.StackProps

	// APICodeDir and WorkerCodeDir are the functions' asset directories,
	// each holding the linux/arm64 executable `bootstrap` and the
	// `catalog.yaml` it serves, as `make build` writes them. Defaults:
	// dist/api and dist/worker.
	APICodeDir    string
	WorkerCodeDir string

	// CatalogPath, when set, is the catalog this deployment must serve:
	// the stack refuses to synthesize unless each asset directory's
	// catalog.yaml is byte for byte this file, so that a build made from
	// another catalog is never deployed. Empty skips the check.
	CatalogPath string

	// StateMachinesDir holds the workflows, one state machine per
	// *.asl.json; operation.asl.json is required. Default: statemachines.
	StateMachinesDir string

	// StageName is the HTTP API stage; the default "$default" serves the
	// broker at the root of the API's URL, which is what OSB platforms
	// expect.
	StageName string
	// ThrottleRateLimit (requests per second, steady) and
	// ThrottleBurstLimit (requests) limit the stage. Defaults: 50 and 100.
	ThrottleRateLimit  float64
	ThrottleBurstLimit int
	// PollThrottleRateLimit and PollThrottleBurstLimit limit each of the
	// two last_operation routes (instance and binding), which have routes
	// of their own so that polls draw on their own budget, never on the
	// one the other requests (provisions, binds) share. Defaults: 25 and
	// 50.
	PollThrottleRateLimit  float64
	PollThrottleBurstLimit int

	// FrontDoor puts a CloudFront distribution with an AWS WAF web ACL in
	// front of the HTTP API, which then answers only through it: its
	// execute-api endpoint is turned off, the distribution reaches it at its
	// custom domain (DomainName and CertificateARN are required, the
	// certificate in us-east-1), and the api function refuses every request
	// without the origin secret. Off by default.
	FrontDoor bool
	// FrontDoorRateLimit is the most requests one source address may send
	// in 5 minutes before the web ACL blocks it (429) until its rate falls
	// back; WAF allows 10 to 2,000,000,000, and it may not exceed the limit
	// on all sources together (frontDoorTotalLimit, under the stage's
	// throttle). Default: 3000 (10 a second).
	FrontDoorRateLimit int
	// FrontDoorAllowCIDRs, when set, are the only addresses the front door
	// serves (the platform's egress addresses, IPv4 or IPv6 CIDRs); every
	// other request is blocked (403).
	FrontDoorAllowCIDRs []string
	// FrontDoorWebACLARN, when set, is a web ACL of the operator's (scope
	// CLOUDFRONT, made in us-east-1) that the distribution uses instead of
	// the stack's own; the stack then makes none, and may be deployed in
	// any region.
	FrontDoorWebACLARN string
	// FrontDoorOriginCertificateARN and FrontDoorTruststore, both or
	// neither, close the custom domain's regional endpoint to everyone but
	// the front door: mutual TLS, CloudFront presenting the client
	// certificate (ACM, in us-east-1) and API Gateway requiring one signed
	// by a CA of the truststore (s3://BUCKET/KEY, a PEM bundle in the
	// stack's region). Without, that endpoint answers anyone who names the
	// domain, and the origin secret alone refuses them (docs/deploy.md).
	FrontDoorOriginCertificateARN string
	FrontDoorTruststore           string

	// APIMemoryMB and WorkerMemoryMB are the functions' memory sizes.
	// Default: 256 each.
	APIMemoryMB    int
	WorkerMemoryMB int
	// APITimeout must stay under the HTTP API's 30 s integration limit.
	// Default: 25 s.
	APITimeout time.Duration
	// WorkerTimeout matches the TimeoutSeconds of the workflows' Task
	// states. Default: 60 s.
	WorkerTimeout time.Duration
	// APIReservedConcurrency and WorkerReservedConcurrency are the
	// functions' reserved concurrency: the api keeps that many instances
	// for itself, so that it answers while the worker, or any function of
	// the account, is saturated; the worker may run no more than its own,
	// so that Tasks hanging on a backend cannot take the account's
	// concurrency. Each is also the most its function runs at once, and
	// both come out of the account's unreserved concurrency, which Lambda
	// keeps at 100 at least: an account whose concurrency quota is under
	// 100 + both cannot take them (set them negative there). Zero: the
	// default, 20 each; negative: none (the function draws on the
	// account's unreserved pool, as before).
	APIReservedConcurrency    int
	WorkerReservedConcurrency int
	// WorkerTasksPerPlan bounds the Tasks of one plan that call its
	// backend at once (the worker's BROKER_MAX_TASKS_PER_PLAN: leases on
	// the table), so that one slow or hanging backend holds at most that
	// many of the worker's instances; it must be under the worker's
	// reserved concurrency. Zero: the default, a quarter of the worker's
	// reserved concurrency (5), or none when the worker has none;
	// negative: none.
	WorkerTasksPerPlan int

	// LogRetentionDays is how long every log group keeps its events; it
	// must be a value CloudWatch Logs accepts (1, 3, 5, 7, 14, 30, 60, 90,
	// ...). Default: 30.
	LogRetentionDays int
	// LogLevel, when set, becomes both functions' LOG_LEVEL: DEBUG, INFO,
	// WARN or ERROR. Unset, they log at INFO.
	LogLevel string
	// AllowClear leaves out both functions' BROKER_SEALED_ONLY, which is set
	// by default: sealed-only, every secret found in clear in the table
	// (a binding's credentials, a driver's record naming a stack or URL) is
	// refused, whatever the table's sealing mode item says, so that a
	// writer of the table without the sealing key cannot plant a record the
	// broker would act on (anyone who can write the table can delete that
	// item too). Set it (cdk.json's sealedOnly=false) only for a deployment
	// that still holds values from before sealing, until `ops --stack NAME
	// reseal` has sealed them (docs/deploy.md, Upgrading).
	AllowClear bool
	// SealingKeyOperators are the IAM roles and users (ARNs) besides the
	// functions' that the sealing key's policy lets seal and open, in the
	// sealing context only: the identities an operator runs
	// `ops --stack NAME reseal` with. Each must exist when the stack is
	// deployed (KMS refuses a key policy naming an unknown principal).
	// Default: none, so that only the api and the worker use the key.
	SealingKeyOperators []string

	// AlarmTopicARN, when set, is an SNS topic every alarm notifies when
	// it fires and when it recovers; by default the stack makes one.
	AlarmTopicARN string
	// AlarmEmail, when set, is an address subscribed to the alarms' topic
	// (SNS sends it a confirmation first).
	AlarmEmail string

	// DomainName and CertificateARN, both or neither, serve the HTTP API
	// at https://DomainName with that ACM certificate (in the stack's
	// region), so that the URL a platform registered survives a new HTTP
	// API. Point the name's DNS record at the CustomDomainTarget output.
	DomainName     string
	CertificateARN string

	// StackPrefix starts the name of every stack the CloudFormation driver
	// makes (PREFIX-…, the worker's BROKER_STACK_PREFIX): the worker may
	// touch only those stacks, and the service role and the boundary only
	// the resources CloudFormation names after them. Lower-case letters and
	// digits, starting with a letter, at most 20 characters: no hyphen, so
	// that no other deployment's prefix extends it (checkStackPrefix).
	// Default: osb.
	StackPrefix string
	// LegacyStackPrefix accepts a stack prefix under the rule before issue
	// 28 (upper case and single hyphens too) and a broker stack name that
	// another deployment's prefix could cover, for a deployment whose
	// instances already run under such names. Its patterns may then cover
	// another deployment's stacks, users and resources in the account, and
	// the other's its own (docs/deploy.md). Its own prefix still may not
	// cover the broker's stack. Default: false.
	LegacyStackPrefix bool
	// ServiceRolePolicyARNs are managed policies attached to the
	// CloudFormation service role besides its own permissions, which cover
	// the example services only: for a template that needs more.
	ServiceRolePolicyARNs []string

	// DatabaseUserVPCs are the VPCs where the Custom::DatabaseUser function
	// runs (infra/dbuser.go), and DatabaseUserCodeDir its asset directory
	// (default dist/dbuser). None: no such function.
	DatabaseUserVPCs    []DatabaseUserVPC
	DatabaseUserCodeDir string

	// CacheUserCodeDir is the asset directory (default dist/cacheuser) of
	// the Custom::CacheUserGroupMember function (infra/cacheuser.go), which
	// the stack deploys when a plan's template declares that resource (the
	// ElastiCache for Valkey plans: the catalog's manifest says so).
	CacheUserCodeDir string

	// ReaperInterval is how often EventBridge Scheduler runs the reaper
	// (the worker's step "reap"), which repairs operations whose execution
	// ended without a result and starts the cleanups no execution runs: the
	// longest an operation or a detached resource stays stuck after a
	// crash. Whole minutes, from 1 to 60. Default: 5 minutes.
	ReaperInterval time.Duration
}

// Defaults of BrokerStackProps.
const (
	DefaultAPICodeDir         = "dist/api"
	DefaultWorkerCodeDir      = "dist/worker"
	DefaultStateMachinesDir   = "statemachines"
	DefaultStageName          = "$default"
	DefaultThrottleRateLimit  = 50
	DefaultThrottleBurstLimit = 100
	DefaultPollRateLimit      = 25
	DefaultPollBurstLimit     = 50
	DefaultFrontDoorRateLimit = 3000
	DefaultMemoryMB           = 256
	DefaultAPITimeout         = 25 * time.Second
	DefaultWorkerTimeout      = 60 * time.Second
	// The functions' reserved concurrency: 40 of the account's default
	// quota of 1,000.
	DefaultAPIReservedConcurrency    = 20
	DefaultWorkerReservedConcurrency = 20
	DefaultLogRetentionDays          = 30
	DefaultReaperInterval            = 5 * time.Minute
)

// maxServiceRolePolicies is IAM's hard limit on the managed policies of a
// role (its default quota is 10).
const maxServiceRolePolicies = 20

// managedPolicyARN is the ARN of an AWS managed or a customer managed policy.
var managedPolicyARN = regexp.MustCompile(`^arn:aws[a-z-]*:iam::(aws|[0-9]{12}):policy/[A-Za-z0-9+=,.@/_-]+$`)

// maxReaperInterval bounds ReaperInterval: an hourly reaper already leaves
// a crashed operation stuck that long, and the reaper's alarm watches three
// intervals, which CloudWatch allows up to a day (see alarms).
const maxReaperInterval = time.Hour

// maxReservedConcurrency bounds each function's reserved concurrency: two
// at most leave a default account (1,000) the 100 unreserved Lambda
// requires, and more for its other functions. Ask AWS for a higher quota,
// and set a higher bound here, for more.
const maxReservedConcurrency = 400

// httpAPIIntegrationLimit is the longest an HTTP API waits for its
// integration; the api function must answer sooner.
const httpAPIIntegrationLimit = 30 * time.Second

// retentions are the retention periods CloudWatch Logs accepts, in days.
var retentions = map[int]awslogs.RetentionDays{
	1: awslogs.RetentionDays_ONE_DAY, 3: awslogs.RetentionDays_THREE_DAYS, 5: awslogs.RetentionDays_FIVE_DAYS,
	7: awslogs.RetentionDays_ONE_WEEK, 14: awslogs.RetentionDays_TWO_WEEKS, 30: awslogs.RetentionDays_ONE_MONTH,
	60: awslogs.RetentionDays_TWO_MONTHS, 90: awslogs.RetentionDays_THREE_MONTHS, 120: awslogs.RetentionDays_FOUR_MONTHS,
	150: awslogs.RetentionDays_FIVE_MONTHS, 180: awslogs.RetentionDays_SIX_MONTHS, 365: awslogs.RetentionDays_ONE_YEAR,
	400: awslogs.RetentionDays_THIRTEEN_MONTHS, 545: awslogs.RetentionDays_EIGHTEEN_MONTHS, 731: awslogs.RetentionDays_TWO_YEARS,
	1096: awslogs.RetentionDays_THREE_YEARS, 1827: awslogs.RetentionDays_FIVE_YEARS, 2192: awslogs.RetentionDays_SIX_YEARS,
	2557: awslogs.RetentionDays_SEVEN_YEARS, 2922: awslogs.RetentionDays_EIGHT_YEARS, 3288: awslogs.RetentionDays_NINE_YEARS,
	3653: awslogs.RetentionDays_TEN_YEARS,
}

// withDefaults returns p with every unset field at its default, or the
// reasons p cannot be deployed.
func (p BrokerStackProps) withDefaults() (BrokerStackProps, error) {
	setDefault(&p.APICodeDir, DefaultAPICodeDir)
	setDefault(&p.WorkerCodeDir, DefaultWorkerCodeDir)
	setDefault(&p.StateMachinesDir, DefaultStateMachinesDir)
	setDefault(&p.StageName, DefaultStageName)
	setDefault(&p.ThrottleRateLimit, DefaultThrottleRateLimit)
	setDefault(&p.ThrottleBurstLimit, DefaultThrottleBurstLimit)
	setDefault(&p.PollThrottleRateLimit, DefaultPollRateLimit)
	setDefault(&p.PollThrottleBurstLimit, DefaultPollBurstLimit)
	setDefault(&p.FrontDoorRateLimit, DefaultFrontDoorRateLimit)
	setDefault(&p.APIMemoryMB, DefaultMemoryMB)
	setDefault(&p.WorkerMemoryMB, DefaultMemoryMB)
	setDefault(&p.APITimeout, DefaultAPITimeout)
	setDefault(&p.WorkerTimeout, DefaultWorkerTimeout)
	setDefault(&p.APIReservedConcurrency, DefaultAPIReservedConcurrency)
	setDefault(&p.WorkerReservedConcurrency, DefaultWorkerReservedConcurrency)
	if p.WorkerTasksPerPlan == 0 && p.WorkerReservedConcurrency > 0 {
		p.WorkerTasksPerPlan = max(1, p.WorkerReservedConcurrency/4)
	}
	setDefault(&p.LogRetentionDays, DefaultLogRetentionDays)
	setDefault(&p.ReaperInterval, DefaultReaperInterval)
	setDefault(&p.StackPrefix, deploy.DefaultStackPrefix)
	setDefault(&p.DatabaseUserCodeDir, DefaultDatabaseUserCodeDir)
	setDefault(&p.CacheUserCodeDir, DefaultCacheUserCodeDir)

	var errs []error
	if p.ThrottleRateLimit < 0 || p.ThrottleBurstLimit < 0 {
		errs = append(errs, fmt.Errorf("throttle limits must not be negative (rate %v, burst %d)", p.ThrottleRateLimit, p.ThrottleBurstLimit))
	}
	if p.PollThrottleRateLimit < 0 || p.PollThrottleBurstLimit < 0 {
		errs = append(errs, fmt.Errorf("poll throttle limits must not be negative (rate %v, burst %d)", p.PollThrottleRateLimit, p.PollThrottleBurstLimit))
	}
	for _, fn := range []struct {
		name string
		mb   int
	}{{"api", p.APIMemoryMB}, {"worker", p.WorkerMemoryMB}} {
		if fn.mb < 128 || fn.mb > 10240 {
			errs = append(errs, fmt.Errorf("%s memory %d MB: Lambda allows 128 to 10240", fn.name, fn.mb))
		}
	}
	if p.APITimeout >= httpAPIIntegrationLimit || p.APITimeout%time.Second != 0 {
		errs = append(errs, fmt.Errorf("api timeout %v: must be whole seconds under the HTTP API's %v limit", p.APITimeout, httpAPIIntegrationLimit))
	}
	if p.WorkerTimeout > 15*time.Minute || p.WorkerTimeout%time.Second != 0 {
		errs = append(errs, fmt.Errorf("worker timeout %v: must be whole seconds, at most 15m", p.WorkerTimeout))
	}
	for _, fn := range []struct {
		name     string
		reserved int
	}{{"api", p.APIReservedConcurrency}, {"worker", p.WorkerReservedConcurrency}} {
		if fn.reserved > maxReservedConcurrency {
			errs = append(errs, fmt.Errorf("%s reserved concurrency %d: at most %d, so that a default account (1,000) keeps 100 unreserved with both set", fn.name, fn.reserved, maxReservedConcurrency))
		}
	}
	if w := p.WorkerReservedConcurrency; w > 0 && p.WorkerTasksPerPlan >= w {
		errs = append(errs, fmt.Errorf("worker tasks per plan %d: must be under the worker's reserved concurrency (%d), so that one plan's backend cannot hold every instance", p.WorkerTasksPerPlan, w))
	}
	if p.LogLevel != "" && !slices.Contains([]string{"DEBUG", "INFO", "WARN", "ERROR"}, strings.ToUpper(p.LogLevel)) {
		errs = append(errs, fmt.Errorf("log level %q: want DEBUG, INFO, WARN or ERROR", p.LogLevel))
	}
	if p.ReaperInterval < time.Minute || p.ReaperInterval > maxReaperInterval || p.ReaperInterval%time.Minute != 0 {
		errs = append(errs, fmt.Errorf("reaper interval %v: must be whole minutes, from 1m to %v", p.ReaperInterval, maxReaperInterval))
	}
	if _, ok := retentions[p.LogRetentionDays]; !ok {
		errs = append(errs, fmt.Errorf("log retention %d days: CloudWatch Logs does not offer it", p.LogRetentionDays))
	}
	if err := checkStackPrefix(p.StackPrefix, p.LegacyStackPrefix); err != nil {
		errs = append(errs, fmt.Errorf("stack prefix: %w", err))
	}
	errs = append(errs, checkManagedPolicies(p.ServiceRolePolicyARNs)...)
	errs = append(errs, checkSealingKeyOperators(p.SealingKeyOperators)...)
	errs = append(errs, checkObservability(p)...)
	errs = append(errs, checkFrontDoor(p)...)
	return p, errors.Join(errs...)
}

// checkStackPrefix applies the stack prefix's rule (deploy.CheckStackPrefix)
// and, unless legacy, the stricter one that keeps deployments apart: the
// service role's, the boundary's and the worker's patterns are PREFIX-*
// (lower case for S3 and RDS, whose names CloudFormation generates in lower
// case), and a prefix of lower-case letters and digits only is one whole
// hyphen-separated segment, so no other valid prefix's names match them
// ("osb-*" would match every name of a deployment on "osb-prod"). Legacy, it
// keeps the older rule: CloudFormation collapses runs of hyphens when it
// generates a name from a stack's name (RDS identifiers, for one), so the
// names of a prefix ending in a hyphen or holding two in a row would not
// start with it.
func checkStackPrefix(prefix string, legacy bool) error {
	if err := deploy.CheckStackPrefix(prefix); err != nil {
		return err
	}
	if legacy {
		if strings.HasSuffix(prefix, "-") || strings.Contains(prefix, "--") {
			return fmt.Errorf("%q must not end with a hyphen or hold two in a row: CloudFormation collapses the hyphens "+
				"of a stack's name in the names it generates, which the service role's permissions match by prefix", prefix)
		}
		return nil
	}
	if !isolatedPrefix.MatchString(prefix) {
		why := fmt.Sprintf("a deployment on %q would reach one on %q", strings.ToLower(strings.SplitN(prefix, "-", 2)[0]), strings.ToLower(prefix))
		if !strings.Contains(prefix, "-") {
			why = fmt.Sprintf("S3 and RDS names are in lower case, where %q is %q", prefix, strings.ToLower(prefix))
		}
		return fmt.Errorf("%q must hold only lower-case letters and digits: the permissions of a deployment cover "+
			"every name that starts with its prefix and a hyphen, and %s (%s=true keeps the old rule for a deployment "+
			"that has instances under it, with that risk; docs/deploy.md)", prefix, why, ContextLegacyStackPrefix)
	}
	if slices.Contains(reservedPrefixes, prefix) {
		return fmt.Errorf("%q starts names that are not the broker's (%s): choose another", prefix, strings.Join(reservedPrefixes, ", "))
	}
	return nil
}

// isolatedPrefix is a stack prefix no other can extend: one segment of a
// name, in lower case.
var isolatedPrefix = regexp.MustCompile(`^[a-z][a-z0-9]*$`)

// reservedPrefixes start names AWS and the CDK give their own resources
// (the CDK's bootstrap bucket cdk-hnb659fds-assets-…, AWS's aws-… and
// amazon-… names), which a deployment on them would cover.
var reservedPrefixes = []string{"aws", "amazon", "cdk"}

// checkBrokerStackName refuses a broker stack name whose resources
// (its table, named NAME-Table…, and the stack itself) the patterns of a
// stack prefix would cover: its own prefix's always, and unless legacy any
// valid prefix's, that is, a name that starts with one whole lower-case
// segment (osb-broker, broker), which another deployment may take as its
// prefix.
func checkBrokerStackName(name, prefix string, legacy bool) error {
	lower, lowerPrefix := strings.ToLower(name), strings.ToLower(prefix)
	if lower == lowerPrefix || strings.HasPrefix(lower, lowerPrefix+"-") {
		return fmt.Errorf("stack name %q falls under the stack prefix %q: the service role and the worker, which may "+
			"change every %s-… stack and its resources, would reach the broker's own table and stack; name the stack "+
			"otherwise (ServerlessOsb, say) or choose another prefix", name, prefix, prefix)
	}
	if legacy {
		return nil
	}
	first, _, _ := strings.Cut(name, "-")
	if isolatedPrefix.MatchString(first) && len(first) <= deploy.MaxStackPrefix {
		return fmt.Errorf("stack name %q starts with %q, which another deployment in the account could take as its "+
			"stack prefix and so reach this broker's table and stack: give it a name that starts with an upper-case "+
			"letter (ServerlessOsb, say)", name, first+"-")
	}
	return nil
}

func checkManagedPolicies(arns []string) []error {
	var errs []error
	seen := map[string]bool{}
	for _, arn := range arns {
		switch {
		case !managedPolicyARN.MatchString(arn):
			errs = append(errs, fmt.Errorf("service role policy %q: not a managed policy's ARN "+
				"(arn:aws:iam::aws:policy/NAME or arn:aws:iam::ACCOUNT:policy/NAME)", arn))
		case seen[arn]:
			errs = append(errs, fmt.Errorf("service role policy %q: given twice", arn))
		}
		seen[arn] = true
	}
	if len(arns) > maxServiceRolePolicies {
		errs = append(errs, fmt.Errorf("service role policies: %d given; IAM attaches at most %d managed policies to a role (10 unless the account's quota was raised)",
			len(arns), maxServiceRolePolicies))
	}
	return errs
}

// identityARN is an IAM role's or user's ARN, which a key policy may name.
var identityARN = regexp.MustCompile(`^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+$`)

func checkSealingKeyOperators(arns []string) []error {
	var errs []error
	seen := map[string]bool{}
	for _, arn := range arns {
		switch {
		case !identityARN.MatchString(arn):
			errs = append(errs, fmt.Errorf("sealing key operator %q: not an IAM role's or user's ARN "+
				"(arn:aws:iam::ACCOUNT:role/NAME or arn:aws:iam::ACCOUNT:user/NAME)", arn))
		case seen[arn]:
			errs = append(errs, fmt.Errorf("sealing key operator %q: given twice", arn))
		}
		seen[arn] = true
	}
	return errs
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
