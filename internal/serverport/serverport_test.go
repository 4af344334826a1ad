package serverport

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// shellServer starts sh as a server that logs what a real one logs: that
// its port is taken when it is one of taken, else that it listens; then it
// waits to be stopped, or ends at once when end is set.
func shellServer(t *testing.T, taken map[int]bool, end bool) func(port int) (Server, error) {
	return func(port int) (Server, error) {
		log := filepath.Join(t.TempDir(), "server.log")
		script := fmt.Sprintf("echo listening on port %d; exec sleep 600", port)
		switch {
		case taken[port]:
			script = "echo 'bind: Address already in use'; exit 1"
		case end:
			script = "echo 'out of memory'; exit 1"
		}
		f, err := os.Create(log)
		if err != nil {
			return Server{}, err
		}
		cmd := exec.Command("sh", "-c", script)
		cmd.Stdout, cmd.Stderr = f, f
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return Server{}, err
		}
		ended := make(chan struct{})
		go func() { _ = cmd.Wait(); f.Close(); close(ended) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-ended })
		return Server{Log: log, Ended: ended, Stop: func() { _ = cmd.Process.Kill(); <-ended }}, nil
	}
}

var shellSigns = Signs{
	Listening: func(port int) string { return fmt.Sprintf("listening on port %d\n", port) },
	Taken:     []string{"Address already in use"},
}

// TestStartGivesUpATakenPort: the first port Pick hands out is found taken
// by the server; Start stops it and returns the second, which the server
// says it listens on.
func TestStartGivesUpATakenPort(t *testing.T) {
	pick := Pick
	defer func() { Pick = pick }()
	ports := []int{40001, 40002}
	Pick = func() (int, error) { p := ports[0]; ports = ports[1:]; return p, nil }

	port, err := Start(shellSigns, time.Minute, shellServer(t, map[int]bool{40001: true}, false))
	if err != nil || port != 40002 {
		t.Fatalf("Start = %d, %v; want 40002 (40001 was taken)", port, err)
	}
}

// TestStartSaysWhenTheServerEnds: a server that ends without listening is
// an error naming its log, not a wait until the timeout.
func TestStartSaysWhenTheServerEnds(t *testing.T) {
	_, err := Start(shellSigns, 10*time.Minute, shellServer(t, nil, true))
	if !errors.Is(err, ErrEnded) || !strings.Contains(err.Error(), "server.log") {
		t.Fatalf("Start = %v, want ErrEnded naming the log", err)
	}
}

// TestStartGivesUpAfterMaxAttempts: every port taken is an error, not a
// loop.
func TestStartGivesUpAfterMaxAttempts(t *testing.T) {
	pick := Pick
	defer func() { Pick = pick }()
	Pick = func() (int, error) { return 40003, nil }
	_, err := Start(shellSigns, time.Minute, shellServer(t, map[int]bool{40003: true}, false))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprint(MaxAttempts)) {
		t.Fatalf("Start = %v, want it to give up after %d ports", err, MaxAttempts)
	}
}
