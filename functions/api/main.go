// Command api serves the OSB API. Run locally (`make run`) it is a complete
// broker on 127.0.0.1 with an embedded store and an in-process workflow
// engine; see the README for its environment variables.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/logging"
)

func main() {
	logger := logging.New(os.Stderr, slog.LevelInfo)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.RunLocal(ctx, os.Stdout, logger); err != nil {
		fmt.Fprintln(os.Stderr, "serverless-osb:", err)
		os.Exit(1)
	}
}
