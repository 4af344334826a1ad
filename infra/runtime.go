package infra

import "github.com/aws/jsii-runtime-go"

// RunCDK runs f, a program's use of the CDK, then stops the jsii runtime
// (the Node.js process the CDK for Go runs in) and removes its temporary
// files, and returns f's exit code.
//
// Under the race detector it leaves the runtime alone, to exit with this
// process: in jsii-runtime-go 1.140, jsii.Close and the runtime's own
// goroutine both wait for the Node.js process (exec.Cmd.Wait on one Cmd),
// a data race that would fail `go test -race`. The same race is why a
// synthesis may end with the harmless "Runtime process exited abnormally:
// waitid: no child processes". What the race build leaves behind is the
// runtime's copy of itself in $TMPDIR (jsii-runtime.*, about 2 MB).
func RunCDK(f func() int) int {
	code := f()
	if !raceDetector {
		jsii.Close()
	}
	return code
}
