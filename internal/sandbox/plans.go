package sandbox

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	cfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/serverless-osb/broker/internal/catalog"
	cfndriver "github.com/serverless-osb/broker/internal/drivers/cloudformation"
)

// UnrunnablePlan is a plan of the catalog the functions serve whose stack
// moto cannot make, found at start by trying it (checkPlans).
type UnrunnablePlan struct {
	Service, Plan, PlanID string
	// Reason says why, in moto's words.
	Reason string
}

func (p UnrunnablePlan) String() string {
	return fmt.Sprintf("plan %s of %s (%s): %s", p.Plan, p.Service, p.PlanID, p.Reason)
}

// checkPlans tries, before IAM is enforced, each CloudFormation plan's
// instance template on moto as the worker would send it (the body and the
// plan's fixed parameters, the template's defaults for the rest), and
// deletes what it made. A plan whose stack moto refuses or fails is listed
// in Unrunnable, and the front refuses its provisions and updates at once
// (refuseUnrunnable): on moto such a plan would only fail later, or, as the
// FIFO queue did before the fixes' tenth, leave moto broken for everyone.
// A plan whose template needs a value only a user gives is not tried.
func (sb *Sandbox) checkPlans(ctx context.Context) error {
	cat, err := catalog.Load(sb.Catalog())
	if err != nil {
		return fmt.Errorf("the functions' catalog: %w", err)
	}
	client := cfn.NewFromConfig(sb.awsConfig(sb.clients.iam.Options().Credentials))
	n := 0
	var unrunnable []UnrunnablePlan
	defer func() { sb.unrunnable.Store(&unrunnable) }()
	for _, svc := range cat.Services() {
		for _, plan := range svc.Plans {
			if plan.Settings.Driver != "cloudformation" {
				continue
			}
			settings, err := cfndriver.Configure(plan, plan.Settings.Config, cat.Dir)
			if err != nil {
				return fmt.Errorf("plan %s of %s: %w", plan.Name, svc.Name, err)
			}
			if needsUser(settings) {
				sb.logf("plan %s of %s: not tried on moto (its template needs a value a user gives)", plan.Name, svc.Name)
				continue
			}
			n++
			reason, err := tryTemplate(ctx, client, fmt.Sprintf("sandbox-plan-check-%d", n), settings)
			if err != nil {
				return fmt.Errorf("try plan %s of %s on moto: %w", plan.Name, svc.Name, err)
			}
			if reason != "" {
				p := UnrunnablePlan{Service: svc.Name, Plan: plan.Name, PlanID: plan.ID, Reason: reason}
				unrunnable = append(unrunnable, p)
				sb.logf("cannot run %s", p)
			}
		}
	}
	return nil
}

// needsUser says whether the instance template declares a parameter that
// has no default and that the plan does not fix.
// Unrunnable lists the plans of the catalog the functions serve whose
// stacks moto cannot make, and why (checkPlans); the front refuses their
// provisions at once.
func (sb *Sandbox) Unrunnable() []UnrunnablePlan {
	if p := sb.unrunnable.Load(); p != nil {
		return *p
	}
	return nil
}

func needsUser(s *cfndriver.Settings) bool {
	for name, p := range s.Template.Parameters {
		if _, fixed := s.Parameters[name]; !fixed && !p.HasDefault && name != cfndriver.BoundaryParameter {
			return true
		}
	}
	return false
}

// tryTemplate makes the stack name of the plan's instance template and
// deletes it: the reason moto cannot make it, or "" when it could. err is
// for moto failing otherwise.
func tryTemplate(ctx context.Context, client *cfn.Client, name string, s *cfndriver.Settings) (string, error) {
	in := &cfn.CreateStackInput{StackName: &name, TemplateBody: &s.Template.Body,
		Capabilities: []cfntypes.Capability{cfntypes.CapabilityCapabilityIam, cfntypes.CapabilityCapabilityNamedIam}}
	for _, k := range slices.Sorted(maps.Keys(s.Parameters)) {
		in.Parameters = append(in.Parameters, cfntypes.Parameter{ParameterKey: aws.String(k), ParameterValue: aws.String(s.Parameters[k])})
	}
	// moto answers a template with a resource type it lacks with a 500,
	// at once and every time: the SDK's backoff between its attempts
	// made each such plan about 4.5 s of every sandbox's start (about 30
	// s for the deployed catalog's). The attempts stay, without the wait.
	out, err := createStackOwn(ctx, client, in, func(o *cfn.Options) { o.Retryer = retry.AddWithMaxBackoffDelay(o.Retryer, 0) })
	if err != nil {
		var ae smithy.APIError
		var re *smithyhttp.ResponseError
		switch {
		case errors.As(err, &ae) && ae.ErrorCode() != "InternalFailure":
			return "moto refuses its instance template: " + ae.ErrorMessage(), nil
		case errors.As(err, &re) && re.HTTPStatusCode() == http.StatusInternalServerError:
			// moto's CloudFormation fails so on a resource type or an
			// attribute it does not have (ElastiCache, OpenSearch, Aurora
			// clusters), and makes nothing.
			return "moto's CloudFormation fails on its instance template (HTTP 500: a resource type or attribute it does not have: " +
				strings.Join(templateTypes(s), ", ") + ")", nil
		}
		return "", err
	}
	var stack cfntypes.Stack
	for { // moto makes a stack within CreateStack: this answers at once
		d, err := client.DescribeStacks(ctx, &cfn.DescribeStacksInput{StackName: out.StackId})
		if err != nil {
			return "", err
		}
		if len(d.Stacks) != 1 {
			return "", fmt.Errorf("stack %s: DescribeStacks answered %d stacks", name, len(d.Stacks))
		}
		if stack = d.Stacks[0]; !strings.HasSuffix(string(stack.StackStatus), "_IN_PROGRESS") {
			break
		}
		if err := ctx.Err(); err != nil {
			return "", err
		}
	}
	reason := ""
	if stack.StackStatus != cfntypes.StackStatusCreateComplete {
		reason = fmt.Sprintf("moto cannot make its instance stack (%s)", stack.StackStatus)
		if e, err := client.DescribeStackEvents(ctx, &cfn.DescribeStackEventsInput{StackName: out.StackId}); err == nil {
			for _, ev := range e.StackEvents {
				if ev.ResourceStatus == cfntypes.ResourceStatusCreateFailed && aws.ToString(ev.ResourceStatusReason) != "" {
					reason = fmt.Sprintf("moto cannot make its instance stack's %s (%s): %s", aws.ToString(ev.LogicalResourceId),
						aws.ToString(ev.ResourceType), aws.ToString(ev.ResourceStatusReason))
				}
			}
		}
	}
	if _, err := client.DeleteStack(ctx, &cfn.DeleteStackInput{StackName: out.StackId}); err != nil {
		return "", fmt.Errorf("delete the stack %s: %w", name, err)
	}
	return reason, nil
}

// instancePath is an instance's route: /v2/service_instances/ID, and
// nothing under it.
var instancePath = regexp.MustCompile(`^/v2/service_instances/[^/]+$`)

// refuseUnrunnable answers, in place of the broker, a provision of a plan
// in Unrunnable or an update to one: 422 with a description naming the
// plan and moto's reason, at once, with nothing made. Only a request the
// broker would take so far (its credentials, an API version) is answered
// here; any other goes on to the broker, which refuses it as it does.
func (sb *Sandbox) refuseUnrunnable(w http.ResponseWriter, r *http.Request, path string, body []byte) bool {
	unrunnable := sb.Unrunnable()
	if len(unrunnable) == 0 || (r.Method != http.MethodPut && r.Method != http.MethodPatch) || !instancePath.MatchString(path) ||
		r.Header.Get("X-Broker-API-Version") == "" {
		return false
	}
	user, password, ok := r.BasicAuth()
	if !ok || subtle.ConstantTimeCompare([]byte(user), []byte(sb.Username))&subtle.ConstantTimeCompare([]byte(password), []byte(sb.Password)) != 1 {
		return false
	}
	var req struct {
		PlanID string `json:"plan_id"`
	}
	if json.NewDecoder(bytes.NewReader(body)).Decode(&req) != nil || req.PlanID == "" {
		return false
	}
	i := slices.IndexFunc(unrunnable, func(p UnrunnablePlan) bool { return p.PlanID == req.PlanID })
	if i < 0 {
		return false
	}
	p := unrunnable[i]
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnprocessableEntity)
	_ = json.NewEncoder(w).Encode(map[string]string{"description": fmt.Sprintf(
		"The plan %s of %s cannot run in this sandbox: %s. Nothing was made. The sandbox runs on moto, which plays AWS here; "+
			"the plan runs on AWS. Choose another plan to try here.", p.Plan, p.Service, strings.TrimSuffix(p.Reason, "."))})
	return true
}

// templateTypes lists, sorted, the resource types of the plan's instance
// template.
func templateTypes(s *cfndriver.Settings) []string {
	var types []string
	for _, r := range s.Template.Declared {
		if !slices.Contains(types, r.Type) {
			types = append(types, r.Type)
		}
	}
	slices.Sort(types)
	return types
}
