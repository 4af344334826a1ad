package app_test

import (
	"context"
	"io"
	"runtime/debug"
	"testing"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/env"
)

// The functions collect garbage at GOGC=400 within three quarters of their
// memory (app.functionGC), and the `make run` broker at GOGC=400, unless
// the environment says otherwise: at the default the collector ran twice
// in the api's cold start, and about ten times in a burst of 1,000
// provisions.
func TestTheFunctionsCollectLessOftenWithinTheirMemory(t *testing.T) {
	// Each refuses to start once it has set its collector: the functions
	// without a table, the make run broker at the log level "loud". The
	// functions keep within their memory; the make run broker has none.
	brokers := map[string]struct {
		start   func(context.Context) error
		limited bool
	}{
		"api function":    {func(ctx context.Context) error { _, err := app.NewLambdaAPI(ctx); return err }, true},
		"worker function": {func(ctx context.Context) error { _, err := app.NewWorker(ctx); return err }, true},
		"make run broker": {func(ctx context.Context) error { return app.RunLocal(ctx, io.Discard, io.Discard) }, false},
	}
	for name, broker := range brokers {
		for _, tc := range []struct {
			name, limitName, gogc, memlimit string
			wantPercent                     int
			wantLimit                       int64
		}{
			{name: "at GOGC=400", limitName: "and a limit at 3/4 of the function's 256 MB", wantPercent: 400, wantLimit: 192 << 20},
			{name: "as GOGC and GOMEMLIMIT say when set", gogc: "50", memlimit: "64MiB", wantPercent: 100, wantLimit: 1 << 40},
		} {
			label := tc.name
			switch {
			case tc.limitName == "":
			case broker.limited:
				label += " " + tc.limitName
			default:
				label, tc.wantLimit = label+", with no memory limit", 1<<40
			}
			t.Run("the "+name+" collects "+label, func(t *testing.T) {
				percent, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(1<<40)
				t.Cleanup(func() { debug.SetGCPercent(percent); debug.SetMemoryLimit(limit) })
				t.Setenv("GOGC", tc.gogc)
				t.Setenv("GOMEMLIMIT", tc.memlimit)
				t.Setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
				t.Setenv(env.Table, "")
				t.Setenv("BROKER_LOG_LEVEL", "loud")
				if err := broker.start(t.Context()); err == nil {
					t.Fatal("it started without a table or at the log level loud")
				}
				if got := debug.SetGCPercent(100); got != tc.wantPercent {
					t.Errorf("GC percent %d, want %d", got, tc.wantPercent)
				}
				if got := debug.SetMemoryLimit(-1); got != tc.wantLimit {
					t.Errorf("memory limit %d, want %d", got, tc.wantLimit)
				}
			})
		}
	}
}
