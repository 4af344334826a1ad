//go:build !unix && !lambda.norpc

package app

import "time"

// processCPU cannot be read here: the reclaimer does not run.
func processCPU() time.Duration { return -1 }
