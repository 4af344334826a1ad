//go:build !osb_without_yaml

package cloudformation

import (
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// byYAMLv3 is what yaml.v3 reads body into: the plain values (as
// yamlTemplate decodes them) and the long form (as templateDocument reads
// them); ok is false when it reads no document.
func byYAMLv3(body []byte) (plain, long any, ok bool) {
	var node yaml.Node
	if yaml.Unmarshal(body, &node) != nil || node.Kind == 0 {
		return nil, nil, false
	}
	if node.Decode(&plain) != nil {
		return nil, nil, false
	}
	long, err := longForm(&node)
	return plain, long, err == nil
}

// bySubset is the same, read by the subset reader; ok is false when it
// refuses body.
func bySubset(body []byte) (plain, long any, ok bool) {
	n, err := readSubsetYAML(body)
	if err != nil || n == nil {
		return nil, nil, false
	}
	if plain, err = subsetValue(n); err != nil {
		return nil, nil, false
	}
	long, err = subsetLongForm(n)
	return plain, long, err == nil
}

// sameYAML is reflect.DeepEqual with NaN equal to NaN.
func sameYAML(a, b any) bool {
	if fa, ok := a.(float64); ok {
		fb, ok := b.(float64)
		return ok && (fa == fb || math.IsNaN(fa) && math.IsNaN(fb))
	}
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			if w, ok := b[k]; !ok || !sameYAML(v, w) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameYAML(a[i], b[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b) && reflect.TypeOf(a) == reflect.TypeOf(b)
}

// templateFiles are the YAML templates of the repository: the bundled
// catalog's (services/) and every testdata's.
func templateFiles(t testing.TB) []string {
	var files []string
	for _, root := range []string{"../../../services", "../../../internal", "../../../infra/testdata", "../../../bench"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
				files = append(files, path)
			}
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	return files
}

// TestSubsetYAMLReadsEveryTemplate: every CloudFormation template of the
// repository (a YAML file yamlTemplate reads as one) is read by the
// subset reader, the worker's without yaml.v3, into the same values, the
// same macros and the same long form as by yaml.v3.
func TestSubsetYAMLReadsEveryTemplate(t *testing.T) {
	read := 0
	for _, path := range templateFiles(t) {
		body, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, wantMacros, err := yamlTemplate(body)
		if err != nil || want["Resources"] == nil {
			continue // not a template
		}
		read++
		got, gotMacros, err := subsetTemplate(body)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if !sameYAML(any(got), any(want)) || !reflect.DeepEqual(gotMacros, wantMacros) {
			t.Errorf("%s: read otherwise than by yaml.v3:\n%v %v\nwant\n%v %v", path, got, gotMacros, want, wantMacros)
		}
		wantDoc, err := templateDocument(body)
		if err != nil {
			t.Fatal(err)
		}
		gotDoc, err := subsetDocument(body)
		if err != nil || !sameYAML(any(gotDoc), any(wantDoc)) {
			t.Errorf("%s: the long form %v, %v; want %v", path, gotDoc, err, wantDoc)
		}
	}
	if read < 20 {
		t.Errorf("%d templates read: the walk missed them", read)
	}
}

// subsetCases are YAML the subset reader reads as yaml.v3 does, and some
// it refuses (want "refused").
var subsetCases = []struct{ name, body, want string }{
	{"numbers", "a: 1\nb: -2\nc: +3\nd: 1.5\ne: .5\nf: 1e3\ng: 9223372036854775807\nh: 18446744073709551615\ni: 99999999999999999999\nj: 0\nk: -0\n", ""},
	{"special values", "a: ~\nb: null\nc: NULL\nd: true\ne: False\nf: .inf\ng: -.Inf\nh: .nan\ni:\nj: yes\nk: no\nl: on\nm: Off\nn: y\n", ""},
	{"text that looks like numbers", "b: 1.2.3\nc: 10.0.0.0/16\nd: 12:30\ne: +\nf: .\ng: 1_000\nh: 0x1F\ni: 0o17\nj: 0b101\nk: -0b11\nl: 017\nm: 08\nn: 8.0.mysql_aurora.3.10.0\no: .5e3\np: 1__2\n", ""},
	{"a date", "AWSTemplateFormatVersion: 2010-09-09\n", "refused"},
	{"quoted", "a: \"x \\\" \\\\ \\n \\t \\u00e9 \\x41 \\U0001F600 \\_\"\nb: 'it''s'\nc: \"5\"\nd: ''\ne: \"\"\n", ""},
	{"tags", "a: !Ref X\nb: !GetAtt R.Arn\nc: !Sub \"${A}-b\"\nd: !If [C, !Ref A, !Ref \"AWS::NoValue\"]\ne: !Join\n  - ''\n  - - a\n    - !Ref B\nf: !Ref\ng: !Equals [!Ref A, 5]\n", ""},
	{"flow", "a: [a, 'b', \"c\", 1, true, [x, y], {k: v, l: [1]}]\nb: {}\nc: []\nd: {a: 1, 'b c': !Ref D}\n", ""},
	{"blocks", "a: |\n  one\n    two\n\n  three\nb: >-\n  one\n  two\n\n  three\n\n\n  four\nc: |-\n  x\nd: >\n  folded\n  text\ne: |+\n  kept\nf: x\n", ""},
	{"sequences", "a:\n- 1\n- b: 2\n  c: 3\n-\n  - 4\n- - 5\n  - - 6\n    - 7\n", ""},
	{"sequence under a key", "a:\n  - 1\n  - b: 2\n    c: [3]\n  -\n    d: 4\nb:\n- x\n", ""},
	{"comments", "# head\na: 1 # one\n\n  # indented\nb: \"#\" # two\nc: a#b\n", ""},
	{"document marker", "---\na: 1\n", ""},
	{"a tagged block", "Value: !Sub\n  - \"${A}\"\n  - A: !Ref B\nOther: !If\n  - C\n  - x\n  - y\n", ""},
	{"transform", "Transform: AWS::Serverless-2016-10-31\nResources:\n  A:\n    Properties:\n      X: !Transform {Name: M}\n      Y:\n        Fn::Transform: {Name: N}\n", ""},
	{"an anchor", "a: &x 1\nb: *x\n", "refused"},
	{"a multi-line plain scalar", "a: one\n  two\n", "refused"},
	{"a duplicate key", "a: 1\na: 2\n", "refused"},
	{"a merge key", "a: {b: 1}\nc:\n  <<: {d: 2}\n", "refused"},
	{"a tab", "a:\t1\n", "refused"},
	{"a number key", "1: a\n", "refused"},
	{"a flow over lines", "a: [1,\n  2]\n", "refused"},
}

// TestSubsetYAMLReadsAsYAMLv3Does: each case the subset reader reads, it
// reads as yaml.v3 does; the refused ones it refuses.
func TestSubsetYAMLReadsAsYAMLv3Does(t *testing.T) {
	for _, c := range subsetCases {
		t.Run(c.name, func(t *testing.T) {
			plain, long, ok := bySubset([]byte(c.body))
			if c.want == "refused" {
				if ok {
					t.Errorf("read as %v: want refused", plain)
				}
				return
			}
			if !ok {
				_, err := readSubsetYAML([]byte(c.body))
				t.Fatalf("refused: %v", err)
			}
			wantPlain, wantLong, wantOK := byYAMLv3([]byte(c.body))
			if !wantOK || !sameYAML(plain, wantPlain) || !sameYAML(long, wantLong) {
				t.Errorf("read as\n%#v\n%#v\nyaml.v3 (%v):\n%#v\n%#v", plain, long, wantOK, wantPlain, wantLong)
			}
		})
	}
}

// FuzzSubsetYAML: whatever the subset reader reads, yaml.v3 reads too,
// into the same values and the same long form (seeded with every
// template of the repository and the cases above).
func FuzzSubsetYAML(f *testing.F) {
	for _, path := range templateFiles(f) {
		if body, err := os.ReadFile(path); err == nil {
			f.Add(body)
		}
	}
	for _, c := range subsetCases {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		plain, long, ok := bySubset(body)
		if !ok {
			return
		}
		wantPlain, wantLong, wantOK := byYAMLv3(body)
		if !wantOK || !sameYAML(plain, wantPlain) || !sameYAML(long, wantLong) {
			t.Errorf("%q read as\n%s\n%s\nyaml.v3 (%v):\n%s\n%s", body, show(plain), show(long), wantOK, show(wantPlain), show(wantLong))
		}
	})
}

func show(v any) string { return fmt.Sprintf("%#v", v) }
