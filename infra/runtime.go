package infra

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aws/jsii-runtime-go"
)

// RunCDK runs f, a program's use of the CDK, then removes the jsii
// runtime's temporary files (its copy of itself in $TMPDIR, jsii-runtime.*,
// about 2 MB), and returns f's exit code. The runtime (the Node.js process
// the CDK for Go runs in) exits when this process does: its stdin closes.
//
// It does not call jsii.Close, which in jsii-runtime-go 1.140 waits for the
// Node.js process (exec.Cmd.Wait) while the runtime's own goroutine waits
// for it too: whichever loses gets ECHILD, and when that is the runtime's
// goroutine it prints "Runtime process exited abnormally: waitid: no child
// processes" (and the race detector fails the two waits). With no /proc to
// find the runtime's directory by, it calls jsii.Close but under the race
// detector, and leaves the directory to the race build.
func RunCDK(f func() int) int {
	code := f()
	if dir := runtimeDir(os.Getpid(), os.TempDir()); dir != "" {
		_ = os.RemoveAll(dir)
	} else if !raceDetector {
		jsii.Close()
	}
	return code
}

// runtimeDir is the temporary directory of the jsii runtime that process
// pid started: that of the entry point its child Node.js process runs,
// tmp/jsii-runtime.*; "" when it has none or /proc is not there.
func runtimeDir(pid int, tmp string) string {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return ""
	}
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(stat), ')')
		if f := strings.Fields(string(stat[i+1:])); i < 0 || len(f) < 2 || f[1] != strconv.Itoa(pid) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, arg := range strings.Split(string(cmdline), "\x00") {
			rel, err := filepath.Rel(tmp, arg)
			if err != nil || !filepath.IsAbs(arg) {
				continue
			}
			if first, _, _ := strings.Cut(rel, string(filepath.Separator)); strings.HasPrefix(first, "jsii-runtime.") {
				return filepath.Join(tmp, first)
			}
		}
	}
	return ""
}
