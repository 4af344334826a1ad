package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awscfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/env"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/sealing"
	"github.com/serverless-osb/broker/internal/store/dynamo"
)

// TestOpsWorksOnTheBrokerAStackDeployed runs `ops --stack NAME` as an
// operator would against a deployed broker, here one whose table, state
// machines and stack (with the broker stack's outputs) are on moto: the
// command finds the table and the workflows from the stack's outputs alone.
func TestOpsWorksOnTheBrokerAStackDeployed(t *testing.T) {
	ctx := context.Background()
	const region = "eu-west-1"
	cfg := mototest.Config(t, region)
	table := mototest.Name("ops")
	if err := dynamo.CreateTable(ctx, dynamodb.NewFromConfig(cfg), table); err != nil {
		t.Fatal(err)
	}
	def, err := os.ReadFile(filepath.Join(apptest.Root(), "statemachines", "operation.asl.json"))
	if err != nil {
		t.Fatal(err)
	}
	sfnClient := awssfn.NewFromConfig(cfg)
	var arns []string
	for _, name := range []string{"operation", "cleanup"} {
		sm, err := sfnClient.CreateStateMachine(ctx, &awssfn.CreateStateMachineInput{
			Name:       aws.String(mototest.Name(name)),
			Definition: aws.String(strings.ReplaceAll(string(def), "${WorkerFunctionArn}", "arn:aws:lambda:eu-west-1:123456789012:function:worker")),
			RoleArn:    aws.String("arn:aws:iam::123456789012:role/states"),
		})
		if err != nil {
			t.Fatal(err)
		}
		arns = append(arns, aws.ToString(sm.StateMachineArn))
	}
	// The upgrade from a stack whose table key sealed the secrets: a value
	// sealed under that key, and the stack's sealing key now another.
	kmsClient := kms.NewFromConfig(cfg)
	var keys []string
	for range 2 {
		k, err := kmsClient.CreateKey(ctx, &kms.CreateKeyInput{})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, aws.ToString(k.KeyMetadata.Arn))
	}
	tableKey, sealingKey := keys[0], keys[1]
	oldSealer, err := sealing.NewKMS(sealing.KMSConfig{Client: kmsClient, KeyID: tableKey,
		SharedDataKeys: true, SharedContext: map[string]string{deploy.SealingContextKey: table}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	provOp := broker.Operation{ID: "op-prov", InstanceID: "i-sealed", Kind: broker.KindProvision, State: broker.OperationSucceeded,
		PlanID: "p", CreatedAt: now, UpdatedAt: now, FinishedAt: now, ExpiresAt: now.Add(broker.Retention)}
	ready := broker.Instance{ID: "i-sealed", InstanceRequest: broker.InstanceRequest{ServiceID: "s", PlanID: "p"}, State: broker.InstanceReady,
		LastOp: provOp.ID, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := dynamo.New(dynamodb.NewFromConfig(cfg), table).CreateInstance(ctx, ready, provOp, &broker.Settled{}); err != nil {
		t.Fatal(err)
	}
	bindOp := broker.Operation{ID: "op-bind", InstanceID: "i-sealed", BindingID: "b-sealed", Kind: broker.KindBind,
		State: broker.OperationSucceeded, CreatedAt: now, UpdatedAt: now, FinishedAt: now, ExpiresAt: now.Add(broker.Retention)}
	sealed := broker.Binding{InstanceID: "i-sealed", ID: "b-sealed", BindingRequest: broker.BindingRequest{ServiceID: "s", PlanID: "p"}, State: broker.BindingReady, LastOp: bindOp.ID,
		Credentials: broker.Credentials{"password": "sealed-under-the-table-key"}, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := sealing.NewStore(dynamo.New(dynamodb.NewFromConfig(cfg), table), oldSealer).CreateBinding(ctx, sealed, bindOp, &broker.Settled{InstanceVersion: 1}); err != nil {
		t.Fatal(err)
	}

	stack := mototest.Name("broker")
	template := fmt.Sprintf(`{"Resources":{"Queue":{"Type":"AWS::SQS::Queue"}},"Outputs":{
		%q:{"Value":%q},%q:{"Value":%q},%q:{"Value":%q},%q:{"Value":%q},%q:{"Value":%q}}}`,
		app.OutputTable, table, app.OutputOperationStateMachine, arns[0], app.OutputCleanupStateMachine, arns[1], app.OutputRegion, region,
		app.OutputSealingKey, sealingKey)
	if _, err := awscfn.NewFromConfig(cfg).CreateStack(ctx, &awscfn.CreateStackInput{StackName: aws.String(stack), TemplateBody: aws.String(template)}); err != nil {
		t.Fatal(err)
	}

	// An operation in progress on the deployed broker, overdue.
	store := dynamo.New(dynamodb.NewFromConfig(cfg), table)
	long := time.Now().UTC().Add(-time.Hour)
	op := broker.Operation{ID: "op-stuck", InstanceID: "i-stuck", Kind: broker.KindProvision, State: broker.OperationInProgress,
		Async: true, PlanID: "p", CreatedAt: long, UpdatedAt: long, NextCheckAt: long}
	inst := broker.Instance{ID: "i-stuck", InstanceRequest: broker.InstanceRequest{ServiceID: "s", PlanID: "p"}, State: broker.InstanceProvisioning, Op: op.ID, LastOp: op.ID,
		Version: 1, CreatedAt: long, UpdatedAt: long}
	if err := store.CreateInstance(ctx, inst, op, nil); err != nil {
		t.Fatal(err)
	}

	for name, value := range map[string]string{
		"AWS_ENDPOINT_URL": mototest.Endpoint(t), "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
		"AWS_REGION": region, env.Catalog: filepath.Join(apptest.Root(), "catalog.yaml"),
		env.Table: "", env.DynamoDBEndpoint: "",
	} {
		t.Setenv(name, value)
	}
	var out, errOut bytes.Buffer
	if err := app.RunCommand(ctx, []string{"ops", "--stack", stack, "operations"}, &out, &errOut); err != nil {
		t.Fatalf("ops --stack %s operations: %v\n%s", stack, err, errOut.String())
	}
	if !strings.Contains(out.String(), "op-stuck") || !strings.Contains(out.String(), "i-stuck") || !strings.Contains(out.String(), "STUCK") {
		t.Errorf("ops operations did not list the stuck operation of the stack's table:\n%s", out.String())
	}
	if want := fmt.Sprintf("ops: the broker of stack %s (table %s in %s), catalog %s\n", stack, table, region, filepath.Join(apptest.Root(), "catalog.yaml")); errOut.String() != want {
		t.Errorf("ops --stack said on stderr\n%s\nwant only\n%s", errOut.String(), want)
	}

	out.Reset()
	if err := app.RunCommand(ctx, []string{"ops", "--stack", stack, "--json", "reseal"}, &out, &errOut); err != nil {
		t.Fatalf("ops --stack %s reseal: %v\n%s", stack, err, errOut.String())
	}
	var rep sealing.ResealReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.KeyID != sealingKey || rep.Resealed != 1 || !rep.SealedOnly {
		t.Errorf("reseal: %+v %v, want the value sealed under the table key moved under the sealing key, and values in clear refused", rep, err)
	}
	newSealer, err := sealing.NewKMS(sealing.KMSConfig{Client: kmsClient, KeyID: sealingKey,
		SharedDataKeys: true, SharedContext: map[string]string{deploy.SealingContextKey: table}})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := sealing.NewStore(store, newSealer).GetBinding(ctx, "i-sealed", "b-sealed"); err != nil || b.Credentials["password"] != "sealed-under-the-table-key" {
		t.Errorf("after the reseal: %v %v", b.Credentials, err)
	}

	out.Reset()
	err = app.RunCommand(ctx, []string{"ops", "--stack", mototest.Name("nobroker"), "operations"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "nobroker") {
		t.Errorf("ops on a stack that does not exist: %v, want an error naming it", err)
	}
}
