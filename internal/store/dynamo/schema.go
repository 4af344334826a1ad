package dynamo

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The table's attribute and index names, which the store's reads and
// writes name and Schema puts in the table's shape.
const (
	attrPK = "PK"
	attrSK = "SK"
	// attrInProgress is "1" on an operation in progress and absent otherwise:
	// the sparse index InProgress lists exactly those operations.
	attrInProgress = "inprogress"
	// attrExpiresAt is a finished operation's ExpiresAt in epoch seconds,
	// the table's TTL attribute.
	attrExpiresAt   = "expires_at_epoch"
	indexInProgress = "InProgress"
	inProgressValue = "1"
)

// TableSchema is the shape of the store's table: its keys, its indexes and
// its time to live. It is written once, in Schema: CreateTable creates the
// table from it and the CDK stack (infra) deploys the table from it, and
// infra's tests check that both make the same table.
type TableSchema struct {
	HashKey, RangeKey KeyAttribute
	Indexes           []Index
	// TimeToLive is the attribute DynamoDB's time to live reads (epoch
	// seconds).
	TimeToLive string
}

// KeyAttribute is an attribute of a key: its name and scalar type.
type KeyAttribute struct {
	Name string
	Type types.ScalarAttributeType
}

// Index is a global secondary index.
type Index struct {
	Name              string
	HashKey, RangeKey KeyAttribute
	// Projection is ALL or KEYS_ONLY: INCLUDE would need a list of
	// attributes, which no index of the store has.
	Projection types.ProjectionType
}

// Schema returns the table's shape, as the store reads and writes it:
//
//   - PK (string) hash key, SK (string) range key;
//   - the sparse index InProgress: hash key inprogress, which only an
//     operation in progress carries, range key SK, every attribute
//     projected, so that the reaper reads exactly those operations;
//   - time to live on expires_at_epoch, which finished operations carry.
func Schema() TableSchema {
	str := func(name string) KeyAttribute { return KeyAttribute{Name: name, Type: types.ScalarAttributeTypeS} }
	return TableSchema{
		HashKey:  str(attrPK),
		RangeKey: str(attrSK),
		Indexes: []Index{{
			Name:       indexInProgress,
			HashKey:    str(attrInProgress),
			RangeKey:   str(attrSK),
			Projection: types.ProjectionTypeAll,
		}},
		TimeToLive: attrExpiresAt,
	}
}

// createTableInput is the CreateTable request for a table of shape s named
// table, billed on demand. Its attribute definitions are the key
// attributes of the table and its indexes, each once, as DynamoDB wants
// them.
func (s TableSchema) createTableInput(table string) *dynamodb.CreateTableInput {
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: types.BillingModePayPerRequest,
		KeySchema:   keySchema(s.HashKey, s.RangeKey),
	}
	defined := map[string]bool{}
	define := func(attrs ...KeyAttribute) {
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
func keySchema(hash, rangeKey KeyAttribute) []types.KeySchemaElement {
	ks := []types.KeySchemaElement{{AttributeName: aws.String(hash.Name), KeyType: types.KeyTypeHash}}
	if rangeKey.Name != "" {
		ks = append(ks, types.KeySchemaElement{AttributeName: aws.String(rangeKey.Name), KeyType: types.KeyTypeRange})
	}
	return ks
}
