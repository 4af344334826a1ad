//go:build !lambda.norpc

package app

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// UpgradeUsage is the help of ops upgrade, part of OpsUsage.
const UpgradeUsage = `  upgrade start (--plan ID... | --all) [--canaries N | --canary-org GUID... | --canary-space GUID...]
                [--max-in-flight N] [--max-failures K] [--skip ID,...] [--defer ID,...]
                [--dry-run] [--wait]
                    upgrade every instance of the plans (or of all plans) that runs behind
                    its plan's maintenance_info version: canaries first, then at most N at
                    a time (default 1, at most 50), stopping after K failures (default 1;
                    an instance blocked by its own state, busy for an hour or with
                    parameters the new version refuses, does not count); --skip leaves
                    the instances named as they are, --defer upgrades them last (never
                    as canaries); --dry-run previews each upgrade and changes nothing.
                    Prints the campaign's id; --wait (always, locally) follows it to its end
  upgrade status ID every instance's result in the campaign; exit 1 when one failed, was
                    blocked, would be refused or was not attempted
  upgrade list      the campaigns kept (30 days after they end)
`

// stringList is a flag given any number of times.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// idList is a flag of instance ids, comma-separated, given any number of
// times.
type idList []string

func (l *idList) String() string { return strings.Join(*l, ",") }
func (l *idList) Set(v string) error {
	for id := range strings.SplitSeq(v, ",") {
		if id = strings.TrimSpace(id); id == "" {
			return errors.New("an empty instance id")
		}
		*l = append(*l, id)
	}
	return nil
}

// upgradeCommand is ops upgrade's command line, parsed.
type upgradeCommand struct {
	sub     string
	id      string
	options broker.CampaignOptions
	wait    bool
}

// parseUpgrade parses the words after "upgrade"; asJSON and stack are the
// global flags, which may come here too.
func parseUpgrade(args []string, asJSON *bool, stack *string) (upgradeCommand, error) {
	var u upgradeCommand
	if len(args) == 0 {
		return u, usageError("upgrade needs start, status ID or list")
	}
	u.sub, args = args[0], args[1:]
	fs := flag.NewFlagSet("ops upgrade", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(asJSON, "json", *asJSON, "")
	fs.StringVar(stack, "stack", *stack, "")
	var plans, orgs, spaces stringList
	var skip, deferred idList
	o := &u.options
	if u.sub == "start" {
		fs.Var(&plans, "plan", "")
		fs.BoolVar(&o.All, "all", false, "")
		fs.IntVar(&o.Canaries, "canaries", 0, "")
		fs.Var(&orgs, "canary-org", "")
		fs.Var(&spaces, "canary-space", "")
		fs.IntVar(&o.MaxInFlight, "max-in-flight", 1, "")
		fs.IntVar(&o.MaxFailures, "max-failures", 1, "")
		fs.BoolVar(&o.DryRun, "dry-run", false, "")
		fs.Var(&skip, "skip", "")
		fs.Var(&deferred, "defer", "")
		fs.BoolVar(&u.wait, "wait", false, "")
	}
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return u, usageError("upgrade %s: %v", u.sub, err)
		}
		if args = fs.Args(); len(args) == 0 {
			break
		}
		positional, args = append(positional, args[0]), args[1:]
	}
	o.PlanIDs, o.CanaryOrgs, o.CanarySpaces, o.Skip, o.Defer = plans, orgs, spaces, skip, deferred
	switch u.sub {
	case "start", "list":
		if len(positional) > 0 {
			return u, usageError("upgrade %s takes no argument, got %q", u.sub, positional[0])
		}
	case "status":
		if len(positional) != 1 {
			return u, usageError("upgrade status takes one argument, the campaign's id")
		}
		u.id = positional[0]
	default:
		return u, usageError("unknown upgrade command %q: want start, status or list", u.sub)
	}
	return u, nil
}

// OpsUpgrade runs ops upgrade's words (those after "upgrade") on b, as
// the operator command does; local says the engine runs in this process
// (a start then follows its campaign to its end).
func OpsUpgrade(ctx context.Context, b *broker.Broker, args []string, asJSON, local bool, out io.Writer) error {
	stack := ""
	u, err := parseUpgrade(args, &asJSON, &stack)
	if err != nil {
		return err
	}
	if err := checkUpgrade(ctx, b, u); err != nil {
		return err
	}
	return runUpgrade(ctx, b, u, asJSON, local, out)
}

// checkUpgrade checks a start's options against the broker's catalog and
// the instances it names against its store: a usage error naming what to
// fix.
func checkUpgrade(ctx context.Context, b *broker.Broker, u upgradeCommand) error {
	if u.sub != "start" {
		return nil
	}
	if err := u.options.Check(b.Catalog); err != nil {
		return usageError("upgrade start: %v", err)
	}
	err := u.options.CheckInstances(ctx, b.Catalog, b.Store.GetInstance)
	if oe := (*broker.OptionsError)(nil); errors.As(err, &oe) {
		return usageError("upgrade start: %v", oe)
	}
	return err
}

// runUpgrade runs ops upgrade on b; local says the engine runs in this
// process (a start then follows its campaign to the end).
func runUpgrade(ctx context.Context, b *broker.Broker, u upgradeCommand, asJSON, local bool, out io.Writer) error {
	if !asJSON {
		cw := newCleanWriter(out)
		defer cw.flush()
		out = cw
	}
	switch u.sub {
	case "start":
		id, err := startCampaign(ctx, b, u.options)
		if err != nil {
			return err
		}
		if !u.wait && !local {
			if asJSON {
				return writeJSON(out, map[string]string{"campaign_id": id})
			}
			fmt.Fprintf(out, "campaign %s started; follow it with: ops upgrade status %s\n", id, id)
			return nil
		}
		if !asJSON {
			fmt.Fprintf(out, "campaign %s started\n", id)
		}
		if err := waitCampaign(ctx, b, id); err != nil {
			return err
		}
		return campaignStatus(ctx, b, id, asJSON, out)
	case "status":
		return campaignStatus(ctx, b, u.id, asJSON, out)
	case "list":
		return listCampaigns(ctx, b, asJSON, out)
	}
	return usageError("unknown upgrade command %q", u.sub)
}

// startCampaign starts a campaign's execution under a new id (the Plan
// Task writes the campaign).
func startCampaign(ctx context.Context, b *broker.Broker, o broker.CampaignOptions) (string, error) {
	if b.Campaigns == nil {
		return "", errors.New("this broker keeps no fleet upgrades")
	}
	id := broker.NewCampaignID(b.Now(), rand.Text())
	input, _ := json.Marshal(broker.CampaignInput{CampaignID: id, Options: o, Part: 1})
	if err := b.Engine.Start(ctx, broker.WorkflowUpgrade, id, input); err != nil {
		return "", fmt.Errorf("start campaign %s: %w (a stack deployed before the fleet upgrade has no upgrade workflow: deploy this version)", id, err)
	}
	return id, nil
}

// campaignExecution is the execution that runs campaign id now: the
// newest of its parts (broker.CampaignExecution), each started by the one
// before it; ErrExecutionNotFound when there is none.
func campaignExecution(ctx context.Context, b *broker.Broker, id string) (broker.Execution, int, error) {
	exec, err := b.Engine.Describe(ctx, id)
	if err != nil {
		return exec, 0, err
	}
	part := 1
	for {
		next, err := b.Engine.Describe(ctx, broker.CampaignExecution(id, part+1))
		if errors.Is(err, broker.ErrExecutionNotFound) {
			return exec, part, nil
		}
		if err != nil {
			return exec, part, err
		}
		exec, part = next, part+1
	}
}

// waitCampaign waits until campaign id ended, or the execution running it
// ended without continuing it in another.
func waitCampaign(ctx context.Context, b *broker.Broker, id string) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		c, _, err := b.Campaigns.LoadCampaign(ctx, id)
		switch {
		case err == nil && c.State != broker.CampaignRunning:
			return nil
		case err != nil && !errors.Is(err, broker.ErrNotFound):
			return fmt.Errorf("follow campaign %s: %w", id, err)
		}
		// A part that succeeded either ended the campaign (read again next
		// time) or started the next part first; any other end is the
		// campaign's, and says why.
		exec, _, err := campaignExecution(ctx, b, id)
		if err == nil && exec.Status != broker.ExecutionRunning && exec.Status != broker.ExecutionSucceeded {
			return fmt.Errorf("campaign %s: its execution %s ended %s: %s %s", id, cmp.Or(exec.Name, id), exec.Status, exec.Error, exec.Cause)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("campaign %s is still running (ops upgrade status %s): %w", id, id, ctx.Err())
		case <-tick.C:
		}
	}
}

// campaignAnswer is a campaign in ops' JSON.
type campaignAnswer struct {
	ID      string        `json:"campaign_id"`
	State   string        `json:"state"`
	Options optionsAnswer `json:"options"`
	Outcome string        `json:"outcome,omitempty"`
	// Execution is the newest execution of the campaign (it continues in
	// a new one when an execution's history would grow too long), Part
	// its number, ExecutionStatus its status.
	Execution       string               `json:"execution,omitempty"`
	Part            int                  `json:"part,omitempty"`
	ExecutionStatus string               `json:"execution_status,omitempty"`
	CreatedAt       time.Time            `json:"created_at"`
	FinishedAt      *time.Time           `json:"finished_at,omitempty"`
	Tally           *tallyAnswer         `json:"tally,omitempty"`
	Items           []campaignItemAnswer `json:"items,omitempty"`
}

// optionsAnswer and tallyAnswer are a campaign's options and the count of
// its items by state in ops' JSON: the operator's words, which the
// workflow's (package steps') may not change.
type optionsAnswer struct {
	PlanIDs      []string `json:"plan_ids,omitempty"`
	All          bool     `json:"all,omitempty"`
	Canaries     int      `json:"canaries,omitempty"`
	CanaryOrgs   []string `json:"canary_orgs,omitempty"`
	CanarySpaces []string `json:"canary_spaces,omitempty"`
	MaxInFlight  int      `json:"max_in_flight"`
	MaxFailures  int      `json:"max_failures"`
	DryRun       bool     `json:"dry_run,omitempty"`
	Skip         []string `json:"skip,omitempty"`
	Defer        []string `json:"defer,omitempty"`
}

type tallyAnswer struct {
	Items        int  `json:"items"`
	Pending      int  `json:"pending"`
	Running      int  `json:"running"`
	Busy         int  `json:"busy"`
	Upgraded     int  `json:"upgraded"`
	Failed       int  `json:"failed"`
	Skipped      int  `json:"skipped"`
	NotAttempted int  `json:"not_attempted"`
	WouldChange  int  `json:"would_change"`
	WouldRefuse  int  `json:"would_refuse"`
	CanaryFailed bool `json:"canary_failed,omitempty"`
	Blocked      int  `json:"blocked"`
}

type campaignItemAnswer struct {
	InstanceID  string   `json:"instance_id"`
	PlanID      string   `json:"plan_id"`
	Canary      bool     `json:"canary"`
	State       string   `json:"state"`
	FromVersion string   `json:"from_version,omitempty"`
	ToVersion   string   `json:"to_version,omitempty"`
	Deferred    bool     `json:"deferred,omitempty"`
	OperationID string   `json:"operation_id,omitempty"`
	Attempts    int      `json:"busy_attempts,omitempty"`
	Description string   `json:"description,omitempty"`
	Changes     []string `json:"changes,omitempty"`
}

func newCampaignAnswer(c broker.Campaign) campaignAnswer {
	a := campaignAnswer{ID: c.ID, State: string(c.State), Options: optionsAnswer(c.Options), Outcome: c.Outcome, CreatedAt: c.CreatedAt}
	if !c.FinishedAt.IsZero() {
		a.FinishedAt = &c.FinishedAt
	}
	return a
}

// campaignStatus prints a campaign and every item's result. Its error,
// for a non-zero exit, says how many failed, would be refused or were not
// attempted.
func campaignStatus(ctx context.Context, b *broker.Broker, id string, asJSON bool, out io.Writer) error {
	if b.Campaigns == nil {
		return errors.New("this broker keeps no fleet upgrades")
	}
	c, items, err := b.Campaigns.LoadCampaign(ctx, id)
	if errors.Is(err, broker.ErrNotFound) {
		exec, derr := b.Engine.Describe(ctx, id)
		switch {
		case derr == nil && exec.Status == broker.ExecutionRunning:
			return fmt.Errorf("campaign %s is being planned; ask again in a moment", id)
		case derr == nil:
			return fmt.Errorf("campaign %s was not planned: its execution ended %s: %s %s", id, exec.Status, exec.Error, exec.Cause)
		}
		return fmt.Errorf("no campaign %s (campaigns are kept %s after they end)", id, broker.CampaignRetention)
	}
	if err != nil {
		return err
	}
	t := broker.TallyItems(items)
	exec, part, xerr := campaignExecution(ctx, b, id)
	if asJSON {
		a := newCampaignAnswer(c)
		a.Tally, a.Items = (*tallyAnswer)(&t), []campaignItemAnswer{}
		if xerr == nil {
			a.Execution, a.Part, a.ExecutionStatus = cmp.Or(exec.Name, broker.CampaignExecution(id, part)), part, string(exec.Status)
		}
		for _, it := range items {
			a.Items = append(a.Items, campaignItemAnswer{InstanceID: it.InstanceID, PlanID: it.PlanID, Canary: it.Canary,
				State: string(it.State), FromVersion: it.FromVersion, ToVersion: it.ToVersion, Deferred: it.Deferred, OperationID: it.OperationID,
				Attempts: it.Attempts, Description: it.Description, Changes: it.Changes})
		}
		if err := writeJSON(out, a); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(out, "campaign %s  %s  created %s", c.ID, c.State, c.CreatedAt.Format(time.RFC3339))
		if c.Options.DryRun {
			fmt.Fprint(out, "  dry run")
		}
		fmt.Fprintln(out)
		fmt.Fprintf(out, "  progress: %d items: %d upgraded, %d failed, %d blocked, %d skipped, %d not attempted, %d running, %d busy, %d pending",
			t.Items, t.Upgraded, t.Failed, t.Blocked, t.Skipped, t.NotAttempted, t.Running, t.Busy, t.Pending)
		if c.Options.DryRun {
			fmt.Fprintf(out, ", %d would change, %d would be refused", t.WouldChange, t.WouldRefuse)
		}
		fmt.Fprintln(out)
		if c.Outcome != "" {
			fmt.Fprintf(out, "  outcome:  %s\n", c.Outcome)
		}
		if xerr == nil {
			fmt.Fprintf(out, "  execution: %s (part %d) %s\n", cmp.Or(exec.Name, broker.CampaignExecution(id, part)), part, exec.Status)
		}
		w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(w, "INSTANCE\tPLAN\tTURN\tFROM\tTO\tSTATE\tDESCRIPTION")
		for _, it := range items {
			turn := ""
			switch {
			case it.Canary:
				turn = "canary"
			case it.Deferred:
				turn = "deferred"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", it.InstanceID, it.PlanID, turn, it.FromVersion, it.ToVersion, it.State, it.Description)
			for _, ch := range it.Changes {
				fmt.Fprintf(w, "\t\t\t\t\t\t  %s\n", ch)
			}
		}
		w.Flush()
	}
	if t.Failed+t.Blocked+t.WouldRefuse+t.NotAttempted > 0 {
		return fmt.Errorf("campaign %s: %d failed, %d blocked, %d would be refused, %d not attempted", id, t.Failed, t.Blocked, t.WouldRefuse, t.NotAttempted)
	}
	return nil
}

func listCampaigns(ctx context.Context, b *broker.Broker, asJSON bool, out io.Writer) error {
	if b.Campaigns == nil {
		return errors.New("this broker keeps no fleet upgrades")
	}
	cs, err := b.Campaigns.ListCampaigns(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		list := []campaignAnswer{}
		for _, c := range cs {
			list = append(list, newCampaignAnswer(c))
		}
		return writeJSON(out, list)
	}
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	defer w.Flush()
	fmt.Fprintln(w, "CAMPAIGN\tSTATE\tCREATED\tDRY RUN\tOUTCOME")
	for _, c := range cs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%v\t%s\n", c.ID, c.State, c.CreatedAt.Format(time.RFC3339), c.Options.DryRun, c.Outcome)
	}
	return nil
}

// writeJSON writes v as indented JSON, cleaned (cleanJSON).
func writeJSON(out io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := out.Write(cleanJSON(buf.Bytes()))
	return err
}
