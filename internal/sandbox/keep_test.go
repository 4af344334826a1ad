package sandbox_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/osbtest"
	"github.com/serverless-osb/broker/internal/sandbox"
	"github.com/serverless-osb/broker/internal/waittest"
)

// TestARestartWithKeepKeepsTheState: a sandbox started with Keep (make
// sandbox KEEP=1) leaves its moto running when it stops, and the next one
// with Keep takes it up: the broker's credentials, and an instance
// provisioned before, are still there. StopKept (what a run without Keep
// does first) ends the kept moto.
func TestARestartWithKeepKeepsTheState(t *testing.T) {
	ctx, cancel := waittest.Context(t)
	defer cancel()
	dir := t.TempDir()
	start := func() *sandbox.Sandbox {
		t.Helper()
		sb, err := sandbox.Start(ctx, sandbox.Config{Template: template, Dir: dir, Keep: true})
		if err != nil {
			t.Fatalf("start a sandbox with Keep: %v", err)
		}
		return sb
	}
	t.Cleanup(func() {
		if err := sandbox.StopKept(dir); err != nil {
			t.Error(err)
		}
	})

	first := start()
	c := client(t, first)
	if r := osbtest.Provision(t, c, "kept-1", demoService, demoSync, false, nil); r.Async {
		t.Fatalf("the demo's synchronous plan answered asynchronously: %+v", r)
	}
	password, moto := first.Password, first.Moto
	first.Close()
	if first.Kept {
		t.Errorf("the first sandbox says it took up a kept state")
	}

	second := start()
	defer second.Close()
	if !second.Kept || second.Moto != moto {
		t.Fatalf("the second sandbox did not take up the first's moto (kept %v, moto %s, was %s)", second.Kept, second.Moto, moto)
	}
	if second.Password != password {
		t.Errorf("the broker's password changed across the restart")
	}
	c = client(t, second)
	if got, err := c.GetInstance(&osb.GetInstanceRequest{InstanceID: "kept-1"}); err != nil || got.PlanID != demoSync {
		t.Fatalf("kept-1 after the restart: %+v %v", got, err)
	}
	second.Close()

	if err := sandbox.StopKept(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "state.json")); !os.IsNotExist(err) {
		t.Errorf("StopKept left the state: %v", err)
	}
	waittest.Until(t, func() error {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, moto+"/moto-api/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil // gone
		}
		resp.Body.Close()
		return fmt.Errorf("the kept moto %s still answers after StopKept", moto)
	})
}
