package function_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/drivers/function"
)

const services = "../../../services"

func TestTheExampleCatalogAndEventsFollowTheProtocol(t *testing.T) {
	t.Run("every plan of the example catalog is configured", func(t *testing.T) {
		cat, err := catalog.Load(filepath.Join(services, "function-catalog.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, svc := range cat.Services() {
			for _, p := range svc.Plans {
				if _, err := function.Configure(p, p.Settings.Config, cat.Dir); err != nil || p.Settings.Driver != "function" {
					t.Errorf("plan %s: driver %q: %v", p.Name, p.Settings.Driver, err)
				}
			}
		}
	})
	schema := compile(t, "request")
	events, _ := filepath.Glob(filepath.Join(services, "function", "events", "*.json"))
	if len(events) == 0 {
		t.Fatal("no sample events")
	}
	for _, path := range events {
		t.Run(filepath.Base(path)+" is a request", func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			if err := schema.Validate(v); err != nil {
				t.Error(err)
			}
		})
	}
}
