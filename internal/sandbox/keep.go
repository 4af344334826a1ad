package sandbox

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"

	"github.com/serverless-osb/broker/internal/mototest/motoserver"
)

// stateFile, in the sandbox's folder, is what a later run (KEEP=1) and a
// deploy (make sandbox-deploy) need of a running sandbox: moto's endpoint
// and process, the Invoke API's address (moto's Step Functions invokes
// there, MOTO_LAMBDA_ENDPOINT, so a later run listens there again), what
// the sandbox made on moto, and the keys of its administrator. Only the
// user may read it: it holds those keys and the broker's secret.
const stateFile = "state.json"

// keptState is stateFile's content.
type keptState struct {
	Moto    string              `json:"moto"`
	MotoPID int                 `json:"moto_pid"`
	Invoke  string              `json:"invoke"`
	Account string              `json:"account"`
	Made    map[string]keptMade `json:"made"`
	Secrets map[string]string   `json:"secrets"`
	// AdminKey and AdminSecret are the sandbox-admin user's access key:
	// IAM stays enforced on a kept moto, so a later run works with them.
	AdminKey    string `json:"admin_key"`
	AdminSecret string `json:"admin_secret"`
	// Functions are the functions' credentials, by logical id: on a moto
	// whose IAM is enforced, the administrator cannot assume the
	// functions' roles (their trust policies name Lambda), as in AWS.
	Functions map[string]keptCreds `json:"functions"`
}

type keptCreds struct {
	AccessKeyID     string `json:"access_key_id"`
	SecretAccessKey string `json:"secret_access_key"`
	SessionToken    string `json:"session_token"`
}

type keptMade struct {
	Ref   string            `json:"ref"`
	Attrs map[string]string `json:"attrs,omitempty"`
}

// readKept reads the state a sandbox of dir left, if any.
func readKept(dir string) (*keptState, error) {
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var k keptState
	if err := json.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, stateFile), err)
	}
	return &k, nil
}

// writeKept records the running sandbox's state (see stateFile).
func (sb *Sandbox) writeKept(ctx context.Context) error {
	creds, err := sb.Admin.Credentials.Retrieve(ctx)
	if err != nil {
		return err
	}
	k := keptState{Moto: sb.moto.Endpoint, MotoPID: sb.moto.PID(), Invoke: sb.invokeAddr, Account: sb.account,
		Made: map[string]keptMade{}, Secrets: sb.secrets, AdminKey: creds.AccessKeyID, AdminSecret: creds.SecretAccessKey}
	for name, m := range sb.made {
		k.Made[name] = keptMade{Ref: m.ref, Attrs: m.attrs}
	}
	k.Functions = map[string]keptCreds{}
	for _, f := range sb.functions {
		k.Functions[f.spec.logicalID] = keptCreds{f.creds.AccessKeyID, f.creds.SecretAccessKey, f.creds.SessionToken}
	}
	data, err := json.MarshalIndent(k, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(sb.Dir, stateFile), data, 0o600)
}

// StopKept ends the moto a sandbox of dir left running (KEEP=1) and
// forgets its state: a run without KEEP starts afresh.
func StopKept(dir string) error {
	k, err := readKept(dir)
	if err != nil || k == nil {
		return err
	}
	motoserver.StopProcess(k.MotoPID)
	return os.Remove(filepath.Join(dir, stateFile))
}

// takeUpKept returns the kept state of c.Dir when c.Keep asks for it and
// its moto still runs (nil to start afresh); without Keep, it ends what a
// run before kept.
func takeUpKept(c Config, dir string, log func(string, ...any)) (*keptState, *motoserver.Server) {
	if !c.Keep {
		if err := StopKept(dir); err != nil {
			log("the state a run before kept: %v; starting afresh", err)
		}
		return nil, nil
	}
	k, err := readKept(dir)
	if err != nil || k == nil {
		if err != nil {
			log("the state a run before kept: %v; starting afresh", err)
		}
		return nil, nil
	}
	m, err := motoserver.Attach(k.Moto, k.MotoPID)
	if err != nil {
		log("the moto a run before kept: %v; starting afresh", err)
		_ = os.Remove(filepath.Join(dir, stateFile))
		return nil, nil
	}
	return k, m
}

func (k *keptState) made() map[string]made {
	out := map[string]made{}
	for name, m := range k.Made {
		out[name] = made{ref: m.Ref, attrs: m.Attrs}
	}
	return out
}

func (k *keptState) admin(sb *Sandbox) aws.Config {
	return sb.awsConfig(credentials.NewStaticCredentialsProvider(k.AdminKey, k.AdminSecret, ""))
}

// updateStack puts the outputs on the kept stack of the template's name
// (registerStack made it), as a deploy changes them.
func (sb *Sandbox) updateStack(ctx context.Context, body string) error {
	client := cloudformation.NewFromConfig(sb.awsConfig(sb.clients.iam.Options().Credentials))
	_, err := client.UpdateStack(ctx, &cloudformation.UpdateStackInput{StackName: &sb.StackName, TemplateBody: &body})
	if err != nil && !strings.Contains(err.Error(), "No updates are to be performed") {
		return fmt.Errorf("the stack %s on moto's CloudFormation: %w", sb.StackName, err)
	}
	return nil
}

// Deploy deploys the synthesized template (a new bundle: the catalog and
// its templates changed, the functions' code) into the running sandbox, as
// `cdk deploy` updates the deployed stack: each function's code and
// configuration replaced (UpdateFunctionCode and
// UpdateFunctionConfiguration: invocations under way finish on the code
// before), the roles' policies put again, the state machines' definitions
// updated, a resource new to the template made; the table, the secret and
// every stack on moto's CloudFormation kept. It returns what it did, a
// line each. What it cannot take up in a running sandbox (a new function,
// a changed route or schedule) is in the lines; a restart with KEEP=1
// takes it up.
func (sb *Sandbox) Deploy(ctx context.Context, template string) ([]string, error) {
	sb.deploying.Lock()
	defer sb.deploying.Unlock()
	t, err := ReadTemplate(template)
	if err != nil {
		return nil, err
	}
	st, err := newStack(t, sb.StackName, sb.region, sb.account)
	if err != nil {
		return nil, err
	}
	cfg := sb.cfg
	cfg.Template = template
	// The deploy's resources are walked by a sandbox of their own, which
	// the running one takes what it needs from.
	nb := &Sandbox{cfg: cfg, ctx: sb.ctx, log: sb.log, region: sb.region, account: sb.account, stack: st, clients: sb.clients,
		moto: sb.moto, URL: sb.URL, Dir: sb.Dir, made: map[string]made{}, secrets: maps.Clone(sb.secrets),
		integrations: map[string]integration{}, kept: sb.made, StackName: sb.StackName}
	if err := nb.makeResources(ctx); err != nil {
		return nil, fmt.Errorf("deploy %s: %w", template, err)
	}
	var report []string
	for _, name := range slices.Sorted(maps.Keys(nb.made)) {
		if _, ok := sb.made[name]; !ok {
			report = append(report, fmt.Sprintf("resource %s (%s): made", name, t.Resources[name].Type))
		}
	}
	built := map[string]string{}
	for _, spec := range nb.functionSpecs {
		if !strings.HasPrefix(spec.runtime, "provided") {
			continue
		}
		f := sb.Function(spec.logicalID)
		if f == nil || f.spec.logicalID != spec.logicalID {
			report = append(report, fmt.Sprintf("function %s: new; it runs once the sandbox restarts (make sandbox KEEP=1)", spec.logicalID))
			continue
		}
		dir, err := nb.codeOf(ctx, template, spec, built)
		if err != nil {
			return report, fmt.Errorf("function %s: %w", spec.logicalID, err)
		}
		f.update(sb, spec, dir)
		report = append(report, fmt.Sprintf("function %s: code and configuration replaced (%s)", spec.logicalID, dir))
	}
	if !slices.Equal(routeKeys(nb.routes), routeKeys(sb.routes)) || len(nb.schedules) != len(sb.schedules) {
		report = append(report, "the HTTP API's routes or the schedules changed: the sandbox takes them up when it restarts (make sandbox KEEP=1)")
	}
	for name, m := range nb.made {
		if _, ok := sb.made[name]; !ok && inMoto[t.Resources[name].Type] {
			sb.made[name] = m
		}
	}
	sb.secrets = nb.secrets
	sb.policies = nb.policies
	sb.cfg.Template = template
	if err := sb.checkPlans(ctx); err != nil {
		return report, err
	}
	for _, p := range sb.Unrunnable() {
		report = append(report, fmt.Sprintf("cannot run here (provisions refused with 422): %s", p))
	}
	if err := sb.writeKept(ctx); err != nil {
		return report, err
	}
	return report, nil
}

func routeKeys(rs []route) []string {
	var keys []string
	for _, r := range rs {
		keys = append(keys, r.key)
	}
	slices.Sort(keys)
	return keys
}

// deployPath is the sandbox's own route on the Invoke API's address (the
// loopback), where make sandbox-deploy asks the running sandbox to deploy.
const deployPath = "/sandbox/deploy"

// serveDeploy answers POST deployPath {"template": PATH}: the deploy's
// lines, or the error that stopped it.
func (sb *Sandbox) serveDeploy(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Template string `json:"template"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil || !filepath.IsAbs(req.Template) {
		lambdaError(w, http.StatusBadRequest, "InvalidParameterValueException", `want {"template": "/absolute/path/STACK.template.json"}`)
		return
	}
	report, err := sb.Deploy(r.Context(), req.Template)
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		_ = json.NewEncoder(w).Encode(map[string]any{"report": report, "message": err.Error()})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"report": report})
}

// RequestDeploy asks the sandbox running in dir to deploy template, as
// make sandbox-deploy does, and returns its lines.
func RequestDeploy(ctx context.Context, dir, template string) ([]string, error) {
	k, err := readKept(dir)
	if err != nil {
		return nil, err
	}
	if k == nil {
		return nil, fmt.Errorf("no sandbox runs in %s (%s is missing): start one with make sandbox", dir, stateFile)
	}
	if template, err = filepath.Abs(template); err != nil {
		return nil, err
	}
	body, _ := json.Marshal(map[string]string{"template": template})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+k.Invoke+deployPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the sandbox of %s does not answer (is it running?): %w", dir, err)
	}
	defer resp.Body.Close()
	var answer struct {
		Report  []string `json:"report"`
		Message string   `json:"message"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return nil, fmt.Errorf("the sandbox's answer (HTTP %d): %w", resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK {
		return answer.Report, fmt.Errorf("deploy: %s", cmp.Or(answer.Message, resp.Status))
	}
	return answer.Report, nil
}
