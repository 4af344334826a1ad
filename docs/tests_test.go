package docs

import (
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestTheTestsTheDocsNameExist holds the documentation to the tests it
// cites as proof (the architecture's table of facts, the guides' "a test
// checks this"): every test, fuzz target or benchmark a Markdown file names
// in a code span (`TestX`, `FuzzX`), and every _test.go file, exists.
func TestTheTestsTheDocsNameExist(t *testing.T) {
	funcs, files := goTests(t)
	cited := regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*|[a-z0-9_]+_test\\.go)`")
	for _, file := range markdownFiles(t, root) {
		data, err := os.ReadFile(path.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, m := range cited.FindAllStringSubmatch(line, -1) {
				name := m[1]
				if strings.HasSuffix(name, ".go") && !slices.Contains(files, name) ||
					!strings.HasSuffix(name, ".go") && !slices.Contains(funcs, name) {
					t.Errorf("%s:%d: names %s, which no Go file of the repository has", file, i+1, name)
				}
			}
		}
	}
}

// goTests lists the test, fuzz and benchmark functions of the repository's
// _test.go files, and those files' names.
func goTests(t *testing.T) (funcs, files []string) {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)\w*)\(`)
	err := fs.WalkDir(os.DirFS(root), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "." && (strings.HasPrefix(d.Name(), ".") || slices.Contains(skipped, d.Name())) {
			return fs.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path.Join(root, p))
		if err != nil {
			return err
		}
		files = append(files, d.Name())
		for _, m := range decl.FindAllStringSubmatch(string(data), -1) {
			funcs = append(funcs, m[1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return funcs, files
}
