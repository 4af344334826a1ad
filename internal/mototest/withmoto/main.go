// Command withmoto runs a command with a moto_server beside it: it installs
// moto with pip where it is missing, starts moto_server (patched for moto
// issue 10077) on a free 127.0.0.1 port, waits until it answers, enables
// Step Functions execution, runs the command with MOTO_ENDPOINT set, and
// stops the server, whatever the command's outcome.
//
//	go run ./internal/mototest/withmoto -- go test ./...
package main

import (
	_ "embed"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

//go:embed moto_server.py
var server []byte

// MotoVersion is the moto the tests are written against.
const MotoVersion = "5.2.1"

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fail("usage: withmoto -- COMMAND [ARG...]")
	}
	code, err := run(args)
	if err != nil {
		fail(err.Error())
	}
	os.Exit(code)
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "withmoto:", msg)
	os.Exit(2)
}

func run(args []string) (int, error) {
	python := os.Getenv("PYTHON")
	if python == "" {
		python = "python3"
	}
	if err := ensureMoto(python); err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "withmoto")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "moto_server.py")
	if err := os.WriteFile(script, server, 0o600); err != nil {
		return 0, err
	}
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	logPath := filepath.Join(os.TempDir(), fmt.Sprintf("moto-%d.log", port))
	logFile, err := os.Create(logPath)
	if err != nil {
		return 0, err
	}
	defer logFile.Close()
	moto := exec.Command(python, script, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	moto.Stdout, moto.Stderr = logFile, logFile
	// The server dies with this process, even if it is killed.
	moto.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := moto.Start(); err != nil {
		return 0, fmt.Errorf("start moto_server: %w", err)
	}
	defer func() {
		_ = syscall.Kill(-moto.Process.Pid, syscall.SIGTERM)
		_, _ = moto.Process.Wait()
	}()
	if err := waitReady(endpoint, readyTimeout); err != nil {
		return 0, fmt.Errorf("%w (moto's log: %s)", err, logPath)
	}
	fmt.Fprintf(os.Stderr, "withmoto: moto_server %s on %s (log: %s)\n", MotoVersion, endpoint, logPath)

	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "MOTO_ENDPOINT="+endpoint)
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 0, err
	}
	return 0, nil
}

// ensureMoto installs moto's server with pip when python cannot import it.
func ensureMoto(python string) error {
	if exec.Command(python, "-c", "import moto.server, flask").Run() == nil {
		return nil
	}
	fmt.Fprintf(os.Stderr, "withmoto: installing moto[server]==%s with pip\n", MotoVersion)
	pip := exec.Command(python, "-m", "pip", "install", "--quiet", "moto[server]=="+MotoVersion)
	pip.Stdout, pip.Stderr = os.Stderr, os.Stderr
	if err := pip.Run(); err != nil {
		return fmt.Errorf("moto is missing and `%s -m pip install 'moto[server]==%s'` failed: %w", python, MotoVersion, err)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// readyTimeout bounds the wait for moto_server to start: only a safety net,
// far beyond what a busy machine needs to start Python and import moto.
const readyTimeout = 5 * time.Minute

// waitReady waits for moto to answer, then turns on the execution of state
// machines (which must happen before any is created).
func waitReady(endpoint string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	// A probe that gets no answer in a few seconds is sent again: moto may
	// not listen yet. The configuration is sent once, and may take longer.
	probe, client := &http.Client{Timeout: 5 * time.Second}, &http.Client{Timeout: timeout}
	for {
		resp, err := probe.Get(endpoint + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("moto_server did not answer on %s within %s", endpoint, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err := client.Post(endpoint+"/moto-api/config", "application/json",
		strings.NewReader(`{"stepfunctions":{"execute_state_machine":true},"lambda":{"use_docker":false}}`))
	if err != nil {
		return fmt.Errorf("configure moto: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("configure moto: HTTP %d", resp.StatusCode)
	}
	return nil
}
