package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/sandbox"
)

// rawBind binds with a request body of its own and returns the
// credentials' password.
func rawBind(t *testing.T, sb *sandbox.Sandbox, instance, binding, body string) string {
	t.Helper()
	status, data := putRaw(t, sb, "/v2/service_instances/"+instance+"/service_bindings/"+binding, []byte(body))
	if status != http.StatusCreated {
		t.Fatalf("bind %s/%s: %d %s", instance, binding, status, data)
	}
	var r struct {
		Credentials map[string]any `json:"credentials"`
	}
	if err := json.Unmarshal([]byte(data), &r); err != nil {
		t.Fatal(err)
	}
	p, _ := r.Credentials["password"].(string)
	return p
}

// putRaw sends PUT rawPath (escaped as it is) with body to sb's broker as
// its platform does, and returns the answer's status and body.
func putRaw(t *testing.T, sb *sandbox.Sandbox, rawPath string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, sb.URL+rawPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(sb.Username, sb.Password)
	req.Header.Set("X-Broker-API-Version", "2.17")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// withoutAction writes a copy of the template, beside it (its assets are
// there), in which the policies of the role of the function whose logical
// id starts with function no longer allow action.
func withoutAction(t *testing.T, function, action string) string {
	t.Helper()
	data, err := os.ReadFile(template)
	if err != nil {
		t.Fatal(err)
	}
	var tmpl map[string]any
	if err := json.Unmarshal(data, &tmpl); err != nil {
		t.Fatal(err)
	}
	resources := tmpl["Resources"].(map[string]any)
	fn := resources[logicalID(function)].(map[string]any)
	role := fn["Properties"].(map[string]any)["Role"].(map[string]any)["Fn::GetAtt"].([]any)[0]
	removed := 0
	for _, r := range resources {
		r := r.(map[string]any)
		if r["Type"] != "AWS::IAM::Policy" {
			continue
		}
		props := r["Properties"].(map[string]any)
		if !slices.ContainsFunc(props["Roles"].([]any), func(v any) bool { ref, _ := v.(map[string]any); return ref["Ref"] == role }) {
			continue
		}
		doc := props["PolicyDocument"].(map[string]any)
		var kept []any
		for _, s := range doc["Statement"].([]any) {
			s := s.(map[string]any)
			switch a := s["Action"].(type) {
			case string:
				if a == action {
					removed++
					continue
				}
			case []any:
				if i := slices.Index(a, any(action)); i >= 0 {
					s["Action"] = slices.Delete(a, i, i+1)
					removed++
				}
			}
			kept = append(kept, s)
		}
		doc["Statement"] = kept
	}
	if removed == 0 {
		t.Fatalf("no policy of %s's role %v allows %s", function, role, action)
	}
	out, _ := json.Marshal(tmpl)
	path := filepath.Join(filepath.Dir(template), "Without"+strings.ReplaceAll(action, ":", "")+".template.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestIAMIsEnforced runs the stack with one action taken from the api
// function's role: the async provision that needs it fails, and the api's
// log names the action; the reaper, whose role allows it, then runs the
// operation. Without enforcement the sandbox would pass any stack,
// whatever its roles allow.
func TestIAMIsEnforced(t *testing.T) {
	t.Parallel() // most of it is waiting for the reaper
	sb, err := sandbox.Start(context.Background(), sandbox.Config{Template: withoutAction(t, "ApiFunction", "states:StartExecution"),
		Dir: t.TempDir(), Log: io.Discard, ScheduleInterval: 2 * time.Second})
	if err != nil {
		t.Fatalf("start the sandbox: %v", err)
	}
	defer sb.Close()
	// What the worker's role allowed here counts too (the reaper's
	// start of an execution).
	defer func() {
		if err := exercised.add(context.Background(), sb); err != nil {
			t.Error(err)
		}
	}()
	c := client(t, sb)
	// The operation is on record before its execution starts, so the
	// provision is accepted (202); the start fails, and is logged (the
	// reaper, whose role allows it, would start the execution later).
	r, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "denied-1", ServiceID: demoService, PlanID: demoAsync,
		OrganizationGUID: "org", SpaceGUID: "space", AcceptsIncomplete: true, Parameters: map[string]any{"duration_seconds": 0}})
	if err != nil || !r.Async {
		t.Fatalf("an async provision: %+v %v", r, err)
	}
	if log := sb.FunctionLog(logicalID("ApiFunction")); !strings.Contains(log, "AccessDeniedException") || !strings.Contains(log, "is not authorized to perform: states:StartExecution") {
		t.Fatalf("the api function's log does not name the action it was denied:\n%s", tail(log, 4000))
	}
	// The reaper, the worker's, whose role allows it, starts the execution
	// the api could not, once the operation is past its promised check.
	e := &e2e{t: t, c: c}
	if state, desc := e.poll("denied-1", r.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("the provision whose execution the api could not start ended %s: %s, want the reaper to run it", state, desc)
	}
	// What the role still allows works: a synchronous provision.
	if _, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "allowed-1", ServiceID: demoService, PlanID: demoSync,
		OrganizationGUID: "org", SpaceGUID: "space"}); err != nil {
		t.Fatalf("a synchronous provision: %v", err)
	}
}
