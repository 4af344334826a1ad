package infra

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/constructs-go/constructs/v10"
)

// Context keys PropsFromContext reads. cdk.json sets each to its default;
// `cdk deploy -c key=value` overrides one.
const (
	ContextStackName          = "stackName"
	ContextCatalog            = "catalog"
	ContextAPICode            = "apiCode"
	ContextWorkerCode         = "workerCode"
	ContextStateMachines      = "statemachines"
	ContextStageName          = "stageName"
	ContextThrottleRateLimit  = "throttleRateLimit"
	ContextThrottleBurstLimit = "throttleBurstLimit"
	ContextPollRateLimit      = "pollThrottleRateLimit"
	ContextPollBurstLimit     = "pollThrottleBurstLimit"
	// ContextFrontDoor is true or false (a JSON boolean in cdk.json, a
	// string from -c).
	ContextFrontDoor          = "frontDoor"
	ContextFrontDoorRateLimit = "frontDoorRateLimit"
	// ContextFrontDoorAllowCIDRs is a comma-separated list (or, in
	// cdk.json, a list) of CIDRs.
	ContextFrontDoorAllowCIDRs = "frontDoorAllowCidrs"
	ContextFrontDoorWebACLARN  = "frontDoorWebAclArn"
	// ContextFrontDoorOriginCertificateARN and ContextFrontDoorTruststore,
	// both or neither, turn on mutual TLS between the front door and the
	// API's custom domain.
	ContextFrontDoorOriginCertificateARN = "frontDoorOriginCertificateArn"
	ContextFrontDoorTruststore           = "frontDoorTruststore"
	ContextAPIMemorySize                 = "apiMemorySize"
	ContextWorkerMemorySize              = "workerMemorySize"
	ContextAPITimeout                    = "apiTimeoutSeconds"
	ContextWorkerTimeout                 = "workerTimeoutSeconds"
	// ContextAPIReservedConcurrency and ContextWorkerReservedConcurrency:
	// 0 is none (absent: the default).
	ContextAPIReservedConcurrency    = "apiReservedConcurrency"
	ContextWorkerReservedConcurrency = "workerReservedConcurrency"
	// ContextWorkerTasksPerPlan: 0 is none (absent: the default).
	ContextWorkerTasksPerPlan = "workerTasksPerPlan"
	ContextLogRetentionDays   = "logRetentionDays"
	ContextLogLevel           = "logLevel"
	// ContextSealedOnly is true or false, as ContextFrontDoor; unlike the
	// others, absent or empty is true (BrokerStackProps.AllowClear).
	ContextSealedOnly     = "sealedOnly"
	ContextAlarmTopicARN  = "alarmTopicArn"
	ContextAlarmEmail     = "alarmEmail"
	ContextDomainName     = "domainName"
	ContextCertificateARN = "certificateArn"
	ContextReaperInterval = "reaperIntervalMinutes"
	ContextStackPrefix    = "stackPrefix"
	// ContextLegacyStackPrefix is true or false, as ContextFrontDoor.
	ContextLegacyStackPrefix = "legacyStackPrefix"
	// ContextServiceRolePolicyARNs is a comma-separated list (or, in
	// cdk.json, a list) of managed policy ARNs.
	ContextServiceRolePolicyARNs = "serviceRolePolicyArns"
	// ContextSealingKeyOperators is a comma-separated list (or, in
	// cdk.json, a list) of IAM role and user ARNs.
	ContextSealingKeyOperators = "sealingKeyOperators"
)

// PropsFromContext reads the stack's props from the CDK context of node
// (cdk.json's "context", then -c options). An absent or empty key leaves
// its prop at the default.
func PropsFromContext(node constructs.Node) (BrokerStackProps, error) {
	c := contextReader{node: node}
	p := BrokerStackProps{
		CatalogPath:                   c.string(ContextCatalog),
		APICodeDir:                    c.string(ContextAPICode),
		WorkerCodeDir:                 c.string(ContextWorkerCode),
		StateMachinesDir:              c.string(ContextStateMachines),
		StageName:                     c.string(ContextStageName),
		ThrottleRateLimit:             c.number(ContextThrottleRateLimit),
		ThrottleBurstLimit:            c.integer(ContextThrottleBurstLimit),
		PollThrottleRateLimit:         c.number(ContextPollRateLimit),
		PollThrottleBurstLimit:        c.integer(ContextPollBurstLimit),
		FrontDoor:                     c.boolean(ContextFrontDoor),
		FrontDoorRateLimit:            c.integer(ContextFrontDoorRateLimit),
		FrontDoorAllowCIDRs:           c.list(ContextFrontDoorAllowCIDRs),
		FrontDoorWebACLARN:            c.string(ContextFrontDoorWebACLARN),
		FrontDoorOriginCertificateARN: c.string(ContextFrontDoorOriginCertificateARN),
		FrontDoorTruststore:           c.string(ContextFrontDoorTruststore),
		APIMemoryMB:                   c.integer(ContextAPIMemorySize),
		WorkerMemoryMB:                c.integer(ContextWorkerMemorySize),
		APITimeout:                    time.Duration(c.integer(ContextAPITimeout)) * time.Second,
		WorkerTimeout:                 time.Duration(c.integer(ContextWorkerTimeout)) * time.Second,
		LogRetentionDays:              c.integer(ContextLogRetentionDays),
		LogLevel:                      c.string(ContextLogLevel),
		AllowClear:                    !c.booleanOr(ContextSealedOnly, true),
		AlarmTopicARN:                 c.string(ContextAlarmTopicARN),
		AlarmEmail:                    c.string(ContextAlarmEmail),
		DomainName:                    c.string(ContextDomainName),
		CertificateARN:                c.string(ContextCertificateARN),
		ReaperInterval:                time.Duration(c.integer(ContextReaperInterval)) * time.Minute,
		StackPrefix:                   c.string(ContextStackPrefix),
		LegacyStackPrefix:             c.boolean(ContextLegacyStackPrefix),
		ServiceRolePolicyARNs:         c.list(ContextServiceRolePolicyARNs),
		SealingKeyOperators:           c.list(ContextSealingKeyOperators),
	}
	p.APIReservedConcurrency = c.concurrency(ContextAPIReservedConcurrency)
	p.WorkerReservedConcurrency = c.concurrency(ContextWorkerReservedConcurrency)
	p.WorkerTasksPerPlan = c.concurrency(ContextWorkerTasksPerPlan)
	p.DatabaseUserCodeDir = c.string(ContextDatabaseUserCode)
	p.CacheUserCodeDir = c.string(ContextCacheUserCode)
	if vpcs, err := parseDatabaseUserVPCs(c.list(ContextDatabaseUserVPCs)); err != nil {
		c.errs = append(c.errs, err)
	} else {
		p.DatabaseUserVPCs = vpcs
	}
	if err := errors.Join(c.errs...); err != nil {
		return BrokerStackProps{}, fmt.Errorf("cdk context: %w", err)
	}
	return p, nil
}

// contextReader reads context values, which are JSON values when they come
// from cdk.json and strings when they come from -c.
type contextReader struct {
	node constructs.Node
	errs []error
}

func (c *contextReader) string(key string) string {
	switch v := c.node.TryGetContext(&key).(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		c.errs = append(c.errs, fmt.Errorf("%s: want a string, got %v", key, v))
		return ""
	}
}

// list reads a list of strings: a JSON list of strings, or a string of
// comma-separated items (from -c). Blank items are dropped.
func (c *contextReader) list(key string) []string {
	var items []string
	switch v := c.node.TryGetContext(&key).(type) {
	case nil:
		return nil
	case string:
		items = strings.Split(v, ",")
	case []any:
		for _, item := range v {
			s, ok := item.(string)
			if !ok {
				c.errs = append(c.errs, fmt.Errorf("%s: want strings, got %v", key, item))
				return nil
			}
			items = append(items, s)
		}
	default:
		c.errs = append(c.errs, fmt.Errorf("%s: want a comma-separated string or a list of strings, got %v", key, v))
		return nil
	}
	var list []string
	for _, item := range items {
		if item = strings.TrimSpace(item); item != "" {
			list = append(list, item)
		}
	}
	return list
}

// boolean reads true or false: a JSON boolean, or the strings "true" and
// "false" (from -c); absent or empty is false.
func (c *contextReader) boolean(key string) bool { return c.booleanOr(key, false) }

// booleanOr reads a boolean as boolean does; absent or empty is def.
func (c *contextReader) booleanOr(key string, def bool) bool {
	switch v := c.node.TryGetContext(&key).(type) {
	case nil:
		return def
	case bool:
		return v
	case string:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "":
			return def
		case "false":
			return false
		case "true":
			return true
		}
		c.errs = append(c.errs, fmt.Errorf("%s: want true or false, got %q", key, v))
		return false
	default:
		c.errs = append(c.errs, fmt.Errorf("%s: want true or false, got %v", key, v))
		return false
	}
}

func (c *contextReader) number(key string) float64 {
	switch v := c.node.TryGetContext(&key).(type) {
	case nil:
		return 0
	case float64:
		return v
	case string:
		if v == "" {
			return 0
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			c.errs = append(c.errs, fmt.Errorf("%s: want a number, got %q", key, v))
		}
		return f
	default:
		c.errs = append(c.errs, fmt.Errorf("%s: want a number, got %v", key, v))
		return 0
	}
}

// concurrency reads a number of instances (a reserved concurrency, the
// Tasks per plan) whose 0 means none: the props' negative. Absent or empty
// is the props' zero, the default.
func (c *contextReader) concurrency(key string) int {
	if v := c.node.TryGetContext(&key); v == nil || v == "" {
		return 0
	}
	n := c.integer(key)
	switch {
	case n < 0:
		c.errs = append(c.errs, fmt.Errorf("%s: want 0 (none) or more, got %d", key, n))
		return 0
	case n == 0:
		return -1
	}
	return n
}

func (c *contextReader) integer(key string) int {
	f := c.number(key)
	if f != float64(int(f)) {
		c.errs = append(c.errs, fmt.Errorf("%s: want a whole number, got %v", key, f))
	}
	return int(f)
}
