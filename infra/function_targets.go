package infra

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/drivers/function"
)

// functionTargets are what the catalog's function driver plans reach
// through AWS: the Lambda functions they name, and the Secrets Manager
// secrets that HTTPS targets' requests are signed with. The worker needs
// all of them (it runs every asynchronous change and every cleanup), the
// api function those of plans whose changes may run synchronously, within
// the platform's request.
type functionTargets struct {
	worker, api targetGrants
}

// targetGrants are one function's: the Lambda functions it may invoke and
// the secrets it may read, each sorted and named once.
type targetGrants struct {
	functions, secrets []string
}

func (g *targetGrants) add(t function.Target) {
	if t.Function != "" {
		g.functions = append(g.functions, t.Function)
	}
	if t.SecretARN != "" {
		g.secrets = append(g.secrets, t.SecretARN)
	}
}

func (g *targetGrants) compact() {
	slices.Sort(g.functions)
	slices.Sort(g.secrets)
	g.functions, g.secrets = slices.Compact(g.functions), slices.Compact(g.secrets)
}

// readFunctionTargets reads them from the catalog the functions serve
// (checkAssets made sure it is there, and the one the deployment names).
// An HTTPS target whose secret is a variable or a file needs no AWS
// permission.
func readFunctionTargets(catalogPath string) (functionTargets, error) {
	var out functionTargets
	cat, err := catalog.Load(catalogPath)
	if err != nil {
		return out, err
	}
	for _, svc := range cat.Services() {
		for _, p := range svc.Plans {
			if p.Settings.Driver != "function" {
				continue
			}
			s, err := function.Configure(p, p.Settings.Config, filepath.Dir(catalogPath))
			if err != nil {
				return out, fmt.Errorf("%s: %s: %w", catalogPath, p.Settings.Path, err)
			}
			out.worker.add(s.Target)
			if p.Settings.Mode != catalog.ModeAsyncOnly {
				out.api.add(s.Target)
			}
		}
	}
	out.worker.compact()
	out.api.compact()
	return out, nil
}

// functionARN is the ARN IAM matches an invocation of fn against: fn
// itself when it is an ARN; else the function of that name (and
// qualifier, when it has one) in the stack's account and Region, which is
// where Lambda looks for a function named without an ARN.
func functionARN(stack awscdk.Stack, fn string) *string {
	if strings.HasPrefix(fn, "arn:") {
		return jsii.String(fn)
	}
	return stack.FormatArn(&awscdk.ArnComponents{Service: jsii.String("lambda"), Resource: jsii.String("function"),
		ResourceName: jsii.String(fn), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME})
}

// grantFunctionTargets lets the functions that run the function driver
// invoke exactly the Lambda functions the catalog names, and read exactly
// the secrets it names (secretsmanager:GetSecretValue, nothing else): the
// worker all of them, the api function those of plans that may run a
// change synchronously. A catalog that names none grants nothing.
func (b *builder) grantFunctionTargets() error {
	targets, err := readFunctionTargets(filepath.Join(b.props.WorkerCodeDir, "catalog.yaml"))
	if err != nil {
		return fmt.Errorf("function targets: %w", err)
	}
	for _, r := range []struct {
		role   awsiam.Role
		grants targetGrants
	}{{b.workerRole, targets.worker}, {b.apiRole, targets.api}} {
		if len(r.grants.functions) > 0 {
			r.role.AddToPrincipalPolicy(statement("InvokeServiceFunctions", []string{"lambda:InvokeFunction"}, b.functionARNs(r.grants.functions)...))
		}
		if len(r.grants.secrets) > 0 {
			// Complete ARNs (function.Configure refuses others): exactly
			// these secrets, no wildcard.
			r.role.AddToPrincipalPolicy(statement("ReadServiceSecrets", []string{"secretsmanager:GetSecretValue"}, *jsii.Strings(r.grants.secrets...)...))
		}
	}
	return nil
}

func (b *builder) functionARNs(fns []string) []*string {
	var arns []*string
	for _, fn := range fns {
		arns = append(arns, functionARN(b.stack, fn))
	}
	return arns
}
