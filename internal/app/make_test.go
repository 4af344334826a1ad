package app_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// makeRun is `make run` started as a terminal starts a job: in its own
// process group, from the repository's root.
type makeRun struct {
	cmd  *exec.Cmd
	out  *apptest.SyncBuffer
	done chan error // make's end (cmd.Wait)
	// URL is where the broker listens.
	URL string
}

// startMakeRun runs `make run` with environ over the test's environment
// (BROKER_ADDR a free port, BROKER_DATA_DIR a new directory, unless environ
// sets them) and waits until the broker says where it listens. The test's
// end kills the job if it still runs.
func startMakeRun(t *testing.T, environ ...string) *makeRun {
	t.Helper()
	cmd := exec.Command("make", "--no-print-directory", "run")
	cmd.Dir = apptest.Root()
	cmd.Env = append(os.Environ(), "BROKER_ADDR=127.0.0.1:0", "BROKER_DATA_DIR="+t.TempDir(), "BROKER_TABLE=", "BROKER_CATALOG=",
		"BROKER_STATEMACHINES=", "BROKER_CREDENTIALS=", "BROKER_SEALING_KEYS=", "BROKER_LOG_LEVEL=")
	cmd.Env = append(cmd.Env, environ...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	m := &makeRun{cmd: cmd, out: &apptest.SyncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = m.out, m.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { m.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the job, if anything of it runs
	})
	listening := regexp.MustCompile(`is listening on (http://\S+)`)
	waittest.Until(t, func() error {
		if match := listening.FindStringSubmatch(m.out.String()); match != nil {
			m.URL = match[1]
			return nil
		}
		select {
		case err := <-m.done:
			t.Fatalf("make run ended (%v):\n%s", err, m.out.String())
		default:
		}
		return fmt.Errorf("make run does not listen yet:\n%s", m.out.String())
	})
	return m
}

// interrupt does what Ctrl-C in the terminal does: SIGINT to every process
// of the job (make, and what it runs), then waits for make to end.
func (m *makeRun) interrupt(t *testing.T) error {
	t.Helper()
	if err := syscall.Kill(-m.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	return waittest.Recv(t, m.done, "make's end")
}

// TestCtrlCEndsMakeRunCleanly: Ctrl-C stops `make run` without "make: ***
// … Error 1" (go run exits 1 when the interrupt reaches it, however the
// broker ended): make ends as an interrupted job, by the signal, or with
// status 0.
func TestCtrlCEndsMakeRunCleanly(t *testing.T) {
	m := startMakeRun(t, "BROKER_PASSWORD=ctrl-c")
	err := m.interrupt(t)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
			t.Errorf("make run ended with %v after Ctrl-C, want the interrupt or exit status 0:\n%s", err, m.out.String())
		}
	} else if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(m.out.String(), "make: ***") {
		t.Errorf("make said after Ctrl-C:\n%s", m.out.String())
	}
}
