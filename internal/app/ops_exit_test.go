package app_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/drivers/function/functiontest"
	"github.com/serverless-osb/broker/internal/env"
	"github.com/serverless-osb/broker/internal/waittest"
)

// opsHint is what ops adds to a failure to open the broker: where to look
// for the environment it needs.
const opsHint = "see ops help"

// TestOpsCleanupExitsWithTheCleanupsOutcome runs `ops cleanup` on the local
// broker's data as an operator does after a cleanup gave up: a provision
// that the function's target refused (the broker's secret is not the
// target's) left a detached resource whose cleanup failed the same way.
// Run again with the wrong secret, the cleanup fails and the command exits
// 1 saying why (the real binary, as the operator runs it); with the right
// secret it exits 0 and says the resource is deleted, and the target got
// the cleanup.
func TestOpsCleanupExitsWithTheCleanupsOutcome(t *testing.T) {
	const wrongSecret = "not-the-targets-secret"
	target := functiontest.Start(t, functionSecret)
	dir := t.TempDir()
	o := functionOptions(t, target, wrongSecret)
	o.Dir = dir
	b := apptest.StartWith(t, o)
	service, plan := b.Plan("fake-async-only-plan")
	path := "/v2/service_instances/fx-1"
	r := b.Do(apptest.Request{Method: http.MethodPut, Path: path + "?accepts_incomplete=true", Body: provisionBody(service, plan, map[string]any{})})
	if r.Status != http.StatusAccepted {
		t.Fatalf("provision: %d %s", r.Status, r.Raw)
	}
	if lo := b.WaitLastOperation(path + "/last_operation?operation=" + r.Str("operation")); lo.Str("state") != "failed" {
		t.Fatalf("last_operation %s, want the provision failed", lo.Raw)
	}
	var det broker.Detached
	waittest.Until(t, func() error {
		ds, err := b.Local.Store.ListDetached(t.Context())
		if err != nil {
			return err
		}
		for _, d := range ds {
			if d.InstanceID == "fx-1" && d.State == broker.DetachedFailed {
				det = d
				return nil
			}
		}
		return fmt.Errorf("no failed cleanup of fx-1 yet: %+v", ds)
	})
	b.Stop() // ops opens the data: the broker must not hold it

	environ := map[string]string{
		"BROKER_DATA_DIR":      dir,
		env.Catalog:            o.Catalog,
		"BROKER_STATEMACHINES": filepath.Join(apptest.Root(), "statemachines"),
		env.Table:              "",
		"BROKER_SEALING_KEYS":  "",
		"TEST_FUNCTION_SECRET": wrongSecret,
	}

	t.Run("a cleanup that fails exits 1 and says why", func(t *testing.T) {
		bin := buildAPI(t)
		cmd := exec.Command(bin, "ops", "cleanup", det.ID)
		cmd.Env = os.Environ()
		for k, v := range environ {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("ops cleanup %s: %v, want exit status 1\nstdout:\n%s\nstderr:\n%s", det.ID, err, stdout.String(), stderr.String())
		}
		want := "serverless-osb: the cleanup of " + det.ID + " failed: "
		if !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "HTTP 401") {
			t.Errorf("ops cleanup said\n%s\nwant %q and the reason (the target's HTTP 401)", stderr.String(), want)
		}
		if strings.Contains(stdout.String()+stderr.String(), wrongSecret) {
			t.Error("ops cleanup printed the secret")
		}
	})

	t.Run("a cleanup that succeeds exits 0 and says the resource is deleted", func(t *testing.T) {
		environ["TEST_FUNCTION_SECRET"] = functionSecret
		setenv(t, environ)
		var out, errOut bytes.Buffer
		err := app.RunCommand(t.Context(), []string{"ops", "cleanup", det.ID}, &out, &errOut)
		if app.ExitCode(err) != 0 {
			t.Fatalf("ops cleanup %s: %v (exit %d)\n%s", det.ID, err, app.ExitCode(err), errOut.String())
		}
		if want := "cleanup of " + det.ID + " succeeded: the resource is deleted"; !strings.Contains(out.String(), want) {
			t.Errorf("ops cleanup said\n%s\nwant %q", out.String(), want)
		}
		var cleanups int
		for _, req := range target.Requests() {
			if req.Call == "cleanup" && req.Instance.ID == "fx-1" {
				cleanups++
			}
		}
		if cleanups != 1 {
			t.Errorf("the target got %d cleanups of fx-1, want 1: %+v", cleanups, target.Requests())
		}
		// The command returned once the resource was gone, not before.
		out.Reset()
		if err := app.RunCommand(t.Context(), []string{"ops", "detached"}, &out, &errOut); err != nil || strings.Contains(out.String(), det.ID) {
			t.Errorf("ops detached after the cleanup: %v\n%s\nwant %s gone", err, out.String(), det.ID)
		}
	})

	t.Run("a cleanup of an unknown id exits 1 naming it", func(t *testing.T) {
		setenv(t, environ)
		var out, errOut bytes.Buffer
		err := app.RunCommand(t.Context(), []string{"ops", "cleanup", "no-such-detached"}, &out, &errOut)
		if app.ExitCode(err) != 1 || !strings.Contains(err.Error(), "no-such-detached") || !strings.Contains(err.Error(), "not found") {
			t.Errorf("ops cleanup no-such-detached: %v (exit %d), want exit 1 saying the id is not found", err, app.ExitCode(err))
		}
	})

	t.Run("a plan's secret unset exits 1 naming the variable", func(t *testing.T) {
		environ["TEST_FUNCTION_SECRET"] = ""
		setenv(t, environ)
		var out, errOut bytes.Buffer
		err := app.RunCommand(t.Context(), []string{"ops", "detached"}, &out, &errOut)
		if app.ExitCode(err) != 1 || !strings.Contains(err.Error(), "TEST_FUNCTION_SECRET") || !strings.Contains(err.Error(), opsHint) {
			t.Errorf("ops detached without the plan's secret: %v (exit %d), want exit 1 naming TEST_FUNCTION_SECRET and where to look", err, app.ExitCode(err))
		}
	})
}

// TestOpsWithoutTheDeployedBrokersEnvironmentExits1 runs ops on a deployed
// broker with part of the environment it needs: it exits 1 naming the
// variable to set, before it calls any AWS service.
func TestOpsWithoutTheDeployedBrokersEnvironmentExits1(t *testing.T) {
	// No AWS configuration at all: no region, no credentials, no profile.
	noFile := filepath.Join(t.TempDir(), "none")
	setenv(t, map[string]string{
		"AWS_REGION": "", "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "", "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
		"AWS_SESSION_TOKEN": "", "AWS_CONFIG_FILE": noFile, "AWS_SHARED_CREDENTIALS_FILE": noFile, "AWS_EC2_METADATA_DISABLED": "true",
		env.Table: "", env.OperationStateMachineARN: "", env.CleanupStateMachineARN: "",
	})
	for _, tt := range []struct {
		name    string
		environ map[string]string
		args    []string
		want    []string
	}{
		{"BROKER_TABLE without its region", map[string]string{env.Table: "broker"}, []string{"ops", "operations"},
			[]string{"missing environment variables: " + env.Region}},
		{"--stack without a region", map[string]string{"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "example"},
			[]string{"ops", "--stack", "broker", "operations"}, []string{"no AWS region: set AWS_REGION"}},
		{"--stack without credentials", map[string]string{"AWS_REGION": "eu-west-1"},
			[]string{"ops", "--stack", "broker", "operations"}, []string{"no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			setenv(t, tt.environ)
			var out, errOut bytes.Buffer
			err := app.RunCommand(context.Background(), tt.args, &out, &errOut)
			if app.ExitCode(err) != 1 {
				t.Fatalf("%v: %v (exit %d), want exit 1", tt.args, err, app.ExitCode(err))
			}
			for _, want := range append(tt.want, opsHint) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%v: %v\nwant %q", tt.args, err, want)
				}
			}
		})
	}
}

// setenv sets each variable for the rest of the test.
func setenv(t *testing.T, environ map[string]string) {
	t.Helper()
	for k, v := range environ {
		t.Setenv(k, v)
	}
}

// buildAPI builds the api command, as `go run ./functions/api` does, and
// returns the binary's path.
func buildAPI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "api")
	build := exec.Command("go", "build", "-o", bin, "./functions/api")
	build.Dir = apptest.Root()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}
