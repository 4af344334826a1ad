package awsenv

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// TestConfigReadsWhatLambdaSets: the functions' configuration
// comes from their environment alone, as Lambda (and the sandbox) sets it:
// the role's credentials, the Region, the endpoints, the retries.
func TestConfigReadsWhatLambdaSets(t *testing.T) {
	set := func(env map[string]string) {
		for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
			"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_MAX_ATTEMPTS", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_PROFILE"} {
			t.Setenv(k, env[k])
		}
	}
	t.Run("the role's credentials, the Region, the endpoints and the retries", func(t *testing.T) {
		set(map[string]string{"AWS_ACCESS_KEY_ID": "AKIDFUNCTION", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token",
			"AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:5000", "AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:5001",
			"AWS_MAX_ATTEMPTS": "7", "AWS_PROFILE": "a-profile-a-function-never-has"})
		cfg, err := Config("")
		if err != nil {
			t.Fatal(err)
		}
		creds, err := cfg.Credentials.Retrieve(t.Context())
		if err != nil || creds.AccessKeyID != "AKIDFUNCTION" || creds.SecretAccessKey != "secret" || creds.SessionToken != "token" {
			t.Errorf("credentials %+v, %v", creds, err)
		}
		if cfg.Region != "eu-west-1" || aws.ToString(cfg.BaseEndpoint) != "http://127.0.0.1:5000" || cfg.RetryMaxAttempts != 7 {
			t.Errorf("region %q, endpoint %q, attempts %d", cfg.Region, aws.ToString(cfg.BaseEndpoint), cfg.RetryMaxAttempts)
		}
		if got := aws.ToString(dynamodb.NewFromConfig(cfg).Options().BaseEndpoint); got != "http://127.0.0.1:5001" {
			t.Errorf("DynamoDB's endpoint is %q, want AWS_ENDPOINT_URL_DYNAMODB's", got)
		}
		if cfg, _ := Config("us-east-2"); cfg.Region != "us-east-2" {
			t.Errorf("the Region given is not the configuration's: %q", cfg.Region)
		}
	})
	t.Run("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS leaves the endpoints to the SDK", func(t *testing.T) {
		set(map[string]string{"AWS_ACCESS_KEY_ID": "AKIDFUNCTION", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_REGION": "eu-west-1",
			"AWS_ENDPOINT_URL": "http://127.0.0.1:5000", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"})
		cfg, err := Config("")
		if err != nil || cfg.BaseEndpoint != nil {
			t.Errorf("endpoint %v, %v", cfg.BaseEndpoint, err)
		}
	})
	t.Run("without credentials in the environment it says which variables hold them", func(t *testing.T) {
		set(map[string]string{"AWS_REGION": "eu-west-1"})
		_, err := Config("")
		if err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
			t.Errorf("err = %v", err)
		}
	})
}
