package docs

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestTheLayoutIsTheTree holds DESIGN.md's layout to the repository: every
// directory at the top (but the hidden ones) and every directory under
// internal/ (but testdata) is an entry of the layout, and every entry
// exists.
func TestTheLayoutIsTheTree(t *testing.T) {
	design, err := os.ReadFile(path.Join(root, "docs", "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := layoutEntries(string(design))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range directories(t) {
		if !slices.Contains(entries, dir) {
			t.Errorf("DESIGN.md's layout does not list %s: add an entry for it, at the start of a line", dir)
		}
	}
	for _, entry := range entries {
		if _, err := fs.Stat(os.DirFS(root), strings.TrimSuffix(entry, "/")); err != nil {
			t.Errorf("DESIGN.md's layout lists %s, which is not in the repository", entry)
		}
	}
}

// layoutEntries returns the entries of the layout: the first word of each
// line of the first code block under the heading "## Layout" that does not
// start with a space (a description's later lines do).
func layoutEntries(design string) ([]string, error) {
	_, section, ok := strings.Cut(design, "\n## Layout\n")
	if !ok {
		return nil, errors.New("DESIGN.md has no section \"Layout\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	m := regexp.MustCompile("(?s)```\n(.*?)```").FindStringSubmatch(section)
	if m == nil {
		return nil, errors.New("the layout section has no code block")
	}
	var entries []string
	for _, line := range strings.Split(m[1], "\n") {
		if fields := strings.Fields(line); len(fields) > 0 && !strings.HasPrefix(line, " ") {
			entries = append(entries, fields[0])
		}
	}
	return entries, nil
}

// directories lists, as "dir/", the top directories of the repository and
// every directory under internal/ but testdata: those of the files git
// tracks, so that a directory of one's own (a catalog beside the example
// services, say) is not asked for; without git, those on disk that are not
// hidden nor named by a root-anchored line ("/name/") of .gitignore.
func directories(t *testing.T) []string {
	t.Helper()
	var files []string
	if out, err := exec.Command("git", "-C", root, "ls-files").Output(); err == nil {
		files = strings.Fields(string(out))
	} else {
		t.Logf("git ls-files: %v; reading the directories on disk", err)
		files = filesOnDisk(t)
	}
	var dirs []string
	for _, f := range files {
		parts := strings.Split(f, "/")
		for i := range len(parts) - 1 {
			if parts[i] == "testdata" || (i > 0 && parts[0] != "internal") {
				break
			}
			dir := strings.Join(parts[:i+1], "/") + "/"
			if !slices.Contains(dirs, dir) {
				dirs = append(dirs, dir)
			}
		}
	}
	return slices.DeleteFunc(dirs, func(d string) bool { return strings.HasPrefix(d, ".") })
}

// filesOnDisk lists the files of the repository's directories that are
// neither hidden nor ignored by a root-anchored line of .gitignore.
func filesOnDisk(t *testing.T) []string {
	t.Helper()
	gitignore, err := os.ReadFile(path.Join(root, ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	ignored := strings.Fields(string(gitignore))
	var files []string
	err = fs.WalkDir(os.DirFS(root), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || slices.Contains(ignored, "/"+p+"/") ||
			slices.Contains(ignored, d.Name()+"/")) {
			return fs.SkipDir
		}
		if !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
