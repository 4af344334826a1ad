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
func newRoleClients(base aws.Config) (stscreds.AssumeRoleAPIClient, SecretsAPI) {
	return sts.NewFromConfig(base), secretsmanager.NewFromConfig(base)
}
