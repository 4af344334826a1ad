//go:build !linux

package app

// releaseBinaryPages does nothing where the process's mappings cannot be
// read from /proc (startpages_linux.go).
func releaseBinaryPages() {}

// releaseFilePages does nothing where the process's mappings cannot be
// read from /proc (startpages_linux.go).
func releaseFilePages(...string) {}
