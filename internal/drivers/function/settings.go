package function

import (
	"bytes"
	"errors"
	"maps"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/serverless-osb/broker/internal/catalog"
)

// Setting keys of a plan's broker block.
const (
	KeyFunction   = "function"
	KeyURL        = "url"
	KeySecretEnv  = "secret_env"
	KeySecretFile = "secret_file"
	KeySecretARN  = "secret_arn"
	KeyTimeout    = "timeout"
	KeyRetryAfter = "retry_after"
	KeyConfig     = "config"
	KeyProtocol   = "protocol"
)

var settingKeys = []string{KeyFunction, KeyURL, KeySecretEnv, KeySecretFile, KeySecretARN, KeyTimeout, KeyRetryAfter, KeyConfig, KeyProtocol}

// Defaults and bounds of the settings.
const (
	DefaultTimeout    = 10 * time.Second
	MaxTimeout        = 50 * time.Second
	DefaultRetryAfter = 5 * time.Second
)

// Settings are one plan's settings, checked once when the broker starts.
type Settings struct {
	Target Target
	// RetryAfter is the time between checks when an answer names none.
	RetryAfter time.Duration
	// Config is sent to the target as plan.config in every request.
	Config map[string]any
}

// Target is where the requests of a plan go. It is kept in each resource
// record: a driver that does not know the plan sends a cleanup to it, re-checked.
type Target struct {
	// Function is a Lambda function's name or ARN, with an optional
	// qualifier (version or alias); or else URL is an HTTPS URL (HTTP to
	// a loopback address only).
	Function string `json:"function,omitempty"`
	URL      string `json:"url,omitempty"`
	// SecretEnv names the variable, SecretFile (absolute) the file, or
	// SecretARN the AWS Secrets Manager secret, that holds the secret the
	// broker signs HTTP requests with.
	SecretEnv  string `json:"secret_env,omitempty"`
	SecretFile string `json:"secret_file,omitempty"`
	SecretARN  string `json:"secret_arn,omitempty"`
	// Timeout bounds one request.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Protocol is the protocol's version the target speaks (Version1 or
	// Version2); zero is DefaultVersion.
	Protocol int `json:"protocol,omitempty"`
}

// Ready checks at start that the secret of an HTTP target is there: the
// variable set, the file readable and not empty (a secret in Secrets
// Manager is read on first use, when the broker has its AWS access). It
// never reads the secret into a message.
func (t Target) Ready(getenv func(string) string) error {
	switch {
	case t.SecretEnv != "":
		if getenv == nil {
			getenv = os.Getenv
		}
		if getenv(t.SecretEnv) == "" {
			return catalog.Settingf(KeySecretEnv, "the variable %s is not set (or empty) where the broker runs: set it to the secret the target checks signatures with", t.SecretEnv)
		}
	case t.SecretFile != "":
		data, err := os.ReadFile(t.SecretFile)
		switch {
		case err != nil:
			return catalog.Settingf(KeySecretFile, "the file %s is unreadable: %v", t.SecretFile, errors.Unwrap(err))
		case len(bytes.TrimSpace(data)) == 0:
			return catalog.Settingf(KeySecretFile, "the file %s is empty: put the secret the target checks signatures with in it", t.SecretFile)
		}
	}
	return nil
}

// version is the protocol's version of the requests to t.
func (t Target) version() int {
	if t.Protocol == 0 {
		return DefaultVersion
	}
	return t.Protocol
}

// Warning says what the target's plan opts into that is weaker than the
// default, or "": protocol 1 adds the version 1 MAC to every request,
// which covers only the time and the body, so that a request captured on
// the way can be replayed within MaxClockSkew to another URL or method of
// a target sharing the secret.
func (t Target) Warning() string {
	if t.URL != "" && t.version() == Version1 {
		return "function plan on protocol 1: its requests carry the version 1 signature, which covers neither the method, " +
			"the URL nor a request id; move the target to version 2 and the plan to protocol: 2"
	}
	return ""
}

// config is the target as a plan's settings name it: what Configure
// checks a stored target with, so that it meets the catalog's rules of
// today, not those of the day it was stored.
func (t Target) config() map[string]any {
	c := map[string]any{}
	for k, v := range map[string]string{KeyFunction: t.Function, KeyURL: t.URL, KeySecretEnv: t.SecretEnv,
		KeySecretFile: t.SecretFile, KeySecretARN: t.SecretARN} {
		if v != "" {
			c[k] = v
		}
	}
	if t.Timeout > 0 {
		c[KeyTimeout] = t.Timeout.Seconds()
	}
	if t.Protocol != 0 {
		c[KeyProtocol] = t.Protocol
	}
	return c
}

// String names the target for messages and logs.
func (t Target) String() string {
	if t.Function != "" {
		return "Lambda function " + t.Function
	}
	return shownURL(t.URL)
}

// shownURL is raw as logs and messages show it: without its query, where
// function keys live (Azure's ?code=…), its fragment and any user
// information. Every log line and error text that names a target's URL
// goes through it (Target.String).
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "an unparsable URL"
	}
	query := u.RawQuery != "" || u.ForceQuery
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	if query {
		return u.String() + "?[REDACTED]"
	}
	return u.String()
}

// The patterns are compiled on a function plan's first check, not at
// package init: every cold start of both functions paid for them (the
// bounded repetitions make large programs), whether or not the catalog has
// a function plan.

// functionPattern is what a plan may name a Lambda function by: its name,
// or its ARN, each with an optional qualifier. IAM grants the broker the
// function as named, so the partial ARNs that Lambda also takes are not
// accepted: a name is read as a function of the broker's account and Region.
var functionPattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(arn:aws[a-z-]*:lambda:[a-z]{2}(-[a-z]+)+-[0-9]:[0-9]{12}:function:)?[A-Za-z0-9_-]{1,64}(:(\$LATEST|[A-Za-z0-9_-]{1,128}))?$`)
})

// secretARNPattern is a Secrets Manager secret's complete ARN, which ends
// with the six characters Secrets Manager adds to the name: IAM grants the
// broker exactly that secret, and a partial ARN would need a wildcard.
var secretARNPattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^arn:aws[a-z-]*:secretsmanager:[a-z]{2}(-[a-z]+)+-[0-9]:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$`)
})

// envPattern is a variable's name.
var envPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// Configure checks a plan's settings (its broker block without driver,
// mode and deprovision); paths are relative to dir, the catalog's folder.
func Configure(_ *catalog.Plan, config map[string]any, dir string) (*Settings, error) {
	for _, k := range slices.Sorted(maps.Keys(config)) {
		if slices.Contains(settingKeys, k) {
			continue
		}
		if strings.Contains(strings.ToLower(k), "secret") || strings.Contains(strings.ToLower(k), "password") {
			return nil, catalog.Settingf(k, "a secret never goes in the catalog; name the variable (%s), the file (%s) or the Secrets Manager secret (%s) that holds it", KeySecretEnv, KeySecretFile, KeySecretARN)
		}
		return nil, catalog.Settingf(k, "unknown key; the function driver's settings are %s (%s are the broker's)",
			strings.Join(settingKeys, ", "), catalog.BrokerKeys())
	}
	s := &Settings{RetryAfter: DefaultRetryAfter, Target: Target{Timeout: DefaultTimeout}}
	fn, hasFn, err := stringSetting(config, KeyFunction)
	if err != nil {
		return nil, err
	}
	u, hasURL, err := stringSetting(config, KeyURL)
	if err != nil {
		return nil, err
	}
	env, hasEnv, err := stringSetting(config, KeySecretEnv)
	if err != nil {
		return nil, err
	}
	file, hasFile, err := stringSetting(config, KeySecretFile)
	if err != nil {
		return nil, err
	}
	arn, hasARN, err := stringSetting(config, KeySecretARN)
	if err != nil {
		return nil, err
	}
	var secretKeys []string
	for key, has := range map[string]bool{KeySecretEnv: hasEnv, KeySecretFile: hasFile, KeySecretARN: hasARN} {
		if has {
			secretKeys = append(secretKeys, key)
		}
	}
	slices.Sort(secretKeys)
	switch {
	case hasFn && hasURL:
		return nil, catalog.Settingf(KeyURL, "a plan names one target: a Lambda %s or a %s, not both", KeyFunction, KeyURL)
	case !hasFn && !hasURL:
		return nil, catalog.Settingf(KeyFunction, "is missing; name the plan's target: a Lambda function (%s: my-service-broker or its ARN) or an HTTPS endpoint (%s: https://…)", KeyFunction, KeyURL)
	case hasFn:
		if !functionPattern().MatchString(fn) {
			return nil, catalog.Settingf(KeyFunction, "%q is not a Lambda function's name or ARN (NAME, NAME:ALIAS, or arn:aws:lambda:REGION:ACCOUNT:function:NAME[:ALIAS])", fn)
		}
		if len(secretKeys) > 0 {
			return nil, catalog.Settingf(secretKeys[0], "a Lambda target needs no secret: IAM lets only the broker invoke it; remove %s", secretKeys[0])
		}
		s.Target.Function = fn
	default:
		if err := checkURL(u); err != nil {
			return nil, err
		}
		s.Target.URL = u
		switch {
		case len(secretKeys) > 1:
			return nil, catalog.Settingf(secretKeys[1], "name the secret once: %s, %s or %s, not %s", KeySecretEnv, KeySecretFile, KeySecretARN,
				strings.Join(secretKeys, " and "))
		case hasARN:
			if !secretARNPattern().MatchString(arn) {
				return nil, catalog.Settingf(KeySecretARN, "%q is not a Secrets Manager secret's complete ARN (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME-XXXXXX, as the console shows it)", arn)
			}
			s.Target.SecretARN = arn
		case hasEnv:
			if !envPattern().MatchString(env) {
				return nil, catalog.Settingf(KeySecretEnv, "%q is not a variable's name", env)
			}
			s.Target.SecretEnv = env
		case hasFile:
			if !filepath.IsAbs(file) {
				file = filepath.Join(dir, file)
			}
			s.Target.SecretFile = file
		default:
			return nil, catalog.Settingf(KeySecretEnv, "is missing; an HTTP target needs the secret the broker signs its requests with, so that it can refuse anyone else's: name the variable (%s), the file (%s) or, deployed, the Secrets Manager secret (%s) that holds it", KeySecretEnv, KeySecretFile, KeySecretARN)
		}
	}
	if s.Target.Timeout, err = seconds(config, KeyTimeout, DefaultTimeout, time.Second, MaxTimeout); err != nil {
		return nil, err
	}
	if s.Target.Protocol, err = protocol(config); err != nil {
		return nil, err
	}
	if s.RetryAfter, err = seconds(config, KeyRetryAfter, DefaultRetryAfter, time.Second, time.Hour); err != nil {
		return nil, err
	}
	if v, ok := config[KeyConfig]; ok && v != nil {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, catalog.Settingf(KeyConfig, "must be a mapping (sent to the target as plan.config), got %s", catalog.Describe(v))
		}
		s.Config = m
	}
	return s, nil
}

// checkURL accepts an HTTPS URL, or an HTTP one to a loopback address:
// the signature proves the broker sent a request, but only TLS keeps the
// parameters and the credentials of the answer from the network.
//
// Its messages quote the URL without its query or user information
// (shownURL): they reach a stored cleanup failure as well as the broker's
// start.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return catalog.Settingf(KeyURL, "is not a URL (https://host/path)")
	}
	shown := shownURL(raw)
	if u.Host == "" || u.User != nil || u.Fragment != "" {
		return catalog.Settingf(KeyURL, "%q is not an absolute URL without user information or fragment (https://host/path)", shown)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopback(u.Hostname()) {
			return nil
		}
		return catalog.Settingf(KeyURL, "%s: plain HTTP is allowed only to a loopback address (127.0.0.1, ::1, localhost); use https://", shown)
	}
	return catalog.Settingf(KeyURL, "%s: the scheme must be https (or http to a loopback address)", shown)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func stringSetting(config map[string]any, key string) (string, bool, error) {
	v, ok := config[key]
	if !ok {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok || strings.TrimSpace(s) == "" {
		return "", false, catalog.Settingf(key, "must be a non-empty string, got %s", catalog.Describe(v))
	}
	return s, true, nil
}

// protocol reads the protocol's version of a plan: DefaultVersion unless
// it names one.
func protocol(config map[string]any) (int, error) {
	v, ok := config[KeyProtocol]
	if !ok {
		return DefaultVersion, nil
	}
	switch v {
	case Version1, int64(Version1), uint64(Version1), float64(Version1):
		return Version1, nil
	case Version2, int64(Version2), uint64(Version2), float64(Version2):
		return Version2, nil
	}
	return 0, catalog.Settingf(KeyProtocol, "must be %d or %d (the function protocol's version the target speaks; version 2 signs the method, URL and a request id as well), got %s",
		Version1, Version2, catalog.Describe(v))
}

// seconds reads a whole number of seconds from lo to hi.
func seconds(config map[string]any, key string, def, lo, hi time.Duration) (time.Duration, error) {
	v, ok := config[key]
	if !ok {
		return def, nil
	}
	var n float64
	switch x := v.(type) {
	case int:
		n = float64(x)
	case int64:
		n = float64(x)
	case uint64:
		n = float64(x)
	case float64:
		n = x
	default:
		n = math.NaN()
	}
	d := time.Duration(n) * time.Second
	if n != math.Trunc(n) || d < lo || d > hi {
		return 0, catalog.Settingf(key, "must be a whole number of seconds from %d to %d, got %s", int(lo.Seconds()), int(hi.Seconds()), catalog.Describe(v))
	}
	return d, nil
}
