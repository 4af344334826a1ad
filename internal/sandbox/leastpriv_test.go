package sandbox_test

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/serverless-osb/broker/internal/cacheusers"
	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/sandbox"
)

// notExercised are the actions a function's role is granted that no
// sandbox test makes it call, each with the reason it is granted all the
// same. The function is its logical id's prefix (ApiFunction). An action
// the role grants that is neither called nor listed here fails the suite,
// and so does an entry the suite does call, or the role no longer grants:
// the list never outlives its reasons.
var notExercised = []struct{ function, action, reason string }{
	// What AWS does with a function's role, which the sandbox does itself
	// or not at all.
	{"ApiFunction", "logs:CreateLogStream", lambdaLogs},
	{"ApiFunction", "logs:PutLogEvents", lambdaLogs},
	{"WorkerFunction", "logs:CreateLogStream", lambdaLogs},
	{"WorkerFunction", "logs:PutLogEvents", lambdaLogs},
	{"ApiFunction", "xray:PutTraceSegments", lambdaTraces},
	{"ApiFunction", "xray:PutTelemetryRecords", lambdaTraces},
	{"WorkerFunction", "xray:PutTraceSegments", lambdaTraces},
	{"WorkerFunction", "xray:PutTelemetryRecords", lambdaTraces},
	{"ApiFunction", "kms:DescribeKey", tableKey},
	{"ApiFunction", "kms:Encrypt", tableKey},
	{"WorkerFunction", "kms:DescribeKey", tableKey},
	{"WorkerFunction", "kms:Encrypt", tableKey},
	{"WorkerFunction", "iam:PassRole", "IAM checks it when CreateStack, CreateChangeSet or DeleteStack names the service role (RoleARN); moto's CloudFormation does not"},
	{"WorkerFunction", "cloudformation:TagResource", stackTags},
	{"WorkerFunction", "cloudformation:UntagResource", stackTags},
	// Paths the sandbox's tests do not take.
	{"WorkerFunction", "cloudformation:DescribeStackResources", "asked only while a stack is being created, updated or deleted, for the progress's description (a failure is ignored); moto makes, updates and deletes a stack before it answers"},
	{"WorkerFunction", "cloudformation:DescribeStackEvents", "read when a stack has failed (the failed resources' reasons) or is busy (whether this operation's token started the change); the example stacks neither fail nor wait on moto"},
	{"WorkerFunction", "cloudformation:ContinueUpdateRollback", "only for an update whose rollback failed (UPDATE_ROLLBACK_FAILED); moto never fails a stack update, so TestUpdateRollbackFailed (internal/drivers/cloudformation) covers it on a named fake"},
	{"WorkerFunction", "dynamodb:ConditionCheckItem", "only a deprovision of an instance with more bindings than one transaction holds (about 98) checks its operation and instance in batches ahead of the last write; TestDeprovisionOfManyBindings (internal/store/dynamo) covers it on moto, without a role"},
	// The function no test can run (cannotRun): what Lambda does with its
	// role; its own calls are checked against its code instead.
	{"CacheUserFunction", "logs:CreateLogStream", lambdaLogs},
	{"CacheUserFunction", "logs:PutLogEvents", lambdaLogs},
	{"CacheUserFunction", "xray:PutTraceSegments", lambdaTraces},
	{"CacheUserFunction", "xray:PutTelemetryRecords", lambdaTraces},
}

// cannotRun are the functions of the stack that the sandbox starts but no
// test can make it call: the service they work on is one moto lacks. Their
// roles are checked statically, against the AWS calls their code can make:
// the methods of the API interfaces the function's main gives its handler
// (a method is the action of the same name), by the service's IAM prefix.
// Every action the role grants must be one of those or listed in
// notExercised, and every one of those must be granted.
var cannotRun = map[string]struct {
	reason string
	apis   map[string]reflect.Type
}{
	// functions/cacheuser: cacheusers.Membership{Groups, Secrets}.
	"CacheUserFunction": {
		reason: "the Custom::CacheUserGroupMember of the ElastiCache for Valkey plans' binding stacks, which moto 5.2.1 cannot make (it has no ElastiCache): the sandbox refuses those plans with 422, so CloudFormation never calls the function here; internal/cacheusers tests its calls on a named fake of ElastiCache and a real redis-server",
		apis: map[string]reflect.Type{
			"elasticache":    reflect.TypeFor[cacheusers.UserGroupsAPI](),
			"secretsmanager": reflect.TypeFor[cacheusers.SecretsAPI](),
		},
	},
}

// staticCalls are the actions each function of cannotRun can call (its
// API interfaces' methods), lower case, by function.
func staticCalls() map[string]map[string]bool {
	calls := map[string]map[string]bool{}
	for function, c := range cannotRun {
		calls[function] = map[string]bool{}
		for service, api := range c.apis {
			for m := range api.Methods() {
				calls[function][strings.ToLower(service+":"+m.Name)] = true
			}
		}
	}
	return calls
}

const (
	lambdaLogs   = "Lambda writes the function's log to its log group with the function's role; the sandbox writes it to a file (LOGICALID.log)"
	lambdaTraces = "Lambda sends the function's traces (Tracing: Active) with the function's role; the sandbox does not trace"
	tableKey     = "DynamoDB uses the table's key with the caller's permissions (kms:ViaService); moto's DynamoDB does not call KMS"
	stackTags    = "CloudFormation authorizes the Tags of CreateStack and CreateChangeSet as TagResource (and the tags an update drops as UntagResource); moto does not check them"
)

// exercised gathers what moto allowed each function during the suite, from
// every sandbox the tests start, before it is closed.
var exercised = &allowedActions{byFunction: map[string]map[string]bool{}}

type allowedActions struct {
	mu         sync.Mutex
	byFunction map[string]map[string]bool
}

// add records what sb's functions were allowed so far; tests call it
// before they close a sandbox of their own.
func (a *allowedActions) add(ctx context.Context, sb *sandbox.Sandbox) error {
	allowed, err := sb.Allowed(ctx)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for function, actions := range allowed {
		key := functionPrefix(function)
		if a.byFunction[key] == nil {
			a.byFunction[key] = map[string]bool{}
		}
		for _, action := range actions {
			a.byFunction[key][strings.ToLower(action)] = true
		}
	}
	return nil
}

// functionPrefix is a logical id without the hash CDK appends
// (ApiFunctionCE271BD4: ApiFunction), the same in every copy of the
// template the tests run.
func functionPrefix(logicalID string) string {
	if len(logicalID) > 8 {
		return logicalID[:len(logicalID)-8]
	}
	return logicalID
}

// wholeSuite says whether every test of the package ran: only then is an
// action nobody called a grant nobody uses.
func wholeSuite() bool {
	for _, name := range []string{"test.run", "test.skip", "test.list"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false
		}
	}
	return true
}

// declaredBy are the drivers whose declarations (the manifest the build
// wrote, deploy.json, which the stack grants) name each action, by
// function (its logical id's prefix) and action, lower case.
func declaredBy(m deploy.Manifest) map[[2]string]string {
	functions := map[deploy.Function]string{deploy.API: "ApiFunction", deploy.Worker: "WorkerFunction"}
	by := map[[2]string]string{}
	for _, d := range m.Drivers {
		for _, s := range d.Needs.Statements {
			for _, a := range s.Actions {
				by[[2]string{functions[s.Function], strings.ToLower(a)}] = d.Name
			}
		}
	}
	return by
}

// checkLeastPrivilege compares what each function's role grants with what
// the functions were allowed to call, and returns a problem per action
// granted but neither called nor listed in notExercised (a wildcard is
// never proven used), naming where the grant comes from (a driver's
// declaration, or infra), per entry of notExercised that is called or no
// longer granted, and per action a driver declares that the role does not
// grant. A function of static (one that cannot run here: cannotRun) is
// judged by the actions its code can call instead of those it called,
// and each of them its role does not grant is a problem too.
func checkLeastPrivilege(granted map[string][]string, called map[string]map[string]bool, listed []struct{ function, action, reason string }, declared map[[2]string]string, static map[string]map[string]bool) []string {
	var problems []string
	source := func(key [2]string) string {
		if d, ok := declared[key]; ok {
			return "the " + d + " driver's declaration (its Kind's Needs, internal/drivers)"
		}
		return "infra/permissions.go"
	}
	isListed := map[[2]string]bool{}
	for _, l := range listed {
		isListed[[2]string{l.function, strings.ToLower(l.action)}] = true
	}
	grants := map[[2]string]bool{}
	for _, id := range slices.Sorted(maps.Keys(granted)) {
		function := functionPrefix(id)
		for _, action := range granted[id] {
			key := [2]string{function, strings.ToLower(action)}
			grants[key] = true
			calls, isStatic := static[function]
			switch {
			case isListed[key]:
			case strings.ContainsAny(action, "*?"):
				problems = append(problems, fmt.Sprintf("%s's role grants %s, a wildcard: no test can show that every action it matches is needed; grant the actions the function calls (%s)", function, action, source(key)))
			case isStatic && !calls[key[1]]:
				problems = append(problems, fmt.Sprintf("%s's role grants %s, which its code cannot call (the methods of its API interfaces, cannotRun): remove the grant (%s)", function, action, source(key)))
			case isStatic:
			case !called[function][key[1]]:
				problems = append(problems, fmt.Sprintf("%s's role grants %s, which no sandbox test makes it call: remove the grant (%s), or list it with the reason in notExercised (internal/sandbox/leastpriv_test.go)", function, action, source(key)))
			}
		}
	}
	for _, key := range slices.SortedFunc(maps.Keys(declared), func(a, b [2]string) int { return strings.Compare(a[0]+a[1], b[0]+b[1]) }) {
		if !grants[key] {
			problems = append(problems, fmt.Sprintf("the %s driver declares that %s needs %s, which its role does not grant (infra/drivers.go)", declared[key], key[0], key[1]))
		}
	}
	for _, function := range slices.Sorted(maps.Keys(static)) {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(granted)), func(id string) bool { return functionPrefix(id) == function }) {
			continue
		}
		for _, action := range slices.Sorted(maps.Keys(static[function])) {
			if !grants[[2]string{function, action}] {
				problems = append(problems, fmt.Sprintf("%s's code can call %s (its API interfaces, cannotRun), which its role does not grant: grant it (infra)", function, action))
			}
		}
	}
	for _, l := range listed {
		key := [2]string{l.function, strings.ToLower(l.action)}
		switch {
		case !grants[key]:
			problems = append(problems, fmt.Sprintf("notExercised lists %s for %s, whose role no longer grants it: take it off the list", l.action, l.function))
		case called[l.function][key[1]]:
			problems = append(problems, fmt.Sprintf("notExercised lists %s for %s (%s), but the sandbox tests make %s call it: take it off the list", l.action, l.function, l.reason, l.function))
		}
	}
	return problems
}

// leastPrivilege checks, once every test has run, that each function's
// role grants no action the functions do not call, but those listed.
func leastPrivilege(ctx context.Context, sb *sandbox.Sandbox) []string {
	if err := exercised.add(ctx, sb); err != nil {
		return []string{err.Error()}
	}
	granted, err := sb.Granted()
	if err != nil {
		return []string{err.Error()}
	}
	exercised.mu.Lock()
	defer exercised.mu.Unlock()
	return checkLeastPrivilege(granted, exercised.byFunction, notExercised, declaredBy(manifest), staticCalls())
}

func TestTheLeastPrivilegeCheck(t *testing.T) {
	granted := map[string][]string{
		"ApiFunctionCE271BD4":    {"dynamodb:GetItem", "logs:PutLogEvents", "states:StopExecution"},
		"WorkerFunction5E6D2C4A": {"dynamodb:GetItem", "kms:*"},
		// A function the sandbox cannot run, judged by its code.
		"CacheUserFunctionE3D3FBD2": {"elasticache:DeleteUser", "elasticache:ModifyUserGroup", "logs:PutLogEvents"},
	}
	called := map[string]map[string]bool{
		"ApiFunction":    {"dynamodb:getitem": true},
		"WorkerFunction": {"dynamodb:getitem": true, "kms:decrypt": true},
	}
	listed := []struct{ function, action, reason string }{
		{"ApiFunction", "logs:PutLogEvents", "Lambda writes the function's log"},
		{"ApiFunction", "dynamodb:GetItem", "a reason gone stale"},
		{"WorkerFunction", "sqs:SendMessage", "a grant since removed"},
		{"CacheUserFunction", "logs:PutLogEvents", "Lambda writes the function's log"},
	}
	declared := map[[2]string]string{
		{"ApiFunction", "states:stopexecution"}: "workflow",
		{"WorkerFunction", "sqs:sendmessage"}:   "queue",
	}
	static := map[string]map[string]bool{
		"CacheUserFunction": {"elasticache:modifyusergroup": true, "elasticache:describeusergroups": true},
		// Not in the template: nothing to check.
		"OtherFunction": {"es:describedomain": true},
	}
	problems := checkLeastPrivilege(granted, called, listed, declared, static)
	for _, want := range []string{
		"ApiFunction's role grants states:StopExecution, which no sandbox test makes it call: remove the grant (the workflow driver's declaration",
		"WorkerFunction's role grants kms:*, a wildcard: no test can show that every action it matches is needed; grant the actions the function calls (infra/permissions.go)",
		"the queue driver declares that WorkerFunction needs sqs:sendmessage, which its role does not grant",
		"notExercised lists dynamodb:GetItem for ApiFunction (a reason gone stale), but the sandbox tests make ApiFunction call it",
		"notExercised lists sqs:SendMessage for WorkerFunction, whose role no longer grants it",
		"CacheUserFunction's role grants elasticache:DeleteUser, which its code cannot call (the methods of its API interfaces, cannotRun): remove the grant",
		"CacheUserFunction's code can call elasticache:describeusergroups (its API interfaces, cannotRun), which its role does not grant",
	} {
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, want) }) {
			t.Errorf("no problem says %q; got:\n%s", want, strings.Join(problems, "\n"))
		}
	}
	if len(problems) != 7 {
		t.Errorf("%d problems, want 7:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}

// TestLeastPrivilegeOfTheFunctionsTheSandboxCannotRun: the suite's catalog
// has the ElastiCache for Valkey plans, whose binding template declares
// Custom::CacheUserGroupMember, so the stack the sandbox runs has the
// cacheuser function; no test can make it call anything (cannotRun), and
// its role grants exactly what its code can call and what Lambda does with
// it (notExercised). It needs no whole suite, unlike the check of the
// functions that run.
func TestLeastPrivilegeOfTheFunctionsTheSandboxCannotRun(t *testing.T) {
	if !manifest.CustomResource(deploy.CacheUserGroupMember) {
		t.Fatalf("the suite's catalog declares no %s: it has lost the Valkey plans", deploy.CacheUserGroupMember)
	}
	granted, err := shared.Granted()
	if err != nil {
		t.Fatal(err)
	}
	theirs := map[string][]string{}
	for id, actions := range granted {
		if _, ok := cannotRun[functionPrefix(id)]; ok {
			theirs[id] = actions
		}
	}
	for _, function := range slices.Sorted(maps.Keys(cannotRun)) {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(theirs)), func(id string) bool { return functionPrefix(id) == function }) {
			t.Errorf("the stack the sandbox runs has no %s, whose role the check must cover (%s)", function, cannotRun[function].reason)
		}
	}
	var listed []struct{ function, action, reason string }
	for _, l := range notExercised {
		if _, ok := cannotRun[l.function]; ok {
			listed = append(listed, l)
		}
	}
	for _, p := range checkLeastPrivilege(theirs, nil, listed, nil, staticCalls()) {
		t.Error(p)
	}
}
