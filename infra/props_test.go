package infra

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"

	osbcatalog "github.com/serverless-osb/broker/internal/catalog"
)

func TestPropsDefaults(t *testing.T) {
	p, err := BrokerStackProps{}.withDefaults()
	if err != nil {
		t.Fatalf("the zero props are invalid: %v", err)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"the api asset is dist/api", p.APICodeDir, "dist/api"},
		{"the worker asset is dist/worker", p.WorkerCodeDir, "dist/worker"},
		{"the workflows are in statemachines", p.StateMachinesDir, "statemachines"},
		{"the stage is $default", p.StageName, "$default"},
		{"the api function answers within 25 s", p.APITimeout, 25 * time.Second},
		{"the worker function has the Task states' 60 s", p.WorkerTimeout, 60 * time.Second},
		{"logs are kept 30 days", p.LogRetentionDays, 30},
		{"the catalog is not compared", p.CatalogPath, ""},
		{"the reaper runs every 5 minutes", p.ReaperInterval, 5 * time.Minute},
		{"the service stacks are named osb-…", p.StackPrefix, "osb"},
		{"the service role has no managed policy", len(p.ServiceRolePolicyARNs), 0},
		{"the api reserves 20 of the account's concurrency", p.APIReservedConcurrency, 20},
		{"the worker reserves, and runs at most, 20", p.WorkerReservedConcurrency, 20},
		{"each plan's Tasks call its backend 5 at a time at most", p.WorkerTasksPerPlan, 5},
		{"no operator may use the sealing key", len(p.SealingKeyOperators), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}

func TestPropsRejected(t *testing.T) {
	tests := []struct {
		name  string
		props BrokerStackProps
		want  string
	}{
		{"an api timeout of 30 s is refused: the HTTP API gives up at 30 s", BrokerStackProps{APITimeout: 30 * time.Second}, "api timeout 30s"},
		{"an api timeout in fractions of a second is refused", BrokerStackProps{APITimeout: 2500 * time.Millisecond}, "whole seconds"},
		{"a worker timeout over Lambda's 15 minutes is refused", BrokerStackProps{WorkerTimeout: 16 * time.Minute}, "worker timeout"},
		{"64 MB of memory is refused", BrokerStackProps{WorkerMemoryMB: 64}, "worker memory 64 MB"},
		{"a retention CloudWatch Logs does not offer is refused", BrokerStackProps{LogRetentionDays: 31}, "log retention 31 days"},
		{"a negative throttle is refused", BrokerStackProps{ThrottleBurstLimit: -1}, "throttle"},
		{"a log level the functions do not know is refused", BrokerStackProps{LogLevel: "verbose"}, `log level "verbose"`},
		{"a reaper less often than hourly is refused", BrokerStackProps{ReaperInterval: 90 * time.Minute}, "reaper interval 1h30m0s"},
		{"a reaper interval in fractions of a minute is refused", BrokerStackProps{ReaperInterval: 90 * time.Second}, "whole minutes"},
		{"a negative reaper interval is refused", BrokerStackProps{ReaperInterval: -5 * time.Minute}, "reaper interval"},
		{"a stack prefix starting with a digit is refused", BrokerStackProps{StackPrefix: "1osb"}, `stack prefix: "1osb" must start with a letter`},
		{"a stack prefix with an underscore is refused", BrokerStackProps{StackPrefix: "osb_test"}, `stack prefix: "osb_test"`},
		{"a stack prefix of 21 characters is refused", BrokerStackProps{StackPrefix: strings.Repeat("a", 21)}, "at most 20"},
		{"a stack prefix with a hyphen is refused: another's would extend it", BrokerStackProps{StackPrefix: "osb-prod"}, "only lower-case letters and digits"},
		{"a stack prefix in upper case is refused: S3 and RDS names are in lower case", BrokerStackProps{StackPrefix: "Osb"}, "only lower-case letters and digits"},
		{"the CDK's own prefix is refused", BrokerStackProps{StackPrefix: "cdk"}, "not the broker's"},
		{"legacy, a stack prefix ending with a hyphen is refused", BrokerStackProps{StackPrefix: "osb-", LegacyStackPrefix: true}, "must not end with a hyphen"},
		{"legacy, a stack prefix with two hyphens in a row is refused", BrokerStackProps{StackPrefix: "team--a", LegacyStackPrefix: true}, "two in a row"},
		{"a service role policy that is not a managed policy's ARN is refused",
			BrokerStackProps{ServiceRolePolicyARNs: []string{"AmazonElastiCacheFullAccess"}}, `service role policy "AmazonElastiCacheFullAccess": not a managed policy's ARN`},
		{"a role's ARN is refused as a service role policy",
			BrokerStackProps{ServiceRolePolicyARNs: []string{"arn:aws:iam::123456789012:role/admin"}}, "not a managed policy's ARN"},
		{"a service role policy given twice is refused",
			BrokerStackProps{ServiceRolePolicyARNs: []string{"arn:aws:iam::aws:policy/AmazonSNSFullAccess", "arn:aws:iam::aws:policy/AmazonSNSFullAccess"}}, "given twice"},
		{"a reserved concurrency that would leave a default account under its unreserved 100 is refused",
			BrokerStackProps{WorkerReservedConcurrency: 500}, "worker reserved concurrency 500: at most 400"},
		{"a plan's Tasks allowed every instance of the worker are refused",
			BrokerStackProps{WorkerReservedConcurrency: 4, WorkerTasksPerPlan: 4}, "worker tasks per plan 4: must be under the worker's reserved concurrency (4)"},
		{"more service role policies than IAM attaches are refused",
			BrokerStackProps{ServiceRolePolicyARNs: manyPolicies(21)}, "at most 20 managed policies"},
		{"a sealing key operator that is not a role's or user's ARN is refused",
			BrokerStackProps{SealingKeyOperators: []string{"arn:aws:iam::123456789012:group/ops"}}, `sealing key operator "arn:aws:iam::123456789012:group/ops": not an IAM role's or user's ARN`},
		{"an account is refused as a sealing key operator: the key's policy names identities",
			BrokerStackProps{SealingKeyOperators: []string{"123456789012"}}, "not an IAM role's or user's ARN"},
		{"a sealing key operator given twice is refused",
			BrokerStackProps{SealingKeyOperators: []string{"arn:aws:iam::123456789012:role/ops", "arn:aws:iam::123456789012:role/ops"}}, "given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.props.withDefaults()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

func TestPropsFromContext(t *testing.T) {
	tests := []struct {
		name    string
		context map[string]any
		check   func(BrokerStackProps) bool
		wantErr string
	}{
		{"numbers from cdk.json are read", map[string]any{ContextAPIMemorySize: 512.0, ContextWorkerTimeout: 90.0, ContextReaperInterval: 15.0},
			func(p BrokerStackProps) bool {
				return p.APIMemoryMB == 512 && p.WorkerTimeout == 90*time.Second && p.ReaperInterval == 15*time.Minute
			}, ""},
		{"numbers from -c, which are strings, are read", map[string]any{ContextAPIMemorySize: "1024", ContextThrottleRateLimit: "7.5"},
			func(p BrokerStackProps) bool { return p.APIMemoryMB == 1024 && p.ThrottleRateLimit == 7.5 }, ""},
		{"an empty value leaves the default", map[string]any{ContextLogLevel: "", ContextLogRetentionDays: ""},
			func(p BrokerStackProps) bool { return p.LogLevel == "" && p.LogRetentionDays == 0 }, ""},
		{"strings are read", map[string]any{ContextStageName: "v1", ContextCatalog: "other.yaml", ContextAlarmTopicARN: "arn:aws:sns:eu-west-1:123456789012:t"},
			func(p BrokerStackProps) bool {
				return p.StageName == "v1" && p.CatalogPath == "other.yaml" && p.AlarmTopicARN == "arn:aws:sns:eu-west-1:123456789012:t"
			}, ""},
		{"a number that is not one is refused", map[string]any{ContextAPIMemorySize: "lots"}, nil, "apiMemorySize: want a number"},
		{"a fraction where a whole number is needed is refused", map[string]any{ContextWorkerMemorySize: 256.5}, nil, "workerMemorySize: want a whole number"},
		{"a number where a path is needed is refused", map[string]any{ContextAPICode: 3.0}, nil, "apiCode: want a string"},
		{"a reaper interval in fractions of a minute is refused", map[string]any{ContextReaperInterval: "2.5"}, nil, "reaperIntervalMinutes: want a whole number"},
		{"sealedOnly=false from -c, a string, allows values in clear", map[string]any{ContextSealedOnly: "false"},
			func(p BrokerStackProps) bool { return p.AllowClear }, ""},
		{"sealedOnly is true by default", map[string]any{},
			func(p BrokerStackProps) bool { return !p.AllowClear }, ""},
		{"an empty sealedOnly is true", map[string]any{ContextSealedOnly: ""},
			func(p BrokerStackProps) bool { return !p.AllowClear }, ""},
		{"a sealedOnly that is not true or false is refused", map[string]any{ContextSealedOnly: "yes"}, nil, `sealedOnly: want true or false, got "yes"`},
		{"the stack prefix is read", map[string]any{ContextStackPrefix: "teama"},
			func(p BrokerStackProps) bool { return p.StackPrefix == "teama" }, ""},
		{"legacyStackPrefix is false by default", map[string]any{},
			func(p BrokerStackProps) bool { return !p.LegacyStackPrefix }, ""},
		{"legacyStackPrefix from -c, a string, is read", map[string]any{ContextLegacyStackPrefix: "true"},
			func(p BrokerStackProps) bool { return p.LegacyStackPrefix }, ""},
		{"service role policies from -c are a comma-separated list, blanks dropped",
			map[string]any{ContextServiceRolePolicyARNs: " arn:aws:iam::aws:policy/A, ,arn:aws:iam::123456789012:policy/B "},
			func(p BrokerStackProps) bool {
				return slices.Equal(p.ServiceRolePolicyARNs, []string{"arn:aws:iam::aws:policy/A", "arn:aws:iam::123456789012:policy/B"})
			}, ""},
		{"service role policies from cdk.json may be a list", map[string]any{ContextServiceRolePolicyARNs: []any{"arn:aws:iam::aws:policy/A"}},
			func(p BrokerStackProps) bool {
				return slices.Equal(p.ServiceRolePolicyARNs, []string{"arn:aws:iam::aws:policy/A"})
			}, ""},
		{"no service role policy is an empty string", map[string]any{ContextServiceRolePolicyARNs: ""},
			func(p BrokerStackProps) bool { return p.ServiceRolePolicyARNs == nil }, ""},
		{"a list of numbers is refused", map[string]any{ContextServiceRolePolicyARNs: []any{1.0}}, nil, "serviceRolePolicyArns: want strings"},
		{"a reserved concurrency is read, and 0 is none", map[string]any{ContextAPIReservedConcurrency: 0.0, ContextWorkerReservedConcurrency: "7"},
			func(p BrokerStackProps) bool { return p.APIReservedConcurrency < 0 && p.WorkerReservedConcurrency == 7 }, ""},
		{"an absent or empty reserved concurrency is the default", map[string]any{ContextAPIReservedConcurrency: ""},
			func(p BrokerStackProps) bool {
				return p.APIReservedConcurrency == 0 && p.WorkerReservedConcurrency == 0
			}, ""},
		{"no bound on each plan's Tasks is 0", map[string]any{ContextWorkerTasksPerPlan: "0"},
			func(p BrokerStackProps) bool { return p.WorkerTasksPerPlan < 0 }, ""},
		{"a negative reserved concurrency is refused", map[string]any{ContextWorkerReservedConcurrency: "-1"}, nil, "workerReservedConcurrency: want 0 (none) or more"},
		{"sealing key operators from -c are a comma-separated list",
			map[string]any{ContextSealingKeyOperators: "arn:aws:iam::123456789012:role/ops, arn:aws:iam::123456789012:user/alice"},
			func(p BrokerStackProps) bool {
				return slices.Equal(p.SealingKeyOperators, []string{"arn:aws:iam::123456789012:role/ops", "arn:aws:iam::123456789012:user/alice"})
			}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := awscdk.NewApp(&awscdk.AppProps{Context: &tt.context})
			p, err := PropsFromContext(app.Node())
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %v, want one saying %q", err, tt.wantErr)
				}
			case err != nil:
				t.Errorf("error %v", err)
			case !tt.check(p):
				t.Errorf("props %+v", p)
			}
		})
	}
}

func TestCheckAssets(t *testing.T) {
	dir := t.TempDir()
	catalog := filepath.Join(dir, "catalog.yaml")
	write(t, catalog, "services: []\n")
	complete := filepath.Join(dir, "complete")
	write(t, filepath.Join(complete, "bootstrap"), "#!/bin/sh\n")
	write(t, filepath.Join(complete, "catalog.yaml"), "services: []\n")
	stale := filepath.Join(dir, "stale")
	write(t, filepath.Join(stale, "bootstrap"), "#!/bin/sh\n")
	write(t, filepath.Join(stale, "catalog.yaml"), "services: [old]\n")
	noBootstrap := filepath.Join(dir, "no-bootstrap")
	write(t, filepath.Join(noBootstrap, "catalog.yaml"), "services: []\n")
	noCatalog := filepath.Join(dir, "no-catalog")
	write(t, filepath.Join(noCatalog, "bootstrap"), "#!/bin/sh\n")

	// A catalog whose driver settings read templates, and builds of it.
	services := filepath.Join(dir, "services")
	write(t, filepath.Join(services, "catalog.yaml"), "services: [s3]\n")
	write(t, filepath.Join(services, "s3-bucket", "instance.yaml"), "Resources: {bucket}\n")
	templates := func(string) ([]string, error) { return []string{"s3-bucket/instance.yaml"}, nil }
	bundled := filepath.Join(dir, "bundled")
	write(t, filepath.Join(bundled, "bootstrap"), "#!/bin/sh\n")
	write(t, filepath.Join(bundled, "catalog.yaml"), "services: [s3]\n")
	write(t, filepath.Join(bundled, "s3-bucket", "instance.yaml"), "Resources: {bucket}\n")
	unbundled := filepath.Join(dir, "unbundled")
	write(t, filepath.Join(unbundled, "bootstrap"), "#!/bin/sh\n")
	write(t, filepath.Join(unbundled, "catalog.yaml"), "services: [s3]\n")
	staleTemplate := filepath.Join(dir, "stale-template")
	write(t, filepath.Join(staleTemplate, "bootstrap"), "#!/bin/sh\n")
	write(t, filepath.Join(staleTemplate, "catalog.yaml"), "services: [s3]\n")
	write(t, filepath.Join(staleTemplate, "s3-bucket", "instance.yaml"), "Resources: {older}\n")
	noFiles := func(string) ([]string, error) { return nil, nil }
	// make build's assets: the catalog pre-parsed, without its YAML.
	preparsed := func(text string) string {
		data, err := osbcatalog.Preparse("catalog.yaml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	preparsedOnly := filepath.Join(dir, "preparsed-only")
	write(t, filepath.Join(preparsedOnly, "bootstrap"), "#!/bin/sh\n")
	write(t, filepath.Join(preparsedOnly, "catalog.yaml.json"), preparsed("services: []\n"))
	stalePreparsed := filepath.Join(dir, "stale-preparsed")
	write(t, filepath.Join(stalePreparsed, "bootstrap"), "#!/bin/sh\n")
	write(t, filepath.Join(stalePreparsed, "catalog.yaml.json"), preparsed("services: [old]\n"))
	notPreparsed := filepath.Join(dir, "not-preparsed")
	write(t, filepath.Join(notPreparsed, "bootstrap"), "#!/bin/sh\n")
	write(t, filepath.Join(notPreparsed, "catalog.yaml.json"), "services: []\n")

	tests := []struct {
		name    string
		catalog string
		files   func(string) ([]string, error)
		dir     string
		wantErr string
	}{
		{"a complete build of the catalog passes", catalog, noFiles, complete, ""},
		{"a build of another catalog passes when no catalog is given", "", noFiles, stale, ""},
		{"a build of another catalog is refused", catalog, noFiles, stale, "build with that catalog"},
		{"a build without bootstrap is refused", "", noFiles, noBootstrap, "make build writes it"},
		{"a build without catalog.yaml is refused", "", noFiles, noCatalog, "make build writes it"},
		{"a build of the catalog pre-parsed alone passes", catalog, noFiles, preparsedOnly, ""},
		{"a build of another catalog pre-parsed is refused", catalog, noFiles, stalePreparsed, "catalog.yaml.json was not made from"},
		{"a build whose catalog.yaml.json is no pre-parsed catalog is refused", "", noFiles, notPreparsed, "no pre-parsed catalog"},
		{"a missing build is refused", "", noFiles, filepath.Join(dir, "missing"), "make build writes it"},
		{"a missing catalog is refused", filepath.Join(dir, "missing.yaml"), noFiles, complete, "catalog"},
		{"a build carrying the catalog's templates passes", filepath.Join(services, "catalog.yaml"), templates, bundled, ""},
		{"a build without the catalog's templates is refused", filepath.Join(services, "catalog.yaml"), templates, unbundled,
			"its s3-bucket/instance.yaml is not the one beside"},
		{"a build with an older template is refused", filepath.Join(services, "catalog.yaml"), templates, staleTemplate,
			"its s3-bucket/instance.yaml is not the one beside"},
		{"a catalog whose templates cannot be listed is refused", catalog,
			func(string) ([]string, error) { return nil, errors.New("no driver \"nope\"") }, complete, `no driver "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkAssets(tt.catalog, tt.files, tt.dir)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestNewBrokerStackRefusesMissingBuild(t *testing.T) {
	app := awscdk.NewApp(nil)
	_, err := NewBrokerStack(app, "Broker", &BrokerStackProps{APICodeDir: filepath.Join(t.TempDir(), "api")})
	if err == nil || !strings.Contains(err.Error(), "make build") {
		t.Errorf("error %v, want one saying to run make build", err)
	}
	if n := len(*app.Node().Children()); n != 0 {
		t.Errorf("the app has %d constructs; want none", n)
	}
}

func TestNewBrokerStackRefusesLongStackName(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Context: &broker.context})
	props, err := PropsFromContext(app.Node())
	if err != nil {
		t.Fatal(err)
	}
	// 72 characters and "-operation": 82, over Step Functions' 80.
	name := strings.Repeat("Broker", 12)
	_, err = NewBrokerStack(app, name, &props)
	if err == nil || !strings.Contains(err.Error(), name+"-operation") || !strings.Contains(err.Error(), "shorter stack name") {
		t.Errorf("error %v, want one naming the state machine and asking for a shorter stack name", err)
	}
}

// manyPolicies is n distinct customer managed policy ARNs.
func manyPolicies(n int) []string {
	var arns []string
	for i := range n {
		arns = append(arns, fmt.Sprintf("arn:aws:iam::123456789012:policy/p%d", i))
	}
	return arns
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
