package dynamo

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/serverless-osb/broker/internal/broker"
)

// ListInstances returns a page of the instances f selects and the next
// page's token. With a plan (ops instances --plan, a fleet upgrade's Plan
// Task) it reads only that plan's instances: listPlanInstances. Without
// one it is a consistent Scan of the whole table, filtered on the instance items (SK = instance, and f) and
// projected on what the listing returns, so it reads every item but sends
// back only the instances, without their parameters and fingerprint. A
// Scan resumes after any key (ExclusiveStartKey), so the token is the last
// instance listed and a page holds exactly InstancePageSize instances
// unless it is the last. DynamoDB resumes after that key whether or not
// its item still exists (an instance deprovisioned between two pages);
// moto resumes only after an item it finds, and else from the start.
func (s *Store) ListInstances(ctx context.Context, f broker.InstanceFilter, page string) ([]broker.Instance, string, error) {
	list, next, err := s.listInstances(ctx, f, page)
	if err != nil {
		return nil, "", fmt.Errorf("list instances: %w", err)
	}
	return list, next, nil
}

func (s *Store) listInstances(ctx context.Context, f broker.InstanceFilter, page string) ([]broker.Instance, string, error) {
	after, err := broker.InstancePageAfter(page)
	if err != nil {
		return nil, "", err
	}
	if f.PlanID != "" {
		return s.listPlanInstances(ctx, f, after)
	}
	filter := expression.Name(attrSK).Equal(expression.Value(skInstance))
	if f.ServiceID != "" {
		filter = filter.And(expression.Name("service_id").Equal(expression.Value(f.ServiceID)))
	}
	if f.PlanID != "" {
		filter = filter.And(expression.Name("plan_id").Equal(expression.Value(f.PlanID)))
	}
	e, err := expression.NewBuilder().WithFilter(filter).WithProjection(listedInstance).Build()
	if err != nil {
		return nil, "", fmt.Errorf("build expression: %w", err)
	}
	in := &dynamodb.ScanInput{
		TableName: s.table, ConsistentRead: aws.Bool(true), Limit: aws.Int32(broker.InstancePageSize),
		FilterExpression: e.Filter(), ProjectionExpression: e.Projection(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	}
	if after != "" {
		in.ExclusiveStartKey = instanceKey(after)
	}
	list := []broker.Instance{}
	for {
		out, err := s.client.Scan(ctx, in)
		if err != nil {
			return nil, "", err
		}
		for _, item := range out.Items {
			if len(list) == broker.InstancePageSize {
				return list, broker.InstancePageToken(list[len(list)-1].ID), nil
			}
			inst, err := decode(item, instanceItem.instance)
			if err != nil {
				return nil, "", err
			}
			list = append(list, *inst)
		}
		if len(out.LastEvaluatedKey) == 0 {
			return list, "", nil
		}
		if len(list) == broker.InstancePageSize {
			// More may follow: the next page starts after the last listed,
			// and may be empty.
			return list, broker.InstancePageToken(list[len(list)-1].ID), nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// listedInstance projects an instance item on every attribute but those
// that may hold a request's secrets.
var listedInstance = func() expression.ProjectionBuilder {
	var names []expression.NameBuilder
	t := reflect.TypeFor[instanceItem]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("dynamodbav"), ",")
		if name != "parameters" && name != "fingerprint" {
			names = append(names, expression.Name(name))
		}
	}
	return expression.NamesList(names[0], names[1:]...)
}()

// listPlanInstances lists the instances of f's plan after the instance
// after: a Query of the index ByPlan (plan_id = the plan, SK = instance:
// the plan's instance items and nothing else, in the order of their PKs)
// for a page of keys, then one consistent BatchGetItem of those instances,
// projected as a Scan's. The index is eventually consistent: an instance
// read since it moved to another plan is dropped here, and one created or
// moved to the plan a moment ago may be missing, as the listing allows (an
// instance created while the pages are read may be listed or not).
func (s *Store) listPlanInstances(ctx context.Context, f broker.InstanceFilter, after string) ([]broker.Instance, string, error) {
	e, err := expression.NewBuilder().WithKeyCondition(
		expression.Key(attrPlanID).Equal(expression.Value(f.PlanID)).And(expression.Key(attrSK).Equal(expression.Value(skInstance)))).Build()
	if err != nil {
		return nil, "", fmt.Errorf("build expression: %w", err)
	}
	in := &dynamodb.QueryInput{
		TableName: s.table, IndexName: aws.String(indexByPlan), Limit: aws.Int32(broker.InstancePageSize),
		KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	}
	if after != "" {
		start := instanceKey(after)
		start[attrPlanID] = &types.AttributeValueMemberS{Value: f.PlanID}
		in.ExclusiveStartKey = start
	}
	out, err := s.client.Query(ctx, in)
	if err != nil {
		return nil, "", err
	}
	list := []broker.Instance{}
	if len(out.Items) == 0 {
		return list, "", nil
	}
	keys := make([]item, len(out.Items))
	for i, it := range out.Items {
		keys[i] = item{attrPK: it[attrPK], attrSK: it[attrSK]}
	}
	got, err := s.getListed(ctx, keys)
	if err != nil {
		return nil, "", err
	}
	last := ""
	for _, k := range keys {
		last = strings.TrimPrefix(keyPart(k, attrPK), pk(""))
		it, ok := got[keyPart(k, attrPK)]
		if !ok {
			continue // deprovisioned since the index listed it
		}
		inst, err := decode(it, instanceItem.instance)
		if err != nil {
			return nil, "", err
		}
		if f.Selects(*inst) {
			list = append(list, *inst)
		}
	}
	if len(out.LastEvaluatedKey) == 0 {
		return list, "", nil
	}
	// The next page starts after the last key the index listed, which a
	// page that lost instances here does not show.
	return list, broker.InstancePageToken(last), nil
}

// getListed reads the instance items at keys (at most 100), consistently
// and projected on what a listing returns, by PK.
func (s *Store) getListed(ctx context.Context, keys []item) (map[string]item, error) {
	e, err := expression.NewBuilder().WithProjection(listedInstance).Build()
	if err != nil {
		return nil, fmt.Errorf("build expression: %w", err)
	}
	out := make(map[string]item, len(keys))
	err = s.batchGet(ctx, types.KeysAndAttributes{
		Keys: keys, ConsistentRead: aws.Bool(true), ProjectionExpression: e.Projection(), ExpressionAttributeNames: e.Names(),
	}, func(it item) { out[keyPart(it, attrPK)] = it })
	if err != nil {
		return nil, err
	}
	return out, nil
}
