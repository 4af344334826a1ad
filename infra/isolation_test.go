package infra

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/drivers/cloudformation"
)

// The account, Region and partition every deployment of these tests shares.
const (
	testPartition = "aws"
	testRegion    = "eu-west-1"
	testAccount   = "111122223333"
)

// deployment is a broker stack synthesized with a name and a stack prefix.
type deployment struct {
	name, prefix string
	legacy       bool
	// extra are more context settings.
	extra    map[string]any
	template map[string]any
}

func (d deployment) String() string { return fmt.Sprintf("%s (prefix %s)", d.name, d.prefix) }

// synthDeployment synthesizes d, or returns why the synthesis refused it.
func synthDeployment(t *testing.T, d deployment) (deployment, error) {
	t.Helper()
	context := maps.Clone(broker.context)
	context[ContextStackPrefix] = d.prefix
	context[ContextLegacyStackPrefix] = d.legacy
	maps.Copy(context, d.extra)
	app := awscdk.NewApp(&awscdk.AppProps{Context: &context, Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
	props, err := PropsFromContext(app.Node())
	if err != nil {
		t.Fatal(err)
	}
	stack, err := NewBrokerStack(app, d.name, &props)
	if err != nil {
		return d, err
	}
	check(t, func() { d.template = *assertions.Template_FromStack(stack, nil).ToJSON() })
	if d.template == nil {
		t.FailNow()
	}
	return d, nil
}

// TestDeploymentsCannotReachEachOther is the static check of issue 28's
// finding 2 and 3: of two deployments in one account whose names overlap as
// strings (osb and osb-prod, a broker stack named osb-broker), either the
// synthesis refuses one, or no Allow of either's policies (its functions'
// roles, the service role, the boundary) matches an ARN the other's stacks
// make: its broker stack and table, its service stacks and what
// CloudFormation names after them (buckets, queues, tables, databases, IAM
// users), the master secrets RDS makes for its databases. A deployment's
// patterns must not match its own broker stack either, and must match
// each resource of its own service stacks. IAM's matching is
// mimicked: * and ? in the ARN, case-sensitive; conditions on resource tags
// evaluated, any other condition taken as met.
func TestDeploymentsCannotReachEachOther(t *testing.T) {
	candidates := []deployment{
		{name: "ServerlessOsb", prefix: "osb"},
		{name: "ServerlessOsbProd", prefix: "osbprod"},
		{name: "ServerlessOsbStaging", prefix: "osb-prod"},
		{name: "osb-broker", prefix: "osb"},
		{name: "osbprod", prefix: "osb"},
		// The other settings that add statements: the front door's
		// secret, the sealed-only mode, an operator's policy on the role.
		{name: "ServerlessOsbEdge", prefix: "osbedge", extra: map[string]any{ContextFrontDoor: true, ContextSealedOnly: true,
			ContextDomainName: "broker.example.com", ContextCertificateARN: frontDoorCertificate,
			ContextServiceRolePolicyARNs: "arn:aws:iam::111122223333:policy/broker-extra"}},
		// Legacy: a prefix under the old rule keeps its own segment's
		// patterns: it reaches none of these.
		{name: "TeamA", prefix: "Team-A", legacy: true},
	}
	var accepted []deployment
	for _, c := range candidates {
		d, err := synthDeployment(t, c)
		if err != nil {
			t.Logf("%s is refused: %v", c, err)
			continue
		}
		accepted = append(accepted, d)
	}
	if len(accepted) < 4 {
		t.Fatalf("only %d deployments synthesized; the check needs at least four", len(accepted))
	}
	for _, a := range accepted {
		policies := allowStatements(a.template)
		if len(policies) == 0 {
			t.Fatalf("%s: no Allow statement found", a)
		}
		// The check is only as good as the patterns it finds: each of the
		// deployment's own service resources is reached by some Allow.
		for _, own := range serviceStackARNs(t, a.prefix) {
			if !slices.ContainsFunc(policies, func(s allow) bool { _, ok := s.reaches(own); return ok }) {
				t.Errorf("%s: no Allow reaches its own %s", a, own.arn)
			}
		}
		for _, b := range accepted {
			targets := brokerStackARNs(b)
			if a.name != b.name || a.prefix != b.prefix {
				targets = append(targets, serviceStackARNs(t, b.prefix)...)
			}
			for _, target := range targets {
				for _, s := range policies {
					if action, ok := s.reaches(target); ok {
						t.Errorf("%s: %s %s allows %s on %s of %s", a, s.where, s.sid, action, target.arn, b)
					}
				}
			}
		}
	}
}

// target is an ARN a deployment's stacks would make, with its tags.
type target struct {
	arn  string
	tags map[string]string
}

func targetARN(service, region, resource string) string {
	account := testAccount
	if service == "s3" {
		account = ""
	}
	return "arn:" + testPartition + ":" + service + ":" + region + ":" + account + ":" + resource
}

// generatedName is the name CloudFormation makes up for a resource with no
// name: the stack's name, the logical id and a random suffix (in lower case,
// hyphens collapsed, where the service wants that: S3, RDS).
func generatedName(stack, logicalID string, lower bool) string {
	name := stack + "-" + logicalID + "-" + "Q1W2E3R4T5Y6"
	if lower {
		name = strings.ToLower(regexp.MustCompile(`-+`).ReplaceAllString(name, "-"))
	}
	return name
}

// brokerStackARNs are the broker stack's own: the stack, and each resource
// whose name CloudFormation generates from the stack's name and that a
// service stack could also make (tables, queues, buckets, users).
func brokerStackARNs(d deployment) []target {
	out := []target{{arn: targetARN("cloudformation", testRegion, "stack/"+d.name+"/0b1c2d3e-aaaa-bbbb-cccc-0123456789ab")}}
	for id, r := range d.template["Resources"].(object) {
		r := r.(object)
		props, _ := r["Properties"].(object)
		switch r["Type"] {
		case "AWS::DynamoDB::Table":
			if props["TableName"] == nil {
				out = append(out, target{arn: targetARN("dynamodb", testRegion, "table/"+generatedName(d.name, id, false))})
			}
		case "AWS::SQS::Queue":
			if props["QueueName"] == nil {
				out = append(out, target{arn: targetARN("sqs", testRegion, generatedName(d.name, id, false))})
			}
		case "AWS::S3::Bucket":
			if props["BucketName"] == nil {
				out = append(out, target{arn: targetARN("s3", "", generatedName(d.name, id, true))})
			}
		case "AWS::IAM::User":
			out = append(out, target{arn: targetARN("iam", "", "user/"+generatedName(d.name, id, false))})
		}
	}
	return out
}

// serviceStackARNs are what the service stacks of a deployment on prefix
// make from the bundled templates: an instance's stack and a binding's,
// and for each resource of theirs the ARN CloudFormation's generated name
// gives it (an RDS instance's master secret tagged with its ARN, a security
// group with its stack's name).
func serviceStackARNs(t *testing.T, prefix string) []target {
	t.Helper()
	instance := cloudformation.InstanceStackName(prefix, "9f0e1d2c-instance")
	binding := cloudformation.BindingStackName(prefix, "9f0e1d2c-instance", "binding-7")
	out := []target{
		{arn: targetARN("cloudformation", testRegion, "stack/"+instance+"/0b1c2d3e-aaaa-bbbb-cccc-0123456789ab")},
		{arn: targetARN("cloudformation", testRegion, "stack/"+binding+"/0b1c2d3e-aaaa-bbbb-cccc-0123456789ab")},
	}
	kinds := map[string]bool{}
	for _, r := range bundledResources(t) {
		stack := instance
		if strings.HasSuffix(r.File, "binding.yaml") {
			stack = binding
		}
		kinds[r.Type] = true
		switch r.Type {
		case "AWS::S3::Bucket":
			name := generatedName(stack, r.LogicalID, true)
			out = append(out, target{arn: targetARN("s3", "", name)}, target{arn: targetARN("s3", "", name+"/data.json")})
		case "AWS::SQS::Queue":
			out = append(out, target{arn: targetARN("sqs", testRegion, generatedName(stack, r.LogicalID, false))})
		case "AWS::DynamoDB::Table":
			out = append(out, target{arn: targetARN("dynamodb", testRegion, "table/"+generatedName(stack, r.LogicalID, false))})
		case "AWS::RDS::DBInstance":
			db := targetARN("rds", testRegion, "db:"+generatedName(stack, r.LogicalID, true))
			out = append(out, target{arn: db},
				target{arn: targetARN("rds", testRegion, "snapshot:"+generatedName(stack, r.LogicalID, true)+"-snapshot-abc")},
				target{arn: targetARN("secretsmanager", testRegion, "secret:rds!db-0a1b2c3d-4e5f-6789-abcd-ef0123456789-AbCdEf"),
					tags: map[string]string{"aws:rds:primaryDBInstanceArn": db}})
		case "AWS::RDS::DBCluster":
			cluster := targetARN("rds", testRegion, "cluster:"+generatedName(stack, r.LogicalID, true))
			out = append(out, target{arn: cluster},
				target{arn: targetARN("rds", testRegion, "cluster-snapshot:"+generatedName(stack, r.LogicalID, true)+"-snapshot-abc")},
				target{arn: targetARN("secretsmanager", testRegion, "secret:rds!cluster-0a1b2c3d-4e5f-6789-abcd-ef0123456789-AbCdEf"),
					tags: map[string]string{"aws:rds:primaryDBClusterArn": cluster}})
		case "AWS::SecretsManager::Secret":
			// The binding templates name their secret after the stack.
			out = append(out, target{arn: targetARN("secretsmanager", testRegion, "secret:"+stack+"-db-user-AbCdEf")})
		case "Custom::DatabaseUser":
			out = append(out, target{arn: targetARN("lambda", testRegion, "function:"+deploy.DatabaseUserFunctionName(prefix, "vpc-0123456789abcdef0"))})
		case "AWS::RDS::DBSubnetGroup":
			out = append(out, target{arn: targetARN("rds", testRegion, "subgrp:"+generatedName(stack, r.LogicalID, true))})
		case "AWS::EC2::SecurityGroup":
			out = append(out, target{arn: targetARN("ec2", testRegion, "security-group/sg-0123456789abcdef0"),
				tags: map[string]string{"aws:cloudformation:stack-name": stack}})
		case "AWS::IAM::User":
			out = append(out, target{arn: targetARN("iam", "", "user/serverless-osb/"+generatedName(stack, r.LogicalID, false))})
		case "AWS::SNS::Topic":
			out = append(out, target{arn: targetARN("sns", testRegion, generatedName(stack, r.LogicalID, false))})
		case "AWS::Kinesis::Stream":
			out = append(out, target{arn: targetARN("kinesis", testRegion, "stream/"+generatedName(stack, r.LogicalID, false))})
		case "AWS::OpenSearchService::Domain":
			out = append(out, target{arn: targetARN("es", testRegion, "domain/"+generatedName(stack, r.LogicalID, true))})
		// The Valkey templates name their cache, user group and users
		// after the instance's stack (ElastiCache keeps them in lower
		// case), their secrets after their own stack.
		case "AWS::ElastiCache::ServerlessCache":
			out = append(out, target{arn: targetARN("elasticache", testRegion, "serverlesscache:"+strings.ToLower(instance))},
				target{arn: targetARN("elasticache", testRegion, "serverlesscachesnapshot:"+strings.ToLower(instance)+"-final")})
		case "AWS::ElastiCache::UserGroup":
			out = append(out, target{arn: targetARN("elasticache", testRegion, "usergroup:"+strings.ToLower(instance))})
		case "AWS::ElastiCache::User":
			user := strings.ToLower(instance) + "-default"
			if stack == binding {
				user = strings.ToLower(instance) + "-0123456789ab"
			}
			out = append(out, target{arn: targetARN("elasticache", testRegion, "user:"+user)})
		}
	}
	for _, k := range []string{"AWS::S3::Bucket", "AWS::SQS::Queue", "AWS::DynamoDB::Table", "AWS::RDS::DBInstance", "AWS::IAM::User",
		"AWS::SNS::Topic", "AWS::Kinesis::Stream", "AWS::RDS::DBCluster", "AWS::OpenSearchService::Domain",
		"AWS::ElastiCache::ServerlessCache", "AWS::ElastiCache::User", "AWS::SecretsManager::Secret", "Custom::DatabaseUser"} {
		if !kinds[k] {
			t.Errorf("no bundled template makes a %s: the check would miss it", k)
		}
	}
	return out
}

// allow is one Allow statement of a template's policies, its values
// resolved as they would be in testAccount.
type allow struct {
	where, sid string
	actions    []string
	resources  []string
	// conditions by operator, by key, the values.
	conditions map[string]map[string][]string
}

// allowStatements are the Allow statements of every policy of template:
// the roles' inline policies, the policies attached to them, managed
// policies (the boundary).
func allowStatements(template map[string]any) []allow {
	var out []allow
	add := func(where string, doc any) {
		d, _ := doc.(object)
		list, _ := d["Statement"].([]any)
		for _, s := range list {
			s := s.(object)
			if s["Effect"] != "Allow" {
				continue
			}
			a := allow{where: where, actions: actions(s), conditions: map[string]map[string][]string{}}
			a.sid, _ = s["Sid"].(string)
			for _, r := range asList(s["Resource"]) {
				a.resources = append(a.resources, resolve(r))
			}
			for op, byKey := range mapOf(s["Condition"]) {
				a.conditions[op] = map[string][]string{}
				for k, v := range mapOf(byKey) {
					for _, value := range asList(v) {
						a.conditions[op][k] = append(a.conditions[op][k], resolve(value))
					}
				}
			}
			out = append(out, a)
		}
	}
	for id, r := range template["Resources"].(object) {
		r := r.(object)
		props, _ := r["Properties"].(object)
		switch r["Type"] {
		case "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy":
			add(id, props["PolicyDocument"])
		case "AWS::IAM::Role":
			for _, p := range asList(props["Policies"]) {
				add(id, mapOf(p)["PolicyDocument"])
			}
		}
	}
	return out
}

// exempt are the actions whose Allow on another deployment's ARN gives
// nothing: CreateSecurityGroup makes a new group, whose id EC2 makes up;
// GetRandomPassword names no resource (it returns random characters).
var exempt = []string{"ec2:CreateSecurityGroup", "secretsmanager:GetRandomPassword"}

// creationKeys are condition keys that only a request creating the resource
// carries: a statement on one of them never applies to an existing resource.
var creationKeys = []string{"ec2:CreateAction"}

// reaches says whether s allows an action of the target's service on it,
// and which. A statement on every resource (*) whose actions of that
// service only read metadata (Describe…, List…) is passed over: they support
// no resource-level permissions (servicerole's Describe statement).
func (s allow) reaches(tg target) (string, bool) {
	service := strings.SplitN(tg.arn, ":", 4)[2]
	var relevant []string
	for _, a := range s.actions {
		if (a == "*" || strings.HasPrefix(a, service+":")) && !slices.Contains(exempt, a) {
			relevant = append(relevant, a)
		}
	}
	if len(relevant) == 0 {
		return "", false
	}
	matched := false
	for _, r := range s.resources {
		if r == "*" && !slices.ContainsFunc(relevant, func(a string) bool {
			name := strings.SplitN(a, ":", 2)[len(strings.SplitN(a, ":", 2))-1]
			return !strings.HasPrefix(name, "Describe") && !strings.HasPrefix(name, "List")
		}) {
			continue
		}
		if globMatch(r, tg.arn) {
			matched = true
		}
	}
	if !matched || !s.tagConditionsHold(tg) {
		return "", false
	}
	return strings.Join(relevant, ", "), true
}

// tagConditionsHold evaluates the statement's conditions on the resource's
// tags (aws:ResourceTag/K, SERVICE:ResourceTag/K) and on its creation (it
// exists); any other is taken as met.
func (s allow) tagConditionsHold(tg target) bool {
	for op, byKey := range s.conditions {
		ifExists := strings.HasSuffix(op, "IfExists")
		base := strings.TrimSuffix(op, "IfExists")
		for key, values := range byKey {
			if slices.Contains(creationKeys, key) {
				return false
			}
			_, tagKey, ok := strings.Cut(key, ":ResourceTag/")
			if !ok {
				continue
			}
			v, has := tg.tags[tagKey]
			if !has {
				if !ifExists {
					return false
				}
				continue
			}
			hit := slices.ContainsFunc(values, func(want string) bool {
				switch base {
				case "StringLike":
					return globMatch(want, v)
				case "StringEquals":
					return want == v
				}
				return true
			})
			if !hit {
				return false
			}
		}
	}
	return true
}

// globMatch matches s against pattern as IAM matches ARNs: * any run of
// characters, ? one, case-sensitive.
func globMatch(pattern, s string) bool {
	if pattern == "" {
		return s == ""
	}
	switch pattern[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if globMatch(pattern[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && globMatch(pattern[1:], s[1:])
	}
	return s != "" && s[0] == pattern[0] && globMatch(pattern[1:], s[1:])
}

// resolve is a template value as a string in testAccount: pseudo parameters
// filled in, Fn::Join joined; a reference to one of the stack's own
// resources becomes a marker no ARN of another stack matches.
func resolve(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case object:
		if ref, ok := v["Ref"].(string); ok {
			switch ref {
			case "AWS::Partition":
				return testPartition
			case "AWS::Region":
				return testRegion
			case "AWS::AccountId":
				return testAccount
			case "AWS::URLSuffix":
				return "amazonaws.com"
			}
		}
		if join, ok := v["Fn::Join"].([]any); ok && len(join) == 2 {
			sep, _ := join[0].(string)
			var parts []string
			for _, p := range asList(join[1]) {
				parts = append(parts, resolve(p))
			}
			return strings.Join(parts, sep)
		}
	}
	text, _ := json.Marshal(v)
	return "\x00own:" + string(text)
}

func mapOf(v any) object {
	m, _ := v.(object)
	return m
}

func TestGlobMatchesAsIAM(t *testing.T) {
	for _, tt := range []struct {
		pattern, s string
		want       bool
	}{
		{"arn:aws:s3:::osb-*", "arn:aws:s3:::osb-prod-x", true},
		{"arn:aws:s3:::osb-*", "arn:aws:s3:::osbprod-x", false},
		{"stack/osb-*/*", "stack/osb-i-1/abc", true},
		{"stack/osb-*/*", "stack/osb-broker", false},
		{"db:osb-?", "db:osb-a", true},
		{"db:osb-?", "db:osb-ab", false},
		{"table/Osb-*", "table/osb-x", false},
	} {
		if got := globMatch(tt.pattern, tt.s); got != tt.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
	}
}
