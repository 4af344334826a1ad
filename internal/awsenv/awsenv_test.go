package awsenv

import (
	"fmt"
	"maps"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/elasticache"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// sdkVariables are the variables Env reads, every one of which
// each case below sets (empty: unset).
var sdkVariables = []string{
	"AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY", "AWS_SESSION_TOKEN", "AWS_ACCOUNT_ID",
	"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_SDK_UA_APP_ID",
	"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SFN", "AWS_ENDPOINT_URL_SECRETS_MANAGER",
	"AWS_ENDPOINT_URL_CLOUDFORMATION", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL_ELASTICACHE", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
	"AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE", "AWS_DEFAULTS_MODE",
	"AWS_DISABLE_REQUEST_COMPRESSION", "AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES",
	"AWS_ACCOUNT_ID_ENDPOINT_MODE", "AWS_REQUEST_CHECKSUM_CALCULATION", "AWS_RESPONSE_CHECKSUM_VALIDATION",
	"AWS_USE_DUALSTACK_ENDPOINT", "AWS_USE_FIPS_ENDPOINT", "AWS_ENABLE_ENDPOINT_DISCOVERY",
	"AWS_S3_USE_ARN_REGION", "AWS_S3_DISABLE_MULTIREGION_ACCESS_POINTS", "AWS_S3_DISABLE_EXPRESS_SESSION_AUTH",
}

// TestEnvReadsAsTheSDK: the functions read the SDK's variables
// themselves (Env), so that their bootstraps link nothing of the
// SDK's config package. For every environment below, they read what
// config.NewEnvConfig reads, refuse what it refuses (naming the variable),
// and the clients the functions make resolve the same endpoints and
// settings from either.
func TestEnvReadsAsTheSDK(t *testing.T) {
	lambdaSets := map[string]string{"AWS_ACCESS_KEY_ID": "ASIAFUNCTION", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_SESSION_TOKEN": "token", "AWS_REGION": "eu-west-1"}
	with := func(more map[string]string) map[string]string { return merged(lambdaSets, more) }
	endpoints := map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:5000", "AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:5001",
		"AWS_ENDPOINT_URL_SFN": "http://127.0.0.1:5002", "AWS_ENDPOINT_URL_SECRETS_MANAGER": "http://127.0.0.1:5003",
		"AWS_ENDPOINT_URL_CLOUDFORMATION": "http://127.0.0.1:5004", "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:5005",
		"AWS_ENDPOINT_URL_STS": "http://127.0.0.1:5006", "AWS_ENDPOINT_URL_ELASTICACHE": "http://127.0.0.1:5007"}
	cases := map[string]map[string]string{
		"what Lambda sets":                   lambdaSets,
		"nothing":                            {},
		"keys without a secret":              {"AWS_ACCESS_KEY_ID": "AKID", "AWS_SESSION_TOKEN": "token", "AWS_ACCOUNT_ID": "123456789012"},
		"the older names":                    {"AWS_ACCESS_KEY": "AKIDOLD", "AWS_SECRET_KEY": "old", "AWS_DEFAULT_REGION": "us-east-2"},
		"both names, and both Regions":       with(map[string]string{"AWS_ACCESS_KEY": "AKIDOLD", "AWS_SECRET_KEY": "old", "AWS_DEFAULT_REGION": "us-east-2", "AWS_ACCOUNT_ID": "123456789012"}),
		"the endpoints, as the sandbox sets": with(endpoints),
		"the endpoints, ignored":             with(merged(endpoints, map[string]string{"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "TRUE"})),
		"the endpoints, not ignored":         with(merged(endpoints, map[string]string{"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "false"})),
		"a service's endpoint alone":         with(map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:5001"}),
		"every setting, in mixed case": with(map[string]string{"AWS_SDK_UA_APP_ID": "osb", "AWS_MAX_ATTEMPTS": "5",
			"AWS_RETRY_MODE": "Adaptive", "AWS_DEFAULTS_MODE": "in-region", "AWS_DISABLE_REQUEST_COMPRESSION": "True",
			"AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES": "2048", "AWS_ACCOUNT_ID": "123456789012", "AWS_ACCOUNT_ID_ENDPOINT_MODE": "required",
			"AWS_REQUEST_CHECKSUM_CALCULATION": "WHEN_REQUIRED", "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_supported",
			"AWS_USE_DUALSTACK_ENDPOINT": "TRUE", "AWS_USE_FIPS_ENDPOINT": "true", "AWS_ENABLE_ENDPOINT_DISCOVERY": "Auto",
			"AWS_S3_USE_ARN_REGION": "true", "AWS_S3_DISABLE_MULTIREGION_ACCESS_POINTS": "FALSE", "AWS_S3_DISABLE_EXPRESS_SESSION_AUTH": "true"}),
		"the other values": with(map[string]string{"AWS_MAX_ATTEMPTS": "-3", "AWS_RETRY_MODE": "standard", "AWS_DEFAULTS_MODE": "legacy",
			"AWS_DISABLE_REQUEST_COMPRESSION": "false", "AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES": "10485760",
			"AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled", "AWS_REQUEST_CHECKSUM_CALCULATION": "when_supported",
			"AWS_RESPONSE_CHECKSUM_VALIDATION": "When_Required", "AWS_USE_DUALSTACK_ENDPOINT": "false", "AWS_USE_FIPS_ENDPOINT": "FALSE",
			"AWS_ENABLE_ENDPOINT_DISCOVERY": "false", "AWS_S3_USE_ARN_REGION": "false"}),
		"the least compression size": with(map[string]string{"AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES": "0", "AWS_ENABLE_ENDPOINT_DISCOVERY": "TRUE"}),
	}
	refused := map[string]string{
		"AWS_MAX_ATTEMPTS": "many", "AWS_RETRY_MODE": "eager", "AWS_DEFAULTS_MODE": "fast",
		"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "yes", "AWS_DISABLE_REQUEST_COMPRESSION": "1",
		"AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES": "10485761", "AWS_ACCOUNT_ID_ENDPOINT_MODE": "Required",
		"AWS_REQUEST_CHECKSUM_CALCULATION": "always", "AWS_RESPONSE_CHECKSUM_VALIDATION": "never",
		"AWS_USE_DUALSTACK_ENDPOINT": "1", "AWS_USE_FIPS_ENDPOINT": "yes", "AWS_ENABLE_ENDPOINT_DISCOVERY": "maybe",
		"AWS_S3_USE_ARN_REGION": "on", "AWS_S3_DISABLE_MULTIREGION_ACCESS_POINTS": "off", "AWS_S3_DISABLE_EXPRESS_SESSION_AUTH": "no",
	}
	for name, value := range refused {
		cases[name+" refused"] = with(map[string]string{name: value})
	}
	cases["a negative compression size refused"] = with(map[string]string{"AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES": "-1"})
	cases["a compression size that is no number refused"] = with(map[string]string{"AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES": "2k"})

	for name, env := range cases {
		t.Run(name, func(t *testing.T) {
			for _, k := range sdkVariables {
				t.Setenv(k, env[k])
			}
			sdk, sdkErr := awsconfig.NewEnvConfig()
			ours, err := Read(os.Getenv)
			if (err == nil) != (sdkErr == nil) {
				t.Fatalf("ours: %v; the SDK's: %v", err, sdkErr)
			}
			if err != nil {
				if strings.HasSuffix(name, " refused") {
					variable := strings.Fields(name)[0]
					if strings.HasPrefix(variable, "AWS_") && !strings.Contains(err.Error(), variable) {
						t.Errorf("the error does not name %s: %v", variable, err)
					}
				}
				if !strings.Contains(err.Error(), "AWS_") {
					t.Errorf("the error names no variable: %v", err)
				}
				return
			}
			if strings.HasSuffix(name, " refused") {
				t.Fatalf("neither refuses it: the case is wrong")
			}
			read := func(e any) map[string]any {
				v := reflect.ValueOf(e)
				out := map[string]any{}
				for _, f := range []string{"Credentials", "Region", "AppID", "BaseEndpoint", "IgnoreConfiguredEndpoints",
					"RetryMaxAttempts", "RetryMode", "DefaultsMode", "DisableRequestCompression", "RequestMinCompressSizeBytes",
					"AccountIDEndpointMode", "RequestChecksumCalculation", "ResponseChecksumValidation",
					"UseDualStackEndpoint", "UseFIPSEndpoint", "EnableEndpointDiscovery", "S3UseARNRegion", "S3DisableExpressAuth"} {
					out[f] = v.FieldByName(f).Interface()
				}
				return out
			}
			if got, want := read(ours), read(sdk); !reflect.DeepEqual(got, want) {
				for k := range want {
					if !reflect.DeepEqual(got[k], want[k]) {
						t.Errorf("%s: ours %s, the SDK's %s", k, show(got[k]), show(want[k]))
					}
				}
			}
			if !reflect.DeepEqual(ours.S3DisableMultiRegionAPs, sdk.S3DisableMultiRegionAccessPoints) {
				t.Errorf("S3DisableMultiRegionAccessPoints: ours %s, the SDK's %s", show(ours.S3DisableMultiRegionAPs), show(sdk.S3DisableMultiRegionAccessPoints))
			}
			// What the clients make of each, through ConfigSources.
			cfg := func(source any) aws.Config {
				return aws.Config{Region: "eu-west-1", ConfigSources: []any{source}, Credentials: aws.AnonymousCredentials{}}
			}
			if got, want := clientSettings(cfg(ours)), clientSettings(cfg(sdk)); !reflect.DeepEqual(got, want) {
				for k := range want {
					if !reflect.DeepEqual(got[k], want[k]) {
						t.Errorf("%s: ours %s, the SDK's %s", k, show(got[k]), show(want[k]))
					}
				}
			}
		})
	}
}

// merged is base with more's variables set over it.
func merged(base, more map[string]string) map[string]string {
	out := maps.Clone(base)
	maps.Copy(out, more)
	return out
}

// clientSettings are what each client the functions make reads from the
// configuration's sources: its endpoint, its FIPS and dual-stack states,
// DynamoDB's endpoint discovery, S3's options.
func clientSettings(cfg aws.Config) map[string]any {
	out := map[string]any{}
	endpoint := func(name string, base *string, dual aws.DualStackEndpointState, fips aws.FIPSEndpointState) {
		out[name+" endpoint"], out[name+" dual-stack"], out[name+" FIPS"] = aws.ToString(base), dual, fips
	}
	d := dynamodb.NewFromConfig(cfg).Options()
	endpoint("DynamoDB", d.BaseEndpoint, d.EndpointOptions.UseDualStackEndpoint, d.EndpointOptions.UseFIPSEndpoint)
	out["DynamoDB endpoint discovery"] = d.EndpointDiscovery.EnableEndpointDiscovery
	f := sfn.NewFromConfig(cfg).Options()
	endpoint("Step Functions", f.BaseEndpoint, f.EndpointOptions.UseDualStackEndpoint, f.EndpointOptions.UseFIPSEndpoint)
	k := kms.NewFromConfig(cfg).Options()
	endpoint("KMS", k.BaseEndpoint, k.EndpointOptions.UseDualStackEndpoint, k.EndpointOptions.UseFIPSEndpoint)
	sm := secretsmanager.NewFromConfig(cfg).Options()
	endpoint("Secrets Manager", sm.BaseEndpoint, sm.EndpointOptions.UseDualStackEndpoint, sm.EndpointOptions.UseFIPSEndpoint)
	c := cloudformation.NewFromConfig(cfg).Options()
	endpoint("CloudFormation", c.BaseEndpoint, c.EndpointOptions.UseDualStackEndpoint, c.EndpointOptions.UseFIPSEndpoint)
	l := lambda.NewFromConfig(cfg).Options()
	endpoint("Lambda", l.BaseEndpoint, l.EndpointOptions.UseDualStackEndpoint, l.EndpointOptions.UseFIPSEndpoint)
	e := elasticache.NewFromConfig(cfg).Options()
	endpoint("ElastiCache", e.BaseEndpoint, e.EndpointOptions.UseDualStackEndpoint, e.EndpointOptions.UseFIPSEndpoint)
	st := sts.NewFromConfig(cfg).Options()
	endpoint("STS", st.BaseEndpoint, st.EndpointOptions.UseDualStackEndpoint, st.EndpointOptions.UseFIPSEndpoint)
	s := s3.NewFromConfig(cfg).Options()
	endpoint("S3", s.BaseEndpoint, s.EndpointOptions.UseDualStackEndpoint, s.EndpointOptions.UseFIPSEndpoint)
	out["S3 ARN Region"], out["S3 multi-Region access points off"], out["S3 express auth off"] =
		s.UseARNRegion, s.DisableMultiRegionAccessPoints, s.DisableS3ExpressSessionAuth
	return out
}

// show prints a value, and what a pointer points at.
func show(v any) string {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "nil"
		}
		return "&" + show(rv.Elem().Interface())
	}
	return fmt.Sprintf("%+v", v)
}
