package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/serverless-osb/broker/internal/catalog"
)

// TestAssetCatalogOfABundleWithoutYAML: make build bundles the catalog
// pre-parsed alone; the catalog the sandbox rebuilds such an asset from
// is the one it was built from, with the asset's templates beside it.
func TestAssetCatalogOfABundleWithoutYAML(t *testing.T) {
	services := filepath.Join("..", "..", "services")
	data, err := os.ReadFile(filepath.Join(services, "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pre, err := catalog.Preparse("catalog.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	template, err := os.ReadFile(filepath.Join(services, "s3-bucket", "instance.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	asset := t.TempDir()
	for name, text := range map[string][]byte{"bootstrap": []byte("#!/bin/sh\n"), "catalog.yaml.json": pre, "s3-bucket/instance.yaml": template} {
		path := filepath.Join(asset, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, text, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src := filepath.Join(t.TempDir(), "src")
	path, err := assetCatalog(asset, src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := catalog.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := catalog.Load(filepath.Join(services, "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.JSON(), want.JSON()) {
		t.Error("the catalog rebuilt from the asset is not the one it was built from")
	}
	if text, err := os.ReadFile(filepath.Join(filepath.Dir(path), "s3-bucket", "instance.yaml")); err != nil || !bytes.Equal(text, template) {
		t.Errorf("the asset's template is not beside the catalog: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "bootstrap")); err == nil {
		t.Error("the asset's bootstrap is beside the catalog the build reads")
	}

	if err := os.WriteFile(filepath.Join(asset, "catalog.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if path, err := assetCatalog(asset, src); err != nil || path != filepath.Join(asset, "catalog.yaml") {
		t.Errorf("an asset with its YAML: %s, %v; want its catalog.yaml", path, err)
	}
}
