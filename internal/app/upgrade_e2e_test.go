package app_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/google/uuid"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/drivers"
	cfndriver "github.com/serverless-osb/broker/internal/drivers/cloudformation"
	"github.com/serverless-osb/broker/internal/mototest"
)

// The S3 example's plan as an operator changes it: the template's
// multipart uploads are aborted after 3 days rather than 7 (a property
// updated in place), under a raised maintenance_info version.
const (
	upgradeFrom, upgradeTo = "1.0.0", "1.1.0"
	templateV1, templateV2 = "DaysAfterInitiation: 7", "DaysAfterInitiation: 3"
)

// shippedServices copies services/ (the example catalog, its lock file and
// templates) into a directory of the test's, and returns its catalog's
// path, and raise: the operator's change of the S3 plan, as the README
// says to make it (the template changed, the version raised, the lock file
// written again as make build does).
func shippedServices(t *testing.T) (catalogPath string, raise func()) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "services")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(apptest.Root(), "services"))); err != nil {
		t.Fatal(err)
	}
	catalogPath = filepath.Join(dir, "catalog.yaml")
	replace := func(path, old, new string) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Count(b, []byte(old)) != 1 {
			t.Fatalf("%s holds %q %d times, want once", path, old, bytes.Count(b, []byte(old)))
		}
		if err := os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return catalogPath, func() {
		t.Helper()
		replace(filepath.Join(dir, "s3-bucket", "instance.yaml"), templateV1, templateV2)
		replace(catalogPath, `version: "`+upgradeFrom+`"
          description: First release of the S3 bucket template.`, `version: "`+upgradeTo+`"
          description: Incomplete multipart uploads are aborted after 3 days, not 7.`)
		cat, err := catalog.Load(catalogPath)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := drivers.WriteLock(cat, catalogPath); err != nil {
			t.Fatalf("the lock file of the raised version: %v", err)
		}
	}
}

// stackTemplate is the template the instance's stack runs, as
// CloudFormation (moto) has it.
func stackTemplate(t *testing.T, c *cloudformation.Client, prefix, instanceID string) string {
	t.Helper()
	out, err := c.GetTemplate(context.Background(), &cloudformation.GetTemplateInput{StackName: aws.String(cfndriver.InstanceStackName(prefix, instanceID))})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.TemplateBody)
}

// TestUpgradeThroughTheOSBClientOnMoto: two instances of the S3 example
// provisioned on template v1; the operator changes the template and raises
// the plan's version, and restarts the broker; the catalog offers the new
// version; an update carrying it moves one instance's stack to the new
// template; a parameter-only update leaves the other on v1; ops instances
// --behind lists exactly that one.
func TestUpgradeThroughTheOSBClientOnMoto(t *testing.T) {
	cfg := mototest.Config(t, "us-east-1")
	cfn := cloudformation.NewFromConfig(cfg)
	prefix := "osbup" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	catalogPath, raise := shippedServices(t)
	opts := apptest.Options{Dir: t.TempDir(), Catalog: catalogPath, ReapInterval: -1,
		AWS: func(context.Context) (aws.Config, error) { return cfg, nil },
		Getenv: func(k string) string {
			if k == "BROKER_STACK_PREFIX" {
				return prefix
			}
			return ""
		},
		Sleep: func(ctx context.Context, _ time.Duration) {}, // moto completes stacks at once
	}
	b := apptest.StartWith(t, opts)
	service, plan := planOf(t, b, "aws-s3-bucket", "standard")
	e := &e2e{t: t, c: client(t, b.URL), service: service}
	upgraded, kept := uuid.NewString(), uuid.NewString()
	for _, id := range []string{upgraded, kept} {
		r := e.provision(id, plan, true, map[string]any{"Versioning": "Enabled"})
		if state, desc := e.poll(id, r.OperationKey); state != osb.StateSucceeded {
			t.Fatalf("provision %s ended %s: %s", id, state, desc)
		}
		if got := stackTemplate(t, cfn, prefix, id); !strings.Contains(got, templateV1) {
			t.Fatalf("the stack of %s does not run template v1:\n%s", id, got)
		}
	}

	b.Stop()
	raise()
	b = apptest.StartWith(t, opts)
	e.c = client(t, b.URL)

	cat, err := e.c.GetCatalog()
	if err != nil {
		t.Fatal(err)
	}
	offered := ""
	for _, s := range cat.Services {
		for _, p := range s.Plans {
			if p.ID == plan && p.MaintenanceInfo != nil {
				offered = p.MaintenanceInfo.Version
			}
		}
	}
	if offered != upgradeTo {
		t.Fatalf("the catalog offers maintenance_info version %q of the plan, want %s", offered, upgradeTo)
	}
	for _, id := range []string{upgraded, kept} {
		if v := instanceVersion(t, b, id); v != upgradeFrom {
			t.Errorf("GET instance %s answers maintenance_info version %q, want %s", id, v, upgradeFrom)
		}
	}
	if got := behind(t, b); got != upgraded+","+kept && got != kept+","+upgraded {
		t.Errorf("ops instances --behind lists %q before the upgrade, want both instances", got)
	}

	// The upgrade, as cf update-service --upgrade sends it: the plan's new
	// maintenance_info. The client library predates maintenance_info in
	// updates, so this request goes over HTTP; the client polls it.
	r := b.Do(apptest.Request{Method: http.MethodPatch, Path: "/v2/service_instances/" + upgraded + "?accepts_incomplete=true",
		Body: map[string]any{"service_id": service, "maintenance_info": map[string]any{"version": upgradeTo}}})
	if r.Status != http.StatusAccepted {
		t.Fatalf("upgrade: %d %s", r.Status, r.Raw)
	}
	op := osb.OperationKey(r.Str("operation"))
	if state, desc := e.poll(upgraded, &op); state != osb.StateSucceeded {
		t.Fatalf("the upgrade ended %s: %s", state, desc)
	}
	if got := stackTemplate(t, cfn, prefix, upgraded); !strings.Contains(got, templateV2) {
		t.Errorf("the upgraded stack does not run the plan's new template:\n%s", got)
	}
	if v := instanceVersion(t, b, upgraded); v != upgradeTo {
		t.Errorf("GET instance after the upgrade answers maintenance_info version %q, want %s", v, upgradeTo)
	}

	ur, err := e.c.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: kept, ServiceID: service, AcceptsIncomplete: true,
		Parameters: map[string]any{"Versioning": "Suspended"}})
	if err != nil {
		t.Fatalf("parameter-only update: %v", err)
	}
	if state, desc := e.poll(kept, ur.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("the parameter-only update ended %s: %s", state, desc)
	}
	if got := stackTemplate(t, cfn, prefix, kept); !strings.Contains(got, templateV1) {
		t.Errorf("a parameter-only update moved the stack off template v1:\n%s", got)
	}
	if v := instanceVersion(t, b, kept); v != upgradeFrom {
		t.Errorf("GET instance after a parameter-only update answers maintenance_info version %q, want %s", v, upgradeFrom)
	}
	if got := behind(t, b); got != kept {
		t.Errorf("ops instances --behind lists %q, want exactly the instance still on v1, %s", got, kept)
	}
}

// instanceVersion is the maintenance_info version GET instance answers
// (over HTTP: the client library's answer has no maintenance_info).
func instanceVersion(t *testing.T, b *apptest.Broker, id string) string {
	t.Helper()
	r := b.Do(apptest.Request{Method: http.MethodGet, Path: "/v2/service_instances/" + id})
	if r.Status != http.StatusOK {
		t.Fatalf("GET instance %s: %d %s", id, r.Status, r.Raw)
	}
	mi, _ := r.Body["maintenance_info"].(map[string]any)
	v, _ := mi["version"].(string)
	return v
}

// behind is what ops --json instances --behind lists, the ids joined by
// commas in its order.
func behind(t *testing.T, b *apptest.Broker) string {
	t.Helper()
	var out bytes.Buffer
	if err := app.Ops(t.Context(), b.Local.Broker, []string{"instances", "--behind"}, &out); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		ids = append(ids, strings.Fields(line)[0])
	}
	return strings.Join(ids, ",")
}
