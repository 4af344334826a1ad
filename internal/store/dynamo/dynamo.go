// Package dynamo is the production Store: instances, bindings, operations,
// driver resources and detached resources in one DynamoDB table (see
// DESIGN.md), keyed PK/SK as the bolt store keys its items:
//
//	PK=i#<instance_id>  SK=instance | b#<binding_id> | op#<operation_id> | r#<name>
//	PK=detached         SK=<detached_id>
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
// as stored, so the broker needs no second read.
package dynamo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/serverless-osb/broker/internal/broker"
)

// Environment variables read by ConfigFromEnv.
const (
	EnvTable    = "BROKER_TABLE"
	EnvRegion   = "AWS_REGION"
	EnvEndpoint = "BROKER_DYNAMODB_ENDPOINT"
)

// Config says which table the store uses and where DynamoDB is.
type Config struct {
	Table  string
	Region string
	// Endpoint, when set, replaces DynamoDB's endpoint: moto_server or
	// DynamoDB Local.
	Endpoint string
}

// ConfigFromEnv reads BROKER_TABLE and AWS_REGION (both required) and
// BROKER_DYNAMODB_ENDPOINT (optional).
func ConfigFromEnv() (Config, error) {
	c := Config{
		Table:    os.Getenv(EnvTable),
		Region:   os.Getenv(EnvRegion),
		Endpoint: os.Getenv(EnvEndpoint),
	}
	var missing []error
	if c.Table == "" {
		missing = append(missing, fmt.Errorf("%s is not set", EnvTable))
	}
	if c.Region == "" {
		missing = append(missing, fmt.Errorf("%s is not set", EnvRegion))
	}
	if err := errors.Join(missing...); err != nil {
		return Config{}, fmt.Errorf("dynamodb store config: %w", err)
	}
	return c, nil
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

// Table attribute and index names.
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

// CreateTable creates table as the store needs it: PK (S) hash key, SK (S)
// range key, on-demand billing, the sparse index InProgress (hash key
// inprogress, range key SK, all attributes projected), and time to live on
// expires_at_epoch. An existing table of that name is left as it is, except
// that its time to live is enabled when it is not. The deployed table is
// created by the CDK stack; this is for tests and local tooling.
func CreateTable(ctx context.Context, client *dynamodb.Client, table string) error {
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrSK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrInProgress), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(indexInProgress),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrInProgress), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}},
	})
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
		if d := ttl.TimeToLiveDescription; d != nil && aws.ToString(d.AttributeName) == attrExpiresAt &&
			(d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
			return nil
		}
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(attrExpiresAt),
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
