//go:build !lambda.norpc

package app

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Usage is the api command's help, outside Lambda.
const Usage = `usage: go run ./functions/api            run the local broker (what make run does)
       go run ./functions/api ops ...    the operator command (go run ./functions/api ops help)

The local broker listens on BROKER_ADDR (default 127.0.0.1:8080) with the embedded
store in BROKER_DATA_DIR (default .data), serving BROKER_CATALOG (default catalog.yaml).
BROKER_USERNAME and BROKER_PASSWORD set its credentials (default: broker and a
generated password, printed at start); see README.md for every variable.
`

// errHelp is the answer to a request for help: the usage, and a non-zero
// exit, as Go's flag package answers -h.
var errHelp = errors.New("help requested")

// RunCommand runs the api command outside Lambda with args (without the
// program's name): the local broker, or the operator command. It answers
// anything else with an error holding the usage (and help with the usage
// on stderr), rather than starting a broker the caller did not ask for.
func RunCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	switch {
	case len(args) == 0:
		return RunLocal(ctx, stdout, stderr)
	case args[0] == "ops":
		// Its errors may quote a stored record's words.
		return cleanErr(RunOps(ctx, args[1:], stdout, stderr))
	case args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help":
		fmt.Fprint(stderr, Usage)
		return errHelp
	}
	return fmt.Errorf("%w: unknown argument %q\n\n%s", ErrUsage, args[0], Usage)
}

// ExitCode is the exit status for err: 0 for none, 2 for a command line
// the command did not understand (or a request for help), 1 otherwise.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errHelp), errors.Is(err, ErrUsage):
		return 2
	}
	return 1
}

// IsHelp reports whether err only says that help was printed.
func IsHelp(err error) bool { return errors.Is(err, errHelp) }
