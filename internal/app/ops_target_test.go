package app_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/env"
	"github.com/serverless-osb/broker/internal/logging"
	"github.com/serverless-osb/broker/internal/mototest"
)

// TestOpsSaysWhichBrokerItReads runs ops as an operator does after make
// run: it says on stderr, first, which broker's data and which catalog it
// reads (by default the catalog the broker last started with, which the
// operator need not repeat); it refuses a directory no broker started on
// (a mistyped or forgotten BROKER_DATA_DIR), exiting 1 with the fix and
// creating nothing there, but not a broker that has no instance; and its
// answer is alone on stdout, the broker's log quiet unless asked for.
func TestOpsSaysWhichBrokerItReads(t *testing.T) {
	dir := t.TempDir()
	b := apptest.Start(t, dir)
	service, plan := b.Plan("fake-async-plan")
	plantBehind(t, b, service, plan, "0.9.0", "behind-1")
	b.Stop() // ops opens the data: the broker must not hold it
	catalog := b.Config.CatalogPath
	// No BROKER_CATALOG, and the test runs where no catalog.yaml is.
	setenv(t, map[string]string{
		"BROKER_DATA_DIR": dir, env.Catalog: "", "BROKER_STATEMACHINES": filepath.Join(apptest.Root(), "statemachines"),
		env.Table: "", "BROKER_SEALING_KEYS": "", "BROKER_LOG_LEVEL": "",
	})
	ops := func(t *testing.T, args ...string) (stdout, stderr string, err error) {
		t.Helper()
		var out, errOut bytes.Buffer
		err = app.RunCommand(t.Context(), append([]string{"ops"}, args...), &out, &errOut)
		return out.String(), errOut.String(), err
	}
	firstLine := func(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

	t.Run("it names the broker's data and the catalog the broker started with", func(t *testing.T) {
		stdout, stderr, err := ops(t, "instances", "--behind")
		if err != nil {
			t.Fatalf("ops instances --behind: %v\n%s", err, stderr)
		}
		if want := "ops: the local broker's data in " + dir + ", catalog " + catalog + ", the one the broker last started with"; firstLine(stderr) != want {
			t.Errorf("ops said on stderr\n%s\nwant first\n%s", stderr, want)
		}
		if !strings.Contains(stdout, "behind-1") || !strings.Contains(stdout, "yes: the plan is at 1.0.0") {
			t.Errorf("ops instances --behind answered\n%s\nwant behind-1, behind the plan's 1.0.0", stdout)
		}
	})

	t.Run("a catalog given is read, and said to differ from the broker's", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "catalog.yaml")
		data, err := os.ReadFile(catalog)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(other, data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, stderr, err := ops(t, "--data", dir, "--catalog", other, "operations")
		if err != nil {
			t.Fatalf("ops --catalog %s operations: %v\n%s", other, err, stderr)
		}
		if want := "ops: the local broker's data in " + dir + ", catalog " + other + ", not " + catalog + ", which the broker last started with"; firstLine(stderr) != want {
			t.Errorf("ops said on stderr\n%s\nwant first\n%s", stderr, want)
		}
	})

	t.Run("its answer is alone on stdout and the log quiet unless --verbose", func(t *testing.T) {
		// A local upgrade runs the workflow in the command, which logs.
		for _, verbose := range []bool{false, true} {
			args := []string{"--json", "upgrade", "start", "--plan", plan, "--wait"}
			if verbose {
				args = append([]string{"--verbose"}, args...)
			}
			stdout, stderr, err := ops(t, args...)
			if err != nil {
				t.Fatalf("ops %v: %v\n%s", args, err, stderr)
			}
			dec := json.NewDecoder(strings.NewReader(stdout))
			var answer map[string]any
			if err := dec.Decode(&answer); err != nil || answer["campaign_id"] == nil {
				t.Fatalf("ops %v: stdout is not the campaign's JSON (%v):\n%s", args, err, stdout)
			}
			if _, err := dec.Token(); !errors.Is(err, io.EOF) {
				t.Errorf("ops %v: stdout holds more than its answer:\n%s", args, stdout)
			}
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			if !strings.HasPrefix(lines[0], "ops: the local broker's data in ") {
				t.Errorf("ops %v: stderr starts %q, want the broker it reads", args, lines[0])
			}
			switch logs := lines[1:]; {
			case !verbose && len(logs) > 0:
				t.Errorf("ops %v logged without --verbose:\n%s", args, stderr)
			case verbose && len(logs) == 0:
				t.Errorf("ops %v logged nothing with --verbose", args)
			case verbose:
				for _, l := range logs {
					var line map[string]any
					if err := json.Unmarshal([]byte(l), &line); err != nil || line["msg"] == nil {
						t.Errorf("ops %v: stderr line %q is not a JSON log line", args, l)
					}
				}
			}
		}
	})

	t.Run("a directory no broker started on is refused and left as it was", func(t *testing.T) {
		fresh := filepath.Join(t.TempDir(), "fresh")
		_, stderr, err := ops(t, "--data", fresh, "instances", "--behind")
		if app.ExitCode(err) != 1 || !strings.Contains(err.Error(), "no broker's data in "+fresh) ||
			!strings.Contains(err.Error(), "start the broker with make run") || !strings.Contains(err.Error(), "--data DIR") {
			t.Errorf("ops on %s: %v (exit %d), want exit 1 saying no broker's data is there and how to name the broker", fresh, err, app.ExitCode(err))
		}
		if _, serr := os.Stat(fresh); !errors.Is(serr, os.ErrNotExist) {
			t.Errorf("ops on a missing directory made it (%v); stderr:\n%s", serr, stderr)
		}
	})

	t.Run("a bolt file no broker started on is refused", func(t *testing.T) {
		// What an earlier ops left in a directory it was wrongly given.
		unused := t.TempDir()
		c := app.LocalConfig{DataDir: unused, CatalogPath: catalog, StateMachines: filepath.Join(apptest.Root(), "statemachines"),
			ReapInterval: -1, Operator: true}
		l, err := app.OpenLocal(t.Context(), c, logging.New(io.Discard, 0))
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		_, _, err = ops(t, "--data", unused, "instances")
		if app.ExitCode(err) != 1 || !strings.Contains(err.Error(), "no broker has started on it") || !strings.Contains(err.Error(), "start the broker with make run") {
			t.Errorf("ops on %s: %v (exit %d), want exit 1 saying no broker started there, and the fix", unused, err, app.ExitCode(err))
		}
	})

	t.Run("a broker with no instance is not refused", func(t *testing.T) {
		empty := t.TempDir()
		apptest.Start(t, empty).Stop()
		stdout, stderr, err := ops(t, "--data", empty, "instances")
		if err != nil || strings.TrimSpace(stdout) != strings.Join(strings.Fields("INSTANCE  SERVICE  PLAN  STATE  VERSION  DIGEST  BEHIND  ACCOUNT  REGION  MAPPING"), "  ") {
			t.Errorf("ops instances on a broker with none: %v\n%s%s", err, stdout, stderr)
		}
	})
}

// TestOpsRefusesADeployedBrokerWithoutItsTable: BROKER_TABLE naming a
// table that does not exist (a typo, another region, a deleted stack) on
// moto: ops says which table it reads, then exits 1 saying the table does
// not exist and how to name a broker.
func TestOpsRefusesADeployedBrokerWithoutItsTable(t *testing.T) {
	table := mototest.Name("missing")
	setenv(t, map[string]string{
		"AWS_ENDPOINT_URL": mototest.Endpoint(t), "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "",
		"AWS_REGION": "us-east-1", env.Table: table, env.DynamoDBEndpoint: "", env.Catalog: filepath.Join(apptest.Root(), "catalog.yaml"),
		env.OperationStateMachineARN: "", env.CleanupStateMachineARN: "", env.UpgradeStateMachineARN: "", env.SealingKeyARN: "",
		"BROKER_LOG_LEVEL": "",
	})
	var out, errOut bytes.Buffer
	err := app.RunCommand(t.Context(), []string{"ops", "operations"}, &out, &errOut)
	if app.ExitCode(err) != 1 || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "--stack NAME") {
		t.Errorf("ops on table %s: %v (exit %d), want exit 1 saying the table does not exist, and how to name a broker", table, err, app.ExitCode(err))
	}
	if want := "ops: the deployed broker of table " + table + " in us-east-1 (BROKER_TABLE), catalog "; !strings.HasPrefix(errOut.String(), want) {
		t.Errorf("ops said on stderr\n%s\nwant first %q…", errOut.String(), want)
	}
}
