package dynamo

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/serverless-osb/broker/internal/store/dynamo/schema"
)

// The table's attribute and index names, as schema names them.
const (
	attrPK          = schema.PK
	attrSK          = schema.SK
	attrInProgress  = schema.InProgress
	attrExpiresAt   = schema.ExpiresAt
	indexInProgress = schema.IndexInProgress
	inProgressValue = schema.InProgressValue
	indexByPlan     = schema.IndexByPlan
)

// createTableInput is the CreateTable request for a table of shape s named
// table, billed on demand. Its attribute definitions are the key
// attributes of the table and its indexes, each once, as DynamoDB wants
// them.
func createTableInput(s schema.TableSchema, table string) *dynamodb.CreateTableInput {
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: types.BillingModePayPerRequest,
		KeySchema:   keySchema(s.HashKey, s.RangeKey),
	}
	defined := map[string]bool{}
	define := func(attrs ...schema.KeyAttribute) {
		for _, a := range attrs {
			if a.Name != "" && !defined[a.Name] {
				defined[a.Name] = true
				in.AttributeDefinitions = append(in.AttributeDefinitions,
					types.AttributeDefinition{AttributeName: aws.String(a.Name), AttributeType: a.Type})
			}
		}
	}
	define(s.HashKey, s.RangeKey)
	for _, index := range s.Indexes {
		define(index.HashKey, index.RangeKey)
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName:  aws.String(index.Name),
			KeySchema:  keySchema(index.HashKey, index.RangeKey),
			Projection: &types.Projection{ProjectionType: index.Projection},
		})
	}
	return in
}

// keySchema is a hash key and, when it has a name, a range key.
func keySchema(hash, rangeKey schema.KeyAttribute) []types.KeySchemaElement {
	ks := []types.KeySchemaElement{{AttributeName: aws.String(hash.Name), KeyType: types.KeyTypeHash}}
	if rangeKey.Name != "" {
		ks = append(ks, types.KeySchemaElement{AttributeName: aws.String(rangeKey.Name), KeyType: types.KeyTypeRange})
	}
	return ks
}
