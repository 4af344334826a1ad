package function_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/serverless-osb/broker/internal/jsonschema"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/drivers/function"
	"github.com/serverless-osb/broker/internal/waittest"
)

const services = "../../../services"

func TestTheExampleCatalogAndEventsFollowTheProtocol(t *testing.T) {
	t.Run("every plan of the example catalog is configured", func(t *testing.T) {
		cat, err := catalog.Load(filepath.Join(services, "function-catalog.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, svc := range cat.Services() {
			for _, p := range svc.Plans {
				if _, err := function.Configure(p, p.Settings.Config, cat.Dir); err != nil || p.Settings.Driver != "function" {
					t.Errorf("plan %s: driver %q: %v", p.Name, p.Settings.Driver, err)
				}
			}
		}
	})
	schema := compile(t, "request")
	events, _ := filepath.Glob(filepath.Join(services, "function", "events", "*.json"))
	if len(events) == 0 {
		t.Fatal("no sample events")
	}
	for _, path := range events {
		t.Run(filepath.Base(path)+" is a request", func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			if err := schema.Validate(v); err != nil {
				t.Error(err)
			}
		})
	}
}

// recordingTransport keeps the requests the driver sends, to replay them.
type recordingTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	sent []sentRequest
}

type sentRequest struct {
	header http.Header
	body   []byte
}

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.sent = append(r.sent, sentRequest{header: req.Header.Clone(), body: body})
	r.mu.Unlock()
	req.Body = io.NopCloser(bytes.NewReader(body))
	return r.next.RoundTrip(req)
}

// TestTheExampleTargetsCheckTheSignature runs the Python and Node.js
// examples as the HTTP targets they are (python3 service.py, node
// service.mjs) and drives them through the driver: they take the broker's
// requests under either version, and refuse a replayed request and one
// signed for another URL.
func TestTheExampleTargetsCheckTheSignature(t *testing.T) {
	for _, ex := range []struct{ name, bin, file string }{{"python", "python3", "service.py"}, {"node.js", "node", "service.mjs"}} {
		t.Run("the "+ex.name+" example", func(t *testing.T) {
			bin, err := exec.LookPath(ex.bin)
			if err != nil {
				t.Fatalf("%s is needed to run %s: %v", ex.bin, ex.file, err)
			}
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := l.Addr().(*net.TCPAddr).Port
			l.Close()
			url := fmt.Sprintf("http://127.0.0.1:%d/", port)
			cmd := exec.Command(bin, ex.file)
			cmd.Dir = filepath.Join(services, "function")
			cmd.Env = append(os.Environ(), "FUNCTION_SECRET="+secret, "FUNCTION_URL="+url, fmt.Sprintf("PORT=%d", port))
			out := &bytes.Buffer{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			waittest.Until(t, func() error {
				c, err := net.Dial("tcp", l.Addr().String())
				if err != nil {
					return fmt.Errorf("%s does not listen yet: %v", ex.file, err)
				}
				return c.Close()
			})

			f := newFixture(t)
			rec := &recordingTransport{next: f.d.HTTP.Transport}
			f.d.HTTP.Transport = rec
			for _, protocol := range []int{1, 2} {
				s, err := function.Configure(nil, map[string]any{"url": url, "secret_env": "FN_SECRET", "protocol": protocol}, "")
				if err != nil {
					t.Fatal(err)
				}
				f.s = s
				op := fmt.Sprintf("op-%d", protocol)
				if p, err := f.run(f.change(broker.KindProvision, op+"-p", false, `{}`)); err != nil || !p.Done {
					t.Fatalf("protocol %d: provision: %+v %v\n%s", protocol, p, err, out)
				}
				if p, err := f.run(f.change(broker.KindBind, op+"-b", false, `{}`)); err != nil || p.Credentials["username"] != "u-b-1" {
					t.Fatalf("protocol %d: bind: %+v %v\n%s", protocol, p, err, out)
				}
				if p, err := f.run(f.change(broker.KindDeprovision, op+"-d", false, `{}`)); err != nil || !p.Done {
					t.Fatalf("protocol %d: deprovision: %+v %v\n%s", protocol, p, err, out)
				}
			}
			post := func(url string, r sentRequest) int {
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(r.body))
				req.Header = r.header.Clone()
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			if status := post(url, rec.sent[0]); status != http.StatusUnauthorized {
				t.Errorf("a replayed request got HTTP %d, want 401", status)
			}
			// Signed for another URL of the same target: refused.
			f.s, _ = function.Configure(nil, map[string]any{"url": fmt.Sprintf("http://localhost:%d/", port), "secret_env": "FN_SECRET"}, "")
			_, err = f.begin(f.change(broker.KindProvision, "op-elsewhere", false, `{}`))
			var fail *broker.Failure
			if !errors.As(err, &fail) || !strings.Contains(fail.Description, "HTTP 401") {
				t.Errorf("a request signed for another URL: %v, want refused (HTTP 401)", err)
			}
		})
	}
}
