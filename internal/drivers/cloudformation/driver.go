// Package cloudformation is the driver that makes each service instance one
// CloudFormation stack, from a template the platform team names in the
// plan's settings, and each binding, when the plan has a binding template,
// a second stack made from the instance stack's outputs. The templates'
// contract is services/README.md.
//
// The driver keeps one resource record per stack: "stack" for the
// instance's, "binding-<binding id>" for a binding's. A record is written
// before the stack is asked for, so a crash at any point leaves a record
// that names the stack, and a failed provision or bind leaves it for the
// cleanup workflow (Leftovers, Cleanup).
package cloudformation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	cfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/env"
)

// API is the part of CloudFormation the driver calls.
type API interface {
	CreateStack(ctx context.Context, in *cfn.CreateStackInput, optFns ...func(*cfn.Options)) (*cfn.CreateStackOutput, error)
	DeleteStack(ctx context.Context, in *cfn.DeleteStackInput, optFns ...func(*cfn.Options)) (*cfn.DeleteStackOutput, error)
	DescribeStacks(ctx context.Context, in *cfn.DescribeStacksInput, optFns ...func(*cfn.Options)) (*cfn.DescribeStacksOutput, error)
	DescribeStackResources(ctx context.Context, in *cfn.DescribeStackResourcesInput, optFns ...func(*cfn.Options)) (*cfn.DescribeStackResourcesOutput, error)
	DescribeStackEvents(ctx context.Context, in *cfn.DescribeStackEventsInput, optFns ...func(*cfn.Options)) (*cfn.DescribeStackEventsOutput, error)
	// Updates go through change sets (changeset.go).
	CreateChangeSet(ctx context.Context, in *cfn.CreateChangeSetInput, optFns ...func(*cfn.Options)) (*cfn.CreateChangeSetOutput, error)
	DescribeChangeSet(ctx context.Context, in *cfn.DescribeChangeSetInput, optFns ...func(*cfn.Options)) (*cfn.DescribeChangeSetOutput, error)
	ExecuteChangeSet(ctx context.Context, in *cfn.ExecuteChangeSetInput, optFns ...func(*cfn.Options)) (*cfn.ExecuteChangeSetOutput, error)
	DeleteChangeSet(ctx context.Context, in *cfn.DeleteChangeSetInput, optFns ...func(*cfn.Options)) (*cfn.DeleteChangeSetOutput, error)
	SetStackPolicy(ctx context.Context, in *cfn.SetStackPolicyInput, optFns ...func(*cfn.Options)) (*cfn.SetStackPolicyOutput, error)
	GetTemplate(ctx context.Context, in *cfn.GetTemplateInput, optFns ...func(*cfn.Options)) (*cfn.GetTemplateOutput, error)
	ContinueUpdateRollback(ctx context.Context, in *cfn.ContinueUpdateRollbackInput, optFns ...func(*cfn.Options)) (*cfn.ContinueUpdateRollbackOutput, error)
}

var _ API = (*cfn.Client)(nil)

// Deployment is the driver's settings for the whole broker, read from the
// environment (DeploymentFromEnv): env.CFNRoleARN, the CloudFormation
// service role every stack is created, updated and deleted under (empty:
// none, the caller's own permissions, as locally), and env.StackPrefix,
// which starts every stack name (default deploy.DefaultStackPrefix; the worker's
// IAM policy allows it only stacks named "<prefix>-*"), and
// env.PermissionsBoundaryARN, the boundary the driver hands every template
// that declares BoundaryParameter (empty: none, as locally, and the
// parameter keeps its default).
type Deployment struct {
	RoleARN     string
	StackPrefix string
	BoundaryARN string
}

var (
	roleARNPattern   = lazyPattern(`^arn:aws[a-z-]*:iam::[0-9]{12}:role/\S+$`)
	policyARNPattern = lazyPattern(`^arn:aws[a-z-]*:iam::[0-9]{12}:policy/\S+$`)
)

// DeploymentFromEnv reads and checks the deployment settings.
func DeploymentFromEnv(getenv func(string) string) (Deployment, error) {
	d := Deployment{RoleARN: getenv(env.CFNRoleARN), StackPrefix: getenv(env.StackPrefix),
		BoundaryARN: getenv(env.PermissionsBoundaryARN)}
	if d.StackPrefix == "" {
		d.StackPrefix = deploy.DefaultStackPrefix
	}
	if err := deploy.CheckStackPrefix(d.StackPrefix); err != nil {
		return d, fmt.Errorf("%s: %w", env.StackPrefix, err)
	}
	if d.RoleARN != "" && !roleARNPattern().MatchString(d.RoleARN) {
		return d, fmt.Errorf("%s: %q is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)", env.CFNRoleARN, d.RoleARN)
	}
	if d.BoundaryARN != "" && !policyARNPattern().MatchString(d.BoundaryARN) {
		return d, fmt.Errorf("%s: %q is not a managed policy ARN of the account (arn:aws:iam::<account>:policy/<name>)",
			env.PermissionsBoundaryARN, d.BoundaryARN)
	}
	return d, nil
}

// Driver is the CloudFormation driver.
type Driver struct {
	// API reaches the broker's own account and Region; Clients, when set,
	// the other places the catalog names (clients.go), with the Roles
	// they are reached through (Getenv reads their external ids).
	API        API
	Resources  broker.Resources
	Deployment Deployment
	// Templates hands CloudFormation the templates over MaxTemplateBody
	// through S3; nil, such a template fails its operation.
	Templates *Templates
	Logger    *slog.Logger
	Now       func() time.Time
	Clients   *Clients
	Roles     Roles
	Getenv    func(string) string
}

var _ broker.Driver = (*Driver)(nil)

// New returns a driver that calls api and keeps its records in resources.
func New(api API, resources broker.Resources, dep Deployment, logger *slog.Logger) *Driver {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Driver{API: api, Resources: resources, Deployment: dep, Logger: logger,
		Now: func() time.Time { return time.Now().UTC() }}
}

// maxDeleteTries is how many times a deprovision, unbind or cleanup asks
// CloudFormation to delete a stack whose deletion fails before it reports
// the resources that would not go.
const maxDeleteTries = 3

// cleanupRetryAfter is the time between checks of a detached stack's deletion.
const cleanupRetryAfter = 30 * time.Second

// Record names: the instance's stack, and each binding's (broker.BindingRecord).
const instanceRecord = "stack"

var bindingRecord = broker.BindingRecord

// record is the resource record of one stack.
type record struct {
	StackName string `json:"stack_name"`
	// StackID is known once CloudFormation has accepted the stack; the
	// driver then addresses the stack by it, which also finds it deleted.
	StackID string `json:"stack_id,omitempty"`
	// CreatedBy is the operation that created the stack, which the stack
	// carries as its TagOperationID tag.
	CreatedBy string `json:"created_by"`
	// Op is the operation whose change the stack is undergoing or last
	// underwent; Token is the ClientRequestToken of its latest call.
	Op    string               `json:"op"`
	Kind  broker.OperationKind `json:"kind"`
	Token string               `json:"token,omitempty"`
	// Started: CloudFormation accepted the call that starts Op's change.
	Started bool `json:"started,omitempty"`
	// Complete: Op's create or update completed; Outputs are as it left them.
	Complete bool `json:"complete,omitempty"`
	// Created: the stack's creation completed, so its Outputs may be handed
	// to bindings (a failed update later leaves them as they were).
	Created bool `json:"created,omitempty"`
	// ChangeSet is the change set of Op's update (its id, or its name
	// when a retried call found it made), until it is executed or deleted.
	ChangeSet string `json:"change_set,omitempty"`
	// DeleteTries counts Op's DeleteStack calls.
	DeleteTries int `json:"delete_tries,omitempty"`
	// Continued: Op, an update, continued its failed rollback (rollback.go).
	Continued *continued `json:"continued,omitempty"`
	// Outputs are an instance stack's outputs, which its bindings take. A
	// binding stack's outputs are credentials and are not kept here: the
	// binding is where the broker keeps credentials.
	Outputs map[string]string `json:"outputs,omitempty"`
	// Place is where the stack is (clients.go); nil for the records of
	// stacks made before the broker placed them: the broker's own.
	Place *Place `json:"place,omitempty"`
}

// Leftovers names the record of the stack a failed provision or bind
// leaves. A failed update leaves the stack rolled back, still the
// instance's; a deprovision or unbind leaves its stack attached.
func (d *Driver) Leftovers(_ context.Context, c broker.Change) ([]string, error) {
	return c.MadeRecords(instanceRecord), nil
}

// Begin starts a change.
func (d *Driver) Begin(ctx context.Context, c broker.Change) (broker.Progress, error) {
	return d.advance(ctx, c, true)
}

// Check reports how a change is going; once done, its results.
func (d *Driver) Check(ctx context.Context, c broker.Change) (broker.Progress, error) {
	return d.advance(ctx, c, false)
}

// advance moves a change on: every step checks the record first, so Begin
// and Check may each run again after a crash or a lost answer.
func (d *Driver) advance(ctx context.Context, c broker.Change, begin bool) (broker.Progress, error) {
	switch c.Operation.Kind {
	case broker.KindDeprovision:
		// The instance's stack and any binding stack a platform left: a
		// deprovision leaves nothing behind.
		names := make([]string, 0, len(c.Records))
		for _, r := range c.Records {
			names = append(names, r.Name)
		}
		return d.deleteStacks(ctx, c, names)
	case broker.KindUnbind:
		return d.deleteStacks(ctx, c, []string{bindingRecord(c.BindingID())})
	}
	s, err := settingsOf(c)
	if err != nil {
		return broker.Progress{}, err
	}
	switch c.Operation.Kind {
	case broker.KindProvision:
		return d.create(ctx, c, s, instanceRecord, begin)
	case broker.KindUpdate:
		return d.update(ctx, c, s)
	case broker.KindBind:
		if s.BindingTemplate == nil {
			return d.sharedCredentials(ctx, c, s)
		}
		return d.create(ctx, c, s, bindingRecord(c.BindingID()), begin)
	}
	return broker.Progress{}, &broker.Failure{Description: fmt.Sprintf("The CloudFormation driver cannot %s.", c.Operation.Kind)}
}

func settingsOf(c broker.Change) (*Settings, error) {
	s, ok := c.Settings.(*Settings)
	if !ok || s == nil {
		return nil, &broker.Failure{Description: "The plan has no CloudFormation settings; the broker's catalog is misconfigured."}
	}
	return s, nil
}

func retryAfter(c broker.Change) time.Duration {
	if s, ok := c.Settings.(*Settings); ok && s != nil && s.RetryAfter > 0 {
		return s.RetryAfter
	}
	return DefaultRetryAfter
}

// create makes an instance's or a binding's stack (record name) and
// reports on it.
func (d *Driver) create(ctx context.Context, c broker.Change, s *Settings, name string, begin bool) (broker.Progress, error) {
	binding := name != instanceRecord
	t, stackName := s.Template, InstanceStackName(d.Deployment.StackPrefix, c.Instance.ID)
	if binding {
		t, stackName = s.BindingTemplate, BindingStackName(d.Deployment.StackPrefix, c.Instance.ID, c.BindingID())
	}
	rec, found, err := d.get(c, name)
	if err != nil {
		return broker.Progress{}, err
	}
	switch {
	case found && rec.Op != c.Operation.ID:
		return broker.Progress{}, &broker.Failure{Description: fmt.Sprintf(
			"The stack %s is on record for another operation, so this %s cannot create it.", rec.StackName, c.Operation.Kind)}
	case !found && !begin:
		return broker.Progress{}, &broker.Failure{Description: fmt.Sprintf(
			"The record of the stack %s is gone (it was detached for cleanup), so the %s cannot complete.", stackName, c.Operation.Kind)}
	case !found:
		place, err := d.placeFor(ctx, c, s, binding)
		if err != nil {
			return broker.Progress{}, err
		}
		// The place is reachable before anything is on record: a role
		// that is refused leaves nothing to clean up.
		if _, err := d.at(ctx, place); err != nil {
			return broker.Progress{}, err
		}
		// The record comes first: whatever happens next, it names the stack.
		rec = record{StackName: stackName, CreatedBy: c.Operation.ID, Op: c.Operation.ID, Kind: c.Operation.Kind,
			Token: token("create", c.Operation.ID), Place: place}
		if err := d.put(ctx, c.Instance.ID, name, rec); err != nil {
			return broker.Progress{}, err
		}
	}
	if d, err = d.at(ctx, rec.Place); err != nil {
		return broker.Progress{}, err
	}

	if !rec.Started {
		if err := d.startCreate(ctx, c, s, t, name, &rec); err != nil {
			return broker.Progress{}, err
		}
		if begin {
			return broker.Progress{RetryAfter: retryAfter(c),
				Description: creatingText(0, t.Resources)}, nil
		}
	}
	if rec.Complete && !binding {
		return broker.Progress{Done: true, DashboardURL: rec.Outputs[DashboardOutput]}, nil
	}

	stack, err := d.describeExisting(ctx, rec)
	if err != nil {
		return broker.Progress{}, err
	}
	switch status := stack.StackStatus; status {
	case types.StackStatusCreateComplete, types.StackStatusUpdateComplete:
		out := outputs(stack)
		if binding {
			inst, _, err := d.get(c, instanceRecord)
			if err != nil {
				return broker.Progress{}, err
			}
			return broker.Progress{Done: true, Credentials: credentials(inst.Outputs, out, s.Template.PrivateOutputs)}, nil
		}
		rec.Outputs, rec.Complete, rec.Created, rec.StackID = out, true, true, aws.ToString(stack.StackId)
		if err := d.put(ctx, c.Instance.ID, name, rec); err != nil {
			return broker.Progress{}, err
		}
		return broker.Progress{Done: true, DashboardURL: out[DashboardOutput]}, nil
	case types.StackStatusCreateInProgress:
		return d.creating(ctx, c, stack, t)
	case types.StackStatusCreateFailed, types.StackStatusRollbackInProgress,
		types.StackStatusRollbackComplete, types.StackStatusRollbackFailed:
		return broker.Progress{}, d.failure(ctx, c, stack, "")
	default:
		if inProgress(status) {
			return broker.Progress{RetryAfter: retryAfter(c), Description: "Creating the stack."}, nil
		}
		return broker.Progress{}, &broker.Failure{Description: fmt.Sprintf(
			"The stack %s is %s, not created: it was changed outside the broker.", rec.StackName, status)}
	}
}

// startCreate asks CloudFormation for the stack, once.
func (d *Driver) startCreate(ctx context.Context, c broker.Change, s *Settings, t *Template, name string, rec *record) error {
	body, url, err := d.templateSource(ctx, t)
	if err != nil {
		return err
	}
	in := &cfn.CreateStackInput{
		StackName:          aws.String(rec.StackName),
		TemplateBody:       body,
		TemplateURL:        url,
		Capabilities:       capabilities,
		ClientRequestToken: aws.String(rec.Token),
		// Every stack the broker makes denies replacing or deleting what
		// holds data, to the broker's updates and to anyone else's.
		StackPolicyBody: aws.String(stackPolicy(t, nil)),
	}
	if d.Deployment.RoleARN != "" {
		in.RoleARN = aws.String(d.Deployment.RoleARN)
	}
	if name == instanceRecord {
		in.StackPolicyBody = aws.String(stackPolicy(t, s.AllowReplacement))
		given, err := requestParameters(s.Placement.templateParameters(c.Instance.Parameters), t, s.Accepted[catalog.InstanceCreate])
		if err != nil {
			return err
		}
		net, err := s.networkAt(rec.Place)
		if err != nil {
			return err
		}
		in.Parameters = createParameters(merge(t, given, s.Parameters, networkAtPlace(t, net), d.deployed(t)))
		in.Tags = instanceTags(c, rec.CreatedBy)
	} else {
		inst, found, err := d.get(c, instanceRecord)
		if err != nil {
			return err
		}
		if !found || !inst.Created {
			return &broker.Failure{Description: "The service instance has no complete stack on record, so it cannot be bound."}
		}
		given, err := requestParameters(c.Binding.Parameters, t, s.AcceptedParameters(catalog.BindingCreate))
		if err != nil {
			return err
		}
		role, err := s.bindingRoleParameters(c)
		if err != nil {
			return err
		}
		// Users' values first, so that neither they nor the plan can
		// point a binding at another instance's resources, nor at
		// another app.
		net, err := s.networkAt(inst.Place)
		if err != nil {
			return err
		}
		in.Parameters = createParameters(merge(t, given, s.BindingParameters, networkAtPlace(t, net), inst.Outputs, d.deployed(t), role,
			databaseUserFunction(d.Deployment.StackPrefix, net, t)))
		in.Tags = bindingTags(c, rec.CreatedBy)
	}

	out, err := d.API.CreateStack(ctx, in)
	switch {
	case err == nil:
		rec.StackID = aws.ToString(out.StackId)
	case isAlreadyExists(err) || isTokenUsed(err):
		// A retried Begin whose first CreateStack went through: the stack
		// is this operation's if it carries its tag.
		stack, err := d.describe(ctx, *rec)
		if err != nil {
			return err
		}
		if stack == nil {
			return &broker.Failure{Description: fmt.Sprintf(
				"A stack named %s exists and was not made by this operation (perhaps the leftover of an earlier instance with the same id, still being deleted). Try again later.", rec.StackName)}
		}
		rec.StackID = aws.ToString(stack.StackId)
	default:
		return classify("create the stack", err)
	}
	rec.Started = true
	if err := d.put(ctx, c.Instance.ID, name, *rec); err != nil {
		return err
	}
	d.Logger.InfoContext(ctx, "stack creation started", "stack", rec.StackName)
	return nil
}

// deployed are the parameters the deployment fixes for template t: the
// permissions boundary, when t declares BoundaryParameter and the broker
// has one. Merged last, no request or plan can change it.
func (d *Driver) deployed(t *Template) map[string]string {
	if _, ok := t.Parameters[BoundaryParameter]; !ok || d.Deployment.BoundaryARN == "" {
		return nil
	}
	return map[string]string{BoundaryParameter: d.Deployment.BoundaryARN}
}

// capabilities acknowledge that a template makes IAM resources, which the
// start-up check has seen (checkBoundaries). Not CAPABILITY_AUTO_EXPAND: a
// macro would rewrite the template after that check, so a template that
// runs one is refused at start (Template.Macros).
var capabilities = []types.Capability{types.CapabilityCapabilityIam, types.CapabilityCapabilityNamedIam}

// creating says how far a creation is (creatingText).
func (d *Driver) creating(ctx context.Context, c broker.Change, stack *types.Stack, t *Template) (broker.Progress, error) {
	p := broker.Progress{RetryAfter: retryAfter(c), Description: "Creating the stack."}
	out, err := d.API.DescribeStackResources(ctx, &cfn.DescribeStackResourcesInput{StackName: stack.StackId})
	if err != nil {
		return p, nil // the description is a courtesy; the next check tries again
	}
	done := 0
	for _, r := range out.StackResources {
		if r.ResourceStatus == types.ResourceStatusCreateComplete {
			done++
		}
	}
	p.Description = creatingText(done, max(t.Resources, len(out.StackResources)))
	return p, nil
}

// creatingText says how far the creation of total resources is, in words
// that read right at 0 and at 1: "Creating 1 resource.", "Creating: 3 of 5
// resources created."
func creatingText(done, total int) string {
	if done == 0 {
		return fmt.Sprintf("Creating %d %s.", total, plural(total, "resource", "resources"))
	}
	return fmt.Sprintf("Creating: %d of %d %s created.", done, total, plural(total, "resource", "resources"))
}

// update changes the instance's stack to the target plan's template and
// the update's parameters.
func (d *Driver) update(ctx context.Context, c broker.Change, s *Settings) (broker.Progress, error) {
	rec, found, err := d.get(c, instanceRecord)
	if err != nil {
		return broker.Progress{}, err
	}
	if !found {
		return broker.Progress{}, &broker.Failure{Description: "The service instance has no stack on record, so it cannot be updated."}
	}
	if d, err = d.at(ctx, rec.Place); err != nil {
		return broker.Progress{}, err
	}
	if rec.Op != c.Operation.ID {
		rec.Op, rec.Kind, rec.Token = c.Operation.ID, c.Operation.Kind, token("update", c.Operation.ID)
		rec.Started, rec.Complete, rec.DeleteTries, rec.ChangeSet, rec.Continued = false, false, 0, "", nil
		if err := d.put(ctx, c.Instance.ID, instanceRecord, rec); err != nil {
			return broker.Progress{}, err
		}
	}
	if rec.Complete {
		return broker.Progress{Done: true, DashboardURL: rec.Outputs[DashboardOutput]}, nil
	}
	stack, err := d.describeExisting(ctx, rec)
	if err != nil {
		return broker.Progress{}, err
	}
	// A change set of this update's on record may have been executed by a
	// try whose record of it was lost: changeSetStep finds out.
	if !rec.Started && rec.ChangeSet == "" && stuckInRollback(stack.StackStatus) {
		return broker.Progress{}, stuckStack(rec, stack)
	}
	if !rec.Started && inProgress(stack.StackStatus) {
		// This update's own, if its UpdateStack went through and the
		// record of it was lost; else another change: wait for it.
		mine, err := d.startedWith(ctx, stack, rec.Token)
		if err != nil {
			return broker.Progress{}, err
		}
		if !mine {
			return broker.Progress{RetryAfter: retryAfter(c),
				Description: "Waiting for the stack's current change to finish before updating it."}, nil
		}
		rec.Started = true
		if err := d.put(ctx, c.Instance.ID, instanceRecord, rec); err != nil {
			return broker.Progress{}, err
		}
	}
	if !rec.Started {
		done, busy, err := d.startUpdate(ctx, c, s, &rec, stack)
		if err != nil || done {
			return broker.Progress{Done: done, DashboardURL: rec.Outputs[DashboardOutput]}, err
		}
		switch {
		case !rec.Started && !busy:
			return broker.Progress{RetryAfter: retryAfter(c), Description: "Working out what the update changes."}, nil
		case !rec.Started:
			return broker.Progress{RetryAfter: retryAfter(c),
				Description: "Waiting for the stack's current change to finish before updating it."}, nil
		}
		return broker.Progress{RetryAfter: retryAfter(c), Description: "Updating the stack."}, nil
	}

	switch status := stack.StackStatus; status {
	case types.StackStatusUpdateComplete, types.StackStatusCreateComplete:
		rec.Outputs, rec.Complete = outputs(stack), true
		if err := d.put(ctx, c.Instance.ID, instanceRecord, rec); err != nil {
			return broker.Progress{}, err
		}
		return broker.Progress{Done: true, DashboardURL: rec.Outputs[DashboardOutput]}, nil
	case types.StackStatusUpdateInProgress:
		return d.updating(ctx, c, stack)
	case types.StackStatusUpdateCompleteCleanupInProgress:
		return broker.Progress{RetryAfter: retryAfter(c), Description: "Updating: removing replaced resources."}, nil
	case types.StackStatusUpdateRollbackInProgress, types.StackStatusUpdateRollbackCompleteCleanupInProgress:
		return broker.Progress{RetryAfter: retryAfter(c), Description: rollingBack(rec)}, nil
	case types.StackStatusUpdateRollbackComplete:
		return broker.Progress{}, d.rolledBack(ctx, c, rec, stack)
	case types.StackStatusUpdateRollbackFailed:
		return d.continueRollback(ctx, c, rec, stack)
	case types.StackStatusUpdateFailed:
		f := d.failure(ctx, c, stack, fmt.Sprintf(
			"The update failed and could not be rolled back (%s); the platform operator must continue the rollback of stack %s", status, rec.StackName))
		f.InstanceUsable, f.UpdateRepeatable = broker.Bool(false), broker.Bool(false)
		return broker.Progress{}, f
	default:
		if inProgress(status) {
			return broker.Progress{RetryAfter: retryAfter(c), Description: "Updating the stack."}, nil
		}
		return broker.Progress{}, &broker.Failure{Description: fmt.Sprintf(
			"The stack %s is %s, not updated: it was changed outside the broker.", rec.StackName, status)}
	}
}

// updating says which resources an update is changing.
func (d *Driver) updating(ctx context.Context, c broker.Change, stack *types.Stack) (broker.Progress, error) {
	p := broker.Progress{RetryAfter: retryAfter(c), Description: "Updating the stack."}
	out, err := d.API.DescribeStackResources(ctx, &cfn.DescribeStackResourcesInput{StackName: stack.StackId})
	if err != nil {
		return p, nil // a courtesy, as in creating
	}
	var changing []string
	for _, r := range out.StackResources {
		if inProgressResource(r.ResourceStatus) {
			changing = append(changing, aws.ToString(r.LogicalResourceId))
		}
	}
	if len(changing) > 0 {
		p.Description = "Updating: changing " + list(changing) + "."
	}
	return p, nil
}

// startedWith reports whether the stack's latest events come from a call
// with this token.
func (d *Driver) startedWith(ctx context.Context, stack *types.Stack, tok string) (bool, error) {
	out, err := d.API.DescribeStackEvents(ctx, &cfn.DescribeStackEventsInput{StackName: stack.StackId})
	if err != nil {
		return false, classify("read the stack's events", err)
	}
	for _, e := range out.StackEvents {
		if aws.ToString(e.ClientRequestToken) == tok {
			return true, nil
		}
	}
	return false, nil
}

// sharedCredentials are a binding's credentials when the plan has no
// binding template: the instance's outputs.
func (d *Driver) sharedCredentials(ctx context.Context, c broker.Change, s *Settings) (broker.Progress, error) {
	inst, found, err := d.get(c, instanceRecord)
	if err != nil {
		return broker.Progress{}, err
	}
	if !found || !inst.Created {
		return broker.Progress{}, &broker.Failure{Description: "The service instance has no complete stack on record, so it cannot be bound."}
	}
	return broker.Progress{Done: true, Credentials: credentials(inst.Outputs, nil, s.Template.PrivateOutputs)}, nil
}

// deleteStacks deletes the stacks of the named records; done when every
// one is gone, its record with it.
func (d *Driver) deleteStacks(ctx context.Context, c broker.Change, names []string) (broker.Progress, error) {
	var remaining, busy, left int
	for _, name := range names {
		rec, found, err := d.get(c, name)
		if err != nil {
			return broker.Progress{}, err
		}
		if !found {
			continue
		}
		st, err := d.deleteStack(ctx, c, name, rec)
		if err != nil {
			return broker.Progress{}, err
		}
		if !st.gone {
			remaining++
			left += st.left
			if st.busy {
				busy++
			}
		}
	}
	p := broker.Progress{Done: remaining == 0}
	if p.Done {
		return p, nil
	}
	p.RetryAfter = retryAfter(c)
	switch {
	case busy > 0:
		p.Description = "Waiting for the stack's current change to finish before deleting it."
	case left > 0:
		p.Description = fmt.Sprintf("Deleting: %d %s left.", left, plural(left, "resource", "resources"))
	default:
		p.Description = "Deleting the stack."
	}
	return p, nil
}

// deletion is where one stack's deletion is.
type deletion struct {
	gone bool // the stack and its record are gone
	busy bool // the stack is busy with another change; deletion waits
	left int  // resources not deleted yet, when CloudFormation says
}

// deleteStack moves one stack's deletion on.
func (d *Driver) deleteStack(ctx context.Context, c broker.Change, name string, rec record) (deletion, error) {
	d, err := d.at(ctx, rec.Place)
	if err != nil {
		return deletion{}, err
	}
	if rec.Op != c.Operation.ID {
		rec.Op, rec.Kind, rec.Token = c.Operation.ID, c.Operation.Kind, ""
		rec.Started, rec.Complete, rec.DeleteTries = false, false, 0
		if err := d.put(ctx, c.Instance.ID, name, rec); err != nil {
			return deletion{}, err
		}
	}
	stack, err := d.describe(ctx, rec)
	if err != nil {
		return deletion{}, err
	}
	if stack == nil || stack.StackStatus == types.StackStatusDeleteComplete {
		if err := d.Resources.DeleteResource(ctx, c.Instance.ID, name); err != nil && !errors.Is(err, broker.ErrNotFound) {
			return deletion{}, fmt.Errorf("cloudformation: delete record %s of %s: %w", name, c.Instance.ID, err)
		}
		return deletion{gone: true}, nil
	}
	rec.StackID = aws.ToString(stack.StackId)
	switch status := stack.StackStatus; {
	case status == types.StackStatusDeleteInProgress:
		return deletion{left: d.resourcesLeft(ctx, stack)}, nil
	case status == types.StackStatusDeleteFailed:
		if rec.DeleteTries >= maxDeleteTries {
			return deletion{}, d.deleteFailure(ctx, c, stack, rec.DeleteTries)
		}
		rec.DeleteTries++
	case inProgress(status):
		return deletion{busy: true}, nil
	case rec.DeleteTries == 0:
		rec.DeleteTries++
	}
	// A stack asked for before but not deleting gets the same request
	// again, with the same token.
	rec.Token = token("delete", c.Operation.ID, name, itoa(rec.DeleteTries))
	if err := d.put(ctx, c.Instance.ID, name, rec); err != nil {
		return deletion{}, err
	}
	in := &cfn.DeleteStackInput{StackName: stack.StackId, ClientRequestToken: aws.String(rec.Token)}
	if d.Deployment.RoleARN != "" {
		in.RoleARN = aws.String(d.Deployment.RoleARN)
	}
	if _, err := d.API.DeleteStack(ctx, in); err != nil {
		switch {
		case isNotFound(err):
			return deletion{}, nil // the next check finds it gone
		case isBusy(err):
			return deletion{busy: true}, nil
		}
		return deletion{}, classify("delete the stack", err)
	}
	d.Logger.InfoContext(ctx, "stack deletion started", "stack", rec.StackName, "try", rec.DeleteTries)
	return deletion{}, nil
}

// resourcesLeft counts the resources of a stack being deleted that are
// not deleted yet (0 when CloudFormation does not say).
func (d *Driver) resourcesLeft(ctx context.Context, stack *types.Stack) int {
	out, err := d.API.DescribeStackResources(ctx, &cfn.DescribeStackResourcesInput{StackName: stack.StackId})
	if err != nil {
		return 0
	}
	n := 0
	for _, r := range out.StackResources {
		if r.ResourceStatus != types.ResourceStatusDeleteComplete && r.ResourceStatus != types.ResourceStatusDeleteSkipped {
			n++
		}
	}
	return n
}

// Cleanup deletes the stack of a detached record: done once it is gone.
// Detached records are not the driver's to write, so the tries of a stack
// whose deletion keeps failing are counted from its events.
func (d *Driver) Cleanup(ctx context.Context, det broker.Detached) (broker.Progress, error) {
	var rec record
	if err := json.Unmarshal(det.Data, &rec); err != nil {
		return broker.Progress{}, &broker.Failure{Description: fmt.Sprintf("The detached record %s is not a CloudFormation stack record.", det.Name)}
	}
	if rec.StackName == "" && rec.StackID == "" {
		return broker.Progress{Done: true}, nil
	}
	d, err := d.at(ctx, rec.Place)
	if err != nil {
		return broker.Progress{}, err
	}
	stack, err := d.describe(ctx, rec)
	if err != nil {
		return broker.Progress{}, err
	}
	if stack == nil || stack.StackStatus == types.StackStatusDeleteComplete {
		return broker.Progress{Done: true}, nil
	}
	wait := broker.Progress{RetryAfter: cleanupRetryAfter}
	switch status := stack.StackStatus; {
	case status == types.StackStatusDeleteFailed:
		tries, err := d.deleteFailures(ctx, stack)
		if err != nil {
			return broker.Progress{}, err
		}
		if tries >= maxDeleteTries {
			return broker.Progress{}, d.deleteFailure(ctx, broker.Change{Operation: broker.Operation{ID: det.OperationID, InstanceID: det.InstanceID}}, stack, tries)
		}
	case inProgress(status):
		return wait, nil
	}
	in := &cfn.DeleteStackInput{StackName: stack.StackId}
	if d.Deployment.RoleARN != "" {
		in.RoleARN = aws.String(d.Deployment.RoleARN)
	}
	if _, err := d.API.DeleteStack(ctx, in); err != nil && !isNotFound(err) {
		if isBusy(err) {
			return wait, nil
		}
		return broker.Progress{}, classify("delete the stack", err)
	}
	d.Logger.InfoContext(ctx, "stack deletion started for cleanup", "stack", aws.ToString(stack.StackName))
	return wait, nil
}

// describe reads the stack of a record: by id when known, which also finds
// a deleted stack; by name otherwise, and then only if the stack carries
// the record's operation tag (another stack of that name is not this
// record's). nil means there is no such stack.
func (d *Driver) describe(ctx context.Context, rec record) (*types.Stack, error) {
	name, byID := rec.StackID, rec.StackID != ""
	if !byID {
		name = rec.StackName
	}
	out, err := d.API.DescribeStacks(ctx, &cfn.DescribeStacksInput{StackName: aws.String(name)})
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, classify("read the stack", err)
	}
	if len(out.Stacks) == 0 {
		return nil, nil
	}
	s := &out.Stacks[0]
	if !byID && tag(s, TagOperationID) != tagValue(rec.CreatedBy) {
		return nil, nil
	}
	return s, nil
}

// describeExisting is describe for a change that needs its stack: a stack
// that is gone is a permanent failure.
func (d *Driver) describeExisting(ctx context.Context, rec record) (*types.Stack, error) {
	stack, err := d.describe(ctx, rec)
	if err == nil && stack == nil {
		err = &broker.Failure{Description: fmt.Sprintf(
			"The stack %s no longer exists: it was deleted outside the broker.", rec.StackName)}
	}
	return stack, err
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func tag(s *types.Stack, key string) string {
	for _, t := range s.Tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}

func inProgress(s types.StackStatus) bool {
	return len(s) > len("_IN_PROGRESS") && string(s[len(s)-len("_IN_PROGRESS"):]) == "_IN_PROGRESS"
}

func inProgressResource(s types.ResourceStatus) bool { return inProgress(types.StackStatus(s)) }

// get reads a record as the change has it: as the broker loaded it for
// the step. Every call reads a record before it writes it (put, which
// writes at once: a stack's name is durable before the stack is asked for).
func (d *Driver) get(c broker.Change, name string) (record, bool, error) {
	var rec record
	found, err := c.DecodeRecord(name, &rec)
	if err != nil {
		return record{}, false, fmt.Errorf("cloudformation: %w", err)
	}
	return rec, found, nil
}

func (d *Driver) put(ctx context.Context, instanceID, name string, rec record) error {
	if err := broker.PutRecord(ctx, d.Resources, instanceID, name, rec, d.Now()); err != nil {
		return fmt.Errorf("cloudformation: %w", err)
	}
	return nil
}
