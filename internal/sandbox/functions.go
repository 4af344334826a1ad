package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// functionSpec is a Lambda function of the template, resolved.
type functionSpec struct {
	logicalID, name, arn string
	role                 string // the role's ARN
	asset                string // aws:asset:path
	runtime              string
	timeout, memoryMB    int
	// reserved is the template's ReservedConcurrentExecutions (0: none).
	reserved int
	env      map[string]string
}

// Function runs one Lambda function as Lambda does: each invocation in an
// execution environment of its own, an environment serving one invocation
// at a time and kept for the next, new ones started (cold) while every
// one is busy, up to its limit (Environments), beyond which invocations wait. An
// environment is one aws-lambda-rie process running the bootstrap.
type Function struct {
	spec functionSpec
	env  []string // the environment: the template's, the role's credentials, moto; start adds LAMBDA_TASK_ROOT, the code's folder
	rie  string
	logs io.Writer
	// max bounds the environments (Environments).
	max int

	mu sync.Mutex
	// dir is the code: bootstrap and the bundled files (UpdateCode
	// replaces it).
	dir string
	// creds are the role's credentials the environment holds.
	creds aws.Credentials
	// version counts the changes of code or configuration: an environment
	// started before the last one is not reused.
	version int
	idle    []*environment
	count   int
	freed   chan struct{}
	all     map[*environment]bool
}

// DefaultEnvironments bounds each function's concurrency when neither the
// template (ReservedConcurrentExecutions) nor Config.Environments does:
// enough for the workflows and requests of a test suite, little for a
// 2-core machine.
const DefaultEnvironments = 4

// Environments is how many execution environments the function may run
// at once.
func (f *Function) Environments() int { return f.max }

type environment struct {
	cmd    *exec.Cmd
	url    string
	exited chan struct{}
	// version is the function's when the environment started: one of an
	// older version is not reused.
	version int
}

// Invocation is what an invocation returned: the payload, and whether it is
// a function error (Lambda's X-Amz-Function-Error: Unhandled).
type Invocation struct {
	Payload       []byte
	FunctionError bool
}

func (f *Function) acquire(ctx context.Context) (*environment, error) {
	for {
		f.mu.Lock()
		if n := len(f.idle); n > 0 {
			e := f.idle[n-1]
			f.idle = f.idle[:n-1]
			more, old := n > 1, e.version != f.version
			f.mu.Unlock()
			if more {
				f.wake() // freed holds one signal: pass it on to the next waiter
			}
			select {
			case <-e.exited:
				f.discard(e)
				continue
			default:
			}
			if old {
				f.discard(e)
				continue
			}
			return e, nil
		}
		if f.count < f.max {
			f.count++
			f.mu.Unlock()
			e, err := f.start(ctx)
			if err != nil {
				f.mu.Lock()
				f.count--
				f.mu.Unlock()
				return nil, err
			}
			return e, nil
		}
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-f.freed:
		}
	}
}

func (f *Function) release(e *environment) {
	f.mu.Lock()
	if e.version != f.version {
		// Its code was replaced during the invocation, which it finished,
		// as Lambda lets it.
		f.mu.Unlock()
		f.discard(e)
		return
	}
	f.idle = append(f.idle, e)
	f.mu.Unlock()
	f.wake()
}

// Code is the folder the function runs from: its bootstrap and the files
// bundled beside it (the catalog and its templates).
func (f *Function) Code() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dir
}

// UpdateCode makes the function run the code in dir from now on, as
// Lambda's UpdateFunctionCode does (a deploy of a changed bundle): every
// invocation from now on runs in an environment started with it, idle
// environments of the code before are ended, and those serving an
// invocation finish it and are then ended.
func (f *Function) UpdateCode(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "bootstrap")); err != nil {
		return fmt.Errorf("function %s: no bootstrap in the new code: %w", f.spec.name, err)
	}
	f.mu.Lock()
	f.dir = dir
	f.version++
	idle := f.idle
	f.idle = nil
	f.mu.Unlock()
	for _, e := range idle {
		f.discard(e)
	}
	return nil
}

// update makes the function run the code in dir with the configuration of
// spec from now on, as a deploy's UpdateFunctionCode and
// UpdateFunctionConfiguration do (see UpdateCode).
func (f *Function) update(sb *Sandbox, spec functionSpec, dir string) {
	f.mu.Lock()
	f.spec.timeout, f.spec.memoryMB, f.spec.env = spec.timeout, spec.memoryMB, spec.env
	f.env = sb.functionEnv(f.spec, f.creds)
	f.dir = dir
	f.version++
	idle := f.idle
	f.idle = nil
	f.mu.Unlock()
	for _, e := range idle {
		f.discard(e)
	}
}

// wake tells one invocation waiting for an environment to look again.
func (f *Function) wake() {
	select {
	case f.freed <- struct{}{}:
	default:
	}
}

// discard ends an environment that crashed or timed out, as Lambda does.
func (f *Function) discard(e *environment) {
	e.kill(syscall.SIGKILL)
	<-e.exited
	f.mu.Lock()
	f.count--
	delete(f.all, e)
	f.mu.Unlock()
	f.wake()
}

// start starts an execution environment: aws-lambda-rie on free ports,
// running the bootstrap in the function's folder with its environment.
func (f *Function) start(ctx context.Context) (*environment, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	f.mu.Lock()
	dir, env, version := f.dir, f.env, f.version
	f.mu.Unlock()
	cmd := exec.Command(f.rie, "--log-level", "warn",
		"--runtime-interface-emulator-address", addr,
		"--runtime-api-address", fmt.Sprintf("127.0.0.1:%d", ports[1]),
		filepath.Join(dir, "bootstrap"))
	cmd.Dir, cmd.Env = dir, append(slices.Clone(env), "LAMBDA_TASK_ROOT="+dir)
	cmd.Stdout, cmd.Stderr = f.logs, f.logs
	// Its own process group (the emulator starts the runtime in another,
	// which kill ends too), and it dies with the sandbox, even one killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("function %s: start aws-lambda-rie: %w", f.spec.name, err)
	}
	e := &environment{cmd: cmd, url: "http://" + addr + "/2015-03-31/functions/function/invocations", exited: make(chan struct{}), version: version}
	go func() { _ = cmd.Wait(); close(e.exited) }()
	f.mu.Lock()
	f.all[e] = true
	f.mu.Unlock()
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return e, nil
		}
		select {
		case <-e.exited:
			f.mu.Lock()
			delete(f.all, e)
			f.mu.Unlock()
			return nil, fmt.Errorf("function %s: aws-lambda-rie exited at start (see its log)", f.spec.name)
		case <-ctx.Done():
			f.discard(e)
			f.mu.Lock()
			f.count++ // the caller takes it back
			f.mu.Unlock()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Invoke runs the function once with payload, as Lambda's synchronous
// Invoke does. A function error (the bootstrap answered with an error, or
// its process ended mid-invocation, or it ran out of time) comes back as a
// FunctionError payload {"errorType", "errorMessage"}, and the environment
// that crashed or timed out is discarded; err is for the sandbox's own
// failures.
func (f *Function) Invoke(ctx context.Context, payload []byte) (Invocation, error) {
	e, err := f.acquire(ctx)
	if err != nil {
		return Invocation{}, err
	}
	f.mu.Lock()
	seconds := f.spec.timeout
	f.mu.Unlock()
	timeout := time.Duration(seconds) * time.Second
	ictx, cancel := context.WithTimeout(ctx, timeout+2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ictx, http.MethodPost, e.url, bytes.NewReader(payload))
	if err != nil {
		f.release(e)
		return Invocation{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	select {
	case <-e.exited:
		// The runtime died under the invocation (the emulator with it).
		f.discard(e)
		return functionError("Runtime.ExitError", fmt.Sprintf("RequestId: %s Error: Runtime exited without providing a reason", "sandbox")), nil
	default:
	}
	switch {
	case errors.Is(ictx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		f.discard(e)
		return functionError("Sandbox.Timedout", fmt.Sprintf("Task timed out after %d.00 seconds", seconds)), nil
	case err != nil:
		f.discard(e)
		return Invocation{}, fmt.Errorf("function %s: %w", f.spec.name, err)
	case resp.StatusCode/100 != 2:
		// The emulator could not run the invocation (the runtime failed
		// its init or crashed): Lambda reports those as function errors.
		f.discard(e)
		if isErrorPayload(body) {
			return Invocation{Payload: body, FunctionError: true}, nil
		}
		return functionError("Runtime.ExitError", strings.TrimSpace(string(body))), nil
	case strings.HasPrefix(string(body), "Task timed out after"):
		f.discard(e)
		return functionError("Sandbox.Timedout", string(body)), nil
	}
	inv := Invocation{Payload: body, FunctionError: isErrorPayload(body)}
	if inv.FunctionError && strings.Contains(string(body), `"Runtime.`) {
		f.discard(e) // a runtime that exited is not reused
	} else {
		f.release(e)
	}
	return inv, nil
}

func functionError(typ, message string) Invocation {
	data, _ := json.Marshal(map[string]string{"errorType": typ, "errorMessage": message})
	return Invocation{Payload: data, FunctionError: true}
}

// isErrorPayload reports whether an emulator's answer is a function error:
// the emulator answers 200 either way, with no X-Amz-Function-Error, so, as
// SAM CLI does with the same emulator, an object with errorType and
// errorMessage and nothing but stackTrace besides is one.
func isErrorPayload(body []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return false
	}
	if _, ok := m["errorType"]; !ok {
		return false
	}
	if _, ok := m["errorMessage"]; !ok {
		return false
	}
	for k := range m {
		if k != "errorType" && k != "errorMessage" && k != "stackTrace" {
			return false
		}
	}
	return true
}

// stop ends every environment.
func (f *Function) stop() {
	f.mu.Lock()
	var all []*environment
	for e := range f.all {
		all = append(all, e)
	}
	f.mu.Unlock()
	for _, e := range all {
		e.kill(syscall.SIGKILL)
		<-e.exited
	}
}

// Processes are the process ids of the function's running bootstraps (the
// emulators' children), for tests that crash one.
func (f *Function) Processes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var pids []int
	for e := range f.all {
		pids = append(pids, childrenOf(e.cmd.Process.Pid)...)
	}
	return pids
}

// childrenOf reads /proc for the children of pid, which any of its
// threads may have started.
func childrenOf(pid int) []int {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			var n int
			if _, err := fmt.Sscan(f, &n); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// kill ends an environment: the emulator and the runtime it started, which
// the emulator puts in a process group of its own.
func (e *environment) kill(sig syscall.Signal) {
	for _, pid := range childrenOf(e.cmd.Process.Pid) {
		_ = syscall.Kill(-pid, sig)
		_ = syscall.Kill(pid, sig)
	}
	_ = syscall.Kill(-e.cmd.Process.Pid, sig)
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// invokeAPI serves Lambda's Invoke API (POST
// /2015-03-31/functions/NAME/invocations) for the sandbox's functions:
// moto's Step Functions sends its Lambda Tasks here (moto_server.py fix 6).
func (sb *Sandbox) invokeAPI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == deployPath {
			sb.serveDeploy(w, r)
			return
		}
		rest, ok := strings.CutPrefix(r.URL.Path, "/2015-03-31/functions/")
		name, ok2 := strings.CutSuffix(rest, "/invocations")
		if r.Method != http.MethodPost || !ok || !ok2 {
			lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "no such API: "+r.Method+" "+r.URL.Path)
			return
		}
		f := sb.function(name)
		if f == nil {
			lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+name)
			return
		}
		payload, err := io.ReadAll(io.LimitReader(r.Body, maxInvokePayload+1))
		if err != nil {
			lambdaError(w, http.StatusBadRequest, "InvalidRequestContentException", err.Error())
			return
		}
		if len(payload) > maxInvokePayload {
			lambdaError(w, http.StatusRequestEntityTooLarge, "RequestEntityTooLargeException",
				fmt.Sprintf("Request must be smaller than %d bytes for the InvokeFunction operation", maxInvokePayload))
			return
		}
		if r.Header.Get("X-Amz-Invocation-Type") == "Event" {
			go sb.invokeAsync(f, payload)
			w.WriteHeader(http.StatusAccepted)
			return
		}
		inv, err := f.Invoke(r.Context(), payload)
		if err != nil {
			lambdaError(w, http.StatusInternalServerError, "ServiceException", err.Error())
			return
		}
		w.Header().Set("X-Amz-Executed-Version", "$LATEST")
		if inv.FunctionError {
			w.Header().Set("X-Amz-Function-Error", "Unhandled")
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(inv.Payload)
	})
}

func lambdaError(w http.ResponseWriter, status int, typ, message string) {
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"Type": "User", "message": message})
}

// function finds a function by name, ARN or partial ARN, with or without
// a qualifier.
func (sb *Sandbox) function(name string) *Function {
	for _, f := range sb.functions {
		for _, n := range []string{f.spec.name, f.spec.arn} {
			if name == n || strings.HasPrefix(name, n+":") || strings.HasSuffix(name, ":function:"+f.spec.name) {
				return f
			}
		}
	}
	return nil
}

// invokeAsync runs an asynchronous invocation (Lambda's Event type, as
// EventBridge Scheduler uses): its outcome is only logged.
func (sb *Sandbox) invokeAsync(f *Function, payload []byte) {
	inv, err := f.Invoke(sb.ctx, payload)
	switch {
	case err != nil:
		sb.logf("function %s: asynchronous invocation: %v", f.spec.name, err)
	case inv.FunctionError:
		sb.logf("function %s: asynchronous invocation failed: %s", f.spec.name, inv.Payload)
	}
}
