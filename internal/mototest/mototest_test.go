package mototest_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/serverless-osb/broker/internal/mototest"
)

func TestMotoAnswersDynamoDB(t *testing.T) {
	c := dynamodb.NewFromConfig(mototest.Config(t, "us-east-1"))
	if _, err := c.ListTables(t.Context(), &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("moto's DynamoDB: %v", err)
	}
}
