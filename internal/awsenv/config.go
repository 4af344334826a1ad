package awsenv

import (
	"cmp"
	"errors"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/logging"
)

// Config is a function's AWS configuration, from what Lambda puts in its
// environment: the role's credentials (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), its Region (region, when
// given, instead), and the SDK's own variables (AWS_ENDPOINT_URL and its
// per-service forms, which the sandbox and the tests point at moto,
// AWS_MAX_ATTEMPTS, AWS_RETRY_MODE, FIPS and dual-stack endpoints), read
// as the SDK reads them (Env). It is config.LoadDefaultConfig as it
// resolves there, where the environment's credentials come first, without
// the sources a function never reads (shared files, SSO, web identity, the
// container and instance metadata endpoints): those were a tenth of the
// bootstraps (TestTheFunctionsLinkNoCredentialSourceButTheirs,
// internal/tools/build), and reading the files was part of the cold start.
func Config(region string) (aws.Config, error) {
	env, err := Read(os.Getenv)
	if err != nil {
		return aws.Config{}, fmt.Errorf("the AWS variables: %w", err)
	}
	if !env.Credentials.HasKeys() {
		return aws.Config{}, errors.New("no AWS credentials in the environment: a Lambda function has its role's in AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN")
	}
	cfg := aws.Config{
		Region:      cmp.Or(region, env.Region),
		Credentials: aws.NewCredentialsCache(credentials.StaticCredentialsProvider{Value: env.Credentials}),
		Logger:      logging.NewStandardLogger(os.Stderr),
		// The clients read the per-service endpoints (AWS_ENDPOINT_URL_DYNAMODB)
		// and their other settings from it.
		ConfigSources:    []any{env},
		AppID:            env.AppID,
		RetryMaxAttempts: env.RetryMaxAttempts,
		RetryMode:        env.RetryMode,
		DefaultsMode:     env.DefaultsMode,
		// The defaults LoadDefaultConfig gives what no variable sets.
		AccountIDEndpointMode:       cmp.Or(env.AccountIDEndpointMode, aws.AccountIDEndpointModePreferred),
		RequestChecksumCalculation:  cmp.Or(env.RequestChecksumCalculation, aws.RequestChecksumCalculationWhenSupported),
		ResponseChecksumValidation:  cmp.Or(env.ResponseChecksumValidation, aws.ResponseChecksumValidationWhenSupported),
		DisableRequestCompression:   env.DisableRequestCompression != nil && *env.DisableRequestCompression,
		RequestMinCompressSizeBytes: 10240,
	}
	if env.RequestMinCompressSizeBytes != nil {
		cfg.RequestMinCompressSizeBytes = *env.RequestMinCompressSizeBytes
	}
	if env.BaseEndpoint != "" && (env.IgnoreConfiguredEndpoints == nil || !*env.IgnoreConfiguredEndpoints) {
		cfg.BaseEndpoint = aws.String(env.BaseEndpoint)
	}
	return cfg, nil
}
