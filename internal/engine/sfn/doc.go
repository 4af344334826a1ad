// Package sfn runs the workflows of statemachines/ on AWS Step Functions:
// a broker.Engine over the service/sfn client, one state machine per
// workflow, one execution per operation, named by the operation id.
//
// It stores nothing: an execution's ARN is derived from its state
// machine's ARN and its name, and Describe, Stop and History, which are
// given only the name, look for it under every configured state machine,
// the operation workflow's first. The enginetest package holds the
// contract this engine shares with the local one; the tests run it, and a
// comparison of both engines, on moto_server.
package sfn
