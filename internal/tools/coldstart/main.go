// Command coldstart measures what a Lambda cold start of the broker costs,
// and prints each figure beside its target (issue 32): `make bench` runs it.
//
//   - Package init: the api and worker bootstraps built for this machine,
//     run once each with GODEBUG=inittrace=1 (the runtime prints every
//     package's init time and bytes): the sum, and the largest packages.
//   - Cold start: each bootstrap started as Lambda starts it, against a
//     stand-in Runtime API on 127.0.0.1 (which also answers the AWS calls
//     the function makes: the api's Secrets Manager call at start, the
//     worker's DynamoDB reads), from exec to the moment the answer to its
//     first event is posted: the api's to an API Gateway v2 GET /v2/catalog,
//     the worker's to a Task's begin step (of an operation the table does
//     not hold: one read, as a step's first, and nothing to do); several
//     runs, the median with the minimum and maximum, and the peak resident
//     memory at the answer (VmHWM), the median of the runs.
//   - The size of each bundle, dist/<function>.zip as `make build` makes it
//     (linux/arm64, the catalog given and its templates).
//
// The targets are the peer's figures from the issue (a broker on brokerapi
// v13 with the same catalog and validator, measured on this machine): the
// machine is shared, so read the ratios, not the absolute times. Run it from
// the repository's root:
//
//	go run ./internal/tools/coldstart [-catalog services/catalog.yaml] [-runs 15]
//	go run ./internal/tools/coldstart -bundle DIR [-runs 15]   (one bundle's cold starts only: DIR/api, or DIR/worker)
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/serverless-osb/broker/internal/deploy"
)

// The peer's figures (issue 32, 2026-11-28, this machine) and the targets
// drawn from them.
const (
	peerColdMs    = 12.9
	peerInitMs    = 4.15
	peerInitBytes = 2.1e6
	peerZipBytes  = 4.03e6
	// The api bundle may be at most the peer's plus 10%; the worker's target
	// is the same bound.
	zipTarget = peerZipBytes * 1.1
)

const (
	username = "coldstart"
	password = "coldstart-password"
)

func main() {
	catalog := flag.String("catalog", "services/catalog.yaml", "the catalog to bundle (the deployed broker's)")
	runs := flag.Int("runs", 15, "cold starts to time")
	bundle := flag.String("bundle", "", "only time the cold starts of this bundle (an api or a worker one, by its folder's name), built for this machine (to compare two builds turn about)")
	flag.Parse()
	if *bundle != "" {
		st, err := coldStarts(*bundle, filepath.Base(*bundle), *runs)
		if err != nil {
			fmt.Fprintln(os.Stderr, "coldstart:", err)
			os.Exit(1)
		}
		fmt.Printf("%s: median %.2f ms of %d (%.2f–%.2f), peak RSS %.1f MiB\n", *bundle, ms(st.median()), len(st.times), ms(st.times[0]), ms(st.times[len(st.times)-1]), st.rssMiB())
		return
	}
	if err := run(*catalog, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "coldstart:", err)
		os.Exit(1)
	}
}

func run(catalog string, runs int) error {
	dir, err := os.MkdirTemp("", "osb-coldstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	host, arm := filepath.Join(dir, "host"), filepath.Join(dir, "arm64")
	if err := build(catalog, host, runtime.GOARCH); err != nil {
		return err
	}
	if err := build(catalog, arm, "arm64"); err != nil {
		return err
	}
	fmt.Printf("cold start (%s/%s bootstraps, catalog %s; targets: the peer's figures from issue 32, this machine)\n",
		runtime.GOOS, runtime.GOARCH, catalog)
	fmt.Println("| figure | ours | target |")
	fmt.Println("| --- | ---: | ---: |")
	for _, fn := range []string{"api", "worker"} {
		it, err := initTrace(filepath.Join(host, fn))
		if err != nil {
			return fmt.Errorf("%s: %w", fn, err)
		}
		fmt.Printf("| %s package init | %.2f ms, %.2f MB (largest: %s) | %.2f ms, %.1f MB |\n",
			fn, it.ms, float64(it.bytes)/1e6, it.top(3), peerInitMs, peerInitBytes/1e6)
	}
	for _, fn := range []string{"api", "worker"} {
		st, err := coldStarts(filepath.Join(host, fn), fn, runs)
		if err != nil {
			return fmt.Errorf("%s: %w", fn, err)
		}
		fmt.Printf("| %s cold start, exec → %s (median of %d; min–max; peak RSS) | %.1f ms (%.1f–%.1f; %.1f MiB) | ≤ %.1f ms |\n",
			fn, firstAnswer[fn], len(st.times), ms(st.median()), ms(st.times[0]), ms(st.times[len(st.times)-1]), st.rssMiB(), peerColdMs)
	}
	for _, fn := range []string{"api", "worker"} {
		st, err := os.Stat(filepath.Join(arm, fn+".zip"))
		if err != nil {
			return err
		}
		fmt.Printf("| %s.zip (linux/arm64) | %.2f MB | ≤ %.2f MB |\n", fn, float64(st.Size())/1e6, zipTarget/1e6)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// build makes the bundles for arch in out, as `make build` does.
func build(catalog, out, arch string) error {
	cmd := exec.Command("go", "run", "./internal/tools/build", "-catalog", catalog, "-out", out, "-arch", arch)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build for %s: %w\n%s", arch, err, output.Bytes())
	}
	return nil
}

// inits is what GODEBUG=inittrace=1 printed: the total and each package's.
type inits struct {
	ms       float64
	bytes    int64
	packages []pkgInit
}

type pkgInit struct {
	name  string
	ms    float64
	bytes int64
}

func (it inits) top(n int) string {
	p := slices.Clone(it.packages)
	slices.SortFunc(p, func(a, b pkgInit) int { return int((b.ms - a.ms) * 1e6) })
	var s []string
	for _, x := range p[:min(n, len(p))] {
		s = append(s, fmt.Sprintf("%s %.2f ms", strings.TrimPrefix(x.name, "github.com/"), x.ms))
	}
	return strings.Join(s, ", ")
}

// initTrace runs a bundle's bootstrap once with GODEBUG=inittrace=1 and
// without its configuration: it initializes every package, then refuses to
// start (missing environment variables), which is all it needs to do here.
func initTrace(bundle string) (inits, error) {
	cmd := exec.Command(filepath.Join(bundle, "bootstrap"))
	cmd.Dir = bundle
	cmd.Env = []string{"GODEBUG=inittrace=1", "AWS_LAMBDA_FUNCTION_NAME=coldstart", "HOME=" + bundle}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	_ = cmd.Run() // it exits 1: no configuration
	var it inits
	for line := range strings.Lines(stderr.String()) {
		// init internal/bytealg @0.008 ms, 0 ms clock, 0 bytes, 0 allocs
		f := strings.Fields(line)
		if len(f) < 10 || f[0] != "init" || f[6] != "clock," {
			continue
		}
		t, err1 := strconv.ParseFloat(f[4], 64)
		b, err2 := strconv.ParseInt(f[7], 10, 64)
		if err1 != nil || err2 != nil {
			return inits{}, fmt.Errorf("inittrace line %q", line)
		}
		it.ms += t
		it.bytes += b
		it.packages = append(it.packages, pkgInit{name: f[1], ms: t, bytes: b})
	}
	if len(it.packages) == 0 {
		return inits{}, fmt.Errorf("no inittrace lines: %s", stderr.Bytes())
	}
	return it, nil
}

// firstAnswer names the answer each function's cold start is timed to.
var firstAnswer = map[string]string{"api": "first catalog answer", "worker": "first Task answer"}

// starts are the cold starts of one bundle: their times, sorted, and each
// one's peak resident memory at the answer.
type starts struct {
	times []time.Duration
	rss   []int64 // KiB
}

func (st starts) median() time.Duration { return st.times[len(st.times)/2] }

func (st starts) rssMiB() float64 {
	r := slices.Sorted(slices.Values(st.rss))
	return float64(r[len(r)/2]) / 1024
}

// coldStarts times runs cold starts of the bundle of function fn (api or
// worker).
func coldStarts(bundle, fn string, runs int) (starts, error) {
	if _, ok := firstAnswer[fn]; !ok {
		return starts{}, fmt.Errorf("%s: name an api or a worker bundle (its folder, as the build makes them)", bundle)
	}
	var st starts
	for i := range runs + 1 { // the first warms the page cache, uncounted
		d, rss, err := coldStart(bundle, fn)
		if err != nil {
			return starts{}, fmt.Errorf("cold start %d: %w", i+1, err)
		}
		if i > 0 {
			st.times, st.rss = append(st.times, d), append(st.rss, rss)
		}
	}
	slices.Sort(st.times)
	return st, nil
}

// coldStart starts the bootstrap against a stand-in of its own: the poll a
// killed process had sent for its next event could reach a stand-in shared
// with the next process after that one had started, and take its event
// (the next then waited for one until the 30 s timeout: a run of make
// bench failed so).
func coldStart(bundle, fn string) (time.Duration, int64, error) {
	stub, err := newStub(fn)
	if err != nil {
		return 0, 0, err
	}
	defer stub.close()
	env, err := functionEnv(bundle, fn, stub.addr)
	if err != nil {
		return 0, 0, err
	}
	return stub.coldStart(bundle, env)
}

// functionEnv is function fn's environment as the stack sets it, with
// every AWS endpoint the stand-in's.
func functionEnv(bundle, fn, addr string) ([]string, error) {
	env := []string{
		"AWS_LAMBDA_RUNTIME_API=" + addr,
		"AWS_LAMBDA_FUNCTION_NAME=coldstart-" + fn,
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256",
		"LAMBDA_TASK_ROOT=" + bundle,
		"HOME=" + bundle,
		"AWS_REGION=eu-west-1",
		"AWS_ACCESS_KEY_ID=AKIDCOLDSTART",
		"AWS_SECRET_ACCESS_KEY=coldstart",
		"AWS_CONFIG_FILE=" + filepath.Join(bundle, "no-aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(bundle, "no-aws-credentials"),
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_ENDPOINT_URL=http://" + addr,
		"BROKER_TABLE=coldstart",
		"BROKER_SECRET_ARN=arn:aws:secretsmanager:eu-west-1:123456789012:secret:coldstart-AbCdEf",
		"BROKER_OPERATION_STATE_MACHINE_ARN=arn:aws:states:eu-west-1:123456789012:stateMachine:coldstart",
		"BROKER_CLEANUP_STATE_MACHINE_ARN=arn:aws:states:eu-west-1:123456789012:stateMachine:coldstart-cleanup",
	}
	m, err := deploy.ReadManifest(bundle)
	if err != nil {
		return nil, err
	}
	values := map[string]string{
		deploy.Partition: "aws", deploy.Region: "eu-west-1", deploy.Account: "123456789012", deploy.StackPrefix: "coldstart",
		deploy.ServiceRoleARN: "arn:aws:iam::123456789012:role/coldstart-service", deploy.PermissionsBoundaryARN: "arn:aws:iam::123456789012:policy/coldstart-boundary",
		deploy.TemplateBucket: "coldstart-templates", deploy.TemplateBucketARN: "arn:aws:s3:::coldstart-templates",
	}
	for _, d := range m.Drivers {
		for _, v := range d.Needs.Env {
			if string(v.Function) == fn {
				env = append(env, v.Name+"="+deploy.Fill(v.Value, values))
			}
		}
	}
	return env, nil
}

// stub is the stand-in for the Lambda Runtime API, Secrets Manager and
// DynamoDB, on one listener, for one process: it hands out one event, the
// function's, and records when the answer comes.
type stub struct {
	addr     string
	server   *http.Server
	answered chan []byte
	pending  atomic.Bool
	worker   bool
}

// workerEvent is a Task's begin step, as Step Functions invokes the worker,
// of an operation the table does not hold.
var workerEvent = []byte(`{"step":"begin","operation_id":"coldstart-operation","instance_id":"coldstart-instance"}`)

// catalogEvent is API Gateway's (HTTP API, payload 2.0) GET /v2/catalog.
var catalogEvent = func() []byte {
	auth := "Basic " + basic(username, password)
	ev := map[string]any{
		"version": "2.0", "routeKey": "$default", "rawPath": "/v2/catalog", "rawQueryString": "",
		"headers": map[string]string{"authorization": auth, "x-broker-api-version": "2.17", "host": "broker.example.com"},
		"requestContext": map[string]any{
			"accountId": "123456789012", "apiId": "coldstart", "domainName": "broker.example.com", "requestId": "coldstart",
			"http":  map[string]string{"method": "GET", "path": "/v2/catalog", "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "coldstart"},
			"stage": "$default", "time": "28/Nov/2026:12:00:00 +0000", "timeEpoch": 1795867200000,
		},
		"isBase64Encoded": false,
	}
	b, _ := json.Marshal(ev)
	return b
}()

func basic(u, p string) string { return base64.StdEncoding.EncodeToString([]byte(u + ":" + p)) }

func newStub(fn string) (*stub, error) {
	event := catalogEvent
	if fn == "worker" {
		event = workerEvent
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &stub{addr: ln.Addr().String(), answered: make(chan []byte, 1), worker: fn == "worker"}
	s.pending.Store(true)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", func(w http.ResponseWriter, r *http.Request) {
		if !s.pending.Swap(false) {
			<-r.Context().Done() // one event per process: the next poll waits until it is killed
			return
		}
		w.Header().Set("Lambda-Runtime-Aws-Request-Id", "coldstart-1")
		w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10))
		w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:eu-west-1:123456789012:function:coldstart")
		_, _ = w.Write(event)
	})
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		select {
		case s.answered <- body:
		default:
		}
	})
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		select {
		case s.answered <- append([]byte("error: "), body...):
		default:
		}
	})
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		select {
		case s.answered <- append([]byte("init error: "), body...):
		default:
		}
	})
	// Secrets Manager's GetSecretValue (JSON 1.1 protocol), the one AWS call
	// the api function makes before its first answer, and DynamoDB's reads
	// (JSON 1.0), which find nothing.
	mux.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.HasPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.") {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			_, _ = io.WriteString(w, "{}")
			return
		}
		if r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" {
			http.Error(w, `{"__type":"UnknownOperationException"}`, http.StatusBadRequest)
			return
		}
		secret, _ := json.Marshal(map[string]string{"username": username, "password": password})
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_ = json.NewEncoder(w).Encode(map[string]any{"ARN": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:coldstart-AbCdEf",
			"Name": "coldstart", "SecretString": string(secret), "VersionId": "v1"})
	})
	s.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.server.Serve(ln) }()
	return s, nil
}

func (s *stub) close() { _ = s.server.Close() }

// coldStart starts the bootstrap and returns the time from exec to its
// answer being posted, and its peak resident memory then (KiB); it then
// kills the process (its next poll would wait for an event forever).
func (s *stub) coldStart(bundle string, env []string) (time.Duration, int64, error) {
	cmd := exec.Command(filepath.Join(bundle, "bootstrap"))
	cmd.Dir, cmd.Env = bundle, env
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	served := make(chan struct{})
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); close(served) }()
	defer func() {
		_ = cmd.Process.Kill()
		<-served
	}()
	select {
	case body := <-s.answered:
		d := time.Since(start)
		rss, err := peakRSS(cmd.Process.Pid)
		if err != nil {
			return 0, 0, err
		}
		return d, rss, s.check(body)
	case err := <-exited:
		return 0, 0, fmt.Errorf("the bootstrap exited (%v): %s", err, stderr.Bytes())
	case <-time.After(30 * time.Second):
		return 0, 0, errors.New("no answer in 30 s: " + stderr.String())
	}
}

// check says whether body is the answer the function gives its event: the
// catalog, 200; the worker's step, done (it has nothing to begin).
func (s *stub) check(body []byte) error {
	if s.worker {
		var res struct {
			Done bool `json:"done"`
		}
		if err := json.Unmarshal(body, &res); err != nil || !res.Done {
			return fmt.Errorf("the Task's step was not answered done: %.300s", body)
		}
		return nil
	}
	var res struct {
		StatusCode int `json:"statusCode"`
	}
	if err := json.Unmarshal(body, &res); err != nil || res.StatusCode != http.StatusOK {
		return fmt.Errorf("the catalog was not answered 200: %.300s", body)
	}
	return nil
}

// peakRSS is the process's peak resident memory so far, in KiB.
func peakRSS(pid int) (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, errors.New("no VmHWM in " + string(status))
}
