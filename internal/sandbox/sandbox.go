// Package sandbox runs the stack that `make deploy` deploys on one machine,
// with no AWS account and no Docker: every resource is read from the
// synthesized template (cdk.out), its references resolved to the sandbox's
// own resources. moto_server (with the repository's fixes) plays the AWS
// services, with IAM enforcement on; the Lambda functions run as their real
// bootstraps under the Lambda Runtime Interface Emulator, each with
// temporary credentials of its own role; an HTTP front turns requests into
// the API Gateway HTTP API events the api function receives; moto's Step
// Functions runs the state machines, invoking the worker through the
// emulator; and the sandbox runs the template's schedules.
//
// `make sandbox` runs one (internal/tools/sandbox); tests Start one.
package sandbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/serverless-osb/broker/internal/mototest/motoserver"
)

// Config says what to run.
type Config struct {
	// Template is the synthesized template (STACK.template.json); the
	// functions' assets are beside it (cdk.out).
	Template string
	// Addr is where the HTTP front listens (default 127.0.0.1:0, a free
	// port).
	Addr string
	// Region is the stack's region (default us-east-1).
	Region string
	// Dir holds the sandbox's files: the logs, the bootstraps built for
	// this machine (default: a new temporary folder, removed by Close).
	Dir string
	// Root is the repository's root, which builds bootstraps for this
	// machine when the template's are for another (default: the module
	// of the working directory).
	Root string
	// ScheduleInterval replaces the rate of the template's schedules (the
	// reaper's), so that they run often enough to be seen (default 30 s).
	ScheduleInterval time.Duration
	// Log receives the sandbox's own log lines (JSON); nil discards them.
	Log io.Writer
	// Environments is how many execution environments each function may
	// run at once (default DefaultEnvironments), as Lambda's concurrency:
	// a function whose template sets ReservedConcurrentExecutions runs at
	// most that many. Invocations beyond wait for one, up to API
	// Gateway's 30 s.
	Environments int
	// Keep takes up what a sandbox of the same Dir kept (its moto, still
	// running with every table item, stack and execution, and what the
	// sandbox made there), and keeps it at Close for the next run: `make
	// sandbox KEEP=1`. Without it, a run ends what a run before kept and
	// starts afresh. A kept run listens for the Invoke API where the
	// first did (moto invokes there).
	Keep bool
	// Targets are the target accounts of the catalog's placement, where
	// the sandbox deploys the target stack (target.go).
	Targets []Target
}

// Sandbox is a running stack.
type Sandbox struct {
	catalogMu   sync.Mutex
	catalogCode string // the code Catalog's catalogPath is of
	catalogPath string

	// URL is the HTTP front's: the broker's URL.
	URL string
	// Username and Password are the broker's credentials, from the stack's
	// secret.
	Username, Password string
	// SecretARN is that secret's ARN.
	SecretARN string
	// Moto is moto's endpoint; Admin may do anything there (tests check
	// what the functions made with it).
	Moto  string
	Admin aws.Config
	// Dir holds the logs: moto.log and one LOGICALID.log per function.
	Dir string
	// Outputs are the template's outputs, resolved to the sandbox's
	// resources (BrokerUrl: the front's URL, with the stage's path).
	Outputs map[string]string
	// StackName is the stack's name (the template's file name): a stack of
	// that name on moto's CloudFormation holds the Outputs, as the deployed
	// one does, so that `ops --stack StackName` finds the broker.
	StackName string
	// NotMade lists the template's resources the sandbox neither makes nor
	// runs (alarms, dashboards, topics...), "LogicalId (Type)".
	NotMade []string
	// Kept says that the sandbox took up the state a run before kept
	// (Config.Keep).
	Kept bool

	cfg     Config
	ctx     context.Context
	cancel  context.CancelFunc
	log     *slog.Logger
	region  string
	account string
	stack   *stack
	clients clients
	moto    *motoserver.Server
	servers []*http.Server
	wg      sync.WaitGroup
	tmpDir  bool
	// ready is set once Start has made everything: the front and the
	// Invoke API listen before (moto and the template need their
	// addresses), and answer 503 until then.
	ready atomic.Bool

	made map[string]made
	// names are the types and names of the resources the makers made
	// (ownName).
	names map[string]bool
	// kept is what a run before made (KEEP=1), or what a deploy finds made.
	kept          map[string]made
	keptCreds     map[string]keptCreds
	policies      policies
	secrets       map[string]string
	functionSpecs []functionSpec
	functions     []*Function
	schedules     []schedule
	routes        []route
	integrations  map[string]integration
	stagePrefix   string
	api           string
	// keepMoto says that Close leaves moto running with stateFile: a
	// sandbox started with Keep, or one that took up a kept state (even if
	// it failed to start, the state stays for the next try).
	keepMoto   bool
	invokeAddr string
	unrunnable atomic.Pointer[[]UnrunnablePlan]
	deploying  sync.Mutex
}

// Start makes the template's resources on a moto of its own and runs the
// stack. Close stops everything it started.
func Start(ctx context.Context, c Config) (sb *Sandbox, err error) {
	t, err := ReadTemplate(c.Template)
	if err != nil {
		return nil, err
	}
	sb = &Sandbox{cfg: c, region: cmp.Or(c.Region, "us-east-1"), made: map[string]made{}, secrets: map[string]string{},
		integrations: map[string]integration{}, log: slog.New(slog.NewJSONHandler(cmp.Or[io.Writer](c.Log, io.Discard), nil))}
	sb.ctx, sb.cancel = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			sb.Close()
			sb = nil
		}
	}()
	sb.Dir = c.Dir
	if c.Keep && c.Dir == "" {
		return sb, errors.New("keeping the state (Keep) needs a folder of the sandbox's own (Dir) to keep it in")
	}
	if sb.Dir == "" {
		if sb.Dir, err = os.MkdirTemp("", "sandbox"); err != nil {
			return sb, err
		}
		sb.tmpDir = true
	}
	// Absolute: each emulator runs in its function's folder.
	if sb.Dir, err = filepath.Abs(sb.Dir); err != nil {
		return sb, err
	}
	if err := os.MkdirAll(sb.Dir, 0o755); err != nil {
		return sb, err
	}
	rie, err := ensureRIE(ctx)
	if err != nil {
		return sb, err
	}
	kept, keptMoto := takeUpKept(c, sb.Dir, sb.logf)

	// The front and Lambda's Invoke API listen first: the template's HTTP
	// API is the front's URL, and moto must know where to invoke.
	front, err := net.Listen("tcp", cmp.Or(c.Addr, "127.0.0.1:0"))
	if err != nil {
		return sb, fmt.Errorf("the broker's address: %w", err)
	}
	sb.URL = "http://" + front.Addr().String()
	invokeAddr := "127.0.0.1:0"
	if kept != nil {
		invokeAddr = kept.Invoke
	}
	invoke, err := net.Listen("tcp", invokeAddr)
	if err != nil {
		front.Close()
		if keptMoto != nil {
			keptMoto.Release()
		}
		return sb, fmt.Errorf("the Invoke API's address %s, where the kept moto invokes: %w", invokeAddr, err)
	}
	sb.invokeAddr = invoke.Addr().String()
	sb.serve(front, sb.front())
	sb.serve(invoke, sb.invokeAPI())

	if kept != nil {
		sb.moto, sb.Kept, sb.kept, sb.keepMoto, sb.keptCreds = keptMoto, true, kept.made(), true, kept.Functions
		maps.Copy(sb.secrets, kept.Secrets)
	} else {
		sb.moto, err = motoserver.Start(motoserver.Options{LogPath: filepath.Join(sb.Dir, "moto.log"), Outlive: c.Keep,
			Env: []string{"MOTO_LAMBDA_ENDPOINT=http://" + sb.invokeAddr}})
		if err != nil {
			return sb, err
		}
	}
	sb.Moto = sb.moto.Endpoint
	root := sb.awsConfig(credentials.NewStaticCredentialsProvider("sandbox", "sandbox", ""))
	if kept != nil {
		// IAM stays enforced on a kept moto: its administrator's keys.
		root = kept.admin(sb)
	}
	sb.clients = newClients(root)
	id, err := sts.NewFromConfig(root).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return sb, fmt.Errorf("moto: %w", err)
	}
	sb.account = *id.Account

	name := strings.TrimSuffix(filepath.Base(c.Template), ".template.json")
	sb.StackName = name
	if sb.stack, err = newStack(t, name, sb.region, sb.account); err != nil {
		return sb, err
	}
	if err := sb.makeResources(ctx); err != nil {
		return sb, err
	}
	if kept != nil {
		sb.Admin = root
	} else if err := sb.makeAdmin(ctx); err != nil {
		return sb, err
	}
	sb.clients = newClients(sb.Admin)
	sb.api = sb.findAPIID()
	if err := sb.startFunctions(ctx, rie); err != nil {
		return sb, err
	}
	sb.Outputs = map[string]string{}
	for name, o := range t.Outputs {
		if v, err := sb.stack.evalString(o.Value); err == nil {
			sb.Outputs[name] = v
		}
	}
	if err := sb.registerStack(ctx); err != nil {
		return sb, err
	}
	if err := sb.checkPlans(ctx); err != nil {
		return sb, err
	}
	if kept == nil {
		if err := sb.deployTargets(ctx); err != nil {
			return sb, err
		}
	}
	// From here on, every call needs credentials whose policies allow it.
	if kept == nil {
		if err := sb.enforceIAM(ctx); err != nil {
			return sb, err
		}
	}
	if err := sb.readCredentials(); err != nil {
		return sb, err
	}
	if err := sb.writeKept(ctx); err != nil {
		return sb, err
	}
	sb.keepMoto = c.Keep
	sb.ready.Store(true)
	sb.runSchedules()
	return sb, nil
}

func (sb *Sandbox) awsConfig(creds aws.CredentialsProvider) aws.Config {
	return aws.Config{Region: sb.region, Credentials: creds, BaseEndpoint: aws.String(sb.moto.Endpoint), RetryMaxAttempts: 3}
}

func (sb *Sandbox) serve(l net.Listener, h http.Handler) {
	s := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !sb.ready.Load() {
			gatewayError(w, http.StatusServiceUnavailable, "Service Unavailable")
			return
		}
		h.ServeHTTP(w, r)
	})}
	sb.servers = append(sb.servers, s)
	sb.wg.Add(1)
	go func() {
		defer sb.wg.Done()
		_ = s.Serve(l)
	}()
}

func (sb *Sandbox) logf(format string, args ...any) {
	sb.log.Info(fmt.Sprintf(format, args...))
}

func contextWithTimeout(r *http.Request, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), d)
}

// makeResources makes every resource of the template, each after those it
// refers to, with its properties resolved.
func (sb *Sandbox) makeResources(ctx context.Context) error {
	names, err := order(sb.stack.t.Resources)
	if err != nil {
		return err
	}
	for _, name := range names {
		r := sb.stack.t.Resources[name]
		if r.Condition != "" {
			ok, err := sb.stack.condition(r.Condition, nil)
			if err != nil {
				return fmt.Errorf("resource %s: %w", name, err)
			}
			if !ok {
				continue
			}
		}
		props := map[string]any{}
		if r.Properties != nil {
			v, err := sb.stack.eval(map[string]any(r.Properties))
			if err != nil {
				return fmt.Errorf("resource %s (%s): %w", name, r.Type, err)
			}
			props = v.(map[string]any)
		}
		var m made
		if k, ok := sb.kept[name]; ok && inMoto[r.Type] {
			if m, err = takeUp(ctx, sb, r.Type, props, k); err != nil {
				return fmt.Errorf("resource %s (%s): %w", name, r.Type, err)
			}
		} else if mk, ok := makers[r.Type]; ok {
			if m, err = mk(ctx, sb, name, props); err != nil {
				return fmt.Errorf("resource %s (%s): %w", name, r.Type, err)
			}
		} else {
			m = standIn(sb, name, r.Type)
			sb.stack.standIns[name] = true
			sb.NotMade = append(sb.NotMade, fmt.Sprintf("%s (%s)", name, r.Type))
		}
		if r.Type == "AWS::Lambda::Function" {
			sb.functionSpecs[len(sb.functionSpecs)-1].asset, _ = r.Metadata["aws:asset:path"].(string)
		}
		sb.made[name] = m
		sb.stack.refs[name] = m.ref
		sb.stack.attrs[name] = m.attrs
	}
	return nil
}

// registerStack makes a stack named as the template on moto's
// CloudFormation whose outputs are the sandbox's Outputs: what an operator
// reads of the deployed stack (ops --stack). Its one resource makes
// nothing (moto ignores a WaitConditionHandle); the sandbox made the
// template's resources itself.
func (sb *Sandbox) registerStack(ctx context.Context) error {
	outputs := map[string]any{}
	for name, v := range sb.Outputs {
		if v != "" { // CloudFormation refuses an empty output
			outputs[name] = map[string]any{"Value": v}
		}
	}
	data, err := json.Marshal(map[string]any{
		"Description": "The outputs of the sandbox's stack; the sandbox makes its resources itself (docs/sandbox.md).",
		"Resources":   map[string]any{"Sandbox": map[string]any{"Type": "AWS::CloudFormation::WaitConditionHandle"}},
		"Outputs":     outputs,
	})
	if err != nil {
		return err
	}
	body := string(data)
	if sb.Kept {
		return sb.updateStack(ctx, body)
	}
	client := cloudformation.NewFromConfig(sb.awsConfig(sb.clients.iam.Options().Credentials))
	if _, err := createStackOwn(ctx, client, &cloudformation.CreateStackInput{StackName: &sb.StackName, TemplateBody: &body}); err != nil {
		return fmt.Errorf("the stack %s on moto's CloudFormation: %w", sb.StackName, err)
	}
	return nil
}

// makeAdmin makes a user that may do anything, for tests and operators to
// look at moto once IAM is enforced.
func (sb *Sandbox) makeAdmin(ctx context.Context) error {
	name := "sandbox-admin"
	if _, err := createOwn(true, func() (*iam.CreateUserOutput, error) {
		return sb.clients.iam.CreateUser(ctx, &iam.CreateUserInput{UserName: &name})
	},
		func() (*iam.CreateUserOutput, error) {
			_, err := sb.clients.iam.GetUser(ctx, &iam.GetUserInput{UserName: &name})
			return nil, err
		}); err != nil {
		return err
	}
	doc := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}`
	if _, err := sb.clients.iam.PutUserPolicy(ctx, &iam.PutUserPolicyInput{UserName: &name, PolicyName: aws.String("everything"), PolicyDocument: &doc}); err != nil {
		return err
	}
	key, err := sb.clients.iam.CreateAccessKey(ctx, &iam.CreateAccessKeyInput{UserName: &name})
	if err != nil {
		return err
	}
	sb.Admin = sb.awsConfig(credentials.NewStaticCredentialsProvider(*key.AccessKey.AccessKeyId, *key.AccessKey.SecretAccessKey, ""))
	return nil
}

// enforceIAM turns moto's IAM enforcement on: from now on a call succeeds
// only if its credentials' policies allow its action (moto does not
// evaluate resources and conditions).
func (sb *Sandbox) enforceIAM(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sb.moto.Endpoint+"/moto-api/reset-auth", strings.NewReader("0"))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("turn on IAM enforcement: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("turn on IAM enforcement: HTTP %d", resp.StatusCode)
	}
	return nil
}

// readCredentials finds the broker's credentials: the stack's secret that
// holds a username and a password.
func (sb *Sandbox) readCredentials() error {
	for _, arn := range slices.Sorted(maps.Keys(sb.secrets)) {
		var pair struct{ Username, Password string }
		if json.Unmarshal([]byte(sb.secrets[arn]), &pair) == nil && pair.Username != "" && pair.Password != "" {
			sb.Username, sb.Password, sb.SecretARN = pair.Username, pair.Password, arn
			return nil
		}
	}
	return errors.New("the template has no secret holding a username and a password (the broker's credentials)")
}

// Function returns the function of the template's logical id (or name, or
// ARN), for tests: its Processes, its Invoke.
func (sb *Sandbox) Function(id string) *Function {
	for _, f := range sb.functions {
		if f.spec.logicalID == id {
			return f
		}
	}
	return sb.function(id)
}

// Catalog is the catalog the stack's functions serve: the catalog.yaml
// beside the bootstrap they run (every function of a synthesis bundles the
// same one), which ops reads as the broker's (BROKER_CATALOG); as make
// build bundles it pre-parsed alone, one written from that in the
// sandbox's folder, with the bundle's files beside it (assetCatalog).
func (sb *Sandbox) Catalog() string {
	if len(sb.functions) == 0 {
		return ""
	}
	code := sb.functions[0].Code()
	sb.catalogMu.Lock()
	defer sb.catalogMu.Unlock()
	// A deploy replaces the functions' code: the catalog is its own.
	if sb.catalogCode != code {
		sb.catalogCode, sb.catalogPath = code, filepath.Join(code, "catalog.yaml")
		if p, err := assetCatalog(code, filepath.Join(sb.Dir, "catalog", filepath.Base(code))); err == nil {
			sb.catalogPath = p
		}
	}
	return sb.catalogPath
}

// FunctionLog returns what the function of the logical id has logged so
// far (its bootstraps' output and the emulator's).
func (sb *Sandbox) FunctionLog(id string) string {
	data, _ := os.ReadFile(filepath.Join(sb.Dir, id+".log"))
	return string(data)
}

// Close stops everything the sandbox started and, if it made its folder,
// removes it.
func (sb *Sandbox) Close() {
	sb.cancel()
	for _, s := range sb.servers {
		_ = s.Close()
	}
	for _, f := range sb.functions {
		f.stop()
	}
	sb.wg.Wait()
	switch {
	case sb.moto != nil && sb.keepMoto:
		sb.moto.Release() // with stateFile, for the next run
	case sb.moto != nil:
		sb.moto.Stop()
		_ = os.Remove(filepath.Join(sb.Dir, stateFile))
	}
	for _, f := range sb.functions {
		if c, ok := f.logs.(io.Closer); ok {
			c.Close()
		}
	}
	if sb.tmpDir {
		os.RemoveAll(sb.Dir)
	}
}
