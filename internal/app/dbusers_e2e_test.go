package app_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/google/uuid"
	"gopkg.in/yaml.v3"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app/apptest"
	catalogpkg "github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/dbtest"
	"github.com/serverless-osb/broker/internal/dbusers"
	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/drivers"
	cfndriver "github.com/serverless-osb/broker/internal/drivers/cloudformation"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/osbtest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// networkTemplate makes, in moto, the VPC the catalog's network names.
const networkTemplate = `{
  "Resources": {
    "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.9.0.0/16"}},
    "A": {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": {"Ref": "Vpc"}, "CidrBlock": "10.9.1.0/24", "AvailabilityZone": "us-east-1a"}},
    "B": {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": {"Ref": "Vpc"}, "CidrBlock": "10.9.2.0/24", "AvailabilityZone": "us-east-1b"}},
    "Apps": {"Type": "AWS::EC2::SecurityGroup", "Properties": {"GroupDescription": "apps", "VpcId": {"Ref": "Vpc"}}}
  },
  "Outputs": {
    "VpcId": {"Value": {"Ref": "Vpc"}},
    "SubnetIds": {"Value": {"Fn::Join": [",", [{"Ref": "A"}, {"Ref": "B"}]]}},
    "GroupId": {"Value": {"Fn::GetAtt": ["Apps", "GroupId"]}}
  }
}`

// databaseUsersCatalog is services/ copied, its catalog given the network
// (its default), as docs/aws-services.md says an operator does: the RDS
// plans' bindings are database users, which need it.
func databaseUsersCatalog(t *testing.T, vpc, subnets, group string) string {
	t.Helper()
	return servicesCatalogWith(t, func(doc map[string]any) {
		doc["networks"] = map[string]any{"apps": map[string]any{"default": true, "vpc_id": vpc,
			"subnet_ids": strings.Split(subnets, ","), "client_security_group_id": group}}
	})
}

// servicesCatalogWith is services/ copied, its catalog changed by edit,
// with the lock file make build writes for it anew: the network is fixed
// in every plan that takes one (the Aurora, OpenSearch and Valkey plans
// too), a deployment made with it from the start.
func servicesCatalogWith(t *testing.T, edit func(doc map[string]any)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "services")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(repoRoot(t), "services"))); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "catalog.yaml")
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(text, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	if text, err = yaml.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, text, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(drivers.LockPath(path)); err != nil {
		t.Fatal(err)
	}
	cat, err := catalogpkg.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := drivers.WriteLock(cat, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = parent
	}
}

// fakeDatabaseUserFunction is a named fake of Lambda for the broker's
// Custom::DatabaseUser function: moto's CloudFormation sends it each
// request (moto_server.py's fix 18) and it runs the real handler
// (dbusers.Handler.Respond) against a real server, which answers moto at
// the ResponseURL. What cannot be real here is mapped, and named: the
// database moto's RDS "made" is the loopback server of its engine (its
// endpoint and port replaced, as DNS would), and its master secret, which
// moto filled with a password of its own, gets that server's master's.
type fakeDatabaseUserFunction struct {
	t       *testing.T
	servers map[string]dbtest.Server // by the Engine property
	sm      *secretsmanager.Client
	handler *dbusers.Handler
	mu      sync.Mutex
	events  []string // "Create osb_…", "Delete osb_…"
}

func (f *fakeDatabaseUserFunction) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var e cfn.Event
	if err := json.NewDecoder(r.Body).Decode(&e); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	engine, _ := e.ResourceProperties["Engine"].(string)
	s, ok := f.servers[engine]
	if !ok {
		http.Error(w, "no server for engine "+engine, http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	if arn, _ := e.ResourceProperties["MasterSecretArn"].(string); arn != "" {
		master, _ := json.Marshal(map[string]string{"username": s.MasterUser, "password": s.MasterPassword})
		if _, err := f.sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String(arn), SecretString: aws.String(string(master))}); err != nil {
			f.t.Errorf("the fake cannot give moto's master secret the server's credentials: %v", err)
		}
	}
	e.ResourceProperties["Host"], e.ResourceProperties["Port"] = s.Host, strconv.Itoa(s.Port)
	if err := f.handler.Respond(ctx, e); err != nil {
		f.t.Errorf("the handler could not answer moto: %v", err)
	}
	f.mu.Lock()
	f.events = append(f.events, string(e.RequestType))
	f.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// TestClientBindsDatabaseUsersOnMoto drives an RDS PostgreSQL and an RDS
// MySQL instance of a catalog whose RDS plans make a user per binding, in
// its network, through the real OSB client, on moto: the instance's stack
// is in the network's VPC (the plan fixed it), each binding is a database
// user of its own that logs in to a real server (PostgreSQL 15, MariaDB
// 10.11) and holds no AWS key and no master credential, a rotation makes
// another user while the predecessor still works, an unbind drops its
// user, and the deprovision leaves nothing. Real: moto's CloudFormation,
// RDS, Secrets Manager, EC2; the handler; the servers. Fake, named:
// fakeDatabaseUserFunction, for Lambda's running of the handler.
func TestClientBindsDatabaseUsersOnMoto(t *testing.T) {
	cfg := mototest.Config(t, "us-east-1")
	cloud := newAWSClients(cfg)
	ctx, cancel := waittest.Context(t)
	defer cancel()
	prefix := "osbdb" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")

	network := "net-" + prefix
	if _, err := cloud.cfn.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String(network), TemplateBody: aws.String(networkTemplate)}); err != nil {
		t.Fatal(err)
	}
	described, err := cloud.cfn.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(network)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range described.Stacks[0].Outputs {
		out[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}

	sm := secretsmanager.NewFromConfig(cfg)
	fake := &fakeDatabaseUserFunction{t: t, sm: sm, handler: &dbusers.Handler{Secrets: sm, Log: slog.New(slog.NewJSONHandler(os.Stderr, nil))},
		servers: map[string]dbtest.Server{"postgres": dbtest.Postgres(t), "mysql": dbtest.MariaDB(t)}}
	l, err := listenLoopback(t)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: fake, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	registerFunction(ctx, t, cfg, deploy.DatabaseUserFunctionName(prefix, out["VpcId"]), "http://"+l.Addr().String()+"/")

	b := apptest.StartWith(t, apptest.Options{
		Catalog: databaseUsersCatalog(t, out["VpcId"], out["SubnetIds"], out["GroupId"]),
		AWS:     func(context.Context) (aws.Config, error) { return cfg, nil },
		Getenv: func(k string) string {
			if k == "BROKER_STACK_PREFIX" {
				return prefix
			}
			return ""
		},
		Sleep: func(ctx context.Context, _ time.Duration) {},
	})
	c := client(t, b.URL)

	for _, tt := range []struct{ service, engine string }{{"aws-rds-postgresql", "postgres"}, {"aws-rds-mysql", "mysql"}} {
		t.Run(tt.service, func(t *testing.T) {
			service, plan := planOf(t, b, tt.service, "micro")
			e := &e2e{t: t, c: c, service: service}
			server := fake.servers[tt.engine]
			instanceID := uuid.NewString()
			r := e.provision(instanceID, plan, true, map[string]any{"DatabaseName": "app"})
			if state, desc := e.poll(instanceID, r.OperationKey); state != osb.StateSucceeded {
				t.Fatalf("provision ended %s: %s", state, desc)
			}
			stack, err := cloud.cfn.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(cfndriver.InstanceStackName(prefix, instanceID))})
			if err != nil {
				t.Fatal(err)
			}
			params := map[string]string{}
			for _, p := range stack.Stacks[0].Parameters {
				params[aws.ToString(p.ParameterKey)] = aws.ToString(p.ParameterValue)
			}
			if params["VpcId"] != out["VpcId"] || params["SubnetIds"] != out["SubnetIds"] || params["ClientSecurityGroupId"] != out["GroupId"] {
				t.Errorf("the instance's stack is not in the plan's network: %v", params)
			}
			// The database and its master secret, in moto; the secret's ARN is
			// the instance's private output, which no binding is handed.
			outputs := map[string]string{}
			for _, o := range stack.Stacks[0].Outputs {
				outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
			}
			database := func() (bool, error) {
				return cloud.moto.databaseExists(ctx, outputs["Host"], outputs["MasterUserSecretArn"])
			}
			if ok, err := database(); err != nil || !ok {
				t.Fatalf("the database the instance's outputs name does not exist in moto (%v)", err)
			}

			bind := func(id string, body map[string]any) map[string]any {
				t.Helper()
				rr := b.Do(apptest.Request{Method: http.MethodPut,
					Path: "/v2/service_instances/" + instanceID + "/service_bindings/" + id + "?accepts_incomplete=true", Body: body})
				if rr.Status != http.StatusAccepted {
					t.Fatalf("bind: %d %s", rr.Status, rr.Raw)
				}
				op := osb.OperationKey(rr.Str("operation"))
				if state := e.pollBinding(instanceID, id, &op); state != osb.StateSucceeded {
					lo := b.Do(apptest.Request{Method: http.MethodGet,
						Path: "/v2/service_instances/" + instanceID + "/service_bindings/" + id + "/last_operation?operation=" + string(op)})
					var reasons []string
					all, _ := cloud.cfn.ListStacks(ctx, &cloudformation.ListStacksInput{})
					for _, s := range all.StackSummaries {
						if !strings.HasPrefix(aws.ToString(s.StackName), prefix) {
							continue
						}
						ev, _ := cloud.cfn.DescribeStackEvents(ctx, &cloudformation.DescribeStackEventsInput{StackName: s.StackId})
						for _, e := range ev.StackEvents {
							if e.ResourceStatusReason != nil {
								reasons = append(reasons, aws.ToString(e.LogicalResourceId)+": "+aws.ToString(e.ResourceStatusReason))
							}
						}
					}
					t.Fatalf("bind ended %s: %s (the stacks' events: %v)", state, lo.Raw, reasons)
				}
				got, err := c.GetBinding(&osb.GetBindingRequest{InstanceID: instanceID, BindingID: id})
				if err != nil {
					t.Fatal(err)
				}
				return got.Credentials
			}
			logsIn := func(creds map[string]any) error {
				user, password := fmt.Sprint(creds["username"]), fmt.Sprint(creds["password"])
				if tt.engine == "postgres" {
					conn, err := dbtest.PgConnect(ctx, server, user, password)
					if err == nil {
						conn.Close(ctx)
					}
					return err
				}
				db, err := dbtest.MySQLConnect(server, user, password, server.Database)
				if err == nil {
					err = db.PingContext(ctx)
					db.Close()
				}
				return err
			}

			first := uuid.NewString()
			creds := bind(first, map[string]any{"service_id": service, "plan_id": plan, "parameters": map[string]any{"Privileges": "readwrite"},
				"bind_resource": map[string]any{"app_guid": "app-1"}})
			if err := dbusers.CheckName(fmt.Sprint(creds["username"])); err != nil || creds["password"] == "" || creds["uri"] == "" {
				t.Fatalf("the credentials hold no database user of the binding's: %v", keysOf(creds))
			}
			for _, k := range []string{"host", "port", "database_name", "uri"} {
				if v, _ := creds[k].(string); v == "" {
					t.Errorf("the credentials lack %s, which apps connect with (have %v)", k, keysOf(creds))
				}
			}
			for _, leaked := range []string{"access_key_id", "secret_access_key", "master_username", "master_password", "master_user_secret_arn"} {
				if _, ok := creds[leaked]; ok {
					t.Errorf("the credentials hand out %s", leaked)
				}
			}
			if strings.Contains(fmt.Sprint(creds), server.MasterPassword) || strings.Contains(fmt.Sprint(creds), outputs["MasterUserSecretArn"]) {
				t.Error("the credentials hold the master's password or its secret's ARN")
			}
			if err := logsIn(creds); err != nil {
				t.Fatalf("the binding's user cannot log in: %v", err)
			}

			second := uuid.NewString()
			next := bind(second, map[string]any{"service_id": service, "plan_id": plan, "predecessor_binding_id": first})
			if next["username"] == creds["username"] {
				t.Fatalf("the rotation handed out the predecessor's user %v", creds["username"])
			}
			for _, c := range []map[string]any{creds, next} {
				if err := logsIn(c); err != nil {
					t.Fatalf("after the rotation, %v cannot log in: %v", c["username"], err)
				}
			}

			unbind := func(id string) {
				t.Helper()
				ur, err := c.Unbind(&osb.UnbindRequest{InstanceID: instanceID, BindingID: id, ServiceID: service, PlanID: plan, AcceptsIncomplete: true})
				if err != nil {
					t.Fatalf("unbind: %v", err)
				}
				if state := e.pollBinding(instanceID, id, ur.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
					t.Fatalf("unbind ended %s", state)
				}
			}
			unbind(first)
			if err := logsIn(creds); err == nil {
				t.Errorf("the unbound user %v still logs in", creds["username"])
			}
			if err := logsIn(next); err != nil {
				t.Errorf("the successor went with its predecessor's unbind: %v", err)
			}
			unbind(second)
			if err := logsIn(next); err == nil {
				t.Errorf("the unbound successor %v still logs in", next["username"])
			}
			dr, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: instanceID, ServiceID: service, PlanID: plan, AcceptsIncomplete: true})
			if err != nil {
				t.Fatal(err)
			}
			if state, desc := e.poll(instanceID, dr.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
				t.Fatalf("deprovision ended %s: %s", state, desc)
			}
			for _, s := range stacksNamed(ctx, t, cloud.cfn, prefix) {
				if strings.HasPrefix(s, cfndriver.InstanceStackName(prefix, instanceID)) {
					t.Errorf("the stack %s outlived the deprovision", s)
				}
			}
			if ok, err := database(); err != nil || ok {
				t.Errorf("the database outlived the deprovision (%v)", err)
			}
		})
	}
}

// TestClientBindsDatabaseUsersOfAPlacedPlanOnMoto: an RDS PostgreSQL plan
// placed by space in two other accounts of moto, in another Region, with a
// network of the catalog in each (network: a list, one per place), binds
// database users through the real OSB client: each instance's stacks are in
// its space's account (none at home), in that account's network, and
// CloudFormation there calls that account's Custom::DatabaseUser function
// (the one the target stack deploys in that network's VPC,
// PREFIX-dbuser-VPC), whose user logs in to a real PostgreSQL and is gone
// after its unbind; the deprovisions leave nothing. Real: moto's STS,
// CloudFormation, RDS, Secrets Manager, EC2 in every account; the handler;
// the server. Fake, named: fakeDatabaseUserFunction, for Lambda's running
// of the handler in each target account.
func TestClientBindsDatabaseUsersOfAPlacedPlanOnMoto(t *testing.T) {
	ctx, cancel := waittest.Context(t)
	defer cancel()
	base := mototest.Config(t, "us-east-1")
	home := newAccount(ctx, t, base, "", "us-east-1")
	prefix := "osbpdb" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	server := dbtest.Postgres(t)

	// Each data account: its network, and its function, which reads and
	// writes that account's secrets, as the target stack's does there.
	type dataAccount struct {
		account
		space string
		net   map[string]string
		fake  *fakeDatabaseUserFunction
	}
	var data []dataAccount
	for _, space := range []string{"space-a", "space-b"} {
		a := dataAccount{account: newAccount(ctx, t, base, otherAccountID(), "eu-west-1"), space: space, net: map[string]string{}}
		name := "net-" + prefix
		body := strings.ReplaceAll(networkTemplate, "us-east-1", "eu-west-1")
		if _, err := a.clients.cfn.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String(name), TemplateBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
		described, err := a.clients.cfn.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range described.Stacks[0].Outputs {
			a.net[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
		}
		sm := secretsmanager.NewFromConfig(a.cfg)
		a.fake = &fakeDatabaseUserFunction{t: t, sm: sm, handler: &dbusers.Handler{Secrets: sm, Log: slog.New(slog.NewJSONHandler(os.Stderr, nil))},
			servers: map[string]dbtest.Server{"postgres": server}}
		l, err := listenLoopback(t)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: a.fake, ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
		registerFunction(ctx, t, a.cfg, deploy.DatabaseUserFunctionName(prefix, a.net["VpcId"]), "http://"+l.Addr().String()+"/")
		data = append(data, a)
	}

	catalog := servicesCatalogWith(t, func(doc map[string]any) {
		networks, places, names := map[string]any{}, map[string]any{}, []any{}
		for i, a := range data {
			name := fmt.Sprintf("data-%d", i)
			networks[name] = map[string]any{"account": a.id, "region": a.region, "vpc_id": a.net["VpcId"],
				"subnet_ids": strings.Split(a.net["SubnetIds"], ","), "client_security_group_id": a.net["GroupId"]}
			places[a.space] = map[string]any{"region": a.region, "role_arn": a.role, "external_id_env": "DATA_EXTERNAL_ID"}
			names = append(names, name)
		}
		doc["networks"] = networks
		for _, s := range doc["services"].([]any) {
			if s := s.(map[string]any); s["name"] == "aws-rds-postgresql" {
				for _, p := range s["plans"].([]any) {
					b := p.(map[string]any)["broker"].(map[string]any)
					b["network"] = names
					b["placement"] = map[string]any{"by": "space", "map": places}
				}
			}
		}
	})
	b := apptest.StartWith(t, apptest.Options{
		Catalog: catalog,
		AWS:     func(context.Context) (aws.Config, error) { return base, nil },
		Getenv: func(k string) string {
			return map[string]string{"BROKER_STACK_PREFIX": prefix, "DATA_EXTERNAL_ID": "test-external-id"}[k]
		},
		Sleep: func(ctx context.Context, _ time.Duration) {},
	})
	c := client(t, b.URL)
	service, plan := planOf(t, b, "aws-rds-postgresql", "micro")
	e := &e2e{t: t, c: c, service: service}

	for _, a := range data {
		t.Run(a.space, func(t *testing.T) {
			instanceID := uuid.NewString()
			r, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: instanceID, ServiceID: service, PlanID: plan, AcceptsIncomplete: true,
				OrganizationGUID: "org-1", SpaceGUID: a.space, Parameters: map[string]any{"DatabaseName": "app"},
				Context: map[string]any{"platform": "cloudfoundry", "organization_guid": "org-1", "space_guid": a.space}})
			if err != nil {
				t.Fatalf("provision: %v", err)
			}
			if state, desc := e.poll(instanceID, r.OperationKey); state != osb.StateSucceeded {
				t.Fatalf("provision ended %s: %s", state, desc)
			}
			stack, err := a.clients.cfn.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(cfndriver.InstanceStackName(prefix, instanceID))})
			if err != nil {
				t.Fatalf("the instance's stack is not in its space's account: %v", err)
			}
			params, outputs := map[string]string{}, map[string]string{}
			for _, p := range stack.Stacks[0].Parameters {
				params[aws.ToString(p.ParameterKey)] = aws.ToString(p.ParameterValue)
			}
			for _, o := range stack.Stacks[0].Outputs {
				outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
			}
			if params["VpcId"] != a.net["VpcId"] || params["SubnetIds"] != a.net["SubnetIds"] || params["ClientSecurityGroupId"] != a.net["GroupId"] {
				t.Errorf("the instance's stack is not in its account's network %v: %v", a.net, params)
			}
			if ok, err := a.clients.moto.databaseExists(ctx, outputs["Host"], outputs["MasterUserSecretArn"]); err != nil || !ok {
				t.Fatalf("the database the instance's outputs name does not exist in its account (%v)", err)
			}

			bindingID := uuid.NewString()
			rr := b.Do(apptest.Request{Method: http.MethodPut,
				Path: "/v2/service_instances/" + instanceID + "/service_bindings/" + bindingID + "?accepts_incomplete=true",
				Body: map[string]any{"service_id": service, "plan_id": plan, "parameters": map[string]any{"Privileges": "readwrite"},
					"bind_resource": map[string]any{"app_guid": "app-1"}}})
			if rr.Status != http.StatusAccepted {
				t.Fatalf("bind: %d %s", rr.Status, rr.Raw)
			}
			op := osb.OperationKey(rr.Str("operation"))
			if state := e.pollBinding(instanceID, bindingID, &op); state != osb.StateSucceeded {
				t.Fatalf("bind ended %s", state)
			}
			got, err := c.GetBinding(&osb.GetBindingRequest{InstanceID: instanceID, BindingID: bindingID})
			if err != nil {
				t.Fatal(err)
			}
			user, password := fmt.Sprint(got.Credentials["username"]), fmt.Sprint(got.Credentials["password"])
			if err := dbusers.CheckName(user); err != nil {
				t.Fatalf("the credentials hold no database user of the binding's: %v", keysOf(got.Credentials))
			}
			logsIn := func() error {
				conn, err := dbtest.PgConnect(ctx, server, user, password)
				if err == nil {
					conn.Close(ctx)
				}
				return err
			}
			if err := logsIn(); err != nil {
				t.Fatalf("the binding's user cannot log in: %v", err)
			}
			ur, err := c.Unbind(&osb.UnbindRequest{InstanceID: instanceID, BindingID: bindingID, ServiceID: service, PlanID: plan, AcceptsIncomplete: true})
			if err != nil {
				t.Fatalf("unbind: %v", err)
			}
			if state := e.pollBinding(instanceID, bindingID, ur.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
				t.Fatalf("unbind ended %s", state)
			}
			if err := logsIn(); err == nil {
				t.Errorf("the unbound user %s still logs in", user)
			}
			dr, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: instanceID, ServiceID: service, PlanID: plan, AcceptsIncomplete: true})
			if err != nil {
				t.Fatal(err)
			}
			if state, desc := e.poll(instanceID, dr.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
				t.Fatalf("deprovision ended %s: %s", state, desc)
			}
			a.fake.mu.Lock()
			events := slices.Clone(a.fake.events)
			a.fake.mu.Unlock()
			if !slices.Equal(events, []string{"Create", "Delete"}) {
				t.Errorf("the function of the instance's account got %v, want its binding's Create and Delete", events)
			}
			if ok, err := a.clients.moto.databaseExists(ctx, outputs["Host"], outputs["MasterUserSecretArn"]); err != nil || ok {
				t.Errorf("the database outlived the deprovision (%v)", err)
			}
		})
	}
	accounts := []account{home}
	for _, a := range data {
		accounts = append(accounts, a.account)
	}
	for _, a := range accounts {
		if left := stacksNamed(ctx, t, a.clients.cfn, prefix); len(left) != 0 {
			t.Errorf("stacks left in account %q: %v", a.id, left)
		}
	}
}

func keysOf(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func listenLoopback(t *testing.T) (net.Listener, error) {
	t.Helper()
	return net.Listen("tcp", "127.0.0.1:0")
}

// registerFunction makes, in moto's Lambda, the function the binding
// templates' ServiceToken names, with the fake's URL, where moto sends
// the requests (fix 18).
func registerFunction(ctx context.Context, t *testing.T, cfg aws.Config, name, url string) {
	t.Helper()
	role, err := iam.NewFromConfig(cfg).CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(name),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	var code bytes.Buffer
	z := zip.NewWriter(&code)
	w, _ := z.Create("bootstrap")
	_, _ = w.Write([]byte("#!/bin/sh\nexit 1\n"))
	_ = z.Close()
	if _, err := lambda.NewFromConfig(cfg).CreateFunction(ctx, &lambda.CreateFunctionInput{FunctionName: aws.String(name),
		Role: role.Role.Arn, Runtime: lambdatypes.RuntimeProvidedal2023, Handler: aws.String("bootstrap"),
		Code:        &lambdatypes.FunctionCode{ZipFile: code.Bytes()},
		Environment: &lambdatypes.Environment{Variables: map[string]string{"MOTO_CUSTOM_RESOURCE_URL": url}}}); err != nil {
		t.Fatal(err)
	}
}
