package infra

import (
	"errors"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/store/dynamo"
	"github.com/serverless-osb/broker/internal/waittest"
)

// tableShape is what the store relies on in a table: its keys, the types
// of its key attributes, its indexes and its time to live.
type tableShape struct {
	// Keys are "NAME HASH" and "NAME RANGE", in the key schema's order.
	Keys []string
	// Attributes maps each defined attribute to its type: S, N or B.
	Attributes map[string]string
	Indexes    map[string]indexShape
	// TimeToLive is the attribute time to live reads, "" when it is off.
	TimeToLive string
}

type indexShape struct {
	Keys             []string
	Projection       string
	NonKeyAttributes []string
}

// TestTableIsTheStoresTable creates a table with the store's own
// dynamo.CreateTable on moto, reads it back, and compares it with the
// table the stack deploys: a change to either that the other does not
// make fails here.
func TestTableIsTheStoresTable(t *testing.T) {
	deployed := templateTableShape(t, properties(t, "Table"))
	created := createdTableShape(t)
	if len(created.Keys) == 0 || len(deployed.Keys) == 0 {
		t.Fatalf("no key schema: created %+v, deployed %+v", created, deployed)
	}
	tests := []struct {
		name              string
		created, deployed any
	}{
		{"the keys are the same", created.Keys, deployed.Keys},
		{"the key attributes have the same types", created.Attributes, deployed.Attributes},
		{"the indexes have the same names, keys and projections", created.Indexes, deployed.Indexes},
		{"time to live reads the same attribute", created.TimeToLive, deployed.TimeToLive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.created, tt.deployed) {
				t.Errorf("dynamo.CreateTable makes %+v, the stack deploys %+v", tt.created, tt.deployed)
			}
		})
	}
}

// createdTableShape is the shape of a table dynamo.CreateTable makes on
// moto, as DescribeTable and DescribeTimeToLive tell it.
func createdTableShape(t *testing.T) tableShape {
	t.Helper()
	ctx := t.Context()
	client := dynamodb.NewFromConfig(mototest.Config(t, "eu-west-1"))
	table := mototest.Name("infra-table")
	if err := dynamo.CreateTable(ctx, client, table); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := waittest.Context(t) // t.Context() has ended by now
		defer cancel()
		var gone *types.ResourceNotFoundException
		if _, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil && !errors.As(err, &gone) {
			t.Errorf("DeleteTable %s: %v", table, err)
		}
	})
	d, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatalf("DescribeTable: %v", err)
	}
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatalf("DescribeTimeToLive: %v", err)
	}
	s := tableShape{Keys: describedKeys(d.Table.KeySchema), Attributes: map[string]string{}, Indexes: map[string]indexShape{}}
	for _, a := range d.Table.AttributeDefinitions {
		s.Attributes[aws.ToString(a.AttributeName)] = string(a.AttributeType)
	}
	for _, index := range d.Table.GlobalSecondaryIndexes {
		i := indexShape{Keys: describedKeys(index.KeySchema)}
		if index.Projection != nil {
			i.Projection = string(index.Projection.ProjectionType)
			if len(index.Projection.NonKeyAttributes) > 0 { // none: nil, as from the template
				i.NonKeyAttributes = index.Projection.NonKeyAttributes
			}
		}
		s.Indexes[aws.ToString(index.IndexName)] = i
	}
	if d := ttl.TimeToLiveDescription; d != nil &&
		(d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		s.TimeToLive = aws.ToString(d.AttributeName)
	}
	return s
}

func describedKeys(ks []types.KeySchemaElement) []string {
	var keys []string
	for _, k := range ks {
		keys = append(keys, aws.ToString(k.AttributeName)+" "+string(k.KeyType))
	}
	return keys
}

// templateTableShape is the shape of the AWS::DynamoDB::Table whose
// properties the template holds.
func templateTableShape(t *testing.T, props object) tableShape {
	t.Helper()
	s := tableShape{Keys: templateKeys(t, props["KeySchema"]), Attributes: map[string]string{}, Indexes: map[string]indexShape{}}
	for _, a := range list(t, props["AttributeDefinitions"]) {
		s.Attributes[str(t, a["AttributeName"])] = str(t, a["AttributeType"])
	}
	for _, index := range list(t, props["GlobalSecondaryIndexes"]) {
		i := indexShape{Keys: templateKeys(t, index["KeySchema"])}
		if p, ok := index["Projection"].(object); ok {
			i.Projection = str(t, p["ProjectionType"])
			attrs, _ := p["NonKeyAttributes"].([]any)
			for _, a := range attrs {
				i.NonKeyAttributes = append(i.NonKeyAttributes, str(t, a))
			}
		}
		s.Indexes[str(t, index["IndexName"])] = i
	}
	if ttl, ok := props["TimeToLiveSpecification"].(object); ok && ttl["Enabled"] == true {
		s.TimeToLive = str(t, ttl["AttributeName"])
	}
	return s
}

func templateKeys(t *testing.T, v any) []string {
	t.Helper()
	var keys []string
	for _, k := range list(t, v) {
		keys = append(keys, str(t, k["AttributeName"])+" "+str(t, k["KeyType"]))
	}
	return keys
}

// list is a template's list of objects; absent, it is empty.
func list(t *testing.T, v any) []object {
	t.Helper()
	if v == nil {
		return nil
	}
	items, ok := v.([]any)
	if !ok {
		t.Fatalf("want a list, got %v", v)
	}
	var out []object
	for _, item := range items {
		o, ok := item.(object)
		if !ok {
			t.Fatalf("want an object, got %v", item)
		}
		out = append(out, o)
	}
	return out
}

// str is a template's literal string; a reference fails the test.
func str(t *testing.T, v any) string {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		t.Fatalf("want a literal string, got %v", v)
	}
	return s
}
