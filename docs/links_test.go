package docs

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"unicode"
)

// root is the repository, from this package's directory.
const root = ".."

// skipped are the directories whose Markdown is not the repository's own:
// installed packages and build output. Hidden directories (.git, .data,
// .sandbox) are skipped too.
var skipped = []string{"node_modules", "vendor", "cdk.out", "dist", "bin", "testdata"}

// TestEveryMarkdownLinkResolves reads every Markdown file of the repository
// and follows each of its links that is not a web address: the file or
// directory it names must exist, and an #anchor must be a heading (as
// GitHub names them) or an id of the file it points into.
func TestEveryMarkdownLinkResolves(t *testing.T) {
	files := markdownFiles(t, root)
	if !slices.Contains(files, "README.md") || !slices.Contains(files, "docs/DESIGN.md") {
		t.Fatalf("found %q: not the repository's Markdown", files)
	}
	for _, problem := range checkLinks(os.DirFS(root), files) {
		t.Error(problem)
	}
}

// markdownFiles lists the .md files under dir, as slash paths relative to it.
func markdownFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := fs.WalkDir(os.DirFS(dir), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && (strings.HasPrefix(d.Name(), ".") || slices.Contains(skipped, d.Name())) {
				return fs.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// A link found in a Markdown file.
type link struct {
	line   int
	target string
}

var (
	fence      = regexp.MustCompile("^ {0,3}(```|~~~)")
	codeSpan   = regexp.MustCompile("(`+)[^`]*?(`+)")
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	heading    = regexp.MustCompile(`^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	htmlID     = regexp.MustCompile(`<a\s[^>]*\b(?:id|name)="([^"]+)"`)
)

// links lists the links of a Markdown text, outside code blocks and code
// spans.
func links(text string) []link {
	var out []link
	inFence := false
	for i, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, link{i + 1, m[1]})
		}
		if m := refDef.FindStringSubmatch(line); m != nil {
			out = append(out, link{i + 1, m[1]})
		}
	}
	return out
}

// anchors lists the anchors GitHub gives a Markdown text: one per heading,
// its slug (a second heading of the same slug gets "-1", a third "-2"), and
// the ids of its HTML anchors.
func anchors(text string) []string {
	var out []string
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range htmlID.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[2])
		if n := seen[s]; n > 0 {
			seen[s]++
			s = fmt.Sprintf("%s-%d", s, n)
		} else {
			seen[s] = 1
		}
		out = append(out, s)
	}
	return out
}

var linkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// slug is GitHub's anchor of a heading: its text as rendered (code spans
// and links reduced to their text, emphasis gone), in lower case, with
// every character but letters, digits, marks, "-", "_" and spaces taken
// out, and each space a "-".
func slug(heading string) string {
	text := linkText.ReplaceAllString(heading, "$1")
	text = strings.NewReplacer("`", "", "*", "").Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-', r == '_', unicode.IsLetter(r), unicode.IsNumber(r), unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkLinks follows the links of files (slash paths in fsys) and returns
// one line per link that does not resolve: file:line, the link, and why.
func checkLinks(fsys fs.FS, files []string) []string {
	texts := map[string]string{}
	read := func(name string) (string, error) {
		if text, ok := texts[name]; ok {
			return text, nil
		}
		data, err := fs.ReadFile(fsys, name)
		texts[name] = string(data)
		return string(data), err
	}
	var problems []string
	for _, file := range files {
		text, err := read(file)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", file, err))
			continue
		}
		for _, l := range links(text) {
			if why := resolve(fsys, read, file, l.target); why != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: link %q: %s", file, l.line, l.target, why))
			}
		}
	}
	return problems
}

var scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

// resolve says why target, a link of file, does not resolve, or "" when it
// does. Web addresses (any scheme) are not fetched.
func resolve(fsys fs.FS, read func(string) (string, error), file, target string) string {
	if target == "" {
		return "empty link"
	}
	if scheme.MatchString(target) {
		return ""
	}
	p, anchor, _ := strings.Cut(target, "#")
	if q, _, ok := strings.Cut(p, "?"); ok {
		p = q
	}
	p, err := url.PathUnescape(p)
	if err != nil {
		return err.Error()
	}
	name := file
	if p != "" {
		if strings.HasPrefix(p, "/") {
			name = path.Clean(strings.TrimPrefix(p, "/")) // GitHub: from the repository's root
		} else {
			name = path.Join(path.Dir(file), p)
		}
		if name == ".." || strings.HasPrefix(name, "../") {
			return "outside the repository"
		}
		if _, err := fs.Stat(fsys, name); err != nil {
			return "no such file or directory " + name
		}
	}
	if anchor == "" || !strings.HasSuffix(name, ".md") {
		return ""
	}
	text, err := read(name)
	if err != nil {
		return err.Error()
	}
	if !slices.Contains(anchors(text), anchor) {
		return fmt.Sprintf("%s has no heading whose anchor is #%s", name, anchor)
	}
	return ""
}

func TestSlugIsGitHubs(t *testing.T) {
	for heading, want := range map[string]string{
		"Offer AWS services: a catalog entry and a template, no code": "offer-aws-services-a-catalog-entry-and-a-template-no-code",
		"How to…":                         "how-to",
		"cdk-nag suppressions (`nag.go`)": "cdk-nag-suppressions-naggo",
		"The `outage_budget` of a plan":   "the-outage_budget-of-a-plan",
		"A [link](x.md) and **bold**":     "a-link-and-bold",
		"Ids — and sizes":                 "ids--and-sizes",
		"Über 2.17":                       "über-217",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

func TestCheckLinksNamesFileLineAndLink(t *testing.T) {
	fsys := fstest.MapFS{
		"README.md": {Data: []byte("# Top\n\n[ok](docs/a.md#a-heading) [dir](docs/) [web](https://example.com/x)\n" +
			"[same](#top) [gone](docs/b.md)\n\n```sh\n[in code](nowhere.md)\n```\n`[span](nowhere.md)`\n" +
			"[bad anchor](docs/a.md#no-such) [second](docs/a.md#a-heading-1) [line](main.go#L10)\n[ref]: docs/c.md\n")},
		"docs/a.md": {Data: []byte("# A heading\n\n## A heading\n")},
		"main.go":   {Data: []byte("package main\n")},
	}
	got := checkLinks(fsys, []string{"README.md"})
	want := []string{
		`README.md:4: link "docs/b.md": no such file or directory docs/b.md`,
		`README.md:10: link "docs/a.md#no-such": docs/a.md has no heading whose anchor is #no-such`,
		`README.md:11: link "docs/c.md": no such file or directory docs/c.md`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
