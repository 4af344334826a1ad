package sfn_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/google/uuid"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/engine/enginetest"
	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// How the tests use moto_server 5.2.1 (with its Lambda "simple" backend,
// which withmoto turns on):
//
//   - A lambda:invoke Task needs no function: moto answers every Invoke in a
//     region with the next result queued for that region through
//     POST /moto-api/static/lambda-simple/response, and with the request
//     payload when none is queued.
//   - That queue is one per region for the whole server, so each test
//     leases a region of its own (regions), and runs at most one execution
//     at a time in it.
//   - The stub cannot raise an error by name. Its only function error is
//     Function.ResponseSizeTooLarge, for a result over 6 MB; that is how a
//     permanent failure is scripted here (see tooLarge).

// account is moto's default account, the one its Step Functions executions
// invoke Lambda in.
const account = "123456789012"

// statemachines is the folder of the real definitions.
const statemachines = "../../../statemachines"

// regions are the regions tests lease. us-east-1, the default region of
// every client, and us-east-2, where internal/app's TestAPICallsPerEndpoint
// runs executions, are left out so that no other test's Lambda calls share
// a queue with these (packages run at the same time, on one moto).
var regions = func() chan string {
	names := []string{
		"us-west-1", "us-west-2", "ca-central-1", "sa-east-1",
		"eu-west-1", "eu-west-2", "eu-west-3", "eu-central-1", "eu-north-1", "eu-south-1",
		"ap-south-1", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3",
		"ap-southeast-1", "ap-southeast-2", "ap-east-1", "me-south-1", "af-south-1",
	}
	c := make(chan string, len(names))
	for _, n := range names {
		c <- n
	}
	return c
}()

// errorTooLarge is the one error moto's Lambda stub raises, and
// causeTooLarge the cause it gives it: the error document as Step Functions
// passes a Lambda function error on.
const (
	errorTooLarge = "Function.ResponseSizeTooLarge"
	causeTooLarge = `{"errorMessage":"Response payload size exceeded maximum allowed payload size (6291556 bytes).","errorType":"Function.ResponseSizeTooLarge"}`
)

// tooLarge is a permanent failure of step, as both engines can run it.
func tooLarge(step string) enginetest.Answer {
	return enginetest.Answer{Step: step, Error: errorTooLarge, Cause: causeTooLarge}
}

// motoRegion is one leased region of moto: a Step Functions client for it
// and its Lambda result queue.
type motoRegion struct {
	name     string
	endpoint string
	client   *sfn.Client
	machines []string // created by the test
}

// leaseRegion waits for a free region, empties its Lambda queue, and gives
// it back when the test ends, after stopping what still runs there. optFns
// configure the client (to record calls).
func leaseRegion(t *testing.T, optFns ...func(*sfn.Options)) *motoRegion {
	t.Helper()
	endpoint := mototest.Endpoint(t)
	var name string
	select {
	case name = <-regions:
	case <-t.Context().Done():
		t.Fatal("no moto region became free")
	}
	r := &motoRegion{
		name:     name,
		endpoint: endpoint,
		client:   sfn.NewFromConfig(mototest.Config(t, name), optFns...),
	}
	if _, err := r.drain(context.Background()); err != nil {
		regions <- name
		t.Fatalf("empty the Lambda queue of %s: %v", name, err)
	}
	t.Cleanup(func() {
		defer func() { regions <- name }()
		ctx, cancel := waittest.Context(t) // t.Context() has ended by now
		defer cancel()
		if err := r.stopAll(ctx); err != nil {
			t.Errorf("stop the executions left in %s: %v", name, err)
		}
		if _, err := r.drain(ctx); err != nil {
			t.Errorf("empty the Lambda queue of %s: %v", name, err)
		}
	})
	return r
}

// createStateMachine creates the state machine of a workflow from its file
// in statemachines/, its worker being a function of this region.
func (r *motoRegion) createStateMachine(t *testing.T, w broker.Workflow) string {
	t.Helper()
	asl, err := os.ReadFile(fmt.Sprintf("%s/%s.asl.json", statemachines, w))
	if err != nil {
		t.Fatal(err)
	}
	return r.createStateMachineFrom(t, w, asl)
}

// createStateMachineFrom creates the state machine of a workflow from its
// definition, its worker being a function of this region.
func (r *motoRegion) createStateMachineFrom(t *testing.T, w broker.Workflow, asl []byte) string {
	t.Helper()
	worker := fmt.Sprintf("arn:aws:lambda:%s:%s:function:osb-worker", r.name, account)
	out, err := r.client.CreateStateMachine(t.Context(), &sfn.CreateStateMachineInput{
		Name:       aws.String(mototest.Name(string(w))),
		Definition: aws.String(strings.ReplaceAll(string(asl), "${WorkerFunctionArn}", worker)),
		RoleArn:    aws.String(fmt.Sprintf("arn:aws:iam::%s:role/osb-workflow", account)),
	})
	if err != nil {
		t.Fatalf("CreateStateMachine %s in %s: %v", w, r.name, err)
	}
	r.machines = append(r.machines, aws.ToString(out.StateMachineArn))
	return aws.ToString(out.StateMachineArn)
}

// script queues the worker's answers, in order. An error answer must be
// errorTooLarge: moto raises it for a result over 6 MB.
func (r *motoRegion) script(t *testing.T, answers []enginetest.Answer) {
	t.Helper()
	results := make([]string, 0, len(answers))
	for _, a := range answers {
		switch a.Error {
		case "":
			results = append(results, string(a.Result))
		case errorTooLarge:
			results = append(results, strings.Repeat("x", 6_000_001))
		default:
			t.Fatalf("moto cannot raise %s", a.Error)
		}
	}
	body, _ := json.Marshal(map[string]any{"results": results, "region": r.name})
	resp, err := http.Post(r.endpoint+"/moto-api/static/lambda-simple/response", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("queue Lambda results: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("queue Lambda results: HTTP %d", resp.StatusCode)
	}
}

// expressible returns why moto cannot run a script, or "".
func expressible(answers []enginetest.Answer) string {
	for _, a := range answers {
		if a.Error != "" && a.Error != errorTooLarge {
			return fmt.Sprintf("moto's Lambda stub cannot raise %s (its only function error is %s, "+
				"for a result over 6 MB); the local engine runs this script", a.Error, errorTooLarge)
		}
	}
	return ""
}

// drain empties the region's Lambda queue and returns how many results it
// held: it invokes with a payload of its own until moto echoes it, which
// moto does when nothing is queued.
func (r *motoRegion) drain(ctx context.Context) (int, error) {
	sentinel := []byte(fmt.Sprintf(`{"drain":%q}`, uuid.NewString()))
	for n := 0; n < 1000; n++ {
		got, err := r.invoke(ctx, sentinel)
		if err != nil {
			return n, err
		}
		if bytes.Equal(got, sentinel) {
			return n, nil
		}
	}
	return 1000, fmt.Errorf("still not empty after 1000 results")
}

// invoke calls Lambda's Invoke in the region (signed, since moto reads the
// region from the signature), without adding service/lambda to go.mod.
func (r *motoRegion) invoke(ctx context.Context, payload []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		r.endpoint+"/2015-03-31/functions/osb-worker/invocations", bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	sum := sha256.Sum256(payload)
	creds := aws.Credentials{AccessKeyID: "testing", SecretAccessKey: "testing"}
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "lambda", r.name, time.Now()); err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("Invoke: HTTP %d: %s", resp.StatusCode, body)
	}
	return body, nil
}

// stopAll stops every execution still running on the state machines the
// test created, so that none takes results queued for the next test.
func (r *motoRegion) stopAll(ctx context.Context) error {
	for _, m := range r.machines {
		executions := sfn.NewListExecutionsPaginator(r.client, &sfn.ListExecutionsInput{
			StateMachineArn: aws.String(m),
			StatusFilter:    types.ExecutionStatusRunning,
		})
		for executions.HasMorePages() {
			page, err := executions.NextPage(ctx)
			if err != nil {
				return err
			}
			for _, x := range page.Executions {
				if _, err := r.client.StopExecution(ctx, &sfn.StopExecutionInput{ExecutionArn: x.ExecutionArn}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// taskPayloads returns the payloads an execution's Tasks sent the worker,
// in order (from its TaskScheduled events).
func (r *motoRegion) taskPayloads(t *testing.T, executionARN string) []json.RawMessage {
	t.Helper()
	var payloads []json.RawMessage
	pages := sfn.NewGetExecutionHistoryPaginator(r.client, &sfn.GetExecutionHistoryInput{ExecutionArn: aws.String(executionARN)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(t.Context())
		if err != nil {
			t.Fatalf("GetExecutionHistory: %v", err)
		}
		for _, ev := range page.Events {
			d := ev.TaskScheduledEventDetails
			if d == nil {
				continue
			}
			var params struct{ Payload json.RawMessage }
			if err := json.Unmarshal([]byte(aws.ToString(d.Parameters)), &params); err != nil {
				t.Fatalf("TaskScheduled parameters %s: %v", aws.ToString(d.Parameters), err)
			}
			payloads = append(payloads, params.Payload)
		}
	}
	return payloads
}
