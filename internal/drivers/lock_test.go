package drivers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/catalog"
)

// copyServices copies the shipped services (catalog, templates and lock
// file) to a folder of the test's, and returns its catalog's path.
func copyServices(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../../services")); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "catalog.yaml")
}

func edit(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func load(t *testing.T, path string) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func TestLock(t *testing.T) {
	t.Run("the shipped catalog's lock file is current", func(t *testing.T) {
		path := copyServices(t)
		before, _ := os.ReadFile(LockPath(path))
		if _, err := WriteLock(load(t, path), path); err != nil {
			t.Fatal(err)
		}
		if after, _ := os.ReadFile(LockPath(path)); string(after) != string(before) {
			t.Errorf("make build rewrites services/catalog.lock.json: commit it as\n%s", after)
		}
	})

	const refused = "plan standard of aws-s3-bucket (66facbde-e025-420b-99d7-41ac8c6f0db8): its templates or fixed parameters changed, but it still has maintenance_info version \"1.0.0\""
	t.Run("a template changed under the same version fails make build and start, naming the plan", func(t *testing.T) {
		path := copyServices(t)
		edit(t, filepath.Join(filepath.Dir(path), "s3-bucket/instance.yaml"), "Resources:", "# a new encryption default\nResources:")
		locked, _ := os.ReadFile(LockPath(path))
		_, err := WriteLock(load(t, path), path)
		if err == nil || !strings.Contains(err.Error(), refused) || !strings.Contains(err.Error(), "Raise the plan's maintenance_info version and describe the change") {
			t.Fatalf("make build: %v", err)
		}
		if now, _ := os.ReadFile(LockPath(path)); string(now) != string(locked) {
			t.Error("a refused build rewrote the lock file")
		}
		if _, err := Build(t.Context(), load(t, path), Env{}); err == nil || !strings.Contains(err.Error(), refused) {
			t.Fatalf("start: %v", err)
		}
	})

	t.Run("a fixed parameter changed under the same version is refused too", func(t *testing.T) {
		path := copyServices(t)
		edit(t, path, "sqs-queue/binding.yaml\n          parameters:\n            FifoQueue: \"false\"",
			"sqs-queue/binding.yaml\n          parameters:\n            FifoQueue: \"true\"")
		if _, err := WriteLock(load(t, path), path); err == nil || !strings.Contains(err.Error(), "plan standard of aws-sqs-queue") {
			t.Fatalf("make build: %v", err)
		}
	})

	t.Run("a raised version records the new digest", func(t *testing.T) {
		path := copyServices(t)
		edit(t, filepath.Join(filepath.Dir(path), "s3-bucket/instance.yaml"), "Resources:", "# a new encryption default\nResources:")
		edit(t, path, "version: \"1.0.0\"\n          description: First release of the S3 bucket template.",
			"version: \"1.1.0\"\n          description: Buckets encrypt with the new default.")
		if _, err := WriteLock(load(t, path), path); err != nil {
			t.Fatal(err)
		}
		lock, _, err := ReadLock(LockPath(path))
		if err != nil || lock.Plans["66facbde-e025-420b-99d7-41ac8c6f0db8"].Version != "1.1.0" {
			t.Fatalf("lock %+v %v", lock.Plans["66facbde-e025-420b-99d7-41ac8c6f0db8"], err)
		}
		// Start checks the lock before it builds any driver.
		if _, err := Build(t.Context(), load(t, path), Env{Stacks: RunStacks}); err == nil || !strings.Contains(err.Error(), "no AWS configuration") {
			t.Fatalf("start: %v", err)
		}
	})
}
