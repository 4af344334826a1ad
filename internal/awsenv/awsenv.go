// Package awsenv is a Lambda function's AWS configuration, read from its
// environment alone: the role's credentials Lambda puts there, its Region,
// and the SDK's own variables, read as the SDK's config.NewEnvConfig reads
// them (Read), without importing the SDK's config package, which links
// the SSO, SSO OIDC and STS clients into a bootstrap and runs their
// package inits (their endpoint tables) at every cold start for clients no
// function calls. The broker's functions (internal/app) and the
// CloudFormation custom resources' (functions/dbuser, functions/cacheuser)
// take their configuration from Config; the operator's command keeps the
// SDK's whole chain (profiles, SSO).
package awsenv

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Env is what a function reads of the AWS SDK's environment variables:
// those config.NewEnvConfig reads that apply to a function's clients, read
// and checked as it reads them. It is not that function because importing
// the SDK's config package at all links the SSO, SSO OIDC and STS clients
// into the bootstraps, whose package inits took a quarter of a millisecond
// of every cold start (TestTheFunctionsLinkWhatOnlyTheCommandUsesNot,
// internal/tools/build). TestEnvReadsAsTheSDK holds it to the SDK's
// reading.
//
// The SDK's clients read the per-service settings (AWS_ENDPOINT_URL_<ID>,
// FIPS and dual-stack endpoints, DynamoDB's endpoint discovery, S3's
// options) from it through aws.Config.ConfigSources, by the methods below,
// whose names and signatures are the SDK's interfaces for them.
type Env struct {
	getenv      func(string) string
	Credentials aws.Credentials
	Region      string
	AppID       string
	// BaseEndpoint is AWS_ENDPOINT_URL.
	BaseEndpoint                string
	IgnoreConfiguredEndpoints   *bool
	RetryMaxAttempts            int
	RetryMode                   aws.RetryMode
	DefaultsMode                aws.DefaultsMode
	DisableRequestCompression   *bool
	RequestMinCompressSizeBytes *int64
	AccountIDEndpointMode       aws.AccountIDEndpointMode
	RequestChecksumCalculation  aws.RequestChecksumCalculation
	ResponseChecksumValidation  aws.ResponseChecksumValidation
	UseDualStackEndpoint        aws.DualStackEndpointState
	UseFIPSEndpoint             aws.FIPSEndpointState
	EnableEndpointDiscovery     aws.EndpointDiscoveryEnableState
	S3UseARNRegion              *bool
	S3DisableMultiRegionAPs     *bool
	S3DisableExpressAuth        *bool
}

// maxRequestMinCompressSizeBytes is the SDK's bound on
// AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES (10 MiB).
const maxRequestMinCompressSizeBytes = 10485760

// Read reads the variables through getenv (os.Getenv); a value
// the SDK would refuse is an error naming the variable.
func Read(getenv func(string) string) (Env, error) {
	e := Env{getenv: getenv}
	first := func(names ...string) string {
		for _, n := range names {
			if v := getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	creds := aws.Credentials{Source: "EnvConfigCredentials", // the SDK's config.CredentialsSourceName
		AccessKeyID: first("AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY"), SecretAccessKey: first("AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY")}
	if creds.HasKeys() {
		creds.AccountID, creds.SessionToken = getenv("AWS_ACCOUNT_ID"), getenv("AWS_SESSION_TOKEN")
		e.Credentials = creds
	}
	e.Region = first("AWS_REGION", "AWS_DEFAULT_REGION")
	e.AppID = getenv("AWS_SDK_UA_APP_ID")
	e.BaseEndpoint = getenv("AWS_ENDPOINT_URL")
	p := envParser{getenv: getenv}
	e.IgnoreConfiguredEndpoints = p.bool("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
	e.DisableRequestCompression = p.bool("AWS_DISABLE_REQUEST_COMPRESSION")
	e.S3UseARNRegion = p.bool("AWS_S3_USE_ARN_REGION")
	e.S3DisableMultiRegionAPs = p.bool("AWS_S3_DISABLE_MULTIREGION_ACCESS_POINTS")
	e.S3DisableExpressAuth = p.bool("AWS_S3_DISABLE_EXPRESS_SESSION_AUTH")
	if v := getenv("AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > maxRequestMinCompressSizeBytes {
			p.fail("AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES", v, fmt.Sprintf("a number of bytes from 0 to %d", maxRequestMinCompressSizeBytes))
		} else {
			e.RequestMinCompressSizeBytes = &n
		}
	}
	if v := getenv("AWS_MAX_ATTEMPTS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			p.fail("AWS_MAX_ATTEMPTS", v, "a whole number")
		}
		e.RetryMaxAttempts = int(n)
	}
	if v := getenv("AWS_RETRY_MODE"); v != "" {
		var err error
		if e.RetryMode, err = aws.ParseRetryMode(v); err != nil {
			p.fail("AWS_RETRY_MODE", v, "standard or adaptive")
		}
	}
	if v := getenv("AWS_DEFAULTS_MODE"); v != "" && !e.DefaultsMode.SetFromString(v) {
		p.fail("AWS_DEFAULTS_MODE", v, "auto, cross-region, in-region, legacy, mobile or standard")
	}
	e.AccountIDEndpointMode = choose(&p, "AWS_ACCOUNT_ID_ENDPOINT_MODE", false, map[string]aws.AccountIDEndpointMode{
		"preferred": aws.AccountIDEndpointModePreferred, "required": aws.AccountIDEndpointModeRequired, "disabled": aws.AccountIDEndpointModeDisabled})
	e.RequestChecksumCalculation = choose(&p, "AWS_REQUEST_CHECKSUM_CALCULATION", true, map[string]aws.RequestChecksumCalculation{
		"when_supported": aws.RequestChecksumCalculationWhenSupported, "when_required": aws.RequestChecksumCalculationWhenRequired})
	e.ResponseChecksumValidation = choose(&p, "AWS_RESPONSE_CHECKSUM_VALIDATION", true, map[string]aws.ResponseChecksumValidation{
		"when_supported": aws.ResponseChecksumValidationWhenSupported, "when_required": aws.ResponseChecksumValidationWhenRequired})
	e.UseDualStackEndpoint = choose(&p, "AWS_USE_DUALSTACK_ENDPOINT", true, map[string]aws.DualStackEndpointState{
		"true": aws.DualStackEndpointStateEnabled, "false": aws.DualStackEndpointStateDisabled})
	e.UseFIPSEndpoint = choose(&p, "AWS_USE_FIPS_ENDPOINT", true, map[string]aws.FIPSEndpointState{
		"true": aws.FIPSEndpointStateEnabled, "false": aws.FIPSEndpointStateDisabled})
	e.EnableEndpointDiscovery = choose(&p, "AWS_ENABLE_ENDPOINT_DISCOVERY", true, map[string]aws.EndpointDiscoveryEnableState{
		"true": aws.EndpointDiscoveryEnabled, "false": aws.EndpointDiscoveryDisabled, "auto": aws.EndpointDiscoveryAuto})
	return e, p.err
}

// envParser reads typed variables, keeping the first bad value's error.
type envParser struct {
	getenv func(string) string
	err    error
}

func (p *envParser) fail(name, value, want string) {
	if p.err == nil {
		p.err = fmt.Errorf("%s=%s: want %s", name, value, want)
	}
}

// bool is a true or false variable (either case); nil when unset.
func (p *envParser) bool(name string) *bool {
	v := p.getenv(name)
	if v == "" {
		return nil
	}
	b := strings.EqualFold(v, "true")
	if !b && !strings.EqualFold(v, "false") {
		p.fail(name, v, "true or false")
		return nil
	}
	return &b
}

// choose is the value a variable names among values (the zero value when
// unset), in any case when fold.
func choose[T any](p *envParser, name string, fold bool, values map[string]T) T {
	var zero T
	v := p.getenv(name)
	if v == "" {
		return zero
	}
	key := v
	if fold {
		key = strings.ToLower(v)
	}
	if out, ok := values[key]; ok {
		return out
	}
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	slices.Sort(names)
	p.fail(name, v, "one of "+strings.Join(names, ", "))
	return zero
}

// The SDK's interfaces for the settings a client reads from
// aws.Config.ConfigSources.

// GetServiceBaseEndpoint is AWS_ENDPOINT_URL_<the service's id, upper
// case, spaces as underscores>.
func (e Env) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	v := e.getenv("AWS_ENDPOINT_URL_" + strings.ReplaceAll(strings.ToUpper(sdkID), " ", "_"))
	return v, v != "", nil
}

func (e Env) GetIgnoreConfiguredEndpoints(context.Context) (bool, bool, error) {
	return isSet(e.IgnoreConfiguredEndpoints)
}

func (e Env) GetUseDualStackEndpoint(context.Context) (aws.DualStackEndpointState, bool, error) {
	return e.UseDualStackEndpoint, e.UseDualStackEndpoint != aws.DualStackEndpointStateUnset, nil
}

func (e Env) GetUseFIPSEndpoint(context.Context) (aws.FIPSEndpointState, bool, error) {
	return e.UseFIPSEndpoint, e.UseFIPSEndpoint != aws.FIPSEndpointStateUnset, nil
}

func (e Env) GetEnableEndpointDiscovery(context.Context) (aws.EndpointDiscoveryEnableState, bool, error) {
	return e.EnableEndpointDiscovery, e.EnableEndpointDiscovery != aws.EndpointDiscoveryUnset, nil
}

func (e Env) GetS3UseARNRegion(context.Context) (bool, bool, error) {
	return isSet(e.S3UseARNRegion)
}

func (e Env) GetS3DisableMultiRegionAccessPoints(context.Context) (bool, bool, error) {
	return isSet(e.S3DisableMultiRegionAPs)
}

func (e Env) GetS3DisableExpressAuth() (bool, bool) {
	v, ok, _ := isSet(e.S3DisableExpressAuth)
	return v, ok
}

func isSet(b *bool) (bool, bool, error) {
	if b == nil {
		return false, false, nil
	}
	return *b, true, nil
}
