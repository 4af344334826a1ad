package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/serverless-osb/broker/internal/api"
	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/logging"
)

// FuzzHTTP sends arbitrary requests to a real local broker (bolt store,
// local engine, demo driver) and checks, for every one:
//
//   - the broker answers a status documented for the route with a JSON body;
//     every 4xx it makes itself has a description (410: the body {}); the
//     "error" field holds only the spec's codes;
//   - every instance it reported healthy can still be updated (and, at the
//     end, deleted), and no operation stays in progress past its workflow's
//     end;
//   - no driver call runs a change under another offering or plan than its
//     instance's, nor a bind that named others (fuzzDriver): whatever
//     service_id and plan_id a request sends, they never reach a driver.
//
// An input is (method, path, query, header lines, body, flags). Any part may
// hold placeholders, so that mutations hit real instances: {i0} to {i3}
// become the ids of instances kept healthy (sync plan), {b0} and {b1} the
// ids of bindings each of them has, {s} the service id, {p}, {a} and {o}
// the ids of the sync, async and async-only plans. Requests go out as raw
// bytes on a new connection, so paths may hold invalid UTF-8 and odd
// escapes. What net/http refuses before the broker's handler runs
// (malformed request line or header, 431, 505, ...) net/http answers in
// plain text, as documented; such answers are counted, not checked. The
// broker's handler logs one "request" line per request: that is how an
// answer is told to be the broker's own.
//
// Instances the broker reported healthy (the kept ones, and those the
// inputs provisioned) are updated after every input that reached them and
// every fuzzAuditEvery inputs; at the end of the test every operation must
// have ended and every healthy instance is updated and deleted. Under
// -fuzz, a worker is stopped a second after -fuzztime ends, so there the
// audits are what checks: replay the corpus with FUZZHTTP_CORPUS to run
// the end-of-test checks over it.
//
// The seed corpus (f.Add below and testdata/fuzz/FuzzHTTP) runs on every
// plain `go test`. Environment:
//
//	FUZZHTTP_STATS=dir     each process writes its counters to dir/stats-<pid>.json
//	FUZZHTTP_CORPUS=dir    also run every input file of dir, e.g. the corpus -fuzz grew:
//	                       $(go env GOCACHE)/fuzz/github.com/serverless-osb/broker/internal/api/FuzzHTTP
func FuzzHTTP(f *testing.F) {
	fb := startFuzzBroker(f)
	for _, seed := range fuzzSeeds() {
		f.Add(seed.method, seed.path, seed.query, seed.header, []byte(seed.body), seed.flags)
	}
	if dir := os.Getenv("FUZZHTTP_CORPUS"); dir != "" {
		addFuzzCorpus(f, dir)
	}
	f.Fuzz(func(t *testing.T, method, path, query, header string, body []byte, flags uint16) {
		fb.run(t, fuzzInput{method: method, path: path, query: query, header: header, body: body, flags: flags})
	})
}

// Flags of an input.
const (
	// fuzzRaw sends method, path, query and header lines as given (only
	// CR and LF are escaped in the request line, so that one input is one
	// request): net/http may refuse them. Otherwise they are made
	// well-formed first, so that the request reaches the broker (see
	// fuzzMethod, escapeTarget and build).
	fuzzRaw = 1 << iota
	// fuzzChunked sends the body with Transfer-Encoding: chunked.
	fuzzChunked
	// fuzzNoAuth, fuzzNoVersion and fuzzNoContentType leave out the
	// default Authorization, X-Broker-API-Version: 2.17 and Content-Type:
	// application/json headers. A header line of the input with the same
	// name replaces a default in any case.
	fuzzNoAuth
	fuzzNoVersion
	fuzzNoContentType
)

const (
	// fuzzSlots is how many sync-plan instances are kept healthy, each with
	// the bindings fuzzBindings.
	fuzzSlots = 4
	// fuzzMaxDuration caps duration_seconds in every body: async operations
	// end within it.
	fuzzMaxDuration = 1
	// fuzzOpDeadline is how long past its start an operation may stay in
	// progress before it counts as stuck: the longest workflow, with a
	// generous margin for a loaded machine.
	fuzzOpDeadline = fuzzMaxDuration*time.Second + 5*time.Minute
	// fuzzAuditEvery is how many inputs run between full audits.
	fuzzAuditEvery = 256
	// fuzzKeepCreated is how many instances the inputs made are kept (and
	// checked) before the oldest is deleted.
	fuzzKeepCreated = 8
)

var fuzzBindings = [2]string{"fuzz-b0", "fuzz-b1"}

// fuzzInput is one fuzz input.
type fuzzInput struct {
	method, path, query, header string
	body                        []byte
	flags                       uint16
}

func (in fuzzInput) String() string {
	return fmt.Sprintf("%q %q ?%q header %q body %.300q flags %#x", in.method, in.path, in.query, in.header, in.body, in.flags)
}

// fuzzBroker is one broker per test process, with what the fuzz knows of
// its state.
type fuzzBroker struct {
	local  *app.Local
	addr   string
	base   string
	store  broker.Store
	logs   *fuzzLog
	client *http.Client
	// drivers sees every driver call.
	drivers *fuzzDrivers

	service, syncPlan, asyncPlan, onlyPlan string

	slots   [fuzzSlots]string
	serial  int
	healthy map[string]bool // every instance the broker reported healthy
	created []string        // those the inputs made, oldest first
	// deleted holds the instances whose deprovision the broker accepted:
	// only those may vanish.
	deleted map[string]bool
	// provisions are the inputs' async provisions: the instance is
	// healthy once its operation succeeds.
	provisions []fuzzProvision

	stats     fuzzStats
	statsPath string
}

type fuzzProvision struct{ instanceID, operation string }

// fuzzStats are counters for the report of a fuzz run.
type fuzzStats struct {
	Inputs int `json:"inputs"`
	// Answered counts the broker's own answers by status.
	Answered map[int]int `json:"answered_by_broker"`
	// NetHTTP counts answers net/http made without calling the broker's
	// handler, by status. 0: none could be read, which happens when
	// net/http refuses a request with a large body unread: it closes the
	// connection at once and the TCP reset overtakes its answer.
	NetHTTP map[int]int `json:"answered_by_net_http"`
	// NetHTTPSamples are the first few requests net/http answered, by
	// status.
	NetHTTPSamples map[int][]string `json:"net_http_samples"`
	// Deviations counts the known deviations, by description.
	Deviations map[string]int `json:"known_deviations"`
	Broker5xx  int            `json:"broker_5xx"`
	Stuck      int            `json:"stuck_operations"`
	// AsyncAccepted counts 202 answers to the inputs.
	AsyncAccepted int `json:"async_accepted"`
	// Checks counts instance health checks (an update with valid
	// parameters), Deleted the deletes of instances that passed them.
	Checks  int `json:"health_checks"`
	Deleted int `json:"healthy_instances_deleted"`
	// Slowest is the input that took longest, with its checks.
	Slowest struct {
		Milliseconds int64  `json:"ms"`
		Input        string `json:"input"`
	} `json:"slowest"`
	// ErrorLines counts log lines at level ERROR; ErrorSamples are the
	// first few.
	ErrorLines   int      `json:"error_log_lines"`
	ErrorSamples []string `json:"error_log_samples,omitempty"`
}

func startFuzzBroker(f *testing.F) *fuzzBroker {
	root := apptest.Root()
	logs := &fuzzLog{}
	cfg := app.LocalConfig{
		Addr: "127.0.0.1:0", DataDir: f.TempDir(),
		CatalogPath:   filepath.Join(root, "catalog.yaml"),
		StateMachines: filepath.Join(root, "statemachines"),
		Credentials: []api.Credential{{Username: apptest.Username, Password: apptest.Password},
			{Username: apptest.OtherUsername, Password: apptest.OtherPasswd}},
	}
	drivers := &fuzzDrivers{}
	cfg.Wrap = &app.Wrappers{Driver: drivers.wrap}
	// Not apptest.Start: its log keeps every line, and a long fuzz run
	// writes gigabytes. fuzzLog keeps what the checks need.
	l, err := app.OpenLocal(context.Background(), cfg, logging.New(logs, slog.LevelInfo))
	if err != nil {
		f.Fatalf("open local broker: %v", err)
	}
	if err := l.Listen(cfg.Addr); err != nil {
		l.Close()
		f.Fatalf("listen: %v", err)
	}
	transport := &http.Transport{MaxIdleConnsPerHost: 4}
	fb := &fuzzBroker{
		local: l, base: l.URL(), addr: strings.TrimPrefix(l.URL(), "http://"), store: l.Store, logs: logs, drivers: drivers,
		client:  &http.Client{Transport: transport, Timeout: 5 * time.Minute},
		healthy: map[string]bool{}, deleted: map[string]bool{},
		stats: fuzzStats{Answered: map[int]int{}, NetHTTP: map[int]int{}, NetHTTPSamples: map[int][]string{}, Deviations: map[string]int{}},
	}
	f.Cleanup(func() {
		transport.CloseIdleConnections()
		if err := l.Close(); err != nil {
			f.Errorf("close broker: %v", err)
		}
	})
	if dir := os.Getenv("FUZZHTTP_STATS"); dir != "" {
		fb.statsPath = filepath.Join(dir, fmt.Sprintf("stats-%d.json", os.Getpid()))
	}
	for _, s := range l.Broker.Catalog.Services() {
		for _, p := range s.Plans {
			switch p.Name {
			case "fake-plan":
				fb.service, fb.syncPlan = s.ID, p.ID
			case "fake-async-plan":
				fb.asyncPlan = p.ID
			case "fake-async-only-plan":
				fb.onlyPlan = p.ID
			}
		}
	}
	if fb.syncPlan == "" || fb.asyncPlan == "" || fb.onlyPlan == "" {
		f.Fatal("the catalog lacks fake-plan, fake-async-plan or fake-async-only-plan")
	}
	for i := range fb.slots {
		if err := fb.fillSlot(i); err != nil {
			f.Fatal(err)
		}
	}
	// Runs before the broker closes (cleanups run last first).
	f.Cleanup(func() {
		if err := fb.finish(); err != nil {
			f.Error(err)
		}
		if err := fb.drivers.violation(); err != nil {
			f.Error(err)
		}
		fb.writeStats()
		f.Logf("fuzz stats: %s", fb.statsJSON())
	})
	return fb
}

// placeholders returns what each placeholder of an input becomes.
func (fb *fuzzBroker) placeholders() *strings.Replacer {
	pairs := []string{"{b0}", fuzzBindings[0], "{b1}", fuzzBindings[1],
		"{s}", fb.service, "{p}", fb.syncPlan, "{a}", fb.asyncPlan, "{o}", fb.onlyPlan}
	for i, id := range fb.slots {
		pairs = append(pairs, fmt.Sprintf("{i%d}", i), id)
	}
	return strings.NewReplacer(pairs...)
}

// run sends one input and checks the answer and the healthy instances.
func (fb *fuzzBroker) run(t *testing.T, in fuzzInput) {
	start := time.Now()
	defer func() {
		if d := time.Since(start).Milliseconds(); d > fb.stats.Slowest.Milliseconds {
			fb.stats.Slowest.Milliseconds, fb.stats.Slowest.Input = d, cut(in.String())
		}
	}()
	fb.stats.Inputs++
	raw, method := fb.build(in)
	a, err := fb.send(raw, method)
	if err != nil {
		t.Fatalf("%v\ninput: %s", err, in)
	}
	if a.handled == nil {
		t.Logf("net/http answered %d: %.200q", a.status, a.body)
		fb.stats.NetHTTP[a.status]++
		if len(fb.stats.NetHTTPSamples[a.status]) < 3 {
			fb.stats.NetHTTPSamples[a.status] = append(fb.stats.NetHTTPSamples[a.status], cut(strconv.Quote(string(raw))))
		}
	} else {
		t.Logf("the broker answered %d on route %q: %.200s", a.status, a.handled.Route, a.body)
		if err := fb.checkAnswer(method, a); err != nil {
			t.Fatalf("%v\ninput: %s\nrequest: %.600q\nanswer: %d %v %.600s\nlog: %s",
				err, in, raw, a.status, a.header, a.body, fb.logs.lastLines())
		}
		if err := fb.follow(method, a); err != nil {
			t.Fatalf("%v\ninput: %s\nrequest: %.600q\nanswer: %d %.600s\nlog: %s",
				err, in, raw, a.status, a.body, fb.logs.lastLines())
		}
	}
	if err := fb.drivers.violation(); err != nil {
		t.Fatalf("%v\ninput: %s\nlog: %s", err, in, fb.logs.lastLines())
	}
	if fb.stats.Inputs%fuzzAuditEvery == 0 {
		if err := fb.audit(); err != nil {
			t.Fatalf("%v\n(found after input %s)\nlog: %s", err, in, fb.logs.lastLines())
		}
	}
}

// build returns the request of an input and its method.
func (fb *fuzzBroker) build(in fuzzInput) (request []byte, method string) {
	ph := fb.placeholders()
	raw := in.flags&fuzzRaw != 0
	method = fuzzMethod(in.method, raw)
	target := escapeTarget(ph.Replace(in.path), raw)
	if target == "" {
		target = "/"
	}
	if in.query != "" {
		target += "?" + escapeTarget(ph.Replace(in.query), raw)
	}
	body := capDurations([]byte(ph.Replace(string(in.body))))

	var lines []string
	given := map[string]bool{}
	for line := range strings.SplitSeq(ph.Replace(in.header), "\n") {
		name, value, found := strings.Cut(line, ":")
		if !raw {
			// Only well-formed lines: net/http refuses the request otherwise.
			if !found || name == "" || strings.ContainsFunc(name, func(r rune) bool { return !isToken(r) }) {
				continue
			}
			line = name + ":" + dropControls(value)
		}
		name = http.CanonicalHeaderKey(strings.TrimSpace(name))
		// The harness frames the body itself: one input is one request.
		if line == "" || name == "Content-Length" || name == "Transfer-Encoding" {
			continue
		}
		given[name] = true
		lines = append(lines, line)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\n", method, target)
	if !given["Host"] {
		b.WriteString("Host: " + fb.addr + "\r\n")
	}
	if in.flags&fuzzNoAuth == 0 && !given["Authorization"] {
		b.WriteString("Authorization: Basic " + basic(apptest.Username, apptest.Password) + "\r\n")
	}
	if in.flags&fuzzNoVersion == 0 && !given[http.CanonicalHeaderKey(api.HeaderAPIVersion)] {
		b.WriteString(api.HeaderAPIVersion + ": 2.17\r\n")
	}
	if in.flags&fuzzNoContentType == 0 && !given["Content-Type"] && len(body) > 0 {
		b.WriteString("Content-Type: application/json\r\n")
	}
	for _, line := range lines {
		b.WriteString(line + "\r\n")
	}
	switch {
	case in.flags&fuzzChunked != 0:
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		if len(body) > 0 {
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(body), body)
		}
		b.WriteString("0\r\n\r\n")
	case len(body) > 0:
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(body), body)
	default:
		b.WriteString("\r\n")
	}
	return b.Bytes(), method
}

// fuzzMethod is the method to send: unless raw, only its token characters
// (net/http refuses the request otherwise), GET if none.
func fuzzMethod(m string, raw bool) string {
	if !raw {
		m = strings.Map(func(r rune) rune {
			if isToken(r) {
				return r
			}
			return -1
		}, m)
	}
	if m == "" {
		return http.MethodGet
	}
	return escapeTarget(m, true)
}

// dropControls removes the control bytes but tab (net/http refuses a
// header value with one) and keeps every other byte, valid UTF-8 or not.
func dropControls(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\t' || (c >= ' ' && c != 0x7f) {
			b = append(b, c)
		}
	}
	return string(b)
}

// isToken reports whether r may be part of an HTTP token (a method, a
// header name).
func isToken(r rune) bool {
	return r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("!#$%&'*+-.^_`|~", r))
}

// escapeTarget percent-escapes what would end the request line: CR and LF
// always. Unless raw, also what net/http would refuse, so that the request
// reaches the broker: spaces, other control bytes, '#', and a '%' that
// starts no escape.
func escapeTarget(s string, raw bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		badEscape := c == '%' && (i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]))
		if c == '\r' || c == '\n' || (!raw && (c <= ' ' || c == 0x7f || c == '#' || badEscape)) {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// capDurations lowers every duration_seconds over fuzzMaxDuration in a JSON
// body (keys compared as encoding/json does, case-insensitively), so that
// every async operation ends soon. Anything else is sent as it came.
func capDurations(body []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || !errors.Is(dec.Decode(new(any)), io.EOF) || !capWalk(v) {
		// Not one JSON value, or nothing to cap: the broker gets it as is.
		return body
	}
	out, err := json.Marshal(v)
	if err != nil {
		return body
	}
	return out
}

func capWalk(v any) (changed bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, val := range v {
			if n, ok := val.(json.Number); ok && strings.EqualFold(k, "duration_seconds") {
				if f, err := strconv.ParseFloat(string(n), 64); err != nil || f > fuzzMaxDuration {
					v[k] = json.Number(strconv.Itoa(fuzzMaxDuration))
					changed = true
				}
				continue
			}
			changed = capWalk(val) || changed
		}
	case []any:
		for _, val := range v {
			changed = capWalk(val) || changed
		}
	}
	return changed
}

// fuzzAnswer is an answer to a raw request.
type fuzzAnswer struct {
	status int
	header http.Header
	body   []byte
	// handled is the request's log line; nil when net/http answered
	// without calling the broker's handler.
	handled *fuzzRequestLine
}

// send writes raw on a new connection and reads one answer. The connection
// is then reset (SO_LINGER 0): one input is one request, and thousands of
// inputs leave no TIME_WAIT sockets behind.
func (fb *fuzzBroker) send(raw []byte, method string) (fuzzAnswer, error) {
	fb.logs.take()
	conn, err := net.DialTimeout("tcp", fb.addr, time.Minute)
	if err != nil {
		return fuzzAnswer{}, fmt.Errorf("dial the broker: %w", err)
	}
	_ = conn.SetDeadline(time.Now().Add(5 * time.Minute))
	// Write while reading: the broker may answer (and stop reading) before
	// a large body is sent. Closing the connection ends a blocked write.
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		_, _ = conn.Write(raw)
	}()
	defer func() {
		_ = conn.(*net.TCPConn).SetLinger(0)
		_ = conn.Close()
		<-wrote
	}()
	br := bufio.NewReader(conn)
	var resp *http.Response
	for {
		resp, err = http.ReadResponse(br, &http.Request{Method: method})
		if err != nil || resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	var a fuzzAnswer
	if err == nil {
		a.status, a.header = resp.StatusCode, resp.Header
		a.body, err = io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	}
	lines := fb.logs.take()
	switch {
	case len(lines) > 1:
		return a, fmt.Errorf("one request made %d request log lines: %v", len(lines), lines)
	case len(lines) == 1:
		a.handled = &lines[0]
		if err != nil {
			return a, fmt.Errorf("the broker handled the request (log: %+v) but its answer could not be read: %w", lines[0], err)
		}
	case err != nil:
		// net/http closed the connection without an answer.
		a.status = 0
	}
	return a, nil
}

// Routes, as the request log names them.
const (
	routeCatalog     = "/v2/catalog"
	routeInstance    = "/v2/service_instances/{instance_id}"
	routeInstanceOp  = "/v2/service_instances/{instance_id}/last_operation"
	routeBinding     = "/v2/service_instances/{instance_id}/service_bindings/{binding_id}"
	routeBindingOp   = "/v2/service_instances/{instance_id}/service_bindings/{binding_id}/last_operation"
	routeNoEndpoint  = ""
	statusesAnyRoute = "400 401 412"
)

// fuzzStatuses are the statuses the broker may answer, by route and method
// (the OSB spec's, and this broker's documented 404s for unknown
// instances), on top of statusesAnyRoute (headers, authentication, ids).
// A method not listed gets 405.
var fuzzStatuses = map[string]map[string]string{
	routeCatalog: {http.MethodGet: "200 304"},
	routeInstance: {
		http.MethodPut:    "200 201 202 409 422",
		http.MethodPatch:  "200 202 404 422",
		http.MethodDelete: "200 202 410 422",
		http.MethodGet:    "200 404 422",
	},
	routeInstanceOp: {http.MethodGet: "200 404 410"},
	routeBinding: {
		http.MethodPut:    "200 201 202 404 409 422",
		http.MethodDelete: "200 202 410 422",
		http.MethodGet:    "200 404 422",
	},
	routeBindingOp: {http.MethodGet: "200 404 410"},
}

// checkAnswer checks the property on an answer the broker's handler made.
func (fb *fuzzBroker) checkAnswer(method string, a fuzzAnswer) error {
	line := a.handled
	fb.stats.Answered[a.status]++
	if line.Status != a.status {
		return fmt.Errorf("the request log says status %d, the client got %d", line.Status, a.status)
	}
	if a.status >= 500 {
		fb.stats.Broker5xx++
		return fmt.Errorf("a 5xx reached the client: %d", a.status)
	}
	isJSON := strings.HasPrefix(a.header.Get("Content-Type"), "application/json")
	if dev := fuzzDeviation(line, a, isJSON); dev != "" {
		fb.stats.Deviations[dev]++
		return fmt.Errorf("the broker let ServeMux answer: %s", dev)
	}
	allowed := statusesAnyRoute
	switch m, routed := fuzzStatuses[line.Route]; {
	case line.Route == routeNoEndpoint:
		allowed += " 404"
	case !routed:
		return fmt.Errorf("the request log names an unknown route %q", line.Route)
	case m[method] != "":
		allowed += " " + m[method]
	default:
		allowed += " 405"
	}
	if !slices.Contains(strings.Fields(allowed), strconv.Itoa(a.status)) {
		return fmt.Errorf("%s on route %q answered %d, not one of %s", method, line.Route, a.status, allowed)
	}
	if a.status == http.StatusNotModified || method == http.MethodHead {
		if len(a.body) != 0 {
			return fmt.Errorf("a %d answer to %s has a body", a.status, method)
		}
		if a.status == http.StatusNotModified {
			return nil
		}
	}
	if !isJSON {
		return fmt.Errorf("Content-Type %q, want application/json", a.header.Get("Content-Type"))
	}
	if method == http.MethodHead {
		return nil
	}
	var body map[string]any
	if err := json.Unmarshal(a.body, &body); err != nil || body == nil {
		return fmt.Errorf("the body is not a JSON object: %v", err)
	}
	desc := fuzzString(body, "description")
	switch {
	case a.status == http.StatusGone:
		if len(body) != 0 {
			return fmt.Errorf("a 410 body is %s, want {}", a.body)
		}
	case a.status >= 400 && desc == "":
		return errors.New("an error answer without a description")
	}
	if code, present := body["error"]; present {
		if s, _ := code.(string); !osbErrorCodes[s] || a.status != http.StatusUnprocessableEntity {
			return fmt.Errorf("error %v with status %d: the spec's codes come with 422 only", code, a.status)
		}
	}
	switch {
	case a.status == http.StatusMethodNotAllowed && a.header.Get("Allow") == "":
		return errors.New("405 without Allow")
	case a.status == http.StatusUnauthorized && a.header.Get("WWW-Authenticate") == "":
		return errors.New("401 without WWW-Authenticate")
	case a.status == http.StatusAccepted && fuzzString(body, "operation") == "":
		return errors.New("202 without an operation")
	}
	if (line.Route == routeInstanceOp || line.Route == routeBindingOp) && a.status == http.StatusOK {
		switch body["state"] {
		case "succeeded", "failed":
		case "in progress":
			if n, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || n < 1 {
				return fmt.Errorf("in progress with Retry-After %q", a.header.Get("Retry-After"))
			}
		default:
			return fmt.Errorf("last_operation state %v", body["state"])
		}
	}
	return nil
}

// fuzzDeviation names a way ServeMux answers a request that passed
// authentication by itself, instead of calling a route, or returns "". The
// broker answers these as JSON (api's canonicalPaths); they were found by
// this fuzz test:
//
//   - a path that is not clean (//, /./, /../ segments) gets a 307 redirect
//     to the cleaned path, with an HTML body: a platform that follows it
//     repeats a PUT, PATCH or DELETE on another instance id
//     (PUT /v2/service_instances/x/../y provisions y);
//   - the request-target * (asterisk form, any method but OPTIONS) gets a
//     400 with an empty body;
//   - CONNECT with an authority-form target (CONNECT host:443) gets
//     "404 page not found" in plain text.
func fuzzDeviation(line *fuzzRequestLine, a fuzzAnswer, isJSON bool) string {
	if line.Route != routeNoEndpoint || isJSON {
		return ""
	}
	switch a.status {
	case http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		if a.header.Get("Location") != "" {
			return fmt.Sprintf("ServeMux redirects a path that is not clean (%d, non-JSON)", a.status)
		}
	case http.StatusBadRequest:
		if len(a.body) == 0 {
			return "ServeMux answers the asterisk-form target with an empty 400"
		}
	case http.StatusNotFound:
		if strings.HasPrefix(string(a.body), "404 page not found") {
			return "ServeMux answers a target that is not a path with a plain-text 404"
		}
	}
	return ""
}

// follow records what an answer changed and checks the instances the
// request touched.
func (fb *fuzzBroker) follow(method string, a fuzzAnswer) error {
	line := a.handled
	id := line.InstanceID
	if a.status == http.StatusAccepted {
		fb.stats.AsyncAccepted++
	}
	switch {
	case line.Route == routeInstance && method == http.MethodPut && (a.status == http.StatusOK || a.status == http.StatusCreated):
		fb.track(id)
	case line.Route == routeInstance && method == http.MethodPut && a.status == http.StatusAccepted:
		var body struct{ Operation string }
		_ = json.Unmarshal(a.body, &body)
		fb.provisions = append(fb.provisions, fuzzProvision{id, body.Operation})
	case line.Route == routeInstance && method == http.MethodDelete && (a.status == http.StatusOK || a.status == http.StatusAccepted):
		fb.deleted[id] = true
	}
	if id == "" || !fb.healthy[id] {
		return nil
	}
	// The request reached an instance reported healthy: it must still be.
	gone, err := fb.checkInstance(id, false)
	if err != nil || !gone {
		return err
	}
	fb.forget(id)
	// Keep the slots' placeholders pointing at healthy instances.
	if i := slices.Index(fb.slots[:], id); i >= 0 {
		return fb.fillSlot(i)
	}
	return nil
}

func (fb *fuzzBroker) track(id string) {
	delete(fb.deleted, id)
	if !fb.healthy[id] {
		fb.healthy[id] = true
		fb.created = append(fb.created, id)
	}
}

// forget drops an instance that was deleted; a slot gets a new instance.
func (fb *fuzzBroker) forget(id string) {
	delete(fb.healthy, id)
	fb.created = slices.DeleteFunc(fb.created, func(c string) bool { return c == id })
}

// audit checks every instance reported healthy, that no operation is stuck,
// refills the slots and keeps the inputs' instances few.
func (fb *fuzzBroker) audit() error {
	if err := fb.noStuckOperations(); err != nil {
		return err
	}
	if err := fb.watchProvisions(false); err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(fb.healthy)) {
		gone, err := fb.checkInstance(id, true)
		if err != nil {
			return err
		}
		if gone {
			fb.forget(id)
		}
	}
	for i, id := range fb.slots {
		if !fb.healthy[id] {
			if err := fb.fillSlot(i); err != nil {
				return err
			}
			continue
		}
		if err := fb.bindSlot(id); err != nil {
			return err
		}
	}
	for len(fb.created) > fuzzKeepCreated {
		id := fb.created[0]
		if err := fb.deleteInstance(id); err != nil {
			return err
		}
		fb.forget(id)
	}
	fb.writeStats()
	return nil
}

// finish is the end of the test: every operation ends, every instance
// reported healthy passes a health check and is deleted, and every
// detached resource is cleaned up.
func (fb *fuzzBroker) finish() error {
	if _, err := fb.settle("", time.Now().Add(fuzzOpDeadline)); err != nil {
		return err
	}
	if err := fb.watchProvisions(true); err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(fb.healthy)) {
		gone, err := fb.checkInstance(id, true)
		if err != nil {
			return err
		}
		if !gone {
			if err := fb.deleteInstance(id); err != nil {
				return err
			}
		}
		fb.forget(id)
	}
	if _, err := fb.settle("", time.Now().Add(fuzzOpDeadline)); err != nil {
		return err
	}
	deadline := time.Now().Add(fuzzOpDeadline)
	for {
		detached, err := fb.store.ListDetached(context.Background())
		if err != nil {
			return err
		}
		var left []string
		for _, d := range detached {
			if d.State == broker.DetachedFailed {
				return fmt.Errorf("the cleanup of detached resource %s failed: %s", d.ID, d.Failure)
			}
			left = append(left, d.ID)
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("detached resources not cleaned up after %s: %v", fuzzOpDeadline, left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fillSlot puts a new healthy sync-plan instance, with its bindings, in a
// slot.
func (fb *fuzzBroker) fillSlot(i int) error {
	fb.serial++
	id := fmt.Sprintf("fuzz-i%d-%d", i, fb.serial)
	r, err := fb.call(http.MethodPut, instancePath(id), map[string]any{"service_id": fb.service, "plan_id": fb.syncPlan,
		"organization_guid": "org-fuzz", "space_guid": "space-fuzz"})
	if err != nil {
		return err
	}
	if r.status != http.StatusCreated {
		return fmt.Errorf("provision a healthy instance %s: %d %s", id, r.status, r.raw)
	}
	fb.slots[i] = id
	fb.healthy[id] = true
	return fb.bindSlot(id)
}

// bindSlot makes the slot's bindings exist again (the inputs may unbind
// them), naming the instance's plan as it is now (the inputs may update
// it). A binding the inputs made with other attributes (409) or that the
// instance's plan refuses synchronously (422) is left as it is.
func (fb *fuzzBroker) bindSlot(id string) error {
	plan := fb.syncPlan
	got, err := fb.call(http.MethodGet, instancePath(fuzzEscape(id)), nil)
	if err != nil {
		return err
	}
	if got.status == http.StatusOK && got.str("plan_id") != "" {
		plan = got.str("plan_id")
	}
	for _, bid := range fuzzBindings {
		r, err := fb.call(http.MethodPut, bindingPath(fuzzEscape(id), bid),
			map[string]any{"service_id": fb.service, "plan_id": plan})
		if err != nil {
			return err
		}
		switch r.status {
		case http.StatusOK, http.StatusCreated, http.StatusConflict, http.StatusUnprocessableEntity:
		default:
			return fmt.Errorf("bind %s on healthy instance %s: %d %s", bid, id, r.status, r.raw)
		}
	}
	return nil
}

// checkInstance updates an instance reported healthy with valid parameters
// (new ones: a real update, never a no-op): it must answer 200, or 422 ConcurrencyError while an operation is in
// progress on it (then, when wait, it waits for those with last_operation
// and tries again; otherwise the next audit does). It reports gone when
// the instance was deleted by a deprovision the broker accepted.
func (fb *fuzzBroker) checkInstance(id string, wait bool) (gone bool, err error) {
	fb.stats.Checks++
	path := instancePath(fuzzEscape(id))
	// Parameters that differ from the instance's: an update to what it
	// has already is a no-op, answered 200 without taking the instance.
	update := map[string]any{"service_id": fb.service, "parameters": map[string]any{
		"duration_seconds": 0, "fail_description": fmt.Sprintf("health check %d", fb.stats.Checks)}}
	for attempt := 0; ; attempt++ {
		r, err := fb.call(http.MethodPatch, path, update)
		if err != nil {
			return false, err
		}
		if r.status == http.StatusUnprocessableEntity && r.error == "AsyncRequired" {
			// An input moved it to the async-only plan: update it
			// asynchronously; an operation in progress on it (an input's
			// async update) is waited for as below.
			if r, err = fb.call(http.MethodPatch, path+"?accepts_incomplete=true", update); err != nil {
				return false, err
			}
			if r.status != http.StatusUnprocessableEntity || r.error != "ConcurrencyError" {
				return false, fb.asyncUpdated(id, path, r)
			}
		}
		switch {
		case r.status == http.StatusOK:
			return false, nil
		case r.status == http.StatusNotFound && fb.deleted[id]:
			return true, nil
		case r.status == http.StatusUnprocessableEntity && r.error == "ConcurrencyError" && attempt < 3:
			if !wait {
				if busy, err := fb.busy(id); err != nil || busy {
					return false, err
				}
				continue
			}
			busy, err := fb.settle(id, time.Now().Add(fuzzOpDeadline))
			if err != nil {
				return false, err
			}
			if !busy && attempt > 0 {
				return false, fmt.Errorf("instance %q was reported healthy; an update answers %d %s with no operation in progress",
					id, r.status, r.raw)
			}
			continue
		}
		return false, fmt.Errorf("instance %q was reported healthy; an update with valid parameters answers %d %s",
			id, r.status, r.raw)
	}
}

// asyncUpdated checks the answer r to an async update of a healthy
// instance: done at once, or accepted and then succeeded.
func (fb *fuzzBroker) asyncUpdated(id, path string, r fuzzReply) error {
	switch r.status {
	case http.StatusOK:
		return nil
	case http.StatusAccepted:
		lo, err := fb.waitOperation(path+"/last_operation?operation="+url.QueryEscape(r.str("operation")), time.Now().Add(fuzzOpDeadline))
		if err != nil {
			return err
		}
		if lo.str("state") != "succeeded" {
			return fmt.Errorf("instance %q was reported healthy; an async update with valid parameters ended %d %s", id, lo.status, lo.raw)
		}
		return nil
	}
	return fmt.Errorf("instance %q was reported healthy; an async update with valid parameters answers %d %s", id, r.status, r.raw)
}

// deleteInstance deprovisions an instance that passed a health check and
// checks that it is gone.
func (fb *fuzzBroker) deleteInstance(id string) error {
	path := instancePath(fuzzEscape(id))
	got, err := fb.call(http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if got.status != http.StatusOK || got.str("plan_id") == "" {
		return fmt.Errorf("fetch healthy instance %q: %d %s", id, got.status, got.raw)
	}
	q := "?accepts_incomplete=true&service_id=" + url.QueryEscape(fb.service) + "&plan_id=" + url.QueryEscape(got.str("plan_id"))
	for attempt := 0; ; attempt++ {
		r, err := fb.call(http.MethodDelete, path+q, nil)
		if err != nil {
			return err
		}
		switch {
		case r.status == http.StatusOK:
		case r.status == http.StatusAccepted:
			lo, err := fb.waitOperation(path+"/last_operation?operation="+url.QueryEscape(r.str("operation")), time.Now().Add(fuzzOpDeadline))
			if err != nil {
				return err
			}
			if lo.status != http.StatusGone {
				return fmt.Errorf("deprovision of healthy instance %q ended %d %s, want 410", id, lo.status, lo.raw)
			}
		case r.status == http.StatusUnprocessableEntity && r.error == "ConcurrencyError" && attempt < 3:
			if _, err := fb.settle(id, time.Now().Add(fuzzOpDeadline)); err != nil {
				return err
			}
			continue
		default:
			return fmt.Errorf("instance %q was reported healthy; its deprovision answers %d %s", id, r.status, r.raw)
		}
		break
	}
	fb.deleted[id] = true
	fb.stats.Deleted++
	after, err := fb.call(http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if after.status != http.StatusNotFound {
		return fmt.Errorf("instance %q after its deprovision: %d %s", id, after.status, after.raw)
	}
	return nil
}

// watchProvisions makes the instances of the inputs' async provisions
// healthy once their operation succeeded; with all, it waits for each.
func (fb *fuzzBroker) watchProvisions(all bool) error {
	var left []fuzzProvision
	for _, p := range fb.provisions {
		path := instancePath(fuzzEscape(p.instanceID)) + "/last_operation?operation=" + url.QueryEscape(p.operation)
		var r fuzzReply
		var err error
		if all {
			r, err = fb.waitOperation(path, time.Now().Add(fuzzOpDeadline))
		} else {
			r, err = fb.call(http.MethodGet, path, nil)
		}
		if err != nil {
			return err
		}
		switch {
		case r.status == http.StatusOK && r.str("state") == "in progress":
			left = append(left, p)
		case r.status == http.StatusOK && r.str("state") == "succeeded":
			fb.track(p.instanceID)
		}
	}
	fb.provisions = left
	return nil
}

// busy reports whether an operation is in progress on the instance or one
// of its bindings.
func (fb *fuzzBroker) busy(id string) (bool, error) {
	ops, err := fb.store.ListInProgress(context.Background())
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(ops, func(op broker.Operation) bool { return op.InstanceID == id }), nil
}

// settle waits, polling last_operation, until no operation is in progress
// on the instance (every instance when id is ""), and reports whether one
// was. An operation still in progress at the deadline is stuck.
func (fb *fuzzBroker) settle(id string, deadline time.Time) (busy bool, err error) {
	for {
		ops, err := fb.store.ListInProgress(context.Background())
		if err != nil {
			return busy, err
		}
		ops = slices.DeleteFunc(ops, func(op broker.Operation) bool { return id != "" && op.InstanceID != id })
		if len(ops) == 0 {
			return busy, nil
		}
		busy = true
		for _, op := range ops {
			// last_operation is how the platform waits, and it repairs a
			// record whose execution ended without it.
			if _, err := fb.call(http.MethodGet, fuzzLastOperationPath(op), nil); err != nil {
				return busy, err
			}
		}
		if time.Now().After(deadline) {
			return busy, fb.stuck(ops)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// noStuckOperations fails on an operation in progress past fuzzOpDeadline
// even after last_operation looked at it.
func (fb *fuzzBroker) noStuckOperations() error {
	ops, err := fb.store.ListInProgress(context.Background())
	if err != nil {
		return err
	}
	var old []broker.Operation
	for _, op := range ops {
		if time.Since(op.CreatedAt) < fuzzOpDeadline {
			continue
		}
		r, err := fb.call(http.MethodGet, fuzzLastOperationPath(op), nil)
		if err != nil {
			return err
		}
		if r.status == http.StatusOK && r.str("state") == "in progress" {
			old = append(old, op)
		}
	}
	if len(old) > 0 {
		return fb.stuck(old)
	}
	return nil
}

func (fb *fuzzBroker) stuck(ops []broker.Operation) error {
	fb.stats.Stuck += len(ops)
	var b strings.Builder
	for _, op := range ops {
		exec, err := fb.local.Engine.Describe(context.Background(), op.ID)
		fmt.Fprintf(&b, "\n  %s %s instance %q binding %q since %s: execution %s %s (%v)",
			op.Kind, op.ID, op.InstanceID, op.BindingID, op.CreatedAt.Format(time.RFC3339Nano), exec.Status, exec.Error, err)
	}
	return fmt.Errorf("%d operations still in progress %s after they started:%s", len(ops), fuzzOpDeadline, b.String())
}

// fuzzEscape escapes an id as one path segment. "." and ".." are valid ids
// but must be escaped: ServeMux redirects a path holding them as segments.
func fuzzEscape(id string) string {
	if id == "." || id == ".." {
		return strings.Repeat("%2E", len(id))
	}
	return url.PathEscape(id)
}

func fuzzLastOperationPath(op broker.Operation) string {
	path := instancePath(fuzzEscape(op.InstanceID))
	if op.BindingID != "" {
		path = bindingPath(fuzzEscape(op.InstanceID), fuzzEscape(op.BindingID))
	}
	return path + "/last_operation?operation=" + url.QueryEscape(op.ID)
}

// waitOperation polls a last_operation path until it is no longer in
// progress.
func (fb *fuzzBroker) waitOperation(path string, deadline time.Time) (fuzzReply, error) {
	for {
		r, err := fb.call(http.MethodGet, path, nil)
		if err != nil || r.status != http.StatusOK || r.str("state") != "in progress" {
			return r, err
		}
		if time.Now().After(deadline) {
			fb.stats.Stuck++
			return r, fmt.Errorf("%s still in progress at the deadline: %s", path, r.raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fuzzReply is the answer to one of the harness's own requests.
type fuzzReply struct {
	status int
	raw    []byte
	body   map[string]any
	error  string
}

func (r fuzzReply) str(key string) string { return fuzzString(r.body, key) }

// fuzzString returns a string field of a JSON object, "" if it is not one.
func fuzzString(body map[string]any, key string) string {
	s, _ := body[key].(string)
	return s
}

// call sends one well-formed request of the harness (not an input).
func (fb *fuzzBroker) call(method, path string, body any) (fuzzReply, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return fuzzReply{}, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, fb.base+path, rd)
	if err != nil {
		return fuzzReply{}, err
	}
	req.SetBasicAuth(apptest.Username, apptest.Password)
	req.Header.Set(api.HeaderAPIVersion, "2.17")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := fb.client.Do(req)
	if err != nil {
		return fuzzReply{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	r := fuzzReply{status: resp.StatusCode}
	if r.raw, err = io.ReadAll(resp.Body); err != nil {
		return r, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if err := json.Unmarshal(r.raw, &r.body); err != nil {
		return r, fmt.Errorf("%s %s: %d answer is not a JSON object: %w: %s", method, path, r.status, err, r.raw)
	}
	r.error = r.str("error")
	return r, nil
}

func (fb *fuzzBroker) statsJSON() []byte {
	data, _ := json.Marshal(fb.stats)
	return data
}

func (fb *fuzzBroker) writeStats() {
	fb.stats.ErrorLines, fb.stats.ErrorSamples = fb.logs.errorLines()
	if fb.statsPath == "" {
		return
	}
	tmp := fb.statsPath + ".tmp"
	if err := os.WriteFile(tmp, fb.statsJSON(), 0o644); err == nil {
		_ = os.Rename(tmp, fb.statsPath)
	}
}

// fuzzLog is the broker's log as the fuzz needs it: the "request" lines
// since the last take, a count of ERROR lines and the last few lines.
type fuzzLog struct {
	mu       sync.Mutex
	partial  []byte
	requests []fuzzRequestLine
	errors   []string // the first few ERROR lines
	nErrors  int
	tail     []string
}

// fuzzRequestLine is what a request log line says.
type fuzzRequestLine struct {
	Route      string `json:"route"`
	Status     int    `json:"status"`
	InstanceID string `json:"instance_id"`
	BindingID  string `json:"binding_id"`
}

func (l *fuzzLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.line(l.partial[:i])
		l.partial = l.partial[i+1:]
	}
	l.partial = slices.Clip(l.partial)
	return len(p), nil
}

func (l *fuzzLog) line(line []byte) {
	var head struct{ Level, Msg string }
	var req fuzzRequestLine
	if err := json.Unmarshal(line, &head); err != nil {
		head.Level = "ERROR"
		line = append([]byte("(not JSON) "), line...)
	} else if head.Msg == "request" && json.Unmarshal(line, &req) != nil {
		head.Level = "ERROR"
		line = append([]byte("(a request line the fuzz cannot read) "), line...)
	}
	if head.Level == "ERROR" {
		l.nErrors++
		if len(l.errors) < 5 {
			l.errors = append(l.errors, cut(string(line)))
		}
	}
	if head.Msg == "request" {
		l.requests = append(l.requests, req)
	}
	const keep = 12
	l.tail = append(l.tail, cut(string(line)))
	if len(l.tail) > keep {
		l.tail = slices.Delete(l.tail, 0, len(l.tail)-keep)
	}
}

// take returns the request lines since the last take.
func (l *fuzzLog) take() []fuzzRequestLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.requests
	l.requests = nil
	return out
}

func cut(s string) string {
	if len(s) > 600 {
		return s[:600] + "…"
	}
	return s
}

func (l *fuzzLog) errorLines() (int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nErrors, slices.Clone(l.errors)
}

func (l *fuzzLog) lastLines() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return "\n  " + strings.Join(l.tail, "\n  ")
}

// addFuzzCorpus adds every input file of dir (the format go test writes
// to testdata/fuzz and to its cache) as a seed.
func addFuzzCorpus(f *testing.F, dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		args, err := parseFuzzFile(data)
		if err != nil {
			f.Fatalf("%s: %v", e.Name(), err)
		}
		f.Add(args...)
	}
}

func parseFuzzFile(data []byte) ([]any, error) {
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if lines[0] != "go test fuzz v1" {
		return nil, errors.New("not a go test fuzz v1 file")
	}
	var args []any
	for _, line := range lines[1:] {
		typ, lit, ok := strings.Cut(line, "(")
		if !ok || !strings.HasSuffix(lit, ")") {
			return nil, fmt.Errorf("malformed line %q", line)
		}
		lit = strings.TrimSuffix(lit, ")")
		switch typ {
		case "string", "[]byte":
			s, err := strconv.Unquote(lit)
			if err != nil {
				return nil, fmt.Errorf("line %q: %w", line, err)
			}
			if typ == "string" {
				args = append(args, s)
			} else {
				args = append(args, []byte(s))
			}
		case "uint16":
			n, err := strconv.ParseUint(lit, 0, 16)
			if err != nil {
				return nil, fmt.Errorf("line %q: %w", line, err)
			}
			args = append(args, uint16(n))
		default:
			return nil, fmt.Errorf("line %q: unexpected type %s", line, typ)
		}
	}
	return args, nil
}

// fuzzSeed is one seed input.
type fuzzSeed struct {
	method, path, query, header, body string
	flags                             uint16
}

// fuzzSeeds are every route with every method, with a request that makes
// sense for it (the inputs in testdata/fuzz/FuzzHTTP add the odd ones).
func fuzzSeeds() []fuzzSeed {
	const (
		provision = `{"service_id":"{s}","plan_id":"{p}","organization_guid":"o","space_guid":"s","parameters":{"duration_seconds":1}}`
		update    = `{"service_id":"{s}","plan_id":"{a}","parameters":{"duration_seconds":1}}`
		bind      = `{"service_id":"{s}","plan_id":"{p}","bind_resource":{"app_guid":"app-1"}}`
		del       = "service_id={s}&plan_id={p}"
	)
	routes := []struct{ path, put, patch, query string }{
		{"/v2/catalog", "", "", ""},
		{"/v2/service_instances/{i0}", provision, update, del},
		{"/v2/service_instances/fuzz-new", provision, update, del},
		{"/v2/service_instances/{i1}/last_operation", "", "", ""},
		{"/v2/service_instances/{i2}/service_bindings/{b0}", bind, "", del},
		{"/v2/service_instances/{i2}/service_bindings/fuzz-new", bind, "", del},
		{"/v2/service_instances/{i3}/service_bindings/{b1}/last_operation", "", "", ""},
		{"/v2/nothing", "", "", ""},
		{"/", "", "", ""},
	}
	var seeds []fuzzSeed
	for _, r := range routes {
		for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPatch, http.MethodDelete,
			http.MethodPost, http.MethodHead, http.MethodOptions} {
			s := fuzzSeed{method: m, path: r.path}
			switch m {
			case http.MethodPut:
				s.body = r.put
			case http.MethodPatch:
				s.body = r.patch
			case http.MethodDelete:
				s.query = r.query
			}
			seeds = append(seeds, s)
		}
	}
	// The same with accepts_incomplete=true: async operations to wait for.
	seeds = append(seeds,
		fuzzSeed{method: http.MethodPut, path: "/v2/service_instances/fuzz-async", query: "accepts_incomplete=true",
			body: strings.ReplaceAll(provision, "{p}", "{a}")},
		fuzzSeed{method: http.MethodPatch, path: "/v2/service_instances/{i1}", query: "accepts_incomplete=true", body: update},
		fuzzSeed{method: http.MethodPut, path: "/v2/service_instances/{i1}/service_bindings/fuzz-async", query: "accepts_incomplete=true",
			body: strings.ReplaceAll(bind, "{p}", "{a}")},
		fuzzSeed{method: http.MethodDelete, path: "/v2/service_instances/{i3}", query: "accepts_incomplete=true&service_id={s}&plan_id={a}"},
	)
	// Ids of another plan than the instance's (the slots are on {p}), and
	// of no plan or service at all, on every route that names an instance
	// or a binding: none may reach a driver (fuzzDrivers).
	for _, ids := range []struct{ service, plan string }{{"{s}", "{a}"}, {"{s}", "{o}"}, {"fuzz-other-service", "{a}"}, {"{s}", "fuzz-other-plan"}} {
		query := "service_id=" + ids.service + "&plan_id=" + ids.plan
		body := `{"service_id":"` + ids.service + `","plan_id":"` + ids.plan + `","parameters":{"duration_seconds":1}}`
		seeds = append(seeds,
			fuzzSeed{method: http.MethodPut, path: "/v2/service_instances/{i0}/service_bindings/fuzz-ids", query: "accepts_incomplete=true", body: body},
			fuzzSeed{method: http.MethodPut, path: "/v2/service_instances/{i0}/service_bindings/fuzz-ids-sync", body: body},
			fuzzSeed{method: http.MethodPut, path: "/v2/service_instances/{i1}/service_bindings/fuzz-ids-rotated", query: "accepts_incomplete=true",
				body: `{"service_id":"` + ids.service + `","plan_id":"` + ids.plan + `","predecessor_binding_id":"{b0}"}`},
			fuzzSeed{method: http.MethodDelete, path: "/v2/service_instances/{i1}/service_bindings/{b1}", query: "accepts_incomplete=true&" + query},
			fuzzSeed{method: http.MethodDelete, path: "/v2/service_instances/{i2}", query: "accepts_incomplete=true&" + query},
			fuzzSeed{method: http.MethodPatch, path: "/v2/service_instances/{i3}", query: "accepts_incomplete=true", body: body},
			fuzzSeed{method: http.MethodGet, path: "/v2/service_instances/{i3}", query: query},
			fuzzSeed{method: http.MethodGet, path: "/v2/service_instances/{i3}/last_operation", query: query},
			fuzzSeed{method: http.MethodGet, path: "/v2/service_instances/{i2}/service_bindings/{b0}", query: query},
			fuzzSeed{method: http.MethodGet, path: "/v2/service_instances/{i2}/service_bindings/{b0}/last_operation", query: query},
		)
	}
	// The ids that wedged instances, as instance ids and as binding ids on
	// a healthy instance (testdata/fuzz/FuzzHTTP has them on every route).
	for _, id := range slices.Sorted(maps.Values(badIDs)) {
		seeds = append(seeds,
			fuzzSeed{method: http.MethodPut, path: instancePath(id), body: provision},
			fuzzSeed{method: http.MethodPut, path: bindingPath("{i0}", id), query: "accepts_incomplete=true", body: bind})
	}
	// Large inputs, too large to keep as files.
	pad := func(n int) string { return strings.Repeat("x", n) }
	seeds = append(seeds,
		// A body just under 256 KiB is stored; one over it is refused.
		fuzzSeed{method: http.MethodPut, path: "/v2/service_instances/fuzz-large", body: strings.Replace(provision, `"parameters"`,
			`"context":{"platform":"cloudfoundry","pad":"`+pad(250<<10)+`"},"parameters"`, 1)},
		fuzzSeed{method: http.MethodPut, path: "/v2/service_instances/fuzz-too-large", body: strings.Replace(provision, `"parameters"`,
			`"context":{"pad":"`+pad(300<<10)+`"},"parameters"`, 1)},
		fuzzSeed{method: http.MethodPatch, path: "/v2/service_instances/{i0}", body: `{"service_id":"{s}","parameters":{"x":"` + pad(200<<10) + `"}}`},
		// Nesting deeper than encoding/json decodes, and deep but decodable.
		fuzzSeed{method: http.MethodPut, path: "/v2/service_instances/fuzz-deep", body: `{"service_id":"{s}","plan_id":"{p}","organization_guid":"o","space_guid":"s","context":` +
			strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + "}"},
		fuzzSeed{method: http.MethodPatch, path: "/v2/service_instances/{i1}", body: `{"service_id":"{s}","parameters":` +
			strings.Repeat(`{"a":`, 500) + "1" + strings.Repeat("}", 500) + "}"},
		fuzzSeed{method: http.MethodPut, path: "/v2/service_instances/{i2}/service_bindings/fuzz-deep", body: `{"service_id":"{s}","plan_id":"{p}","bind_resource":` +
			strings.Repeat(`{"a":`, 500) + "1" + strings.Repeat("}", 500) + "}"},
		// Headers over net/http's limit (1 MB and some slack): 431 from net/http.
		fuzzSeed{method: http.MethodGet, path: "/v2/catalog", header: "X-Big: " + pad(2<<20)},
		// A request identity and a path far longer than the log keeps.
		fuzzSeed{method: http.MethodGet, path: "/v2/" + pad(64<<10), header: api.HeaderRequestIdentity + ": " + pad(64<<10)},
	)
	return seeds
}

// fuzzDrivers wraps every driver and records the first call whose change
// runs under another offering or plan than its instance's, or binds a
// binding that names others: the request's service_id and plan_id reached
// the driver.
type fuzzDrivers struct {
	mu    sync.Mutex
	first error
}

func (fd *fuzzDrivers) wrap(d broker.Driver) broker.Driver { return fuzzDriver{Driver: d, seen: fd} }

// violation is the first call that broke the rule, or nil.
func (fd *fuzzDrivers) violation() error {
	fd.mu.Lock()
	defer fd.mu.Unlock()
	return fd.first
}

func (fd *fuzzDrivers) see(call string, c broker.Change) {
	inst := c.Instance
	var problem string
	switch {
	case c.Service == nil || c.Plan == nil:
		problem = "no offering or plan"
	case c.Service.ID != inst.ServiceID || !slices.Contains(c.Service.Plans, c.Plan):
		problem = fmt.Sprintf("offering %s, plan %s", c.Service.ID, c.Plan.ID)
	case c.Operation.Kind != broker.KindUpdate && c.Plan.ID != inst.PlanID:
		problem = fmt.Sprintf("plan %s", c.Plan.ID)
	case c.Operation.PlanID != inst.PlanID:
		problem = fmt.Sprintf("an operation recorded under plan %s", c.Operation.PlanID)
	case c.Operation.Kind == broker.KindBind && c.Binding != nil &&
		(c.Binding.ServiceID != inst.ServiceID || c.Binding.PlanID != inst.PlanID):
		problem = fmt.Sprintf("a binding of offering %s, plan %s", c.Binding.ServiceID, c.Binding.PlanID)
	default:
		return
	}
	fd.mu.Lock()
	defer fd.mu.Unlock()
	if fd.first == nil {
		fd.first = fmt.Errorf("driver %s of the %s %s on instance %q (offering %s, plan %s) ran with %s",
			call, c.Operation.Kind, c.Operation.ID, inst.ID, inst.ServiceID, inst.PlanID, problem)
	}
}

type fuzzDriver struct {
	broker.Driver
	seen *fuzzDrivers
}

func (d fuzzDriver) Begin(ctx context.Context, c broker.Change) (broker.Progress, error) {
	d.seen.see("Begin", c)
	return d.Driver.Begin(ctx, c)
}

func (d fuzzDriver) Check(ctx context.Context, c broker.Change) (broker.Progress, error) {
	d.seen.see("Check", c)
	return d.Driver.Check(ctx, c)
}

func (d fuzzDriver) Leftovers(ctx context.Context, c broker.Change) ([]string, error) {
	d.seen.see("Leftovers", c)
	return d.Driver.Leftovers(ctx, c)
}

// InMemory is the wrapped driver's: settling in memory is a path of its
// own, which the rule holds on too.
func (d fuzzDriver) InMemory() bool {
	im, ok := d.Driver.(broker.InMemory)
	return ok && im.InMemory()
}
