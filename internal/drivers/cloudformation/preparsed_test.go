package cloudformation

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestThePreparsedTemplateIsTheYAMLs: every shipped template has a
// pre-parsed form (the build bundles it beside the template), read back
// as what parsing its YAML gives, and only for the body it was made from.
func TestThePreparsedTemplateIsTheYAMLs(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "..", "..", "services", "*", "*.yaml"))
	if err != nil || len(paths) < 10 {
		t.Fatalf("the shipped templates: %v, %v", paths, err)
	}
	for _, path := range paths {
		body, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := parseTemplate(body)
		if err != nil {
			continue // not a template (a catalog)
		}
		pre, err := Preparse(body)
		if err != nil || pre == nil {
			t.Errorf("%s has no pre-parsed form (%v): the functions would parse its YAML at start", path, err)
			continue
		}
		got, ok := decodePreparsed(pre, body)
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the pre-parsed form reads back as %+v, not as its YAML %+v", path, got, want)
		}
		if _, ok := decodePreparsed(pre, append(body, "\n# changed\n"...)); ok {
			t.Errorf("%s: the pre-parsed form is read for a body it was not made from", path)
		}
	}
}

// markedTemplate is instanceTemplate with a comment (so that its body is
// this test's own) and the pre-parsed form Preparse makes of it.
func markedTemplate(t *testing.T, mark string) (body, pre []byte) {
	t.Helper()
	body = []byte(strings.Replace(instanceTemplate, "Resources:", "# "+mark+"\nResources:", 1))
	pre, err := Preparse(body)
	if err != nil || pre == nil {
		t.Fatalf("Preparse: %v, %v", pre, err)
	}
	return body, pre
}

// TestConfigureReadsThePreparsedTemplate: beside a template, its
// pre-parsed form is what Configure reads (here one made from the same
// body that says otherwise, which shows which was read); a stale one, or
// one of a float JSON would not keep, is not.
func TestConfigureReadsThePreparsedTemplate(t *testing.T) {
	dir := t.TempDir()
	body, pre := markedTemplate(t, "read pre-parsed")
	if err := os.WriteFile(filepath.Join(dir, "instance.yaml"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	said := strings.Replace(string(pre), `"Outputs":[`, `"Outputs":["FromThePreparsedForm",`, 1)
	if said == string(pre) {
		t.Fatalf("the pre-parsed form has no Outputs to mark: %s", pre)
	}
	if err := os.WriteFile(filepath.Join(dir, "instance.yaml"+PreparsedSuffix), []byte(said), 0o644); err != nil {
		t.Fatal(err)
	}
	tpl, err := readTemplate(KeyTemplate, "instance.yaml", dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(tpl.Outputs) == 0 || tpl.Outputs[0] != "FromThePreparsedForm" || tpl.Body != string(body) || tpl.Path != "instance.yaml" {
		t.Errorf("read %+v: not the pre-parsed form with the YAML's body", tpl)
	}

	stale := append(body, "\n# edited after the build\n"...)
	if err := os.WriteFile(filepath.Join(dir, "instance.yaml"), stale, 0o644); err != nil {
		t.Fatal(err)
	}
	if tpl, err := readTemplate(KeyTemplate, "instance.yaml", dir); err != nil || len(tpl.Outputs) > 0 && tpl.Outputs[0] == "FromThePreparsedForm" {
		t.Errorf("a stale pre-parsed form was read: %+v, %v", tpl, err)
	}

	whole := []byte(strings.Replace(instanceTemplate, "Resources:", "Metadata:\n  Ratio: 1.0\nResources:\n  Ratio:\n    Type: AWS::SNS::Topic\n    Properties:\n      Weight: 2.0", 1))
	if pre, err := Preparse(whole); err != nil || pre != nil {
		if got, ok := decodePreparsed(pre, whole); !ok || !reflect.DeepEqual(got.Declared, mustParse(t, whole).Declared) {
			t.Errorf("a template with a whole float got a pre-parsed form that reads back otherwise: %s", pre)
		}
	}
}

func mustParse(t *testing.T, body []byte) *Template {
	t.Helper()
	tpl, err := parseTemplate(body)
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// TestPreparsedOfReadsAsEncodingJSON: what preparsedOf takes, it reads as
// encoding/json (UseNumber) reads it into a preparsed: the pre-parsed
// forms of every shipped template (all of them the short way), and forms
// with nulls, empty lists and maps where Preparse writes values, and
// escapes in values; it leaves to encoding/json a form with an escape in a
// key, a key it does not write, or a value of another type.
func TestPreparsedOfReadsAsEncodingJSON(t *testing.T) {
	stdRead := func(data []byte) (preparsed, error) {
		var p preparsed
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		return p, d.Decode(&p)
	}
	paths, _ := filepath.Glob(filepath.Join("..", "..", "..", "services", "*", "*.yaml"))
	var forms []string
	for _, path := range paths {
		body, _ := os.ReadFile(path)
		if pre, err := Preparse(body); err == nil && pre != nil {
			forms = append(forms, string(pre))
		}
	}
	if len(forms) < 10 {
		t.Fatalf("%d pre-parsed forms of the shipped templates", len(forms))
	}
	short := 0
	for _, f := range forms {
		if _, ok := preparsedOf([]byte(f)); ok {
			short++
		}
	}
	if short < len(forms) {
		t.Errorf("%d of the %d shipped templates' forms are read the short way", short, len(forms))
	}
	taken := []string{
		`{"source":"s","template":null}`, `{"source":null,"template":{}}`, `{}`,
		`{"source":"s","template":{"Path":null,"Body":"","Parameters":null,"Resources":null,"Declared":null,"Outputs":null,"PrivateOutputs":[],"Macros":[]}}`,
		`{"source":"s","template":{"Parameters":{},"Declared":[],"Outputs":[]}}`,
		`{"source":"s","template":{"Parameters":{"A":null,"B":{"Type":"String","HasDefault":null,"Default":null,"AllowedValues":[]},"C":{"AllowedValues":["x",null]}}}}`,
		`{"source":"s","template":{"Resources":7,"Declared":[null,{"LogicalID":"L","Type":"AWS::S3::Bucket","Properties":null,"DeletionPolicy":null},{"Properties":{"N":1.5,"L":[1,{"Ref":"X"}]}}]}}`,
		`{"source":"a","source":"b"}`, `null`, `{"source":"s\u0041\"\n"}`,
	}
	left := []string{
		`{"sou\u0072ce":"s"}`, `{"Source":"s"}`, `{"source":"s","extra":1}`, `{"source":1}`, `{"source":"s","template":[]}`,
		`{"template":{"Resources":1.5}}`, `{"template":{"Resources":"1"}}`, `{"template":{"Resources":99999999999999999999}}`,
		`{"template":{"path":"p"}}`, `{"template":{"Outputs":"x"}}`, `{"template":{"Outputs":[1]}}`,
		`{"template":{"Parameters":{"A":{"HasDefault":"yes"}}}}`, `{"template":{"Parameters":{"A":{"type":"x"}}}}`,
		`{"template":{"Parameters":[]}}`, `{"template":{"Declared":{}}}`, `{"template":{"Declared":[{"Properties":[]}]}}`,
		`{"template":{"Declared":[{"Other":1}]}}`, `[]`, `not json`,
	}
	for _, f := range append(forms, taken...) {
		got, ok := preparsedOf([]byte(f))
		want, err := stdRead([]byte(f))
		if slices.Contains(taken, f) && !ok {
			t.Errorf("preparsedOf(%s) left it to encoding/json", f)
		}
		if !ok {
			continue
		}
		if err != nil {
			t.Errorf("preparsedOf(%s) took a form encoding/json refuses: %v", f, err)
		} else if !reflect.DeepEqual(got, want) {
			t.Errorf("preparsedOf(%.200s) = %+v, encoding/json %+v", f, got.Template, want.Template)
		}
	}
	for _, f := range left {
		if _, ok := preparsedOf([]byte(f)); ok {
			t.Errorf("preparsedOf(%s) took it; encoding/json is to read it", f)
		}
	}
}

// TestATemplateNamedByPlansConfiguredAtOnceIsParsedOnce: the plans are
// configured in parallel, and those naming one template wait for its one
// parse (a copy each, sharing its maps) rather than read its pre-parsed
// form again.
func TestATemplateNamedByPlansConfiguredAtOnceIsParsedOnce(t *testing.T) {
	dir := t.TempDir()
	body, pre := markedTemplate(t, "parsed once")
	for name, data := range map[string][]byte{"instance.yaml": body, "instance.yaml" + PreparsedSuffix: pre} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const plans = 8
	for round := range 20 {
		parsed.Clear() // as at a cold start
		got := make([]*Template, plans)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range plans {
			wg.Go(func() {
				<-start // all at once, as the parallel configuration reads
				got[i], _ = readTemplate(KeyTemplate, "instance.yaml", dir)
			})
		}
		close(start)
		wg.Wait()
		for i, tpl := range got {
			if tpl == nil || len(tpl.Parameters) == 0 {
				t.Fatalf("round %d, plan %d: template %+v", round, i, tpl)
			}
			if reflect.ValueOf(tpl.Parameters).UnsafePointer() != reflect.ValueOf(got[0].Parameters).UnsafePointer() {
				t.Fatalf("round %d: plan %d's template was parsed apart from plan 0's", round, i)
			}
			if tpl == got[0] && i > 0 {
				t.Fatalf("round %d: plan %d shares plan 0's copy", round, i)
			}
		}
	}
}
