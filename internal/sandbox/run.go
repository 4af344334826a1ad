package sandbox

import (
	"cmp"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/deploy"
)

// RIEModule is the Lambda Runtime Interface Emulator the sandbox runs, the
// one SAM CLI runs inside its containers, pinned (the Go proxy here refuses
// @latest).
const RIEModule = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@v0.0.0-20261030222936-bef5c4ba774d"

// ensureRIE returns the emulator's binary, built once into the user's cache
// folder by `go install` of the pinned version: a tool the sandbox runs,
// not a dependency of the module (go.mod stays as it is).
func ensureRIE(ctx context.Context) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	_, version, _ := strings.Cut(RIEModule, "@")
	dir := filepath.Join(cache, "serverless-osb", "aws-lambda-rie@"+version)
	bin := filepath.Join(dir, "aws-lambda-rie")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	cmd := exec.CommandContext(ctx, "go", "install", RIEModule)
	cmd.Dir = os.TempDir() // outside any module: go install of a version needs none
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s: %w\n%s", RIEModule, err, out)
	}
	return bin, nil
}

// startFunctions readies every function of the template: its code for this
// machine, its environment with its role's credentials, and its log. The
// environments themselves start at the first invocation, as Lambda's do.
func (sb *Sandbox) startFunctions(ctx context.Context, rie string) error {
	built := map[string]string{}
	for _, spec := range sb.functionSpecs {
		// The broker's functions are Go bootstraps on an OS-only runtime;
		// another (a CDK custom resource's Node.js handler) is not run.
		if !strings.HasPrefix(spec.runtime, "provided") {
			sb.NotMade = append(sb.NotMade, fmt.Sprintf("%s (AWS::Lambda::Function, runtime %s)", spec.logicalID, spec.runtime))
			continue
		}
		dir, err := sb.code(ctx, spec, built)
		if err != nil {
			return fmt.Errorf("function %s: %w", spec.logicalID, err)
		}
		var creds aws.Credentials
		if k, ok := sb.keptCreds[spec.logicalID]; ok {
			creds = aws.Credentials{AccessKeyID: k.AccessKeyID, SecretAccessKey: k.SecretAccessKey, SessionToken: k.SessionToken}
		} else if creds, err = sb.assumeRole(ctx, spec); err != nil {
			return fmt.Errorf("function %s: assume its role %s: %w", spec.logicalID, spec.role, err)
		}
		logs, err := os.OpenFile(filepath.Join(sb.Dir, spec.logicalID+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		f := &Function{spec: spec, dir: dir, rie: rie, logs: logs, creds: creds, freed: make(chan struct{}, 1), all: map[*environment]bool{},
			max: environments(spec, sb.cfg.Environments)}
		f.env = sb.functionEnv(spec, creds)
		sb.functions = append(sb.functions, f)
	}
	return nil
}

// environments is how many execution environments a function may run at
// once, as Lambda's concurrency: the template's reserved concurrency, else
// the sandbox's setting, else DefaultEnvironments; the setting also bounds
// a reserved concurrency above it (a machine runs fewer processes than an
// account).
func environments(spec functionSpec, setting int) int {
	n := cmp.Or(setting, DefaultEnvironments)
	if spec.reserved > 0 {
		return min(spec.reserved, max(n, 1))
	}
	return n
}

// functionEnv is a function's environment: what Lambda sets, then the
// template's variables, then the role's credentials and moto as every
// service's endpoint. Nothing of the caller's environment (its AWS
// profile) reaches the function. LAMBDA_TASK_ROOT is the code's folder,
// which each environment's start adds (the code can change: UpdateCode).
func (sb *Sandbox) functionEnv(spec functionSpec, creds aws.Credentials) []string {
	env := map[string]string{
		"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "en_US.UTF-8", "TZ": ":UTC", "_HANDLER": "bootstrap",
		"AWS_LAMBDA_FUNCTION_NAME": spec.name, "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": fmt.Sprint(spec.memoryMB), "AWS_LAMBDA_FUNCTION_TIMEOUT": fmt.Sprint(spec.timeout),
		"AWS_LAMBDA_LOG_GROUP_NAME": "/aws/lambda/" + spec.name, "AWS_LAMBDA_LOG_STREAM_NAME": "sandbox",
	}
	for k, v := range spec.env {
		env[k] = v
	}
	env["AWS_REGION"], env["AWS_DEFAULT_REGION"] = sb.region, sb.region
	env["AWS_ENDPOINT_URL"] = sb.moto.Endpoint
	env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], env["AWS_SESSION_TOKEN"] = creds.AccessKeyID, creds.SecretAccessKey, creds.SessionToken
	var out []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// assumeRole returns temporary credentials of the function's role, as
// Lambda gives a function: for as long as moto allows, since the sandbox
// does not renew them.
func (sb *Sandbox) assumeRole(ctx context.Context, spec functionSpec) (aws.Credentials, error) {
	client := sts.NewFromConfig(sb.awsConfig(sb.clients.iam.Options().Credentials))
	var out *sts.AssumeRoleOutput
	var err error
	for _, seconds := range []int32{43200, 3600} {
		out, err = client.AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: &spec.role, RoleSessionName: aws.String(spec.name),
			DurationSeconds: aws.Int32(seconds)})
		if err == nil {
			break
		}
	}
	if err != nil {
		return aws.Credentials{}, err
	}
	c := out.Credentials
	return aws.Credentials{AccessKeyID: *c.AccessKeyId, SecretAccessKey: *c.SecretAccessKey, SessionToken: *c.SessionToken}, nil
}

// code returns the folder the function runs from: its asset beside the
// template (aws:asset:path), when its bootstrap is built for this machine;
// else a build for this machine (internal/tools/build -arch) from the
// asset's own catalog.yaml, so with the same catalog and the same files
// beside it, of the function the asset's bootstrap was built from (its
// main package, which Go records in the binary).
func (sb *Sandbox) code(ctx context.Context, spec functionSpec, built map[string]string) (string, error) {
	return sb.codeOf(ctx, sb.cfg.Template, spec, built)
}

// codeOf is code for a function of template.
func (sb *Sandbox) codeOf(ctx context.Context, template string, spec functionSpec, built map[string]string) (string, error) {
	if spec.asset == "" {
		return "", fmt.Errorf("the template names no asset (aws:asset:path): synthesize it with cdk, which leaves the assets beside it")
	}
	dir := spec.asset
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(filepath.Dir(template), dir)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	info, err := buildinfo.ReadFile(filepath.Join(dir, "bootstrap"))
	if err != nil {
		return "", fmt.Errorf("asset %s: its bootstrap: %w", dir, err)
	}
	var goos, goarch string
	for _, s := range info.Settings {
		switch s.Key {
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	if goos == runtime.GOOS && goarch == runtime.GOARCH {
		return dir, nil
	}
	if goos != "linux" {
		return "", fmt.Errorf("asset %s: a bootstrap for %s/%s, not Lambda's linux", dir, goos, goarch)
	}
	// The assets of one synthesis hold the same catalog and files (the
	// stack checks it): one build serves them all.
	key, err := bundledFiles(dir)
	if err != nil {
		return "", err
	}
	out, ok := built[key]
	if !ok {
		// A build of each bundle: a deploy's beside the one before.
		out = filepath.Join(sb.Dir, "build", key[:16], filepath.Base(dir))
		root := sb.cfg.Root
		if root == "" {
			gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
			if err != nil || strings.TrimSpace(string(gomod)) == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
				return "", fmt.Errorf("asset %s is built for %s: run the sandbox from the repository, which builds it for %s", dir, goarch, runtime.GOARCH)
			}
			root = filepath.Dir(strings.TrimSpace(string(gomod)))
		}
		catalogPath, err := assetCatalog(dir, filepath.Join(sb.Dir, "build", key[:16], "catalog-"+filepath.Base(dir)))
		if err != nil {
			return "", err
		}
		cmd := exec.CommandContext(ctx, "go", "run", "./internal/tools/build", "-arch", runtime.GOARCH,
			"-catalog", catalogPath, "-out", out, "-zip=false")
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("build the functions for %s from asset %s: %w\n%s", runtime.GOARCH, dir, err, b)
		}
		built[key] = out
	}
	// ./functions/api in the repository: dist/api in the build.
	code := filepath.Join(out, path.Base(info.Path))
	if _, err := os.Stat(filepath.Join(code, "bootstrap")); err != nil {
		return "", fmt.Errorf("asset %s: its bootstrap is %s, which the build does not make", dir, info.Path)
	}
	return code, nil
}

// assetCatalog is the catalog to rebuild the asset in dir from: its
// catalog.yaml, or, as make build bundles the catalog pre-parsed alone,
// one written in src from the pre-parsed form (catalog.PreparsedYAML),
// with links to the asset's other files beside it, where the catalog's
// settings name them.
func assetCatalog(dir, src string) (string, error) {
	if _, err := os.Stat(filepath.Join(dir, "catalog.yaml")); err == nil {
		return filepath.Join(dir, "catalog.yaml"), nil
	}
	text, err := catalog.PreparsedYAML(filepath.Join(dir, "catalog.yaml"+catalog.PreparsedSuffix))
	if err != nil {
		return "", fmt.Errorf("asset %s: %w", dir, err)
	}
	if err := os.RemoveAll(src); err != nil {
		return "", err
	}
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		switch e.Name() {
		case "bootstrap", "catalog.yaml" + catalog.PreparsedSuffix, deploy.ManifestName:
			continue
		}
		if err := os.Symlink(filepath.Join(dir, e.Name()), filepath.Join(src, e.Name())); err != nil {
			return "", err
		}
	}
	path := filepath.Join(src, "catalog.yaml")
	return path, os.WriteFile(path, text, 0o644)
}

// bundledFiles is a digest of what an asset bundles beside its bootstrap.
func bundledFiles(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "bootstrap" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", rel, len(data))
		h.Write(data)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

// schedule is an EventBridge Scheduler schedule of the template.
type schedule struct {
	name, expression, target, input string
	enabled                         bool
}

// runSchedules invokes each schedule's function with its input, as
// EventBridge Scheduler does (asynchronously), every ScheduleInterval.
func (sb *Sandbox) runSchedules() {
	interval := sb.cfg.ScheduleInterval
	if interval <= 0 {
		interval = 30 * time.Second
	}
	for _, s := range sb.schedules {
		f := sb.function(s.target)
		if !s.enabled || f == nil {
			sb.logf("schedule %s: not run (its target %s is no function of the stack, or it is disabled)", s.name, s.target)
			continue
		}
		sb.wg.Add(1)
		go func() {
			defer sb.wg.Done()
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				select {
				case <-sb.ctx.Done():
					return
				case <-t.C:
					sb.invokeAsync(f, []byte(s.input))
				}
			}
		}()
	}
}
