package infra

import (
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/internal/deploy"
)

// readManifest reads what the catalog's drivers need of the stack, as the
// build wrote it beside the worker's catalog (deploy.Manifest): infra
// reads the drivers' declarations there rather than asking the drivers,
// so that it builds the stack without the broker's domain.
func readManifest(workerCodeDir string) (deploy.Manifest, error) {
	m, err := deploy.ReadManifest(workerCodeDir)
	if err != nil {
		return m, fmt.Errorf("function asset %s: %w (make build writes it)", workerCodeDir, err)
	}
	return m, nil
}

// grantDriverNeeds makes, grants and sets exactly what the catalog's
// drivers declare they need (m), naming no driver: the service role (and
// the boundary of the identities its stacks make) when a driver's work
// runs under it, each declared statement in its function's role, each
// declared variable in its function's environment, with the stack's own
// values for the declarations' placeholders. A catalog whose drivers
// declare nothing gets nothing.
func (b *builder) grantDriverNeeds(m deploy.Manifest) {
	b.needs = m
	if m.ServiceRole() {
		b.services()
	}
	values := map[string]string{
		deploy.Partition:   *b.stack.Partition(),
		deploy.Region:      *b.stack.Region(),
		deploy.Account:     *b.stack.Account(),
		deploy.StackPrefix: b.props.StackPrefix,
	}
	if b.serviceRole != nil {
		values[deploy.ServiceRoleARN] = *b.serviceRole.RoleArn()
		values[deploy.PermissionsBoundaryARN] = *b.boundary.ManagedPolicyArn()
	}
	if b.templateBucket != nil {
		values[deploy.TemplateBucket] = *b.templateBucket.BucketName()
		values[deploy.TemplateBucketARN] = *b.templateBucket.BucketArn()
	}
	roles := map[deploy.Function]awsiam.Role{deploy.API: b.apiRole, deploy.Worker: b.workerRole}
	functions := map[deploy.Function]awslambda.Function{deploy.API: b.api, deploy.Worker: b.worker}
	for _, d := range m.Drivers {
		for _, s := range d.Needs.Statements {
			roles[s.Function].AddToPrincipalPolicy(declaredStatement(s, values))
		}
		for _, v := range d.Needs.Env {
			functions[v.Function].AddEnvironment(jsii.String(v.Name), jsii.String(deploy.Fill(v.Value, values)), nil)
		}
	}
}

// declaredStatement is s with values for its placeholders.
func declaredStatement(s deploy.Statement, values map[string]string) awsiam.PolicyStatement {
	var resources []*string
	for _, r := range s.Resources {
		resources = append(resources, jsii.String(deploy.Fill(r, values)))
	}
	props := &awsiam.PolicyStatementProps{Sid: jsii.String(s.Sid), Actions: jsii.Strings(s.Actions...), Resources: &resources}
	if len(s.Conditions) > 0 {
		conditions := map[string]any{}
		for _, op := range slices.Sorted(maps.Keys(s.Conditions)) {
			byKey := map[string]any{}
			for key, v := range s.Conditions[op] {
				byKey[key] = deploy.Fill(v, values)
			}
			conditions[op] = byKey
		}
		props.Conditions = &conditions
	}
	return awsiam.NewPolicyStatement(props)
}
