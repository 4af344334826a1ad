// Package infra is the broker's AWS deployment, as a CDK stack: the HTTP
// API in front of the api function, the worker function that the
// workflows' Task states call, one Step Functions Standard state machine
// per statemachines/*.asl.json (operation and cleanup), the EventBridge
// Scheduler schedule that runs the reaper on the worker, the DynamoDB table
// the dynamo store keys its items in, the secret holding the basic-auth
// credentials, their customer-managed KMS key, the CloudFormation service
// role the worker creates the services' stacks under (services.go), the log
// groups, and the alarms.
//
// What the catalog's drivers need of the stack (IAM statements, the
// service role, environment) is their declaration, which make build writes
// beside the bundled catalog (deploy.json, internal/deploy); the stack
// grants exactly that and names no driver (drivers.go), and imports
// nothing of the broker's domain, only leaves.
//
// The table's shape is the dynamo store's (internal/store/dynamo/schema) and the
// functions' environment variables are internal/env's: the stack restates
// neither, and its tests check that the store's CreateTable makes the table
// the stack deploys (on moto) and that the stack sets only variables the
// app reads, and every one it requires.
//
// Every permission is written out here, scoped to this stack's resources;
// cdk-nag's AwsSolutions pack runs on the stack as an Aspect, and each
// finding it does not fix is suppressed on its resource with the reason
// (see nag.go).
//
// The app in infra/app builds the stack from the CDK context of cdk.json
// (PropsFromContext); `cdk synth` and `cdk deploy` run it.
package infra
