// Command sandbox runs the deployed stack on this machine (internal/sandbox):
// `make sandbox` synthesizes the template and runs it; with TEMPLATE, it runs
// a template already synthesized, with the assets beside it. It stops
// everything it started on Ctrl-C.
//
//	go run ./internal/tools/sandbox -template cdk.out/ServerlessOsb.template.json
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/serverless-osb/broker/internal/sandbox"
)

func main() {
	var c sandbox.Config
	flag.StringVar(&c.Template, "template", "cdk.out", "the synthesized template, or the folder holding it (cdk.out), with the functions' assets beside it")
	flag.StringVar(&c.Dir, "dir", ".sandbox", "where the sandbox keeps its logs and the bootstraps it builds for this machine")
	flag.DurationVar(&c.ScheduleInterval, "schedule-interval", 30*time.Second, "how often the template's schedules (the reaper) run")
	flag.IntVar(&c.Environments, "environments", sandbox.DefaultEnvironments, "execution environments each function may run at once (as Lambda's concurrency; a reserved concurrency in the template lowers it)")
	flag.BoolVar(&c.Keep, "keep", false, "take up the state (moto, still running) a run with -keep left in -dir, and keep it when stopped (make sandbox KEEP=1)")
	var target sandbox.Target
	flag.StringVar(&target.Template, "target-template", "cdk.out.target", "the target stack's template (cdk synth -c target=true), or the folder holding it, deployed into -target-account")
	flag.StringVar(&target.Account, "target-account", "", "the account of the catalog's placement, where the sandbox deploys the target stack (make sandbox TARGET_ACCOUNT=...)")
	flag.StringVar(&target.Region, "target-region", "", "the Region of the placement, where the target stack goes (default the sandbox's)")
	flag.StringVar(&target.ExternalID, "target-external-id", "", "the external id the target role requires: the catalog's for it")
	deploy := flag.Bool("deploy", false, "deploy -template into the sandbox running in -dir, as cdk deploy updates the stack (make sandbox-deploy), and exit")
	flag.Parse()
	c.Addr = cmp.Or(os.Getenv("BROKER_ADDR"), "127.0.0.1:8080")
	if target.Account != "" {
		var err error
		if target.Template, err = template(target.Template); err != nil {
			fmt.Fprintln(os.Stderr, "sandbox:", err)
			os.Exit(1)
		}
		c.Targets = []sandbox.Target{target}
	}
	c.Log = os.Stderr
	if *deploy {
		err := deployTo(c)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sandbox deploy:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		os.Exit(1)
	}
}

// template finds the template in a folder (cdk.out) that holds one.
func template(path string) (string, error) {
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		matches, _ := filepath.Glob(filepath.Join(path, "*.template.json"))
		if len(matches) != 1 {
			return "", fmt.Errorf("%s holds %d templates: name one with -template (make sandbox TEMPLATE=...)", path, len(matches))
		}
		return matches[0], nil
	}
	return path, nil
}

// deployTo asks the sandbox running in c.Dir to deploy c.Template.
func deployTo(c sandbox.Config) error {
	t, err := template(c.Template)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	report, err := sandbox.RequestDeploy(ctx, c.Dir, t)
	for _, line := range report {
		fmt.Println(line)
	}
	if err == nil {
		fmt.Printf("deployed %s into the sandbox of %s\n", t, c.Dir)
	}
	return err
}

func run(c sandbox.Config) error {
	var err error
	if c.Template, err = template(c.Template); err != nil {
		return err
	}
	// A run without -keep starts afresh: the moto a kept run left goes.
	if !c.Keep {
		if err := sandbox.StopKept(c.Dir); err != nil {
			return err
		}
		if err := os.RemoveAll(c.Dir); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sb, err := sandbox.Start(ctx, c)
	if err != nil {
		return err
	}
	defer sb.Close()
	// The stack's own output names the broker's URL (with its stage's path).
	url := cmp.Or(sb.Outputs["BrokerUrl"], sb.URL)
	fmt.Printf("serverless-osb sandbox is listening on %s (stack %s, moto on %s, logs in %s)\n", url, c.Template, sb.Moto, sb.Dir)
	if sb.Kept {
		fmt.Println("took up the state the last run kept (KEEP=1): its moto, with every instance, binding and stack")
	}
	fmt.Printf("basic auth: username %q, stack secret password %q (secret %s)\n", sb.Username, sb.Password, sb.SecretARN)
	// ops finds the broker from the stack's outputs, on moto's
	// CloudFormation, as it does in the account.
	if creds, err := sb.Admin.Credentials.Retrieve(ctx); err == nil {
		fmt.Printf("ops on it: AWS_ENDPOINT_URL=%s AWS_REGION=%s AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s BROKER_CATALOG=%s make ops ARGS='--stack %s COMMAND'\n",
			sb.Moto, sb.Outputs["Region"], creds.AccessKeyID, creds.SecretAccessKey, sb.Catalog(), sb.StackName)
	}
	if len(sb.NotMade) > 0 {
		fmt.Printf("not in the sandbox: %d resources (alarms, dashboards, ...; see docs/sandbox.md)\n", len(sb.NotMade))
	}
	// A line per plan whose stack moto cannot make: the front refuses it.
	for _, p := range sb.Unrunnable() {
		fmt.Printf("cannot run here (provisions refused with 422): %s\n", p)
	}
	<-ctx.Done()
	if c.Keep {
		fmt.Printf("sandbox: stopping; moto keeps running with the state for the next make sandbox KEEP=1 (make sandbox without KEEP ends it)\n")
		return nil
	}
	fmt.Println("sandbox: stopping")
	return nil
}
