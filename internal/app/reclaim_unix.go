//go:build unix && !lambda.norpc

package app

import (
	"syscall"
	"time"
)

// processCPU is the process's user and system time so far, or -1 if it
// cannot be read.
func processCPU() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return -1
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
