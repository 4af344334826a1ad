//go:build !lambda.norpc

// The operator's ops audit, which the Lambda build (lambda.norpc) leaves
// out (ops_audit_lambda.go): the functions never call IAM, and importing
// its client ran its endpoint table's init at every cold start.

package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	awscfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/env"
)

// The outputs of the broker's stack that ops audit reads, when the stack
// makes the CloudFormation service role (infra defines them).
const (
	OutputStackPrefix         = "StackPrefix"
	OutputPermissionsBoundary = "PermissionsBoundaryArn"
)

// ErrAuditFound is returned, wrapped, when ops audit finds a binding user
// to fix or remove: the command exits 1 after printing them.
var ErrAuditFound = errors.New("ops audit found binding users to fix or remove")

// AuditScope is what ops audit checks: the users under deploy.BindingUserPath
// whose names start with the stack prefix and a hyphen (CloudFormation
// names a binding's user after its stack), against the boundary they must
// carry.
type AuditScope struct {
	Prefix string `json:"stack_prefix"`
	// Boundary is the permissions boundary's ARN; empty where the broker
	// sets none (locally), when only the stacks are checked.
	Boundary string `json:"permissions_boundary,omitempty"`
}

// AuditFinding is one binding user that needs the operator: what is wrong
// with it and the commands that fix or remove it.
type AuditFinding struct {
	User     string   `json:"user"`
	ARN      string   `json:"arn"`
	Boundary string   `json:"permissions_boundary,omitempty"`
	Stack    string   `json:"stack,omitempty"`
	Problems []string `json:"problems"`
	Commands []string `json:"commands"`
}

// AuditReport is ops audit's answer.
type AuditReport struct {
	Scope    AuditScope     `json:"scope"`
	Checked  int            `json:"users_checked"`
	Findings []AuditFinding `json:"findings"`
}

// AuditIAM is what ops audit calls of IAM.
type AuditIAM interface {
	iam.ListUsersAPIClient
	iam.ListAccessKeysAPIClient
	iam.ListUserPoliciesAPIClient
	iam.ListAttachedUserPoliciesAPIClient
	iam.ListGroupsForUserAPIClient
	GetUser(context.Context, *iam.GetUserInput, ...func(*iam.Options)) (*iam.GetUserOutput, error)
	GetLoginProfile(context.Context, *iam.GetLoginProfileInput, ...func(*iam.Options)) (*iam.GetLoginProfileOutput, error)
}

// AuditCloudFormation is what ops audit calls of CloudFormation.
type AuditCloudFormation interface {
	awscfn.ListStacksAPIClient
	DescribeStackResources(context.Context, *awscfn.DescribeStackResourcesInput, ...func(*awscfn.Options)) (*awscfn.DescribeStackResourcesOutput, error)
}

// Audit finds the binding users of scope that lack the boundary (or carry
// another) or that no live stack of the broker holds: those a crash, a
// stack deleted with its user retained, someone's hand, or a deployment
// from before the boundary left. It reads; it changes nothing.
func Audit(ctx context.Context, iamAPI AuditIAM, cfnAPI AuditCloudFormation, scope AuditScope) (AuditReport, error) {
	report := AuditReport{Scope: scope, Findings: []AuditFinding{}}
	owners, err := stackUsers(ctx, cfnAPI, scope.Prefix)
	if err != nil {
		return report, err
	}
	pages := iam.NewListUsersPaginator(iamAPI, &iam.ListUsersInput{PathPrefix: aws.String(deploy.BindingUserPath)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return report, fmt.Errorf("list the IAM users under %s: %w", deploy.BindingUserPath, err)
		}
		for _, u := range page.Users {
			name := aws.ToString(u.UserName)
			if !strings.HasPrefix(name, scope.Prefix+"-") {
				continue
			}
			report.Checked++
			f, err := auditUser(ctx, iamAPI, scope, name, owners[name])
			if err != nil {
				return report, err
			}
			if len(f.Problems) > 0 {
				report.Findings = append(report.Findings, f)
			}
		}
	}
	slices.SortFunc(report.Findings, func(a, b AuditFinding) int { return strings.Compare(a.User, b.User) })
	return report, nil
}

// stackUsers are the IAM users of the live stacks named prefix-…, by user
// name, each with its stack's name.
func stackUsers(ctx context.Context, cfnAPI AuditCloudFormation, prefix string) (map[string]string, error) {
	owners := map[string]string{}
	pages := awscfn.NewListStacksPaginator(cfnAPI, &awscfn.ListStacksInput{})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list the stacks: %w", err)
		}
		for _, s := range page.StackSummaries {
			name := aws.ToString(s.StackName)
			if s.StackStatus == cfntypes.StackStatusDeleteComplete || !strings.HasPrefix(name, prefix+"-") {
				continue
			}
			out, err := cfnAPI.DescribeStackResources(ctx, &awscfn.DescribeStackResourcesInput{StackName: s.StackId})
			if err != nil {
				return nil, fmt.Errorf("read the resources of stack %s: %w", name, err)
			}
			for _, r := range out.StackResources {
				if aws.ToString(r.ResourceType) == "AWS::IAM::User" && r.PhysicalResourceId != nil {
					owners[aws.ToString(r.PhysicalResourceId)] = name
				}
			}
		}
	}
	return owners, nil
}

func auditUser(ctx context.Context, iamAPI AuditIAM, scope AuditScope, name, stack string) (AuditFinding, error) {
	out, err := iamAPI.GetUser(ctx, &iam.GetUserInput{UserName: aws.String(name)})
	if err != nil {
		return AuditFinding{}, fmt.Errorf("read IAM user %s: %w", name, err)
	}
	f := AuditFinding{User: name, ARN: aws.ToString(out.User.Arn), Stack: stack, Commands: []string{}}
	if pb := out.User.PermissionsBoundary; pb != nil {
		f.Boundary = aws.ToString(pb.PermissionsBoundaryArn)
	}
	bounded := true
	switch {
	case scope.Boundary == "":
	case f.Boundary == "":
		bounded = false
		f.Problems = append(f.Problems, "it has no permissions boundary")
	case f.Boundary != scope.Boundary:
		bounded = false
		f.Problems = append(f.Problems, fmt.Sprintf("its permissions boundary is %s, not the broker's", f.Boundary))
	}
	if stack == "" {
		f.Problems = append(f.Problems, fmt.Sprintf("no live stack of this broker (%s-…) holds it", scope.Prefix))
		commands, err := removeUserCommands(ctx, iamAPI, name)
		if err != nil {
			return f, err
		}
		f.Commands = commands
		return f, nil
	}
	if !bounded {
		// Its stack is live: bound it now; unbinding deletes it.
		f.Commands = append(f.Commands, fmt.Sprintf("aws iam put-user-permissions-boundary --user-name %s --permissions-boundary %s",
			name, scope.Boundary))
	}
	return f, nil
}

// removeUserCommands are the aws CLI commands that delete user name: IAM
// deletes a user only once its keys, policies, groups and password are
// gone.
func removeUserCommands(ctx context.Context, iamAPI AuditIAM, name string) ([]string, error) {
	var commands []string
	user := aws.String(name)
	keys := iam.NewListAccessKeysPaginator(iamAPI, &iam.ListAccessKeysInput{UserName: user})
	for keys.HasMorePages() {
		page, err := keys.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list the access keys of %s: %w", name, err)
		}
		for _, k := range page.AccessKeyMetadata {
			commands = append(commands, fmt.Sprintf("aws iam delete-access-key --user-name %s --access-key-id %s", name, aws.ToString(k.AccessKeyId)))
		}
	}
	inline := iam.NewListUserPoliciesPaginator(iamAPI, &iam.ListUserPoliciesInput{UserName: user})
	for inline.HasMorePages() {
		page, err := inline.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list the policies of %s: %w", name, err)
		}
		for _, p := range page.PolicyNames {
			commands = append(commands, fmt.Sprintf("aws iam delete-user-policy --user-name %s --policy-name %s", name, p))
		}
	}
	attached := iam.NewListAttachedUserPoliciesPaginator(iamAPI, &iam.ListAttachedUserPoliciesInput{UserName: user})
	for attached.HasMorePages() {
		page, err := attached.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list the managed policies of %s: %w", name, err)
		}
		for _, p := range page.AttachedPolicies {
			commands = append(commands, fmt.Sprintf("aws iam detach-user-policy --user-name %s --policy-arn %s", name, aws.ToString(p.PolicyArn)))
		}
	}
	groups := iam.NewListGroupsForUserPaginator(iamAPI, &iam.ListGroupsForUserInput{UserName: user})
	for groups.HasMorePages() {
		page, err := groups.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list the groups of %s: %w", name, err)
		}
		for _, g := range page.Groups {
			commands = append(commands, fmt.Sprintf("aws iam remove-user-from-group --user-name %s --group-name %s", name, aws.ToString(g.GroupName)))
		}
	}
	_, err := iamAPI.GetLoginProfile(ctx, &iam.GetLoginProfileInput{UserName: user})
	var none *iamtypes.NoSuchEntityException
	switch {
	case err == nil:
		commands = append(commands, "aws iam delete-login-profile --user-name "+name)
	case !errors.As(err, &none):
		return nil, fmt.Errorf("read the password of %s: %w", name, err)
	}
	return append(commands, "aws iam delete-user --user-name "+name), nil
}

// runAudit is ops audit: the scope from the stack's outputs (--stack) or
// the environment (the worker's BROKER_STACK_PREFIX and
// BROKER_PERMISSIONS_BOUNDARY_ARN; locally the prefix's default and no
// boundary), IAM and CloudFormation from the usual AWS environment.
func runAudit(ctx context.Context, stack string, asJSON bool, out io.Writer) error {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("load AWS configuration: %w", err)
	}
	scope := AuditScope{Prefix: cmp.Or(os.Getenv(env.StackPrefix), deploy.DefaultStackPrefix), Boundary: os.Getenv(env.PermissionsBoundaryARN)}
	if stack == "" && cfg.Region == "" {
		return fmt.Errorf("no AWS region: set AWS_REGION to the region of the broker's stacks (or use --stack NAME)")
	}
	if stack != "" {
		if cfg, err = operatorConfig(ctx, stack); err != nil {
			return err
		}
		var region string
		if scope, region, err = stackAuditScope(ctx, awscfn.NewFromConfig(cfg), stack); err != nil {
			return err
		}
		cfg.Region = region
	}
	report, err := Audit(ctx, iam.NewFromConfig(cfg), awscfn.NewFromConfig(cfg), scope)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return err
		}
	} else {
		writeAudit(out, report)
	}
	if len(report.Findings) > 0 {
		return fmt.Errorf("%w: %d of %d", ErrAuditFound, len(report.Findings), report.Checked)
	}
	return nil
}

// stackAuditScope reads the scope and region from the broker stack's
// outputs.
func stackAuditScope(ctx context.Context, client awscfn.DescribeStacksAPIClient, name string) (AuditScope, string, error) {
	out, err := client.DescribeStacks(ctx, &awscfn.DescribeStacksInput{StackName: aws.String(name)})
	if err != nil {
		return AuditScope{}, "", fmt.Errorf("stack %s: %w", name, err)
	}
	if len(out.Stacks) != 1 {
		return AuditScope{}, "", fmt.Errorf("stack %s: not found", name)
	}
	outputs := map[string]string{}
	for _, o := range out.Stacks[0].Outputs {
		outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	if outputs[OutputStackPrefix] == "" || outputs[OutputPermissionsBoundary] == "" {
		return AuditScope{}, "", fmt.Errorf("stack %s has no output %s or %s: either its catalog has no plan that makes stacks, "+
			"or it was deployed before ops audit (deploy it again, or run ops audit without --stack, with %s and %s set to its "+
			"worker function's)", name, OutputStackPrefix, OutputPermissionsBoundary, env.StackPrefix, env.PermissionsBoundaryARN)
	}
	return AuditScope{Prefix: outputs[OutputStackPrefix], Boundary: outputs[OutputPermissionsBoundary]}, outputs[OutputRegion], nil
}

func writeAudit(out io.Writer, r AuditReport) {
	boundary := cmp.Or(r.Scope.Boundary, "none set: only the stacks are checked")
	fmt.Fprintf(out, "binding users under %s named %s-…: %d checked, %d to fix or remove (boundary %s)\n",
		deploy.BindingUserPath, r.Scope.Prefix, r.Checked, len(r.Findings), boundary)
	if len(r.Findings) == 0 {
		return
	}
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nUSER\tSTACK\tPROBLEM")
	for _, f := range r.Findings {
		fmt.Fprintf(w, "%s\t%s\t%s\n", f.User, cmp.Or(f.Stack, "-"), strings.Join(f.Problems, "; "))
	}
	w.Flush()
	for _, f := range r.Findings {
		fmt.Fprintf(out, "\n%s:\n", f.User)
		for _, c := range f.Commands {
			fmt.Fprintf(out, "  %s\n", c)
		}
	}
}
