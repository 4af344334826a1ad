package app_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/logging"
)

// readmeSection returns the shell blocks (```sh) of the README's section
// titled heading, in order.
func readmeSection(t *testing.T, heading string) []string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(apptest.Root(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(text), "\n## "+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", heading)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// TestReadmeCurlTour runs the README's curl tour, as a reader pastes it,
// against a local broker started the way the README says, on a free port.
// Every curl must get a 2xx answer.
func TestReadmeCurlTour(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	blocks := readmeSection(t, "Try it with curl")
	if len(blocks) != 2 {
		t.Fatalf("the section has %d shell blocks, want 2: how to start the broker, then the tour", len(blocks))
	}
	start := regexp.MustCompile(`^BROKER_PASSWORD=(\S+) make run\n$`).FindStringSubmatch(blocks[0])
	if start == nil {
		t.Fatalf("the first block %q does not start the broker with BROKER_PASSWORD=… make run", blocks[0])
	}
	tour := blocks[1]
	if !strings.Contains(tour, "http://127.0.0.1:8080") || !strings.Contains(tour, "AUTH=broker:"+start[1]) {
		t.Fatalf("the tour does not use the broker's address and the password it was started with:\n%s", tour)
	}

	localEnv(t, "info")
	t.Setenv("BROKER_USERNAME", "")
	t.Setenv("BROKER_PASSWORD", start[1])
	c, err := app.LocalConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	logs := &apptest.SyncBuffer{}
	l, err := app.OpenLocal(context.Background(), c, logging.New(logs, c.LogLevel))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Listen("127.0.0.1:0"); err != nil {
		l.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })

	// The only change: the broker's address. curl fails (and, with -e,
	// the script stops) on any answer but 2xx, showing the answer.
	script := "set -euo pipefail\ncurl() { command curl -sS --fail-with-body \"$@\"; echo; }\n" +
		strings.ReplaceAll(tour, "http://127.0.0.1:8080", l.URL())
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "BROKER_PASSWORD=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("the tour failed: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		`"name":"fake-service"`, // the catalog
		`"operation":`,          // the asynchronous provision
		"Retry-After:",          // last_operation's header (curl -i)
		`"credentials":`,        // the binding
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the tour's output does not hold %s:\n%s", want, out.String())
		}
	}
}
