//go:build !linux

package app

// releaseStartPages does nothing where the process's mappings cannot be
// read from /proc (startpages_linux.go).
func releaseStartPages() {}
