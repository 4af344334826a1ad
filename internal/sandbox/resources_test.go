package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/serverless-osb/broker/internal/mototest"
)

// testSandbox is a sandbox of the resource makers alone, on the suite's
// moto, whose clients lose the first answer of the first calls of each
// operation in lose (an operation named twice: its first two calls).
func testSandbox(t *testing.T, lose ...string) (*Sandbox, *mototest.LostAnswers) {
	t.Helper()
	l := &mototest.LostAnswers{}
	l.Lose(lose...)
	cfg := mototest.Config(t, "eu-west-2")
	id, err := sts.NewFromConfig(cfg).GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.APIOptions = append(cfg.APIOptions, l.Register)
	sb := &Sandbox{region: cfg.Region, account: *id.Account, clients: newClients(cfg), secrets: map[string]string{},
		stack: &stack{name: mototest.Name("Retried")}}
	return sb, l
}

// A create call the SDK retries because it lost the answer, after moto
// made the resource, finds the name taken. For a name the sandbox made up
// that is its own first attempt: the sandbox takes the resource and goes
// on, as it did before the retry (a make test run failed on the retried
// CreatePolicy of a stack's managed policy).
func TestACreateRetriedAfterItsAnswerWasLostTakesWhatItMade(t *testing.T) {
	ctx := context.Background()
	creates := []string{"CreateRole", "CreatePolicy", "CreateTable", "CreateStateMachine", "CreateSecret", "CreateBucket", "CreateStack", "CreateUser",
		"CreateStateMachine", "CreateAlias"}
	sb, lost := testSandbox(t, creates...)
	document := map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}}}
	pass := map[string]any{"StartAt": "A", "States": map[string]any{"A": map[string]any{"Type": "Pass", "End": true}}}
	trust := map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{"Effect": "Allow",
		"Principal": map[string]any{"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}}}

	role, err := makeRole(ctx, sb, "Role", map[string]any{"AssumeRolePolicyDocument": trust})
	if err != nil {
		t.Fatalf("role: %v", err)
	}
	if got, err := sb.clients.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: &role.ref}); err != nil || *got.Role.Arn != role.attrs["Arn"] || *got.Role.RoleId != role.attrs["RoleId"] {
		t.Errorf("role %v: IAM has %v, %v", role, got, err)
	}
	policy, err := makeManagedPolicy(ctx, sb, "Policy", map[string]any{"PolicyDocument": document, "Roles": []any{role.ref}})
	if err != nil {
		t.Fatalf("managed policy: %v", err)
	}
	if got, err := sb.clients.iam.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: &role.ref}); err != nil ||
		len(got.AttachedPolicies) != 1 || *got.AttachedPolicies[0].PolicyArn != policy.ref {
		t.Errorf("policy %s: the role has %v attached (%v)", policy.ref, got, err)
	}
	if sb.policies.managed[policy.ref] == "" {
		t.Errorf("policy %s: the sandbox's grants do not hold its document", policy.ref)
	}
	table, err := makeTable(ctx, sb, "Table", map[string]any{"BillingMode": "PAY_PER_REQUEST",
		"AttributeDefinitions": []any{map[string]any{"AttributeName": "pk", "AttributeType": "S"}},
		"KeySchema":            []any{map[string]any{"AttributeName": "pk", "KeyType": "HASH"}}})
	if err != nil {
		t.Fatalf("table: %v", err)
	}
	if got, err := sb.clients.dynamodb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table.ref}); err != nil || *got.Table.TableArn != table.attrs["Arn"] {
		t.Errorf("table %v: DynamoDB has %v, %v", table, got, err)
	}
	machine, err := makeStateMachine(ctx, sb, "Machine", map[string]any{"RoleArn": role.attrs["Arn"],
		"Definition": pass})
	if err != nil {
		t.Fatalf("state machine: %v", err)
	}
	if _, err := sb.clients.sfn.DescribeStateMachine(ctx, &sfn.DescribeStateMachineInput{StateMachineArn: &machine.ref}); err != nil {
		t.Errorf("state machine %s: %v", machine.ref, err)
	}
	secret, err := makeSecret(ctx, sb, "Secret", map[string]any{"SecretString": "s3cret"})
	if err != nil {
		t.Fatalf("secret: %v", err)
	}
	if got, err := sb.clients.secrets.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &secret.ref}); err != nil || *got.SecretString != "s3cret" || sb.secrets[secret.ref] != "s3cret" {
		t.Errorf("secret %s: %v, %v; the sandbox holds %q", secret.ref, got, err, sb.secrets[secret.ref])
	}
	bucket, err := makeBucket(ctx, sb, "Bucket", map[string]any{})
	if err != nil {
		t.Fatalf("bucket: %v", err)
	}
	if _, err := sb.clients.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &bucket.ref}); err != nil {
		t.Errorf("bucket %s: %v", bucket.ref, err)
	}
	cfn := cloudformation.NewFromConfig(mototest.Config(t, sb.region), func(o *cloudformation.Options) { o.APIOptions = append(o.APIOptions, lost.Register) })
	name := mototest.Name("retried-stack")
	body := `{"Resources":{"Handle":{"Type":"AWS::CloudFormation::WaitConditionHandle"}}}`
	stackOut, err := createStackOwn(ctx, cfn, &cloudformation.CreateStackInput{StackName: &name, TemplateBody: &body})
	if err != nil {
		t.Fatalf("stack: %v", err)
	}
	if !strings.Contains(aws.ToString(stackOut.StackId), name) {
		t.Errorf("stack %s: its id is %q", name, aws.ToString(stackOut.StackId))
	}
	user := mototest.Name("retried-user")
	if _, err := createOwn(true, func() (*iam.CreateUserOutput, error) {
		return sb.clients.iam.CreateUser(ctx, &iam.CreateUserInput{UserName: &user})
	},
		func() (*iam.CreateUserOutput, error) { return nil, nil }); err != nil {
		t.Fatalf("user: %v", err)
	}

	// Names the template gives, on the sandbox's own moto: the state
	// machines' (ServerlessOsb-operation...) and the sealing key's alias.
	named, err := makeStateMachine(ctx, sb, "Named", map[string]any{"RoleArn": role.attrs["Arn"], "StateMachineName": mototest.Name("Retried-operation"),
		"Definition": pass})
	if err != nil {
		t.Fatalf("a named state machine: %v", err)
	}
	if _, err := sb.clients.sfn.DescribeStateMachine(ctx, &sfn.DescribeStateMachineInput{StateMachineArn: &named.ref}); err != nil {
		t.Errorf("state machine %s: %v", named.ref, err)
	}
	key, err := makeKey(ctx, sb, "Key", map[string]any{"Description": "sealing"})
	if err != nil {
		t.Fatalf("key: %v", err)
	}
	alias, err := makeAlias(ctx, sb, "Alias", map[string]any{"AliasName": "alias/" + mototest.Name("Retried-sealing"), "TargetKeyId": key.ref})
	if err != nil {
		t.Fatalf("alias: %v", err)
	}
	if got, err := sb.clients.kms.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: &alias.ref}); err != nil || *got.KeyMetadata.KeyId != key.ref {
		t.Errorf("alias %s: names %v, %v; want key %s", alias.ref, got, err, key.ref)
	}

	// Each create's first answer was lost, so each was tried again
	// (moto's CreateStateMachine of a name it has, with the same
	// definition, answers as the first time).
	if got := lost.Lost(); strings.Join(got, " ") != strings.Join(creates, " ") {
		t.Errorf("answers lost: %v, want the first of each of %v", got, creates)
	}
}

// A name the template gives twice is an error, as in CloudFormation: the
// second resource finds it taken, retried or not. So is one that a run
// before made on a kept moto (takeUp takes up what it kept).
func TestANameTheTemplateGivesTwiceStaysAnError(t *testing.T) {
	ctx := context.Background()
	sb, _ := testSandbox(t)
	trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}`
	props := map[string]any{"RoleName": mototest.Name("named"), "AssumeRolePolicyDocument": trust}
	if _, err := makeRole(ctx, sb, "Role", props); err != nil {
		t.Fatal(err)
	}
	_, err := makeRole(ctx, sb, "Other", props)
	var taken *iamtypes.EntityAlreadyExistsException
	if !errors.As(err, &taken) {
		t.Errorf("a second role named %s: %v, want EntityAlreadyExists", props["RoleName"], err)
	}

	kept, _ := testSandbox(t)
	kept.Kept = true
	props = map[string]any{"RoleName": mototest.Name("named"), "AssumeRolePolicyDocument": trust}
	if _, err := kept.clients.iam.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(props["RoleName"].(string)), AssumeRolePolicyDocument: &trust}); err != nil {
		t.Fatal(err)
	}
	if _, err := makeRole(ctx, kept, "Role", props); !errors.As(err, &taken) {
		t.Errorf("a role named %s that a kept moto has: %v, want EntityAlreadyExists", props["RoleName"], err)
	}
}
