//go:build !lambda.norpc

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/app"
)

// local points the command at the data of a local broker that started
// once and has nothing (ops refuses a directory no broker started on),
// with the repository's demo catalog and workflows.
func local(t *testing.T) {
	t.Setenv("BROKER_DATA_DIR", t.TempDir())
	t.Setenv("BROKER_CATALOG", filepath.Join("..", "..", "catalog.yaml"))
	t.Setenv("BROKER_STATEMACHINES", filepath.Join("..", "..", "statemachines"))
	t.Setenv("BROKER_TABLE", "")
	c, err := app.LocalConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	c.ReapInterval = -1
	l, err := app.OpenLocal(context.Background(), c, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCommandLine(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		exit     int
		stdout   []string // what the standard output holds
		errorOut []string // what the error (or, for help, stderr) says
	}{
		{"--help prints the usage and exits 2, as Go's flags do", []string{"--help"}, 2, nil, []string{"usage: go run ./functions/api", "ops"}},
		{"an unknown argument prints the usage and exits 2 rather than start a broker", []string{"serve"}, 2, nil, []string{`unknown argument "serve"`, "usage:"}},
		{"an unknown flag prints the usage and exits 2", []string{"-addr=:9090"}, 2, nil, []string{"unknown argument", "usage:"}},
		{"ops with no command prints its usage and exits 2", []string{"ops"}, 2, nil, []string{"no command", "--json"}},
		{"ops with an unknown command exits 2", []string{"ops", "frobnicate"}, 2, nil, []string{`unknown command "frobnicate"`}},
		{"ops with an unknown flag exits 2", []string{"ops", "--yaml", "reap"}, 2, nil, []string{"flag provided but not defined"}},
		{"ops cleanup without an id exits 2", []string{"ops", "cleanup"}, 2, nil, []string{"cleanup takes one argument"}},
		{"ops help prints its usage and exits 0", []string{"ops", "help"}, 0, []string{"usage: go run ./functions/api ops [--json]"}, nil},
		{"ops reap answers in readable text", []string{"ops", "reap"}, 0, []string{"operations in progress", "detached resources", "cleanups started"}, nil},
		{"ops operations answers with a header line", []string{"ops", "operations"}, 0, []string{"OPERATION", "KIND", "STATUS"}, nil},
		{"ops reseal says how many values it sealed under which key", []string{"ops", "reseal"}, 0, []string{"values that may hold a secret", "re-sealed under k"}, nil},
		{"ops rotate-key makes a new local key", []string{"ops", "rotate-key"}, 0, []string{"seals from now on", "run ops reseal"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local(t)
			var stdout, stderr bytes.Buffer
			err := app.RunCommand(context.Background(), tt.args, &stdout, &stderr)
			if got := app.ExitCode(err); got != tt.exit {
				t.Fatalf("exit %d (%v), want %d", got, err, tt.exit)
			}
			said := stderr.String()
			if err != nil {
				said += err.Error()
			}
			for _, w := range tt.errorOut {
				if !strings.Contains(said, w) {
					t.Errorf("the command said %q, want %q in it", said, w)
				}
			}
			for _, w := range tt.stdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout %q, want %q in it", stdout.String(), w)
				}
			}
			if strings.Contains(stdout.String(), "{InProgress:") {
				t.Errorf("stdout holds a raw Go struct: %q", stdout.String())
			}
		})
	}
}

func TestOpsJSON(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want any
	}{
		{"ops --json reap answers the report as an object", []string{"ops", "--json", "reap"}, map[string]any{}},
		{"the flag may follow the command", []string{"ops", "reap", "--json"}, map[string]any{}},
		{"ops --json operations answers a list", []string{"ops", "--json", "operations"}, []any{}},
		{"ops --json detached answers a list", []string{"ops", "--json", "detached"}, []any{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local(t)
			var stdout, stderr bytes.Buffer
			if err := app.RunCommand(context.Background(), tt.args, &stdout, &stderr); err != nil {
				t.Fatalf("%v (stderr %s)", err, stderr.String())
			}
			got := tt.want
			switch got.(type) {
			case map[string]any:
				var m map[string]any
				if err := json.Unmarshal(stdout.Bytes(), &m); err != nil {
					t.Fatalf("not a JSON object: %q: %v", stdout.String(), err)
				}
				if _, ok := m["in_progress"]; !ok {
					t.Errorf("the report %v has no in_progress", m)
				}
			case []any:
				var l []any
				if err := json.Unmarshal(stdout.Bytes(), &l); err != nil {
					t.Fatalf("not a JSON list: %q: %v", stdout.String(), err)
				}
			}
		})
	}
}
