// Package functiontest is a service owner's function for tests: an HTTP
// target on 127.0.0.1 that checks the broker's signature (version 2, at its
// own URL, refusing a request id it took already) and plays a small
// service (instances and bindings in memory) through the function driver's
// protocol, with the faults a test asks for by parameter.
//
// Parameters of a provision, update or bind (the instance's, the update's
// or the binding's):
//   - "checks": how many checks of an asynchronous change answer "not done"
//     before it is done (default 0);
//   - "fail": a permanent error with this description (at begin);
//   - "endpoints": true, for a bind: the binding's endpoints too;
//   - "metadata": for a provision or update, the results' metadata (the
//     instance's labels and attributes);
//   - "fault": "timeout", "malformed", "oversized", "transient" or "http500"
//     on every request of the operation, or the same with "-once" (e.g.
//     "timeout-once") on its first request only; "hang" holds each request
//     until the test calls Unblock (or the broker gives up), then answers;
//   - "answer" (a string) and "status" (a number, 200 by default): the body
//     and HTTP status of every answer of the operation but a cleanup's, as
//     they are (the classification's table).
package functiontest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/drivers/function"
)

// Target is the test target. Its zero value is not usable: see Start.
type Target struct {
	// URL is where it listens; Secret the secret it checks signatures with
	// (SetSecret changes it while requests may be under way).
	URL    string
	Secret string

	srv *httptest.Server

	mu        sync.Mutex
	requests  []function.Request
	delivered []delivery // the accepted requests as they came
	ids       map[string]time.Time
	refused   int
	instances map[string]*instance // by instance id
	// seen counts the requests of each operation, for "-once" faults.
	seen     map[string]int
	cleanups int
	// unblock is closed by Unblock; hanging counts the requests a "hang"
	// holds, mostHanging the most at once, hangEnded those let go.
	unblock     chan struct{}
	hanging     int
	mostHanging int
	hangEnded   int
}

// delivery is an accepted request's headers and body.
type delivery struct {
	header http.Header
	body   []byte
}

type instance struct {
	op       string
	checks   int
	params   map[string]any
	bindings map[string]map[string]any // credentials by binding id
}

// Start starts a target with the secret; it stops when the test ends.
func Start(tb testing.TB, secret string) *Target {
	tb.Helper()
	t := &Target{Secret: secret, instances: map[string]*instance{}, seen: map[string]int{}, ids: map[string]time.Time{},
		unblock: make(chan struct{})}
	t.srv = httptest.NewServer(http.HandlerFunc(t.serve)) // 127.0.0.1, a free port
	t.URL = t.srv.URL
	tb.Cleanup(t.srv.Close)
	return t
}

// SetSecret changes the secret the target checks signatures with, as a
// service owner does when the secret is rotated.
func (t *Target) SetSecret(secret string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.Secret = secret
}

// Requests returns the requests the target accepted, in order.
func (t *Target) Requests() []function.Request {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.requests)
}

// Headers returns the headers of the requests the target accepted, in order.
func (t *Target) Headers() []http.Header {
	t.mu.Lock()
	defer t.mu.Unlock()
	var hs []http.Header
	for _, d := range t.delivered {
		hs = append(hs, d.header.Clone())
	}
	return hs
}

// Replay sends the i-th request the target accepted to url again, as it
// came (headers and body), as one who caught it would, and returns the
// status of the answer.
func (t *Target) Replay(tb testing.TB, i int, url string) int {
	tb.Helper()
	t.mu.Lock()
	d := t.delivered[i]
	t.mu.Unlock()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(d.body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header = d.header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Refused counts the requests refused for their signature.
func (t *Target) Refused() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refused
}

// Cleanups counts the cleanup requests that deleted something.
func (t *Target) Cleanups() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cleanups
}

// Unblock lets every request a "hang" holds, and every later one, go on.
func (t *Target) Unblock() {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.unblock:
	default:
		close(t.unblock)
	}
}

// Hanging says how many requests a "hang" holds now, the most it held at
// once, and how many it let go (Unblock, or the broker gave up).
func (t *Target) Hanging() (now, most, ended int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.hanging, t.mostHanging, t.hangEnded
}

// hang holds a request until Unblock or until the broker gives up on it,
// and reports whether it may be answered.
func (t *Target) hang(r *http.Request) bool {
	t.mu.Lock()
	t.hanging++
	t.mostHanging = max(t.mostHanging, t.hanging)
	t.mu.Unlock()
	answer := true
	select {
	case <-t.unblock:
	case <-r.Context().Done():
		answer = false
	}
	t.mu.Lock()
	t.hanging--
	t.hangEnded++
	t.mu.Unlock()
	return answer
}

// Instances lists the instances the target holds.
func (t *Target) Instances() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []string
	for id := range t.instances {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Bindings lists the bindings the target holds for an instance.
func (t *Target) Bindings(instanceID string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []string
	if inst := t.instances[instanceID]; inst != nil {
		for id := range inst.bindings {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// Password returns the password the target made for a binding.
func (t *Target) Password(instanceID, bindingID string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if inst := t.instances[instanceID]; inst != nil {
		s, _ := inst.bindings[bindingID]["password"].(string)
		return s
	}
	return ""
}

func (t *Target) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	t.mu.Lock()
	secret := t.Secret
	t.mu.Unlock()
	if err := t.verify(r, secret, body); err != nil {
		t.mu.Lock()
		t.refused++
		t.mu.Unlock()
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var req function.Request
	if err := json.Unmarshal(body, &req); err != nil || (req.Version != function.Version1 && req.Version != function.Version2) {
		http.Error(w, "not a request of version 1 or 2", http.StatusBadRequest)
		return
	}
	t.mu.Lock()
	t.delivered = append(t.delivered, delivery{header: r.Header.Clone(), body: body})
	t.mu.Unlock()
	t.mu.Lock()
	t.requests = append(t.requests, req)
	fault := t.fault(req)
	t.mu.Unlock()

	if raw, ok := params(req)["answer"].(string); ok && req.Call != function.CallCleanup {
		status := http.StatusOK
		if n, ok := params(req)["status"].(float64); ok {
			status = int(n)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, raw)
		return
	}
	switch fault {
	case "hang":
		if !t.hang(r) {
			return
		}
	case "timeout":
		<-r.Context().Done() // until the broker gives up
		return
	case "malformed":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"version": 1, "done": "yes"`)
		return
	case "oversized":
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"version": 1, "done": true, "description": %q}`, strings.Repeat("x", function.MaxAnswerBytes))
		return
	case "http500":
		http.Error(w, "boom", http.StatusInternalServerError)
		return
	case "transient":
		writeJSON(w, function.Answer{Version: function.Version, Error: &function.AnswerError{Kind: function.ErrorTransient, Description: "The backend is busy."}})
		return
	}
	t.mu.Lock()
	a := t.answer(req)
	t.mu.Unlock()
	writeJSON(w, a)
}

// verify checks the request's version 2 signature at the target's own URL,
// and refuses an id it took within the signature's window: a replay.
func (t *Target) verify(r *http.Request, secret string, body []byte) error {
	now := time.Now()
	if err := function.VerifyRequest([]byte(secret), r, t.URL, body, now); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, at := range t.ids {
		if now.Sub(at) > 2*function.MaxClockSkew {
			delete(t.ids, id)
		}
	}
	id := r.Header.Get(function.HeaderRequestID)
	if _, ok := t.ids[id]; ok {
		return errors.New("a request id taken already: a replay")
	}
	t.ids[id] = now
	return nil
}

func writeJSON(w http.ResponseWriter, a function.Answer) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(a)
}

// params are the parameters that govern a request's change.
func params(req function.Request) map[string]any {
	raw := req.Instance.Parameters
	switch {
	case req.Update != nil:
		raw = req.Update.Parameters
	case req.Operation.Kind == "bind" && req.Binding != nil:
		raw = req.Binding.Parameters
	case req.Operation.Kind != "provision":
		return nil
	}
	var p map[string]any
	_ = json.Unmarshal(raw, &p)
	return p
}

// fault says which fault the request meets (t.mu held).
func (t *Target) fault(req function.Request) string {
	if req.Call == function.CallCleanup {
		return ""
	}
	f, _ := params(req)["fault"].(string)
	t.seen[req.Operation.ID]++
	if once, ok := strings.CutSuffix(f, "-once"); ok {
		if t.seen[req.Operation.ID] == 1 {
			return once
		}
		return ""
	}
	return f
}

// answer plays the service (t.mu held).
func (t *Target) answer(req function.Request) function.Answer {
	a := function.Answer{Version: req.Version} // the request's: either is accepted
	inst := t.instances[req.Instance.ID]
	p := params(req)
	if req.Call == function.CallBegin {
		if desc, ok := p["fail"].(string); ok {
			return function.Answer{Version: function.Version, Error: &function.AnswerError{Kind: function.ErrorPermanent, Description: desc}}
		}
	}
	checks := 0
	if n, ok := p["checks"].(float64); ok && req.Operation.Async {
		checks = int(n)
	}
	switch req.Call {
	case function.CallCleanup:
		if req.Binding != nil {
			if inst != nil && inst.bindings[req.Binding.ID] != nil {
				delete(inst.bindings, req.Binding.ID)
				t.cleanups++
			}
		} else if inst != nil {
			delete(t.instances, req.Instance.ID)
			t.cleanups++
		}
		a.Done = true
		return a
	case function.CallBegin:
		switch req.Operation.Kind {
		case "provision":
			if inst == nil || inst.op != req.Operation.ID {
				inst = &instance{op: req.Operation.ID, checks: checks, params: p, bindings: map[string]map[string]any{}}
				t.instances[req.Instance.ID] = inst
			}
			a.State = json.RawMessage(fmt.Sprintf(`{"made_by":%q}`, req.Operation.ID))
		case "update":
			if inst == nil {
				return permanent("The instance does not exist.")
			}
			if inst.op != req.Operation.ID {
				inst.op, inst.checks, inst.params = req.Operation.ID, checks, p
			}
		case "deprovision":
			delete(t.instances, req.Instance.ID)
			a.Done = true
			return a
		case "bind":
			if inst == nil {
				return permanent("The instance does not exist.")
			}
			if inst.bindings[req.Binding.ID] == nil {
				inst.bindings[req.Binding.ID] = map[string]any{
					"username": "u-" + req.Binding.ID, "password": fmt.Sprintf("p-%d", time.Now().UnixNano()),
					"host": "db.example.test", "port": 5432,
				}
			}
			a.Done = true
		case "unbind":
			if inst != nil {
				delete(inst.bindings, req.Binding.ID)
			}
			a.Done = true
			return a
		}
	case function.CallCheck:
		switch req.Operation.Kind {
		case "deprovision":
			a.Done = inst == nil
			return a
		case "unbind":
			a.Done = inst == nil || inst.bindings[req.Binding.ID] == nil
			return a
		case "bind":
			a.Done = inst != nil && inst.bindings[req.Binding.ID] != nil
			if !a.Done {
				return permanent("The binding does not exist.")
			}
		default:
			if inst == nil {
				return permanent("The instance does not exist.")
			}
			if inst.checks > 0 {
				inst.checks--
			}
		}
	}
	if req.Operation.Kind == "bind" {
		a.Done = true
		a.Results = &function.Results{Credentials: inst.bindings[req.Binding.ID]}
		if p["endpoints"] == true {
			a.Results.Endpoints = []broker.Endpoint{{Host: "db.example.test", Ports: []string{"5432"}, Protocol: "tcp"}}
		}
		return a
	}
	if inst.checks > 0 {
		one := 1.0
		a.RetryAfter, a.Description = &one, fmt.Sprintf("%d checks to go.", inst.checks)
		return a
	}
	a.Done = true
	a.Results = &function.Results{DashboardURL: "https://dashboard.example.test/" + req.Instance.ID}
	if m, ok := p["metadata"]; ok {
		raw, _ := json.Marshal(m)
		a.Results.Metadata = &broker.InstanceMetadata{}
		_ = json.Unmarshal(raw, a.Results.Metadata)
	}
	return a
}

func permanent(desc string) function.Answer {
	return function.Answer{Version: function.Version, Error: &function.AnswerError{Kind: function.ErrorPermanent, Description: desc}}
}
