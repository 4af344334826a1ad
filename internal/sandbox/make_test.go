package sandbox_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/serverless-osb/broker/internal/waittest"
)

// TestCtrlCEndsMakeSandboxCleanly runs `make sandbox` on the suite's
// template as a terminal runs a job (its own process group) and stops it
// as Ctrl-C does (SIGINT to the whole job): the sandbox says it stops, and
// make ends by the interrupt or with status 0, never with "make: *** …
// Error 1" (go run exits 1 when the interrupt reaches it, however the
// sandbox ended).
func TestCtrlCEndsMakeSandboxCleanly(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "--no-print-directory", "sandbox", "TEMPLATE="+template, "SANDBOX_DIR="+filepath.Join(t.TempDir(), "sandbox"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "BROKER_ADDR=127.0.0.1:0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	waittest.Until(t, func() error {
		if strings.Contains(out.String(), "sandbox is listening on") {
			return nil
		}
		select {
		case err := <-done:
			t.Fatalf("make sandbox ended (%v):\n%s", err, out.String())
		default:
		}
		return fmt.Errorf("make sandbox does not listen yet:\n%s", out.String())
	})
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = waittest.Recv(t, done, "make's end")
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
			t.Errorf("make sandbox ended with %v after Ctrl-C, want the interrupt or exit status 0:\n%s", err, out.String())
		}
	} else if err != nil {
		t.Fatal(err)
	}
	if said := out.String(); strings.Contains(said, "make: ***") || !strings.Contains(said, "sandbox: stopping") {
		t.Errorf("make sandbox said after Ctrl-C (want \"sandbox: stopping\" and no make error):\n%s", said)
	}
}

// lockedBuffer is a bytes.Buffer a process writes and the test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
