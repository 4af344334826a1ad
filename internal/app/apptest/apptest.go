// Package apptest starts a real local broker (bolt store in a temporary
// directory, local engine running statemachines/, the demo driver) for
// tests and benchmarks, and speaks raw HTTP to it.
package apptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/serverless-osb/broker/internal/api"
	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/logging"
	"github.com/serverless-osb/broker/internal/waittest"
)

// Credentials the test broker accepts: a current pair and a rotated one.
var (
	Username, Password         = "admin", "s3cret-admin-password"
	OtherUsername, OtherPasswd = "rotated", "n3xt-rotated-password"
)

// Root is the repository's root folder.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Broker is a running test broker. Its drivers are wrapped as Options.Wrap
// says, then so that a test can Hold a change in progress.
type Broker struct {
	tb      testing.TB
	holds   *holds
	Local   *app.Local
	URL     string
	Catalog *catalog.Catalog
	Config  app.LocalConfig
	Logs    *SyncBuffer
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers (the log).
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// Start starts a broker with its data in dir (a new temporary one when
// empty) on a free loopback port. It stops when the test ends.
func Start(tb testing.TB, dir string) *Broker {
	tb.Helper()
	return StartWith(tb, Options{Dir: dir})
}

// Options choose where a test broker keeps its data.
type Options struct {
	// Dir holds the bolt file (a new temporary one when empty).
	Dir string
	// Store, when set, replaces the bolt store (e.g. DynamoDB on moto).
	Store broker.Store
	// Wrap wraps the ports (fault injection).
	Wrap *app.Wrappers
	// ReapInterval is passed on (negative: the test reaps by itself).
	ReapInterval time.Duration
	// Sleep replaces the local engine's and the broker's waits.
	Sleep func(ctx context.Context, d time.Duration)
	// Now replaces the broker's and the engine's clock.
	Now func() time.Time
	// Catalog is the catalog to serve: an absolute path, or one relative to
	// the repository's root (default catalog.yaml).
	Catalog string
	// AWS and Getenv are passed on to the drivers (e.g. moto's
	// configuration for the CloudFormation driver).
	AWS    func(context.Context) (aws.Config, error)
	Getenv func(string) string
	// Logs, when set, receives the broker's log at the level `make run`
	// logs by default (info), in place of Broker.Logs at debug: the
	// benchmarks give io.Discard, so that each line costs what it costs
	// `make run` and none is kept.
	Logs io.Writer
}

// StartWith starts a broker as Start does, with options.
func StartWith(tb testing.TB, o Options) *Broker {
	tb.Helper()
	dir := o.Dir
	if dir == "" {
		dir = tb.TempDir()
	}
	root := Root()
	h := &holds{ids: map[string]bool{}}
	catalogPath := filepath.Join(root, "catalog.yaml")
	switch {
	case filepath.IsAbs(o.Catalog):
		catalogPath = o.Catalog // one a test wrote
	case o.Catalog != "":
		catalogPath = filepath.Join(root, o.Catalog)
	}
	cfg := app.LocalConfig{
		Addr: "127.0.0.1:0", DataDir: dir,
		CatalogPath:   catalogPath,
		AWS:           o.AWS,
		Getenv:        o.Getenv,
		StateMachines: filepath.Join(root, "statemachines"),
		Credentials:   []api.Credential{{Username: Username, Password: Password}, {Username: OtherUsername, Password: OtherPasswd}},
		Store:         o.Store,
		Wrap:          h.wrap(o.Wrap),
		ReapInterval:  o.ReapInterval,
		Sleep:         o.Sleep,
		Now:           o.Now,
	}
	logs := &SyncBuffer{}
	logger := logging.New(logs, slog.LevelDebug)
	if o.Logs != nil {
		logger = logging.New(o.Logs, slog.LevelInfo)
	}
	l, err := app.OpenLocal(context.Background(), cfg, logger)
	if err != nil {
		tb.Fatalf("open local broker: %v", err)
	}
	if err := l.Listen(cfg.Addr); err != nil {
		tb.Fatalf("listen: %v", err)
	}
	// The broker's own: loading it again was about an eighth of a crash
	// suite's CPU under -race (yaml.v3, and the plans' schemas compiled).
	b := &Broker{tb: tb, Local: l, URL: l.URL(), Catalog: l.Catalog, Config: cfg, Logs: logs, holds: h}
	tb.Cleanup(func() { b.Stop() })
	return b
}

var stopOnce sync.Map

// Stop stops the broker (idempotent); its data stays in Config.DataDir.
func (b *Broker) Stop() {
	if _, done := stopOnce.LoadOrStore(b, true); done {
		return
	}
	if err := b.Local.Close(); err != nil {
		b.tb.Errorf("close broker: %v", err)
	}
}

// Plan returns the id of the plan with that name, and its service's id.
func (b *Broker) Plan(name string) (serviceID, planID string) {
	for _, s := range b.Catalog.Services() {
		for _, p := range s.Plans {
			if p.Name == name {
				return s.ID, p.ID
			}
		}
	}
	b.tb.Fatalf("no plan %q in the catalog", name)
	return "", ""
}

// Request is one HTTP request to the broker.
type Request struct {
	Method string
	Path   string
	// Body is sent as JSON unless it is a string or []byte (sent as is).
	Body    any
	Header  map[string]string
	NoAuth  bool
	Version string // X-Broker-API-Version; "" means 2.17, "-" means none
}

// Response is the broker's answer.
type Response struct {
	Status int
	Header http.Header
	Raw    []byte
	Body   map[string]any
}

// Str returns a top-level string field of the body.
func (r Response) Str(key string) string {
	s, _ := r.Body[key].(string)
	return s
}

// Do sends req and decodes the JSON answer. Only the test's deadline bounds
// the request: on a busy machine a request is slow, not failed.
func (b *Broker) Do(req Request) Response {
	b.tb.Helper()
	var body io.Reader
	switch v := req.Body.(type) {
	case nil:
	case string:
		body = strings.NewReader(v)
	case []byte:
		body = bytes.NewReader(v)
	default:
		data, err := json.Marshal(v)
		if err != nil {
			b.tb.Fatal(err)
		}
		body = bytes.NewReader(data)
	}
	ctx, cancel := waittest.Context(b.tb)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, req.Method, b.URL+req.Path, body)
	if err != nil {
		b.tb.Fatal(err)
	}
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	switch req.Version {
	case "":
		hr.Header.Set(api.HeaderAPIVersion, "2.17")
	case "-":
	default:
		hr.Header.Set(api.HeaderAPIVersion, req.Version)
	}
	if !req.NoAuth {
		hr.SetBasicAuth(Username, Password)
	}
	for k, v := range req.Header {
		hr.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		b.tb.Fatalf("%s %s: %v", req.Method, req.Path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.tb.Fatal(err)
	}
	out := Response{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out.Body); err != nil {
			b.tb.Fatalf("%s %s: answer is not a JSON object: %v: %s", req.Method, req.Path, err, raw)
		}
	}
	return out
}

// WaitLastOperation polls last_operation at path until the operation is no
// longer in progress, and returns the final answer (200 or 410).
func (b *Broker) WaitLastOperation(path string) Response {
	b.tb.Helper()
	var r Response
	waittest.Until(b.tb, func() error {
		if r = b.Do(Request{Method: http.MethodGet, Path: path}); r.Status == http.StatusOK && r.Str("state") == "in progress" {
			return fmt.Errorf("%s still in progress: %s", path, r.Raw)
		}
		return nil
	})
	return r
}
