package cloudformation

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	cfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/cfnregistry"
)

// Every stack update goes through a change set: the driver creates it,
// reads what it would do, and executes it only when it replaces or
// removes no resource that holds data, unless the plan's
// allow_replacement names that resource. A change set it does not execute
// it deletes. A stack policy on every stack (stackPolicy) denies the same
// replacements and removals to any update, the broker's own included
// (the driver sets the policy of the template an update moves to before
// executing it, so an allowed replacement goes through).

// dataTypes are the resource types whose replacement or removal loses
// data: storage, databases, caches, queues and streams, file systems,
// keys (what they encrypted cannot be read without them) and secrets.
var dataTypes = []string{
	"AWS::S3::Bucket", "AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable", "AWS::SQS::Queue",
	"AWS::RDS::DBInstance", "AWS::RDS::DBCluster", "AWS::DocDB::DBCluster", "AWS::Neptune::DBCluster",
	"AWS::ElastiCache::CacheCluster", "AWS::ElastiCache::ReplicationGroup", "AWS::ElastiCache::ServerlessCache",
	"AWS::MemoryDB::Cluster", "AWS::EFS::FileSystem", "AWS::FSx::FileSystem", "AWS::KMS::Key",
	"AWS::Kinesis::Stream", "AWS::OpenSearchService::Domain", "AWS::Elasticsearch::Domain",
	"AWS::Redshift::Cluster", "AWS::SecretsManager::Secret", "AWS::Timestream::Table",
}

// holdsData says whether a resource holds data: its type does, or its
// template keeps it (or a snapshot of it) when the stack lets it go.
func (r Resource) holdsData() bool {
	switch r.DeletionPolicy {
	case "Retain", "Snapshot", "RetainExceptOnCreate":
		return true
	}
	return slices.Contains(dataTypes, r.Type)
}

// dataResources lists, sorted, the logical ids of t's resources that hold
// data.
func (t *Template) dataResources() []string {
	var out []string
	for _, r := range t.Declared {
		if r.holdsData() {
			out = append(out, r.LogicalID)
		}
	}
	return out
}

func (t *Template) resource(logicalID string) (Resource, bool) {
	for _, r := range t.Declared {
		if r.LogicalID == logicalID {
			return r, true
		}
	}
	return Resource{}, false
}

// allowReplacement reads allow_replacement: logical ids of the instance
// template's resources that hold data.
func allowReplacement(config map[string]any, t *Template) ([]string, error) {
	v, ok := config[KeyAllowReplacement]
	if !ok {
		return nil, nil
	}
	items, ok := v.([]any)
	if !ok {
		return nil, catalog.Settingf(KeyAllowReplacement, "must be a list of the logical ids of %s's resources that an update may replace or delete, got %s",
			t.Path, catalog.Describe(v))
	}
	data := t.dataResources()
	var out []string
	for i, item := range items {
		id, ok := item.(string)
		if !ok {
			return nil, catalog.Settingf(fmt.Sprintf("%s[%d]", KeyAllowReplacement, i), "must be a logical id (a string), got %s", catalog.Describe(item))
		}
		if !slices.Contains(data, id) {
			return nil, catalog.Settingf(fmt.Sprintf("%s[%d]", KeyAllowReplacement, i),
				"%s is not a resource of %s that holds data (those are: %s); only their replacement is ever refused", id, t.Path, list(data))
		}
		out = append(out, id)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// stackPolicy is the stack policy of a stack made from t: every update is
// allowed (a stack policy denies every update it does not allow), but
// replacing or deleting a resource that holds data, unless allowed.
func stackPolicy(t *Template, allowed []string) string {
	type statement struct {
		Effect    string `json:"Effect"`
		Action    any    `json:"Action"`
		Principal string `json:"Principal"`
		Resource  any    `json:"Resource"`
	}
	policy := struct {
		Statement []statement `json:"Statement"`
	}{Statement: []statement{{Effect: "Allow", Action: "Update:*", Principal: "*", Resource: "*"}}}
	var denied []string
	for _, id := range t.dataResources() {
		if !slices.Contains(allowed, id) {
			denied = append(denied, "LogicalResourceId/"+id)
		}
	}
	if len(denied) > 0 {
		policy.Statement = append(policy.Statement, statement{Effect: "Deny", Action: []string{"Update:Replace", "Update:Delete"},
			Principal: "*", Resource: denied})
	}
	b, _ := json.Marshal(policy) // strings only: always marshals
	return string(b)
}

// startUpdate moves an update's change set on, once per step: creates it,
// waits for CloudFormation to work out what it would do, refuses it or
// executes it. It reports done when there is nothing to change; rec.Started
// once the change set is executing; else busy when the stack is busy with
// another change.
func (d *Driver) startUpdate(ctx context.Context, c broker.Change, s *Settings, rec *record, stack *types.Stack) (done, busy bool, err error) {
	done, err = d.changeSetStep(ctx, c, s, rec, stack, &busy)
	return done, busy, err
}

func (d *Driver) changeSetStep(ctx context.Context, c broker.Change, s *Settings, rec *record, stack *types.Stack, busy *bool) (bool, error) {
	// The template the stack runs is read once a step, for the new
	// defaults and the guard alike.
	running := d.runningTemplate(stack)
	if rec.ChangeSet == "" {
		in, _, err := d.changeSetInputWithDefaults(ctx, c, s, rec, running)
		if err != nil {
			return false, err
		}
		out, err := d.API.CreateChangeSet(ctx, in)
		switch {
		case err == nil:
			rec.ChangeSet = aws.ToString(out.Id)
		case isAlreadyExists(err):
			rec.ChangeSet = aws.ToString(in.ChangeSetName) // a retried call's: found by name
		case isBusy(err):
			*busy = true
			return false, nil
		default:
			return false, classify("prepare the update of the stack", err)
		}
		if err := d.put(ctx, c.Instance.ID, instanceRecord, *rec); err != nil {
			return false, err
		}
	}

	cs, err := d.describeChangeSet(ctx, rec, stack)
	if err != nil {
		return false, err
	}
	if cs == nil { // deleted outside the broker: make it again
		rec.ChangeSet = ""
		return false, d.put(ctx, c.Instance.ID, instanceRecord, *rec)
	}
	switch cs.ExecutionStatus {
	case types.ExecutionStatusExecuteInProgress, types.ExecutionStatusExecuteComplete, types.ExecutionStatusExecuteFailed:
		// Executed by an earlier try whose record of it was lost: the
		// stack's status tells how it goes.
		rec.Started = true
		return false, d.put(ctx, c.Instance.ID, instanceRecord, *rec)
	}
	switch cs.Status {
	case types.ChangeSetStatusCreatePending, types.ChangeSetStatusCreateInProgress:
		return false, nil
	case types.ChangeSetStatusFailed:
		d.deleteChangeSet(ctx, rec, stack)
		if reason := aws.ToString(cs.StatusReason); noChanges(reason) {
			rec.Started, rec.Complete, rec.Outputs = true, true, outputs(stack)
			return true, d.put(ctx, c.Instance.ID, instanceRecord, *rec)
		}
		return false, &broker.Failure{
			Description:    "CloudFormation could not work out the update of the service instance's stack, so nothing was changed (the platform operator finds CloudFormation's reason with the broker's ops operation command).",
			Detail:         fmt.Sprintf("stack %s: change set %s failed: %s", rec.StackName, rec.ChangeSet, aws.ToString(cs.StatusReason)),
			InstanceUsable: broker.Bool(true), UpdateRepeatable: broker.Bool(false)}
	}

	in, _, err := d.changeSetInputWithDefaults(ctx, c, s, rec, running)
	if err != nil {
		return false, err
	}
	f, err := d.refusal(ctx, c, s, running, cs.Changes, in.Parameters)
	if err != nil {
		return false, err
	}
	if f != nil {
		d.deleteChangeSet(ctx, rec, stack)
		d.Logger.InfoContext(ctx, "stack update refused", "stack", rec.StackName, "reason", f.Detail)
		return false, f
	}
	// The policy of the template the stack is to run: its new data
	// resources protected, those the plan now allows to go no longer.
	if moves(c) {
		policy := stackPolicy(s.Template, s.AllowReplacement)
		if _, err := d.API.SetStackPolicy(ctx, &cfn.SetStackPolicyInput{StackName: stack.StackId, StackPolicyBody: aws.String(policy)}); err != nil {
			return false, classify("set the stack's policy", err)
		}
	}
	_, err = d.API.ExecuteChangeSet(ctx, &cfn.ExecuteChangeSetInput{ChangeSetName: aws.String(rec.ChangeSet),
		StackName: stack.StackId, ClientRequestToken: aws.String(rec.Token)})
	switch {
	case err == nil, isTokenUsed(err):
	case isBusy(err):
		mine, err := d.startedWith(ctx, stack, rec.Token)
		if err != nil || !mine {
			*busy = err == nil
			return false, err
		}
	default:
		return false, classify("update the stack", err)
	}
	rec.Started = true
	if err := d.put(ctx, c.Instance.ID, instanceRecord, *rec); err != nil {
		return false, err
	}
	d.Logger.InfoContext(ctx, "stack update started", "stack", rec.StackName, "new_template", moves(c))
	return false, nil
}

// moves says whether the update moves the instance's stack to the plan's
// current template (an upgrade or a plan change); any other update keeps
// the template the stack runs (UsePreviousTemplate).
func moves(c broker.Change) bool {
	return c.Operation.Target != nil && c.Operation.Target.MovesTemplate(c.Instance)
}

// changeSetInputWithDefaults is the change set of an update: the plan's
// current template when the update moves the instance to it, else the
// stack's own template; in both, a parameter the update does not set keeps
// its value, but one the user never set that moves to the template's new
// default (newDefaults), which it returns too, for a preview to list.
func (d *Driver) changeSetInputWithDefaults(ctx context.Context, c broker.Change, s *Settings, rec *record, running *running) (*cfn.CreateChangeSetInput, map[string]defaultChange, error) {
	stack := running.stack
	var given map[string]string
	if c.Operation.Target != nil {
		var err error
		if given, err = requestParameters(c.Operation.Target.Parameters, s.Template, s.AcceptedParameters(catalog.InstanceUpdate)); err != nil {
			return nil, nil, err
		}
	}
	in := &cfn.CreateChangeSetInput{
		// By name: the stack was just read by its id, so the name is its.
		StackName:     stack.StackName,
		ChangeSetName: aws.String(token("changeset", c.Operation.ID)),
		ChangeSetType: types.ChangeSetTypeUpdate,
		Capabilities:  capabilities,
		ClientToken:   aws.String(rec.Token),
		Tags:          instanceTags(c, rec.CreatedBy),
	}
	if d.Deployment.RoleARN != "" {
		in.RoleARN = aws.String(d.Deployment.RoleARN)
	}
	if moves(c) {
		body, url, err := d.templateSource(ctx, s.Template)
		if err != nil {
			return nil, nil, err
		}
		in.TemplateBody, in.TemplateURL = body, url
		net, err := s.networkAt(rec.Place)
		if err != nil {
			return nil, nil, err
		}
		values := merge(s.Template, given, s.Parameters, networkAtPlace(s.Template, net), d.deployed(s.Template))
		defaults, err := d.newDefaults(ctx, c, s.Template, values, running)
		if err != nil {
			return nil, nil, err
		}
		for k, ch := range defaults {
			values[k] = ch.To
		}
		in.Parameters = updateParameters(s.Template, values, stack.Parameters)
		return in, defaults, nil
	}
	in.UsePreviousTemplate = aws.Bool(true)
	had := map[string]bool{}
	for _, p := range stack.Parameters {
		k := aws.ToString(p.ParameterKey)
		had[k] = true
		switch v, ok := given[k]; {
		case ok:
			in.Parameters = append(in.Parameters, types.Parameter{ParameterKey: aws.String(k), ParameterValue: aws.String(v)})
		case k == BoundaryParameter && d.Deployment.BoundaryARN != "":
			in.Parameters = append(in.Parameters, types.Parameter{ParameterKey: aws.String(k), ParameterValue: aws.String(d.Deployment.BoundaryARN)})
		default:
			in.Parameters = append(in.Parameters, types.Parameter{ParameterKey: aws.String(k), UsePreviousValue: aws.Bool(true)})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(given)) {
		if !had[k] {
			version := "without maintenance_info"
			if mi := c.Instance.MaintenanceInfo; mi != nil {
				version = "version " + mi.Version
			}
			return nil, nil, &broker.Failure{Description: fmt.Sprintf(
				"The parameter %s is not one of the template the service instance runs (the plan's %s); upgrade the instance first (an update with the plan's maintenance_info), then set it.",
				k, version), InstanceUsable: broker.Bool(true)}
		}
	}
	return in, nil, nil
}

// describeChangeSet reads a change set with all its changes; nil when it
// is gone.
func (d *Driver) describeChangeSet(ctx context.Context, rec *record, stack *types.Stack) (*cfn.DescribeChangeSetOutput, error) {
	var all *cfn.DescribeChangeSetOutput
	var next *string
	for range 50 { // a change set lists at most a few thousand changes, 100 a page
		out, err := d.API.DescribeChangeSet(ctx, &cfn.DescribeChangeSetInput{ChangeSetName: aws.String(rec.ChangeSet),
			StackName: stack.StackId, NextToken: next})
		if isChangeSetNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, classify("read the update's change set", err)
		}
		if all == nil {
			all = out
		} else {
			all.Changes = append(all.Changes, out.Changes...)
		}
		if next = out.NextToken; next == nil {
			break
		}
	}
	return all, nil
}

// deleteChangeSet deletes a change set the driver will not execute. A
// failure leaves it behind, which harms nothing: CloudFormation lists it
// with the stack, and the stack's deletion deletes it.
func (d *Driver) deleteChangeSet(ctx context.Context, rec *record, stack *types.Stack) {
	_, err := d.API.DeleteChangeSet(ctx, &cfn.DeleteChangeSetInput{ChangeSetName: aws.String(rec.ChangeSet), StackName: stack.StackId})
	if err != nil && !isChangeSetNotFound(err) {
		d.Logger.WarnContext(ctx, "change set not deleted", "stack", rec.StackName, "change_set", rec.ChangeSet, "error", err.Error())
	}
}

// refusal is the failure of an update that would replace or remove a
// resource that holds data and that the plan does not allow to go, by
// either opinion: the change set's (changes), or the two templates'
// (templateRefusal, with params, the update's parameters); nil when
// neither says so.
func (d *Driver) refusal(ctx context.Context, c broker.Change, s *Settings, running *running, changes []types.Change, params []types.Parameter) (*broker.Failure, error) {
	stack := running.stack
	// Without the stack's template the second opinion cannot be had: try
	// again rather than judge by the change set alone.
	current, err := running.template(ctx)
	if err != nil {
		return nil, err
	}
	target := current
	if moves(c) {
		target = s.Template
	}
	if f := changeSetRefusal(s, stack, changes, current, target); f != nil {
		return f, nil
	}
	return templateRefusal(s, stack, current, target, params)
}

// changeSetRefusal is the change set's opinion on an update.
func changeSetRefusal(s *Settings, stack *types.Stack, changes []types.Change, current, target *Template) *broker.Failure {
	for _, ch := range changes {
		rc := ch.ResourceChange
		if rc == nil {
			continue
		}
		id, typ := aws.ToString(rc.LogicalResourceId), aws.ToString(rc.ResourceType)
		r := Resource{LogicalID: id, Type: typ}
		if cr, ok := current.resource(id); ok {
			r = cr
		}
		if !r.holdsData() || slices.Contains(s.AllowReplacement, id) {
			continue
		}
		what, allow := refusedWords(id, typ)
		var desc string
		switch {
		case rc.Action == types.ChangeActionRemove:
			desc = fmt.Sprintf("The update would delete the resource %s: the plan's template no longer declares it. %s", what, allow)
		case rc.Action == types.ChangeActionModify && rc.Replacement == types.ReplacementTrue:
			desc = fmt.Sprintf("The update would replace the resource %s, because %s; its data would be lost. %s",
				what, forcing(rc, r, target), allow)
		case rc.Action == types.ChangeActionModify && rc.Replacement == types.ReplacementConditional:
			desc = fmt.Sprintf("The update may replace the resource %s, because %s (CloudFormation decides only as it runs); its data would be lost. %s",
				what, forcing(rc, r, target), allow)
		default:
			continue
		}
		return &broker.Failure{Description: desc,
			Detail:         fmt.Sprintf("stack %s: change set refused: %s %s %s replacement %s", aws.ToString(stack.StackName), rc.Action, id, typ, rc.Replacement),
			InstanceUsable: broker.Bool(true), UpdateRepeatable: broker.Bool(false)}
	}
	return nil
}

// refusedWords name a resource an update is refused for, and what the
// operator does if losing it is intended: the same words whichever opinion
// refuses.
func refusedWords(id, typ string) (what, allow string) {
	return fmt.Sprintf("%s (%s), which holds data", id, typ),
		fmt.Sprintf("Nothing was changed. If losing it is intended, the platform operator lists %s in the plan's allow_replacement and raises its maintenance_info version.", id)
}

// templateRefusal is the templates' opinion on an update from current to
// target with params (templateReplacements): the first resource that
// holds data and that the plan does not allow to go.
func templateRefusal(s *Settings, stack *types.Stack, current, target *Template, params []types.Parameter) (*broker.Failure, error) {
	oldValues, newValues := sideValues(current, stack.Parameters, params)
	old, err := newSide(current.Body, oldValues)
	if err != nil {
		return nil, fmt.Errorf("read the stack's template: %w", err)
	}
	next, err := newSide(target.Body, newValues)
	if err != nil {
		return nil, fmt.Errorf("read the plan's template: %w", err)
	}
	held := func(id, typ string) bool {
		r, ok := current.resource(id)
		if !ok {
			r = Resource{LogicalID: id, Type: typ}
		}
		return r.holdsData() && !slices.Contains(s.AllowReplacement, id)
	}
	schemas, err := cfnregistry.Schemas()
	if err != nil {
		return nil, err
	}
	changes := templateReplacements(old, next, schemas, held)
	if len(changes) == 0 {
		return nil, nil
	}
	ch := changes[0] // the first, as the change set's opinion names one
	what, allow := refusedWords(ch.LogicalID, ch.Type)
	var desc, detail string
	switch {
	case ch.Removed && ch.NewType != "":
		desc = fmt.Sprintf("The update would delete the resource %s: the plan's template declares it as a %s now. %s", what, ch.NewType, allow)
		detail = "type " + ch.NewType
	case ch.Removed:
		desc = fmt.Sprintf("The update would delete the resource %s: the plan's template no longer declares it, or no longer makes it with these parameters. %s", what, allow)
		detail = "removed"
	case len(ch.Replaced) > 0:
		desc = fmt.Sprintf("The update would replace the resource %s, because %s; its data would be lost. %s", what, propertiesForcing(ch.Replaced), allow)
		detail = "replaced by " + strings.Join(ch.Replaced, ", ")
	default:
		desc = fmt.Sprintf("The update may replace the resource %s, because %s (CloudFormation decides only as it runs); its data would be lost. %s",
			what, propertiesForcing(ch.MayReplace), allow)
		detail = "conditionally replaced by " + strings.Join(ch.MayReplace, ", ")
	}
	return &broker.Failure{Description: desc,
		Detail:         fmt.Sprintf("stack %s: refused by the templates: %s %s %s", aws.ToString(stack.StackName), ch.LogicalID, ch.Type, detail),
		InstanceUsable: broker.Bool(true), UpdateRepeatable: broker.Bool(false)}, nil
}

// sideValues are the parameters' values on each side of an update: the
// stack's (a NoEcho one, which CloudFormation masks, unknown), and the
// update's (a previous value as the stack's; a parameter the update leaves
// out takes its Default).
func sideValues(current *Template, stackParams, params []types.Parameter) (old, next map[string]any) {
	doc, _ := templateDocument([]byte(current.Body))
	declared, _ := doc["Parameters"].(map[string]any)
	old, next = map[string]any{}, map[string]any{}
	for _, p := range stackParams {
		k := aws.ToString(p.ParameterKey)
		decl, _ := declared[k].(map[string]any)
		if strings.EqualFold(fmt.Sprint(decl["NoEcho"]), "true") { // true or "true"
			old[k] = unknown{expr: "the NoEcho parameter " + k}
			continue
		}
		v := aws.ToString(p.ParameterValue)
		if r := aws.ToString(p.ResolvedValue); r != "" { // an SSM parameter's value
			v = r
		}
		old[k] = v
	}
	for _, p := range params {
		k := aws.ToString(p.ParameterKey)
		if aws.ToBool(p.UsePreviousValue) {
			if v, ok := old[k]; ok {
				next[k] = v
			}
			continue
		}
		next[k] = aws.ToString(p.ParameterValue)
	}
	return old, next
}

// propertiesForcing says which properties force a replacement.
func propertiesForcing(names []string) string {
	if len(names) == 1 {
		return fmt.Sprintf("its property %s cannot change without a new resource", names[0])
	}
	return fmt.Sprintf("its properties %s cannot change without a new resource", strings.Join(names, ", "))
}

// forcing names the properties that force a replacement: those the
// change set says require recreation, else the create-only properties
// (CloudFormation's registry) whose value the templates change.
func forcing(rc *types.ResourceChange, current Resource, target *Template) string {
	var names []string
	for _, dt := range rc.Details {
		t := dt.Target
		if t == nil || t.Attribute != types.ResourceAttributeProperties || t.RequiresRecreation == types.RequiresRecreationNever {
			continue
		}
		if n := aws.ToString(t.Name); n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 && target != nil {
		schemas, _ := cfnregistry.Schemas()
		next, _ := target.resource(current.LogicalID)
		for _, p := range slices.Sorted(maps.Keys(union(current.Properties, next.Properties))) {
			if schemas[current.Type].ReplacedBy(p) && !reflect.DeepEqual(current.Properties[p], next.Properties[p]) {
				names = append(names, p)
			}
		}
	}
	switch len(names) {
	case 0:
		return "a property it has cannot change without a new resource"
	case 1:
		return fmt.Sprintf("its property %s cannot change without a new resource", names[0])
	}
	return fmt.Sprintf("its properties %s cannot change without a new resource", strings.Join(names, ", "))
}

func union(a, b map[string]any) map[string]any {
	out := map[string]any{}
	maps.Copy(out, a)
	maps.Copy(out, b)
	return out
}

// running is a stack as described, and the template it runs, read from
// CloudFormation at most once (a Task that makes an update's input and
// judges its change set needs it for both).
type running struct {
	d     *Driver
	stack *types.Stack
	t     *Template
}

func (d *Driver) runningTemplate(stack *types.Stack) *running { return &running{d: d, stack: stack} }

// template reads the template the stack runs, the first time.
func (r *running) template(ctx context.Context) (*Template, error) {
	if r.t != nil {
		return r.t, nil
	}
	out, err := r.d.API.GetTemplate(ctx, &cfn.GetTemplateInput{StackName: r.stack.StackId, TemplateStage: types.TemplateStageOriginal})
	if err != nil {
		return nil, classify("read the stack's template", err)
	}
	// As written, by this broker or an older one: YAML is read even by a
	// worker built without yaml.v3 (liveYAMLTemplate).
	t, err := parseTemplateWith([]byte(aws.ToString(out.TemplateBody)), liveYAMLTemplate)
	if err != nil {
		return nil, err
	}
	r.t = t
	return t, nil
}

// noChanges: a change set of an update that would change nothing.
func noChanges(reason string) bool {
	return strings.Contains(reason, "didn't contain changes") || strings.Contains(reason, "No updates are to be performed")
}

// isChangeSetNotFound: the change set is gone.
func isChangeSetNotFound(err error) bool {
	code, _, _ := apiError(err)
	return code == "ChangeSetNotFound" || code == "ChangeSetNotFoundException"
}
