package env_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/env"
)

const importPath = "github.com/serverless-osb/broker/internal/env"

// moduleRoot is the repository's root, from this package's folder.
const moduleRoot = "../.."

func TestStateMachineARN(t *testing.T) {
	tests := []struct {
		workflow broker.Workflow
		want     string
	}{
		{broker.WorkflowOperation, env.OperationStateMachineARN},
		{broker.WorkflowCleanup, env.CleanupStateMachineARN},
	}
	for _, tt := range tests {
		t.Run("the "+string(tt.workflow)+" workflow's variable is "+tt.want, func(t *testing.T) {
			if got := env.StateMachineARN(string(tt.workflow)); got != tt.want {
				t.Errorf("StateMachineARN(%q) = %s, want %s", tt.workflow, got, tt.want)
			}
		})
	}
	t.Run("a hyphen becomes an underscore", func(t *testing.T) {
		if got := env.StateMachineARN("binding-rotation"); got != "BROKER_BINDING_ROTATION_STATE_MACHINE_ARN" {
			t.Errorf("got %s", got)
		}
	})
}

// TestEveryNameIsRead holds the package to its word: every variable it
// names is read by the code the functions run (a reference outside this
// package, outside tests and outside infra, which sets them), so that the
// stack, which may set only these, sets nothing that nobody reads.
func TestEveryNameIsRead(t *testing.T) {
	names := constants(t, ".")
	if len(names) == 0 {
		t.Fatal("no constants found")
	}
	read := map[string]bool{}
	err := filepath.WalkDir(moduleRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			rel, _ := filepath.Rel(moduleRoot, path)
			if rel == "infra" || rel == filepath.Join("internal", "env") || strings.HasPrefix(d.Name(), ".") && rel != "." ||
				d.Name() == "node_modules" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, spec := range f.Imports {
			if p, _ := strconv.Unquote(spec.Path.Value); p != importPath {
				continue
			}
			local := "env"
			if spec.Name != nil {
				local = spec.Name.Name
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == local {
						read[sel.Sel.Name] = true
					}
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if !read[name] {
			t.Errorf("env.%s (%s) is read by nothing the functions run: delete it, or read it", name, names[name])
		}
	}
}

// constants maps the exported string constants of the package in dir to
// their values.
func constants(t *testing.T, dir string) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				v := spec.(*ast.ValueSpec)
				for i, name := range v.Names {
					var lit *ast.BasicLit
					if i < len(v.Values) {
						lit, _ = v.Values[i].(*ast.BasicLit)
					}
					if lit == nil || lit.Kind != token.STRING {
						t.Fatalf("%s: %s is not a string literal: keep the names literal, so that they read as what they are", path, name.Name)
					}
					if name.IsExported() {
						found[name.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
	}
	return found
}

// TestNamesAreEveryConstant: Names, the list the stack is checked against,
// has every constant the package declares, once.
func TestNamesAreEveryConstant(t *testing.T) {
	want := slices.Sorted(maps.Values(constants(t, ".")))
	got := slices.Sorted(slices.Values(env.Names()))
	if !slices.Equal(got, want) {
		t.Errorf("Names() = %q, want every constant: %q", got, want)
	}
}
