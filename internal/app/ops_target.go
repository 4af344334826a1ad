//go:build !lambda.norpc

package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	dynamotypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.etcd.io/bbolt"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/env"
	"github.com/serverless-osb/broker/internal/logging"
	boltstore "github.com/serverless-osb/broker/internal/store/bolt"
)

// opsTarget is the broker an ops command reads, as its flags and the
// environment name it.
type opsTarget struct {
	stack   string // --stack
	data    string // --data: the local broker's data directory
	catalog string // --catalog
}

// opsFix is what a refusal to read a broker tells the operator to do.
const opsFix = "start the broker with make run (BROKER_DATA_DIR=DIR, BROKER_CATALOG=FILE) or pass --data DIR / --catalog FILE / --stack NAME"

// The local broker's start record: in its own bucket of the bolt file,
// written at every start (not by ops), so that ops tells a data directory
// a broker runs on from one no broker ever used.
var (
	startBucket = []byte("broker")
	startKey    = []byte("started")
)

// startRecord is what the local broker records of its last start.
type startRecord struct {
	At time.Time `json:"at"`
	// Catalog is the absolute path of the catalog it served, which ops
	// reads by default.
	Catalog string `json:"catalog"`
}

// writeStartRecord records that a broker started on db with catalog.
func writeStartRecord(db *bbolt.DB, catalog string) error {
	abs, err := filepath.Abs(catalog)
	if err != nil {
		return fmt.Errorf("record the start: %w", err)
	}
	rec, err := json.Marshal(startRecord{At: time.Now().UTC(), Catalog: abs})
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(startBucket)
		if err != nil {
			return err
		}
		return b.Put(startKey, rec)
	})
	if err != nil {
		return fmt.Errorf("record the start in %s: %w", db.Path(), err)
	}
	return nil
}

// errNoBrokerData is a local data directory that no broker wrote.
var errNoBrokerData = errors.New("no broker's data")

// readStartRecord reads the start record of the local broker whose data is
// in dir, without creating anything there: errNoBrokerData when there is no
// bolt file, ok false when the file has no record (written by a version
// before the record, or by ops alone).
func readStartRecord(dir string) (rec startRecord, ok bool, err error) {
	path := dataFile(dir)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return rec, false, fmt.Errorf("%w in %s (it holds no %s): %s", errNoBrokerData, dir, filepath.Base(path), opsFix)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return rec, false, fmt.Errorf("open %s (is the broker running on it? stop make run first): %w", path, err)
	}
	defer db.Close()
	var raw []byte
	_ = db.View(func(tx *bbolt.Tx) error {
		if b := tx.Bucket(startBucket); b != nil {
			raw = b.Get(startKey)
		}
		return nil
	})
	if raw == nil {
		return rec, false, nil
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		return rec, false, fmt.Errorf("read the start record in %s: %w", path, err)
	}
	return rec, true, nil
}

// opsLogger is ops' logger: quiet (errors only) unless --verbose (info)
// or BROKER_LOG_LEVEL says otherwise, since an operator reads its answer,
// not the broker's log lines.
func opsLogger(w io.Writer, verbose bool) (*slog.Logger, error) {
	level := slog.LevelError
	if verbose {
		level = slog.LevelInfo
	}
	if v := os.Getenv("BROKER_LOG_LEVEL"); v != "" {
		var err error
		if level, err = logging.ParseLevel(v); err != nil {
			return nil, usageError("BROKER_LOG_LEVEL: %v", err)
		}
	}
	return logging.New(w, level), nil
}

// localOpsConfig is the configuration of the local broker that t names:
// the environment's, with --data and --catalog over it, and by default
// the catalog the broker last started with. It refuses a directory no
// broker started on, and says which broker it is on say (one line).
func localOpsConfig(ctx context.Context, t opsTarget, say io.Writer) (LocalConfig, error) {
	c, err := LocalConfigFromEnv()
	if err != nil {
		return c, err
	}
	c.DataDir = cmp.Or(t.data, c.DataDir)
	dir, _ := filepath.Abs(c.DataDir)
	rec, started, err := readStartRecord(dir)
	if err != nil {
		return c, err
	}
	if !started {
		if err := refuseUnused(ctx, dir); err != nil {
			return c, err
		}
	}
	catalog := cmp.Or(t.catalog, os.Getenv(env.Catalog))
	note := ""
	switch {
	case catalog == "" && started && fileExists(rec.Catalog):
		catalog, note = rec.Catalog, ", the one the broker last started with"
	case catalog == "":
		catalog = c.CatalogPath
	}
	abs, _ := filepath.Abs(catalog)
	if started && note == "" && abs != rec.Catalog {
		note = ", not " + rec.Catalog + ", which the broker last started with"
	}
	c.CatalogPath = abs
	fmt.Fprintf(say, "ops: the local broker's data in %s, catalog %s%s\n", dir, abs, note)
	return c, nil
}

// refuseUnused refuses the data in dir of a local broker with no start
// record that holds no instance: ops run on a directory no broker used,
// rather than on a broker with nothing in it. Data a broker wrote before
// the start record existed holds instances.
func refuseUnused(ctx context.Context, dir string) error {
	s, err := boltstore.Open(dataFile(dir))
	if err != nil {
		return err
	}
	defer s.Close()
	insts, _, err := s.ListInstances(ctx, broker.InstanceFilter{}, "")
	if err != nil {
		return err
	}
	if len(insts) == 0 {
		return fmt.Errorf("%w in %s (no broker has started on it): %s", errNoBrokerData, dir, opsFix)
	}
	return nil
}

// noTable adds to err, when it is DynamoDB's answer that the table does not
// exist, that ops reads no broker there and how to name one.
func noTable(err error) error {
	var missing *dynamotypes.ResourceNotFoundException
	if errors.As(err, &missing) {
		return fmt.Errorf("%w: %w (the table that the line above names does not exist): %s", errNoBrokerData, err, opsFix)
	}
	return err
}

// sayDeployed says which deployed broker ops reads.
func sayDeployed(say io.Writer, stack string, c LambdaConfig) {
	catalog, _ := filepath.Abs(c.CatalogPath)
	if stack != "" {
		fmt.Fprintf(say, "ops: the broker of stack %s (table %s in %s), catalog %s\n", stack, c.Store.Table, c.Store.Region, catalog)
		return
	}
	fmt.Fprintf(say, "ops: the deployed broker of table %s in %s (%s), catalog %s\n", c.Store.Table, c.Store.Region, env.Table, catalog)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
