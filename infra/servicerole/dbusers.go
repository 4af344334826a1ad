package servicerole

import (
	"github.com/serverless-osb/broker/internal/deploy"
)

// Reasons of the database users' wildcards.
const (
	reasonBindingSecrets = "The database-user binding templates (services/rds-*/binding-user.yaml) make one " +
		"secret per binding, named <binding stack>-db-user (the stack is PREFIX-…; Secrets Manager adds a random " +
		"suffix to the ARN): this pattern is those secrets and the broker's other stacks' names, no secret of anyone else's."
	reasonRandomPassword        = "GetRandomPassword (GenerateSecretString) acts on no resource: IAM takes only \"*\" for it."
	reasonDatabaseUserFunctions = "The Custom::DatabaseUser resources' ServiceToken is the broker's function in the " +
		"database's VPC, PREFIX-dbuser-<vpc id> (one per VPC of the catalog's networks): the pattern is those functions."
)

// DatabaseUserTypes are the resource types of the database-user binding
// templates, whose grants DatabaseUserGrants are.
var DatabaseUserTypes = []string{"AWS::SecretsManager::Secret", "Custom::DatabaseUser"}

// DatabaseUserGrants are the service role's statements for the
// database-user binding templates, which a catalog can use only with
// networks (the driver refuses them without one, as the function runs in
// the network's VPC): the stack adds them to the role when it deploys a
// Custom::DatabaseUser function, so that a deployment without databases
// in a VPC grants none of them. Each binding's secret (PREFIX-…), a
// generated password, and the invocation of the dbuser functions.
func DatabaseUserGrants(prefix string) []Statement {
	secrets := ARN{Service: "secretsmanager", Resource: "secret:" + prefix + "-*"}
	functions := ARN{Service: "lambda", Resource: "function:" + deploy.DatabaseUserFunctionName(prefix, "*")}
	secret, custom := []string{DatabaseUserTypes[0]}, []string{DatabaseUserTypes[1]}
	return []Statement{
		{
			Sid: "BindingDatabaseSecrets",
			Actions: []string{"secretsmanager:CreateSecret", "secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue",
				"secretsmanager:UpdateSecret", "secretsmanager:TagResource", "secretsmanager:UntagResource",
				"secretsmanager:DeleteSecret"},
			Resources: []ARN{secrets},
			Reason:    reasonBindingSecrets,
			For:       secret,
		},
		{
			Sid:        "GeneratedPasswords",
			Actions:    []string{"secretsmanager:GetRandomPassword"},
			Everywhere: true,
			Reason:     reasonRandomPassword,
			For:        secret,
		},
		{
			Sid:       "InvokeDatabaseUserFunctions",
			Actions:   []string{"lambda:InvokeFunction"},
			Resources: []ARN{functions},
			Reason:    reasonDatabaseUserFunctions,
			For:       custom,
		},
	}
}

// databaseUsersUnused are the Secret's actions for replicas, which the
// binding templates do not make.
var databaseUsersUnused = unused("AWS::SecretsManager::Secret", "replicas of the secret in other Regions",
	[]string{"ReplicaRegions"}, "secretsmanager:ReplicateSecretToRegions", "secretsmanager:RemoveRegionsFromReplication")
