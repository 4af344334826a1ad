// Package schema is the shape of the dynamo store's table, written once:
// the store's CreateTable makes the table from it and the CDK stack
// (infra) deploys the table from it, and infra's tests check that both
// make the same table. It imports nothing of the broker, so that infra
// reads it without the domain.
package schema

import "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

// The table's attribute and index names, which the store's reads and
// writes name and Table puts in the table's shape.
const (
	PK = "PK"
	SK = "SK"
	// InProgress is "1" (InProgressValue) on an operation in progress and
	// absent otherwise: the sparse index IndexInProgress lists exactly
	// those operations.
	InProgress = "inprogress"
	// ExpiresAt is a finished operation's expiry in epoch seconds, the
	// table's TTL attribute.
	ExpiresAt       = "expires_at_epoch"
	IndexInProgress = "InProgress"
	InProgressValue = "1"
	// PlanID is the plan of an instance item (and of the bindings,
	// operations and other items that carry it), the hash key of the
	// index IndexByPlan, whose range key is SK: the instances of a plan
	// are its items with SK "instance".
	PlanID      = "plan_id"
	IndexByPlan = "ByPlan"
)

// TableSchema is the shape of the store's table: its keys, its indexes and
// its time to live.
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

// Table returns the table's shape, as the store reads and writes it:
//
//   - PK (string) hash key, SK (string) range key;
//   - the sparse index InProgress: hash key inprogress, which only an
//     operation in progress carries, range key SK, every attribute
//     projected, so that the reaper reads exactly those operations;
//   - the index ByPlan: hash key plan_id, range key SK, keys only, so that
//     ops instances --plan and a fleet upgrade's Plan Task read the
//     instances of the plans they name (plan_id = P and SK = instance)
//     and nothing else. Every item that carries plan_id (an instance, a
//     binding, an operation, a detached record, a campaign's item) is in
//     it, keys only: an index write when such an item is created or
//     deleted or its plan changes, none when other attributes change.
//     Its keys are attributes every item has always had, so DynamoDB
//     fills it for an existing table when the index is added (backfill),
//     with no migration of the items;
//   - time to live on expires_at_epoch, which finished operations carry.
func Table() TableSchema {
	str := func(name string) KeyAttribute { return KeyAttribute{Name: name, Type: types.ScalarAttributeTypeS} }
	return TableSchema{
		HashKey:  str(PK),
		RangeKey: str(SK),
		Indexes: []Index{{
			Name:       IndexInProgress,
			HashKey:    str(InProgress),
			RangeKey:   str(SK),
			Projection: types.ProjectionTypeAll,
		}, {
			Name:       IndexByPlan,
			HashKey:    str(PlanID),
			RangeKey:   str(SK),
			Projection: types.ProjectionTypeKeysOnly,
		}},
		TimeToLive: ExpiresAt,
	}
}
