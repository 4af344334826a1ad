package dynamo

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// TestCondition: each kind of broker.Condition, as this store translates
// it, holds on the stored items it should, checked by DynamoDB (moto).
// The bolt store's TestMeets has the same table.
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
	put(encode(newInstanceItem(broker.Instance{ID: "idle", State: broker.InstanceReady, Version: 3})))
	put(encode(newInstanceItem(broker.Instance{ID: "held", State: broker.InstanceUpdating, Op: "op-1", Version: 4, BindingOps: 1})))
	put(encode(newDetachedItem(broker.Detached{ID: "d-1", InstanceID: "i", Name: "n", Attempts: 2})))
	keys := map[string]map[string]types.AttributeValue{
		"idle": instanceKey("idle"), "held": instanceKey("held"), "missing": instanceKey("missing"),
		"detached": detachedKey("d-1"), "missing detached": detachedKey("d-2"),
	}
	for _, c := range conditionCases {
		for item, want := range c.holds {
			t.Run(c.name+" of "+item, func(t *testing.T) {
				err := s.run(ctx, func(add adder) { add(s.check(keys[item], c.conds, roleInstance)) })
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

// conditionCases: for each list of conditions, whether it holds of each
// stored item: "idle" (a ready instance at version 3, no op, no binding
// operations), "held" (an instance held by op-1 at version 4 with one
// binding operation), "missing", "detached" (attempts 2), "missing detached".
var conditionCases = []struct {
	name  string
	conds []broker.Condition
	holds map[string]bool
}{
	{"missing", []broker.Condition{broker.Missing},
		map[string]bool{"idle": false, "held": false, "missing": true, "missing detached": true}},
	{"idle", []broker.Condition{broker.HeldBy("")}, map[string]bool{"idle": true, "held": false, "missing": false}},
	{"held by op-1", []broker.Condition{broker.HeldBy("op-1")}, map[string]bool{"idle": false, "held": true, "missing": false}},
	{"at version 3", []broker.Condition{broker.AtVersion(3)}, map[string]bool{"idle": true, "held": false, "missing": false}},
	{"ready", []broker.Condition{broker.InState(broker.InstanceReady)}, map[string]bool{"idle": true, "held": false, "missing": false}},
	{"no binding operations", []broker.Condition{broker.NoBindingOps}, map[string]bool{"idle": true, "held": false, "missing": false}},
	{"binding operations", []broker.Condition{broker.HasBindingOps}, map[string]bool{"idle": false, "held": true, "missing": false}},
	{"idle at version 3", []broker.Condition{broker.HeldBy(""), broker.AtVersion(3)}, map[string]bool{"idle": true, "held": false}},
	{"idle at version 4", []broker.Condition{broker.HeldBy(""), broker.AtVersion(4)}, map[string]bool{"idle": false, "held": false}},
	{"attempts 2", []broker.Condition{broker.AttemptsAre(2)}, map[string]bool{"detached": true, "missing detached": false}},
	{"attempts 1", []broker.Condition{broker.AttemptsAre(1)}, map[string]bool{"detached": false}},
}
