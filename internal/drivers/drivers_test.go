package drivers

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/drivers/function"
	"github.com/serverless-osb/broker/internal/logging"
	"github.com/serverless-osb/broker/internal/logging/logtest"
)

// loadCatalog writes a catalog with one plan per broker block and loads it.
func loadCatalog(t *testing.T, blocks ...string) *catalog.Catalog {
	t.Helper()
	var b strings.Builder
	b.WriteString("services:\n  - id: svc-1\n    name: s\n    description: d\n    bindable: true\n    plans:\n")
	for i, block := range blocks {
		b.WriteString("      - id: plan-" + string(rune('a'+i)) + "\n        name: p" + string(rune('a'+i)) + "\n        description: d\n")
		if block != "" {
			b.WriteString("        broker:\n")
			for _, line := range strings.Split(block, "\n") {
				b.WriteString("          " + line + "\n")
			}
		}
	}
	path := filepath.Join(t.TempDir(), "my-catalog.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func TestBuild(t *testing.T) {
	t.Run("a plan that names no driver gets the default one", func(t *testing.T) {
		cat := loadCatalog(t, "", "driver: demo")
		set, err := Build(t.Context(), cat, Env{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range cat.Services()[0].Plans {
			if d, _, ok := set.For(p); !ok || d == nil {
				t.Errorf("plan %s has no driver", p.Name)
			}
		}
	})
	for _, tc := range []struct {
		name   string
		blocks []string
		want   []string
	}{
		{"an unknown driver is refused with the list of drivers",
			[]string{"driver: terraform"},
			[]string{`my-catalog.yaml: services[0].plans[0].broker.driver: no driver "terraform" in this broker; the drivers are demo, cloudformation, function`}},
		{"a setting the demo driver does not have is refused, naming the key",
			[]string{"driver: demo\nmdoe: async"},
			[]string{`my-catalog.yaml: services[0].plans[0].broker.mdoe: the demo driver has no settings`}},
		{"every problem is reported at once, one per line",
			[]string{"driver: x", "", "driver: y"},
			[]string{`services[0].plans[0].broker.driver: no driver "x"`, `services[0].plans[2].broker.driver: no driver "y"`}},
		{"a cloudformation plan without the schemas its templates need gets one line per schema, naming the plan's field",
			[]string{"driver: cloudformation\nmode: async-only\ntemplate: " + shipped("s3-bucket/instance.yaml") + "\nbinding_template: " + shipped("s3-bucket/binding.yaml")},
			[]string{
				`my-catalog.yaml: services[0].plans[0].schemas.service_instance.create.parameters: is missing; the template ` + shipped("s3-bucket/instance.yaml") + ` declares parameters that the plan does not fix (Encryption, NoncurrentVersionExpirationDays and Versioning)`,
				`my-catalog.yaml: services[0].plans[0].schemas.service_binding.create.parameters: is missing;`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cat := loadCatalog(t, tc.blocks...)
			_, err := Build(t.Context(), cat, Env{})
			if err == nil {
				t.Fatal("the catalog was accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if lines := strings.Count(err.Error(), "\n") + 1; lines != len(tc.want) {
				t.Errorf("%d lines, want %d: %q", lines, len(tc.want), err)
			}
			if _, ferr := Files(cat); ferr == nil || ferr.Error() != err.Error() {
				t.Errorf("Files says %v, Build %v: want the same problems", ferr, err)
			}
		})
	}
	t.Run("a function plan's secret that is not there stops the start, one line per plan, naming it", func(t *testing.T) {
		dir := t.TempDir()
		empty := filepath.Join(dir, "empty")
		if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cat := loadCatalog(t,
			"driver: function\nurl: https://a.example\nsecret_env: SET_SECRET",
			"driver: function\nurl: https://b.example\nsecret_env: UNSET_SECRET",
			"driver: function\nurl: https://c.example\nsecret_file: "+filepath.Join(dir, "missing"),
			"driver: function\nurl: https://d.example\nsecret_file: "+empty,
			"driver: function\nfunction: my-fn")
		getenv := func(k string) string {
			if k == "SET_SECRET" {
				return "s3cr3t"
			}
			return ""
		}
		_, err := Build(t.Context(), cat, Env{Getenv: getenv})
		if err == nil {
			t.Fatal("the broker started")
		}
		want := []string{
			"my-catalog.yaml: services[0].plans[1].broker.secret_env: the variable UNSET_SECRET is not set (or empty) where the broker runs",
			"my-catalog.yaml: services[0].plans[2].broker.secret_file: the file " + filepath.Join(dir, "missing") + " is unreadable: no such file or directory",
			"my-catalog.yaml: services[0].plans[3].broker.secret_file: the file " + empty + " is empty",
		}
		lines := strings.Split(err.Error(), "\n")
		if len(lines) != len(want) {
			t.Fatalf("%d lines, want %d: %q", len(lines), len(want), err)
		}
		for i, w := range want {
			if !strings.HasPrefix(lines[i], w) {
				t.Errorf("line %q, want %q", lines[i], w)
			}
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Error("the error holds a secret")
		}
		if _, err := Files(cat); err != nil {
			t.Errorf("Files (make build, cdk synth) needs the secrets: %v", err)
		}
	})
	t.Run("a cloudformation plan whose template declares a Transform stops the start, naming the plan's field and the template", func(t *testing.T) {
		sam := filepath.Join(t.TempDir(), "sam.yaml")
		if err := os.WriteFile(sam, []byte("Transform: AWS::Serverless-2016-10-31\nResources:\n  F: {Type: AWS::Serverless::Function}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cat := loadCatalog(t, "driver: cloudformation\nmode: async-only\ntemplate: "+sam)
		_, err := Build(t.Context(), cat, Env{})
		want := "my-catalog.yaml: services[0].plans[0].broker.template: " + sam + " runs Transform AWS::Serverless-2016-10-31"
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("error %v, want it to start %q", err, want)
		}
	})
	t.Run("Wrap replaces every driver", func(t *testing.T) {
		cat := loadCatalog(t, "")
		set, err := Build(t.Context(), cat, Env{})
		if err != nil {
			t.Fatal(err)
		}
		set.Wrap(func(d broker.Driver) broker.Driver { return wrapped{d} })
		if d, _, _ := set.For(cat.Services()[0].Plans[0]); d == nil {
			t.Fatal("no driver")
		} else if _, ok := d.(wrapped); !ok {
			t.Errorf("driver %T is not wrapped", d)
		}
	})
}

type wrapped struct{ broker.Driver }

// shipped is the absolute path of a template of services/.
func shipped(path string) string {
	abs, err := filepath.Abs(filepath.Join("../../services", path))
	if err != nil {
		panic(err)
	}
	return abs
}

func TestTheFunctionDriverSeesThePlansAsTheCatalogHasThem(t *testing.T) {
	cat := loadCatalog(t, "driver: function\nurl: https://fn.example.com/osb\nsecret_env: FN_SECRET", "driver: demo")
	set, err := Build(t.Context(), cat, Env{Getenv: func(string) string { return "a-secret" }})
	if err != nil {
		t.Fatal(err)
	}
	d, _, _ := set.For(cat.Services()[0].Plans[0])
	fn, ok := d.(*function.Driver)
	if !ok || fn.PlanSettings == nil {
		t.Fatalf("driver %T without the catalog's plans", d)
	}
	if s, ok := fn.PlanSettings("plan-a"); !ok || s.Target.URL != "https://fn.example.com/osb" {
		t.Errorf("plan-a: %+v %v, want its settings", s, ok)
	}
	for _, id := range []string{"plan-b", "plan-gone"} {
		if s, ok := fn.PlanSettings(id); ok {
			t.Errorf("%s: %+v, want none: not a function plan of the catalog", id, s)
		}
	}
}

// TestAFunctionPlanOnProtocolOneIsWarnedAboutAtStart: a plan that opts into
// the version 1 signature is named in one warning when the drivers are
// built; a plan on the default (version 2), or a Lambda target, is not.
func TestAFunctionPlanOnProtocolOneIsWarnedAboutAtStart(t *testing.T) {
	cat := loadCatalog(t,
		"driver: function\nurl: https://old.example.com/osb\nsecret_env: FN_SECRET\nprotocol: 1",
		"driver: function\nurl: https://new.example.com/osb\nsecret_env: FN_SECRET",
		"driver: function\nfunction: my-fn\nprotocol: 1",
		"driver: demo")
	logs := &bytes.Buffer{}
	if _, err := Build(t.Context(), cat, Env{Getenv: func(string) string { return "a-secret" }, Logger: logging.New(logs, slog.LevelInfo)}); err != nil {
		t.Fatal(err)
	}
	lines, err := logtest.Lines(logs.String())
	if err != nil {
		t.Fatal(err)
	}
	var warned []string
	for _, l := range lines {
		if l["level"] == "WARN" && strings.Contains(l["msg"].(string), "protocol 1") {
			warned = append(warned, fmt.Sprint(l["plan_id"], "/", l["plan"]))
		}
	}
	if want := []string{"plan-a/pa"}; !slices.Equal(warned, want) {
		t.Errorf("warned about %v, want %v (the HTTP plan on protocol 1, once): %s", warned, want, logs)
	}
}

// TestWithoutTags: a bootstrap leaves out the omittable drivers its
// catalog names in no plan, and refuses at start, saying how to build
// one, a catalog that names one it left out.
func TestWithoutTags(t *testing.T) {
	for _, tt := range []struct {
		used []string
		want []string
	}{
		{[]string{"demo"}, []string{"osb_without_cloudformation", "osb_without_function"}},
		{[]string{"cloudformation"}, []string{"osb_without_function"}},
		{[]string{"cloudformation", "demo", "function"}, nil},
	} {
		if got := WithoutTags(tt.used); !slices.Equal(got, tt.want) {
			t.Errorf("WithoutTags(%v) = %v, want %v", tt.used, got, tt.want)
		}
	}
	_, err := omitted("function").Configure(nil, nil, "")
	var se *catalog.SettingError
	if !errors.As(err, &se) || se.Key != "driver" || !strings.Contains(se.Problem, "built without the function driver") || !strings.Contains(se.Problem, "make build") {
		t.Errorf("an omitted driver's plan: %v", err)
	}
}

// configureAll configures the plans on every processor at once (the api's
// cold start): the deployed catalog, whose plans share templates, comes out
// as each plan configured alone, in the catalog's order (run with -race).
func TestConfigureAllIsEachPlanConfiguredAlone(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	cat, err := catalog.Load(filepath.Join("..", "..", "services", "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	all, err := configureAll(cat)
	if err != nil {
		t.Fatal(err)
	}
	var plans []*catalog.Plan
	for _, svc := range cat.Services() {
		plans = append(plans, svc.Plans...)
	}
	if len(all) != len(plans) || len(plans) < 10 {
		t.Fatalf("%d plans configured of %d", len(all), len(plans))
	}
	for i, p := range plans {
		kind, settings, err := configure(cat, p)
		if err != nil {
			t.Fatal(err)
		}
		if all[i].plan != p || all[i].kind.Name != kind.Name || !reflect.DeepEqual(all[i].settings, settings) {
			t.Errorf("plan %d (%s) configured with the others differs from it configured alone", i, p.Name)
		}
	}
}
