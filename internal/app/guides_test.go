package app_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/mototest"
)

// notRunMarker, on the line before a shell block of a guide, says that the
// block cannot run here, and why: <!-- not run here: it needs an AWS account -->.
var notRunMarker = regexp.MustCompile(`^\s*<!-- not run here: (\S(?:.*\S)?) -->$`)

// guideBlock is a shell block (```sh) of a Markdown file.
type guideBlock struct {
	line   int    // of its fence
	text   string // without the fences
	notRun string // the marker's reason, when it has one
}

// guideBlocks are the shell blocks of every Markdown file of the
// repository (but installed packages, build output and testdata), by file.
func guideBlocks(t *testing.T) map[string][]guideBlock {
	t.Helper()
	root := apptest.Root()
	fence := regexp.MustCompile("^(\\s*)```(\\w*)\\s*$")
	blocks := map[string][]guideBlock{}
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
			b := guideBlock{line: start + 1, text: strings.Join(body, "\n") + "\n"}
			if start > 0 {
				if n := notRunMarker.FindStringSubmatch(lines[start-1]); n != nil {
					b.notRun = n[1]
				}
			}
			blocks[rel] = append(blocks[rel], b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return blocks
}

// TestTheGuidesShellBlocksRunAsPasted runs every shell block of the
// guides (README.md, docs/, services/, ...) as a reader pastes them, each
// file's in order: a `make run` line starts `make run` (on a free port, in
// a new data directory, with the line's variables), a `moto_server -p N &`
// line stands for the suite's moto, a line ending in & runs in the
// background (and must still run when the block ends), and the rest runs in
// bash with B, AUTH and H set as the README's tour sets them (the broker's
// address and credentials), where any curl answer but 2xx fails. Only a
// block marked <!-- not run here: why --> on the line before is left out,
// so a new block runs by default.
func TestTheGuidesShellBlocksRunAsPasted(t *testing.T) {
	all := guideBlocks(t)
	for _, file := range []string{"README.md", "docs/aws-services.md", "docs/functions.md", "services/README.md"} {
		if !slices.ContainsFunc(all[file], func(b guideBlock) bool { return b.notRun == "" }) {
			t.Errorf("%s has no shell block to run: not the guides this test knows", file)
		}
	}
	files := make([]string, 0, len(all))
	for file := range all {
		files = append(files, file)
	}
	slices.Sort(files)
	for _, file := range files {
		if !slices.ContainsFunc(all[file], func(b guideBlock) bool { return b.notRun == "" }) {
			continue
		}
		t.Run(file, func(t *testing.T) {
			g := &guideSession{t: t, subst: map[string]string{}}
			for _, b := range all[file] {
				if b.notRun == "" {
					g.run(file, b)
				}
			}
		})
	}
}

// guideSession is what one file's blocks started: the servers, and the
// addresses that stand for theirs in the blocks.
type guideSession struct {
	t     *testing.T
	subst map[string]string // an address as the guide writes it → the test's
	env   []string          // B, AUTH and H once a broker runs
}

var (
	makeRunLine   = regexp.MustCompile(`^((?:\w+=\S*\s+)*)make run\b`)
	motoLine      = regexp.MustCompile(`^moto_server -p (\d+) &`)
	generatedPass = regexp.MustCompile(`generated password "([^"]+)"`)
	assignment    = regexp.MustCompile(`(\w+)=(\S*)`)
)

// run runs block b of file.
func (g *guideSession) run(file string, b guideBlock) {
	t := g.t
	t.Helper()
	var script []string
	flush := func() {
		if len(script) > 0 {
			g.bash(file, b, strings.Join(script, "\n"))
			script = nil
		}
	}
	var background []*backgroundLine
	for _, line := range logicalLines(b.text) {
		line = g.substitute(line)
		switch {
		case motoLine.MatchString(line):
			g.subst["http://127.0.0.1:"+motoLine.FindStringSubmatch(line)[1]] = mototest.Endpoint(t)
		case makeRunLine.MatchString(line):
			flush()
			g.makeRun(assignment.FindAllStringSubmatch(makeRunLine.FindStringSubmatch(line)[1], -1))
		case strings.HasSuffix(strings.TrimSpace(stripComment(line)), "&"):
			flush()
			background = append(background, g.start(file, b, stripComment(line)))
		default:
			script = append(script, line)
		}
	}
	flush()
	for _, bg := range background {
		select {
		case err := <-bg.done:
			t.Errorf("%s:%d: %q ended (%v) before the block did:\n%s", file, b.line, bg.line, err, bg.out.String())
		default:
		}
	}
}

// backgroundLine is a line of a block that runs in the background.
type backgroundLine struct {
	line string
	out  *apptest.SyncBuffer
	done chan error
}

// substitute puts the test's addresses for the guide's.
func (g *guideSession) substitute(text string) string {
	for from, to := range g.subst {
		text = strings.ReplaceAll(text, from, to)
	}
	return text
}

// makeRun starts make run with the line's variables (but the data
// directory: a new one) and sets B, AUTH and H for it.
func (g *guideSession) makeRun(vars [][]string) {
	t := g.t
	t.Helper()
	environ := []string{"BROKER_USERNAME="}
	password := ""
	for _, v := range vars {
		switch v[1] {
		case "BROKER_DATA_DIR", "BROKER_ADDR":
			continue // the test's: a new directory, a free port
		case "BROKER_PASSWORD":
			password = v[2]
		}
		environ = append(environ, v[1]+"="+v[2])
	}
	if password == "" {
		environ = append(environ, "BROKER_PASSWORD=")
	}
	m := startMakeRun(t, environ...)
	if password == "" {
		p := generatedPass.FindStringSubmatch(m.out.String())
		if p == nil {
			t.Fatalf("make run printed no generated password:\n%s", m.out.String())
		}
		password = p[1]
	}
	g.subst["http://127.0.0.1:8080"] = m.URL
	g.env = []string{"B=" + m.URL, "AUTH=broker:" + password, "H=X-Broker-API-Version: 2.17"}
}

// bash runs script as a reader pastes it into a shell where B, AUTH and H
// are set, from the repository's root; curl fails on any answer but 2xx.
func (g *guideSession) bash(file string, b guideBlock, script string) {
	t := g.t
	t.Helper()
	cmd := exec.Command("bash", "-c", "set -euo pipefail\ncurl() { command curl -sS --fail-with-body \"$@\"; echo; }\n"+script)
	cmd.Dir = apptest.Root()
	cmd.Env = append(os.Environ(), g.env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s:%d: the block failed: %v\n%s\n--- it ran:\n%s", file, b.line, err, out.String(), script)
	}
	t.Logf("%s:%d:\n%s", file, b.line, out.String())
}

// start runs line in the background, in a process group of its own that
// the test's end kills.
func (g *guideSession) start(file string, b guideBlock, line string) *backgroundLine {
	t := g.t
	t.Helper()
	line = strings.TrimSuffix(strings.TrimSpace(line), "&")
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir = apptest.Root()
	cmd.Env = append(os.Environ(), g.env...)
	bg := &backgroundLine{line: line, out: &apptest.SyncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = bg.out, bg.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s:%d: %v", file, b.line, err)
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
// outside quotes: enough for the guides' lines).
func stripComment(line string) string {
	if i := strings.Index(line, " #"); i >= 0 && !strings.ContainsAny(line[:i], `'"`) {
		return line[:i]
	}
	return line
}
