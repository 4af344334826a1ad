package function

import (
	"slices"
	"strings"

	"github.com/serverless-osb/broker/internal/deploy"
)

// Needs is what plans of the driver need of the stack, given each plan's
// target and whether its changes may run synchronously: the Lambda
// functions they name, to invoke (lambda:InvokeFunction), and the Secrets
// Manager secrets that HTTPS targets' requests are signed with, to read
// (secretsmanager:GetSecretValue, nothing else), each named once and
// sorted. The worker needs all of them (it runs every asynchronous change
// and every cleanup), the api function those of plans whose changes may
// run synchronously, within the platform's request. An HTTPS target whose
// secret is a variable or a file needs no AWS permission; plans that name
// none need nothing.
func Needs(plans []PlanTarget) deploy.Needs {
	var needs deploy.Needs
	for _, fn := range []deploy.Function{deploy.Worker, deploy.API} {
		var functions, secrets []string
		for _, p := range plans {
			if fn == deploy.API && !p.Sync {
				continue
			}
			if p.Target.Function != "" {
				functions = append(functions, p.Target.Function)
			}
			if p.Target.SecretARN != "" {
				secrets = append(secrets, p.Target.SecretARN)
			}
		}
		slices.Sort(functions)
		slices.Sort(secrets)
		if functions = slices.Compact(functions); len(functions) > 0 {
			var arns []string
			for _, f := range functions {
				arns = append(arns, functionARN(f))
			}
			needs.Statements = append(needs.Statements, deploy.Statement{Function: fn, Sid: "InvokeServiceFunctions",
				Actions: []string{"lambda:InvokeFunction"}, Resources: arns})
		}
		// Complete ARNs (Configure refuses others): exactly these secrets,
		// no wildcard.
		if secrets = slices.Compact(secrets); len(secrets) > 0 {
			needs.Statements = append(needs.Statements, deploy.Statement{Function: fn, Sid: "ReadServiceSecrets",
				Actions: []string{"secretsmanager:GetSecretValue"}, Resources: secrets})
		}
	}
	return needs
}

// PlanTarget is one plan's target, and whether the plan's changes may run
// synchronously (in the api function).
type PlanTarget struct {
	Target Target
	Sync   bool
}

// functionARN is the ARN IAM matches an invocation of fn against: fn
// itself when it is an ARN; else the function of that name (and
// qualifier, when it has one) in the stack's account and Region, which is
// where Lambda looks for a function named without an ARN.
func functionARN(fn string) string {
	if strings.HasPrefix(fn, "arn:") {
		return fn
	}
	return deploy.ARN("lambda", "function:"+fn)
}
