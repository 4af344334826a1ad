package infra

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

type object = map[string]any

func TestStackResources(t *testing.T) {
	type resourceTest struct {
		name         string
		resourceType string
		props        object
	}
	tests := []resourceTest{
		{"the table is keyed PK/SK, on demand, with point-in-time recovery, TTL and deletion protection", "AWS::DynamoDB::Table", object{
			"KeySchema": []any{
				object{"AttributeName": "PK", "KeyType": "HASH"},
				object{"AttributeName": "SK", "KeyType": "RANGE"},
			},
			"BillingMode":                      "PAY_PER_REQUEST",
			"PointInTimeRecoverySpecification": object{"PointInTimeRecoveryEnabled": true},
			"TimeToLiveSpecification":          object{"AttributeName": "expires_at_epoch", "Enabled": true},
			"DeletionProtectionEnabled":        true,
		}},
		{"the table has the sparse index InProgress on inprogress and SK with every attribute, and ByPlan on plan_id and SK with the keys", "AWS::DynamoDB::Table", object{
			"GlobalSecondaryIndexes": []any{object{
				"IndexName": "InProgress",
				"KeySchema": []any{
					object{"AttributeName": "inprogress", "KeyType": "HASH"},
					object{"AttributeName": "SK", "KeyType": "RANGE"},
				},
				"Projection": object{"ProjectionType": "ALL"},
			}, object{
				"IndexName": "ByPlan",
				"KeySchema": []any{
					object{"AttributeName": "plan_id", "KeyType": "HASH"},
					object{"AttributeName": "SK", "KeyType": "RANGE"},
				},
				"Projection": object{"ProjectionType": "KEYS_ONLY"},
			}},
		}},
		{"the table is encrypted with the stack's customer-managed key", "AWS::DynamoDB::Table", object{
			"SSESpecification": object{
				"SSEEnabled":     true,
				"SSEType":        "KMS",
				"KMSMasterKeyId": object{"Fn::GetAtt": []any{logicalID(t, "TableKey"), "Arn"}},
			},
		}},
		{"the table's key rotates", "AWS::KMS::Key", object{"EnableKeyRotation": true}},
		{"the sealing key is a key of its own, and rotates", "AWS::KMS::Key", object{
			"EnableKeyRotation": true,
			"Description":       assertions.Match_StringLikeRegexp(jsii.String("^Seals the secrets")),
		}},
		{"the sealing key has an alias named after the stack", "AWS::KMS::Alias", object{
			"AliasName":   "alias/ServerlessOsb-sealing",
			"TargetKeyId": object{"Fn::GetAtt": []any{logicalID(t, "SealingKey"), "Arn"}},
		}},
		{"the secret generates a 32-character password without punctuation for the user broker", "AWS::SecretsManager::Secret", object{
			"GenerateSecretString": object{
				"SecretStringTemplate": `{"username":"broker"}`,
				"GenerateStringKey":    "password",
				"ExcludePunctuation":   true,
				"PasswordLength":       32,
			},
		}},
		{"the api function is bootstrap on provided.al2023, arm64, traced, and answers within 25 s", "AWS::Lambda::Function", object{
			"Role":          object{"Fn::GetAtt": []any{logicalID(t, "ApiRole"), "Arn"}},
			"Runtime":       "provided.al2023",
			"Architectures": []any{"arm64"},
			"Handler":       "bootstrap",
			"Timeout":       25,
			"MemorySize":    256,
			// Its own, so that it answers while the worker is saturated.
			"ReservedConcurrentExecutions": DefaultAPIReservedConcurrency,
			"TracingConfig":                object{"Mode": "Active"},
			"LoggingConfig":                object{"LogGroup": object{"Ref": logicalID(t, "ApiLogs")}},
			"Environment": object{"Variables": object{
				"BROKER_TABLE":                       object{"Ref": logicalID(t, "Table")},
				"BROKER_SECRET_ARN":                  object{"Ref": logicalID(t, "Credentials")},
				"BROKER_OPERATION_STATE_MACHINE_ARN": object{"Ref": logicalID(t, "OperationStateMachine")},
				"BROKER_CLEANUP_STATE_MACHINE_ARN":   object{"Ref": logicalID(t, "CleanupStateMachine")},
			}},
		}},
		{"the worker function is bootstrap on provided.al2023, arm64, traced, with the Task states' 60 s", "AWS::Lambda::Function", object{
			"Role":          object{"Fn::GetAtt": []any{logicalID(t, "WorkerRole"), "Arn"}},
			"Runtime":       "provided.al2023",
			"Architectures": []any{"arm64"},
			"Handler":       "bootstrap",
			"Timeout":       60,
			"MemorySize":    256,
			// A bound, so that Tasks hanging on a backend cannot take the
			// account's concurrency.
			"ReservedConcurrentExecutions": DefaultWorkerReservedConcurrency,
			"TracingConfig":                object{"Mode": "Active"},
			"LoggingConfig":                object{"LogGroup": object{"Ref": logicalID(t, "WorkerLogs")}},
			// The ARNs from the state machines' names: a reference would be
			// circular, as the state machines name the worker.
			"Environment": object{"Variables": object{
				"BROKER_TABLE":                       object{"Ref": logicalID(t, "Table")},
				"BROKER_OPERATION_STATE_MACHINE_ARN": stateMachineARN("ServerlessOsb-operation"),
				"BROKER_CLEANUP_STATE_MACHINE_ARN":   stateMachineARN("ServerlessOsb-cleanup"),
				// A quarter of its reserved concurrency per plan.
				"BROKER_MAX_TASKS_PER_PLAN": "5",
			}},
		}},
		{"the worker does not retry the reaper's asynchronous invocations, and drops one older than the interval", "AWS::Lambda::EventInvokeConfig", object{
			"FunctionName":             object{"Ref": logicalID(t, "WorkerFunction")},
			"Qualifier":                "$LATEST",
			"MaximumRetryAttempts":     0,
			"MaximumEventAgeInSeconds": 300,
		}},
		{"the state machine logs under /aws/vendedlogs/, which needs no entry in the account's log resource policy", "AWS::Logs::LogGroup", object{
			"LogGroupName": object{"Fn::Join": []any{"", assertions.Match_ArrayWith(&[]any{assertions.Match_StringLikeRegexp(jsii.String("^/aws/vendedlogs/states/ServerlessOsb-operation-"))})}},
		}},
		{"the cleanup state machine logs under /aws/vendedlogs/ too", "AWS::Logs::LogGroup", object{
			"LogGroupName": object{"Fn::Join": []any{"", assertions.Match_ArrayWith(&[]any{assertions.Match_StringLikeRegexp(jsii.String("^/aws/vendedlogs/states/ServerlessOsb-cleanup-"))})}},
		}},
		{"every OSB route goes to the api function", "AWS::ApiGatewayV2::Route", object{
			"RouteKey":          "ANY /v2/{proxy+}",
			"AuthorizationType": "NONE",
		}},
		{"the integration is the api function with payload format 2.0", "AWS::ApiGatewayV2::Integration", object{
			"IntegrationType":      "AWS_PROXY",
			"IntegrationUri":       object{"Fn::GetAtt": []any{logicalID(t, "ApiFunction"), "Arn"}},
			"PayloadFormatVersion": "2.0",
		}},
		{"the default stage deploys itself, is throttled and logs every request as JSON", "AWS::ApiGatewayV2::Stage", object{
			"StageName":  "$default",
			"AutoDeploy": true,
			"DefaultRouteSettings": object{
				"ThrottlingRateLimit":  50,
				"ThrottlingBurstLimit": 100,
			},
			"AccessLogSettings": object{
				"DestinationArn": object{"Fn::GetAtt": []any{logicalID(t, "AccessLogs"), "Arn"}},
				"Format":         assertions.Match_SerializedJson(assertions.Match_ObjectLike(&object{"requestId": "$context.requestId", "status": "$context.status"})),
			},
		}},
		{"API Gateway may invoke the api function", "AWS::Lambda::Permission", object{
			"Action":       "lambda:InvokeFunction",
			"FunctionName": object{"Fn::GetAtt": []any{logicalID(t, "ApiFunction"), "Arn"}},
			"Principal":    "apigateway.amazonaws.com",
		}},
	}
	for _, workflow := range []string{"operation", "cleanup"} {
		id := strings.ToUpper(workflow[:1]) + workflow[1:] + "StateMachine"
		tests = append(tests, resourceTest{"the " + workflow + " state machine is Standard, named after the stack, traced, logs every event without execution data, and names the worker", "AWS::StepFunctions::StateMachine", object{
			"StateMachineName":     "ServerlessOsb-" + workflow,
			"StateMachineType":     "STANDARD",
			"TracingConfiguration": object{"Enabled": true},
			"LoggingConfiguration": object{
				"Level":                "ALL",
				"IncludeExecutionData": false,
				"Destinations": []any{object{"CloudWatchLogsLogGroup": object{
					"LogGroupArn": object{"Fn::GetAtt": []any{logicalID(t, id+"Logs"), "Arn"}},
				}}},
			},
			"DefinitionSubstitutions": object{
				"WorkerFunctionArn": object{"Fn::GetAtt": []any{logicalID(t, "WorkerFunction"), "Arn"}},
			},
			"DefinitionS3Location": assertions.Match_Absent(),
		}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check(t, func() { broker.template.HasResourceProperties(&tt.resourceType, tt.props) })
		})
	}
}

func TestStackRetainsData(t *testing.T) {
	for _, id := range []string{"Table", "TableKey", "SealingKey"} {
		t.Run("the "+id+" outlives the stack and its replacement", func(t *testing.T) {
			r := resource(t, id)
			if r["DeletionPolicy"] != "Retain" || r["UpdateReplacePolicy"] != "Retain" {
				t.Errorf("DeletionPolicy %v, UpdateReplacePolicy %v; want Retain, Retain", r["DeletionPolicy"], r["UpdateReplacePolicy"])
			}
		})
	}
	t.Run("every log group keeps its events 30 days", func(t *testing.T) {
		// The api's, the worker's, the access log, one per workflow, and
		// the cacheuser function's (the shipped catalog's Valkey plans).
		check(t, func() { broker.template.ResourceCountIs(jsii.String("AWS::Logs::LogGroup"), jsii.Number(7)) })
		check(t, func() {
			broker.template.AllResourcesProperties(jsii.String("AWS::Logs::LogGroup"), object{"RetentionInDays": 30})
		})
	})
}

func TestStackStateMachineDefinitions(t *testing.T) {
	t.Run("there is one state machine per workflow", func(t *testing.T) {
		check(t, func() {
			broker.template.ResourceCountIs(jsii.String("AWS::StepFunctions::StateMachine"), jsii.Number(3))
		})
	})
	for _, workflow := range []string{"operation", "cleanup", "upgrade"} {
		t.Run("the "+workflow+" workflow", func(t *testing.T) {
			want, err := os.ReadFile("statemachines/" + workflow + ".asl.json")
			if err != nil {
				t.Fatal(err)
			}
			id := strings.ToUpper(workflow[:1]) + workflow[1:] + "StateMachine"
			definition, ok := properties(t, id)["DefinitionString"].(string)
			var asl struct {
				TimeoutSeconds int `json:"TimeoutSeconds"`
				States         map[string]struct {
					Type string `json:"Type"`
				} `json:"States"`
			}
			parseErr := json.Unmarshal([]byte(definition), &asl)
			type definitionTest struct {
				name string
				ok   bool
			}
			tests := []definitionTest{
				{"the definition is inline: a string, not an S3 location or an intrinsic", ok},
				{"the definition is statemachines/" + workflow + ".asl.json as it is", definition == string(want)},
				{"the definition leaves ${WorkerFunctionArn} to DefinitionSubstitutions", strings.Contains(definition, `"${WorkerFunctionArn}"`)},
				{"the definition bounds every execution with a top-level TimeoutSeconds", parseErr == nil && asl.TimeoutSeconds > 0},
			}
			switch workflow {
			case "operation":
				tests = append(tests, definitionTest{"the definition starts at Begin", strings.Contains(definition, `"StartAt": "Begin"`)})
			case "cleanup":
				// What makes the alarm on its failed executions the
				// operator's alarm.
				tests = append(tests, definitionTest{"the definition ends failed, in GaveUp, when it gives up", asl.States["GaveUp"].Type == "Fail"})
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					if !tt.ok {
						t.Errorf("DefinitionString = %.200q…", definition)
					}
				})
			}
		})
	}
}

func TestStackAlarms(t *testing.T) {
	tests := []struct {
		name      string
		metric    string
		dimension string
		target    string
		threshold float64
	}{
		{"the HTTP API's 5xx answers alarm", "5xx", "ApiId", "HttpApi", 1},
		{"the api function's errors alarm", "Errors", "FunctionName", "ApiFunction", 1},
		{"the api function's throttles alarm", "Throttles", "FunctionName", "ApiFunction", 1},
		{"the worker function's errors alarm in bursts", "Errors", "FunctionName", "WorkerFunction", workerErrorThreshold},
		{"the worker function's throttles alarm", "Throttles", "FunctionName", "WorkerFunction", 1},
		{"failed executions of the operation workflow alarm", "ExecutionsFailed", "StateMachineArn", "OperationStateMachine", 1},
		{"timed-out executions of the operation workflow alarm", "ExecutionsTimedOut", "StateMachineArn", "OperationStateMachine", 1},
		{"failed executions of the cleanup workflow alarm", "ExecutionsFailed", "StateMachineArn", "CleanupStateMachine", 1},
		{"timed-out executions of the cleanup workflow alarm", "ExecutionsTimedOut", "StateMachineArn", "CleanupStateMachine", 1},
		{"failed executions of the fleet upgrade workflow alarm", "ExecutionsFailed", "StateMachineArn", "UpgradeStateMachine", 1},
		{"timed-out executions of the fleet upgrade workflow alarm", "ExecutionsTimedOut", "StateMachineArn", "UpgradeStateMachine", 1},
		{"the reaper's dropped runs alarm", "AsyncEventsDropped", "FunctionName", "WorkerFunction", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check(t, func() {
				broker.template.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), object{
					"MetricName":         tt.metric,
					"Dimensions":         assertions.Match_ArrayWith(&[]any{object{"Name": tt.dimension, "Value": object{"Ref": logicalID(t, tt.target)}}}),
					"Statistic":          "Sum",
					"Threshold":          tt.threshold,
					"ComparisonOperator": "GreaterThanOrEqualToThreshold",
					"TreatMissingData":   "notBreaching",
				})
			})
		})
	}
	t.Run("there is no other alarm", func(t *testing.T) {
		check(t, func() {
			broker.template.ResourceCountIs(jsii.String("AWS::CloudWatch::Alarm"), jsii.Number(len(tests)+len(brokerAlarmIDs)))
		})
	})

	descriptions := []struct {
		name  string
		alarm string
		want  []string
	}{
		{"the cleanup's failed executions alarm says a detached resource could not be deleted and how an operator lists it", "CleanupStateMachineFailedAlarm",
			[]string{"a detached resource could not be deleted", "stays listed for an operator", "go run ./functions/api ops detached"}},
		{"the cleanup's timed-out executions alarm says how an operator lists the resource", "CleanupStateMachineTimedOutAlarm",
			[]string{"a detached resource was not deleted", "go run ./functions/api ops detached"}},
		{"the operation's failed executions alarm says the reaper repairs the outcome", "OperationStateMachineFailedAlarm",
			[]string{"an operation's outcome may be unrecorded", "the reaper repairs it"}},
		{"the fleet upgrade's failed executions alarm says how an operator finds the campaign", "UpgradeStateMachineFailedAlarm",
			[]string{"could not be planned", "ops upgrade status"}},
		{"the reaper's alarm says what stays stuck", "ReaperFailedAlarm",
			[]string{"every 5 minutes", "the last 15 minutes", "stay stuck"}},
	}
	for _, tt := range descriptions {
		t.Run(tt.name, func(t *testing.T) {
			description, _ := properties(t, tt.alarm)["AlarmDescription"].(string)
			for _, want := range tt.want {
				if !strings.Contains(description, want) {
					t.Errorf("AlarmDescription %q does not say %q", description, want)
				}
			}
		})
	}

	t.Run("the reaper's alarm fires when reaps are dropped in 3 intervals in a row, not on one", func(t *testing.T) {
		check(t, func() {
			broker.template.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), object{
				"Namespace":         "AWS/Lambda",
				"MetricName":        "AsyncEventsDropped",
				"Period":            300,
				"EvaluationPeriods": 3,
				"DatapointsToAlarm": assertions.Match_Absent(), // all of them
			})
		})
	})
	t.Run("every other alarm fires on its first breaching period", func(t *testing.T) {
		for id, r := range resources(t, "AWS::CloudWatch::Alarm") {
			props := r["Properties"].(object)
			if props["MetricName"] != "AsyncEventsDropped" && props["MetricName"] != "DetachedResources" && props["EvaluationPeriods"] != 1.0 {
				t.Errorf("alarm %s: EvaluationPeriods %v", id, props["EvaluationPeriods"])
			}
		}
	})
}

func TestStackOutputs(t *testing.T) {
	tests := []struct {
		name  string
		id    string
		value any
	}{
		{"the broker's URL is the HTTP API's endpoint, with no trailing slash", OutputBrokerURL, object{"Fn::GetAtt": []any{logicalID(t, "HttpApi"), "ApiEndpoint"}}},
		{"the secret's ARN is an output", OutputBrokerSecretARN, object{"Ref": logicalID(t, "Credentials")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check(t, func() { broker.template.HasOutput(&tt.id, object{"Value": tt.value}) })
		})
	}
}

func TestStackPermissions(t *testing.T) {
	table := object{"Fn::GetAtt": []any{logicalID(t, "Table"), "Arn"}}
	index := object{"Fn::Join": []any{"", []any{table, "/index/InProgress"}}}
	byPlan := object{"Fn::Join": []any{"", []any{table, "/index/ByPlan"}}}
	key := object{"Fn::GetAtt": []any{logicalID(t, "TableKey"), "Arn"}}
	throughDynamoDB := object{"StringEquals": object{"kms:ViaService": object{"Fn::Join": []any{"", []any{
		"dynamodb.", object{"Ref": "AWS::Region"}, ".", object{"Ref": "AWS::URLSuffix"},
	}}}}}
	// What internal/app's sealer binds every data key to: {"table": name}.
	sealKey := object{"Fn::GetAtt": []any{logicalID(t, "SealingKey"), "Arn"}}
	sealingContext := object{
		"StringEquals":              object{"kms:EncryptionContext:table": object{"Ref": logicalID(t, "Table")}},
		"ForAllValues:StringEquals": object{"kms:EncryptionContextKeys": []any{"table"}},
	}
	worker := object{"Fn::GetAtt": []any{logicalID(t, "WorkerFunction"), "Arn"}}
	workerVersions := object{"Fn::Join": []any{"", []any{worker, ":*"}}}
	executions := []any{executionsARN("ServerlessOsb-cleanup"), executionsARN("ServerlessOsb-operation"), executionsARN("ServerlessOsb-upgrade")}
	serviceRole := object{"Fn::GetAtt": []any{logicalID(t, "ServiceRole"), "Arn"}}
	serviceStacks := regional("cloudformation", "stack/osb-*/*")
	// What internal/store/dynamo calls (GetItem, BatchGetItem, PutItem,
	// DeleteItem, Query, and TransactWriteItems and TransactGetItems, which IAM authorizes per
	// item as PutItem, UpdateItem, DeleteItem, ConditionCheckItem and
	// GetItem), and what DynamoDB does with the key for it.
	items := []string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem", "dynamodb:Query"}
	keyUse := []string{"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"}
	tests := []struct {
		name      string
		role      string
		actions   []string
		resource  any
		condition any
	}{
		{"the api function reads and writes the table's items, with the actions the dynamo store calls and no more", "ApiRole", items, []any{table, byPlan, index}, nil},
		{"the worker function reads and writes the table's items, with the actions the dynamo store calls and no more", "WorkerRole", items, []any{table, byPlan, index}, nil},
		{"the api function uses the table's key, through DynamoDB only", "ApiRole", keyUse, key, throughDynamoDB},
		{"the worker function uses the table's key, through DynamoDB only", "WorkerRole", keyUse, key, throughDynamoDB},
		{"the api function seals and opens secrets with the sealing key, in the sealing context only", "ApiRole", []string{"kms:Decrypt", "kms:GenerateDataKey"}, sealKey, sealingContext},
		{"the worker function seals and opens secrets with the sealing key, in the sealing context only", "WorkerRole", []string{"kms:Decrypt", "kms:GenerateDataKey"}, sealKey, sealingContext},
		{"the api function opens values sealed under the table's key before, in the sealing context only", "ApiRole", []string{"kms:Decrypt"}, key, sealingContext},
		{"the worker function opens values sealed under the table's key before, in the sealing context only", "WorkerRole", []string{"kms:Decrypt"}, key, sealingContext},
		{"the api function reads the credentials", "ApiRole", []string{"secretsmanager:GetSecretValue"}, object{"Ref": logicalID(t, "Credentials")}, nil},
		{"the api function starts executions of the workflows", "ApiRole", []string{"states:StartExecution"},
			[]any{object{"Ref": logicalID(t, "CleanupStateMachine")}, object{"Ref": logicalID(t, "OperationStateMachine")}, object{"Ref": logicalID(t, "UpgradeStateMachine")}}, nil},
		{"the api function describes and stops the workflows' executions", "ApiRole", []string{"states:DescribeExecution", "states:StopExecution"}, executions, nil},
		{"the worker function starts executions of the workflows, named by the ARNs it is given", "WorkerRole", []string{"states:StartExecution"},
			[]any{stateMachineARN("ServerlessOsb-cleanup"), stateMachineARN("ServerlessOsb-operation"), stateMachineARN("ServerlessOsb-upgrade")}, nil},
		{"the worker function describes and stops the workflows' executions", "WorkerRole", []string{"states:DescribeExecution", "states:StopExecution"}, executions, nil},
		{"the api function writes its own logs", "ApiRole", []string{"logs:CreateLogStream", "logs:PutLogEvents"}, object{"Fn::GetAtt": []any{logicalID(t, "ApiLogs"), "Arn"}}, nil},
		{"the worker function writes its own logs", "WorkerRole", []string{"logs:CreateLogStream", "logs:PutLogEvents"}, object{"Fn::GetAtt": []any{logicalID(t, "WorkerLogs"), "Arn"}}, nil},
		{"the api function sends traces", "ApiRole", []string{"xray:PutTelemetryRecords", "xray:PutTraceSegments"}, "*", nil},
		{"the worker sends traces", "WorkerRole", []string{"xray:PutTelemetryRecords", "xray:PutTraceSegments"}, "*", nil},
		{"the worker creates, changes (by change sets), deletes and continues the rollback of only the stacks named osb-…, and only under the service role", "WorkerRole",
			[]string{"cloudformation:CreateStack", "cloudformation:DeleteStack", "cloudformation:CreateChangeSet", "cloudformation:ContinueUpdateRollback"}, serviceStacks,
			object{"StringEquals": object{"cloudformation:RoleArn": serviceRole}}},
		{"the worker reads, executes and deletes change sets of the stacks named osb-… only, sets their policy and reads their template", "WorkerRole",
			[]string{"cloudformation:DescribeChangeSet", "cloudformation:ExecuteChangeSet", "cloudformation:DeleteChangeSet",
				"cloudformation:SetStackPolicy", "cloudformation:GetTemplate"}, serviceStacks, nil},
		{"the worker reads only the stacks named osb-…", "WorkerRole",
			[]string{"cloudformation:DescribeStacks", "cloudformation:DescribeStackEvents", "cloudformation:DescribeStackResources"}, serviceStacks, nil},
		{"the worker passes the service role, and only to CloudFormation", "WorkerRole", []string{"iam:PassRole"}, serviceRole,
			object{"StringEquals": object{"iam:PassedToService": "cloudformation.amazonaws.com"}}},
		{"the operation state machine invokes the worker and its versions", "OperationStateMachine/Role", []string{"lambda:InvokeFunction"}, []any{worker, workerVersions}, nil},
		{"the cleanup state machine invokes the worker and its versions", "CleanupStateMachine/Role", []string{"lambda:InvokeFunction"}, []any{worker, workerVersions}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			statements := roleStatements(t, tt.role)
			want := slices.Sorted(slices.Values(tt.actions))
			i := slices.IndexFunc(statements, func(s object) bool { return slices.Equal(slices.Sorted(slices.Values(actions(s))), want) })
			if i < 0 {
				t.Fatalf("%s has no statement granting exactly %v: %v", tt.role, want, statements)
			}
			s := statements[i]
			if !jsonEqual(s["Resource"], tt.resource) {
				t.Errorf("%v is granted on %v; want %v", want, s["Resource"], tt.resource)
			}
			if !jsonEqual(s["Condition"], tt.condition) {
				t.Errorf("%v is granted on condition %v; want %v", want, s["Condition"], tt.condition)
			}
		})
	}

	denied := []struct {
		name   string
		role   string
		prefix string
	}{
		{"the worker function reads no secret", "WorkerRole", "secretsmanager:"},
		{"the worker function scans no table: a fleet upgrade lists its plans' instances by the ByPlan index", "WorkerRole", "dynamodb:Scan"},
		{"the api function scans no table", "ApiRole", "dynamodb:Scan"},
		{"the worker function invokes no function", "WorkerRole", "lambda:"},
		{"the api function invokes no function", "ApiRole", "lambda:"},
		{"the api function touches no stack", "ApiRole", "cloudformation:"},
		{"the api function passes no role and has no IAM permission at all", "ApiRole", "iam:"},
		{"the state machines touch no stack", "OperationStateMachine/Role", "cloudformation:"},
		{"the worker touches no IAM resource but by passing the service role", "WorkerRole", "iam:Create"},
		{"the operation state machine touches no data", "OperationStateMachine/Role", "dynamodb:"},
		{"the cleanup state machine touches no data", "CleanupStateMachine/Role", "dynamodb:"},
		{"the operation state machine starts no execution", "OperationStateMachine/Role", "states:"},
		{"the cleanup state machine starts no execution", "CleanupStateMachine/Role", "states:"},
	}
	for _, tt := range denied {
		t.Run(tt.name, func(t *testing.T) {
			for _, s := range roleStatements(t, tt.role) {
				for _, a := range actions(s) {
					if strings.HasPrefix(a, tt.prefix) {
						t.Errorf("%s is granted %s on %v", tt.role, a, s["Resource"])
					}
				}
			}
		})
	}
}

func TestStackPermissionsAreNarrow(t *testing.T) {
	// The only actions IAM grants on "*" and nothing narrower.
	onlyStar := []string{
		"xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules", "xray:GetSamplingTargets",
		"logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery", "logs:DeleteLogDelivery",
		"logs:ListLogDeliveries", "logs:PutResourcePolicy", "logs:DescribeResourcePolicies", "logs:DescribeLogGroups",
	}
	// CacheUserRole: the shipped catalog's Valkey plans need the
	// cacheuser function (TestTheShippedCatalogGetsTheCacheUserFunction).
	roles := []string{"ApiRole", "WorkerRole", "OperationStateMachine/Role", "CleanupStateMachine/Role", "UpgradeStateMachine/Role",
		"CacheUserRole"}
	var all []object
	for _, role := range roles {
		all = append(all, roleStatements(t, role)...)
	}
	all = append(all, inlineStatements(t, "ReaperRole")...)
	t.Run(`no statement grants anything but X-Ray and log delivery on "*"`, func(t *testing.T) {
		for _, s := range all {
			if s["Resource"] == "*" && !containsAll(onlyStar, actions(s)) {
				t.Errorf("%v is granted on *", actions(s))
			}
		}
	})
	t.Run("no action is a wildcard", func(t *testing.T) {
		for _, s := range all {
			for _, a := range actions(s) {
				if strings.Contains(a, "*") {
					t.Errorf("action %s", a)
				}
			}
		}
	})
	t.Run("no role has a managed policy (the operator may give the service role some)", func(t *testing.T) {
		for id, r := range resources(t, "AWS::IAM::Role") {
			if p := r["Properties"].(object)["ManagedPolicyArns"]; p != nil {
				t.Errorf("role %s has %v", id, p)
			}
		}
	})
	t.Run("every policy belongs to a function's or a state machine's role", func(t *testing.T) {
		if n := len(resources(t, "AWS::IAM::Policy")); n != len(roles) {
			t.Errorf("%d policies, want %d", n, len(roles))
		}
	})
	t.Run("there is no other role than theirs, the reaper's and CloudFormation's service role", func(t *testing.T) {
		if n := len(resources(t, "AWS::IAM::Role")); n != len(roles)+2 {
			t.Errorf("%d roles, want %d", n, len(roles)+2)
		}
	})
}

func TestStackPassesCDKNag(t *testing.T) {
	annotations := assertions.Annotations_FromStack(broker.stack)
	nag := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
	tests := []struct {
		name     string
		findings func() any
	}{
		{"no AwsSolutions rule fails unsuppressed", func() any { return annotations.FindError(jsii.String("*"), nag) }},
		{"no AwsSolutions rule warns unsuppressed", func() any { return annotations.FindWarning(jsii.String("*"), nag) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Through JSON, as the message type's fields are deprecated in Go.
			text, err := json.Marshal(tt.findings())
			if err != nil {
				t.Fatal(err)
			}
			var findings []struct {
				ID    string `json:"id"`
				Entry struct {
					Data any `json:"data"`
				} `json:"entry"`
			}
			if err := json.Unmarshal(text, &findings); err != nil {
				t.Fatal(err)
			}
			for _, f := range findings {
				t.Errorf("%s: %v", f.ID, f.Entry.Data)
			}
		})
	}
}

// logicalID is the logical id of the CloudFormation resource of the
// construct at path (under the stack): the construct itself when it is an
// L1 construct, its default child otherwise.
func logicalID(t *testing.T, path string) string {
	t.Helper()
	return logicalIDIn(t, broker.stack, path)
}

func resource(t *testing.T, path string) object {
	t.Helper()
	return broker.json["Resources"].(object)[logicalID(t, path)].(object)
}

func properties(t *testing.T, path string) object {
	t.Helper()
	return resource(t, path)["Properties"].(object)
}

func resources(t *testing.T, resourceType string) map[string]object {
	t.Helper()
	found := map[string]object{}
	for id, r := range broker.json["Resources"].(object) {
		if r.(object)["Type"] == resourceType {
			found[id] = r.(object)
		}
	}
	return found
}

// roleStatements are the statements of the policies attached to the role
// of the construct at path.
func roleStatements(t *testing.T, path string) []object {
	t.Helper()
	role := object{"Ref": logicalID(t, path)}
	var statements []object
	for _, p := range resources(t, "AWS::IAM::Policy") {
		props := p["Properties"].(object)
		if !slices.ContainsFunc(props["Roles"].([]any), func(r any) bool { return jsonEqual(r, role) }) {
			continue
		}
		for _, s := range props["PolicyDocument"].(object)["Statement"].([]any) {
			statements = append(statements, s.(object))
		}
	}
	if len(statements) == 0 {
		t.Fatalf("role %s has no statement", path)
	}
	return statements
}

// inlineStatements are the statements of the inline policies (Policies) of
// the role at path.
func inlineStatements(t *testing.T, path string) []object {
	t.Helper()
	var statements []object
	policies, _ := properties(t, path)["Policies"].([]any)
	for _, p := range policies {
		for _, s := range p.(object)["PolicyDocument"].(object)["Statement"].([]any) {
			statements = append(statements, s.(object))
		}
	}
	if len(statements) == 0 {
		t.Fatalf("role %s has no inline statement", path)
	}
	return statements
}

// stateMachineARN is the ARN of the state machine named name, in the
// stack's partition, region and account.
func stateMachineARN(name string) object {
	return object{"Fn::Join": []any{"", []any{
		"arn:", object{"Ref": "AWS::Partition"}, ":states:", object{"Ref": "AWS::Region"}, ":", object{"Ref": "AWS::AccountId"},
		":stateMachine:" + name,
	}}}
}

// executionsARN matches every execution of the state machine named name.
func executionsARN(name string) object {
	return object{"Fn::Join": []any{"", []any{
		"arn:", object{"Ref": "AWS::Partition"}, ":states:", object{"Ref": "AWS::Region"}, ":", object{"Ref": "AWS::AccountId"},
		":execution:" + name + ":*",
	}}}
}

// actions are a statement's actions, one or a list.
func actions(statement object) []string {
	switch a := statement["Action"].(type) {
	case string:
		return []string{a}
	case []any:
		var list []string
		for _, s := range a {
			list = append(list, s.(string))
		}
		return list
	}
	return nil
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

func containsAll(set, subset []string) bool {
	for _, s := range subset {
		if !slices.Contains(set, s) {
			return false
		}
	}
	return true
}
