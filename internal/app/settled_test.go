package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/store/bolt"
)

// TestChangesSettledInMemoryRaceAsHeldOnesDo races synchronous binds of the
// demo driver, which the broker settles in memory before any hold (one
// write each): binds of one binding id with the same request, binds of
// other ids, and updates of the instance. The same bind re-sent gets 200
// with the same credentials; every other bind is created once; an update
// either wins or is told the instance is changing; and nothing is left held.
func TestChangesSettledInMemoryRaceAsHeldOnesDo(t *testing.T) {
	b := apptest.Start(t, "")
	service, plan := b.Plan("fake-plan")
	for round := range 3 {
		id := fmt.Sprintf("settled-%d", round)
		if r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/" + id,
			Body: provisionBody(service, plan, map[string]any{})}); r.Status != http.StatusCreated {
			t.Fatalf("provision: %d %s", r.Status, r.Raw)
		}
		const racers = 18
		var wg sync.WaitGroup
		answers := make([]apptest.Response, racers)
		for i := range racers {
			wg.Go(func() {
				binding := "same"
				switch i % 3 {
				case 1:
					binding = fmt.Sprintf("own-%d", i)
				case 2:
					answers[i] = b.Do(apptest.Request{Method: http.MethodPatch, Path: "/v2/service_instances/" + id,
						Body: map[string]any{"service_id": service, "parameters": map[string]any{"duration_seconds": i}}})
					return
				}
				answers[i] = b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/" + id + "/service_bindings/" + binding,
					Body: map[string]any{"service_id": service, "plan_id": plan}})
			})
		}
		wg.Wait()
		// A bind while an update holds the instance is told so (422).
		busy := func(r apptest.Response) bool {
			return r.Status == http.StatusUnprocessableEntity && r.Str("error") == "ConcurrencyError"
		}
		created, own, password := 0, 0, ""
		for i, r := range answers {
			switch {
			case busy(r):
			case i%3 == 0 && (r.Status == http.StatusCreated || r.Status == http.StatusOK):
				if r.Status == http.StatusCreated {
					created++
				}
				creds, _ := r.Body["credentials"].(map[string]any)
				if p, _ := creds["password"].(string); password == "" {
					password = p
				} else if p != password {
					t.Fatalf("round %d: the same bind answered two passwords", round)
				}
			case i%3 == 1 && r.Status == http.StatusCreated:
				own++
			case i%3 == 2 && r.Status == http.StatusOK:
			default:
				t.Fatalf("round %d: racer %d got %d %s", round, i, r.Status, r.Raw)
			}
		}
		if created > 1 || (created == 0) != (password == "") {
			t.Fatalf("round %d: the same bind was created %d times (password %q), want once when any got it", round, created, password)
		}
		snap, err := b.Local.Store.LoadWhole(context.Background(), id, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.BindingIDs) != created+own || snap.Instance.Op != "" || snap.Instance.BindingOps != 0 || snap.Instance.State != broker.InstanceReady {
			t.Fatalf("round %d: %d bindings, instance op %q, %d binding ops, %s; want %d bindings, idle and ready",
				round, len(snap.BindingIDs), snap.Instance.Op, snap.Instance.BindingOps, snap.Instance.State, created+own)
		}
		if own == 0 {
			t.Logf("round %d: every bind of its own id met an update", round)
		}
		ops, _ := b.Local.Store.ListInProgress(context.Background())
		if len(ops) != 0 {
			t.Fatalf("round %d: %d operations left in progress", round, len(ops))
		}
	}
}

// TestASettledChangeThatFailsWritesNothing: a synchronous provision or
// bind of the demo driver asked to fail answers 422 with its description
// and leaves no instance, binding, operation or record behind.
func TestASettledChangeThatFailsWritesNothing(t *testing.T) {
	b := apptest.Start(t, "")
	service, plan := b.Plan("fake-plan")
	fail := map[string]any{"fail": true, "fail_description": "No room left."}
	r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/nope", Body: provisionBody(service, plan, fail)})
	if r.Status != http.StatusUnprocessableEntity || r.Str("description") != "No room left." {
		t.Fatalf("provision: %d %s", r.Status, r.Raw)
	}
	if snap, err := b.Local.Store.Load(context.Background(), "nope", "", ""); err != nil || snap.Instance != nil || snap.Records != nil {
		t.Fatalf("after a failed provision: %+v %v", snap, err)
	}
	if ops, _ := b.Local.Store.ListOperations(context.Background(), "nope"); len(ops) != 0 {
		t.Fatalf("after a failed provision: operations %+v", ops)
	}
	b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/yes", Body: provisionBody(service, plan, map[string]any{})})
	r = b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/yes/service_bindings/nope",
		Body: map[string]any{"service_id": service, "plan_id": plan, "parameters": fail}})
	if r.Status != http.StatusUnprocessableEntity || r.Str("description") != "No room left." {
		t.Fatalf("bind: %d %s", r.Status, r.Raw)
	}
	snap, err := b.Local.Store.LoadWhole(context.Background(), "yes", "")
	_, gone := b.Local.Store.GetBinding(context.Background(), "yes", "nope")
	if err != nil || !errors.Is(gone, broker.ErrNotFound) || len(snap.BindingIDs) != 0 || snap.Instance.BindingOps != 0 || len(snap.Records) != 1 {
		t.Fatalf("after a failed bind: binding %v, ids %v, %d binding ops, records %d; want none but the instance's record", gone, snap.BindingIDs, snap.Instance.BindingOps, len(snap.Records))
	}
}

// TestTheLocalBrokersFileHoldsNoCredentials binds through the local
// broker, stops it, and reads its bolt file: the binding's password is not
// there (sealed under the key file made in the data directory, mode 0600),
// and a broker started again on the same data answers it unchanged.
func TestTheLocalBrokersFileHoldsNoCredentials(t *testing.T) {
	dir := t.TempDir()
	b := apptest.Start(t, dir)
	service, plan := b.Plan("fake-plan")
	if r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/i", Body: provisionBody(service, plan, map[string]any{})}); r.Status != 201 {
		t.Fatalf("provision: %d %s", r.Status, r.Raw)
	}
	r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/i/service_bindings/b",
		Body: map[string]any{"service_id": service, "plan_id": plan}})
	creds, _ := r.Body["credentials"].(map[string]any)
	password, _ := creds["password"].(string)
	if r.Status != 201 || password == "" {
		t.Fatalf("bind: %d %s", r.Status, r.Raw)
	}
	b.Stop()
	file, err := os.ReadFile(filepath.Join(dir, "broker.db"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(file, []byte(password)) {
		t.Fatal("the bolt file holds the binding's password")
	}
	keys, err := os.ReadDir(filepath.Join(dir, "keys"))
	if err != nil || len(keys) != 1 {
		t.Fatalf("the key directory: %v %v, want one key file", keys, err)
	}
	if info, err := keys[0].Info(); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v %v, want mode 0600", info, err)
	}
	again := apptest.Start(t, dir)
	fetched := again.Do(apptest.Request{Method: http.MethodGet, Path: "/v2/service_instances/i/service_bindings/b"})
	if got, _ := fetched.Body["credentials"].(map[string]any); got["password"] != password {
		t.Fatalf("after a restart the binding answers %s", fetched.Raw)
	}
}

// TestRotateTheLocalKeyAndReseal follows docs/operate.md's procedure on the
// local broker's data: ops rotate-key, then ops reseal, moves every sealed
// value under the new key, and the broker started again answers the
// binding's credentials unchanged.
func TestRotateTheLocalKeyAndReseal(t *testing.T) {
	dir := t.TempDir()
	b := apptest.Start(t, dir)
	service, plan := b.Plan("fake-plan")
	b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/i", Body: provisionBody(service, plan, map[string]any{})})
	r := b.Do(apptest.Request{Method: http.MethodPut, Path: "/v2/service_instances/i/service_bindings/b",
		Body: map[string]any{"service_id": service, "plan_id": plan}})
	creds, _ := r.Body["credentials"].(map[string]any)
	if r.Status != 201 || creds["password"] == nil {
		t.Fatalf("bind: %d %s", r.Status, r.Raw)
	}
	b.Stop()
	t.Setenv("BROKER_DATA_DIR", dir)
	t.Setenv("BROKER_CATALOG", filepath.Join(apptest.Root(), "catalog.yaml"))
	t.Setenv("BROKER_STATEMACHINES", filepath.Join(apptest.Root(), "statemachines"))
	t.Setenv("BROKER_TABLE", "")
	t.Setenv("BROKER_SEALING_KEYS", "")
	ops := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := app.RunCommand(context.Background(), append([]string{"ops", "--json"}, args...), &out, &errOut); err != nil {
			t.Fatalf("ops %v: %v\n%s", args, err, errOut.String())
		}
		return out.String()
	}
	var rotated struct {
		KeyID string `json:"key_id"`
	}
	if err := json.Unmarshal([]byte(ops("rotate-key")), &rotated); err != nil || rotated.KeyID == "" {
		t.Fatalf("rotate-key: %+v %v", rotated, err)
	}
	var rep struct {
		KeyID      string `json:"key_id"`
		Values     int    `json:"values"`
		Resealed   int    `json:"resealed"`
		SealedOnly bool   `json:"sealed_only"`
	}
	if err := json.Unmarshal([]byte(ops("reseal")), &rep); err != nil || rep.KeyID != rotated.KeyID || rep.Values < 2 || rep.Resealed != rep.Values || !rep.SealedOnly {
		t.Fatalf("reseal: %+v %v, want every value re-sealed under %s and values in clear refused from then on", rep, err, rotated.KeyID)
	}
	// Someone with write access to the data plants a binding whose
	// credentials are in clear.
	const planted = "planted-in-clear-behind-the-broker"
	plantClearBinding(t, filepath.Join(dir, "broker.db"), "i", "b-planted", planted)
	if keys, err := os.ReadDir(filepath.Join(dir, "keys")); err != nil || len(keys) != 2 {
		t.Fatalf("key files: %v %v, want 2", keys, err)
	}
	again := apptest.Start(t, dir)
	fetched := again.Do(apptest.Request{Method: http.MethodGet, Path: "/v2/service_instances/i/service_bindings/b"})
	if got, _ := fetched.Body["credentials"].(map[string]any); got["password"] != creds["password"] {
		t.Fatalf("after the reseal the binding answers %s", fetched.Raw)
	}
	r = again.Do(apptest.Request{Method: http.MethodGet, Path: "/v2/service_instances/i/service_bindings/b-planted"})
	if r.Status != http.StatusInternalServerError || bytes.Contains(r.Raw, []byte(planted)) ||
		r.Str("description") != "The service broker failed internally; the failure was logged. Try again later." {
		t.Fatalf("the planted binding answers %d %s, want the internal error without the value", r.Status, r.Raw)
	}
	logs := again.Logs.String()
	if !strings.Contains(logs, "the credentials of binding b-planted of instance i: stored in clear after the table was sealed") {
		t.Errorf("no log line names the value in clear:\n%s", logs)
	}
	if strings.Contains(logs, planted) {
		t.Errorf("the log shows the planted value")
	}
}

// plantClearBinding writes, in the local broker's file, a binding whose
// credentials are in clear, as a write behind the broker's back would.
func plantClearBinding(t *testing.T, path, instanceID, bindingID, password string) {
	t.Helper()
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The binding names its instance's offering and plan, as every binding
	// must (the store refuses another).
	snap, err := s.Load(t.Context(), instanceID, "", "")
	if err != nil || snap.Instance == nil {
		t.Fatalf("load instance %s: %+v %v", instanceID, snap, err)
	}
	now := time.Now().UTC()
	op := broker.Operation{ID: "bind-" + bindingID, InstanceID: instanceID, BindingID: bindingID, Kind: broker.KindBind,
		State: broker.OperationSucceeded, CreatedAt: now, UpdatedAt: now, FinishedAt: now, ExpiresAt: now.Add(broker.Retention)}
	b := broker.Binding{InstanceID: instanceID, ID: bindingID, BindingRequest: broker.BindingRequest{ServiceID: snap.Instance.ServiceID, PlanID: snap.Instance.PlanID},
		State: broker.BindingReady, LastOp: op.ID,
		Credentials: broker.Credentials{"password": password}, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := s.CreateBinding(t.Context(), b, op, &broker.Settled{}); err != nil {
		t.Fatal(err)
	}
}
