//go:build !lambda.norpc

package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awscfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/env"
	"github.com/serverless-osb/broker/internal/mototest"
)

// TestOpsAuditFindsBindingUsersToFixOrRemove runs ops audit on moto's IAM
// and CloudFormation, as an operator would: of the users under
// /serverless-osb/ named after this broker's prefix, one without the
// boundary in a live binding stack (made before the boundary existed), one
// no stack holds (its stack gone), and one made by hand without the
// boundary are found, each with the commands that fix or remove it; the
// user of a live binding stack with the boundary is not, nor the users of
// a deployment whose prefix extends this one's or outside the path. Run
// as printed, the commands leave nothing to find.
func TestOpsAuditFindsBindingUsersToFixOrRemove(t *testing.T) {
	ctx := context.Background()
	const region = "eu-west-1"
	cfg := mototest.Config(t, region)
	iamClient, cfnClient := iam.NewFromConfig(cfg), awscfn.NewFromConfig(cfg)
	// A prefix of this run's own: moto's IAM is the account's, shared
	// with every test on it.
	prefix := "aud" + strings.NewReplacer("-", "").Replace(strings.TrimPrefix(mototest.Name(""), "-"))
	policy := func(name string) string {
		out, err := iamClient.CreatePolicy(ctx, &iam.CreatePolicyInput{PolicyName: aws.String(mototest.Name(name)),
			PolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"*"}]}`)})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.Policy.Arn)
	}
	boundary, other := policy("boundary"), policy("other")

	// Binding stacks, as the driver names them, each making its user.
	stackUser := func(stack, withBoundary string) string {
		props := `"Path":"/serverless-osb/"`
		if withBoundary != "" {
			props += fmt.Sprintf(`,"PermissionsBoundary":%q`, withBoundary)
		}
		body := fmt.Sprintf(`{"Resources":{"User":{"Type":"AWS::IAM::User","Properties":{%s}}}}`, props)
		if _, err := cfnClient.CreateStack(ctx, &awscfn.CreateStackInput{StackName: aws.String(stack), TemplateBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
		out, err := cfnClient.DescribeStackResources(ctx, &awscfn.DescribeStackResourcesInput{StackName: aws.String(stack)})
		if err != nil || len(out.StackResources) != 1 {
			t.Fatalf("stack %s: %v %v", stack, out, err)
		}
		return aws.ToString(out.StackResources[0].PhysicalResourceId)
	}
	good := stackUser(prefix+"-i-1-b-good", boundary)
	old := stackUser(prefix+"-i-2-b-old", "")
	// Users no stack holds: one under the boundary with a key and a
	// policy, its stack gone; one made by hand with another boundary; one
	// with none.
	user := func(name, withBoundary, path string) string {
		in := &iam.CreateUserInput{UserName: aws.String(name), Path: aws.String(path)}
		if withBoundary != "" {
			in.PermissionsBoundary = aws.String(withBoundary)
		}
		if _, err := iamClient.CreateUser(ctx, in); err != nil {
			t.Fatal(err)
		}
		return name
	}
	gone := user(prefix+"-i-3-b-gone-User-0A1B2C3D", boundary, "/serverless-osb/")
	key, err := iamClient.CreateAccessKey(ctx, &iam.CreateAccessKeyInput{UserName: aws.String(gone)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := iamClient.PutUserPolicy(ctx, &iam.PutUserPolicyInput{UserName: aws.String(gone), PolicyName: aws.String("binding"),
		PolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"*"}]}`)}); err != nil {
		t.Fatal(err)
	}
	byHand := user(prefix+"-by-hand", other, "/serverless-osb/")
	unbounded := user(prefix+"-unbounded", "", "/serverless-osb/")
	user(prefix+"x-i-1-b-other-deployment", "", "/serverless-osb/")
	user(prefix+"-elsewhere", "", "/other/")

	for name, value := range map[string]string{
		"AWS_ENDPOINT_URL": mototest.Endpoint(t), "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
		"AWS_REGION": region, env.Table: "", env.StackPrefix: prefix, env.PermissionsBoundaryARN: boundary,
	} {
		t.Setenv(name, value)
	}
	audit := func(t *testing.T, args ...string) (app.AuditReport, string, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		err := app.RunCommand(ctx, append([]string{"ops"}, args...), &out, &errOut)
		var report app.AuditReport
		if slices.Contains(args, "--json") {
			if jerr := json.Unmarshal(out.Bytes(), &report); jerr != nil {
				t.Fatalf("ops %v: %v\n%s", args, jerr, out.String())
			}
		}
		return report, out.String(), err
	}

	wantProblems := map[string][]string{
		old:       {"it has no permissions boundary"},
		gone:      {fmt.Sprintf("no live stack of this broker (%s-…) holds it", prefix)},
		byHand:    {"its permissions boundary is " + other + ", not the broker's", fmt.Sprintf("no live stack of this broker (%s-…) holds it", prefix)},
		unbounded: {"it has no permissions boundary", fmt.Sprintf("no live stack of this broker (%s-…) holds it", prefix)},
	}
	var report app.AuditReport
	t.Run("JSON: the users to fix or remove, with their problems, and no other", func(t *testing.T) {
		var err error
		report, _, err = audit(t, "--json", "audit")
		if !errors.Is(err, app.ErrAuditFound) || app.ExitCode(err) != 1 {
			t.Errorf("error %v (exit %d), want ErrAuditFound, exit 1", err, app.ExitCode(err))
		}
		if report.Checked != 5 || report.Scope.Prefix != prefix || report.Scope.Boundary != boundary {
			t.Errorf("checked %d users in %+v, want 5 in %s with %s", report.Checked, report.Scope, prefix, boundary)
		}
		got := map[string][]string{}
		for _, f := range report.Findings {
			got[f.User] = f.Problems
		}
		for u, want := range wantProblems {
			if !slices.Equal(got[u], want) {
				t.Errorf("%s: problems %q, want %q", u, got[u], want)
			}
		}
		if len(got) != len(wantProblems) {
			t.Errorf("found %v, want exactly %v (not %s, whose stack is live and bounded)", got, wantProblems, good)
		}
	})
	commands := map[string][]string{}
	for _, f := range report.Findings {
		commands[f.User] = f.Commands
	}
	t.Run("each with the aws CLI commands that bound it (its stack live) or delete it", func(t *testing.T) {
		want := map[string][]string{
			old: {"aws iam put-user-permissions-boundary --user-name " + old + " --permissions-boundary " + boundary},
			gone: {"aws iam delete-access-key --user-name " + gone + " --access-key-id " + aws.ToString(key.AccessKey.AccessKeyId),
				"aws iam delete-user-policy --user-name " + gone + " --policy-name binding",
				"aws iam delete-user --user-name " + gone},
			unbounded: {"aws iam delete-user --user-name " + unbounded},
		}
		for u, w := range want {
			if !slices.Equal(commands[u], w) {
				t.Errorf("%s: commands %q, want %q", u, commands[u], w)
			}
		}
	})
	t.Run("text: a line per user, then its commands; exit 1", func(t *testing.T) {
		_, text, err := audit(t, "audit")
		if app.ExitCode(err) != 1 {
			t.Errorf("exit %d (%v), want 1", app.ExitCode(err), err)
		}
		for u, cs := range commands {
			if !strings.Contains(text, u) {
				t.Errorf("the text does not name %s:\n%s", u, text)
			}
			for _, c := range cs {
				if !strings.Contains(text, "  "+c+"\n") {
					t.Errorf("the text does not say %q:\n%s", c, text)
				}
			}
		}
		if strings.Contains(text, good) {
			t.Errorf("the text names %s, whose stack is live and bounded:\n%s", good, text)
		}
	})
	t.Run("--stack reads the prefix and boundary from the broker stack's outputs", func(t *testing.T) {
		broker := mototest.Name("broker")
		body := fmt.Sprintf(`{"Resources":{"Queue":{"Type":"AWS::SQS::Queue"}},"Outputs":{%q:{"Value":%q},%q:{"Value":%q},%q:{"Value":%q}}}`,
			app.OutputStackPrefix, prefix, app.OutputPermissionsBoundary, boundary, app.OutputRegion, region)
		if _, err := cfnClient.CreateStack(ctx, &awscfn.CreateStackInput{StackName: aws.String(broker), TemplateBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
		t.Setenv(env.StackPrefix, "")
		t.Setenv(env.PermissionsBoundaryARN, "")
		r, _, err := audit(t, "--stack", broker, "--json", "audit")
		if !errors.Is(err, app.ErrAuditFound) || len(r.Findings) != len(wantProblems) || r.Scope.Boundary != boundary {
			t.Errorf("%+v %v, want the same %d findings", r, err, len(wantProblems))
		}
	})
	t.Run("the commands run as printed leave nothing to find: exit 0", func(t *testing.T) {
		for _, cs := range commands {
			for _, c := range cs {
				runIAMCommand(ctx, t, iamClient, c)
			}
		}
		_, text, err := audit(t, "audit")
		if err != nil || !strings.Contains(text, "0 to fix or remove") {
			t.Errorf("after the fixes: %v\n%s", err, text)
		}
	})
}

// runIAMCommand runs one of ops audit's aws CLI commands through the SDK
// (no aws CLI here): its subcommand and --flags, as the CLI reads them.
func runIAMCommand(ctx context.Context, t *testing.T, c *iam.Client, command string) {
	t.Helper()
	f := strings.Fields(command)
	if len(f) < 3 || f[0] != "aws" || f[1] != "iam" {
		t.Fatalf("not an aws iam command: %s", command)
	}
	flags := map[string]*string{}
	for i := 3; i+1 < len(f); i += 2 {
		flags[f[i]] = aws.String(f[i+1])
	}
	user := flags["--user-name"]
	var err error
	switch f[2] {
	case "put-user-permissions-boundary":
		_, err = c.PutUserPermissionsBoundary(ctx, &iam.PutUserPermissionsBoundaryInput{UserName: user, PermissionsBoundary: flags["--permissions-boundary"]})
	case "delete-access-key":
		_, err = c.DeleteAccessKey(ctx, &iam.DeleteAccessKeyInput{UserName: user, AccessKeyId: flags["--access-key-id"]})
	case "delete-user-policy":
		_, err = c.DeleteUserPolicy(ctx, &iam.DeleteUserPolicyInput{UserName: user, PolicyName: flags["--policy-name"]})
	case "delete-user":
		_, err = c.DeleteUser(ctx, &iam.DeleteUserInput{UserName: user})
	default:
		t.Fatalf("no SDK call for %s", command)
	}
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
}
