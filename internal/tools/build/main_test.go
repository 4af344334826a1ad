package main

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"gopkg.in/yaml.v3"

	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/drivers/cloudformation"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/store/dynamo"
	"github.com/serverless-osb/broker/internal/waittest"
)

// root is the repository's root, from this package's folder.
const root = "../../.."

func build(t *testing.T, target Target) string {
	t.Helper()
	out := t.TempDir()
	sizes, err := Build(Config{Root: root, Out: out, Catalog: filepath.Join(root, "catalog.yaml"), Target: target})
	if err != nil {
		t.Fatal(err)
	}
	if len(sizes) != len(Functions) {
		t.Fatalf("sizes = %v, want one per function", sizes)
	}
	return out
}

func TestTheLambdaBundles(t *testing.T) {
	out := build(t, Lambda)
	catalog, err := os.ReadFile(filepath.Join(root, "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range Functions {
		t.Run(fn+"'s bootstrap is built for Lambda with the release flags", func(t *testing.T) {
			path := filepath.Join(out, fn, "bootstrap")
			info, err := buildinfo.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// -ldflags is not recorded under -trimpath: its effect is
			// checked in the ELF file instead.
			want := map[string]string{"GOOS": "linux", "GOARCH": "arm64", "CGO_ENABLED": "0",
				// The demo catalog names neither the cloudformation nor the
				// function driver: the bootstraps leave both out, S3 (no
				// template over the body limit), and STS and Secrets
				// Manager (no role to assume).
				"-tags": "lambda.norpc,osb_without_cloudformation,osb_without_function,osb_without_s3,osb_without_roles", "-trimpath": "true"}
			if fn == "api" || fn == "worker" {
				// They read every file pre-parsed, and the worker runs no
				// stack's change set: no yaml.v3.
				want["-tags"] += ",osb_without_yaml"
			}
			got := map[string]string{}
			for _, s := range info.Settings {
				got[s.Key] = s.Value
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			if info.Path != "github.com/serverless-osb/broker/functions/"+fn {
				t.Errorf("built from %s", info.Path)
			}
			f, err := elf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Machine != elf.EM_AARCH64 {
				t.Errorf("machine %v, want %v", f.Machine, elf.EM_AARCH64)
			}
			for _, name := range []string{".symtab", ".debug_info", ".zdebug_info"} {
				if f.Section(name) != nil {
					t.Errorf("section %s is there: the binary is not built with -ldflags='-s -w'", name)
				}
			}
		})
		t.Run(fn+".zip holds an executable bootstrap, the catalog and its manifest, under 10 MB", func(t *testing.T) {
			path := filepath.Join(out, fn+".zip")
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Size() >= MaxZipBytes {
				t.Errorf("%s is %d bytes", path, st.Size())
			}
			bootstrap, err := os.ReadFile(filepath.Join(out, fn, "bootstrap"))
			if err != nil {
				t.Fatal(err)
			}
			manifest, err := os.ReadFile(filepath.Join(out, fn, "deploy.json"))
			if err != nil {
				t.Fatal(err)
			}
			preparsed, err := os.ReadFile(filepath.Join(out, fn, "catalog.yaml.json"))
			if err != nil {
				t.Fatal(err)
			}
			var made struct {
				Source string `json:"source_sha256"`
			}
			if err := json.Unmarshal(preparsed, &made); err != nil || made.Source != fmt.Sprintf("%x", sha256.Sum256(catalog)) {
				t.Errorf("catalog.yaml.json records %q (%v), not the digest of the catalog it was built from", made.Source, err)
			}
			// The catalog pre-parsed, and not its YAML, which no function
			// reads (10.6 KB of each zip with the deployed catalog).
			checkZip(t, path, map[string]zipEntry{
				"bootstrap":         {mode: 0o755, data: bootstrap},
				"catalog.yaml.json": {mode: 0o644, data: preparsed},
				"deploy.json":       {mode: 0o644, data: manifest},
			})
		})
	}
}

type zipEntry struct {
	mode fs.FileMode
	data []byte
}

// folderFiles reads every file under dir, by its slash-separated path
// relative to dir, with its mode.
func folderFiles(t *testing.T, dir string) map[string]zipEntry {
	t.Helper()
	files := map[string]zipEntry{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = zipEntry{mode: info.Mode().Perm(), data: data}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func checkZip(t *testing.T, path string, want map[string]zipEntry) {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
		w, ok := want[f.Name]
		if !ok {
			continue
		}
		if f.Mode() != w.mode {
			t.Errorf("%s: %s has mode %v, want %v", path, f.Name, f.Mode(), w.mode)
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, w.data) {
			t.Errorf("%s: %s differs from what was bundled", path, f.Name)
		}
	}
	if len(names) != len(want) {
		t.Errorf("%s holds %v, want exactly %d files", path, names, len(want))
	}
}

func TestWriteZip(t *testing.T) {
	dir := t.TempDir()
	files := map[string]zipEntry{
		"bootstrap":    {mode: 0o755, data: []byte("\x7fELF not really")},
		"catalog.yaml": {mode: 0o644, data: []byte("services: []\n")},
	}
	for name, f := range files {
		// The files' own modes must not matter: Lambda needs 0755.
		if err := os.WriteFile(filepath.Join(dir, name), f.data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	first, second := filepath.Join(t.TempDir(), "a.zip"), filepath.Join(t.TempDir(), "b.zip")
	n, err := WriteZip(first, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("the size returned is the file's", func(t *testing.T) {
		if st, err := os.Stat(first); err != nil || st.Size() != n {
			t.Errorf("WriteZip returned %d, the file has %v (%v)", n, st.Size(), err)
		}
	})
	t.Run("the bootstrap is executable and the catalog is not", func(t *testing.T) {
		checkZip(t, first, files)
	})
	t.Run("the same files make the same zip, whatever their times", func(t *testing.T) {
		later := time.Now().Add(time.Hour)
		for name := range files {
			if err := os.Chtimes(filepath.Join(dir, name), later, later); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := WriteZip(second, dir); err != nil {
			t.Fatal(err)
		}
		a, _ := os.ReadFile(first)
		b, _ := os.ReadFile(second)
		if !bytes.Equal(a, b) {
			t.Error("two zips of the same files differ")
		}
	})
	t.Run("files in subfolders are zipped by their slash-separated path, not executable", func(t *testing.T) {
		nested := map[string]zipEntry{
			"s3-bucket/instance.yaml":    {mode: 0o644, data: []byte("Resources: {}\n")},
			"a/b/bootstrap":              {mode: 0o644, data: []byte("not the bundle's bootstrap")},
			"sqs-queue/nested/more.yaml": {mode: 0o644, data: []byte("more\n")},
		}
		for name, f := range nested {
			path := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, f.data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		path := filepath.Join(t.TempDir(), "c.zip")
		if _, err := WriteZip(path, dir); err != nil {
			t.Fatal(err)
		}
		want := maps.Clone(files)
		maps.Copy(want, nested)
		checkZip(t, path, want)
		zr, err := zip.OpenReader(path)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		var names []string
		for _, f := range zr.File {
			names = append(names, f.Name)
			if !f.Modified.Equal(zipTime) {
				t.Errorf("%s is dated %v, want %v", f.Name, f.Modified, zipTime)
			}
		}
		if !slices.IsSorted(names) {
			t.Errorf("entries %v are not in name order", names)
		}
	})
	t.Run("a symbolic link is refused", func(t *testing.T) {
		link := t.TempDir()
		if err := os.WriteFile(filepath.Join(link, "bootstrap"), []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("bootstrap", filepath.Join(link, "catalog.yaml")); err != nil {
			t.Fatal(err)
		}
		if _, err := WriteZip(filepath.Join(t.TempDir(), "d.zip"), link); err == nil {
			t.Error("WriteZip accepted a symbolic link")
		}
	})
}

// runtimeAPI is a stand-in for the Lambda Runtime API
// (/2018-06-01/runtime/invocation/...), which a bootstrap polls for events
// and posts results to.
type runtimeAPI struct {
	server  *httptest.Server
	next    chan invocation
	mu      sync.Mutex
	results map[string]chan runtimeResult
	count   int
}

type invocation struct {
	id      string
	payload []byte
}

// runtimeResult is what the bootstrap posted for one invocation: its
// response, or its error document.
type runtimeResult struct {
	failed bool
	body   []byte
}

func newRuntimeAPI(t *testing.T) *runtimeAPI {
	r := &runtimeAPI{next: make(chan invocation), results: map[string]chan runtimeResult{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", func(w http.ResponseWriter, req *http.Request) {
		select {
		case inv := <-r.next:
			w.Header().Set("Lambda-Runtime-Aws-Request-Id", inv.id)
			w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(waittest.Deadline(t).UnixMilli(), 10))
			w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:eu-west-1:123456789012:function:test")
			w.Header().Set("Lambda-Runtime-Trace-Id", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
			_, _ = w.Write(inv.payload)
		case <-req.Context().Done():
		}
	})
	post := func(failed bool) http.HandlerFunc {
		return func(w http.ResponseWriter, req *http.Request) {
			body, _ := io.ReadAll(req.Body)
			r.mu.Lock()
			c := r.results[req.PathValue("id")]
			r.mu.Unlock()
			if c == nil {
				http.Error(w, "no such invocation", http.StatusBadRequest)
				return
			}
			c <- runtimeResult{failed: failed, body: body}
			w.WriteHeader(http.StatusAccepted)
		}
	}
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", post(false))
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", post(true))
	r.server = httptest.NewServer(mux)
	t.Cleanup(r.server.Close)
	return r
}

// address is what AWS_LAMBDA_RUNTIME_API holds: host:port.
func (r *runtimeAPI) address() string { return strings.TrimPrefix(r.server.URL, "http://") }

// bootstrap is a bundle's bootstrap, running under the stand-in runtime.
type bootstrap struct {
	api    *runtimeAPI
	stderr *bytes.Buffer
	exited chan error
}

// start runs a bundle's bootstrap as Lambda does: in its folder, with env
// plus the runtime's variables. It is killed when the test ends.
func start(t *testing.T, dir string, env map[string]string) *bootstrap {
	t.Helper()
	b := &bootstrap{api: newRuntimeAPI(t), stderr: &bytes.Buffer{}, exited: make(chan error, 1)}
	cmd := exec.Command(filepath.Join(dir, "bootstrap"))
	cmd.Dir = dir
	cmd.Env = []string{
		"AWS_LAMBDA_RUNTIME_API=" + b.api.address(),
		"AWS_LAMBDA_FUNCTION_NAME=test",
		"LAMBDA_TASK_ROOT=" + dir,
		"HOME=" + t.TempDir(),
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "no-aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "no-aws-credentials"),
		"AWS_EC2_METADATA_DISABLED=true",
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = io.Discard, b.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-b.exited
	})
	return b
}

// invoke sends one event and returns what the bootstrap posted back.
func (b *bootstrap) invoke(t *testing.T, payload []byte) runtimeResult {
	t.Helper()
	r := b.api
	r.mu.Lock()
	r.count++
	id := fmt.Sprintf("req-%d", r.count)
	c := make(chan runtimeResult, 1)
	r.results[id] = c
	r.mu.Unlock()
	deadline := time.NewTimer(time.Until(waittest.Deadline(t)))
	defer deadline.Stop()
	select {
	case r.next <- invocation{id: id, payload: payload}:
	case err := <-b.exited:
		t.Fatalf("the bootstrap exited (%v): %s", err, b.stderr)
	case <-deadline.C:
		t.Fatal("the bootstrap did not ask for the next event")
	}
	select {
	case res := <-c:
		return res
	case err := <-b.exited:
		t.Fatalf("the bootstrap exited (%v): %s", err, b.stderr)
	case <-deadline.C:
		t.Fatal("the bootstrap did not answer")
	}
	return runtimeResult{}
}

// lambdaError is the error document a Go function posts.
type lambdaError struct {
	ErrorMessage string `json:"errorMessage"`
	ErrorType    string `json:"errorType"`
}

// closedPort is an address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

var hostBundles = sync.OnceValues(func() (string, error) {
	out, err := os.MkdirTemp("", "bundles")
	if err != nil {
		return "", err
	}
	_, err = Build(Config{Root: root, Out: out, Catalog: filepath.Join(root, "catalog.yaml"),
		Target: Target{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}, NoZip: true})
	return out, err
})

// hostBuild builds the bundles for this machine, so that they run here.
func hostBuild(t *testing.T) string {
	t.Helper()
	out, err := hostBundles()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMain(m *testing.M) {
	code := m.Run()
	if out, err := hostBundles(); err == nil && out != "" {
		os.RemoveAll(out)
	}
	os.Exit(code)
}

func TestTheWorkerBootstrapNamesItsErrorsForStepFunctions(t *testing.T) {
	dir := filepath.Join(hostBuild(t), "worker")
	b := start(t, dir, map[string]string{
		"AWS_REGION":               "eu-west-1",
		"BROKER_TABLE":             "broker",
		"BROKER_DYNAMODB_ENDPOINT": "http://" + closedPort(t),
		"AWS_ACCESS_KEY_ID":        "testing",
		"AWS_SECRET_ACCESS_KEY":    "testing",
		"AWS_MAX_ATTEMPTS":         "1",
	})
	sample, err := os.ReadFile(filepath.Join(root, "events", "worker-begin.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, payload, errorType, message string
	}{
		{"a step the workflow does not have is a PermanentError", `{"step":"launch","operation_id":"o","instance_id":"i"}`,
			"PermanentError", `unknown step "launch"`},
		{"an unreachable table is a TransientError", string(sample), "TransientError", "load operation"},
		{"a payload that is not a task is a PermanentError", `[1,2]`, "PermanentError", "malformed task payload"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := b.invoke(t, []byte(c.payload))
			if !res.failed {
				t.Fatalf("the worker succeeded: %s", res.body)
			}
			var e lambdaError
			if err := json.Unmarshal(res.body, &e); err != nil {
				t.Fatalf("error document %s: %v", res.body, err)
			}
			if e.ErrorType != c.errorType || !strings.Contains(e.ErrorMessage, c.message) {
				t.Errorf("error document %s, want errorType %s and a message containing %q", res.body, c.errorType, c.message)
			}
		})
	}
}

func TestTheBootstrapsRefuseToStartWithoutTheirConfiguration(t *testing.T) {
	cases := []struct {
		fn      string
		missing []string
	}{
		{"api", []string{"BROKER_TABLE", "AWS_REGION", "BROKER_SECRET_ARN", "BROKER_OPERATION_STATE_MACHINE_ARN"}},
		{"worker", []string{"BROKER_TABLE", "AWS_REGION"}},
	}
	for _, c := range cases {
		t.Run("the "+c.fn+" bootstrap names every missing variable", func(t *testing.T) {
			b := start(t, filepath.Join(hostBuild(t), c.fn), nil)
			err := waittest.Recv(t, b.exited, "the bootstrap's exit")
			b.exited <- err // for the cleanup
			if err == nil {
				t.Fatal("the bootstrap exited with status 0")
			}
			want := "missing environment variables: " + strings.Join(c.missing, ", ")
			if !strings.Contains(b.stderr.String(), want) {
				t.Errorf("stderr = %q, want it to say %q", b.stderr, want)
			}
		})
	}
}

func TestTheAPIBootstrapServesSampleEventsOnDynamoDB(t *testing.T) {
	ctx := context.Background()
	cfg := mototest.Config(t, "eu-west-1")
	table := mototest.Name("bundle")
	if err := dynamo.CreateTable(ctx, dynamodb.NewFromConfig(cfg), table); err != nil {
		t.Fatal(err)
	}
	password := "bundle-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	secret, err := secretsmanager.NewFromConfig(cfg).CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name:         aws.String(mototest.Name("bundle-credentials")),
		SecretString: aws.String(`{"username":"broker","password":"` + password + `"}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	b := start(t, filepath.Join(hostBuild(t), "api"), map[string]string{
		"AWS_REGION":                         "eu-west-1",
		"AWS_ENDPOINT_URL":                   mototest.Endpoint(t),
		"AWS_ACCESS_KEY_ID":                  "testing",
		"AWS_SECRET_ACCESS_KEY":              "testing",
		"BROKER_TABLE":                       table,
		"BROKER_SECRET_ARN":                  aws.ToString(secret.ARN),
		"BROKER_OPERATION_STATE_MACHINE_ARN": "arn:aws:states:eu-west-1:123456789012:stateMachine:operation",
	})
	cases := []struct {
		name, file string
		password   string
		status     int
	}{
		{"the sample password is not the deployed one", "catalog.json", "", http.StatusUnauthorized},
		{"the catalog is served with the secret's credentials", "catalog.json", password, http.StatusOK},
		{"a synchronous provision is stored in DynamoDB", "provision-sync.json", password, http.StatusCreated},
		{"the provisioned instance is read back from DynamoDB", "fetch-instance.json", password, http.StatusOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			payload := sampleEvent(t, c.file, c.password)
			res := b.invoke(t, payload)
			if res.failed {
				t.Fatalf("the api function failed: %s", res.body)
			}
			var resp events.APIGatewayV2HTTPResponse
			if err := json.Unmarshal(res.body, &resp); err != nil {
				t.Fatalf("%s: %v", res.body, err)
			}
			if resp.StatusCode != c.status {
				t.Errorf("status = %d, want %d: %s", resp.StatusCode, c.status, resp.Body)
			}
		})
	}
}

// sampleEvent reads an events/ file, with the broker's password in its
// authorization header when one is given.
func sampleEvent(t *testing.T, file, password string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "events", file))
	if err != nil {
		t.Fatal(err)
	}
	if password == "" {
		return data
	}
	var e events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatal(err)
	}
	req := http.Request{Header: http.Header{}}
	req.SetBasicAuth("broker", password)
	e.Headers["authorization"] = req.Header.Get("Authorization")
	data, err = json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestBundlePath(t *testing.T) {
	tests := []struct {
		name, file, want, wantErr string
	}{
		{"a template in a subfolder keeps its path", "s3-bucket/instance.yaml", filepath.FromSlash("s3-bucket/instance.yaml"), ""},
		{"a path that comes back into the folder is cleaned", "s3-bucket/../sqs-queue/./binding.yaml", filepath.FromSlash("sqs-queue/binding.yaml"), ""},
		{"a path that leaves the catalog's folder is refused", "../other/instance.yaml", "", "under its folder"},
		{"a path that leaves it half-way is refused", "s3-bucket/../../x.yaml", "", "under its folder"},
		{"an absolute path is refused", "/etc/passwd", "", "under its folder"},
		{"an empty path is refused", "", "", "under its folder"},
		{"a file named catalog.yaml is refused: it would replace the catalog", "catalog.yaml", "", "collide with the bundle's own catalog.yaml"},
		{"a file under a folder named bootstrap is refused", "bootstrap/instance.yaml", "", "collide with the bundle's own bootstrap"},
		{"a file named deploy.json is refused: it would replace the manifest", "deploy.json", "", "collide with the bundle's own deploy.json"},
		{"a file named catalog.yaml.json is refused: it would replace the pre-parsed catalog", "catalog.yaml.json", "", "collide with the bundle's own catalog.yaml.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BundlePath(tt.file)
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("BundlePath(%q) = %q, %v; want an error saying %q", tt.file, got, err, tt.wantErr)
				}
			case err != nil || got != tt.want:
				t.Errorf("BundlePath(%q) = %q, %v; want %q", tt.file, got, err, tt.want)
			}
		})
	}
}

// TestBuildBundlesTheCatalogsFiles builds with a stand-in for the
// catalog's manifest (the files its driver settings read, and what its
// drivers need of the stack), which each bundle carries as deploy.json.
func TestBuildBundlesTheCatalogsFiles(t *testing.T) {
	catalogDir := t.TempDir()
	files := map[string][]byte{
		"catalog.yaml":                   []byte("services: [] # the catalog\n"),
		"s3-bucket/instance.yaml":        []byte("# the bucket\n"),
		"s3-bucket/binding.yaml":         []byte("# the bucket's user\n"),
		"teams/data/queue/instance.yaml": []byte("# a queue, deeper\n"),
		"unlisted.yaml":                  []byte("# not named by the catalog\n"),
	}
	for name, data := range files {
		path := filepath.Join(catalogDir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	listed := []string{"s3-bucket/instance.yaml", "s3-bucket/binding.yaml", "teams/data/queue/instance.yaml"}
	drivers := []deploy.Driver{{Name: "queue", Needs: deploy.Needs{Statements: []deploy.Statement{{Function: deploy.Worker,
		Sid: "SendToQueues", Actions: []string{"sqs:SendMessage"}, Resources: []string{deploy.ARN("sqs", "queues-*")},
		WildcardReason: "the queues are made at run time, each named queues-…"}}}}}
	config := func(list []string) Config {
		return Config{Root: root, Out: t.TempDir(), Catalog: filepath.Join(catalogDir, "catalog.yaml"), Target: Lambda,
			Manifest: func(string) (deploy.Manifest, error) { return deploy.Manifest{Files: list, Drivers: drivers}, nil }}
	}

	c := config(listed)
	if _, err := Build(c); err != nil {
		t.Fatal(err)
	}
	for _, fn := range Functions {
		t.Run(fn+"'s folder holds the catalog's manifest as deploy.json", func(t *testing.T) {
			m, err := deploy.ReadManifest(filepath.Join(c.Out, fn))
			if err != nil {
				t.Fatal(err)
			}
			if want := (deploy.Manifest{Files: listed, Drivers: drivers}); !reflect.DeepEqual(m, want) {
				t.Errorf("deploy.json is %+v, want %+v", m, want)
			}
		})
		t.Run(fn+"'s folder and zip hold each listed file at its path relative to the catalog, and nothing else", func(t *testing.T) {
			bootstrap, err := os.ReadFile(filepath.Join(c.Out, fn, "bootstrap"))
			if err != nil {
				t.Fatal(err)
			}
			preparsed, err := os.ReadFile(filepath.Join(c.Out, fn, "catalog.yaml.json"))
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]zipEntry{
				"bootstrap":         {mode: 0o755, data: bootstrap},
				"catalog.yaml.json": {mode: 0o644, data: preparsed},
			}
			manifest, err := os.ReadFile(filepath.Join(c.Out, fn, "deploy.json"))
			if err != nil {
				t.Fatal(err)
			}
			want["deploy.json"] = zipEntry{mode: 0o644, data: manifest}
			for _, name := range listed {
				want[name] = zipEntry{mode: 0o644, data: files[name]}
				got, err := os.ReadFile(filepath.Join(c.Out, fn, filepath.FromSlash(name)))
				if err != nil || !bytes.Equal(got, files[name]) {
					t.Errorf("%s/%s: %q, %v; want the catalog's file", fn, name, got, err)
				}
			}
			checkZip(t, filepath.Join(c.Out, fn+".zip"), want)
		})
	}

	t.Run("with NoZip the same folders are written, and no zip", func(t *testing.T) {
		folders := config(listed)
		folders.NoZip = true
		sizes, err := Build(folders)
		if err != nil || len(sizes) != 0 {
			t.Fatalf("sizes %v, %v; want none, and no error", sizes, err)
		}
		for _, fn := range Functions {
			if _, err := os.Stat(filepath.Join(folders.Out, fn+".zip")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s.zip: %v, want none", fn, err)
			}
			if got, want := folderFiles(t, filepath.Join(folders.Out, fn)), folderFiles(t, filepath.Join(c.Out, fn)); !reflect.DeepEqual(got, want) {
				t.Errorf("%s's folder holds %d files, want the %d of the zipped build's, the same", fn, len(got), len(want))
			}
		}
	})

	t.Run("a file over CloudFormation's body limit keeps S3 in the bootstraps, through which it goes", func(t *testing.T) {
		big := "s3-bucket/big.yaml"
		path := filepath.Join(catalogDir, filepath.FromSlash(big))
		if err := os.WriteFile(path, bytes.Repeat([]byte("# large\n"), cloudformation.MaxTemplateBody/8+1), 0o600); err != nil {
			t.Fatal(err)
		}
		c := config(append(slices.Clone(listed), big))
		c.NoZip = true
		if _, err := Build(c); err != nil {
			t.Fatal(err)
		}
		info, err := buildinfo.ReadFile(filepath.Join(c.Out, "worker", "bootstrap"))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range info.Settings {
			if s.Key == "-tags" && slices.Contains(strings.Split(s.Value, ","), WithoutS3Tag) {
				t.Errorf("tags %s: the worker is built without S3", s.Value)
			}
		}
	})

	refused := []struct {
		name    string
		list    []string
		wantErr string
	}{
		{"a file outside the catalog's folder fails the build", []string{"s3-bucket/instance.yaml", "../secrets.yaml"}, `"../secrets.yaml"`},
		{"an absolute path fails the build", []string{"/etc/hostname"}, `"/etc/hostname"`},
		{"a listed file that is missing fails the build", []string{"s3-bucket/missing.yaml"}, "missing.yaml"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			c := config(tt.list)
			_, err := Build(c)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one naming %s", err, tt.wantErr)
			}
			if entries, _ := os.ReadDir(c.Out); len(entries) != 0 {
				t.Errorf("the build wrote %d entries before refusing", len(entries))
			}
		})
	}
}

// deployedCatalog is the catalog the deployed broker serves by default (the
// Makefile's CATALOG), relative to the repository's root.
const deployedCatalog = "services/catalog.yaml"

// TestTheDeployedCatalogBundlesItsTemplates builds the deployed catalog the
// way make build does, with the real list of files (drivers.Files), and
// looks for every template its plans name in the bundles.
func TestTheDeployedCatalogBundlesItsTemplates(t *testing.T) {
	path := filepath.Join(root, filepath.FromSlash(deployedCatalog))
	text, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s does not exist yet: this test builds it once it does", deployedCatalog)
	}
	if err != nil {
		t.Fatal(err)
	}
	templates := namedTemplates(t, text)
	if len(templates) == 0 {
		t.Fatalf("%s names no template (broker.template or broker.binding_template in any plan)", deployedCatalog)
	}
	out := t.TempDir()
	// The folders alone: TestBuildBundlesTheCatalogsFiles pins that each
	// zip holds its folder's files, at the same paths, and nothing else.
	if _, err := Build(Config{Root: root, Out: out, Catalog: path, Target: Lambda, NoZip: true}); err != nil {
		t.Fatalf("make build of %s fails: %v", deployedCatalog, err)
	}
	for _, fn := range Functions {
		t.Run(fn+"'s bootstrap has the cloudformation driver, and not the function driver unless the catalog names it", func(t *testing.T) {
			info, err := buildinfo.ReadFile(filepath.Join(out, fn, "bootstrap"))
			if err != nil {
				t.Fatal(err)
			}
			var tags []string
			for _, s := range info.Settings {
				if s.Key == "-tags" {
					tags = strings.Split(s.Value, ",")
				}
			}
			if slices.Contains(tags, "osb_without_cloudformation") {
				t.Errorf("tags %v leave out the cloudformation driver, which %s names", tags, deployedCatalog)
			}
			if names := bytes.Contains(text, []byte("driver: function")); names == slices.Contains(tags, "osb_without_function") {
				t.Errorf("tags %v; %s names the function driver: %v", tags, deployedCatalog, names)
			}
			// Every template has its pre-parsed form: the api reads no
			// YAML; the worker reads the templates stacks run with the
			// subset reader, which reads every one of them as yaml.v3
			// does.
			if without := slices.Contains(tags, WithoutYAMLTag); without != (fn == "api" || fn == "worker") {
				t.Errorf("tags %v: %s only the api and the worker are built without yaml.v3", tags, fn)
			}
			// Every template is within CloudFormation's body limit: none
			// goes through S3.
			if !slices.Contains(tags, WithoutS3Tag) {
				t.Errorf("tags %v: the bootstraps link S3, which none of %s's templates needs", tags, deployedCatalog)
			}
			// No plan is placed through a role: none assumes one.
			if !slices.Contains(tags, WithoutRolesTag) {
				t.Errorf("tags %v: the bootstraps link STS and Secrets Manager, which no placement of %s needs", tags, deployedCatalog)
			}
		})
		t.Run(fn+"'s folder holds every template the catalog names, at its path relative to the catalog", func(t *testing.T) {
			for _, name := range templates {
				want, err := os.ReadFile(filepath.Join(filepath.Dir(path), filepath.FromSlash(name)))
				if err != nil {
					t.Fatal(err)
				}
				file := filepath.Join(out, fn, filepath.FromSlash(name))
				info, err := os.Stat(file)
				if errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s's bundle lacks %s, which %s names: the bundle carries what drivers.Files lists (is the cloudformation driver registered, and does its Kind set Files?)", fn, name, deployedCatalog)
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) || info.Mode() != 0o644 {
					t.Errorf("%s's bundle: %s differs from services/%s (mode %v)", fn, name, name, info.Mode())
				}
			}
		})
	}
}

// namedTemplates are the values of every template and binding_template key
// of the plans' broker blocks in a catalog's YAML, read without the catalog
// package, so that the test does not take the list from the code it checks.
func namedTemplates(t *testing.T, text []byte) []string {
	t.Helper()
	var doc struct {
		Services []struct {
			Plans []struct {
				Broker map[string]any `yaml:"broker"`
			} `yaml:"plans"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(text, &doc); err != nil {
		t.Fatalf("%s: %v", deployedCatalog, err)
	}
	seen := map[string]bool{}
	for _, s := range doc.Services {
		for _, p := range s.Plans {
			for _, key := range []string{"template", "binding_template"} {
				if v, ok := p.Broker[key].(string); ok && v != "" {
					seen[path.Clean(v)] = true
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

func TestRoleReport(t *testing.T) {
	t.Run("the deployed catalog's templates need nothing the service role lacks", func(t *testing.T) {
		var out bytes.Buffer
		if err := RoleReport(&out, filepath.Join(root, "services", "catalog.yaml")); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "it grants every action") {
			t.Errorf("report %q", out.String())
		}
	})
	t.Run("a user's template is reported for the actions it needs and the types with no registry data", func(t *testing.T) {
		dir := t.TempDir()
		catalog := `services:
  - id: 7a0e6f9e-2a44-4a8e-9a5e-0f8f0e6b1c01
    name: my-bucket
    description: A replicated bucket and a topic.
    bindable: false
    plans:
      - id: 7a0e6f9e-2a44-4a8e-9a5e-0f8f0e6b1c02
        name: small
        description: Small.
        broker: {driver: cloudformation, mode: async-only, template: mine/instance.yaml}
`
		template := `Resources:
  Bucket:
    Type: AWS::S3::Bucket
    Properties:
      ReplicationConfiguration: {Role: arn:aws:iam::123456789012:role/r, Rules: []}
  Broker:
    Type: AWS::MQ::Broker
`
		for name, text := range map[string]string{"catalog.yaml": catalog, "mine/instance.yaml": template} {
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var out bytes.Buffer
		if err := RoleReport(&out, filepath.Join(dir, "catalog.yaml")); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"missing AWS::S3::Bucket, create handler: s3:PutBucketReplication (for Bucket (AWS::S3::Bucket, in mine/instance.yaml))",
			"missing AWS::S3::Bucket, create handler: iam:PassRole",
			"missing iam:PassRole: Bucket (AWS::S3::Bucket, in mine/instance.yaml) sets ReplicationConfiguration",
			"no registry data for type AWS::MQ::Broker (Broker (AWS::MQ::Broker, in mine/instance.yaml)); check its schema",
			"aws-mq-broker.json",
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("report\n%s\nsays not %q", out.String(), want)
			}
		}
	})
}

// linkedNames keeps linked's answers, by function and tags: several
// tests read the same builds, each a link and a read of some 50,000
// symbols. The maps are only read.
var linkedNames struct {
	sync.Mutex
	of map[[2]string]map[string]bool
}

// linked builds ./functions/<fn> for Lambda as make build does (with
// tags), but keeping its symbol table, and returns the names it links.
func linked(t *testing.T, fn string, tags string) map[string]bool {
	t.Helper()
	key := [2]string{fn, tags}
	linkedNames.Lock()
	defer linkedNames.Unlock()
	if names, ok := linkedNames.of[key]; ok {
		return names
	}
	bin := filepath.Join(t.TempDir(), "bootstrap")
	cmd := exec.Command("go", "build", "-tags", tags, "-trimpath", "-ldflags=-w", "-o", bin, "./functions/"+fn)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS="+Lambda.GOOS, "GOARCH="+Lambda.GOARCH, "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", fn, err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range syms {
		names[s.Name] = true
	}
	if linkedNames.of == nil {
		linkedNames.of = map[[2]string]map[string]bool{}
	}
	linkedNames.of[key] = names
	return names
}

// TestTheAPIBootstrapLinksNoStackChanges reads what the api's and the
// worker's bootstraps link. The api changes no stack (the CloudFormation
// plans are async-only: the worker runs them), so no code that creates,
// updates or deletes one, or puts a template in a bucket, may be in it:
// that code and its SDK clients were a third of its bundle. The worker
// links them all, which shows the names checked are the right ones.
func TestTheAPIBootstrapLinksNoStackChanges(t *testing.T) {
	t.Run("nor, built without the function driver, the Lambda client", func(t *testing.T) {
		invoke := "github.com/aws/aws-sdk-go-v2/service/lambda.(*Client).Invoke"
		if linked(t, "api", "lambda.norpc,osb_without_function")[invoke] {
			t.Errorf("the api's bootstrap built without the function driver links %s", invoke)
		}
		if !linked(t, "api", "lambda.norpc")[invoke] {
			t.Errorf("the api's bootstrap with the function driver does not link %s: is the name right?", invoke)
		}
	})
	changes := []string{
		"github.com/serverless-osb/broker/internal/drivers/cloudformation.(*Driver).Begin",
		"github.com/serverless-osb/broker/internal/drivers/cloudformation.(*Driver).Cleanup",
		"github.com/aws/aws-sdk-go-v2/service/cloudformation.(*Client).CreateStack",
		"github.com/aws/aws-sdk-go-v2/service/cloudformation.(*Client).DeleteStack",
		"github.com/aws/aws-sdk-go-v2/service/cloudformation.(*Client).CreateChangeSet",
		"github.com/aws/aws-sdk-go-v2/service/s3.NewFromConfig",
		"github.com/aws/aws-sdk-go-v2/service/s3.(*Client).PutObject",
	}
	// What the api does call of CloudFormation: a pool's stacks counted at
	// a provision (CheckRoom).
	counts := "github.com/aws/aws-sdk-go-v2/service/cloudformation.(*Client).ListStacks"
	api, worker := linked(t, "api", "lambda.norpc"), linked(t, "worker", "lambda.norpc")
	for _, name := range changes {
		if api[name] {
			t.Errorf("the api's bootstrap links %s, which only the worker runs", name)
		}
		if !worker[name] {
			t.Errorf("the worker's bootstrap does not link %s: is the name right?", name)
		}
	}
	if !api[counts] {
		t.Errorf("the api's bootstrap does not link %s, which counts a pool's stacks", counts)
	}
}

// TestTheFunctionsLinkNoCredentialSourceButTheirs: a function has its
// role's credentials in its environment, and every function's bootstrap
// (the api's, the worker's, and the custom resources' dbuser and
// cacheuser) reads them there (awsenv.Config), without the SDK's default
// chain: its shared files, SSO and SSO OIDC clients, web identity and
// instance metadata were a tenth of each. Nor does any link the SDK's
// config package at all, which brings SSO and SSO OIDC along, whose
// package inits (endpoint tables) ran at every cold start for 0.16 ms.
// The operator's command (the api built without lambda.norpc) loads the
// whole chain, which shows the names checked are the right ones.
func TestTheFunctionsLinkNoCredentialSourceButTheirs(t *testing.T) {
	chain := []string{
		"github.com/aws/aws-sdk-go-v2/config.LoadDefaultConfig",
		"github.com/aws/aws-sdk-go-v2/service/sso.(*Client).GetRoleCredentials",
		"github.com/aws/aws-sdk-go-v2/service/ssooidc.(*Client).CreateToken",
		"github.com/aws/aws-sdk-go-v2/feature/ec2/imds.New",
		"github.com/aws/aws-sdk-go-v2/service/sts.(*Client).AssumeRoleWithWebIdentity",
	}
	packages := []string{"github.com/aws/aws-sdk-go-v2/config", "github.com/aws/aws-sdk-go-v2/service/sso", "github.com/aws/aws-sdk-go-v2/service/ssooidc"}
	ops := linked(t, "api", "")
	for _, fn := range []string{"api", "worker", "dbuser", "cacheuser"} {
		names := linked(t, fn, "lambda.norpc")
		for _, name := range chain {
			if names[name] {
				t.Errorf("the %s's bootstrap links %s, which a function never uses", fn, name)
			}
		}
		for _, pkg := range packages {
			if linksPackage(names, pkg) {
				t.Errorf("the %s's bootstrap links %s, which a function never uses", fn, pkg)
			}
		}
	}
	for _, name := range chain {
		if !ops[name] {
			t.Errorf("the operator's command does not link %s: is the name right?", name)
		}
	}
	for _, pkg := range packages {
		if !linksPackage(ops, pkg) {
			t.Errorf("the operator's command links nothing of %s: is the name right?", pkg)
		}
	}
}

// TestTheFunctionsLinkWhatOnlyTheCommandUsesNot: a package linked at all
// runs its init at every cold start, even when the linker drops every
// function of it. No function calls IAM (the operator's ops audit does):
// its endpoint table took 0.11 to 0.17 ms of each function's init; only
// the local broker's reclaimer reads runtime/metrics (0.11 ms); and bbolt,
// the local engine and store (the local broker's, which the Lambda build
// leaves out of package app: `make run` and ops are the command's) ran
// their inits too. The command (the api built without lambda.norpc: `make
// run`, ops) links them all, which shows the names are the right ones.
func TestTheFunctionsLinkWhatOnlyTheCommandUsesNot(t *testing.T) {
	command := linked(t, "api", "")
	functions := map[string]map[string]bool{"api": linked(t, "api", "lambda.norpc"), "worker": linked(t, "worker", "lambda.norpc")}
	for _, pkg := range []string{"github.com/aws/aws-sdk-go-v2/service/iam", "runtime/metrics", "go.etcd.io/bbolt", "github.com/serverless-osb/broker/internal/engine/local",
		"github.com/serverless-osb/broker/internal/store/bolt", "github.com/serverless-osb/broker/internal/groupcommit"} {
		for fn, names := range functions {
			if linksPackage(names, pkg) {
				t.Errorf("the %s's bootstrap links %s, which only the command uses", fn, pkg)
			}
		}
		if !linksPackage(command, pkg) {
			t.Errorf("the command links nothing of %s: is the name right?", pkg)
		}
	}
}

// linksPackage reports whether names (linked's) hold a symbol of the
// package pkg or of one under it: a package linked at all, whose init
// runs at start.
func linksPackage(names map[string]bool, pkg string) bool {
	for name := range names {
		if strings.HasPrefix(name, pkg+".") || strings.HasPrefix(name, pkg+"/") {
			return true
		}
	}
	return false
}

// TestTheBootstrapsBuiltWithoutLeaveItOut: make build builds the api
// without yaml.v3 (WithoutYAMLTag) when it bundles every file pre-parsed,
// and every bootstrap without the S3 client (WithoutS3Tag) when no
// template is over CloudFormation's body limit. Those bootstraps link
// none of it (yaml.v3: 0.11 MB of code, 89 KB of api.zip with the
// deployed catalog; S3: 0.23 MB of worker.zip), and refuse at start what
// would need it, saying to build the bundles (the tests of those builds,
// run here: the packages' own tests do not build with the tags).
func TestTheBootstrapsBuiltWithoutLeaveItOut(t *testing.T) {
	parser := "gopkg.in/yaml%2ev3.yaml_parser_parse_node" // yaml.Unmarshal is inlined
	if linked(t, "api", "lambda.norpc,"+WithoutYAMLTag)[parser] {
		t.Errorf("the api's bootstrap built with %s links %s", WithoutYAMLTag, parser)
	}
	if linked(t, "worker", "lambda.norpc,"+WithoutYAMLTag)[parser] {
		t.Errorf("the worker's bootstrap built with %s links %s", WithoutYAMLTag, parser)
	}
	worker := linked(t, "worker", "lambda.norpc")
	if !worker[parser] {
		t.Errorf("the worker's bootstrap does not link %s: is the name right?", parser)
	}
	// Nothing of S3 at all: its package's init (the endpoint table) ran
	// at every cold start while the driver's interface named its types.
	const s3 = "github.com/aws/aws-sdk-go-v2/service/s3"
	for _, fn := range []string{"api", "worker"} {
		if linksPackage(linked(t, fn, "lambda.norpc,"+WithoutS3Tag), s3) {
			t.Errorf("the %s's bootstrap built with %s links %s", fn, WithoutS3Tag, s3)
		}
	}
	if put := s3 + ".(*Client).PutObject"; !worker[put] {
		t.Errorf("the worker's bootstrap does not link %s: is the name right?", put)
	}
	assume := "github.com/aws/aws-sdk-go-v2/service/sts.(*Client).AssumeRole"
	// With S3 the worker has an STS client still (it names the bucket it
	// makes for itself locally), whose AssumeRole the linker keeps. Without
	// both, nothing of STS: the driver declares what it asks of it in its
	// own terms (RoleCredentials, AccountAPI), and its endpoint table took
	// 0.09 ms of each cold start.
	const sts = "github.com/aws/aws-sdk-go-v2/service/sts"
	for _, fn := range []string{"api", "worker"} {
		if linksPackage(linked(t, fn, "lambda.norpc,"+WithoutRolesTag+","+WithoutS3Tag), sts) {
			t.Errorf("the %s's bootstrap built with %s and %s links %s", fn, WithoutRolesTag, WithoutS3Tag, sts)
		}
	}
	if !worker[assume] {
		t.Errorf("the worker's bootstrap does not link %s: is the name right?", assume)
	}
	cmd := exec.Command("go", "test", "-count=1", "-tags", WithoutYAMLTag+","+WithoutS3Tag+","+WithoutRolesTag,
		"-run", "^Test(LoadChecked|ReadTemplate|Roles)Without(YAML|S3|STS)$", "-v",
		"./internal/catalog/", "./internal/drivers/cloudformation/")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the tests of the builds without fail: %v\n%s", err, out)
	}
	for _, name := range []string{"TestLoadCheckedWithoutYAML", "TestReadTemplateWithoutYAML", "TestReadTemplateWithoutS3", "TestRolesWithoutSTS"} {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass:\n%s", name, out)
		}
	}
}

// TestTheWorkerIsBuiltWithoutYAMLOnlyWhenTheSubsetReadsEveryTemplate: the
// worker of a catalog with CloudFormation plans reads the templates stacks
// run; built without yaml.v3 it reads them with the subset reader, so it
// is only when that reads each template of the catalog as yaml.v3 does;
// one it does not (an alias) keeps yaml.v3 in the worker, not in the api,
// which reads them pre-parsed.
func TestTheWorkerIsBuiltWithoutYAMLOnlyWhenTheSubsetReadsEveryTemplate(t *testing.T) {
	catalogDir := t.TempDir()
	files := map[string]string{
		"catalog.yaml":  "services: [] # the catalog\n",
		"topic.yaml":    "Resources:\n  Topic:\n    Type: AWS::SNS::Topic\nOutputs:\n  TopicArn:\n    Value: !Ref Topic\n",
		"anchored.yaml": "Resources:\n  A: &a\n    Type: AWS::SNS::Topic\n  B: *a\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(catalogDir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	withoutYAML := func(t *testing.T, out, fn string) bool {
		info, err := buildinfo.ReadFile(filepath.Join(out, fn, "bootstrap"))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range info.Settings {
			if s.Key == "-tags" {
				return slices.Contains(strings.Split(s.Value, ","), WithoutYAMLTag)
			}
		}
		return false
	}
	for _, tt := range []struct {
		name          string
		files         []string
		workerWithout bool
	}{
		{"templates the subset reads: the worker is built without yaml.v3", []string{"topic.yaml"}, true},
		{"one it does not read: the worker keeps yaml.v3", []string{"topic.yaml", "anchored.yaml"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Root: root, Out: t.TempDir(), Catalog: filepath.Join(catalogDir, "catalog.yaml"), Target: Lambda, NoZip: true,
				Manifest: func(string) (deploy.Manifest, error) {
					return deploy.Manifest{Files: tt.files, Drivers: []deploy.Driver{{Name: "cloudformation"}}}, nil
				}}
			if _, err := Build(c); err != nil {
				t.Fatal(err)
			}
			if !withoutYAML(t, c.Out, "api") {
				t.Error("the api is built with yaml.v3, though every template is bundled pre-parsed")
			}
			if got := withoutYAML(t, c.Out, "worker"); got != tt.workerWithout {
				t.Errorf("the worker is built without yaml.v3: %v, want %v", got, tt.workerWithout)
			}
		})
	}
}

// TestTheBootstrapsLinkSTSOnlyWhenTheManifestGrantsARole: make build
// leaves STS and Secrets Manager out of the bootstraps (WithoutRolesTag)
// exactly when no driver of the catalog's manifest grants sts:AssumeRole,
// which cloudformation.Needs declares for the roles of the plans'
// placements.
func TestTheBootstrapsLinkSTSOnlyWhenTheManifestGrantsARole(t *testing.T) {
	deployed, err := CatalogManifest(filepath.Join(root, deployedCatalog))
	if err != nil {
		t.Fatal(err)
	}
	if grantsAssumeRole(deployed) {
		t.Errorf("%s places no plan through a role, and its manifest grants sts:AssumeRole", deployedCatalog)
	}
	placed := deploy.Manifest{Drivers: []deploy.Driver{{Name: "cloudformation", Needs: cloudformation.Needs(cloudformation.Roles{
		"arn:aws:iam::222222222222:role/osb-target": {ExternalID: "x"}}, false)}}}
	if !grantsAssumeRole(placed) {
		t.Error("a manifest with a placement's role grants no sts:AssumeRole: the bootstraps would leave STS out")
	}
}
