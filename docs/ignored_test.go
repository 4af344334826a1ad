package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// TestWhatTheCommandsWriteIsIgnored: every directory that make run, make
// sandbox and the guides' commands write in the repository (the data
// directories the guides name with BROKER_DATA_DIR=, the Makefile's
// default, the sandbox's logs, the built commands and bundles, cdk.out) is
// ignored by git, so that trying the broker leaves git status clean.
func TestWhatTheCommandsWriteIsIgnored(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not installed")
	}
	dirs := []string{".sandbox", "bin", "dist", "cdk.out"}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^BROKER_DATA_DIR \?= (\S+)$`).FindSubmatch(makefile); m != nil {
		dirs = append(dirs, string(m[1]))
	} else {
		t.Error("the Makefile sets no default BROKER_DATA_DIR")
	}
	named := regexp.MustCompile(`BROKER_DATA_DIR=(\.[\w.-]+)`)
	for _, file := range markdownFiles(t, root) {
		text, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range named.FindAllSubmatch(text, -1) {
			if !slices.Contains(dirs, string(m[1])) {
				dirs = append(dirs, string(m[1]))
			}
		}
	}
	if !slices.Contains(dirs, ".data-aws") {
		t.Errorf("found %v: not the guides' data directories", dirs)
	}
	for _, dir := range dirs {
		cmd := exec.Command("git", "check-ignore", "-q", "--no-index", filepath.Join(dir, "broker.db"))
		cmd.Dir = root
		if err := cmd.Run(); err != nil {
			t.Errorf("git does not ignore %s/ (%v): add it to .gitignore", dir, err)
		}
	}
}
