//go:build lambda.norpc

package app

import (
	"context"
	"errors"
	"io"
)

// runAudit is not in the Lambda build: ops audit is the operator's
// command (functions/api built without lambda.norpc), and leaving it out
// leaves out the IAM client, whose package init (its endpoint table) the
// functions ran at every cold start without ever calling IAM.
func runAudit(context.Context, string, bool, io.Writer) error {
	return errors.New("ops audit is not in the Lambda build: run it with the operator's command (make ops ARGS='audit')")
}
