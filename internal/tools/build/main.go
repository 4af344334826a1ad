// Command build makes the bundles of the broker's Lambda functions, which
// the CDK stack deploys (provided.al2023 on arm64):
//
//	dist/api/bootstrap     dist/api/catalog.yaml.json     dist/api/deploy.json     dist/api/<templates>     dist/api.zip
//	dist/worker/bootstrap  dist/worker/catalog.yaml.json  dist/worker/deploy.json  dist/worker/<templates>  dist/worker.zip
//	dist/dbuser/bootstrap  dist/dbuser/catalog.yaml.json  dist/dbuser/deploy.json  dist/dbuser/<templates>  dist/dbuser.zip
//	dist/cacheuser/bootstrap  dist/cacheuser/catalog.yaml.json  dist/cacheuser/deploy.json  dist/cacheuser/<templates>  dist/cacheuser.zip
//
// Each bootstrap is cross-compiled (for -arch, default arm64: Lambda's; the
// sandbox builds for the machine it runs on) with CGO off and
// -tags lambda.norpc -trimpath -buildvcs=false -ldflags='-s -w', and the
// tags that leave out the drivers the catalog names in no plan
// (drivers.WithoutTags), the S3 client when no template is over
// CloudFormation's body limit (WithoutS3Tag), the STS and Secrets Manager
// clients when the manifest grants no role to assume (WithoutRolesTag),
// and yaml.v3 from the api when
// every file it reads is bundled pre-parsed, and from the worker when
// besides the subset reader reads every template as yaml.v3 does
// (WithoutYAMLTag); catalog.yaml.json is the catalog
// given, pre-parsed (catalog.Preparse: its values, and the digest of the
// YAML they were read from; the YAML itself, which no function reads, is
// not bundled), and beside it, at the same path relative to it, is every file its
// plans' driver settings read (drivers.Files: the CloudFormation templates),
// since the functions load the catalog from their own folder; and
// <template>.json each template's values (cloudformation.Preparse), which the
// functions read rather than parse the YAML at start; deploy.json
// is the catalog's deploy.Manifest (drivers.Manifest: those files, and
// what each driver the catalog uses needs of the stack), which the CDK
// stack reads to grant and set exactly that. The zips are
// written with archive/zip (subfolders included, entries in name order,
// bootstrap mode 0755, fixed timestamps, so that the same inputs give the
// same bytes). It prints each zip's size and fails if one reaches
// MaxZipBytes. Then it reports what the catalog's templates need that the
// CloudFormation service role lacks (RoleReport), before a first deploy.
// Before all that it checks and writes the catalog's lock file
// (LockVersions): a template changed under the same version fails it.
// Run it from the repository's root:
//
//	go run ./internal/tools/build [-out dist] [-catalog catalog.yaml] [-arch arm64] [-zip=false]
package main

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/serverless-osb/broker/infra/servicerole"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/cfnregistry"
	"github.com/serverless-osb/broker/internal/dbusers"
	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/drivers"
	"github.com/serverless-osb/broker/internal/drivers/cloudformation"
)

// Functions are the Lambda functions, each built from ./functions/<name>.
var Functions = []string{"api", "worker", "dbuser", "cacheuser"}

// MaxZipBytes is the size a bundle must stay under (10 MB): far below
// Lambda's 50 MB limit for a direct upload, it catches a dependency that
// bloats the binary.
const MaxZipBytes = 10_000_000

// WithoutYAMLTag builds a bootstrap that reads the catalog and its
// templates pre-parsed only (catalog.Preparse, cloudformation.Preparse),
// without yaml.v3: the api's, when every file it reads has its pre-parsed
// form in the bundle.
const WithoutYAMLTag = "osb_without_yaml"

// WithoutS3Tag builds a bootstrap without the S3 client, through which the
// CloudFormation driver hands over a template larger than
// cloudformation.MaxTemplateBody: when no file of the catalog is.
const WithoutS3Tag = "osb_without_s3"

// WithoutRolesTag builds a bootstrap without the STS and Secrets Manager
// clients, through which the CloudFormation driver assumes the roles of
// a plan's placement: when the manifest grants no function sts:AssumeRole.
const WithoutRolesTag = "osb_without_roles"

// grantsAssumeRole says whether a driver of m declares sts:AssumeRole for
// a function.
func grantsAssumeRole(m deploy.Manifest) bool {
	for _, d := range m.Drivers {
		for _, s := range d.Needs.Statements {
			if slices.Contains(s.Actions, "sts:AssumeRole") {
				return true
			}
		}
	}
	return false
}

// Target is the platform the bundles are built for.
type Target struct{ GOOS, GOARCH string }

// Lambda is the platform the CDK stack deploys on.
var Lambda = Target{GOOS: "linux", GOARCH: "arm64"}

// The names of a bundle's own files, which a catalog's files may not take.
const (
	bootstrapName = "bootstrap"
	catalogName   = "catalog.yaml"
	preparsedName = catalogName + catalog.PreparsedSuffix
	manifestName  = deploy.ManifestName
)

func main() {
	c := Config{Root: ".", Target: Lambda}
	flag.StringVar(&c.Out, "out", "dist", "the folder to write the bundles in")
	flag.StringVar(&c.Catalog, "catalog", "catalog.yaml", "the catalog to bundle, with the files its driver settings read")
	flag.StringVar(&c.Target.GOARCH, "arch", Lambda.GOARCH, "the architecture (GOARCH) to build for: the stack's, or the sandbox's machine")
	zips := flag.Bool("zip", true, "write each function's zip beside its folder (the sandbox, which runs the folders, says -zip=false)")
	flag.Parse()
	c.NoZip = !*zips
	if err := LockVersions(os.Stdout, c.Catalog); err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
	sizes, err := Build(c)
	for _, s := range sizes {
		fmt.Printf("%-20s %8d bytes (%.1f MB)\n", s.Path, s.Bytes, float64(s.Bytes)/1e6)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
	// A report, not a failure: the operator may grant what is missing with
	// serviceRolePolicyArns, managed policies the build cannot read.
	if err := RoleReport(os.Stdout, c.Catalog); err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
}

// LockVersions checks the catalog at path against its lock file (a plan
// whose templates or fixed parameters changed under the same
// maintenance_info version fails the build, naming the plan) and writes
// the lock of the plans as they are now (drivers.WriteLock).
func LockVersions(w io.Writer, path string) error {
	cat, err := catalog.Load(path)
	if err != nil {
		return err
	}
	lockPath, err := drivers.WriteLock(cat, path)
	if err != nil {
		return err
	}
	if lockPath != "" {
		fmt.Fprintf(w, "versions: %s records each plan's maintenance_info version and the digest of its templates\n", lockPath)
	}
	return nil
}

// RoleReport writes to w what the templates of the catalog at path need
// that the CloudFormation service role's own policy lacks (the handlers'
// actions of internal/cfnregistry against infra/servicerole), and the
// types it has no registry data for. It fails only when it cannot read the
// catalog: what it finds may be granted by the policies the operator
// attaches with serviceRolePolicyArns, which it cannot see.
func RoleReport(w io.Writer, path string) error {
	files, err := CatalogFiles(path)
	if err != nil {
		return err
	}
	resources, err := cloudformation.TemplateResources(filepath.Dir(path), files)
	if err != nil {
		return err
	}
	policy := servicerole.Policy(servicerole.Grants("osb", "the boundary"))
	r, err := cfnregistry.Check(resources, policy, servicerole.Unused, slices.Concat(servicerole.Refused, servicerole.Withheld))
	if err != nil {
		return err
	}
	if len(resources) == 0 {
		fmt.Fprintf(w, "service role: %s names no CloudFormation template\n", path)
		return nil
	}
	if !r.Problems() && len(r.Unknown) == 0 {
		fmt.Fprintf(w, "service role: it grants every action the %d resources of %s's templates need\n", len(resources), path)
		return nil
	}
	fmt.Fprintf(w, "service role: %s's templates need what its own policy does not grant; attach a managed policy that grants it with -c serviceRolePolicyArns=… (infra/README.md):\n", path)
	for _, m := range r.Missing {
		fmt.Fprintf(w, "  missing %s\n", m)
	}
	for _, u := range r.SetUnused {
		fmt.Fprintf(w, "  missing %s: %s sets %s\n", u.Action, u.Resource, u.Property)
	}
	for _, u := range r.Unknown {
		fmt.Fprintf(w, "  no registry data for type %s (%s); check its schema (aws cloudformation describe-type --type RESOURCE --type-name %s) and add it to internal/cfnregistry/schemas as %s (SOURCE.md says how)\n",
			u.Type, u, u.Type, cfnregistry.FileName(u.Type))
	}
	return nil
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
	// NoZip writes the folders alone, for a caller that runs the
	// bootstraps where they are (the sandbox, this package's tests):
	// the zips are what the stack uploads, and deflating the four
	// bootstraps is most of a build's time once the compiler's cache is
	// warm (and ten times that in a test binary built with -race).
	NoZip bool
	// Catalog is the catalog file to bundle, as catalog.yaml.
	Catalog string
	Target  Target
	// Manifest returns the catalog's manifest: the files to bundle beside
	// the catalog, relative to the catalog's folder, and what its drivers
	// need of the stack. Nil means the drivers' (CatalogManifest).
	Manifest func(catalogPath string) (deploy.Manifest, error)
}

// CatalogManifest loads the catalog at path and returns its manifest
// (drivers.Manifest).
func CatalogManifest(path string) (deploy.Manifest, error) {
	cat, err := catalog.Load(path)
	if err != nil {
		return deploy.Manifest{}, err
	}
	return drivers.Manifest(cat)
}

// CatalogFiles loads the catalog at path and returns the files its plans'
// driver settings read (drivers.Files), relative to its folder.
func CatalogFiles(path string) ([]string, error) {
	cat, err := catalog.Load(path)
	if err != nil {
		return nil, err
	}
	return drivers.Files(cat)
}

// Build compiles every function for c.Target and writes its folder and
// zip under c.Out (the folder alone with c.NoZip). It returns the sizes
// of the zips written, and an error naming every zip of MaxZipBytes or
// more.
func Build(c Config) ([]Size, error) {
	out := c.Out
	catalogText, err := os.ReadFile(c.Catalog)
	if err != nil {
		return nil, err
	}
	manifest := c.Manifest
	if manifest == nil {
		manifest = CatalogManifest
	}
	m, err := manifest(c.Catalog)
	if err == nil {
		err = m.Check()
	}
	if err != nil {
		return nil, fmt.Errorf("the manifest of catalog %s: %w", c.Catalog, err)
	}
	files, err := readFiles(filepath.Dir(c.Catalog), m.Files)
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", c.Catalog, err)
	}
	// The functions read each template's values from its pre-parsed form
	// rather than parse the YAML at start (cloudformation.Preparse).
	allPreparsed, anyOverBody, subsetReads := true, false, true
	for _, p := range slices.Sorted(maps.Keys(files)) {
		anyOverBody = anyOverBody || len(files[p]) > cloudformation.MaxTemplateBody
		subsetReads = subsetReads && cloudformation.ReadsWithoutYAML(files[p])
		pre, err := cloudformation.Preparse(files[p])
		if _, taken := files[p+cloudformation.PreparsedSuffix]; err != nil || pre == nil || taken {
			allPreparsed = false
			continue
		}
		files[p+cloudformation.PreparsedSuffix] = pre
	}
	// The functions read the catalog's values from its pre-parsed form
	// alone (catalog.LoadChecked), so the YAML is not bundled: it was 10.6
	// KB of each zip. The pre-parsed form records the YAML's digest, which
	// the stack's synthesis checks against the catalog it deploys.
	if files[preparsedName], err = catalog.Preparse(catalogName, catalogText); err != nil {
		return nil, fmt.Errorf("catalog %s: %w", c.Catalog, err)
	}
	if files[manifestName], err = m.Encode(); err != nil {
		return nil, err
	}
	// The bootstraps leave out the drivers the catalog names in no plan,
	// and the SDK clients only those call.
	var used []string
	for _, d := range m.Drivers {
		used = append(used, d.Name)
	}
	tags := append([]string{"lambda.norpc"}, drivers.WithoutTags(used)...)
	// No template goes through S3 when each is within CloudFormation's
	// body limit: the bootstraps leave the S3 client out (0.3 MB of the
	// worker's zip), and refuse a larger template at start.
	if !anyOverBody {
		tags = append(tags, WithoutS3Tag)
	}
	// No function assumes a role when the manifest grants none: no plan
	// places its stacks through one (cloudformation.Needs). The bootstraps
	// leave out STS and Secrets Manager (0.12 MB of worker.zip), and
	// refuse a role at start.
	if !grantsAssumeRole(m) {
		tags = append(tags, WithoutRolesTag)
	}
	// The api reads every file pre-parsed when each has a pre-parsed form:
	// its bootstrap is built without yaml.v3 (0.11 MB of code), and
	// refuses a YAML it would have to parse. The worker reads besides the
	// template a stack runs, as written (their short-form tags), to judge
	// an update's change set: built without yaml.v3 it reads it with the
	// subset reader (0.09 MB of worker.zip less), so only when that reads
	// every template of the catalog as yaml.v3 does
	// (cloudformation.ReadsWithoutYAML), or the catalog uses no
	// CloudFormation.
	yamlFree := map[string]bool{"api": allPreparsed, "worker": allPreparsed && (subsetReads || !slices.Contains(used, "cloudformation"))}
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
		bootstrap := filepath.Join(dir, bootstrapName)
		fnTags := tags
		if yamlFree[fn] {
			fnTags = append(slices.Clip(tags), WithoutYAMLTag)
		}
		if err := compile(c.Root, "./functions/"+fn, bootstrap, c.Target, fnTags); err != nil {
			return sizes, fmt.Errorf("%s: %w", fn, err)
		}
		if err := writeFiles(dir, files); err != nil {
			return sizes, fmt.Errorf("%s: %w", fn, err)
		}
		if fn == "dbuser" {
			if err := bundleRDSCertificates(c.Root, dir); err != nil {
				return sizes, err
			}
		}
		if c.NoZip {
			continue
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

// RDSBundleSource is where make rds-ca-bundle puts the RDS certificate
// bundle, which the dbuser function verifies database servers with.
const RDSBundleSource = "functions/dbuser/" + dbusers.BundleFile

// bundleRDSCertificates copies the RDS certificate bundle, when fetched,
// beside the dbuser function's bootstrap. Without it the function is
// built all the same (a catalog without networks never calls it), and
// refuses to connect to any database (dbusers.ErrNoBundle).
func bundleRDSCertificates(root, dir string) error {
	pem, err := os.ReadFile(filepath.Join(root, RDSBundleSource))
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "build: %s is missing (make rds-ca-bundle fetches it): the dbuser function will refuse every database\n", RDSBundleSource)
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := dbusers.VerifyingTLS(pem); err != nil {
		return fmt.Errorf("%s: %w", RDSBundleSource, err)
	}
	return os.WriteFile(filepath.Join(dir, dbusers.BundleFile), pem, 0o644)
}

// BundlePath is where in a bundle the catalog's file name goes: the same
// path relative to the bundle's root as name is to the catalog's folder. It
// refuses a name that is absolute or leaves the catalog's folder, and one
// that would replace the bundle's own bootstrap, catalog.yaml or
// deploy.json.
func BundlePath(name string) (string, error) {
	p := filepath.FromSlash(name)
	if filepath.IsAbs(p) || !filepath.IsLocal(p) {
		return "", fmt.Errorf("file %q: a catalog's files must be under its folder, named by a relative path that stays in it", name)
	}
	p = filepath.Clean(p)
	if top, _, _ := strings.Cut(filepath.ToSlash(p), "/"); top == bootstrapName || top == catalogName || top == preparsedName || top == manifestName {
		return "", fmt.Errorf("file %q: it would collide with the bundle's own %s", name, top)
	}
	return p, nil
}

// readFiles reads each named file from dir, by its bundle path.
func readFiles(dir string, names []string) (map[string][]byte, error) {
	files := map[string][]byte{}
	var errs []error
	for _, name := range names {
		p, err := BundlePath(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		files[p] = data
	}
	return files, errors.Join(errs...)
}

// writeFiles writes files (by bundle path) under dir, making their folders.
func writeFiles(dir string, files map[string][]byte) error {
	for p, data := range files {
		path := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// compile builds pkg (relative to root) into bin for target with tags,
// as Lambda runs it.
func compile(root, pkg, bin string, target Target, tags []string) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-tags", strings.Join(tags, ","), "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", bin, pkg)
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

// WriteZip writes the files under dir, its subfolders' too, into a zip at
// path, each named by its slash-separated path relative to dir, in
// lexical order (folders get no entry of their own), and returns the zip's
// size. The top-level bootstrap is executable (0755); everything else is
// 0644. Anything but regular files and folders (a symbolic link) is refused.
func WriteZip(path, dir string) (int64, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	// The smallest deflate: the bundle is written once per build and
	// downloaded at every cold start's code fetch.
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(w, flate.BestCompression)
	})
	err := filepath.WalkDir(dir, func(file string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, file)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if !e.Type().IsRegular() {
			return fmt.Errorf("%s: %s is not a regular file", dir, name)
		}
		mode := fs.FileMode(0o644)
		if name == bootstrapName {
			mode = 0o755
		}
		h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: zipTime}
		h.SetMode(mode)
		w, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	})
	if err != nil {
		return 0, err
	}
	if err := zw.Close(); err != nil {
		return 0, err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return 0, err
	}
	return int64(buf.Len()), nil
}
