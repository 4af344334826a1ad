// Package motoserver starts moto_server, patched with the repository's fixes
// (moto_server.py), on a free 127.0.0.1 port: withmoto starts one for the
// tests, the sandbox one of its own (internal/sandbox), since it turns on
// IAM enforcement, which is the whole server's.
package motoserver

import (
	_ "embed"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/serverless-osb/broker/internal/serverport"
)

//go:embed moto_server.py
var script []byte

// Version is the moto the repository is written against.
const Version = "5.2.1"

// Options say how to start the server.
type Options struct {
	// Python runs moto_server.py (default $PYTHON, else python3).
	Python string
	// Env is added to the server's environment (MOTO_LAMBDA_ENDPOINT...).
	Env []string
	// LogPath receives the server's output (default moto-PORT.log in the
	// temporary folder).
	LogPath string
	// Outlive lets the server outlive the calling process (Release leaves
	// it running, with its state, for a later Attach): the sandbox's
	// KEEP=1.
	Outlive bool
}

// Server is a running moto_server.
type Server struct {
	// Endpoint is its URL: http://127.0.0.1:PORT.
	Endpoint string
	// LogPath is where its output goes.
	LogPath string

	cmd *exec.Cmd
	pid int // an attached server's, which this process did not start
	dir string
	log *os.File
}

// PID is the server's process id.
func (s *Server) PID() int {
	if s.cmd != nil && s.cmd.Process != nil {
		return s.cmd.Process.Pid
	}
	return s.pid
}

// Attach takes up a server that a Start with Outlive left running: it
// must answer at endpoint, and pid must be a moto_server.py (Stop ends it).
func Attach(endpoint string, pid int) (*Server, error) {
	if !isMoto(pid) {
		return nil, fmt.Errorf("process %d is no moto_server.py", pid)
	}
	probe := &http.Client{Timeout: 5 * time.Second}
	resp, err := probe.Get(endpoint + "/moto-api/")
	if err != nil {
		return nil, fmt.Errorf("moto_server %s: %w", endpoint, err)
	}
	resp.Body.Close()
	return &Server{Endpoint: endpoint, pid: pid}, nil
}

// StopProcess ends the moto_server.py of pid, if it still runs: one that
// a Start with Outlive left behind and nobody will Attach.
func StopProcess(pid int) {
	if isMoto(pid) {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
	}
}

// isMoto says whether pid runs this package's moto_server.py, so that a
// stale pid never ends another process.
func isMoto(pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return pid > 0 && err == nil && strings.Contains(string(cmdline), "moto_server.py")
}

// Release leaves the server running (started with Outlive), with its
// state, and lets go of it.
func (s *Server) Release() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Release()
		s.cmd = nil
	}
	if s.log != nil {
		s.log.Close()
		s.log = nil
	}
	s.pid = 0
	os.RemoveAll(s.dir) // the server has read its script
}

// Start installs moto with pip where it is missing, starts the server,
// waits until it answers, and turns on the execution of state machines.
// The server dies with the calling process, even one killed.
func Start(o Options) (*Server, error) {
	python := o.Python
	if python == "" {
		python = os.Getenv("PYTHON")
	}
	if python == "" {
		python = "python3"
	}
	if err := ensureMoto(python); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "motoserver")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	path := filepath.Join(dir, "moto_server.py")
	if err := os.WriteFile(path, script, 0o600); err != nil {
		s.Stop()
		return nil, err
	}
	// Until moto says it listens, whatever answers on its port may be
	// another server (a moto with IAM enforced answered the configuration
	// 401): serverport waits for moto's own word, and tries another port when
	// moto finds its port taken.
	_, err = serverport.Start(motoSigns, readyTimeout, func(port int) (serverport.Server, error) {
		s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", port)
		s.LogPath = o.LogPath
		if s.LogPath == "" {
			s.LogPath = filepath.Join(os.TempDir(), fmt.Sprintf("moto-%d.log", port))
		}
		var err error
		if s.log, err = os.Create(s.LogPath); err != nil {
			return serverport.Server{}, err
		}
		s.cmd = exec.Command(python, path, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
		s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
		s.cmd.Env = append(os.Environ(), o.Env...)
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
		if o.Outlive {
			s.cmd.SysProcAttr.Pdeathsig = 0
		}
		if err := s.cmd.Start(); err != nil {
			s.cmd = nil
			return serverport.Server{}, fmt.Errorf("start moto_server: %w", err)
		}
		// The port was taken: end this server, keep the script.
		return serverport.Server{Log: s.LogPath, Stop: func() {
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
			_, _ = s.cmd.Process.Wait()
			s.cmd = nil
			s.log.Close()
			s.log = nil
		}}, nil
	})
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("moto_server: %w", err)
	}
	if err := waitReady(s.Endpoint, readyTimeout); err != nil {
		s.Stop()
		return nil, fmt.Errorf("%w (moto's log: %s)", err, s.LogPath)
	}
	return s, nil
}

// Stop ends the server and removes its script; its log stays.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		_, _ = s.cmd.Process.Wait()
		s.cmd = nil
	}
	if s.pid != 0 {
		StopProcess(s.pid)
		s.pid = 0
	}
	if s.log != nil {
		s.log.Close()
		s.log = nil
	}
	os.RemoveAll(s.dir)
}

// ensureMoto installs moto's server with pip when python cannot import it.
func ensureMoto(python string) error {
	if exec.Command(python, "-c", "import moto.server, flask").Run() == nil {
		return nil
	}
	fmt.Fprintf(os.Stderr, "motoserver: installing moto[server]==%s with pip\n", Version)
	pip := exec.Command(python, "-m", "pip", "install", "--quiet", "moto[server]=="+Version)
	pip.Stdout, pip.Stderr = os.Stderr, os.Stderr
	if err := pip.Run(); err != nil {
		return fmt.Errorf("moto is missing and `%s -m pip install 'moto[server]==%s'` failed: %w", python, Version, err)
	}
	return nil
}

// motoSigns are what moto's server (werkzeug) logs.
var motoSigns = serverport.Signs{
	Listening: func(port int) string { return fmt.Sprintf("Running on http://127.0.0.1:%d", port) },
	Taken:     []string{"Address already in use", "is in use by another program"},
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
