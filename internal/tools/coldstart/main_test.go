package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Package init is paid on every cold start of a function, before its
// first answer. It allocated 3.0 MB on f925401, 1.7 MB of it the JSON
// Schema library compiling every draft's metaschema; the peer's is 2.1 MB.
// Bytes, not time: what init allocates is the same from run to run.
func TestPackageInitAllocatesNoMoreThanThePeers(t *testing.T) {
	for _, fn := range []string{"api", "worker"} {
		t.Run(fn, func(t *testing.T) {
			bundle := t.TempDir()
			cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-o", filepath.Join(bundle, "bootstrap"), "./functions/"+fn)
			cmd.Dir = filepath.Join("..", "..", "..")
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, out)
			}
			it, err := initTrace(bundle)
			if err != nil {
				t.Fatal(err)
			}
			if it.bytes > peerInitBytes {
				t.Errorf("package init allocates %d bytes, more than the peer's %.0f (largest: %s)", it.bytes, peerInitBytes, it.top(3))
			}
			for _, p := range it.packages {
				if strings.HasSuffix(p.name, "/jsonschema") && p.bytes > 64<<10 {
					t.Errorf("%s's init allocates %d bytes: it compiles metaschemas before any schema asks for them", p.name, p.bytes)
				}
				// The CloudFormation driver's two secret patterns, with a
				// counted repetition of 512, allocated 0.7 MB here on
				// 7b0e725 (half a millisecond of every cold start).
				if p.bytes > 256<<10 {
					t.Errorf("%s's init allocates %d bytes: more than any package should before the first request (a regexp with a large counted repetition?)", p.name, p.bytes)
				}
				// Ours compile their patterns on first use: at init, the
				// catalog's, the manifest's and the CloudFormation
				// driver's were 0.3 MB and 0.3 ms of every cold start on
				// d011d57, for settings most starts never check.
				if strings.HasPrefix(p.name, "github.com/serverless-osb/") && p.bytes > 64<<10 {
					t.Errorf("%s's init allocates %d bytes, over 64 KiB: does it compile a pattern that could wait for its first use?", p.name, p.bytes)
				}
			}
		})
	}
}
