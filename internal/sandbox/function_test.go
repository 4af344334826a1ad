package sandbox_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"syscall"
	"testing"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/drivers/function"
	"github.com/serverless-osb/broker/internal/drivers/function/functiontest"
	"github.com/serverless-osb/broker/internal/osbtest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// The function-driver plan of the suite's catalog, and the secret its
// requests are signed with.
const (
	functionPlan    = "0b7c8e0e-5d4b-4a8f-8d51-1b9b8b1f6a02"
	functionService = "6d1f7a52-0c53-4b51-9f0e-2f6b8a3d9c11"
	functionSecret  = "sandbox-function-secret"
)

// functionFront is the function plan's URL, fixed when the catalog is
// bundled: it passes each request on to the target a test starts, after
// the test's hook has seen it.
var functionFront = &front{}

type front struct {
	l   net.Listener
	srv *http.Server

	mu     sync.Mutex
	target *url.URL
	hook   func(function.Request)
}

func (f *front) start() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	f.l = l
	f.srv = &http.Server{Handler: http.HandlerFunc(f.serve)}
	go func() { _ = f.srv.Serve(l) }()
	return nil
}

func (f *front) stop() { _ = f.srv.Close() }

func (f *front) URL() string { return "http://" + f.l.Addr().String() }

// use sends the requests to target, each first to hook (nil: none). The
// target takes the front's URL for its own: the URL the catalog names,
// which the broker's requests are addressed (and signed) to.
func (f *front) use(t *testing.T, target *functiontest.Target, hook func(function.Request)) {
	u, err := url.Parse(target.URL)
	if err != nil {
		t.Fatal(err)
	}
	target.URL = f.URL()
	f.mu.Lock()
	f.target, f.hook = u, hook
	f.mu.Unlock()
	t.Cleanup(func() {
		f.mu.Lock()
		f.target, f.hook = nil, nil
		f.mu.Unlock()
	})
}

func (f *front) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	target, hook := f.target, f.hook
	f.mu.Unlock()
	if target == nil {
		http.Error(w, "no target", http.StatusServiceUnavailable)
		return
	}
	body, _ := io.ReadAll(r.Body)
	if hook != nil {
		var req function.Request
		if json.Unmarshal(body, &req) == nil {
			hook(req)
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
}

// TestTheFunctionDriverOnLoopback: the worker, under its role, calls a
// service owner's HTTP target on 127.0.0.1, signed with the secret the
// catalog names, through a whole asynchronous lifecycle.
func TestTheFunctionDriverOnLoopback(t *testing.T) {
	target := functiontest.Start(t, functionSecret)
	functionFront.use(t, target, nil)
	e := &e2e{t: t, c: client(t, shared)}
	r, err := e.c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "fn-1", ServiceID: functionService, PlanID: functionPlan,
		OrganizationGUID: "org", SpaceGUID: "space", AcceptsIncomplete: true, Parameters: map[string]any{"checks": 1}})
	if err != nil || !r.Async {
		t.Fatalf("provision: %+v %v", r, err)
	}
	if state, desc := e.pollService("fn-1", functionService, r.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("provision ended %s: %s", state, desc)
	}
	bind, err := e.c.Bind(&osb.BindRequest{InstanceID: "fn-1", BindingID: "fnb-1", ServiceID: functionService, PlanID: functionPlan,
		AcceptsIncomplete: true, BindResource: &osb.BindResource{AppGUID: ptr("app")}})
	if err != nil || !bind.Async {
		t.Fatalf("bind: %+v %v", bind, err)
	}
	if state := e.pollBinding("fn-1", "fnb-1", bind.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("bind ended %s", state)
	}
	if got, err := e.c.GetBinding(&osb.GetBindingRequest{InstanceID: "fn-1", BindingID: "fnb-1"}); err != nil ||
		got.Credentials["password"] != target.Password("fn-1", "fnb-1") {
		t.Fatalf("fetch binding: %+v %v", got, err)
	}
	ub, err := e.c.Unbind(&osb.UnbindRequest{InstanceID: "fn-1", BindingID: "fnb-1", ServiceID: functionService, PlanID: functionPlan, AcceptsIncomplete: true})
	if err != nil {
		t.Fatalf("unbind: %v", err)
	}
	if ub.Async {
		if state := e.pollBinding("fn-1", "fnb-1", ub.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
			t.Fatalf("unbind ended %s", state)
		}
	}
	dr, err := e.c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "fn-1", ServiceID: functionService, PlanID: functionPlan, AcceptsIncomplete: true})
	if err != nil {
		t.Fatalf("deprovision: %v", err)
	}
	if dr.Async {
		if state, desc := e.pollService("fn-1", functionService, dr.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
			t.Fatalf("deprovision ended %s: %s", state, desc)
		}
	}
	if len(target.Instances()) != 0 {
		t.Errorf("the target still holds %v", target.Instances())
	}
}

// TestAWorkerCrashedMidTaskLeavesNothingStuck kills the worker's bootstrap
// while a Task waits on the function target: the emulator's process, as
// Lambda's runtime when it crashes. The workflow retries the Task, the
// operation completes, and the instance can be deleted.
func TestAWorkerCrashedMidTaskLeavesNothingStuck(t *testing.T) {
	target := functiontest.Start(t, functionSecret)
	inTask, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	functionFront.use(t, target, func(req function.Request) {
		if req.Instance.ID == "crash-1" && req.Call == "begin" {
			once.Do(func() {
				close(inTask)
				<-release
			})
		}
	})
	e := &e2e{t: t, c: client(t, shared)}
	r, err := e.c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "crash-1", ServiceID: functionService, PlanID: functionPlan,
		OrganizationGUID: "org", SpaceGUID: "space", AcceptsIncomplete: true})
	if err != nil || !r.Async {
		t.Fatalf("provision: %+v %v", r, err)
	}
	waittest.Recv(t, inTask, "the begin request of crash-1's Task")
	worker := shared.Function(logicalID("WorkerFunction"))
	pids := worker.Processes()
	if len(pids) == 0 {
		t.Fatal("no worker bootstrap runs")
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	close(release)
	// Lambda reports the crash as the function error Runtime.ExitError,
	// which the Task's Retry retries: every step is idempotent.
	if state, desc := e.pollService("crash-1", functionService, r.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("after the crash, the provision ended %s: %s, want the retried Task to complete it", state, desc)
	}
	dr, err := e.c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "crash-1", ServiceID: functionService, PlanID: functionPlan, AcceptsIncomplete: true})
	if err != nil {
		t.Fatalf("deprovision after the crash: %v", err)
	}
	if dr.Async {
		if state, desc := e.pollService("crash-1", functionService, dr.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
			t.Fatalf("deprovision ended %s: %s", state, desc)
		}
	}
}
