// Command build makes the bundles of the broker's Lambda functions, which
// the CDK stack deploys (provided.al2023 on arm64):
//
//	dist/api/bootstrap     dist/api/catalog.yaml     dist/api.zip
//	dist/worker/bootstrap  dist/worker/catalog.yaml  dist/worker.zip
//
// Each bootstrap is cross-compiled with CGO off and
// -tags lambda.norpc -trimpath -ldflags='-s -w'; catalog.yaml is the
// repository's. The zips are written with archive/zip (bootstrap mode 0755,
// fixed timestamps, so that the same inputs give the same bytes). It prints
// each zip's size and fails if one reaches MaxZipBytes. Run it from the
// repository's root:
//
//	go run ./internal/tools/build [-out dist] [-catalog catalog.yaml]
package main

import (
	"archive/zip"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Functions are the Lambda functions, each built from ./functions/<name>.
var Functions = []string{"api", "worker"}

// MaxZipBytes is the size a bundle must stay under (10 MB): far below
// Lambda's 50 MB limit for a direct upload, it catches a dependency that
// bloats the binary.
const MaxZipBytes = 10_000_000

// Target is the platform the bundles are built for.
type Target struct{ GOOS, GOARCH string }

// Lambda is the platform the CDK stack deploys on.
var Lambda = Target{GOOS: "linux", GOARCH: "arm64"}

func main() {
	c := Config{Root: ".", Target: Lambda}
	flag.StringVar(&c.Out, "out", "dist", "the folder to write the bundles in")
	flag.StringVar(&c.Catalog, "catalog", "catalog.yaml", "the catalog to bundle")
	flag.Parse()
	sizes, err := Build(c)
	for _, s := range sizes {
		fmt.Printf("%-20s %8d bytes (%.1f MB)\n", s.Path, s.Bytes, float64(s.Bytes)/1e6)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
}

// Size is how large a zip came out.
type Size struct {
	Path  string
	Bytes int64
}

// Config says what to build and where.
type Config struct {
	// Root is the repository's root, where ./functions/<name> are.
	Root string
	// Out receives <name>/ and <name>.zip for every function.
	Out string
	// Catalog is the catalog.yaml to bundle.
	Catalog string
	Target  Target
}

// Build compiles every function for c.Target and writes its folder and
// zip under c.Out. It returns the sizes of the zips written, and an error
// naming every zip of MaxZipBytes or more.
func Build(c Config) ([]Size, error) {
	out := c.Out
	catalog, err := os.ReadFile(c.Catalog)
	if err != nil {
		return nil, err
	}
	var sizes []Size
	var tooLarge []error
	for _, fn := range Functions {
		dir := filepath.Join(out, fn)
		if err := os.RemoveAll(dir); err != nil {
			return sizes, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return sizes, err
		}
		bootstrap := filepath.Join(dir, "bootstrap")
		if err := compile(c.Root, "./functions/"+fn, bootstrap, c.Target); err != nil {
			return sizes, fmt.Errorf("%s: %w", fn, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "catalog.yaml"), catalog, 0o644); err != nil {
			return sizes, err
		}
		zipPath := filepath.Join(out, fn+".zip")
		n, err := WriteZip(zipPath, dir)
		if err != nil {
			return sizes, fmt.Errorf("%s: %w", fn, err)
		}
		sizes = append(sizes, Size{Path: zipPath, Bytes: n})
		if n >= MaxZipBytes {
			tooLarge = append(tooLarge, fmt.Errorf("%s is %d bytes: a bundle must stay under %d", zipPath, n, MaxZipBytes))
		}
	}
	return sizes, errors.Join(tooLarge...)
}

// compile builds pkg (relative to root) into bin for target, as Lambda
// runs it.
func compile(root, pkg, bin string, target Target) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", bin, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS="+target.GOOS, "GOARCH="+target.GOARCH, "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = os.Stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, stderr.Bytes())
	}
	return nil
}

// zipTime is every entry's modification time: a fixed one keeps the zip
// the same from build to build.
var zipTime = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// WriteZip writes the files of dir (not its subfolders: a bundle has
// none) into a zip at path, in name order, and returns its size. The
// bootstrap is executable (0755); everything else is 0644.
func WriteZip(path, dir string) (int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries { // ReadDir sorts by name
		if !e.Type().IsRegular() {
			return 0, fmt.Errorf("%s: %s is not a regular file", dir, e.Name())
		}
		mode := fs.FileMode(0o644)
		if e.Name() == "bootstrap" {
			mode = 0o755
		}
		h := &zip.FileHeader{Name: e.Name(), Method: zip.Deflate, Modified: zipTime}
		h.SetMode(mode)
		w, err := zw.CreateHeader(h)
		if err != nil {
			return 0, err
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(w, f)
		f.Close()
		if err != nil {
			return 0, err
		}
	}
	if err := zw.Close(); err != nil {
		return 0, err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return 0, err
	}
	return int64(buf.Len()), nil
}
