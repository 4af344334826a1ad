//go:build !lambda.norpc

// Package app wires the broker from its configuration: the local broker
// (bolt store, local engine, net/http) that `make run` serves, and the
// Lambda functions (DynamoDB store, Step Functions engine) that AWS runs.
// The functions' environment variables are named in internal/env, which
// the CDK stack sets them from; RequiredEnv lists those a function cannot
// start without.
package app

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"go.etcd.io/bbolt"

	"github.com/serverless-osb/broker/internal/api"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/drivers"
	"github.com/serverless-osb/broker/internal/engine/local"
	"github.com/serverless-osb/broker/internal/env"
	"github.com/serverless-osb/broker/internal/groupcommit"
	"github.com/serverless-osb/broker/internal/logging"
	"github.com/serverless-osb/broker/internal/sealing"
	"github.com/serverless-osb/broker/internal/steps"
	boltstore "github.com/serverless-osb/broker/internal/store/bolt"
)

// LocalConfig configures the local broker.
type LocalConfig struct {
	// Addr is where to listen; the default is 127.0.0.1:8080.
	Addr string
	// DataDir holds the bolt file; data survives restarts.
	DataDir string
	// CatalogPath is the catalog.yaml to serve.
	CatalogPath string
	// StateMachines is the folder of the ASL definitions.
	StateMachines string
	// Credentials are the accepted basic-auth pairs.
	Credentials []api.Credential
	// GeneratedPassword is set when the password was generated at start.
	GeneratedPassword bool
	// Store, when set, replaces the bolt store (the DynamoDB store, say);
	// the local engine keeps its executions in the bolt file regardless.
	Store broker.Store
	// ReapInterval is how often the reaper runs (default 30 s; negative:
	// never, for tests that run it themselves).
	ReapInterval time.Duration
	// Sleep, when set, replaces the local engine's waits (Wait states and
	// retry delays) and the broker's (a synchronous request's between its
	// checks), so that tests can compress hours of cleanup retries.
	Sleep func(ctx context.Context, d time.Duration)
	// MaxTasksPerPlan bounds the calls one plan's Tasks make to its
	// backend at once (broker.Slots), so that a slow or hanging one holds
	// at most that many of the engine's MaxTasks. Default: a quarter of
	// them (local.DefaultMaxTasks), at least 1.
	MaxTasksPerPlan int
	// Now, when set, is the broker's and the local engine's clock, which
	// tests move with Sleep to wait out an outage's budget at once.
	Now func() time.Time
	// Wrap, when set, wraps the store, engine and drivers before they are
	// wired, for fault injection in tests.
	Wrap *Wrappers
	// SealingKeys, when set (BROKER_SEALING_KEYS: comma-separated base64
	// keys, the last one current), seal the secrets the store keeps;
	// otherwise the keys in DataDir/keys, created on first start.
	SealingKeys string
	// LogLevel is the least level RunLocal logs (default info).
	LogLevel slog.Level
	// AWS, when set, gives the AWS configuration for drivers that call AWS
	// (the CloudFormation driver); by default the SDK's standard
	// environment (region, credentials, AWS_ENDPOINT_URL), loaded on first
	// use, so a catalog of demo plans needs none.
	AWS func(context.Context) (aws.Config, error)
	// Getenv, when set, replaces os.Getenv for the drivers' deployment
	// settings (BROKER_STACK_PREFIX, BROKER_CFN_ROLE_ARN).
	Getenv func(string) string
	// Operator says the operator command opens the data: it records no
	// start (the record tells ops that a broker used the directory).
	Operator bool
}

// Wrappers wrap the broker's ports (fault injection in tests).
type Wrappers struct {
	Store  func(broker.Store) broker.Store
	Engine func(broker.Engine) broker.Engine
	Driver func(broker.Driver) broker.Driver
}

// LocalConfigFromEnv reads BROKER_ADDR, BROKER_DATA_DIR, BROKER_CATALOG,
// BROKER_STATEMACHINES, BROKER_LOG_LEVEL (debug, info, warn or error),
// BROKER_USERNAME, BROKER_PASSWORD and BROKER_CREDENTIALS (a JSON list of
// {"username","password"} pairs, for rotation). With no password anywhere,
// one is generated.
func LocalConfigFromEnv() (LocalConfig, error) {
	c := LocalConfig{
		Addr:          envOr("BROKER_ADDR", "127.0.0.1:8080"),
		DataDir:       envOr("BROKER_DATA_DIR", ".data"),
		CatalogPath:   envOr(env.Catalog, "catalog.yaml"),
		StateMachines: envOr("BROKER_STATEMACHINES", "statemachines"),
		SealingKeys:   os.Getenv("BROKER_SEALING_KEYS"),
	}
	level, err := logging.ParseLevel(envOr("BROKER_LOG_LEVEL", "info"))
	if err != nil {
		return c, fmt.Errorf("BROKER_LOG_LEVEL: %w", err)
	}
	c.LogLevel = level
	if raw := os.Getenv("BROKER_CREDENTIALS"); raw != "" {
		creds, err := ParseCredentials([]byte(raw))
		if err != nil {
			return c, fmt.Errorf("BROKER_CREDENTIALS: %w", err)
		}
		c.Credentials = creds
	}
	if pass := os.Getenv("BROKER_PASSWORD"); pass != "" || len(c.Credentials) == 0 {
		if pass == "" {
			pass, c.GeneratedPassword = rand.Text(), true
		}
		c.Credentials = append(c.Credentials, api.Credential{Username: envOr("BROKER_USERNAME", "broker"), Password: pass})
	}
	return c, nil
}

// envOr is the variable name, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Local is a running local broker.
type Local struct {
	// Catalog is the catalog it serves, as loaded at open.
	Catalog *catalog.Catalog
	Broker  *broker.Broker
	Store   broker.Store
	Engine  *local.Engine
	Steps   *steps.Steps
	Handler http.Handler
	// Committer makes the commits of the bolt file (store and engine).
	Committer *groupcommit.Committer
	server    *http.Server
	ln        net.Listener
	db        *bbolt.DB
	logger    *slog.Logger
	done      chan error
	// The reaper's ticker, stopped by Close.
	stopReaper, reaperDone chan struct{}
}

// OpenLocal builds the local broker: it loads the catalog, opens the bolt
// file, loads the state machines, and resumes the executions that were in
// flight when the broker last stopped. It does not listen yet.
func OpenLocal(ctx context.Context, c LocalConfig, logger *slog.Logger) (*Local, error) {
	cat, err := catalog.Load(c.CatalogPath)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	path := dataFile(c.DataDir)
	db, err := bbolt.Open(path, 0o600, boltstore.Options())
	if err != nil {
		return nil, fmt.Errorf("open %s (is another broker using it?): %w", path, err)
	}
	sealer, err := c.sealer()
	if err != nil {
		db.Close()
		return nil, err
	}
	l, err := build(ctx, c, cat, db, sealer, logger)
	if err != nil {
		db.Close()
		return nil, err
	}
	if !c.Operator {
		if err := writeStartRecord(db, c.CatalogPath); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// sealer is the local broker's: the keys given, or the key files in the
// data directory (made with mode 0600 on first start).
func (c LocalConfig) sealer() (sealing.Sealer, error) {
	if c.SealingKeys != "" {
		keys, err := sealing.ParseKeys(c.SealingKeys)
		if err != nil {
			return nil, fmt.Errorf("BROKER_SEALING_KEYS: %w", err)
		}
		return sealing.NewLocal(keys...)
	}
	l, err := sealing.OpenKeyDir(filepath.Join(c.DataDir, "keys"), time.Now)
	if err != nil {
		return nil, fmt.Errorf("sealing keys: %w", err)
	}
	return l, nil
}

func build(ctx context.Context, c LocalConfig, cat *catalog.Catalog, db *bbolt.DB, sealer sealing.Sealer, logger *slog.Logger) (*Local, error) {
	// The store and the engine share the file's commits.
	commit := groupcommit.New(db)
	store := c.Store
	if store == nil {
		bs, err := boltstore.NewShared(commit)
		if err != nil {
			return nil, err
		}
		store = bs
	}
	// Secrets are sealed before they reach the store, whichever it is.
	sealed := sealing.NewStore(store, sealer)
	sealed.SensitivePlans = cat.SensitivePlanIDs()
	store = sealed
	if c.Wrap != nil && c.Wrap.Store != nil {
		store = c.Wrap.Store(store)
	}
	set, err := drivers.Build(ctx, cat, drivers.Env{Resources: store, AWS: c.awsConfig(), Getenv: c.Getenv, Logger: logger,
		Stacks: drivers.RunStacks})
	if err != nil {
		return nil, err
	}
	if c.Wrap != nil && c.Wrap.Driver != nil {
		set.Wrap(c.Wrap.Driver)
	}
	// The engine runs the broker's steps, and the broker starts the
	// engine's executions.
	b := broker.New(cat, store, nil, set, logger)
	b.Campaigns = store
	if c.Now != nil {
		b.Now = c.Now
	}
	b.Sleep = c.Sleep
	b.Slots = broker.NewMemorySlots(cmp.Or(c.MaxTasksPerPlan, local.DefaultMaxTasks()/4))
	st := steps.New(b)
	// The broker starts an operation's or a cleanup's missing execution
	// again (Recover, the reaper), so the engine need not write one before
	// its first Task's end: an asynchronous 202's execution is written once.
	// An upgrade's next execution is started by the one before it, which
	// nothing starts again: its start is written with the next commit.
	// A Task's writes wait for company (groupcommit.UpdateSoon): they share
	// the next request's fsync rather than make it wait for one of theirs.
	invoke := func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
		return st.Handle(groupcommit.Soon(ctx), payload)
	}
	eng, err := local.New(local.Options{Dir: c.StateMachines, DB: db, Committer: commit, Invoke: invoke, Logger: logger, Sleep: c.Sleep, Now: c.Now,
		Restarted: []broker.Workflow{broker.WorkflowOperation, broker.WorkflowCleanup}})
	if err != nil {
		return nil, err
	}
	var engine broker.Engine = eng
	if c.Wrap != nil && c.Wrap.Engine != nil {
		engine = c.Wrap.Engine(eng)
	}
	b.Engine = engine
	l := &Local{Catalog: cat, Broker: b, Store: store, Engine: eng, Steps: st, Committer: commit, db: db, logger: logger,
		Handler: api.New(api.Config{Broker: b, Catalog: cat, Credentials: c.Credentials, Logger: logger})}
	if err := eng.Resume(ctx); err != nil {
		eng.Close()
		return nil, fmt.Errorf("resume workflows: %w", err)
	}
	if n, err := b.Recover(ctx); err != nil {
		eng.Close()
		return nil, err
	} else if n > 0 {
		logger.InfoContext(ctx, "recovered operations in progress", "count", n)
	}
	l.startReaper(c.ReapInterval)
	return l, nil
}

// The local engine keeps an ended execution as long as the broker may read
// it: an operation's while the operation is kept (broker.Retention), a
// campaign's for `ops upgrade status` (broker.CampaignRetention). The reaper
// deletes older ones every pruneEvery (its first run too): the deletion
// reads the whole bucket.
const (
	endedRetention = max(broker.Retention, broker.CampaignRetention)
	pruneEvery     = time.Hour
)

// startReaper runs the reaper every interval until Close, and has the engine
// delete the executions that ended endedRetention ago every pruneEvery.
func (l *Local) startReaper(interval time.Duration) {
	if interval == 0 {
		interval = 30 * time.Second
	}
	l.stopReaper = make(chan struct{})
	l.reaperDone = make(chan struct{})
	if interval < 0 {
		close(l.reaperDone)
		return
	}
	go func() {
		defer close(l.reaperDone)
		t := time.NewTicker(interval)
		defer t.Stop()
		var pruned time.Time // when the reaper last deleted ended executions
		for {
			select {
			case <-l.stopReaper:
				return
			case <-t.C:
				if rep, err := l.Broker.Reap(context.Background()); err != nil {
					l.logger.Error("reaper", "error", err.Error())
				} else if rep != (broker.ReapReport{InProgress: rep.InProgress}) {
					l.logger.Info("reaper ran", "report", fmt.Sprintf("%+v", rep))
				}
				// After the reap, which reads an ended execution of an
				// operation or cleanup still in progress first.
				if now := l.Broker.Now(); pruned.IsZero() || now.Sub(pruned) >= pruneEvery {
					pruned = now
					if n, err := l.Engine.DeleteEnded(context.Background(), now.Add(-endedRetention)); err != nil {
						l.logger.Error("reaper: delete ended executions", "error", err.Error())
					} else if n > 0 {
						l.logger.Info("reaper: ended executions deleted", "count", n)
					}
				}
			}
		}
	}()
}

// Listen starts serving on addr (use 127.0.0.1:0 for a free port).
func (l *Local) Listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	l.ln = ln
	l.server = &http.Server{Handler: warmStack(l.Handler), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(l.logger.Handler(), slog.LevelWarn)}
	l.done = make(chan error, 1)
	go func() { l.done <- l.server.Serve(ln) }()
	return nil
}

// URL is where the broker listens.
func (l *Local) URL() string { return "http://" + l.ln.Addr().String() }

// Close stops serving (letting requests in flight finish), stops the
// engine without aborting its executions (they resume at the next start),
// and closes the bolt file.
func (l *Local) Close() error {
	var errs []error
	if l.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		errs = append(errs, l.server.Shutdown(ctx))
		if err := <-l.done; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	close(l.stopReaper)
	<-l.reaperDone
	errs = append(errs, l.Engine.Close(), l.db.Close())
	return errors.Join(errs...)
}

// RunLocal runs the local broker from the environment until ctx ends,
// printing where it listens (and a generated password) to out, and logging
// to logs at the level BROKER_LOG_LEVEL says. It sets the process's garbage
// collector as the functions do (BrokerGC).
func RunLocal(ctx context.Context, out, logs io.Writer) error {
	BrokerGC(os.Getenv)
	c, err := LocalConfigFromEnv()
	if err != nil {
		return err
	}
	l, err := OpenLocal(ctx, c, logging.New(logs, c.LogLevel))
	if err != nil {
		return err
	}
	if err := l.Listen(c.Addr); err != nil {
		l.Close()
		return err
	}
	// What start alone touched of the binary is not kept (startpages_linux.go).
	releaseBinaryPages()
	// One write: whoever reads "is listening" (a script, a test) reads
	// the generated password with it, not a moment after.
	var started strings.Builder
	fmt.Fprintf(&started, "serverless-osb is listening on %s (data in %s)\n", l.URL(), c.DataDir)
	if c.GeneratedPassword {
		last := c.Credentials[len(c.Credentials)-1]
		fmt.Fprintf(&started, "basic auth: username %q, generated password %q (set BROKER_USERNAME and BROKER_PASSWORD to choose)\n",
			last.Username, last.Password)
	}
	fmt.Fprintf(&started, "try: curl -u %s:<password> -H 'X-Broker-API-Version: 2.17' %s/v2/catalog\n",
		c.Credentials[len(c.Credentials)-1].Username, l.URL())
	_, _ = io.WriteString(out, started.String())
	// The broker is the process: it gives back what its busy moments
	// grew once it goes quiet (reclaim.go).
	stopReclaim := make(chan struct{})
	defer close(stopReclaim)
	go newReclaimer(dataFile(c.DataDir)).run(stopReclaim)
	select {
	case <-ctx.Done():
	case err := <-l.done:
		l.done <- err
	}
	return l.Close()
}

// awsConfig returns c.AWS, or the SDK's default configuration loaded once.
func (c LocalConfig) awsConfig() func(context.Context) (aws.Config, error) {
	if c.AWS != nil {
		return c.AWS
	}
	var (
		once sync.Once
		cfg  aws.Config
		err  error
	)
	return func(ctx context.Context) (aws.Config, error) {
		once.Do(func() {
			cfg, err = awsconfig.LoadDefaultConfig(ctx)
			if err != nil {
				err = fmt.Errorf("load AWS configuration: %w", err)
			}
		})
		return cfg, err
	}
}

// dataFile is the local broker's bolt file in its data directory.
func dataFile(dir string) string { return filepath.Join(dir, "broker.db") }
