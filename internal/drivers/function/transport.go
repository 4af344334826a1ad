package function

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"

	"github.com/serverless-osb/broker/internal/broker"
)

// LambdaAPI is the part of Lambda the driver calls.
type LambdaAPI interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

var _ LambdaAPI = (*lambda.Client)(nil)

// misconfigured is the description of a failure that only the platform
// operator can fix; the log line says what is wrong.
const misconfigured = "The broker cannot reach this service's backend: it is not configured to. Ask the platform operator to check the plan's function settings."

// send delivers one request's body to t and returns the raw answer; its
// errors are sorted by Classify.
func (d *Driver) send(ctx context.Context, t Target, body []byte) ([]byte, error) {
	if t.Function != "" {
		return d.invoke(ctx, t, body)
	}
	return d.post(ctx, t, body)
}

// post sends a signed HTTP request. When the target refuses a signature
// made with a cached secret, the secret is read again and, if it changed
// (rotated), the request is sent once more with it.
func (d *Driver) post(ctx context.Context, t Target, body []byte) ([]byte, error) {
	secret, cached, err := d.secret(ctx, t, false)
	if err != nil {
		return nil, err
	}
	raw, err := d.postSigned(ctx, t, body, secret)
	var refused *refusedError
	if !errors.As(err, &refused) || !cached {
		return raw, err
	}
	rotated, _, rerr := d.secret(ctx, t, true)
	if rerr != nil {
		return nil, rerr
	}
	if bytes.Equal(rotated, secret) {
		return nil, err
	}
	d.Logger.InfoContext(ctx, "function target secret rotated: signing with the new one", "secret_arn", t.SecretARN)
	return d.postSigned(ctx, t, body, rotated)
}

// refusedError is a target's refusal of the broker's signature: permanent.
type refusedError struct{ broker.Failure }

func (e *refusedError) Unwrap() error { return &e.Failure }

// postSigned sends the request signed with secret.
func (d *Driver) postSigned(ctx context.Context, t Target, body, secret []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		d.Logger.ErrorContext(ctx, "function target URL unusable", "target", t.String(), "error", unwrapURLError(err).Error())
		return nil, &broker.Failure{Description: misconfigured}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "serverless-osb")
	v, id := t.version(), rand.Text()
	req.Header.Set(HeaderVersion, strconv.Itoa(v))
	req.Header.Set(HeaderRequestID, id)
	req.Header.Set(HeaderSignature, Sign(secret, d.Now(), Message{Method: req.Method, URL: t.URL, RequestID: id, Body: body}, v == Version1))
	resp, err := d.HTTP.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err() // call names the timeout
		}
		return nil, fmt.Errorf("call %s: %w", t, unwrapURLError(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read the answer of %s: %w", t, err)
	}
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		if len(raw) > MaxAnswerBytes {
			return nil, fmt.Errorf("%s: %w", t, &MalformedError{Problem: fmt.Sprintf("over the limit of %d bytes", MaxAnswerBytes)})
		}
		return raw, nil
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		// The body is neither read nor logged: whoever refuses may say
		// anything in it.
		d.Logger.ErrorContext(ctx, "function target refused the broker's signature: its secret and the broker's differ", "target", t.String(), "status", code)
		return nil, &refusedError{broker.Failure{Description: fmt.Sprintf("This service's backend refused the broker's request (HTTP %d): the broker's credentials for it are not the ones it expects. Ask the platform operator to check the plan's secret.", code)}}
	case transientStatus(code):
		return nil, &StatusError{Target: t, Code: code}
	}
	// Another 4xx: a target may send its error answer with it (a permanent
	// error with 422, say), which is then read as sent with 200.
	if a, err := DecodeAnswer(raw); err == nil && a.Error != nil {
		return raw, nil
	}
	d.Logger.ErrorContext(ctx, "function target refused the request", "target", t.String(), "status", resp.StatusCode)
	return nil, &StatusError{Target: t, Code: resp.StatusCode}
}

// unwrapURLError drops net/http's "Post "URL": " prefix, which repeats the
// target, query and all (the caller names it without).
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return ue.Err
	}
	return err
}

// secret reads the secret of an HTTP target: a variable or a file each
// time, so that a rotated secret takes effect at the next request; a
// secret in Secrets Manager from the cache while it is younger than
// SecretTTL, unless fresh is set. cached reports a value from the cache.
func (d *Driver) secret(ctx context.Context, t Target, fresh bool) (value []byte, cached bool, err error) {
	var s string
	switch {
	case t.SecretARN != "":
		return d.secretFromARN(ctx, t.SecretARN, fresh)
	case t.SecretEnv != "":
		if s = d.Getenv(t.SecretEnv); s == "" {
			d.Logger.ErrorContext(ctx, "function target secret missing: the variable is not set", "variable", t.SecretEnv)
			return nil, false, &broker.Failure{Description: misconfigured, Detail: "The variable " + t.SecretEnv + ", which holds the plan's secret, is not set."}
		}
	case t.SecretFile != "":
		data, err := os.ReadFile(t.SecretFile)
		if err != nil || len(bytes.TrimSpace(data)) == 0 {
			reason := "empty"
			if err != nil {
				reason = err.Error()
			}
			d.Logger.ErrorContext(ctx, "function target secret missing: the file is unreadable", "file", t.SecretFile, "error", reason)
			return nil, false, &broker.Failure{Description: misconfigured, Detail: "The file " + t.SecretFile + ", which holds the plan's secret, is unreadable: " + reason + "."}
		}
		s = string(bytes.TrimSpace(data))
	default:
		d.Logger.ErrorContext(ctx, "function target has no secret", "target", t.String())
		return nil, false, &broker.Failure{Description: misconfigured}
	}
	return []byte(s), false, nil
}

// invoke calls a Lambda function synchronously.
func (d *Driver) invoke(ctx context.Context, t Target, body []byte) ([]byte, error) {
	if d.Lambda == nil {
		return nil, errors.New("no AWS configuration to reach Lambda with")
	}
	api, err := d.Lambda(ctx)
	if err != nil {
		return nil, err
	}
	out, err := api.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(t.Function),
		InvocationType: types.InvocationTypeRequestResponse,
		Payload:        body,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err() // call names the timeout
		}
		return nil, d.classifyLambda(ctx, t, err)
	}
	if out.FunctionError != nil {
		// The function threw or timed out: its runtime's errorType says
		// which; errorMessage may hold anything, so it is not quoted.
		var e struct {
			ErrorType string `json:"errorType"`
		}
		_ = json.Unmarshal(out.Payload, &e)
		return nil, &TransientError{Reason: fmt.Sprintf("the Lambda function failed (%s)", aws.ToString(out.FunctionError)),
			Err: fmt.Errorf("%s failed (%s): %s", t, aws.ToString(out.FunctionError), clipTo(e.ErrorType, 100))}
	}
	if len(out.Payload) > MaxAnswerBytes {
		return nil, fmt.Errorf("%s: %w", t, &MalformedError{Problem: fmt.Sprintf("%d bytes, over the limit of %d", len(out.Payload), MaxAnswerBytes)})
	}
	return out.Payload, nil
}

// classifyLambda tells the errors of Invoke that retrying cannot fix
// (*broker.Failure) from the ones it may (throttling, service errors,
// a function not ready yet, the network).
func (d *Driver) classifyLambda(ctx context.Context, t Target, err error) error {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return fmt.Errorf("invoke %s: %w", t, err)
	}
	switch code := ae.ErrorCode(); code {
	case "ResourceNotFoundException":
		d.Logger.ErrorContext(ctx, "function target does not exist", "function", t.Function)
		return &broker.Failure{Description: "This service's backend (a Lambda function) does not exist. Ask the platform operator to check the plan's function settings."}
	case "AccessDeniedException", "AccessDenied", "UnrecognizedClientException", "InvalidSignatureException":
		d.Logger.ErrorContext(ctx, "the broker may not invoke the function target", "function", t.Function, "code", code)
		return &broker.Failure{Description: "The broker is not allowed to invoke this service's backend (a Lambda function). Ask the platform operator to grant it lambda:InvokeFunction on the plan's function."}
	case "InvalidParameterValueException", "RequestTooLargeException", "InvalidRequestContentException", "UnsupportedMediaTypeException":
		d.Logger.ErrorContext(ctx, "the function target refused the request", "function", t.Function, "code", code)
		return &broker.Failure{Description: fmt.Sprintf("This service's backend (a Lambda function) refused the broker's request (%s). Ask the platform operator.", code)}
	}
	return &TransientError{Reason: "Lambda answered " + ae.ErrorCode(), Err: fmt.Errorf("invoke %s: %w", t, err)}
}

func clipTo(s string, n int) string {
	r := []rune(strings.TrimSpace(s))
	if len(r) <= n {
		return string(r)
	}
	return string(r[:n]) + "…"
}
