// Package dynamo is the production Store: instances, bindings, operations,
// driver resources and detached resources in one DynamoDB table (see
// DESIGN.md), keyed PK/SK as the bolt store keys its items:
//
//	PK=i#<instance_id>  SK=instance | b#<binding_id> | op#<operation_id> | r#<name>
//	PK=detached         SK=<detached_id>
//
// The table's shape (those keys, the sparse index InProgress, time to live
// on expires_at_epoch) is written once, in Schema (schema.go): CreateTable
// creates the table from it and the CDK stack (infra) deploys it from it.
// The store reads no environment variable: internal/app gives it its Config.
//
// Each kind of item has a storage type of this package (item.go) whose
// dynamodbav tags name its attributes, at the top level, so that conditions
// can name op, binding_ops, version and state; the domain's json tags play
// no part. Raw JSON fields (parameters, context, bind_resource, an
// operation's target, a resource's data) are kept as strings holding their
// JSON text, so they come back exactly as stored.
//
// Every method that changes state is ONE conditional PutItem or DeleteItem
// or ONE TransactWriteItems; none reads an item to decide what to write. A
// failed condition comes back as *broker.ConflictError carrying the items
// as stored, so the broker needs no second read. The conditions are the
// broker's (broker.Expect, from the write request); this package only
// translates them, in one function (condition, in conditions.go), into
// each write's condition expression.
package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/store/dynamo/schema"
)

// Config says which table the store uses and where DynamoDB is.
type Config struct {
	Table  string
	Region string
	// Endpoint, when set, replaces DynamoDB's endpoint: moto_server or
	// DynamoDB Local.
	Endpoint string
}

// ClientOptions applies the region and endpoint to a client's options:
//
//	client := dynamodb.NewFromConfig(awsCfg, cfg.ClientOptions)
func (c Config) ClientOptions(o *dynamodb.Options) {
	if c.Region != "" {
		o.Region = c.Region
	}
	if c.Endpoint != "" {
		o.BaseEndpoint = aws.String(c.Endpoint)
	}
}

// Store is the DynamoDB Store.
type Store struct {
	client *dynamodb.Client
	table  *string
}

var _ broker.Store = (*Store)(nil)

// New returns a Store on table. The client is built once by the caller, who
// may add middleware to it (such as one counting API calls).
func New(client *dynamodb.Client, table string) *Store {
	return &Store{client: client, table: aws.String(table)}
}

// CreateTable creates table as schema.Table describes it, billed on demand. An
// existing table of that name is left as it is, except that its time to
// live is enabled when it is not. The deployed table is created by the CDK
// stack, from the same schema; this is for tests and local tooling.
func CreateTable(ctx context.Context, client *dynamodb.Client, table string) error {
	shape := schema.Table()
	_, err := client.CreateTable(ctx, createTableInput(shape, table))
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", table, err)
	}
	err = dynamodb.NewTableExistsWaiter(client).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 5*time.Minute)
	if err != nil {
		return fmt.Errorf("create table %s: wait until active: %w", table, err)
	}
	if inUse != nil {
		ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
		if err != nil {
			return fmt.Errorf("create table %s: describe time to live: %w", table, err)
		}
		if d := ttl.TimeToLiveDescription; d != nil && aws.ToString(d.AttributeName) == shape.TimeToLive &&
			(d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
			return nil
		}
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(shape.TimeToLive),
			Enabled:       aws.Bool(true),
		},
	})
	if err != nil {
		return fmt.Errorf("create table %s: enable time to live: %w", table, err)
	}
	return nil
}

// Keys. DynamoDB compares keys exactly, so unlike bolt no separator is
// needed between PK and SK; a Query with begins_with on SK stays within one
// instance's partition.

func pk(instanceID string) string { return "i#" + instanceID }

const skInstance = "instance"

func skBinding(id string) string   { return "b#" + id }
func skOperation(id string) string { return "op#" + id }
func skResource(name string) string {
	return "r#" + name
}

func key(pkValue, skValue string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: pkValue},
		attrSK: &types.AttributeValueMemberS{Value: skValue},
	}
}

func instanceKey(id string) map[string]types.AttributeValue { return key(pk(id), skInstance) }

func bindingKey(instanceID, id string) map[string]types.AttributeValue {
	return key(pk(instanceID), skBinding(id))
}

func operationKey(instanceID, id string) map[string]types.AttributeValue {
	return key(pk(instanceID), skOperation(id))
}

func resourceKey(instanceID, name string) map[string]types.AttributeValue {
	return key(pk(instanceID), skResource(name))
}

// pkDetached is the one partition of the detached resources: a broker has
// few at a time, and one partition lets ListDetached be a consistent Query.
const pkDetached = "detached"

func detachedKey(id string) map[string]types.AttributeValue { return key(pkDetached, id) }
