package app_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// localEnv sets every variable LocalConfigFromEnv reads, so that the
// machine's environment does not leak in, for a broker on a free port with
// its data in a new folder.
func localEnv(t *testing.T, logLevel string) (dataDir string) {
	t.Helper()
	dataDir = filepath.Join(t.TempDir(), "data")
	for name, value := range map[string]string{
		"BROKER_ADDR": "127.0.0.1:0", "BROKER_DATA_DIR": dataDir,
		"BROKER_CATALOG":       filepath.Join(apptest.Root(), "catalog.yaml"),
		"BROKER_STATEMACHINES": filepath.Join(apptest.Root(), "statemachines"),
		"BROKER_USERNAME":      apptest.Username, "BROKER_PASSWORD": apptest.Password, "BROKER_CREDENTIALS": "",
		"BROKER_LOG_LEVEL": logLevel,
		// RunLocal sets the process's collector unless GOGC is set
		// (BrokerGC): the test process keeps its own.
		"GOGC": "100",
	} {
		t.Setenv(name, value)
	}
	return dataDir
}

func TestBrokerLogLevelIsRead(t *testing.T) {
	tests := []struct {
		value   string
		want    slog.Level
		wantErr bool
	}{
		{value: "", want: slog.LevelInfo},
		{value: "debug", want: slog.LevelDebug},
		{value: "info", want: slog.LevelInfo},
		{value: "warn", want: slog.LevelWarn},
		{value: "ERROR", want: slog.LevelError},
		{value: "chatty", wantErr: true},
		{value: "warning", wantErr: true},
		{value: "-4", wantErr: true},
	}
	for _, tt := range tests {
		t.Run("BROKER_LOG_LEVEL="+tt.value, func(t *testing.T) {
			localEnv(t, tt.value)
			c, err := app.LocalConfigFromEnv()
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "BROKER_LOG_LEVEL") ||
					!strings.Contains(err.Error(), `"`+tt.value+`"`) || !strings.Contains(err.Error(), "want debug, info, warn or error") {
					t.Fatalf("LocalConfigFromEnv: %v; want an error naming the variable, its value and the levels", err)
				}
				return
			}
			if err != nil || c.LogLevel != tt.want {
				t.Fatalf("LocalConfigFromEnv: level %v, %v; want %v", c.LogLevel, err, tt.want)
			}
		})
	}
}

// TestAnInvalidLogLevelStopsTheBrokerAtStart: nothing is opened, served or
// logged.
func TestAnInvalidLogLevelStopsTheBrokerAtStart(t *testing.T) {
	dataDir := localEnv(t, "loud")
	var out, logs apptest.SyncBuffer
	err := app.RunLocal(context.Background(), &out, &logs)
	if err == nil || !strings.Contains(err.Error(), `BROKER_LOG_LEVEL: unknown log level "loud": want debug, info, warn or error`) {
		t.Fatalf("RunLocal: %v", err)
	}
	if out.String() != "" || logs.String() != "" {
		t.Fatalf("RunLocal wrote %q and logged %q", out.String(), logs.String())
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Fatalf("the data directory was created: %v", err)
	}
}

// TestTheLocalBrokerLogsAtItsLevel runs the local broker as `make run`
// does and sends it one request: its log line is info, so it is written
// at debug and info, and not at warn.
func TestTheLocalBrokerLogsAtItsLevel(t *testing.T) {
	for _, tt := range []struct {
		level       string
		wantRequest bool
	}{{"debug", true}, {"info", true}, {"warn", false}} {
		t.Run("at "+tt.level, func(t *testing.T) {
			localEnv(t, tt.level)
			var out, logs apptest.SyncBuffer
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- app.RunLocal(ctx, &out, &logs) }()
			url := waitForURL(t, &out, done)
			req, _ := http.NewRequest(http.MethodGet, url+"/v2/catalog", nil)
			req.SetBasicAuth(apptest.Username, apptest.Password)
			req.Header.Set("X-Broker-API-Version", "2.17")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("RunLocal: %v", err)
			}
			if got := strings.Contains(logs.String(), `"msg":"request"`); got != tt.wantRequest {
				t.Fatalf("request line logged: %v, want %v; log:\n%s", got, tt.wantRequest, logs.String())
			}
		})
	}
}

// runLocal runs the `make run` broker (RunLocal) until the test ends, and
// returns where it listens.
func runLocal(t *testing.T) string {
	t.Helper()
	var out, logs apptest.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.RunLocal(ctx, &out, &logs) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunLocal: %v", err)
		}
	})
	return waitForURL(t, &out, done)
}

var listening = regexp.MustCompile(`listening on (http://\S+)`)

// waitForURL waits for RunLocal to say where it listens.
func waitForURL(t *testing.T, out *apptest.SyncBuffer, done <-chan error) string {
	t.Helper()
	var url string
	waittest.Until(t, func() error {
		select {
		case err := <-done:
			t.Fatalf("RunLocal returned before listening: %v", err)
		default:
		}
		m := listening.FindStringSubmatch(out.String())
		if m == nil {
			return fmt.Errorf("RunLocal did not say where it listens: %q", out.String())
		}
		url = m[1]
		return nil
	})
	return url
}

// writes records each Write whole.
type writes struct {
	mu  sync.Mutex
	all []string
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all = append(w.all, string(p))
	return len(p), nil
}

func (w *writes) first() (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.all) == 0 {
		return "", false
	}
	return w.all[0], true
}

// TestTheStartIsOneWrite: the local broker says where it listens, the
// password it generated and how to try it in one write, so that whoever
// reads the first line reads the password too (the guides' test read
// "is listening" and then found no password, under load, when these were
// three writes).
func TestTheStartIsOneWrite(t *testing.T) {
	localEnv(t, "info")
	t.Setenv("BROKER_USERNAME", "")
	t.Setenv("BROKER_PASSWORD", "")
	out := &writes{}
	var logs apptest.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.RunLocal(ctx, out, &logs) }()
	var first string
	waittest.Until(t, func() error {
		select {
		case err := <-done:
			t.Fatalf("RunLocal returned before it started: %v\n%s", err, logs.String())
		default:
		}
		var ok bool
		if first, ok = out.first(); !ok {
			return fmt.Errorf("RunLocal wrote nothing yet")
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunLocal: %v", err)
	}
	for _, want := range []string{"is listening on http://127.0.0.1:", "generated password", "try: curl"} {
		if !strings.Contains(first, want) {
			t.Errorf("the first write lacks %q: %q", want, first)
		}
	}
}
