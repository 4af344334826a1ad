package infra

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/drivers"
)

// broker is the stack as cdk.json configures it (same context, same paths,
// from the repository root), except that its function assets are dummies
// in a temporary directory. Synthesizing takes seconds, so the tests share
// it.
var broker struct {
	// context is the app's context: cdk.json's and the assets'.
	context  map[string]any
	stack    awscdk.Stack
	template assertions.Template
	// json is the template as a Go value, for checks the Match API cannot
	// express, such as "no statement but X-Ray's grants any resource".
	json map[string]any
}

// repoRoot is where the CDK CLI runs the app from.
const repoRoot = ".."

func TestMain(m *testing.M) {
	os.Exit(RunCDK(func() int {
		code, err := runTests(m)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return code
	}))
}

func runTests(m *testing.M) (code int, err error) {
	// A failed synthesis panics (jsii); say so rather than print a trace.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("synthesize the stack: %v", r)
		}
	}()
	tmp, err := os.MkdirTemp("", "infra-test-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chdir(repoRoot); err != nil {
		return 0, err
	}
	context, err := cdkContext()
	if err != nil {
		return 0, err
	}
	// Keep error annotations (cdk-nag's findings) out of the validation
	// report, which would fail the synthesis at the first one: the tests
	// read and list them (TestStackPassesCDKNag). cdk synth keeps the flag.
	context["@aws-cdk/core:annotationsInValidationReport"] = false
	catalogPath, _ := context[ContextCatalog].(string)
	// The shipped catalog's Valkey plans get the cacheuser function.
	for key, name := range map[string]string{ContextAPICode: "api", ContextWorkerCode: "worker", ContextCacheUserCode: "cacheuser"} {
		dir := filepath.Join(tmp, name)
		if err := dummyAsset(dir, catalogPath); err != nil {
			return 0, err
		}
		context[key] = dir
	}
	broker.context = context
	app := awscdk.NewApp(&awscdk.AppProps{Context: &context, Outdir: jsii.String(filepath.Join(tmp, "cdk.out"))})
	props, err := PropsFromContext(app.Node())
	if err != nil {
		return 0, err
	}
	broker.stack, err = NewBrokerStack(app, "ServerlessOsb", &props)
	if err != nil {
		return 0, err
	}
	broker.template = assertions.Template_FromStack(broker.stack, nil)
	broker.json = *broker.template.ToJSON()
	return m.Run(), nil
}

// cdkContext is the "context" of cdk.json.
func cdkContext() (map[string]any, error) {
	text, err := os.ReadFile("cdk.json")
	if err != nil {
		return nil, err
	}
	var cdk struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(text, &cdk); err != nil {
		return nil, fmt.Errorf("cdk.json: %w", err)
	}
	return cdk.Context, nil
}

// dummyAsset makes dir a function asset: a bootstrap that does nothing, a
// copy of catalog and, beside it, of the files its driver settings read,
// and the catalog's manifest (deploy.json), as make build bundles them.
func dummyAsset(dir, catalog string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bootstrap"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		return err
	}
	m, err := catalogManifest(catalog)
	if err != nil {
		return err
	}
	manifest, err := m.Encode()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, deploy.ManifestName), manifest, 0o644); err != nil {
		return err
	}
	files := m.Files
	copies := map[string]string{filepath.Base(catalog): "catalog.yaml"}
	for _, f := range files {
		copies[filepath.FromSlash(f)] = filepath.FromSlash(f)
	}
	for from, to := range copies {
		text, err := os.ReadFile(filepath.Join(filepath.Dir(catalog), from))
		if err != nil {
			return err
		}
		to = filepath.Join(dir, to)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(to, text, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// catalogManifest is what make build writes beside the catalog at path
// (drivers.Manifest): the tests ask the drivers, which the stack does not.
func catalogManifest(path string) (deploy.Manifest, error) {
	cat, err := catalog.Load(path)
	if err != nil {
		return deploy.Manifest{}, err
	}
	return drivers.Manifest(cat)
}

// catalogFiles lists the files the driver settings of the catalog at path
// read, relative to its folder: what make build bundles beside it.
func catalogFiles(path string) ([]string, error) {
	m, err := catalogManifest(path)
	return m.Files, err
}

// check runs an assertions call, which panics when it fails, and reports
// the failure as the test's.
func check(t *testing.T, assertion func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%v", r)
		}
	}()
	assertion()
}
