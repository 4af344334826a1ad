package function_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/drivers/function"
)

const secretARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:osb/fn-secret-AbC123"

func TestConfigure(t *testing.T) {
	t.Run("a Lambda target by name, alias or ARN", func(t *testing.T) {
		for _, fn := range []string{"my-broker", "my-broker:live", "arn:aws:lambda:eu-west-1:123456789012:function:my-broker",
			"arn:aws:lambda:us-gov-west-1:123456789012:function:my_broker:$LATEST"} {
			s, err := function.Configure(nil, map[string]any{"function": fn}, "")
			if err != nil || s.Target.Function != fn || s.Target.Timeout != function.DefaultTimeout {
				t.Errorf("%s: %+v %v", fn, s, err)
			}
		}
	})
	t.Run("an HTTP target with a secret file relative to the catalog", func(t *testing.T) {
		s, err := function.Configure(nil, map[string]any{"url": "https://fn.example.com/osb", "secret_file": "fn.secret",
			"timeout": 20, "retry_after": 30}, "/etc/osb")
		if err != nil || s.Target.SecretFile != "/etc/osb/fn.secret" || s.Target.Timeout != 20*time.Second || s.RetryAfter != 30*time.Second {
			t.Fatalf("%+v %v", s, err)
		}
	})
	for _, tc := range []struct {
		name   string
		config map[string]any
		key    string
		want   string
	}{
		{"no target", map[string]any{}, "function", "is missing"},
		{"two targets", map[string]any{"function": "f", "url": "https://x"}, "url", "not both"},
		{"a secret in the catalog", map[string]any{"url": "https://x", "secret": "hunter2"}, "secret", "never goes in the catalog"},
		{"an unknown key", map[string]any{"function": "f", "tiemout": 3}, "tiemout", "unknown key"},
		{"a bad function name", map[string]any{"function": "my function"}, "function", "not a Lambda function"},
		{"a partial ARN", map[string]any{"function": "123456789012:function:f"}, "function", "not a Lambda function"},
		{"a secret for a Lambda target", map[string]any{"function": "f", "secret_env": "S"}, "secret_env", "needs no secret"},
		{"plain HTTP to another host", map[string]any{"url": "http://fn.example.com/", "secret_env": "S"}, "url", "only to a loopback"},
		{"another scheme", map[string]any{"url": "ftp://x/", "secret_env": "S"}, "url", "scheme must be https"},
		{"user information in the URL", map[string]any{"url": "https://u:hunter2@x/", "secret_env": "S"}, "url", "without user information"},
		{"an HTTP target without a secret", map[string]any{"url": "https://x/"}, "secret_env", "is missing"},
		{"two secrets", map[string]any{"url": "https://x/", "secret_env": "S", "secret_file": "f"}, "secret_file", "name the secret once"},
		{"a secret ARN and a variable", map[string]any{"url": "https://x/", "secret_env": "S", "secret_arn": secretARN}, "secret_env", "not secret_arn and secret_env"},
		{"a secret's name for its ARN", map[string]any{"url": "https://x/", "secret_arn": "fn-secret"}, "secret_arn", "complete ARN"},
		{"another service's ARN", map[string]any{"url": "https://x/", "secret_arn": "arn:aws:ssm:eu-west-1:123456789012:parameter/fn-secret"}, "secret_arn", "complete ARN"},
		{"a secret's ARN with a wildcard", map[string]any{"url": "https://x/", "secret_arn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:fn-*"}, "secret_arn", "complete ARN"},
		{"a secret ARN for a Lambda target", map[string]any{"function": "f", "secret_arn": secretARN}, "secret_arn", "needs no secret"},
		{"a bad variable name", map[string]any{"url": "https://x/", "secret_env": "MY-SECRET"}, "secret_env", "not a variable"},
		{"a timeout too long", map[string]any{"function": "f", "timeout": 600}, "timeout", "from 1 to 50"},
		{"a fractional retry_after", map[string]any{"function": "f", "retry_after": 1.5}, "retry_after", "whole number"},
		{"a protocol the broker does not speak", map[string]any{"function": "f", "protocol": 3}, "protocol", "must be 1 or 2"},
		{"a protocol as a string", map[string]any{"function": "f", "protocol": "2"}, "protocol", "must be 1 or 2"},
		{"a config that is not a mapping", map[string]any{"function": "f", "config": "x"}, "config", "must be a mapping"},
	} {
		t.Run(tc.name+" is refused, naming the key", func(t *testing.T) {
			_, err := function.Configure(nil, tc.config, "")
			var se *catalog.SettingError
			if !errors.As(err, &se) || se.Key != tc.key || !strings.Contains(se.Problem, tc.want) {
				t.Fatalf("error %v, want key %s: …%s…", err, tc.key, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the message repeats the secret: %v", err)
			}
		})
	}
	t.Run("an HTTPS target with a Secrets Manager secret", func(t *testing.T) {
		s, err := function.Configure(nil, map[string]any{"url": "https://fn.example.com/osb", "secret_arn": secretARN}, "")
		if err != nil || s.Target.SecretARN != secretARN || s.Target.SecretEnv != "" || s.Target.SecretFile != "" {
			t.Fatalf("%+v %v", s, err)
		}
	})
	t.Run("a plan speaks protocol version 2 unless it names 1", func(t *testing.T) {
		for _, tc := range []struct {
			config map[string]any
			want   int
		}{
			{map[string]any{"url": "https://x/", "secret_env": "S"}, 2},
			{map[string]any{"url": "https://x/", "secret_env": "S", "protocol": 2}, 2},
			{map[string]any{"url": "https://x/", "secret_env": "S", "protocol": uint64(1)}, 1},
			{map[string]any{"function": "f", "protocol": 2.0}, 2},
		} {
			if s, err := function.Configure(nil, tc.config, ""); err != nil || s.Target.Protocol != tc.want {
				t.Errorf("%v: %+v %v, want protocol %d", tc.config, s, err, tc.want)
			}
		}
	})
	t.Run("plain HTTP to loopback is allowed", func(t *testing.T) {
		for _, u := range []string{"http://127.0.0.1:8081/", "http://[::1]:8081/", "http://localhost:8081/"} {
			if _, err := function.Configure(nil, map[string]any{"url": u, "secret_env": "S"}, ""); err != nil {
				t.Errorf("%s: %v", u, err)
			}
		}
	})
}

func TestSignatures(t *testing.T) {
	key, now := []byte("k"), time.Unix(1700000000, 0)
	m := function.Message{Method: "POST", URL: "https://fn.example.com/osb", RequestID: "r-1", Body: []byte(`{"version":2}`)}
	sig := function.Sign(key, now, m, false)
	with := func(change func(*function.Message)) function.Message {
		c := m
		change(&c)
		return c
	}
	// v1Only is what a broker of the previous release sent: the MAC of
	// "<t>.<body>".
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("1700000000." + string(m.Body)))
	v1Only := "t=1700000000,v1=" + hex.EncodeToString(mac.Sum(nil))
	for _, tc := range []struct {
		name   string
		key    []byte
		header string
		m      function.Message
		at     time.Time
		want   error
	}{
		{"the broker's signature is accepted", key, sig, m, now.Add(time.Minute), nil},
		{"the broker's signature with version 1's beside it is accepted", key, function.Sign(key, now, m, true), m, now, nil},
		{"another body is refused", key, sig, with(func(c *function.Message) { c.Body = []byte(`{"version":1}`) }), now, function.ErrBadSignature},
		{"another URL is refused", key, sig, with(func(c *function.Message) { c.URL = "https://other.example.com/osb" }), now, function.ErrBadSignature},
		{"another method is refused", key, sig, with(func(c *function.Message) { c.Method = "PUT" }), now, function.ErrBadSignature},
		{"another request id is refused", key, sig, with(func(c *function.Message) { c.RequestID = "r-2" }), now, function.ErrBadSignature},
		{"no request id is refused", key, sig, with(func(c *function.Message) { c.RequestID = "" }), now, function.ErrNoRequestID},
		{"another secret is refused", []byte("x"), sig, m, now, function.ErrBadSignature},
		{"an old signature is refused", key, sig, m, now.Add(time.Hour), function.ErrStale},
		{"no signature is refused", key, "", m, now, function.ErrNoSignature},
		{"a version 1 signature alone is refused", key, v1Only, m, now, function.ErrNoSignature},
		{"another time with the same MAC is refused", key, strings.Replace(sig, "t=1700000000", "t=1700000001", 1), m, now, function.ErrBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := function.Verify(tc.key, tc.header, tc.m, tc.at); !errors.Is(err, tc.want) {
				t.Fatalf("Verify: %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("version 1's MAC is the previous release's", func(t *testing.T) {
		if got := function.Sign(key, now, m, true); !strings.HasPrefix(got, v1Only+",v2=") {
			t.Errorf("signature %s, want it to start with %s", got, v1Only)
		}
	})
}
