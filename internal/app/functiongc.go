package app

import (
	"runtime/debug"
	"strconv"
)

// The broker's garbage collector: the functions' and `make run`'s. At
// start the api allocates about 10 MB, most of it garbage (the pre-parsed
// catalog's and templates' JSON, read into values), on a live heap of 2 to
// 3 MB: at Go's default (GOGC=100, collecting at twice the live heap, 4 MB
// at least) the collector ran twice before the first answer, its marking
// and sweeping about a fifth of the api's cold start (docs/performance.md).
// At 400 it runs at five times the live heap (16 MB at least), so not
// during the start, and a fifth as often after it, for at most a few tens
// of MB more of a function that has 256. The `make run` broker collects
// at 400 too: a burst of 1,000 provisions allocates about 40 MB, which at
// the default the collector followed with ten cycles and their assists
// on the requests (the burst's p99 over the catalog reads', on open
// connections, 1.56 to 2.08× against 1.25 to 1.51×; docs/performance.md),
// and the broker gives back what the burst grew once it goes quiet
// (reclaim.go): 1.4 MiB more of anonymous memory, idle after 4,000
// provisions.
const BrokerGCPercent = 400

// lambdaMemoryMB is set by Lambda: the function's memory, in MB.
const lambdaMemoryMB = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"

// functionGC sets the function's collector, unless the environment sets it
// (GOGC, GOMEMLIMIT): BrokerGC, and a soft limit at three quarters of the
// function's memory, where the collector runs however little the heap
// grew, so that the fewer collections never cost the function its memory.
func functionGC(getenv func(string) string) {
	BrokerGC(getenv)
	if getenv("GOMEMLIMIT") == "" {
		if mb, err := strconv.ParseInt(getenv(lambdaMemoryMB), 10, 64); err == nil && mb > 0 {
			debug.SetMemoryLimit(mb << 20 / 4 * 3)
		}
	}
}

// BrokerGC sets the process's collector to BrokerGCPercent unless GOGC
// says otherwise: the functions and the `make run` broker call it at
// start, and the handler benchmarks (internal/api) before they measure,
// so that they measure the broker as it runs.
func BrokerGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(BrokerGCPercent)
	}
}
