package function_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/serverless-osb/broker/internal/jsonschema"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/drivers/function"
	"github.com/serverless-osb/broker/internal/mototest"
)

// recordingLambda records what the driver sends to Lambda and what Lambda
// answers: moto (without Docker, as withmoto runs it) cannot run a
// function, and answers an invocation with its payload, or with a result
// queued through its API.
type recordingLambda struct {
	api      *lambda.Client
	inputs   []*lambda.InvokeInput
	payloads [][]byte
}

func (r *recordingLambda) Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	r.inputs = append(r.inputs, in)
	out, err := r.api.Invoke(ctx, in, optFns...)
	if err == nil {
		r.payloads = append(r.payloads, out.Payload)
	}
	return out, err
}

// motoRegion is this test's own Region: moto queues the results of
// invocations per Region, and no other test uses this one.
const motoRegion = "sa-east-1"

func TestLambdaTransportOnMoto(t *testing.T) {
	cfg := mototest.Config(t, motoRegion)
	ctx := context.Background()
	name := mototest.Name("osb-fn")
	arn := createFunction(ctx, t, cfg, name)

	// moto's Lambda without Docker answers any name, so a missing function
	// is tested with stubbed responses (TestLambdaTransportWithStubbedResponses).
	for by, target := range map[string]string{"name": name, "ARN": arn} {
		t.Run("a begin request reaches the function named by its "+by+" as its event, unchanged", func(t *testing.T) {
			d, c := lambdaDriver(t, cfg, target)
			rec := &recordingLambda{api: lambda.NewFromConfig(cfg)}
			d.Lambda = func(context.Context) (function.LambdaAPI, error) { return rec, nil }
			// moto echoes the event: the driver reads its own request,
			// which has no "done", as "not done yet".
			p, err := d.Begin(ctx, c)
			if err != nil || p.Done {
				t.Fatalf("%+v %v", p, err)
			}
			in := rec.inputs[0]
			if aws.ToString(in.FunctionName) != target || in.InvocationType != types.InvocationTypeRequestResponse {
				t.Errorf("invoke %s as %s", aws.ToString(in.FunctionName), in.InvocationType)
			}
			if !bytes.Equal(rec.payloads[0], in.Payload) {
				t.Fatalf("moto received %s, the driver sent %s", rec.payloads[0], in.Payload)
			}
			var req function.Request
			if err := json.Unmarshal(rec.payloads[0], &req); err != nil || req.Call != function.CallBegin ||
				req.Operation.Kind != broker.KindBind || req.Binding == nil || req.Binding.ID != "b-1" {
				t.Fatalf("event %s: %v", rec.payloads[0], err)
			}
			v, _ := jsonschema.UnmarshalJSON(bytes.NewReader(rec.payloads[0]))
			if err := compile(t, "request").Validate(v); err != nil {
				t.Errorf("the event does not follow the schema: %v", err)
			}
		})
	}
	t.Run("the function's answer completes the change", func(t *testing.T) {
		queueResult(t, `{"version":1,"done":true,"results":{"credentials":{"username":"u-1","password":"pw-1"}}}`)
		d, c := lambdaDriver(t, cfg, arn)
		p, err := d.Begin(ctx, c)
		if err != nil || !p.Done || p.Credentials["password"] != "pw-1" {
			t.Fatalf("%+v %v", p, err)
		}
	})
}

// createFunction creates a function in moto (its code is never run).
func createFunction(ctx context.Context, t *testing.T, cfg aws.Config, name string) string {
	t.Helper()
	role, err := iam.NewFromConfig(cfg).CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(name),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	var code bytes.Buffer
	zw := zip.NewWriter(&code)
	w, _ := zw.Create("lambda_function.py")
	_, _ = w.Write([]byte("def handler(event, context):\n    return {\"version\": 1, \"done\": True}\n"))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := lambda.NewFromConfig(cfg).CreateFunction(ctx, &lambda.CreateFunctionInput{
		FunctionName: aws.String(name), Role: role.Role.Arn, Runtime: types.RuntimePython312,
		Handler: aws.String("lambda_function.handler"), Code: &types.FunctionCode{ZipFile: code.Bytes()},
	})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.FunctionArn)
}

// queueResult makes moto answer the next invocation in motoRegion with result.
func queueResult(t *testing.T, result string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"results": []string{result}, "region": motoRegion})
	resp, err := http.Post(mototest.Endpoint(t)+"/moto-api/static/lambda-simple/response", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("queue a result in moto: HTTP %d", resp.StatusCode)
	}
}
