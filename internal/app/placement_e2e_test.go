package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/google/uuid"
	"gopkg.in/yaml.v3"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/osbtest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// account is one account and Region of moto, reached as the broker
// reaches it: the home one with moto's own credentials, another through
// STS AssumeRole of a role there, which gives that account's credentials
// (moto keeps each account's resources apart; it checks neither trust
// policies nor external ids).
type account struct {
	id, region, role string
	cfg              aws.Config
	clients          awsClients
}

func newAccount(ctx context.Context, t *testing.T, base aws.Config, id, region string) account {
	t.Helper()
	cfg := base.Copy()
	cfg.Region = region
	a := account{id: id, region: region}
	if id != "" {
		a.role = "arn:aws:iam::" + id + ":role/osb-target"
		cfg.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(sts.NewFromConfig(base), a.role,
			func(o *stscreds.AssumeRoleOptions) { o.ExternalID = aws.String("test-external-id") }))
		who, err := sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
		if err != nil || aws.ToString(who.Account) != id {
			t.Fatalf("moto's AssumeRole into %s gave %v, %v: want that account's credentials", a.role, who, err)
		}
	}
	a.cfg, a.clients = cfg, newAWSClients(cfg)
	return a
}

// buckets lists the account's buckets (S3 lists only the caller's own).
func (a account) buckets(ctx context.Context, t *testing.T) []string {
	t.Helper()
	out, err := a.clients.s3.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range out.Buckets {
		names = append(names, aws.ToString(b.Name))
	}
	return names
}

// placedCatalog writes a catalog with the S3 service of
// services/catalog.yaml whose standard plan carries placement, beside a
// copy of its templates, and returns its path.
func placedCatalog(t *testing.T, dir string, placement map[string]any) string {
	t.Helper()
	root := apptest.Root()
	raw, err := os.ReadFile(filepath.Join(root, "services/catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var s3Service map[string]any
	for _, s := range doc["services"].([]any) {
		if s := s.(map[string]any); s["name"] == "aws-s3-bucket" {
			s3Service = s
		}
	}
	plan := s3Service["plans"].([]any)[0].(map[string]any)
	plan["broker"].(map[string]any)["placement"] = placement
	out, err := yaml.Marshal(map[string]any{"services": []any{s3Service}})
	if err != nil {
		t.Fatal(err)
	}
	// Every template of the service: its plans name them all.
	if err := os.CopyFS(filepath.Join(dir, "s3-bucket"), os.DirFS(filepath.Join(root, "services", "s3-bucket"))); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// otherAccountID is an account no other test of the run uses.
func otherAccountID() string { return fmt.Sprintf("%d%011d", 2+rand.IntN(7), rand.Int64N(1e11)) }

// TestClientDrivesAnInstancePlacedInAnotherAccountOnMoto: the real OSB
// client provisions, binds, unbinds and deprovisions an S3 instance whose
// plan places the payments space in a second account and another Region;
// its stacks, bucket and binding's user exist there only, and are gone
// after. A space the plan does not map is refused with 400 before
// anything is made. The mapping changed in the middle (the broker
// restarted on a new catalog) moves new instances only: the existing
// one's bindings and deprovision go where it was made.
func TestClientDrivesAnInstancePlacedInAnotherAccountOnMoto(t *testing.T) {
	ctx, cancel := waittest.Context(t)
	defer cancel()
	base := mototest.Config(t, "us-east-1")
	home := newAccount(ctx, t, base, "", "us-east-1")
	payments := newAccount(ctx, t, base, otherAccountID(), "eu-west-1")
	moved := newAccount(ctx, t, base, otherAccountID(), "eu-central-1")
	// Where else the stacks could wrongly be: the payments account's home
	// Region, and the broker's account in the payments Region.
	paymentsAtHome := newAccount(ctx, t, base, payments.id, "us-east-1")
	homeInEU := newAccount(ctx, t, base, "", "eu-west-1")

	prefix := "osbplace" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	place := func(a account) map[string]any {
		return map[string]any{"region": a.region, "role_arn": a.role, "external_id_env": "PAYMENTS_EXTERNAL_ID"}
	}
	getenv := func(k string) string {
		switch k {
		case "BROKER_STACK_PREFIX":
			return prefix
		case "PAYMENTS_EXTERNAL_ID":
			return "test-external-id"
		}
		return ""
	}
	dataDir := t.TempDir()
	start := func(placement map[string]any) *apptest.Broker {
		return apptest.StartWith(t, apptest.Options{
			Dir:     dataDir,
			Catalog: placedCatalog(t, t.TempDir(), placement),
			AWS:     func(context.Context) (aws.Config, error) { return base, nil },
			Getenv:  getenv,
			Sleep:   func(ctx context.Context, _ time.Duration) {},
		})
	}
	b := start(map[string]any{"by": "space", "map": map[string]any{"space-payments": place(payments)}})
	c := client(t, b.URL)
	service, plan := planOf(t, b, "aws-s3-bucket", "standard")
	e := &e2e{t: t, c: c, service: service}
	stacks := func(a account) []string { return stacksNamed(ctx, t, a.clients.cfn, prefix) }
	provisionIn := func(c osb.Client, id, space string) (*osb.ProvisionResponse, error) {
		return c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: id, ServiceID: service, PlanID: plan, AcceptsIncomplete: true,
			OrganizationGUID: "org-1", SpaceGUID: space,
			Context: map[string]any{"platform": "cloudfoundry", "organization_guid": "org-1", "space_guid": space}})
	}

	t.Run("a space the plan maps nowhere is refused with 400 naming it, and nothing is made", func(t *testing.T) {
		id := uuid.NewString()
		_, err := provisionIn(c, id, "space-unmapped")
		var h osb.HTTPStatusCodeError
		if !errors.As(err, &h) || h.StatusCode != http.StatusBadRequest || h.Description == nil ||
			!strings.Contains(*h.Description, "space space-unmapped has no place (the plan has no default)") {
			t.Fatalf("provision: %v, want 400 naming the space", err)
		}
		if _, err := c.GetInstance(&osb.GetInstanceRequest{InstanceID: id}); err == nil {
			t.Error("the refused instance is on record")
		} else if status, _ := clientError(t, err); status != http.StatusNotFound {
			t.Errorf("fetch the refused instance: %v, want 404", err)
		}
		for _, a := range []account{home, payments, homeInEU} {
			if got := stacks(a); len(got) != 0 {
				t.Errorf("stacks %v in %s/%s", got, a.id, a.region)
			}
		}
	})

	instanceID, bindingID := uuid.NewString(), uuid.NewString()
	r, err := provisionIn(c, instanceID, "space-payments")
	if err != nil || !r.Async {
		t.Fatalf("provision: %+v, %v", r, err)
	}
	if state, desc := e.poll(instanceID, r.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("provision ended %s: %s", state, desc)
	}
	br, err := c.Bind(&osb.BindRequest{InstanceID: instanceID, BindingID: bindingID, ServiceID: service, PlanID: plan,
		AcceptsIncomplete: true, BindResource: &osb.BindResource{AppGUID: ptr("app-1")}})
	if err != nil {
		t.Fatalf("bind: %v", err)
	}
	if state := e.pollBinding(instanceID, bindingID, br.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("bind ended %s", state)
	}
	got, err := c.GetBinding(&osb.GetBindingRequest{InstanceID: instanceID, BindingID: bindingID})
	if err != nil {
		t.Fatal(err)
	}
	bucket, key := fmt.Sprint(got.Credentials["bucket_name"]), fmt.Sprint(got.Credentials["access_key_id"])

	t.Run("the stacks, the bucket and the binding's user are in the payments account and Region only", func(t *testing.T) {
		if n := len(stacks(payments)); n != 2 {
			t.Errorf("%d stacks in the payments account's %s, want the instance's and the binding's", n, payments.region)
		}
		for _, a := range []account{home, homeInEU, paymentsAtHome} {
			if got := stacks(a); len(got) != 0 {
				t.Errorf("stacks %v in account %q, %s", got, a.id, a.region)
			}
		}
		if !slices.Contains(payments.buckets(ctx, t), bucket) {
			t.Errorf("the bucket %s is not the payments account's", bucket)
		}
		if slices.Contains(home.buckets(ctx, t), bucket) {
			t.Errorf("the bucket %s is the broker's account's", bucket)
		}
		loc, err := payments.clients.s3.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: aws.String(bucket)})
		if err != nil || string(loc.LocationConstraint) != payments.region {
			t.Errorf("the bucket is in %v (%v), want %s", loc, err, payments.region)
		}
		if ok, err := payments.clients.accessKeyExists(ctx, key); err != nil || !ok {
			t.Errorf("no user of the payments account holds the binding's key (%v)", err)
		}
		if ok, err := home.clients.accessKeyExists(ctx, key); err != nil || ok {
			t.Errorf("a user of the broker's account holds the binding's key (%v)", err)
		}
		if got.Credentials["region"] != payments.region {
			t.Errorf("the credentials' region is %v, want %s", got.Credentials["region"], payments.region)
		}
	})

	// The platform team moves the payments space to another account and
	// Region, and retires the old place, where the instance still lives:
	// the broker restarts on the new catalog.
	b.Stop()
	b = start(map[string]any{"by": "space", "map": map[string]any{"space-payments": place(moved)}, "retired": []any{place(payments)}})
	c = client(t, b.URL)
	e.c = c

	t.Run("ops instances shows the instance's account and Region, and that its mapping changed", func(t *testing.T) {
		var out bytes.Buffer
		if err := app.OpsJSON(ctx, b.Local.Broker, []string{"instances"}, &out); err != nil {
			t.Fatal(err)
		}
		var list []struct {
			ID    string        `json:"instance_id"`
			Place *broker.Place `json:"place"`
		}
		if err := json.Unmarshal(out.Bytes(), &list); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		want := broker.Place{Account: payments.id, Region: payments.region, Moved: true, Now: &broker.Place{Account: moved.id, Region: moved.region}}
		if len(list) != 1 || list[0].ID != instanceID || list[0].Place == nil || !reflect.DeepEqual(*list[0].Place, want) {
			t.Fatalf("ops instances: %s, want the instance in %+v", out.String(), want)
		}
		var text bytes.Buffer
		if err := app.Ops(ctx, b.Local.Broker, []string{"instances"}, &text); err != nil {
			t.Fatal(err)
		}
		if line := "CHANGED: new ones go to account " + moved.id + ", " + moved.region; !strings.Contains(text.String(), line) ||
			!strings.Contains(text.String(), payments.id+"  "+payments.region) {
			t.Errorf("ops instances:\n%s\nwant the instance in %s %s, with %q", text.String(), payments.id, payments.region, line)
		}
	})

	t.Run("after the mapping changed, the instance's new binding still goes where it is", func(t *testing.T) {
		second := uuid.NewString()
		br, err := c.Bind(&osb.BindRequest{InstanceID: instanceID, BindingID: second, ServiceID: service, PlanID: plan,
			AcceptsIncomplete: true, BindResource: &osb.BindResource{AppGUID: ptr("app-2")}})
		if err != nil {
			t.Fatalf("bind: %v", err)
		}
		if state := e.pollBinding(instanceID, second, br.OperationKey); state != osb.StateSucceeded {
			t.Fatalf("bind ended %s", state)
		}
		if n := len(stacks(payments)); n != 3 {
			t.Errorf("%d stacks in the payments account, want the instance's and both bindings'", n)
		}
		if got := stacks(moved); len(got) != 0 {
			t.Errorf("stacks %v in the account the mapping now names", got)
		}
		ur, err := c.Unbind(&osb.UnbindRequest{InstanceID: instanceID, BindingID: second, ServiceID: service, PlanID: plan, AcceptsIncomplete: true})
		if err != nil {
			t.Fatalf("unbind: %v", err)
		}
		if state := e.pollBinding(instanceID, second, ur.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
			t.Fatalf("unbind ended %s", state)
		}
	})

	t.Run("a new instance of the space goes where the mapping now says", func(t *testing.T) {
		id := uuid.NewString()
		r, err := provisionIn(c, id, "space-payments")
		if err != nil {
			t.Fatalf("provision: %v", err)
		}
		if state, desc := e.poll(id, r.OperationKey); state != osb.StateSucceeded {
			t.Fatalf("provision ended %s: %s", state, desc)
		}
		if n := len(stacks(moved)); n != 1 {
			t.Errorf("%d stacks in the account the mapping now names, want the new instance's", n)
		}
		// ops instances --moved lists the instances whose mapping changed,
		// and not the new one, which is where the mapping says.
		for args, want := range map[string][]string{"instances": {instanceID, id}, "instances --moved": {instanceID}} {
			var out bytes.Buffer
			if err := app.OpsJSON(ctx, b.Local.Broker, strings.Fields(args), &out); err != nil {
				t.Fatal(err)
			}
			var list []struct {
				ID string `json:"instance_id"`
			}
			if err := json.Unmarshal(out.Bytes(), &list); err != nil {
				t.Fatalf("%v: %s", err, out.String())
			}
			var got []string
			for _, l := range list {
				got = append(got, l.ID)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("ops %s listed %v, want %v", args, got, want)
			}
		}
		dr, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: id, ServiceID: service, PlanID: plan, AcceptsIncomplete: true})
		if err != nil {
			t.Fatalf("deprovision: %v", err)
		}
		if state, desc := e.poll(id, dr.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
			t.Fatalf("deprovision ended %s: %s", state, desc)
		}
		if got := stacks(moved); len(got) != 0 {
			t.Errorf("stacks %v outlived the deprovision", got)
		}
	})

	t.Run("unbind and deprovision empty the payments account", func(t *testing.T) {
		ur, err := c.Unbind(&osb.UnbindRequest{InstanceID: instanceID, BindingID: bindingID, ServiceID: service, PlanID: plan, AcceptsIncomplete: true})
		if err != nil {
			t.Fatalf("unbind: %v", err)
		}
		if state := e.pollBinding(instanceID, bindingID, ur.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
			t.Fatalf("unbind ended %s", state)
		}
		if ok, err := payments.clients.accessKeyExists(ctx, key); err != nil || ok {
			t.Errorf("the binding's key outlived the unbind (%v)", err)
		}
		dr, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: instanceID, ServiceID: service, PlanID: plan, AcceptsIncomplete: true})
		if err != nil {
			t.Fatalf("deprovision: %v", err)
		}
		if state, desc := e.poll(instanceID, dr.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
			t.Fatalf("deprovision ended %s: %s", state, desc)
		}
		if got := stacks(payments); len(got) != 0 {
			t.Errorf("stacks %v outlived the deprovision", got)
		}
		if slices.Contains(payments.buckets(ctx, t), bucket) {
			t.Errorf("the bucket %s outlived the deprovision", bucket)
		}
	})
}

// TestAPoolPlacesInstancesWhereThereIsRoomOnMoto: a plan whose place is a
// pool of two accounts, the first at its configured quota (a stack of the
// broker's prefix made there beforehand), puts the next instance in the
// second; once both are at their quota, a provision is refused with 422
// at the request, before anything is made.
func TestAPoolPlacesInstancesWhereThereIsRoomOnMoto(t *testing.T) {
	ctx, cancel := waittest.Context(t)
	defer cancel()
	base := mototest.Config(t, "us-east-1")
	first := newAccount(ctx, t, base, otherAccountID(), "eu-west-1")
	second := newAccount(ctx, t, base, otherAccountID(), "eu-west-1")
	prefix := "osbpool" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	filler := prefix + "-filler"
	if _, err := first.clients.cfn.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String(filler),
		TemplateBody: aws.String(`{"Resources":{"Topic":{"Type":"AWS::SNS::Topic"}}}`)}); err != nil {
		t.Fatal(err)
	}
	defer first.clients.cfn.DeleteStack(context.WithoutCancel(ctx), &cloudformation.DeleteStackInput{StackName: aws.String(filler)})
	member := func(a account) map[string]any { return map[string]any{"role_arn": a.role, "external_id": "pool-id"} }
	b := apptest.StartWith(t, apptest.Options{
		Catalog: placedCatalog(t, t.TempDir(), map[string]any{"region": "eu-west-1",
			"pool": []any{member(first), member(second)}, "stack_quota": 1, "max_share": 1}),
		AWS: func(context.Context) (aws.Config, error) { return base, nil },
		Getenv: func(k string) string {
			if k == "BROKER_STACK_PREFIX" {
				return prefix
			}
			return ""
		},
		Sleep: func(ctx context.Context, _ time.Duration) {},
	})
	c := client(t, b.URL)
	service, plan := planOf(t, b, "aws-s3-bucket", "standard")
	e := &e2e{t: t, c: c, service: service}
	stacks := func(a account) []string { return stacksNamed(ctx, t, a.clients.cfn, prefix) }

	id := uuid.NewString()
	r := e.provision(id, plan, true, nil)
	if state, desc := e.poll(id, r.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("provision ended %s: %s", state, desc)
	}
	t.Run("the instance goes to the account with room", func(t *testing.T) {
		if got := stacks(second); len(got) != 1 {
			t.Errorf("stacks %v in the second account, want the instance's", got)
		}
		if got := stacks(first); len(got) != 1 || got[0] != filler {
			t.Errorf("stacks %v in the first account, want only the one it had", got)
		}
	})
	t.Run("with every account at its quota, a provision is refused with 422 saying so, and nothing is made", func(t *testing.T) {
		full := uuid.NewString()
		_, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: full, ServiceID: service, PlanID: plan, AcceptsIncomplete: true,
			OrganizationGUID: "org-1", SpaceGUID: "space-1"})
		status, desc := clientError(t, err)
		if status != http.StatusUnprocessableEntity || !strings.Contains(desc, "Every account of the plan's pool in eu-west-1 holds 100% or more of its quota of 1 stacks (1, 1 stacks)") {
			t.Fatalf("provision: %d %q, want 422 saying the pool is full", status, desc)
		}
		if _, err := c.GetInstance(&osb.GetInstanceRequest{InstanceID: full}); err == nil {
			t.Error("the refused instance is on record")
		}
		if n := len(stacks(first)) + len(stacks(second)); n != 2 {
			t.Errorf("%d stacks in the pool, want the filler and the first instance's", n)
		}
	})
	dr, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: id, ServiceID: service, PlanID: plan, AcceptsIncomplete: true})
	if err != nil {
		t.Fatal(err)
	}
	if state, desc := e.poll(id, dr.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
		t.Fatalf("deprovision ended %s: %s", state, desc)
	}
	if got := stacks(second); len(got) != 0 {
		t.Errorf("stacks %v outlived the deprovision", got)
	}
}

// TestNoStackLeftBehindByACrashWithAPlacedPlan is the fault-injection
// suite (faults_cfn_test.go) on a plan placed in a second account and
// another Region: the process dies at every call through the ports and to
// AWS (STS's AssumeRole among them); afterwards no stack is left that is
// not attached to a live instance or binding, in the target account, and
// none at all in the broker's.
func TestNoStackLeftBehindByACrashWithAPlacedPlan(t *testing.T) {
	ctx, cancel := waittest.Context(t)
	defer cancel()
	cfg := mototest.Config(t, "us-east-1")
	home := newAccount(ctx, t, cfg, "", "us-east-1")
	target := newAccount(ctx, t, cfg, otherAccountID(), "eu-west-1")
	prefix := "osbfp" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	catalog := placedCatalog(t, t.TempDir(), map[string]any{"region": target.region, "role_arn": target.role, "external_id": "crash-id"})
	tried := 0
	for _, lc := range cfnLifecycles() {
		total := cfnFaultRun{lc: lc, prefix: prefix, cfg: cfg, catalog: catalog, stacksIn: target.clients.cfn}.run(t)
		for _, after := range []bool{false, true} {
			when := "before"
			if after {
				when = "after"
			}
			for k := 1; k <= total; k++ {
				tried++
				t.Run(fmt.Sprintf("%s crashes %s call %d of %d", lc.name, when, k, total), func(t *testing.T) {
					t.Parallel()
					cfnFaultRun{lc: lc, k: k, after: after, prefix: prefix, cfg: cfg, catalog: catalog, stacksIn: target.clients.cfn}.run(t)
				})
			}
		}
	}
	t.Cleanup(func() {
		if got := stacksNamed(context.Background(), t, home.clients.cfn, prefix); len(got) != 0 {
			t.Errorf("stacks %v in the broker's account", got)
		}
	})
	t.Logf("crash points tried: %d", tried)
}
