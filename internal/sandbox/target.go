package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/serverless-osb/broker/internal/deploy"
)

// Target is a target account of the catalog's placement: the sandbox
// deploys the target stack (cdk synth -c target=true) there, on moto's
// CloudFormation in that account, before it enforces IAM, so that the
// broker's functions assume its role as they do in AWS, with IAM enforced
// there too (moto checks an assumed role's actions against the role's
// policies in its own account).
type Target struct {
	// Template is the target stack's template.
	Template string
	// Account is the target account's id (12 digits), Region the Region
	// the stack is deployed in (default: the sandbox's).
	Account, Region string
	// ExternalID is the external id the target role requires: the
	// catalog's for that role.
	ExternalID string
	// HandlerCode is the folder of the bundles (make build's dist/:
	// dbuser.zip, cacheuser.zip) the target stack's functions run, when
	// its template declares HandlerCodeBucket: the sandbox puts them in a
	// bucket of the target account, as `make target-assets` does, and
	// names it. Default: dist beside the template's folder's parent
	// (SynthesizeTarget's Out/dist).
	HandlerCode string
}

// handlerCodeBucket is the target stack's parameter naming the bucket of
// its functions' bundles (infra.TargetParamHandlerCodeBucket).
const handlerCodeBucket = "HandlerCodeBucket"

// targetAdminRole is the role the sandbox makes in each target account
// for tests and operators to look there once IAM is enforced (TargetAdmin).
const targetAdminRole = "sandbox-admin"

// SynthesizeTarget synthesizes the target stack for the bundles Synthesize
// wrote in s.Out (the worker's manifest says what the target role grants)
// and returns its template's path.
func SynthesizeTarget(ctx context.Context, s Synthesis) (string, error) {
	root, err := filepath.Abs(s.Root)
	if err != nil {
		return "", err
	}
	out, err := filepath.Abs(s.Out)
	if err != nil {
		return "", err
	}
	assembly := filepath.Join(out, "cdk.out.target")
	cdk := filepath.Join(root, "infra", "_cli", "node_modules", ".bin", "cdk")
	if err := run(ctx, root, []string{"CDK_DISABLE_CLI_TELEMETRY=true"}, cdk, "synth", "-q", "-o", assembly,
		"-c", "target=true", "-c", "workerCode="+filepath.Join(out, "dist", "worker"),
		"-c", "databaseUserCode="+filepath.Join(out, "dist", "dbuser"), "-c", "cacheUserCode="+filepath.Join(out, "dist", "cacheuser")); err != nil {
		return "", err
	}
	matches, err := filepath.Glob(filepath.Join(assembly, "*.template.json"))
	if err != nil || len(matches) != 1 {
		return "", fmt.Errorf("cdk synth -c target=true wrote %d templates in %s, want 1", len(matches), assembly)
	}
	return matches[0], nil
}

// deployTargets deploys the target stack into each target account, with
// the broker's worker and api roles as the roles it trusts, and makes the
// account's administrator role (TargetAdmin). IAM is not enforced yet.
func (sb *Sandbox) deployTargets(ctx context.Context) error {
	var worker, api string
	for _, f := range sb.functionSpecs {
		switch {
		case strings.HasPrefix(f.logicalID, "WorkerFunction"):
			worker = f.role
		case strings.HasPrefix(f.logicalID, "ApiFunction"):
			api = f.role
		}
	}
	for _, t := range sb.cfg.Targets {
		if worker == "" || api == "" {
			return fmt.Errorf("target account %s: the template has no worker or api function whose roles the target stack trusts", t.Account)
		}
		body, err := os.ReadFile(t.Template)
		if err != nil {
			return fmt.Errorf("target account %s: %w", t.Account, err)
		}
		// Any role of the account gives its credentials while IAM is not
		// enforced: moto checks no trust policy.
		cfg := sb.targetConfig(sb.Admin, t, "sandbox-deploy")
		if err := sb.deployTarget(ctx, cfg, t, string(body), worker, api); err != nil {
			return fmt.Errorf("target account %s: %w", t.Account, err)
		}
		admin := iam.NewFromConfig(cfg)
		trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::` + sb.account + `:root"},"Action":"sts:AssumeRole"}]}`
		_, err = createOwn(true, func() (*iam.CreateRoleOutput, error) {
			return admin.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(targetAdminRole), AssumeRolePolicyDocument: &trust})
		}, func() (*iam.CreateRoleOutput, error) {
			_, err := admin.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(targetAdminRole)})
			return nil, err
		})
		if err != nil {
			return fmt.Errorf("target account %s: its administrator role: %w", t.Account, err)
		}
		doc := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}`
		if _, err := admin.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(targetAdminRole), PolicyName: aws.String("everything"), PolicyDocument: &doc}); err != nil {
			return fmt.Errorf("target account %s: its administrator role: %w", t.Account, err)
		}
	}
	return nil
}

func (sb *Sandbox) deployTarget(ctx context.Context, cfg aws.Config, t Target, body, worker, api string) error {
	client := cloudformation.NewFromConfig(cfg)
	name := strings.TrimSuffix(filepath.Base(t.Template), ".template.json")
	params := []cfntypes.Parameter{
		{ParameterKey: aws.String("BrokerWorkerRoleArn"), ParameterValue: aws.String(worker)},
		{ParameterKey: aws.String("BrokerApiRoleArn"), ParameterValue: aws.String(api)},
		{ParameterKey: aws.String("ExternalId"), ParameterValue: aws.String(t.ExternalID)},
	}
	var declared struct{ Parameters map[string]any }
	if err := json.Unmarshal([]byte(body), &declared); err != nil {
		return fmt.Errorf("the target stack's template: %w", err)
	}
	if _, ok := declared.Parameters[handlerCodeBucket]; ok {
		bucket, err := sb.putHandlerCode(ctx, cfg, t)
		if err != nil {
			return err
		}
		params = append(params, cfntypes.Parameter{ParameterKey: aws.String(handlerCodeBucket), ParameterValue: aws.String(bucket)})
	}
	_, err := createStackOwn(ctx, client, &cloudformation.CreateStackInput{StackName: aws.String(name), TemplateBody: aws.String(body),
		Capabilities: []cfntypes.Capability{cfntypes.CapabilityCapabilityNamedIam}, Parameters: params})
	if err != nil {
		return fmt.Errorf("create the target stack %s: %w", name, err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		out, err := client.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
		if err != nil {
			return fmt.Errorf("the target stack %s: %w", name, err)
		}
		switch s := out.Stacks[0]; {
		case s.StackStatus == cfntypes.StackStatusCreateComplete:
			outputs := map[string]string{}
			for _, o := range s.Outputs {
				outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
			}
			data, _ := json.Marshal(outputs)
			sb.logf("target stack %s deployed in account %s, %s: %s", name, t.Account, cfg.Region, data)
			return nil
		case !strings.HasSuffix(string(s.StackStatus), "_IN_PROGRESS"):
			return fmt.Errorf("the target stack %s: %s: %s", name, s.StackStatus, aws.ToString(s.StackStatusReason))
		case time.Now().After(deadline):
			return fmt.Errorf("the target stack %s: still %s after a minute", name, s.StackStatus)
		}
	}
}

// putHandlerCode makes a bucket in the target account and Region and puts
// the functions' bundles there under the keys the target template names
// (deploy.HandlerCodeKey), as `make target-assets BUCKET=…` does; it
// returns the bucket's name.
func (sb *Sandbox) putHandlerCode(ctx context.Context, cfg aws.Config, t Target) (string, error) {
	dir := t.HandlerCode
	if dir == "" {
		dir = filepath.Join(filepath.Dir(filepath.Dir(t.Template)), "dist")
	}
	bucket := "osb-handlers-" + t.Account + "-" + cfg.Region
	client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	in := &s3.CreateBucketInput{Bucket: aws.String(bucket)}
	if cfg.Region != "us-east-1" {
		in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(cfg.Region)}
	}
	if _, err := createOwn(true, func() (*s3.CreateBucketOutput, error) { return client.CreateBucket(ctx, in) },
		func() (*s3.CreateBucketOutput, error) {
			_, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &bucket})
			return nil, err
		}); err != nil {
		return "", fmt.Errorf("the bucket of the functions' code: %w", err)
	}
	for _, name := range []string{"dbuser", "cacheuser"} {
		zip, err := os.ReadFile(filepath.Join(dir, name+".zip"))
		if err != nil {
			return "", fmt.Errorf("the target stack's functions: %w (make build writes it)", err)
		}
		key := deploy.HandlerCodeKey(name, zip)
		if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(zip)}); err != nil {
			return "", fmt.Errorf("put %s: %w", key, err)
		}
	}
	sb.logf("the target stack's functions' code in account %s: s3://%s", t.Account, bucket)
	return bucket, nil
}

// targetConfig reaches target account t through its role (a role name),
// from base's credentials.
func (sb *Sandbox) targetConfig(base aws.Config, t Target, role string) aws.Config {
	cfg := base.Copy()
	if t.Region != "" {
		cfg.Region = t.Region
	}
	cfg.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(sts.NewFromConfig(base),
		"arn:aws:iam::"+t.Account+":role/"+role))
	return cfg
}

// TargetAdmin may do anything in a target account (its Region's clients),
// for tests and operators to look there once IAM is enforced.
func (sb *Sandbox) TargetAdmin(t Target) aws.Config {
	return sb.targetConfig(sb.Admin, t, targetAdminRole)
}
