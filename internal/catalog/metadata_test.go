package catalog_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/catalog"
)

// TestRepositoryCatalogsMetadata holds the catalogs the broker ships to
// what OSB clients read: plan bullets are strings (profile.md; clients
// that vendor brokerapi's types cannot read objects there), and no
// placeholder text reaches a platform's marketplace.
func TestRepositoryCatalogsMetadata(t *testing.T) {
	placeholders := []string{"Add a blurb here", "cat.gif", `"The name"`, "galaxy far far away"}
	for _, path := range []string{"catalog.yaml", "services/catalog.yaml"} {
		t.Run(path, func(t *testing.T) {
			c, err := catalog.Load(filepath.Join("..", "..", path))
			if err != nil {
				t.Fatal(err)
			}
			body := string(c.JSON())
			for _, p := range placeholders {
				if strings.Contains(body, p) {
					t.Errorf("the catalog holds the placeholder %s", p)
				}
			}
			var served struct {
				Services []struct {
					Name  string `json:"name"`
					Plans []struct {
						Name     string `json:"name"`
						Metadata struct {
							Bullets []any `json:"bullets"`
						} `json:"metadata"`
					} `json:"plans"`
				} `json:"services"`
			}
			if err := json.Unmarshal(c.JSON(), &served); err != nil {
				t.Fatal(err)
			}
			for _, s := range served.Services {
				for _, p := range s.Plans {
					if len(p.Metadata.Bullets) == 0 {
						t.Errorf("%s/%s: no bullets", s.Name, p.Name)
					}
					for _, b := range p.Metadata.Bullets {
						if _, ok := b.(string); !ok {
							t.Errorf("%s/%s: bullet %v is not a string", s.Name, p.Name, b)
						}
					}
				}
			}
		})
	}
}
