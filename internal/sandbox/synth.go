package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Synthesis says what to synthesize, as `make synth` does.
type Synthesis struct {
	// Root is the repository's root (cdk.json, infra/_cli).
	Root string
	// Catalog is the catalog the functions bundle (make synth's CATALOG).
	Catalog string
	// Out receives dist/ (the bundles) and cdk.out/.
	Out string
	// Arch is the bundles' architecture (default Lambda's, arm64); a
	// sandbox's machine's spares the sandbox a build.
	Arch string
}

// Synthesize builds the functions' bundles with the catalog and synthesizes
// the stack with them, offline, with the CDK CLI that `make synth` installs
// (infra/_cli), and returns the template's path.
func Synthesize(ctx context.Context, s Synthesis) (string, error) {
	root, err := filepath.Abs(s.Root)
	if err != nil {
		return "", err
	}
	cdk := filepath.Join(root, "infra", "_cli", "node_modules", ".bin", "cdk")
	if _, err := os.Stat(cdk); err != nil {
		return "", fmt.Errorf("the CDK CLI is missing (%s): run `npm ci --prefix infra/_cli` or `make synth`, which installs it", cdk)
	}
	out, err := filepath.Abs(s.Out)
	if err != nil {
		return "", err
	}
	catalog, err := filepath.Abs(s.Catalog)
	if err != nil {
		return "", err
	}
	dist := filepath.Join(out, "dist")
	args := []string{"run", "./internal/tools/build", "-catalog", catalog, "-out", dist}
	if s.Arch != "" {
		args = append(args, "-arch", s.Arch)
	}
	if err := run(ctx, root, nil, "go", args...); err != nil {
		return "", err
	}
	assembly := filepath.Join(out, "cdk.out")
	// Every bundle the build wrote: the stack deploys the dbuser and
	// cacheuser functions when the catalog needs them.
	if err := run(ctx, root, []string{"CDK_DISABLE_CLI_TELEMETRY=true"}, cdk, "synth", "-q", "-o", assembly,
		"-c", "catalog="+catalog, "-c", "apiCode="+filepath.Join(dist, "api"), "-c", "workerCode="+filepath.Join(dist, "worker"),
		"-c", "databaseUserCode="+filepath.Join(dist, "dbuser"), "-c", "cacheUserCode="+filepath.Join(dist, "cacheuser")); err != nil {
		return "", err
	}
	matches, err := filepath.Glob(filepath.Join(assembly, "*.template.json"))
	if err != nil || len(matches) != 1 {
		return "", fmt.Errorf("cdk synth wrote %d templates in %s, want 1", len(matches), assembly)
	}
	return matches[0], nil
}

func run(ctx context.Context, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %v: %w\n%s", name, args, err, out)
	}
	return nil
}
