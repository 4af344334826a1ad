package dynamo

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/store/storetest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// TestCondition: each kind of broker.Condition, as this store translates
// it, holds on the stored items it should, checked by DynamoDB (moto).
// The cases are storetest.ConditionCases, which the bolt store's TestMeets
// runs too.
func TestCondition(t *testing.T) {
	ctx := t.Context()
	client := dynamodb.NewFromConfig(mototest.Config(t, "us-east-1"))
	table := mototest.Name("dynamo-conditions")
	if err := CreateTable(ctx, client, table); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := waittest.Context(t) // t.Context() has ended by now
		defer cancel()
		if _, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
			t.Logf("DeleteTable %s: %v", table, err)
		}
	})
	s := New(client, table)
	put := func(item map[string]types.AttributeValue, err error) {
		t.Helper()
		if err == nil {
			_, err = client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item})
		}
		if err != nil {
			t.Fatalf("seed: %v", err)
		}
	}
	keys := map[string]map[string]types.AttributeValue{}
	for name, inst := range storetest.ConditionInstances {
		if keys[name] = instanceKey(name); inst != nil {
			put(encode(newInstanceItem(*inst)))
		}
	}
	for name, d := range storetest.ConditionDetached {
		if keys[name] = detachedKey(name); d != nil {
			put(encode(newDetachedItem(*d)))
		}
	}
	for _, c := range storetest.ConditionCases {
		for item, want := range c.Holds {
			t.Run(c.Name+" of "+item, func(t *testing.T) {
				err := s.run(ctx, func(add adder) { add(s.check(keys[item], c.Conds, roleInstance)) })
				var conflict *broker.ConflictError
				switch {
				case err == nil && !want:
					t.Errorf("held, want it to fail")
				case err != nil && !errors.As(err, &conflict):
					t.Errorf("got %v", err)
				case err != nil && want:
					t.Errorf("failed, want it to hold")
				}
			})
		}
	}
	t.Run("an unknown kind is an error, not a failed condition", func(t *testing.T) {
		if _, err := condition([]broker.Condition{{Kind: 99}}); err == nil {
			t.Error("got no error")
		}
	})
}
