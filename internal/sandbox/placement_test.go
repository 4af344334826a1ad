package sandbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/osbtest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// stacksOf names the live stacks of an account and Region tagged with the
// instance.
func stacksOf(ctx context.Context, t *testing.T, cfg aws.Config, instance string) []string {
	t.Helper()
	var names []string
	p := cloudformation.NewDescribeStacksPaginator(cloudformation.NewFromConfig(cfg), &cloudformation.DescribeStacksInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Stacks {
			if s.StackStatus != cfntypes.StackStatusDeleteComplete &&
				slices.ContainsFunc(s.Tags, func(tag cfntypes.Tag) bool { return aws.ToString(tag.Value) == instance }) {
				names = append(names, aws.ToString(s.StackName))
			}
		}
	}
	return names
}

// bucketsOf lists an account's buckets (S3 lists only the caller's own).
func bucketsOf(ctx context.Context, t *testing.T, cfg aws.Config) []string {
	t.Helper()
	out, err := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }).ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range out.Buckets {
		names = append(names, aws.ToString(b.Name))
	}
	return names
}

// TestAPlacedInstanceLivesInTheTargetAccount: the sandbox deployed the
// target stack into a second account of moto (IAM enforced there as in the
// broker's); the real OSB client provisions, binds, unbinds and
// deprovisions an S3 instance of the plan placed there. The worker
// assumes the target stack's role (with the catalog's external id) and
// makes the stacks under that account's service role: the stacks, the
// bucket and the binding's user exist in that account and Region only,
// and are gone after. What the target role does not grant is refused
// there, so every call the broker made there was one its grants allow.
func TestAPlacedInstanceLivesInTheTargetAccount(t *testing.T) {
	ctx, cancel := waittest.Context(t)
	defer cancel()
	c := client(t, shared)
	e := &e2e{t: t, c: c}
	home, there := shared.Admin, shared.TargetAdmin(target)
	homeInRegion := home.Copy()
	homeInRegion.Region = target.Region
	instance, binding := "placed-s3", "placedb-s3"

	r, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: instance, ServiceID: placedService, PlanID: placedPlan,
		OrganizationGUID: "org", SpaceGUID: "space", AcceptsIncomplete: true, Parameters: map[string]any{"Versioning": "Enabled"}})
	if err != nil || !r.Async {
		t.Fatalf("provision: %+v %v", r, err)
	}
	if state, desc := e.pollService(instance, placedService, r.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("provision ended %s: %s", state, desc)
	}
	if got := stacksOf(ctx, t, there, instance); len(got) != 1 {
		t.Fatalf("stacks %v in account %s, %s, want the instance's", got, target.Account, target.Region)
	}
	br, err := c.Bind(&osb.BindRequest{InstanceID: instance, BindingID: binding, ServiceID: placedService, PlanID: placedPlan,
		AcceptsIncomplete: true, BindResource: &osb.BindResource{AppGUID: ptr("app-1")}})
	if err != nil || !br.Async {
		t.Fatalf("bind: %+v %v", br, err)
	}
	if state := e.pollBinding(instance, binding, br.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("bind ended %s", state)
	}
	got, err := c.GetBinding(&osb.GetBindingRequest{InstanceID: instance, BindingID: binding})
	if err != nil {
		t.Fatalf("fetch binding: %v", err)
	}
	bucket, key := fmt.Sprint(got.Credentials["bucket_name"]), fmt.Sprint(got.Credentials["access_key_id"])

	t.Run("the stacks, the bucket and the binding's user are in the target account only", func(t *testing.T) {
		if got := stacksOf(ctx, t, there, instance); len(got) != 2 {
			t.Errorf("stacks %v in the target account, want the instance's and the binding's", got)
		}
		for _, cfg := range []aws.Config{home, homeInRegion} {
			if got := stacksOf(ctx, t, cfg, instance); len(got) != 0 {
				t.Errorf("stacks %v in the broker's account, %s", got, cfg.Region)
			}
		}
		if !slices.Contains(bucketsOf(ctx, t, there), bucket) || slices.Contains(bucketsOf(ctx, t, home), bucket) {
			t.Errorf("the bucket %s is not in the target account's buckets only", bucket)
		}
		used, err := iam.NewFromConfig(there).GetAccessKeyLastUsed(ctx, &iam.GetAccessKeyLastUsedInput{AccessKeyId: aws.String(key)})
		if err != nil {
			t.Fatalf("the binding's access key in the target account: %v", err)
		}
		user := aws.ToString(used.UserName)
		if _, err := iam.NewFromConfig(home).GetUser(ctx, &iam.GetUserInput{UserName: aws.String(user)}); err == nil {
			t.Errorf("the binding's user %s is in the broker's account too", user)
		}
	})

	ur, err := c.Unbind(&osb.UnbindRequest{InstanceID: instance, BindingID: binding, ServiceID: placedService, PlanID: placedPlan, AcceptsIncomplete: true})
	if err != nil {
		t.Fatalf("unbind: %v", err)
	}
	if state := e.pollBinding(instance, binding, ur.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
		t.Fatalf("unbind ended %s", state)
	}
	dr, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: instance, ServiceID: placedService, PlanID: placedPlan, AcceptsIncomplete: true})
	if err != nil {
		t.Fatalf("deprovision: %v", err)
	}
	if state, desc := e.pollService(instance, placedService, dr.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
		t.Fatalf("deprovision ended %s: %s", state, desc)
	}
	t.Run("after deprovision, nothing of it is left there", func(t *testing.T) {
		if got := stacksOf(ctx, t, there, instance); len(got) != 0 {
			t.Errorf("stacks %v outlived the deprovision", got)
		}
		if slices.Contains(bucketsOf(ctx, t, there), bucket) {
			t.Errorf("the bucket %s outlived the deprovision", bucket)
		}
	})

	t.Run("IAM is enforced in the target account: the target role may do what it grants, and nothing else", func(t *testing.T) {
		role := "arn:aws:iam::" + target.Account + ":role/serverless-osb-target-" + deploy.DefaultStackPrefix
		cfg := home.Copy()
		cfg.Region = target.Region
		cfg.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(sts.NewFromConfig(home), role,
			func(o *stscreds.AssumeRoleOptions) { o.ExternalID = aws.String(target.ExternalID) }))
		if _, err := cloudformation.NewFromConfig(cfg).ListStacks(ctx, &cloudformation.ListStacksInput{}); err != nil {
			t.Errorf("ListStacks, which the target role grants: %v", err)
		}
		_, err := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }).ListBuckets(ctx, &s3.ListBucketsInput{})
		if err == nil || !strings.Contains(err.Error(), "AccessDenied") {
			t.Errorf("ListBuckets, which the target role does not grant: %v, want AccessDenied", err)
		}
	})
}

// TestTheTargetStackHasTheFunctionsOfItsPlacedPlans: the suite's catalog
// places a Valkey plan in the target account, whose bindings' cache users
// the cacheuser function makes, so the target stack the sandbox deployed
// there (moto's CloudFormation, with the functions' bundles in a bucket of
// that account, as `make target-assets` puts them, under the keys the
// template names: a missing one fails the stack) made that function under
// the name the binding template calls, with a role of that account; it
// made no database user function, since no network of the catalog is in
// that account.
func TestTheTargetStackHasTheFunctionsOfItsPlacedPlans(t *testing.T) {
	ctx, cancel := waittest.Context(t)
	defer cancel()
	there := shared.TargetAdmin(target)
	stacks := cloudformation.NewFromConfig(there)
	out, err := stacks.DescribeStackResources(ctx, &cloudformation.DescribeStackResourcesInput{StackName: aws.String(targetStackName(t))})
	if err != nil {
		t.Fatalf("the target stack's resources: %v", err)
	}
	var functions, roles []string
	for _, r := range out.StackResources {
		switch aws.ToString(r.ResourceType) {
		case "AWS::Lambda::Function":
			functions = append(functions, aws.ToString(r.PhysicalResourceId))
		case "AWS::IAM::Role":
			roles = append(roles, aws.ToString(r.LogicalResourceId))
		}
	}
	want := strings.ToLower(deploy.DefaultStackPrefix) + "-cacheuser"
	if !slices.ContainsFunc(functions, func(f string) bool { return strings.HasSuffix(f, want) }) {
		t.Errorf("the target stack's functions are %v, want %s", functions, want)
	}
	if slices.ContainsFunc(functions, func(f string) bool { return strings.Contains(f, "-dbuser-") }) {
		t.Errorf("a database user function among %v, without a network in the account", functions)
	}
	if !slices.ContainsFunc(roles, func(r string) bool { return strings.HasPrefix(r, "CacheUserRole") }) {
		t.Errorf("the target stack's roles are %v, want the cacheuser function's", roles)
	}
}

// targetStackName is the target stack's name: its template's.
func targetStackName(t *testing.T) string {
	t.Helper()
	return strings.TrimSuffix(filepath.Base(target.Template), ".template.json")
}

// TestTheTargetStackGoesInASecondRegionOfTheAccount: the target stack
// deployed again in another Region of the target account, naming the
// first as IdentityRegion (as a StackSet over two Regions does), makes
// that Region's bucket of templates and none of the account's roles and
// boundary, which the first Region's stack made (IAM names are the
// account's: made twice, the second stack would fail).
func TestTheTargetStackGoesInASecondRegionOfTheAccount(t *testing.T) {
	ctx, cancel := waittest.Context(t)
	defer cancel()
	there := shared.TargetAdmin(target)
	second := there.Copy()
	second.Region = "ap-southeast-2"
	body, err := os.ReadFile(target.Template)
	if err != nil {
		t.Fatal(err)
	}
	client := cloudformation.NewFromConfig(second)
	name := targetStackName(t)
	params := []cfntypes.Parameter{
		{ParameterKey: aws.String("BrokerWorkerRoleArn"), ParameterValue: aws.String("arn:aws:iam::123456789012:role/worker")},
		{ParameterKey: aws.String("BrokerApiRoleArn"), ParameterValue: aws.String("arn:aws:iam::123456789012:role/api")},
		{ParameterKey: aws.String("ExternalId"), ParameterValue: aws.String(target.ExternalID)},
		{ParameterKey: aws.String("IdentityRegion"), ParameterValue: aws.String(target.Region)},
	}
	var declared struct{ Parameters map[string]any }
	if err := json.Unmarshal(body, &declared); err != nil {
		t.Fatal(err)
	}
	if _, ok := declared.Parameters["HandlerCodeBucket"]; ok {
		// The first Region's bucket of the functions' code: moto's Lambda
		// reads code from any Region of the account's S3.
		params = append(params, cfntypes.Parameter{ParameterKey: aws.String("HandlerCodeBucket"),
			ParameterValue: aws.String("osb-handlers-" + target.Account + "-" + target.Region)})
	}
	if _, err := client.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String(name), TemplateBody: aws.String(string(body)),
		Capabilities: []cfntypes.Capability{cfntypes.CapabilityCapabilityNamedIam}, Parameters: params}); err != nil {
		t.Fatalf("create the target stack in %s: %v", second.Region, err)
	}
	var stack cfntypes.Stack
	waittest.Until(t, func() error {
		out, err := client.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
		if err != nil {
			return err
		}
		if stack = out.Stacks[0]; strings.HasSuffix(string(stack.StackStatus), "_IN_PROGRESS") {
			return fmt.Errorf("the target stack in %s is still %s", second.Region, stack.StackStatus)
		}
		return nil
	})
	if stack.StackStatus != cfntypes.StackStatusCreateComplete {
		t.Fatalf("the target stack in %s: %s: %s", second.Region, stack.StackStatus, aws.ToString(stack.StackStatusReason))
	}
	out, err := client.DescribeStackResources(ctx, &cloudformation.DescribeStackResourcesInput{StackName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range out.StackResources {
		if typ := aws.ToString(r.ResourceType); strings.HasPrefix(typ, "AWS::IAM::") && !strings.HasPrefix(aws.ToString(r.LogicalResourceId), "CacheUser") {
			t.Errorf("the second Region's stack made %s (%s), the account's", aws.ToString(r.LogicalResourceId), typ)
		}
	}
	if bucket := deploy.TargetTemplateBucket(deploy.DefaultStackPrefix, target.Account, second.Region); !slices.Contains(bucketsOf(ctx, t, second), bucket) {
		t.Errorf("no bucket %s in the second Region", bucket)
	}
}
