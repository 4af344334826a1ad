package dynamo

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/serverless-osb/broker/internal/broker"
)

// ListInstances returns a page of the instances f selects, in the order of
// a Scan, and the next page's token. The table has no index of its
// instances, and one is not worth its writes for an operator's command
// (ops instances, the fleet upgrade): this is a consistent Scan of the
// whole table, filtered on the instance items (SK = instance, and f) and
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
