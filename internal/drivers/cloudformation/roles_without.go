//go:build osb_without_roles

package cloudformation

import "github.com/aws/aws-sdk-go-v2/aws"

// withoutRoles: make build leaves the STS and Secrets Manager clients out
// of the bootstraps (build tag osb_without_roles, 0.12 MB of the worker's
// bundle) when no plan of the catalog places its stacks through a role,
// so that the broker's stack grants neither sts:AssumeRole nor
// secretsmanager:GetSecretValue; RolesOf refuses a role at start.
const withoutRoles = true

// newRoleClients are none: RolesOf refuses at start the roles that would
// call them.
func newRoleClients(aws.Config) (RoleCredentials, SecretsAPI) { return nil, nil }
