package app_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/broker"
)

// TestPlanListingsReadOnlyThePlansInstances: ops instances --plan and a
// fleet upgrade's Plan Task read, on DynamoDB, the items of the instances
// of the plan they name, not the table: the same few items beside 300
// instances of another plan (each with its provision) as beside none.
func TestPlanListingsReadOnlyThePlansInstances(t *testing.T) {
	const others = 300
	items := &itemsRead{}
	cb := newCallsBroker(t, items.Register)
	ctx := context.Background()
	var svc, plan, other string
	for _, s := range cb.catalog.Services() {
		for _, p := range s.Plans {
			switch p.Name {
			case "fake-plan":
				svc, plan = s.ID, p.ID
			case "fake-async-plan":
				other = p.ID
			}
		}
	}
	for _, id := range []string{"mine-1", "mine-2", "mine-3"} {
		body := fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"o","space_guid":"s","parameters":{"duration_seconds":60}}`, svc, plan)
		if code, got, _ := cb.do(http.MethodPut, "/v2/service_instances/"+id, body); code != http.StatusCreated {
			t.Fatalf("provision %s: %d %s", id, code, got)
		}
	}

	// measure lists the plan's instances both ways and returns the items
	// each read.
	cb.broker.Campaigns = cb.store
	campaign := 0
	measure := func() (ops, planTask int) {
		t.Helper()
		items.Take()
		var out bytes.Buffer
		if err := app.OpsJSON(ctx, cb.broker, []string{"instances", "--plan", plan}, &out); err != nil {
			t.Fatalf("ops instances: %v", err)
		}
		for _, id := range []string{"mine-1", "mine-2", "mine-3"} {
			if !bytes.Contains(out.Bytes(), []byte(id)) {
				t.Errorf("ops instances --plan lists no %s: %s", id, out.String())
			}
		}
		ops = items.Take()
		campaign++
		if _, err := cb.broker.UpgradePlanTask(ctx, fmt.Sprintf("c-%d", campaign), 1, broker.CampaignOptions{PlanIDs: []string{plan}, MaxInFlight: 1, MaxFailures: 1}); err != nil {
			t.Fatalf("plan task: %v", err)
		}
		return ops, items.Take()
	}
	opsAlone, taskAlone := measure()

	// The other plan's instances: one provisioned, then copied under new
	// ids, its provision with it.
	if code, got, _ := cb.do(http.MethodPut, "/v2/service_instances/other-0000?accepts_incomplete=true",
		fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"o","space_guid":"s","parameters":{"duration_seconds":60}}`, svc, other)); code != http.StatusAccepted {
		t.Fatalf("provision other-0000: %d %s", code, got)
	}
	out, err := cb.ddb.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(cb.table), KeyConditionExpression: aws.String("PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "i#other-0000"}}})
	if err != nil || len(out.Items) < 2 {
		t.Fatalf("read other-0000: %v (%d items)", err, len(out.Items))
	}
	var writes []types.WriteRequest
	for i := 1; i < others; i++ {
		id := fmt.Sprintf("other-%04d", i)
		for _, it := range out.Items {
			copied := maps.Clone(it)
			copied["PK"] = &types.AttributeValueMemberS{Value: "i#" + id}
			if _, ok := copied["binding_ops"]; ok { // the instance item
				copied["id"] = &types.AttributeValueMemberS{Value: id}
			} else {
				copied["instance_id"] = &types.AttributeValueMemberS{Value: id}
			}
			writes = append(writes, types.WriteRequest{PutRequest: &types.PutRequest{Item: copied}})
		}
	}
	for len(writes) > 0 {
		n := min(25, len(writes))
		got, err := cb.ddb.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{cb.table: writes[:n]}})
		if err != nil {
			t.Fatalf("write the other plan's instances: %v", err)
		}
		writes = append(writes[n:], got.UnprocessedItems[cb.table]...)
	}
	opsBeside, taskBeside := measure()

	t.Logf("DynamoDB items read listing a plan's 3 instances (moto): ops instances --plan %d alone, %d beside %d instances of another plan; "+
		"a campaign's Plan Task %d alone, %d beside them (target: the same)", opsAlone, opsBeside, others, taskAlone, taskBeside)
	if opsBeside != opsAlone {
		t.Errorf("ops instances --plan read %d items beside %d instances of another plan, %d without them", opsBeside, others, opsAlone)
	}
	if taskBeside != taskAlone {
		t.Errorf("the Plan Task read %d items beside %d instances of another plan, %d without them", taskBeside, others, taskAlone)
	}
}
