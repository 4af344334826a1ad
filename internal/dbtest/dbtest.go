// Package dbtest starts real database servers for tests, as withmoto starts
// moto: Debian's PostgreSQL, MariaDB and redis-server, each in a temporary folder, on a free
// 127.0.0.1 port, as a non-root user when the tests run as root (the servers
// refuse root), stopped at the test's cleanup and killed with the test binary.
// A server that is not installed fails the test with how to install it
// (`make test` does); it never skips.
package dbtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/serverport"
	"github.com/serverless-osb/broker/internal/waittest"
)

// Server is a running database server with an application database and a
// master user that, as on RDS, is not the server's superuser.
type Server struct {
	Host           string
	Port           int
	Database       string
	MasterUser     string
	MasterPassword string
}

// The master user and application database every server gets, as the RDS
// example's defaults name them.
const (
	masterUser     = "app_admin"
	masterPassword = "master-password-for-tests"
	database       = "app"
)

// find returns the path of a server's program, looking in PATH and then in
// dirs, or fails tb saying what to install.
func find(tb testing.TB, name, pkg string, dirs ...string) string {
	tb.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range dirs {
		matches, _ := filepath.Glob(filepath.Join(d, name))
		if len(matches) > 0 {
			return matches[len(matches)-1]
		}
	}
	tb.Fatalf("%s is not installed: this test needs Debian's %s (`apt-get install %s`; make test installs it)", name, pkg, pkg)
	return ""
}

// process is a server process and the folder it lives in.
type process struct {
	tb    testing.TB
	dir   string
	owner *syscall.Credential
	cmd   *exec.Cmd
	ended chan struct{} // closed once the server ended
}

// newProcess makes the server's folder, owned by account when the tests
// run as root.
func newProcess(tb testing.TB, account string) *process {
	tb.Helper()
	dir, err := os.MkdirTemp("", "dbtest")
	if err != nil {
		tb.Fatal(err)
	}
	p := &process{tb: tb, dir: dir}
	tb.Cleanup(p.stop)
	if os.Geteuid() != 0 {
		return p
	}
	u, err := user.Lookup(account)
	if err != nil {
		tb.Fatalf("the servers refuse to run as root, and there is no user %s to run them as: %v", account, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	p.owner = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	if err := os.Chown(dir, uid, gid); err != nil {
		tb.Fatal(err)
	}
	return p
}

// command runs a program as the folder's owner, its output to log.
func (p *process) command(log string, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8", "TZ=UTC")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true, Credential: p.owner}
	if f, err := os.OpenFile(filepath.Join(p.dir, log), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
		cmd.Stdout, cmd.Stderr = f, f
	}
	return cmd
}

// runOnce runs a set-up program to its end.
func (p *process) runOnce(log string, name string, args ...string) {
	p.tb.Helper()
	if err := p.command(log, name, args...).Run(); err != nil {
		p.tb.Fatalf("%s %v: %v (its output: %s)", name, args, err, p.logText(log))
	}
}

// start starts the server on a free port that it is known to listen on
// (serverport), its log in a fresh log file each attempt; args gives the
// program and its arguments for a port. It returns the port.
func (p *process) start(log string, signs serverport.Signs, args func(port int) (string, []string)) int {
	p.tb.Helper()
	port, err := serverport.Start(signs, startTimeout, func(port int) (serverport.Server, error) {
		_ = os.Remove(filepath.Join(p.dir, log))
		name, argv := args(port)
		p.cmd = p.command(log, name, argv...)
		if err := p.cmd.Start(); err != nil {
			return serverport.Server{}, fmt.Errorf("start %s: %w", name, err)
		}
		ended := make(chan struct{})
		p.ended = ended
		go func(cmd *exec.Cmd) {
			_ = cmd.Wait()
			close(ended)
		}(p.cmd)
		return serverport.Server{Log: filepath.Join(p.dir, log), Ended: ended, Stop: p.end}, nil
	})
	if err != nil {
		p.tb.Fatal(err)
	}
	return port
}

// startTimeout bounds the wait for a server to say it listens: only a safety
// net, far beyond what a busy machine needs.
const startTimeout = 5 * time.Minute

// portTaken is what PostgreSQL, MariaDB and redis-server log when their
// port is taken.
var portTaken = []string{"Address already in use"}

func (p *process) logText(log string) string {
	b, _ := os.ReadFile(filepath.Join(p.dir, log))
	return string(b)
}

// stop ends the server and removes its folder.
func (p *process) stop() {
	p.end()
	os.RemoveAll(p.dir)
}

// end ends the server, if one runs.
func (p *process) end() {
	if p.ended != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		<-p.ended
		p.ended = nil
	}
}

// ready waits until connect succeeds; the server's log is in the failure.
func (p *process) ready(log string, connect func(context.Context) error) {
	p.tb.Helper()
	waittest.Until(p.tb, func() error {
		select {
		case <-p.ended:
			p.tb.Fatalf("the server ended: %s", p.logText(log))
		default:
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if err := connect(ctx); err != nil {
			return fmt.Errorf("the server does not answer yet: %w (its log: %s)", err, p.logText(log))
		}
		return nil
	})
}
