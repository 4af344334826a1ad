// Package cfnresource answers CloudFormation for the broker's Lambda-backed
// custom resources (a binding's database user, search user, cache user
// group membership): the handler's work, then its answer sent to the
// request's presigned URL, as the function's last act.
package cfnresource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// Margin is kept of the function's time to answer CloudFormation: a
// handler that has not ended by then is cancelled and the request fails
// with its reason, rather than CloudFormation waiting for an answer that
// the function's timeout would never send (an hour, then a failed stack).
const Margin = 10 * time.Second

// Handle does a request's work: the resource's physical id and data, or
// an error whose text names no secret (it is sent and logged).
type Handle func(ctx context.Context, e cfn.Event) (physicalID string, data map[string]any, err error)

// Respond runs handle and sends its answer to CloudFormation's URL. what
// names the resource in the log ("database user").
func Respond(ctx context.Context, e cfn.Event, log *slog.Logger, what string, handle Handle) error {
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-Margin))
		defer cancel()
	}
	if log == nil {
		log = slog.Default()
	}
	r := cfn.NewResponse(&e)
	var err error
	r.PhysicalResourceID, r.Data, err = handle(ctx, e)
	r.Status = cfn.StatusSuccess
	if err != nil {
		r.Status, r.Reason = cfn.StatusFailed, err.Error()
		log.ErrorContext(ctx, what+" request failed", "request", string(e.RequestType),
			"logical_id", e.LogicalResourceID, "stack_id", e.StackID, "error", err.Error())
	}
	if r.PhysicalResourceID == "" {
		r.PhysicalResourceID = e.RequestID
	}
	if sendErr := r.Send(); sendErr != nil {
		return fmt.Errorf("answer CloudFormation: %w", sendErr)
	}
	return nil
}

// SecretReader is the part of Secrets Manager a handler reads its
// credentials with.
type SecretReader interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// ReadSecret decodes the JSON object of the secret arn into into; the
// error names no part of the value.
func ReadSecret(ctx context.Context, r SecretReader, arn string, into any) error {
	out, err := r.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		return err
	}
	if json.Unmarshal([]byte(aws.ToString(out.SecretString)), into) != nil {
		return errors.New("the secret's value is not a JSON object of the expected fields")
	}
	return nil
}
