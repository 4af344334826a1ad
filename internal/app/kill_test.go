package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// brokerProcess is the `make run` binary, run as a separate process on a
// data directory, so that the test can kill it with SIGKILL.
type brokerProcess struct {
	t    *testing.T
	bin  string
	dir  string
	addr string
	cmd  *exec.Cmd
	out  *apptest.SyncBuffer
}

const killPassword = "kill-test-password"

func (p *brokerProcess) start() {
	p.t.Helper()
	cmd := exec.Command(p.bin)
	cmd.Env = append(os.Environ(), "BROKER_ADDR="+p.addr, "BROKER_DATA_DIR="+p.dir, "BROKER_PASSWORD="+killPassword,
		"BROKER_USERNAME=broker", "BROKER_LOG_LEVEL=warn",
		"BROKER_CATALOG="+filepath.Join(apptest.Root(), "catalog.yaml"),
		"BROKER_STATEMACHINES="+filepath.Join(apptest.Root(), "statemachines"))
	out := &apptest.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	p.out = out
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.cmd = cmd
	p.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waittest.Until(p.t, func() error {
		if code, _ := p.do(http.MethodGet, "/v2/catalog", ""); code != http.StatusOK {
			return fmt.Errorf("the broker does not answer yet (%d):\n%s", code, out.String())
		}
		return nil
	})
}

// kill sends SIGKILL: nothing runs after it, no deferred write, no flush.
func (p *brokerProcess) kill() {
	p.t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		p.t.Fatal(err)
	}
	_ = p.cmd.Wait()
}

func (p *brokerProcess) do(method, path, body string) (int, map[string]any) {
	req, err := http.NewRequest(method, "http://"+p.addr+path, strings.NewReader(body))
	if err != nil {
		p.t.Fatal(err)
	}
	req.SetBasicAuth("broker", killPassword)
	req.Header.Set("X-Broker-API-Version", "2.17")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var v map[string]any
	_ = json.Unmarshal(data, &v)
	return resp.StatusCode, v
}

// TestNothingAcceptedIsLostAcrossKill9 accepts asynchronous provisions,
// kills the broker's process with SIGKILL at once (the local engine had
// written little or nothing of their executions), starts it again on the
// same data, and checks that every operation that was answered 202 ends
// succeeded, and every synchronous provision answered 201 is there.
func TestNothingAcceptedIsLostAcrossKill9(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "api")
	build := exec.Command("go", "build", "-o", bin, "./functions/api")
	build.Dir = apptest.Root()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := &brokerProcess{t: t, bin: bin, dir: filepath.Join(dir, "data"), addr: addr}
	p.start()

	b := apptest.Start(t, "") // for the catalog's ids only
	service, asyncPlan := b.Plan("fake-async-plan")
	_, syncPlan := b.Plan("fake-plan")
	body := func(plan string, seconds int) string {
		return fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"o","space_guid":"s","parameters":{"duration_seconds":%d}}`,
			service, plan, seconds)
	}
	accepted := map[string]string{} // instance -> operation
	for i := range 40 {
		id := fmt.Sprintf("async-%d", i)
		code, v := p.do(http.MethodPut, "/v2/service_instances/"+id+"?accepts_incomplete=true", body(asyncPlan, i%3))
		if code != http.StatusAccepted {
			t.Fatalf("provision %s: %d %v", id, code, v)
		}
		accepted[id] = v["operation"].(string)
		if i%4 == 0 {
			sid := fmt.Sprintf("sync-%d", i)
			if code, v := p.do(http.MethodPut, "/v2/service_instances/"+sid, body(syncPlan, 0)); code != http.StatusCreated {
				t.Fatalf("provision %s: %d %v", sid, code, v)
			}
		}
	}
	p.kill()
	p.start()

	for id, op := range accepted {
		waittest.Until(t, func() error {
			code, v := p.do(http.MethodGet, "/v2/service_instances/"+id+"/last_operation?operation="+op, "")
			if code != http.StatusOK || v["state"] != "succeeded" {
				return fmt.Errorf("%s after the kill: %d %v", id, code, v)
			}
			return nil
		})
	}
	// How much the kill took from the engine, for the record: each one the
	// broker found missing and started again.
	t.Logf("executions started again after the kill: %d", strings.Count(p.out.String(), "execution missing, starting it again"))
	for i := 0; i < 40; i += 4 {
		sid := fmt.Sprintf("sync-%d", i)
		if code, v := p.do(http.MethodGet, "/v2/service_instances/"+sid, ""); code != http.StatusOK {
			t.Errorf("%s after the kill: %d %v", sid, code, v)
		}
	}
}
