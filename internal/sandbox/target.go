package sandbox

import (
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
	"github.com/aws/aws-sdk-go-v2/service/sts"
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
}

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
		"-c", "target=true", "-c", "workerCode="+filepath.Join(out, "dist", "worker")); err != nil {
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
		if _, err := admin.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(targetAdminRole), AssumeRolePolicyDocument: &trust}); err != nil {
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
	_, err := client.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String(name), TemplateBody: aws.String(body),
		Capabilities: []cfntypes.Capability{cfntypes.CapabilityCapabilityNamedIam},
		Parameters: []cfntypes.Parameter{
			{ParameterKey: aws.String("BrokerWorkerRoleArn"), ParameterValue: aws.String(worker)},
			{ParameterKey: aws.String("BrokerApiRoleArn"), ParameterValue: aws.String(api)},
			{ParameterKey: aws.String("ExternalId"), ParameterValue: aws.String(t.ExternalID)},
		}})
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
