//go:build !osb_without_roles

// Placed plans on moto: with roles only, as placement_roles_test.go.

package cloudformation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	cfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/store/bolt"
)

// recordingSTS is moto's STS, with the AssumeRole requests kept: moto
// checks no external id, so the test reads what the driver sent.
type recordingSTS struct {
	*sts.Client
	mu     sync.Mutex
	inputs []sts.AssumeRoleInput
}

func (r *recordingSTS) AssumeRole(ctx context.Context, in *sts.AssumeRoleInput, optFns ...func(*sts.Options)) (*sts.AssumeRoleOutput, error) {
	r.mu.Lock()
	r.inputs = append(r.inputs, *in)
	r.mu.Unlock()
	return r.Client.AssumeRole(ctx, in, optFns...)
}

// motoPlace is a driver on moto whose plan (the SQS queue's, its instance
// template given) is placed in a fresh account of moto, in eu-west-1,
// through that account's role (moto gives any role's account credentials,
// and keeps each account's resources apart).
type motoPlace struct {
	ctx      context.Context
	driver   *Driver
	settings *Settings
	plan     *catalog.Plan
	account  string
	// home and there reach the broker's own account and the target's.
	home, there aws.Config
	sts         *recordingSTS
	// calls counts the driver's calls (its Secrets Manager's reads).
	calls  *mototest.Calls
	logs   *bytes.Buffer
	prefix string
}

func newMotoPlace(t *testing.T, instanceTemplate string, placement map[string]any) *motoPlace {
	t.Helper()
	ctx := context.Background()
	base := mototest.Config(t, "us-east-1")
	m := &motoPlace{ctx: ctx, home: base, logs: &bytes.Buffer{},
		account: fmt.Sprintf("%d%011d", 2+rand.IntN(7), rand.Int64N(1e11)),
		prefix:  fmt.Sprintf("osbplaced%06d", rand.IntN(1e6))}
	role := "arn:aws:iam::" + m.account + ":role/osb-target"
	m.there = base.Copy()
	m.there.Region = "eu-west-1"
	m.there.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(sts.NewFromConfig(base), role,
		func(o *stscreds.AssumeRoleOptions) { o.ExternalID = aws.String("test-only") }))

	plan, dir := shippedPlan(t, "sqs-queue")
	files := map[string]string{"sqs-queue/instance.yaml": instanceTemplate,
		"sqs-queue/binding.yaml": mustRead(t, filepath.Join(dir, "sqs-queue/binding.yaml"))}
	config := maps.Clone(plan.Settings.Config)
	p := map[string]any{"region": "eu-west-1", "role_arn": role}
	maps.Copy(p, placement)
	config[KeyPlacement] = p
	settings, err := Configure(plan, config, templateDir(t, files))
	if err != nil {
		t.Fatalf("Configure: %v", err)
	}
	m.settings, m.plan = settings, plan

	store, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	m.driver = New(cfn.NewFromConfig(base), store, Deployment{StackPrefix: m.prefix},
		slog.New(slog.NewJSONHandler(m.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	m.sts = &recordingSTS{Client: sts.NewFromConfig(base)}
	m.calls = &mototest.Calls{ByService: true}
	counted := base.Copy()
	counted.APIOptions = append(counted.APIOptions, m.calls.Register)
	m.driver.Clients = NewClients(counted)
	m.driver.Clients.Roles = AssumeWith(m.sts)
	if m.driver.Roles, err = RolesOf([]*Settings{settings}); err != nil {
		t.Fatal(err)
	}
	return m
}

func (m *motoPlace) change(inst broker.Instance, kind broker.OperationKind, opID string) broker.Change {
	return broker.Change{Operation: broker.Operation{ID: opID, InstanceID: inst.ID, Kind: kind, Async: true},
		Instance: inst, Plan: &catalog.Plan{ID: m.plan.ID, Name: m.plan.Name}, Settings: m.settings}
}

func (m *motoPlace) instance(name string) broker.Instance {
	return broker.Instance{ID: mototest.Name(name), InstanceRequest: broker.InstanceRequest{ServiceID: "svc", PlanID: m.plan.ID,
		Parameters: json.RawMessage(`{"VisibilityTimeout":60}`), MaintenanceInfo: &broker.MaintenanceInfo{Version: "0.9.0"}}}
}

// TestTheExternalIDComesFromSecretsManagerOnMoto: a placement whose
// external id is in a secret of Secrets Manager (external_id_secret, by
// name) reads it once, with the broker's own credentials, gives it to STS
// with the role, and makes the stack in the role's account; the id is in
// no log line. A secret that is not there fails the operation naming the
// secret and the likely causes, and nothing is made.
func TestTheExternalIDComesFromSecretsManagerOnMoto(t *testing.T) {
	ctx := context.Background()
	_, dir := shippedPlan(t, "sqs-queue")
	secretName := "osb/" + mototest.Name("payments-external-id")
	const externalID = "payments-7f3a-from-the-secret"
	m := newMotoPlace(t, mustRead(t, filepath.Join(dir, "sqs-queue/instance.yaml")), map[string]any{"external_id_secret": secretName})
	if _, err := secretsmanager.NewFromConfig(m.home).CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name: aws.String(secretName), SecretString: aws.String(externalID + "\n")}); err != nil {
		t.Fatal(err)
	}

	inst := m.instance("secret-id")
	name := InstanceStackName(m.prefix, inst.ID)
	run(t, m.driver, m.change(inst, broker.KindProvision, "op-provision"))
	t.Run("the stack is in the role's account", func(t *testing.T) {
		if s := describeInMoto(t, cfn.NewFromConfig(m.there), name); s == nil || s.StackStatus != types.StackStatusCreateComplete {
			t.Fatalf("the stack in account %s: %+v", m.account, s)
		}
		if s := describeInMoto(t, cfn.NewFromConfig(m.home), name); s != nil {
			t.Errorf("a stack %s in the broker's account", name)
		}
	})
	t.Run("STS was given the secret's external id with the role", func(t *testing.T) {
		if len(m.sts.inputs) == 0 {
			t.Fatal("no AssumeRole")
		}
		for _, in := range m.sts.inputs {
			if aws.ToString(in.ExternalId) != externalID {
				t.Errorf("AssumeRole of %s with an external id of %d characters, want the secret's (%d)",
					aws.ToString(in.RoleArn), len(aws.ToString(in.ExternalId)), len(externalID))
			}
		}
	})

	run(t, m.driver, m.change(inst, broker.KindDeprovision, "op-deprovision"))
	t.Run("the secret was read once, for both operations", func(t *testing.T) {
		if n := m.calls.Take()["Secrets Manager.GetSecretValue"]; n != 1 {
			t.Errorf("%d reads of the secret, want 1", n)
		}
		if s := describeInMoto(t, cfn.NewFromConfig(m.there), name); s != nil {
			t.Errorf("the stack is still there: %s", s.StackStatus)
		}
	})
	t.Run("no log line holds the external id", func(t *testing.T) {
		if strings.Contains(m.logs.String(), externalID) {
			t.Errorf("logs: %s", m.logs)
		}
	})

	t.Run("a secret that is not there fails the operation naming it, and nothing is made", func(t *testing.T) {
		missing := newMotoPlace(t, mustRead(t, filepath.Join(dir, "sqs-queue/instance.yaml")), map[string]any{"external_id_secret": "osb/no-such-secret"})
		inst := missing.instance("no-secret")
		_, err := missing.driver.Begin(ctx, missing.change(inst, broker.KindProvision, "op-provision"))
		f := failureOf(t, err)
		for _, want := range []string{"could not read the external id of the role arn:aws:iam::" + missing.account + ":role/osb-target",
			"from the secret osb/no-such-secret", "ResourceNotFoundException"} {
			if !strings.Contains(f.Description, want) {
				t.Errorf("description %q lacks %q", f.Description, want)
			}
		}
		if len(missing.sts.inputs) != 0 {
			t.Errorf("%d AssumeRole calls without an external id", len(missing.sts.inputs))
		}
		if s := describeInMoto(t, cfn.NewFromConfig(missing.there), InstanceStackName(missing.prefix, inst.ID)); s != nil {
			t.Errorf("a stack was made: %s", s.StackStatus)
		}
	})
}

// TestATemplateOverTheBodyLimitOnAPlacedPlanOnMoto: a template over
// CloudFormation's TemplateBody limit, on a plan placed in another
// account and Region (which failed before, the templates' bucket being
// the broker's), goes to the bucket the target stack makes in that
// account and Region (deploy.TargetTemplateBucket), written with the
// assumed role's credentials, and the stack there runs it, for a creation
// and an upgrade's change set. Without that bucket, the operation fails
// saying to deploy the target stack.
func TestATemplateOverTheBodyLimitOnAPlacedPlanOnMoto(t *testing.T) {
	ctx := context.Background()
	_, dir := shippedPlan(t, "sqs-queue")
	body := mustRead(t, filepath.Join(dir, "sqs-queue/instance.yaml"))
	big := body + "\n# " + strings.Repeat("Comments count towards CloudFormation's template size. ", MaxTemplateBody/50) + "\n"
	if len(big) <= MaxTemplateBody {
		t.Fatalf("the test's template is %d bytes, not over %d", len(big), MaxTemplateBody)
	}
	m := newMotoPlace(t, big, map[string]any{"external_id": "payments-7f3a"})
	bucket := deploy.TargetTemplateBucket(m.prefix, m.account, "eu-west-1")
	// What the target stack makes there.
	s3There := s3.NewFromConfig(m.there, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := s3There.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket),
		CreateBucketConfiguration: &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraintEuWest1}}); err != nil {
		t.Fatal(err)
	}

	inst := m.instance("big-placed")
	name := InstanceStackName(m.prefix, inst.ID)
	there := cfn.NewFromConfig(m.there)
	run(t, m.driver, m.change(inst, broker.KindProvision, "op-provision"))
	if s := describeInMoto(t, there, name); s == nil || s.StackStatus != types.StackStatusCreateComplete {
		t.Fatalf("the stack in account %s: %+v", m.account, s)
	}
	t.Run("the stack there runs the template, which is in the target account's bucket", func(t *testing.T) {
		if got := stackTemplate(t, there, name); got != big {
			t.Errorf("the stack runs a template of %d bytes, not the %d-byte one", len(got), len(big))
		}
		objects, err := s3There.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("templates/sha256-")})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, o := range objects.Contents {
			got, err := s3There.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: o.Key})
			if err != nil {
				t.Fatal(err)
			}
			text, _ := io.ReadAll(got.Body)
			got.Body.Close()
			found = found || string(text) == big
		}
		if !found {
			t.Errorf("no object of %s holds the template (%d objects)", bucket, len(objects.Contents))
		}
		if s := describeInMoto(t, cfn.NewFromConfig(m.home), name); s != nil {
			t.Errorf("a stack %s in the broker's account", name)
		}
	})
	t.Run("an upgrade's change set takes it from there too", func(t *testing.T) {
		update := m.change(inst, broker.KindUpdate, "op-upgrade")
		update.Operation.Target = &broker.Target{MaintenanceInfo: &broker.MaintenanceInfo{Version: "1.0.0"}}
		run(t, m.driver, update)
		if s := describeInMoto(t, there, name); s == nil || s.StackStatus != types.StackStatusUpdateComplete {
			t.Fatalf("the stack after the upgrade: %+v", s)
		}
	})
	run(t, m.driver, m.change(inst, broker.KindDeprovision, "op-deprovision"))
	if s := describeInMoto(t, there, name); s != nil {
		t.Fatalf("the stack after deprovision: %s", s.StackStatus)
	}

	t.Run("without the target stack's bucket, the operation fails saying so", func(t *testing.T) {
		bare := newMotoPlace(t, big, map[string]any{"external_id": "payments-7f3a"})
		inst := bare.instance("big-bare")
		_, err := bare.driver.Begin(ctx, bare.change(inst, broker.KindProvision, "op-provision"))
		f := failureOf(t, err)
		want := "the bucket for templates " + deploy.TargetTemplateBucket(bare.prefix, bare.account, "eu-west-1") + " does not exist"
		if !strings.Contains(f.Description, want) || !strings.Contains(f.Description, "deploy the target stack") {
			t.Errorf("description %q, want %q and what to do", f.Description, want)
		}
	})
}
