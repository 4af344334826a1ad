//go:build !osb_without_roles

package cloudformation

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// withoutRoles says the binary was built without the clients that reach
// a placement's role (see roles_without.go).
const withoutRoles = false

// newRoleClients are the clients that reach a placement's role: STS,
// which assumes it, and Secrets Manager, which holds its external id.
func newRoleClients(base aws.Config) (RoleCredentials, SecretsAPI) {
	return AssumeWith(sts.NewFromConfig(base)), secretsmanager.NewFromConfig(base)
}

// AssumeWith gives a role's credentials from client's AssumeRole, with
// the external id, the driver's session name and lifetime.
func AssumeWith(client stscreds.AssumeRoleAPIClient) RoleCredentials { return assumeRole{client} }

type assumeRole struct{ client stscreds.AssumeRoleAPIClient }

func (a assumeRole) Credentials(role string, externalID ExternalID) aws.CredentialsProvider {
	return stscreds.NewAssumeRoleProvider(a.client, role, func(o *stscreds.AssumeRoleOptions) {
		o.ExternalID, o.RoleSessionName, o.Duration = aws.String(string(externalID)), roleSessionName, assumedDuration
	})
}
