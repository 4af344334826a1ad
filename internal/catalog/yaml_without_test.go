//go:build osb_without_yaml

package catalog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadCheckedWithoutYAML runs in the api's build without yaml.v3
// (make build's osb_without_yaml; TestTheBootstrapsBuiltWithoutLeaveItOut
// in internal/tools/build runs it): a catalog it would have to parse, with
// no pre-parsed form or a stale one, is refused with what to do.
func TestLoadCheckedWithoutYAML(t *testing.T) {
	data, err := os.ReadFile(shippedCatalog)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, pre := range []string{"", `{"source_sha256": "made from another catalog", "catalog": {"services": []}}`} {
		if pre != "" {
			if err := os.WriteFile(path+PreparsedSuffix, []byte(pre), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := LoadChecked(path)
		if err == nil || !strings.Contains(err.Error(), "reads the catalog pre-parsed only") || !strings.Contains(err.Error(), "make build") {
			t.Errorf("pre-parsed form %q: error %v, want one saying to build the bundles", pre, err)
		}
	}
}
