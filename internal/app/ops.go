package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/engine/sfn"
	"github.com/serverless-osb/broker/internal/store/dynamo"
)

// OpsUsage is the operator command's help.
const OpsUsage = `usage: go run ./functions/api ops COMMAND

  operations        operations in progress, with those overdue marked STUCK
  detached          detached resources: waiting for, in, or given up by the cleanup
  cleanup ID        start the cleanup of detached resource ID again
  reap              run the reaper once and print what it did

With BROKER_TABLE (and AWS_REGION, BROKER_OPERATION_STATE_MACHINE_ARN,
BROKER_CLEANUP_STATE_MACHINE_ARN) set, it works on the deployed broker;
otherwise on the local one's data (BROKER_DATA_DIR; stop make run first).
`

// RunOps runs the operator command.
func RunOps(ctx context.Context, args []string, out io.Writer, logger *slog.Logger) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" {
		fmt.Fprint(out, OpsUsage)
		return nil
	}
	b, closeFn, err := opsBroker(ctx, logger)
	if err != nil {
		return err
	}
	defer closeFn()
	return Ops(ctx, b, args, out)
}

// opsBroker builds the broker the operator works on: the deployed one when
// BROKER_TABLE is set, else the local data, without serving or reaping.
func opsBroker(ctx context.Context, logger *slog.Logger) (*broker.Broker, func(), error) {
	if os.Getenv(dynamo.EnvTable) != "" {
		c, err := LambdaConfigFromEnv(FunctionWorker)
		if err != nil {
			return nil, nil, err
		}
		awsCfg, err := loadAWSConfig(ctx, c)
		if err != nil {
			return nil, nil, err
		}
		cat, st, err := buildSteps(ctx, c, awsCfg, logger)
		if err != nil {
			return nil, nil, err
		}
		eng := sfn.New(awssfn.NewFromConfig(awsCfg), c.stateMachines())
		st.Engine = eng
		return broker.New(cat, st.Store, eng, st, logger), func() {}, nil
	}
	c, err := LocalConfigFromEnv()
	if err != nil {
		return nil, nil, err
	}
	c.ReapInterval = -1
	l, err := OpenLocal(ctx, c, logger)
	if err != nil {
		return nil, nil, err
	}
	return l.Broker, func() { _ = l.Close() }, nil
}

// Ops runs one operator command on b.
func Ops(ctx context.Context, b *broker.Broker, args []string, out io.Writer) error {
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	defer w.Flush()
	switch args[0] {
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
	case "detached":
		ds, err := b.Store.ListDetached(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, "ID\tSTATE\tATTEMPTS\tINSTANCE\tRESOURCE\tREASON\tFAILURE")
		for _, d := range ds {
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", d.ID, d.State, d.Attempts, d.InstanceID, d.Name, d.Reason, d.Failure)
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
		fmt.Fprintf(w, "%+v\n", rep)
		return err
	default:
		return fmt.Errorf("unknown ops command %q\n%s", args[0], OpsUsage)
	}
	return nil
}
