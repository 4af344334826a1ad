package catalog

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestShippedCatalog(t *testing.T) {
	c, err := Load(shippedCatalog)
	if err != nil {
		t.Fatalf("the shipped catalog does not load: %v", err)
	}

	var served map[string]any
	if err := json.Unmarshal(c.JSON(), &served); err != nil {
		t.Fatalf("JSON() is not JSON: %v", err)
	}

	t.Run("it serves no broker block anywhere", func(t *testing.T) {
		if path := findKey(served, "broker", "$"); path != "" {
			t.Errorf("served JSON has a broker key at %s", path)
		}
	})

	t.Run("it serves exactly the YAML without the broker blocks", func(t *testing.T) {
		data, err := os.ReadFile(shippedCatalog)
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := yaml.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		for _, s := range want["services"].([]any) {
			for _, p := range s.(map[string]any)["plans"].([]any) {
				delete(p.(map[string]any), "broker")
			}
		}
		// Compare as JSON values: YAML ints and JSON numbers differ in Go.
		b, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		var wantJSON map[string]any
		if err := json.Unmarshal(b, &wantJSON); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(served, wantJSON) {
			t.Errorf("served catalog differs from the YAML:\n got %s\nwant %s", c.JSON(), b)
		}
	})

	t.Run("it keeps vendor fields and metadata", func(t *testing.T) {
		svc := served["services"].([]any)[0].(map[string]any)
		if svc["max_db_per_node"] != float64(5) {
			t.Errorf("max_db_per_node = %v, want 5", svc["max_db_per_node"])
		}
		md := svc["metadata"].(map[string]any)
		if md["displayName"] != "Fake service (demo)" || md["provider"] == nil || md["listing"] == nil {
			t.Errorf("offering metadata lost fields: %v", md)
		}
		pl := svc["plans"].([]any)[0].(map[string]any)
		if pl["max_storage_tb"] != float64(5) {
			t.Errorf("max_storage_tb = %v, want 5", pl["max_storage_tb"])
		}
		if _, ok := pl["metadata"].(map[string]any)["bullets"]; !ok {
			t.Errorf("plan metadata lost its bullets: %v", pl["metadata"])
		}
	})

	t.Run("it has one bindable, retrievable offering without requires or dashboard_client", func(t *testing.T) {
		if n := len(c.Services()); n != 1 {
			t.Fatalf("%d offerings, want 1", n)
		}
		s := c.Services()[0]
		if s.Name != "fake-service" || !s.Bindable || !s.PlanUpdateable || !s.InstancesRetrievable || !s.BindingsRetrievable {
			t.Errorf("offering = %+v", s)
		}
		if len(s.Requires) != 0 {
			t.Errorf("requires = %v, want none", s.Requires)
		}
		svc := served["services"].([]any)[0].(map[string]any)
		for _, k := range []string{"requires", "dashboard_client"} {
			if _, ok := svc[k]; ok {
				t.Errorf("the offering serves %s", k)
			}
		}
	})

	t.Run("its three plans have the right modes and settings", func(t *testing.T) {
		s := c.Services()[0]
		want := []struct {
			name        string
			mode        Mode
			deprovision DeprovisionMode
			maxPollSecs int
		}{
			{"fake-plan", ModeSync, DeprovisionWait, 0},
			{"fake-async-plan", ModeAsync, DeprovisionWait, 7200},
			{"fake-async-only-plan", ModeAsyncOnly, DeprovisionDetach, 7200},
		}
		if len(s.Plans) != len(want) {
			t.Fatalf("%d plans, want %d", len(s.Plans), len(want))
		}
		for i, w := range want {
			p := s.Plans[i]
			if p.Name != w.name || !sameSettings(p.Settings, Settings{Driver: "demo", Mode: w.mode, Deprovision: w.deprovision}) || p.MaximumPollingDuration != w.maxPollSecs {
				t.Errorf("plan %d = %s %+v max poll %d, want %s %s max poll %d", i, p.Name, p.Settings, p.MaximumPollingDuration, w.name, w.mode, w.maxPollSecs)
			}
			if p.MaintenanceInfo == nil || p.MaintenanceInfo.Version != "1.0.0" || p.MaintenanceInfo.Description == "" {
				t.Errorf("plan %s maintenance_info = %+v", p.Name, p.MaintenanceInfo)
			}
			for _, k := range []SchemaKind{InstanceCreate, InstanceUpdate, BindingCreate} {
				if !p.HasSchema(k) {
					t.Errorf("plan %s has no %s schema", p.Name, k)
				}
			}
			if !s.PlanBindable(p) || !s.PlanIsUpdateable(p) {
				t.Errorf("plan %s is not bindable and updateable", p.Name)
			}
		}
	})

	t.Run("its ids are random version 4 UUIDs", func(t *testing.T) {
		v4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
		s := c.Services()[0]
		ids := []string{s.ID}
		for _, p := range s.Plans {
			ids = append(ids, p.ID)
		}
		for _, id := range ids {
			if !v4.MatchString(id) {
				t.Errorf("%q is not a v4 UUID", id)
			}
			if strings.Contains(strings.ToUpper(id), "XXXX") {
				t.Errorf("%q is the spec example's placeholder", id)
			}
		}
	})
}

// findKey returns the path of the first key named key in v, or "".
func findKey(v any, key, path string) string {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if k == key {
				return path + "." + k
			}
			if p := findKey(e, key, path+"."+k); p != "" {
				return p
			}
		}
	case []any:
		for _, e := range v {
			if p := findKey(e, key, path+"[]"); p != "" {
				return p
			}
		}
	}
	return ""
}

func TestETag(t *testing.T) {
	original, err := os.ReadFile(shippedCatalog)
	if err != nil {
		t.Fatal(err)
	}
	load := func(t *testing.T, data []byte) *Catalog {
		t.Helper()
		path := filepath.Join(t.TempDir(), "catalog.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	base := load(t, original)

	t.Run("it is a quoted strong entity tag", func(t *testing.T) {
		if !regexp.MustCompile(`^"[0-9a-f]{32}"$`).MatchString(base.ETag()) {
			t.Errorf("ETag() = %s", base.ETag())
		}
	})

	tests := []struct {
		name   string
		edit   func(string) string
		reload bool // whether the edit changes the served catalog
	}{
		{"it is the same for two loads of the same file", nil, false},
		{"it ignores comments", func(s string) string { return "# a new comment\n" + s }, false},
		{"it ignores broker settings, which are never served", func(s string) string {
			return strings.Replace(s, "mode: async-only", "mode: sync", 1)
		}, false},
		{"it changes when a description changes", func(s string) string {
			return strings.Replace(s, "description: fake service", "description: a fake service", 1)
		}, true},
		{"it changes when a plan's maintenance version changes", func(s string) string {
			return strings.Replace(s, `version: "1.0.0"`, `version: "1.0.1"`, 1)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edited := string(original)
			if tt.edit != nil {
				if edited = tt.edit(edited); edited == string(original) {
					t.Fatal("the edit did not apply")
				}
			}
			c := load(t, []byte(edited))
			if changed := c.ETag() != base.ETag(); changed != tt.reload {
				t.Errorf("ETag changed = %v, want %v (%s vs %s)", changed, tt.reload, c.ETag(), base.ETag())
			}
		})
	}
}

func TestJSONReturnsACopy(t *testing.T) {
	c := mustParse(t, smallCatalog())
	b := c.JSON()
	b[0] = 'X'
	if c.JSON()[0] != '{' {
		t.Error("changing what JSON() returned changed the catalog")
	}
}

func TestLoadOfAMissingFileSaysWhichFile(t *testing.T) {
	_, err := Load("testdata/no-such-catalog.yaml")
	if err == nil || !strings.Contains(err.Error(), "no-such-catalog.yaml") {
		t.Errorf("Load() error = %v, want one naming the file", err)
	}
}

func TestLookup(t *testing.T) {
	c := mustParse(t, smallCatalog())
	tests := []struct {
		name      string
		serviceID string
		planID    string
		wantErr   error
		wantText  string
	}{
		{"a plan of its own offering is found", "svc-1", "plan-2", nil, ""},
		{"an unknown service id is refused", "nope", "plan-1", ErrUnknownService, `unknown service_id "nope"`},
		{"an unknown plan id is refused", "svc-1", "nope", ErrUnknownPlan, `unknown plan_id "nope"`},
		{"a plan of another offering is refused, naming both", "svc-1", "plan-3", ErrPlanNotInService,
			`plan_id "plan-3" (plan "small") belongs to service_id "svc-2" (offering "svc-two"), not to service_id "svc-1" (offering "svc-one")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, p, err := c.Lookup(tt.serviceID, tt.planID)
			if tt.wantErr == nil {
				if err != nil || s.ID != tt.serviceID || p.ID != tt.planID {
					t.Fatalf("Lookup() = %v, %v, %v", s, p, err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Lookup() error = %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("Lookup() error = %q, want it to contain %q", err, tt.wantText)
			}
			if s != nil || p != nil {
				t.Errorf("Lookup() returned %v, %v with an error", s, p)
			}
		})
	}
}

func TestAccessors(t *testing.T) {
	c := mustParse(t, smallCatalog())

	t.Run("Service finds an offering by id and nothing else", func(t *testing.T) {
		if s := c.Service("svc-2"); s == nil || s.Name != "svc-two" {
			t.Errorf("Service(svc-2) = %v", s)
		}
		if s := c.Service("plan-1"); s != nil {
			t.Errorf("Service(plan-1) = %v, want nil", s)
		}
	})
	t.Run("PlanByID finds a plan and its offering", func(t *testing.T) {
		s, p := c.PlanByID("plan-3")
		if s == nil || p == nil || s.ID != "svc-2" || p.Name != "small" {
			t.Errorf("PlanByID(plan-3) = %v, %v", s, p)
		}
		if s, p := c.PlanByID("svc-1"); s != nil || p != nil {
			t.Errorf("PlanByID(svc-1) = %v, %v, want nils", s, p)
		}
	})
	t.Run("a plan without a broker block names no driver, runs in sync mode, deprovisions waiting", func(t *testing.T) {
		_, p := c.PlanByID("plan-2")
		if !sameSettings(p.Settings, Settings{Mode: ModeSync, Deprovision: DeprovisionWait}) {
			t.Errorf("settings = %+v", p.Settings)
		}
		_, p = c.PlanByID("plan-1")
		if !sameSettings(p.Settings, Settings{Driver: "demo", Mode: ModeAsync, Deprovision: DeprovisionWait}) {
			t.Errorf("settings = %+v", p.Settings)
		}
	})
}

func TestPlanOverridesOffering(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name     string
		offering bool
		plan     *bool
		want     bool
	}{
		{"a plan that says nothing inherits true", true, nil, true},
		{"a plan that says nothing inherits false", false, nil, false},
		{"a plan that says false overrides true", true, &no, false},
		{"a plan that says true overrides false", false, &yes, true},
	}
	for _, tt := range tests {
		t.Run("bindable: "+tt.name, func(t *testing.T) {
			s := &Service{Bindable: tt.offering}
			if got := s.PlanBindable(&Plan{Bindable: tt.plan}); got != tt.want {
				t.Errorf("PlanBindable() = %v, want %v", got, tt.want)
			}
		})
		t.Run("plan_updateable: "+tt.name, func(t *testing.T) {
			s := &Service{PlanUpdateable: tt.offering}
			if got := s.PlanIsUpdateable(&Plan{PlanUpdateable: tt.plan}); got != tt.want {
				t.Errorf("PlanIsUpdateable() = %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("a parsed plan's bindable overrides its offering's", func(t *testing.T) {
		c := mustParse(t, smallCatalog())
		s, p := c.PlanByID("plan-3")
		if s.Bindable || !s.PlanBindable(p) {
			t.Errorf("offering bindable %v, plan bindable %v; want false, true", s.Bindable, s.PlanBindable(p))
		}
	})
}

// sameSettings compares the settings a test names; Config and Path are
// checked where a test is about them.
func sameSettings(got, want Settings) bool {
	return got.Driver == want.Driver && got.Mode == want.Mode && got.Deprovision == want.Deprovision && len(got.Config) == len(want.Config)
}

func TestDriverSettingsAreKeptForTheDriver(t *testing.T) {
	c, err := Parse("c.yaml", []byte(`
services:
  - id: svc-1
    name: s
    description: d
    bindable: true
    plans:
      - id: plan-1
        name: p
        description: d
        broker:
          driver: cloudformation
          mode: async
          template: services/x.yaml
          parameters: {A: "1"}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, p := c.PlanByID("plan-1")
	st := p.Settings
	if st.Driver != "cloudformation" || st.Mode != ModeAsync || st.Path != "services[0].plans[0].broker" ||
		st.Config["template"] != "services/x.yaml" || len(st.Config) != 2 {
		t.Fatalf("settings = %+v", st)
	}
	if strings.Contains(string(c.JSON()), "template") {
		t.Errorf("the served catalog shows the broker block: %s", c.JSON())
	}
	if c.Source != "c.yaml" || c.Dir != "" {
		t.Errorf("Source %q, Dir %q", c.Source, c.Dir)
	}
}

// TestSensitiveParameters: a plan's broker block says whether its
// parameters are stored sealed; by default they are not.
func TestSensitiveParameters(t *testing.T) {
	c := smallCatalog()
	plan(c, 0, 0)["broker"] = map[string]any{"sensitive_parameters": true}
	cat := mustParse(t, c)
	id, _ := plan(c, 0, 0)["id"].(string)
	if !cat.SensitiveParameters(id) {
		t.Errorf("plan %s with sensitive_parameters: true: its parameters are not sealed", id)
	}
	if got := cat.SensitivePlanIDs(); !slices.Equal(got, []string{id}) {
		t.Errorf("sensitive plans %q, want [%s]", got, id)
	}
	if cat.SensitiveParameters("no-such-plan") {
		t.Error("a plan the catalog does not have is sensitive")
	}
	if other := mustParse(t, smallCatalog()); other.SensitiveParameters(id) {
		t.Error("a plan without the setting is sensitive")
	}
}
