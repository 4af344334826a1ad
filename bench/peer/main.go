// Command peer is the broker that `make bench`'s load phase measures ours
// against (issue 32): a broker built on brokerapi v13 with bbolt (an fsync
// per commit), the same catalog and the same parameter validator
// (internal/catalog), and nothing more: no workflow, no sealing, no
// driver. An asynchronous provision stores its instance and its operation
// in one commit and answers 202; its last_operation says succeeded once
// duration_seconds have passed. It is a separate module so that the
// broker's own module does not depend on brokerapi.
//
// It reads the local broker's variables: BROKER_ADDR, BROKER_DATA_DIR,
// BROKER_CATALOG, BROKER_USERNAME (default broker) and BROKER_PASSWORD.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"code.cloudfoundry.org/brokerapi/v13"
	"code.cloudfoundry.org/brokerapi/v13/domain"
	"code.cloudfoundry.org/brokerapi/v13/domain/apiresponses"
	"github.com/google/uuid"
	"go.etcd.io/bbolt"

	"github.com/serverless-osb/broker/internal/catalog"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		os.Exit(1)
	}
}

func run() error {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	creds := brokerapi.BrokerCredentials{Username: cmp.Or(os.Getenv("BROKER_USERNAME"), "broker"), Password: os.Getenv("BROKER_PASSWORD")}
	handler, db, err := newHandler(cmp.Or(os.Getenv("BROKER_CATALOG"), "catalog.yaml"), cmp.Or(os.Getenv("BROKER_DATA_DIR"), ".data-peer"), logger, creds)
	if err != nil {
		return err
	}
	defer db.Close()
	server := &http.Server{Addr: cmp.Or(os.Getenv("BROKER_ADDR"), "127.0.0.1:8080"), Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = server.Shutdown(context.Background())
	}()
	if err := server.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// newHandler is the peer's HTTP handler on the catalog at catalogPath and
// a bbolt file in dir, and that file, for its caller to close; the
// in-process benchmarks (main_test.go) call it as run does, and count the
// file's page writes.
func newHandler(catalogPath, dir string, logger *slog.Logger, creds brokerapi.BrokerCredentials) (http.Handler, *bbolt.DB, error) {
	cat, err := catalog.Load(catalogPath)
	if err != nil {
		return nil, nil, err
	}
	var served struct {
		Services []domain.Service `json:"services"`
	}
	if err := json.Unmarshal(cat.JSON(), &served); err != nil {
		return nil, nil, fmt.Errorf("catalog: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	db, err := bbolt.Open(filepath.Join(dir, "peer.db"), 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, nil, err
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		for _, b := range []string{"instances", "operations", "bindings"} {
			if _, err := tx.CreateBucketIfNotExists([]byte(b)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return brokerapi.New(&peer{cat: cat, services: served.Services, db: db}, logger, creds), db, nil
}

type peer struct {
	cat      *catalog.Catalog
	services []domain.Service
	db       *bbolt.DB
}

type instance struct {
	ServiceID  string          `json:"service_id"`
	PlanID     string          `json:"plan_id"`
	Parameters json.RawMessage `json:"parameters,omitempty"`
	Operation  string          `json:"operation,omitempty"`
}

type operation struct {
	InstanceID string    `json:"instance_id"`
	ReadyAt    time.Time `json:"ready_at"`
}

type binding struct {
	InstanceID  string            `json:"instance_id"`
	Parameters  json.RawMessage   `json:"parameters,omitempty"`
	Credentials map[string]string `json:"credentials"`
}

var errConflict = apiresponses.ErrInstanceAlreadyExists

func (p *peer) Services(context.Context) ([]domain.Service, error) { return p.services, nil }

func (p *peer) plan(serviceID, planID string, kind catalog.SchemaKind, params json.RawMessage) (*catalog.Plan, error) {
	_, plan, err := p.cat.Lookup(serviceID, planID)
	if err != nil {
		return nil, apiresponses.NewFailureResponse(err, http.StatusBadRequest, "plan")
	}
	if err := plan.ValidateParameters(kind, params); err != nil {
		return nil, apiresponses.NewFailureResponse(err, http.StatusBadRequest, "parameters")
	}
	return plan, nil
}

func (p *peer) Provision(_ context.Context, id string, d domain.ProvisionDetails, async bool) (domain.ProvisionedServiceSpec, error) {
	plan, err := p.plan(d.ServiceID, d.PlanID, catalog.InstanceCreate, d.RawParameters)
	if err != nil {
		return domain.ProvisionedServiceSpec{}, err
	}
	var params struct {
		DurationSeconds int `json:"duration_seconds"`
	}
	_ = json.Unmarshal(d.RawParameters, &params)
	asyncRun := plan.Settings.Mode == catalog.ModeAsyncOnly || plan.Settings.Mode == catalog.ModeAsync && async
	if plan.Settings.Mode == catalog.ModeAsyncOnly && !async {
		return domain.ProvisionedServiceSpec{}, apiresponses.ErrAsyncRequired
	}
	in := instance{ServiceID: d.ServiceID, PlanID: d.PlanID, Parameters: d.RawParameters}
	if asyncRun {
		in.Operation = uuid.NewString()
	}
	data, _ := json.Marshal(in)
	spec := domain.ProvisionedServiceSpec{IsAsync: asyncRun, OperationData: in.Operation}
	err = p.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("instances"))
		if old := b.Get([]byte(id)); old != nil {
			var was instance
			_ = json.Unmarshal(old, &was)
			if was.ServiceID == in.ServiceID && was.PlanID == in.PlanID && string(was.Parameters) == string(in.Parameters) {
				spec = domain.ProvisionedServiceSpec{AlreadyExists: true, IsAsync: was.Operation != "", OperationData: was.Operation}
				return nil
			}
			return errConflict
		}
		if asyncRun {
			op, _ := json.Marshal(operation{InstanceID: id, ReadyAt: time.Now().Add(time.Duration(params.DurationSeconds) * time.Second)})
			if err := tx.Bucket([]byte("operations")).Put([]byte(in.Operation), op); err != nil {
				return err
			}
		}
		return b.Put([]byte(id), data)
	})
	return spec, err
}

func (p *peer) Deprovision(_ context.Context, id string, _ domain.DeprovisionDetails, _ bool) (domain.DeprovisionServiceSpec, error) {
	err := p.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("instances"))
		if b.Get([]byte(id)) == nil {
			return apiresponses.ErrInstanceDoesNotExist
		}
		return b.Delete([]byte(id))
	})
	return domain.DeprovisionServiceSpec{}, err
}

func (p *peer) GetInstance(_ context.Context, id string, _ domain.FetchInstanceDetails) (domain.GetInstanceDetailsSpec, error) {
	var in instance
	if err := p.get("instances", id, &in); err != nil {
		return domain.GetInstanceDetailsSpec{}, err
	}
	return domain.GetInstanceDetailsSpec{ServiceID: in.ServiceID, PlanID: in.PlanID, Parameters: in.Parameters}, nil
}

func (p *peer) Update(context.Context, string, domain.UpdateDetails, bool) (domain.UpdateServiceSpec, error) {
	return domain.UpdateServiceSpec{}, apiresponses.NewFailureResponse(errors.New("the peer does not update"), http.StatusUnprocessableEntity, "update")
}

func (p *peer) LastOperation(_ context.Context, _ string, d domain.PollDetails) (domain.LastOperation, error) {
	var op operation
	if err := p.get("operations", d.OperationData, &op); err != nil {
		return domain.LastOperation{}, err
	}
	if time.Now().Before(op.ReadyAt) {
		return domain.LastOperation{State: domain.InProgress}, nil
	}
	return domain.LastOperation{State: domain.Succeeded}, nil
}

func (p *peer) Bind(_ context.Context, instanceID, bindingID string, d domain.BindDetails, _ bool) (domain.Binding, error) {
	if _, err := p.plan(d.ServiceID, d.PlanID, catalog.BindingCreate, d.RawParameters); err != nil {
		return domain.Binding{}, err
	}
	bd := binding{InstanceID: instanceID, Parameters: d.RawParameters,
		Credentials: map[string]string{"username": "u-" + bindingID, "password": uuid.NewString()}}
	data, _ := json.Marshal(bd)
	err := p.db.Update(func(tx *bbolt.Tx) error {
		if tx.Bucket([]byte("instances")).Get([]byte(instanceID)) == nil {
			return apiresponses.ErrInstanceDoesNotExist
		}
		b := tx.Bucket([]byte("bindings"))
		if b.Get([]byte(bindingID)) != nil {
			return apiresponses.ErrBindingAlreadyExists
		}
		return b.Put([]byte(bindingID), data)
	})
	return domain.Binding{Credentials: bd.Credentials}, err
}

func (p *peer) Unbind(_ context.Context, _, bindingID string, _ domain.UnbindDetails, _ bool) (domain.UnbindSpec, error) {
	err := p.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("bindings"))
		if b.Get([]byte(bindingID)) == nil {
			return apiresponses.ErrBindingDoesNotExist
		}
		return b.Delete([]byte(bindingID))
	})
	return domain.UnbindSpec{}, err
}

func (p *peer) GetBinding(_ context.Context, _, bindingID string, _ domain.FetchBindingDetails) (domain.GetBindingSpec, error) {
	var bd binding
	if err := p.get("bindings", bindingID, &bd); err != nil {
		return domain.GetBindingSpec{}, err
	}
	return domain.GetBindingSpec{Credentials: bd.Credentials, Parameters: bd.Parameters}, nil
}

func (p *peer) LastBindingOperation(context.Context, string, string, domain.PollDetails) (domain.LastOperation, error) {
	return domain.LastOperation{State: domain.Succeeded}, nil
}

func (p *peer) get(bucket, key string, v any) error {
	return p.db.View(func(tx *bbolt.Tx) error {
		data := tx.Bucket([]byte(bucket)).Get([]byte(key))
		if data == nil {
			if bucket == "bindings" {
				return apiresponses.ErrBindingDoesNotExist
			}
			return apiresponses.ErrInstanceDoesNotExist
		}
		return json.Unmarshal(data, v)
	})
}
