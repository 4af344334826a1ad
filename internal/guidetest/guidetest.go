// Package guidetest runs the shell blocks (```sh) of the repository's
// Markdown guides as a reader pastes them, against a broker a test started:
// `make run` (internal/app) or the sandbox (internal/sandbox). A block that
// cannot run here is marked on the line before its fence,
// <!-- not run here: why -->; every other block runs, so a new one runs by
// default.
package guidetest

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Block is a shell block of a Markdown file.
type Block struct {
	File string // relative to the repository's root
	Line int    // of its opening fence
	Text string // without the fences and the fence's indentation
	// NotRun is the reason of its <!-- not run here: … --> marker; "" when
	// it has none, and runs.
	NotRun string
}

var (
	notRunMarker = regexp.MustCompile(`^\s*<!-- not run here: (\S(?:.*\S)?) -->$`)
	fence        = regexp.MustCompile("^(\\s*)```(\\w*)\\s*$")
)

// Blocks are the shell blocks of every Markdown file under root (but
// hidden directories, installed packages, build output and testdata), by
// file, in order.
func Blocks(tb testing.TB, root string) map[string][]Block {
	tb.Helper()
	blocks := map[string][]Block{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != root && (strings.HasPrefix(name, ".") ||
			slices.Contains([]string{"node_modules", "vendor", "cdk.out", "dist", "bin", "testdata"}, name)) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(name, ".md") {
			return nil
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		lines := strings.Split(string(text), "\n")
		for i := 0; i < len(lines); i++ {
			m := fence.FindStringSubmatch(lines[i])
			if m == nil {
				continue
			}
			start := i
			var body []string
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
				body = append(body, strings.TrimPrefix(lines[i], m[1]))
			}
			if m[2] != "sh" {
				continue
			}
			b := Block{File: filepath.ToSlash(rel), Line: start + 1, Text: strings.Join(body, "\n") + "\n"}
			if start > 0 {
				if n := notRunMarker.FindStringSubmatch(lines[start-1]); n != nil {
					b.NotRun = n[1]
				}
			}
			blocks[b.File] = append(blocks[b.File], b)
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return blocks
}

// Broker is a broker a block's reader talks to: its URL and credentials.
type Broker struct {
	URL, Username, Password string
}

// Session runs one file's blocks in order, sharing what they started.
type Session struct {
	T *testing.T
	// Root is where the blocks run (the repository's root).
	Root string
	// MakeRun is what a `make run` line does: start the broker with the
	// line's variables (NAME=value), or stand for it with one that runs.
	MakeRun func(vars []string) Broker
	// Moto is the endpoint that stands for `moto_server -p N &`.
	Moto string

	subst map[string]string // an address as the guide writes it → the test's
	env   []string          // B, AUTH and H once a broker runs
}

var (
	makeRunLine = regexp.MustCompile(`^((?:\w+=\S*\s+)*)make run\b`)
	motoLine    = regexp.MustCompile(`^moto_server -p (\d+) &`)
	assignment  = regexp.MustCompile(`\w+=\S*`)
)

// Run runs block b: a `make run` line through MakeRun (and the broker's
// address for http://127.0.0.1:8080 from then on, its password for the one
// the line chose in AUTH=broker:…), a `moto_server -p N &`
// line as Moto (for http://127.0.0.1:N), a line ending in & in the
// background (it must still run when the block ends), and the rest in bash
// with B, AUTH and H set as the README's tour sets them, where any curl
// answer but 2xx fails.
func (s *Session) Run(b Block) {
	t := s.T
	t.Helper()
	if s.subst == nil {
		s.subst = map[string]string{}
	}
	var script []string
	flush := func() {
		if len(script) > 0 {
			s.bash(b, strings.Join(script, "\n"))
			script = nil
		}
	}
	var background []*backgroundLine
	for _, line := range logicalLines(b.Text) {
		line = s.substitute(line)
		switch {
		case motoLine.MatchString(line):
			s.subst["http://127.0.0.1:"+motoLine.FindStringSubmatch(line)[1]] = s.Moto
		case makeRunLine.MatchString(line):
			flush()
			vars := assignment.FindAllString(makeRunLine.FindStringSubmatch(line)[1], -1)
			broker := s.MakeRun(vars)
			s.subst["http://127.0.0.1:8080"] = broker.URL
			// A reader puts the password the broker has (printed, or the
			// sandbox's) in AUTH where the guide has the one it chose.
			for _, v := range vars {
				if p, ok := strings.CutPrefix(v, "BROKER_PASSWORD="); ok && p != broker.Password {
					s.subst["AUTH=broker:"+p] = "AUTH=" + broker.Username + ":" + broker.Password
				}
			}
			s.env = []string{"B=" + broker.URL, "AUTH=" + broker.Username + ":" + broker.Password, "H=X-Broker-API-Version: 2.17"}
		case strings.HasSuffix(strings.TrimSpace(stripComment(line)), "&"):
			flush()
			background = append(background, s.start(b, stripComment(line)))
		default:
			script = append(script, line)
		}
	}
	flush()
	for _, bg := range background {
		select {
		case err := <-bg.done:
			t.Errorf("%s:%d: %q ended (%v) before the block did:\n%s", b.File, b.Line, bg.line, err, bg.out.String())
		default:
		}
	}
}

// substitute puts the test's addresses for the guide's.
func (s *Session) substitute(text string) string {
	for from, to := range s.subst {
		text = strings.ReplaceAll(text, from, to)
	}
	return text
}

// bash runs script as a reader pastes it into a shell where B, AUTH and H
// are set, from Root; curl fails on any answer but 2xx.
func (s *Session) bash(b Block, script string) {
	t := s.T
	t.Helper()
	cmd := exec.Command("bash", "-c", "set -euo pipefail\ncurl() { command curl -sS --fail-with-body \"$@\"; echo; }\n"+script)
	cmd.Dir = s.Root
	cmd.Env = append(os.Environ(), s.env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s:%d: the block failed: %v\n%s\n--- it ran:\n%s", b.File, b.Line, err, out.String(), script)
	}
	t.Logf("%s:%d:\n%s", b.File, b.Line, out.String())
}

// backgroundLine is a line of a block that runs in the background.
type backgroundLine struct {
	line string
	out  *syncBuffer
	done chan error
}

// start runs line in the background, in a process group of its own that
// the test's end kills.
func (s *Session) start(b Block, line string) *backgroundLine {
	t := s.T
	t.Helper()
	line = strings.TrimSuffix(strings.TrimSpace(line), "&")
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir = s.Root
	cmd.Env = append(os.Environ(), s.env...)
	bg := &backgroundLine{line: line, out: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = bg.out, bg.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s:%d: %v", b.File, b.Line, err)
	}
	go func() { bg.done <- cmd.Wait() }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	return bg
}

// logicalLines joins the lines a backslash continues.
func logicalLines(text string) []string {
	var out []string
	var cur strings.Builder
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(strings.TrimSuffix(l, "\\"))
			continue
		}
		cur.WriteString(l)
		out = append(out, strings.TrimSpace(cur.String()))
		cur.Reset()
	}
	return out
}

// stripComment is line without a trailing # comment (one after a space,
// with no quote before it: enough for the guides' lines).
func stripComment(line string) string {
	if i := strings.Index(line, " #"); i >= 0 && !strings.ContainsAny(line[:i], `'"`) {
		return line[:i]
	}
	return line
}

// syncBuffer is a bytes.Buffer that a process and the test share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}
