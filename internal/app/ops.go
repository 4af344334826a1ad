//go:build !lambda.norpc

package app

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	awscfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/drivers"
	"github.com/serverless-osb/broker/internal/engine/sfn"
	"github.com/serverless-osb/broker/internal/env"
	"github.com/serverless-osb/broker/internal/sealing"
	"github.com/serverless-osb/broker/internal/store/dynamo"
)

// OpsUsage is the operator command's help.
const OpsUsage = `usage: go run ./functions/api ops [--json] [--verbose] [--data DIR | --stack NAME] [--catalog FILE] COMMAND

  instances [--service ID] [--plan ID] [--behind] [--moved]
                    the instances (of the service, of the plan), each with the version of
                    its plan it runs (maintenance_info version, plan digest) and whether it
                    is behind the catalog's; --behind lists only those; and the account and
                    Region it lives in, CHANGED when its plan's placement now puts new
                    instances elsewhere (it stays where it is); --moved lists only those
  operations        operations in progress, with those overdue marked STUCK
  operation INSTANCE_ID [OPERATION_ID]
                    the instance's operations (finished ones are kept 7 days), each with
                    its detail for the operator (a failure's full reason, e.g.
                    CloudFormation's), and the detached resources its operations left
  detached          detached resources: waiting for, in, or given up by the cleanup, with
                    the outage of the service's backend a cleanup waits out
  cleanup ID        start the cleanup of detached resource ID again (locally, wait for
                    it to end: exit 0 once the resource is deleted, 1 if it fails)
  reap              run the reaper once and print what it did
  reseal            seal every stored secret under the current key (after a key change),
                    then refuse any value found in clear from then on
  rotate-key        make a new local sealing key, which seals from now on (make run's
                    data only; then run reseal)
  audit             the binding users (IAM, under /serverless-osb/, named PREFIX-…) without
                    the broker's permissions boundary or that no live stack of the broker
                    holds, each with the aws CLI commands that bound or delete it; exit 1
                    when it finds one (the prefix and boundary: --stack's outputs, else
                    BROKER_STACK_PREFIX, default osb, and BROKER_PERMISSIONS_BOUNDARY_ARN)
` + UpgradeUsage + `
  --json            answer in JSON rather than text
  --verbose         log what the broker does (JSON lines on stderr; BROKER_LOG_LEVEL
                    sets the level), which ops keeps quiet otherwise but for errors
  --data DIR        work on the local broker whose data is in DIR (default
                    BROKER_DATA_DIR, else .data); stop make run first
  --stack NAME      work on the broker that the CloudFormation stack NAME deployed
                    (its outputs name the table, the state machines and the region;
                    AWS credentials and region from the usual AWS environment)
  --catalog FILE    the catalog the broker serves (default BROKER_CATALOG; else,
                    locally, the one the broker last started with; deployed,
                    services/catalog.yaml)

Without --stack, with BROKER_TABLE (and AWS_REGION, BROKER_OPERATION_STATE_MACHINE_ARN,
BROKER_CLEANUP_STATE_MACHINE_ARN) set, it works on the deployed broker; otherwise on
the local one's data. It says on stderr which broker it reads, and refuses a data
directory that no broker started on.
`

// The outputs of the broker's stack that --stack reads (the infra package
// defines them).
const (
	OutputTable                 = "TableName"
	OutputOperationStateMachine = "OperationStateMachineArn"
	OutputCleanupStateMachine   = "CleanupStateMachineArn"
	// OutputUpgradeStateMachine is optional: a stack deployed before the
	// fleet upgrade has none, and ops upgrade then says so.
	OutputUpgradeStateMachine = "UpgradeStateMachineArn"
	OutputRegion              = "Region"
	// OutputSealingKey is optional: stacks deployed before the sealing key
	// had its own have none, and ops reseal then says the broker seals
	// nothing.
	OutputSealingKey       = "SealingKeyArn"
	defaultDeployedCatalog = "services/catalog.yaml"
)

// ErrUsage is returned, wrapped, for a command line the operator command
// does not understand; its message ends with the usage.
var ErrUsage = errors.New("usage")

func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: %s\n\n%s", ErrUsage, fmt.Sprintf(format, args...), OpsUsage)
}

// RunOps runs the operator command: its answer on out, and on errOut the
// broker it reads (one line first) and, with --verbose or
// BROKER_LOG_LEVEL, the broker's log.
func RunOps(ctx context.Context, args []string, out, errOut io.Writer) error {
	if errOut == nil {
		errOut = io.Discard
	}
	fs := flag.NewFlagSet("ops", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "")
	stack := fs.String("stack", "", "")
	data := fs.String("data", "", "")
	catalogFile := fs.String("catalog", "", "")
	verbose := fs.Bool("verbose", false, "")
	service := fs.String("service", "", "")
	plan := fs.String("plan", "", "")
	behind := fs.Bool("behind", false, "")
	moved := fs.Bool("moved", false, "")
	// Flags may come before or after the command (ops reap --json);
	// upgrade parses its own, after its name.
	var positional, upgradeArgs []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(out, OpsUsage)
				return nil
			}
			return usageError("%v", err)
		}
		if args = fs.Args(); len(args) == 0 {
			break
		}
		positional, args = append(positional, args[0]), args[1:]
		if positional[0] == "upgrade" {
			upgradeArgs = args
			break
		}
	}
	args = positional
	var upgrade upgradeCommand
	if len(args) > 0 && args[0] == "upgrade" {
		var err error
		if upgrade, err = parseUpgrade(upgradeArgs, asJSON, stack); err != nil {
			return err
		}
	}
	switch {
	case len(args) == 1 && args[0] == "help":
		fmt.Fprint(out, OpsUsage)
		return nil
	case len(args) == 0:
		return usageError("no command")
	case args[0] == "cleanup" && len(args) != 2:
		return usageError("cleanup takes one argument, the detached resource's id")
	case args[0] == "operation" && (len(args) < 2 || len(args) > 3):
		return usageError("operation takes the instance's id and, optionally, one of its operation's ids")
	case args[0] == "operation" || args[0] == "cleanup" || args[0] == "upgrade":
	case !slices.Contains([]string{"instances", "operations", "detached", "reap", "reseal", "rotate-key", "audit"}, args[0]):
		return usageError("unknown command %q", args[0])
	case len(args) != 1:
		return usageError("%s takes no argument", args[0])
	case args[0] != "instances" && (*service != "" || *plan != "" || *behind || *moved):
		return usageError("--service, --plan, --behind and --moved go with instances, not %s", args[0])
	}
	if *stack != "" && *data != "" {
		return usageError("--data is the local broker's, --stack a deployed one's: give one")
	}
	if args[0] == "instances" {
		args = append(args, instancesArgs(*service, *plan, *behind, *moved)...)
	}
	if args[0] == "audit" {
		// IAM and CloudFormation only: no broker to build.
		if *stack != "" {
			fmt.Fprintf(errOut, "ops: the binding users of stack %s's broker\n", *stack)
		} else {
			fmt.Fprintf(errOut, "ops: the binding users of the broker whose stacks are named %s-… (%s) in the AWS environment's account\n",
				cmp.Or(os.Getenv(env.StackPrefix), deploy.DefaultStackPrefix), env.StackPrefix)
		}
		return runAudit(ctx, *stack, *asJSON, out)
	}
	logger, err := opsLogger(errOut, *verbose)
	if err != nil {
		return err
	}
	b, closeFn, err := opsBroker(ctx, opsTarget{stack: *stack, data: *data, catalog: *catalogFile}, errOut, logger)
	if errors.Is(err, errNoBrokerData) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w\n(ops works on the broker its environment names, with that broker's catalog and the variables the catalog's plans need: see ops help)", err)
	}
	defer closeFn()
	local := *stack == "" && (*data != "" || os.Getenv(env.Table) == "")
	if args[0] == "upgrade" {
		if err := checkUpgrade(ctx, b, upgrade); err != nil {
			return err
		}
		return noTable(runUpgrade(ctx, b, upgrade, *asJSON, local, out))
	}
	run := Ops
	if *asJSON {
		run = OpsJSON
	}
	if err := run(ctx, b, args, out); err != nil {
		return noTable(err)
	}
	if args[0] == "cleanup" && local {
		// The local engine runs the cleanup in this process: see it end
		// rather than exit while it runs, and fail with it.
		return waitCleanup(ctx, b, args[1], out)
	}
	return nil
}

// waitCleanup waits for the local cleanup of detached resource id to end:
// nil once the resource is gone, an error naming the failure otherwise.
func waitCleanup(ctx context.Context, b *broker.Broker, id string, out io.Writer) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		d, err := b.Detached.GetDetached(ctx, id)
		switch {
		case errors.Is(err, broker.ErrNotFound):
			fmt.Fprintf(out, "cleanup of %s succeeded: the resource is deleted\n", id)
			return nil
		case err != nil:
			return fmt.Errorf("follow the cleanup of %s: %w", id, err)
		case d.State == broker.DetachedFailed:
			return fmt.Errorf("the cleanup of %s failed: %s", id, cmp.Or(d.Failure, "no reason recorded"))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the cleanup of %s is still running: %w", id, ctx.Err())
		case <-tick.C:
		}
	}
}

// StackConfig reads the configuration of the broker that the CloudFormation
// stack name deployed from the stack's outputs, as the worker function
// has it (without a secret: the operator command needs none).
func StackConfig(ctx context.Context, client awscfn.DescribeStacksAPIClient, name string) (LambdaConfig, error) {
	out, err := client.DescribeStacks(ctx, &awscfn.DescribeStacksInput{StackName: aws.String(name)})
	if err != nil {
		return LambdaConfig{}, fmt.Errorf("stack %s: %w", name, err)
	}
	if len(out.Stacks) != 1 {
		return LambdaConfig{}, fmt.Errorf("stack %s: not found", name)
	}
	outputs := map[string]string{}
	for _, o := range out.Stacks[0].Outputs {
		outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	var missing []string
	for _, key := range []string{OutputTable, OutputOperationStateMachine, OutputCleanupStateMachine, OutputRegion} {
		if outputs[key] == "" {
			missing = append(missing, key)
		}
	}
	if len(missing) > 0 {
		return LambdaConfig{}, fmt.Errorf("stack %s has no output %v: is it the broker's, deployed by this version?", name, missing)
	}
	return LambdaConfig{
		Function:               FunctionWorker,
		Store:                  dynamo.Config{Table: outputs[OutputTable], Region: outputs[OutputRegion]},
		StateMachineARN:        outputs[OutputOperationStateMachine],
		CleanupStateMachineARN: outputs[OutputCleanupStateMachine],
		UpgradeStateMachineARN: outputs[OutputUpgradeStateMachine],
		CatalogPath:            cmp.Or(os.Getenv(env.Catalog), defaultDeployedCatalog),
		SealingKey:             outputs[OutputSealingKey],
	}, nil
}

// opsBroker builds the broker the operator works on: the deployed one when
// --stack or BROKER_TABLE names one (and no --data), else the local data,
// without serving or reaping. It says which on say, and refuses local data
// no broker wrote.
func opsBroker(ctx context.Context, t opsTarget, say io.Writer, logger *slog.Logger) (*broker.Broker, func(), error) {
	if t.stack != "" || (t.data == "" && os.Getenv(env.Table) != "") {
		c, err := opsLambdaConfig(ctx, t.stack)
		if err != nil {
			return nil, nil, err
		}
		c.CatalogPath = cmp.Or(t.catalog, c.CatalogPath)
		sayDeployed(say, t.stack, c)
		awsCfg, err := loadAWSConfig(ctx, c, logger)
		if err != nil {
			return nil, nil, err
		}
		_, b, err := buildBroker(ctx, c, awsCfg, drivers.RunStacks, logger)
		if err != nil {
			return nil, nil, err
		}
		b.Engine = sfn.New(awssfn.NewFromConfig(awsCfg), c.stateMachines())
		return b, func() {}, nil
	}
	c, err := localOpsConfig(ctx, t, say)
	if err != nil {
		return nil, nil, err
	}
	c.ReapInterval, c.Operator = -1, true
	l, err := OpenLocal(ctx, c, logger)
	if err != nil {
		return nil, nil, err
	}
	return l.Broker, func() { _ = l.Close() }, nil
}

// opsLambdaConfig is the deployed broker's configuration: from the stack's
// outputs, or else from the environment.
func opsLambdaConfig(ctx context.Context, stack string) (LambdaConfig, error) {
	if stack == "" {
		return LambdaConfigFromEnv(FunctionWorker)
	}
	cfg, err := operatorConfig(ctx, stack)
	if err != nil {
		return LambdaConfig{}, err
	}
	return StackConfig(ctx, awscfn.NewFromConfig(cfg), stack)
}

// operatorConfig is the AWS configuration of the operator of stack, from
// the usual AWS environment.
func operatorConfig(ctx context.Context, stack string) (aws.Config, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	// Say which of the usual AWS environment is missing: the SDK's own
	// errors name an endpoint rule or the EC2 metadata service instead.
	if cfg.Region == "" {
		return aws.Config{}, fmt.Errorf("no AWS region: set AWS_REGION (or AWS_PROFILE, to a profile with a region) to the region of stack %s", stack)
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return aws.Config{}, fmt.Errorf("no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, to those of an operator of stack %s (%w)", stack, err)
	}
	return cfg, nil
}

// Ops runs one operator command on b, answering in text.
func Ops(ctx context.Context, b *broker.Broker, args []string, out io.Writer) error {
	cw := newCleanWriter(out)
	defer cw.flush()
	w := tabwriter.NewWriter(cw, 2, 4, 2, ' ', 0)
	defer w.Flush()
	switch args[0] {
	case "instances":
		list, err := opsInstances(ctx, b, args[1:])
		if err != nil {
			return err
		}
		fmt.Fprintln(w, "INSTANCE\tSERVICE\tPLAN\tSTATE\tVERSION\tDIGEST\tBEHIND\tACCOUNT\tREGION\tMAPPING")
		for _, l := range list {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.ID, l.ServiceID, l.PlanID, l.State,
				cmp.Or(l.Runs.Version, "-"), cmp.Or(shortDigest(l.Runs.Digest), "-"), l.behindText(), placeText(l.Place))
		}
	case "operations":
		ops, err := b.Store.ListInProgress(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, "OPERATION\tKIND\tINSTANCE\tBINDING\tAGE\tSTATUS")
		for _, op := range ops {
			status := "in progress"
			if b.Now().After(op.NextCheckAt.Add(b.RepairAfter)) {
				status = "STUCK (the reaper repairs it)"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", op.ID, op.Kind, op.InstanceID, op.BindingID,
				b.Now().Sub(op.CreatedAt).Round(time.Second), status)
		}
	case "operation":
		ops, ds, err := instanceOperations(ctx, b, args[1:])
		if err != nil {
			return err
		}
		// One block per operation: a detail is a paragraph, not a column.
		for _, op := range ops {
			fmt.Fprintf(out, "operation %s  %s  %s  created %s", op.ID, op.Kind, op.State, op.CreatedAt.Format(time.RFC3339))
			if !op.FinishedAt.IsZero() {
				fmt.Fprintf(out, "  finished %s", op.FinishedAt.Format(time.RFC3339))
			}
			fmt.Fprintln(out)
			if op.BindingID != "" {
				fmt.Fprintf(out, "  binding:     %s\n", op.BindingID)
			}
			fmt.Fprintf(out, "  description: %s\n", op.Description)
			if op.Detail != "" {
				fmt.Fprintf(out, "  detail:      %s\n", op.Detail)
			}
		}
		for _, d := range ds {
			fmt.Fprintf(out, "detached %s  %s  attempts %d  resource %s  operation %s\n", d.ID, d.State, d.Attempts, d.Name, d.OperationID)
			fmt.Fprintf(out, "  reason:      %s\n", d.Reason)
			if d.InOutage() {
				fmt.Fprintf(out, "  outage:      %s\n", outageText(d, b.Now()))
			}
			if d.Failure != "" {
				fmt.Fprintf(out, "  failure:     %s\n", d.Failure)
			}
			if d.FailureDetail != "" {
				fmt.Fprintf(out, "  detail:      %s\n", d.FailureDetail)
			}
		}
	case "detached":
		ds, err := b.Detached.ListDetached(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, "ID\tSTATE\tATTEMPTS\tINSTANCE\tRESOURCE\tREASON\tFAILURE")
		for _, d := range ds {
			state := string(d.State)
			if d.InOutage() {
				state += " — " + outageText(d, b.Now())
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", d.ID, state, d.Attempts, d.InstanceID, d.Name, d.Reason, d.Failure)
		}
	case "cleanup":
		if len(args) != 2 {
			return errors.New("usage: ops cleanup DETACHED_ID")
		}
		d, err := b.RetryCleanup(ctx, args[1])
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "cleanup %s started for %s\n", d.CleanupName(d.Attempts), d.ID)
	case "reap":
		rep, err := b.Reap(ctx)
		for _, line := range []struct {
			what string
			n    int
		}{
			{"operations in progress", rep.InProgress},
			{"  started again (their execution never started)", rep.Restarted},
			{"  failed (their execution ended without a result)", rep.Failed},
			{"  stopped and failed (past their maximum polling duration)", rep.TimedOut},
			{"detached resources", rep.Detached},
			{"  cleanups started", rep.CleanupsStarted},
			{"  cleanups failed (ended without deleting the resource)", rep.CleanupsFailed},
			{"finished operation records removed after their retention", rep.Expired},
		} {
			fmt.Fprintf(w, "%s\t%d\n", line.what, line.n)
		}
		return err
	case "reseal":
		rep, err := reseal(ctx, b)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "values that may hold a secret\t%d\n", rep.Values)
		fmt.Fprintf(w, "  re-sealed under %s\t%d\n", rep.KeyID, rep.Resealed)
		fmt.Fprintf(w, "  sealed (stored before sealing)\t%d\n", rep.Sealed)
		fmt.Fprintf(w, "  under that key already\t%d\n", rep.Current)
		fmt.Fprintf(w, "  changed meanwhile (sealed by their own write)\t%d\n", rep.Changed)
		if rep.SealedOnly {
			fmt.Fprintln(w, "every value is sealed: from now on a value found in clear is refused")
		}
	case "rotate-key":
		id, err := rotateKey(b)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "key %s seals from now on; the older keys still open what they sealed: run ops reseal\n", id)
	default:
		return usageError("unknown command %q", args[0])
	}
	return nil
}

// outageText says what outage d's cleanup waits out: "backend unreachable
// (HTTP 503) since 12:03, attempt 7, next try 12:40" (UTC; with the date
// when it is not today's).
func outageText(d broker.Detached, now time.Time) string {
	at := func(t time.Time) string {
		if t.UTC().Format(time.DateOnly) == now.UTC().Format(time.DateOnly) {
			return t.UTC().Format("15:04")
		}
		return t.UTC().Format("2006-01-02 15:04")
	}
	reason := ""
	if d.OutageReason != "" {
		reason = " (" + d.OutageReason + ")"
	}
	return fmt.Sprintf("backend unreachable%s since %s, attempt %d, next try %s (UTC)", reason, at(d.OutageSince), d.OutageAttempts, at(d.NextTryAt))
}

// instanceVersion is an instance in ops instances: the version of its plan
// it runs and the catalog's.
type instanceVersion struct {
	ID        string             `json:"instance_id"`
	ServiceID string             `json:"service_id"`
	PlanID    string             `json:"plan_id"`
	State     string             `json:"state"`
	Runs      broker.PlanVersion `json:"runs"`
	// Current is nil when the catalog no longer has the plan: then the
	// instance cannot be upgraded, and Behind is false.
	Current *broker.PlanVersion `json:"current,omitempty"`
	Behind  bool                `json:"behind"`
	// Place is where the instance lives, when its driver places instances
	// (the CloudFormation driver: the account and Region of its stack).
	Place *broker.Place `json:"place,omitempty"`
}

func (l instanceVersion) behindText() string {
	switch {
	case l.Current == nil:
		return "unknown: its plan is no longer in the catalog"
	case !l.Behind:
		return "no"
	case l.Runs.Version != l.Current.Version:
		return fmt.Sprintf("yes: the plan is at %s", cmp.Or(l.Current.Version, "no maintenance_info version"))
	}
	return fmt.Sprintf("yes: the plan deploys %s", shortDigest(l.Current.Digest))
}

// placeText is the ACCOUNT, REGION and MAPPING columns of ops instances:
// where the instance lives, and whether its plan's placement would now put
// a new instance elsewhere (the instance stays where it is).
func placeText(p *broker.Place) string {
	if p == nil {
		return "-\t-\t-"
	}
	where := func(p broker.Place) (string, string) {
		return cmp.Or(p.Account, "broker's"), cmp.Or(p.Region, "broker's")
	}
	account, region := where(*p)
	mapping := "unchanged"
	switch {
	case p.Moved && p.Now == nil:
		mapping = "CHANGED: the plan places no new instance like it now"
	case p.Moved:
		a, r := where(*p.Now)
		mapping = fmt.Sprintf("CHANGED: new ones go to account %s, %s", a, r)
	}
	return account + "\t" + region + "\t" + mapping
}

// shortDigest is as much of a plan digest ("sha256:" and 64 hex digits) as
// tells digests apart to an operator's eye.
func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}

// instancesArgs are the arguments of ops instances that RunOps hands to
// Ops, which opsInstances reads back.
func instancesArgs(service, plan string, behind, moved bool) []string {
	var args []string
	if service != "" {
		args = append(args, "--service="+service)
	}
	if plan != "" {
		args = append(args, "--plan="+plan)
	}
	if behind {
		args = append(args, "--behind")
	}
	if moved {
		args = append(args, "--moved")
	}
	return args
}

// opsInstances lists the instances that args select (instancesArgs), every
// page, each with the version of its plan it runs and the catalog's.
func opsInstances(ctx context.Context, b *broker.Broker, args []string) ([]instanceVersion, error) {
	fs := flag.NewFlagSet("instances", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f broker.InstanceFilter
	fs.StringVar(&f.ServiceID, "service", "", "")
	fs.StringVar(&f.PlanID, "plan", "", "")
	behindOnly := fs.Bool("behind", false, "")
	movedOnly := fs.Bool("moved", false, "")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return nil, usageError("instances takes --service ID, --plan ID, --behind and --moved")
	}
	list := []instanceVersion{}
	for page := ""; ; {
		insts, next, err := b.Store.ListInstances(ctx, f, page)
		if err != nil {
			return nil, err
		}
		for _, inst := range insts {
			l := instanceVersion{ID: inst.ID, ServiceID: inst.ServiceID, PlanID: inst.PlanID, State: string(inst.State), Runs: inst.RunsVersion()}
			if current, ok := b.CurrentVersion(inst.ServiceID, inst.PlanID); ok {
				l.Current, l.Behind = &current, l.Runs.Behind(current)
			}
			place, ok, err := b.InstancePlace(ctx, inst)
			if err != nil {
				return nil, err
			}
			if ok {
				l.Place = &place
			}
			if (l.Behind || !*behindOnly) && (!*movedOnly || (l.Place != nil && l.Place.Moved)) {
				list = append(list, l)
			}
		}
		if page = next; page == "" {
			break
		}
	}
	slices.SortFunc(list, func(a, b instanceVersion) int { return cmp.Compare(a.ID, b.ID) })
	return list, nil
}

// instanceOperations are the operations of the instance args[0] names,
// oldest first (only args[1] when given), and the detached resources they
// left. Finished operations are kept for broker.Retention; a detached
// record is kept until its resource is deleted.
func instanceOperations(ctx context.Context, b *broker.Broker, args []string) ([]broker.Operation, []broker.Detached, error) {
	instanceID := args[0]
	var ops []broker.Operation
	if len(args) == 2 {
		op, err := b.Store.GetOperation(ctx, instanceID, args[1])
		if errors.Is(err, broker.ErrNotFound) {
			return nil, nil, fmt.Errorf("instance %s has no operation %s (finished operations are kept %s)", instanceID, args[1], broker.Retention)
		}
		if err != nil {
			return nil, nil, err
		}
		ops = []broker.Operation{op}
	} else {
		var err error
		if ops, err = b.Store.ListOperations(ctx, instanceID); err != nil {
			return nil, nil, err
		}
		if len(ops) == 0 {
			return nil, nil, fmt.Errorf("instance %s has no operation (finished operations are kept %s)", instanceID, broker.Retention)
		}
		slices.SortStableFunc(ops, func(a, b broker.Operation) int { return a.CreatedAt.Compare(b.CreatedAt) })
	}
	all, err := b.Detached.ListDetached(ctx)
	if err != nil {
		return nil, nil, err
	}
	var ds []broker.Detached
	for _, d := range all {
		if d.InstanceID == instanceID && (len(args) == 1 || d.OperationID == args[1]) {
			ds = append(ds, d)
		}
	}
	return ops, ds, nil
}

// sealingStore is the broker's sealing store.
func sealingStore(b *broker.Broker) (*sealing.Store, error) {
	s, ok := b.Store.(*sealing.Store)
	if !ok {
		return nil, errors.New("this broker does not seal its secrets (deployed: its stack sets no " + env.SealingKeyARN + ")")
	}
	return s, nil
}

func reseal(ctx context.Context, b *broker.Broker) (sealing.ResealReport, error) {
	s, err := sealingStore(b)
	if err != nil {
		return sealing.ResealReport{}, err
	}
	return s.Reseal(ctx)
}

// rotateKey adds a local sealing key; a KMS key is changed in the stack.
func rotateKey(b *broker.Broker) (string, error) {
	s, err := sealingStore(b)
	if err != nil {
		return "", err
	}
	local, ok := s.Sealer.(*sealing.Local)
	if !ok {
		return "", errors.New("rotate-key makes a local key: the deployed broker seals with its stack's KMS key, which KMS rotates itself (to change it, see docs/operate.md)")
	}
	return local.Rotate()
}

// OpsJSON runs one operator command on b, answering in JSON: a list of
// objects for operations and detached, one object for operation, cleanup
// and reap.
func OpsJSON(ctx context.Context, b *broker.Broker, args []string, out io.Writer) error {
	var answer any
	var err error
	switch args[0] {
	case "instances":
		var list []instanceVersion
		if list, err = opsInstances(ctx, b, args[1:]); err != nil {
			return err
		}
		answer = list
	case "operations":
		type operation struct {
			ID         string  `json:"operation_id"`
			Kind       string  `json:"kind"`
			InstanceID string  `json:"instance_id"`
			BindingID  string  `json:"binding_id,omitempty"`
			AgeSeconds float64 `json:"age_seconds"`
			Stuck      bool    `json:"stuck"`
		}
		var ops []broker.Operation
		if ops, err = b.Store.ListInProgress(ctx); err != nil {
			return err
		}
		list := []operation{}
		for _, op := range ops {
			list = append(list, operation{op.ID, string(op.Kind), op.InstanceID, op.BindingID,
				b.Now().Sub(op.CreatedAt).Round(time.Second).Seconds(), b.Now().After(op.NextCheckAt.Add(b.RepairAfter))})
		}
		answer = list
	case "operation":
		ops, ds, err := instanceOperations(ctx, b, args[1:])
		if err != nil {
			return err
		}
		answer = instanceAnswer(args[1], ops, ds)
	case "detached":
		var ds []broker.Detached
		if ds, err = b.Detached.ListDetached(ctx); err != nil {
			return err
		}
		list := []detachedAnswer{}
		for _, d := range ds {
			list = append(list, newDetachedAnswer(d))
		}
		answer = list
	case "cleanup":
		var d broker.Detached
		if d, err = b.RetryCleanup(ctx, args[1]); err != nil {
			return err
		}
		answer = map[string]string{"detached_id": d.ID, "execution": d.CleanupName(d.Attempts)}
	case "reap":
		var rep broker.ReapReport
		rep, err = b.Reap(ctx)
		answer = reapAnswer(rep)
	case "reseal":
		var rep sealing.ResealReport
		if rep, err = reseal(ctx, b); err != nil {
			return err
		}
		answer = rep
	case "rotate-key":
		var id string
		if id, err = rotateKey(b); err != nil {
			return err
		}
		answer = map[string]string{"key_id": id}
	default:
		return usageError("unknown command %q", args[0])
	}
	if encErr := writeJSON(out, answer); encErr != nil {
		return encErr
	}
	return err
}

// reapAnswer is what the reaper did, in ops' JSON.
type reapAnswer struct {
	InProgress      int `json:"in_progress"`
	Restarted       int `json:"restarted"`
	Failed          int `json:"failed"`
	TimedOut        int `json:"timed_out"`
	Detached        int `json:"detached"`
	CleanupsStarted int `json:"cleanups_started"`
	CleanupsFailed  int `json:"cleanups_failed"`
	Expired         int `json:"expired"`
}

// detachedAnswer is a detached resource in ops' JSON.
type detachedAnswer struct {
	ID            string `json:"id"`
	State         string `json:"state"`
	Attempts      int    `json:"attempts"`
	InstanceID    string `json:"instance_id"`
	Resource      string `json:"resource"`
	OperationID   string `json:"operation_id"`
	Reason        string `json:"reason,omitempty"`
	Failure       string `json:"failure,omitempty"`
	FailureDetail string `json:"failure_detail,omitempty"`
	// Outage is the outage of the service's backend that the cleanup
	// waits out; absent when none.
	Outage *outageAnswer `json:"outage,omitempty"`
}

// outageAnswer is a cleanup's outage in ops' JSON.
type outageAnswer struct {
	Since     time.Time `json:"since"`
	Attempts  int       `json:"attempts"`
	Reason    string    `json:"reason,omitempty"`
	NextTryAt time.Time `json:"next_try_at"`
}

func newDetachedAnswer(d broker.Detached) detachedAnswer {
	a := detachedAnswer{ID: d.ID, State: string(d.State), Attempts: d.Attempts, InstanceID: d.InstanceID, Resource: d.Name,
		OperationID: d.OperationID, Reason: d.Reason, Failure: d.Failure, FailureDetail: d.FailureDetail}
	if d.InOutage() {
		a.Outage = &outageAnswer{Since: d.OutageSince, Attempts: d.OutageAttempts, Reason: d.OutageReason, NextTryAt: d.NextTryAt}
	}
	return a
}

// operationAnswer is an operation in ops' JSON, with its detail for the
// operator.
type operationAnswer struct {
	ID          string     `json:"operation_id"`
	Kind        string     `json:"kind"`
	BindingID   string     `json:"binding_id,omitempty"`
	State       string     `json:"state"`
	Description string     `json:"description,omitempty"`
	Detail      string     `json:"detail,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
}

// instanceAnswer is the answer of ops operation in JSON.
func instanceAnswer(instanceID string, ops []broker.Operation, ds []broker.Detached) any {
	answer := struct {
		InstanceID string            `json:"instance_id"`
		Operations []operationAnswer `json:"operations"`
		Detached   []detachedAnswer  `json:"detached"`
	}{InstanceID: instanceID, Operations: []operationAnswer{}, Detached: []detachedAnswer{}}
	for _, op := range ops {
		a := operationAnswer{ID: op.ID, Kind: string(op.Kind), BindingID: op.BindingID, State: string(op.State),
			Description: op.Description, Detail: op.Detail, CreatedAt: op.CreatedAt}
		if !op.FinishedAt.IsZero() {
			a.FinishedAt = &op.FinishedAt
		}
		answer.Operations = append(answer.Operations, a)
	}
	for _, d := range ds {
		answer.Detached = append(answer.Detached, newDetachedAnswer(d))
	}
	return answer
}

// loadAWSConfig is the whole configuration chain (profiles, SSO), for
// the operator's command; the functions read their environment alone
// (functionConfig).
func loadAWSConfig(ctx context.Context, c LambdaConfig, logger *slog.Logger) (aws.Config, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(c.Store.Region))
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	return instrumented(cfg, c, logger)
}
