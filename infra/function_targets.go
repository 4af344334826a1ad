package infra

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/drivers/function"
)

// functionTargets are the Lambda functions that the catalog's function
// driver plans name: all of them, which the worker invokes (it runs every
// asynchronous change and every cleanup), and those of plans whose changes
// may run synchronously, which the api function invokes within the
// platform's request.
type functionTargets struct {
	worker, api []string
}

// readFunctionTargets reads them from the catalog the functions serve
// (checkAssets made sure it is there, and the one the deployment names).
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
			if s.Target.Function == "" {
				continue // an HTTPS target: no AWS permission
			}
			out.worker = append(out.worker, s.Target.Function)
			if p.Settings.Mode != catalog.ModeAsyncOnly {
				out.api = append(out.api, s.Target.Function)
			}
		}
	}
	slices.Sort(out.worker)
	slices.Sort(out.api)
	out.worker, out.api = slices.Compact(out.worker), slices.Compact(out.api)
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

// invokeServiceFunctions lets the functions that run the function driver
// invoke exactly the Lambda functions the catalog names, and nothing else:
// the worker all of them, the api function those of plans that may run a
// change synchronously. A catalog that names none grants nothing.
func (b *builder) invokeServiceFunctions() error {
	targets, err := readFunctionTargets(filepath.Join(b.props.WorkerCodeDir, "catalog.yaml"))
	if err != nil {
		return fmt.Errorf("function targets: %w", err)
	}
	if len(targets.worker) > 0 {
		b.workerRole.AddToPrincipalPolicy(statement("InvokeServiceFunctions", []string{"lambda:InvokeFunction"}, b.functionARNs(targets.worker)...))
	}
	if len(targets.api) > 0 {
		b.apiRole.AddToPrincipalPolicy(statement("InvokeServiceFunctions", []string{"lambda:InvokeFunction"}, b.functionARNs(targets.api)...))
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
