package infra

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/waittest"
)

// TestTheCDKRuntimeEndsQuietly runs a CDK program through RunCDK as cdk
// synth runs the app (built without the race detector, as make synth and
// make sandbox run it), several times: jsii.Close's race printed "Runtime
// process exited abnormally: waitid: no child processes" in about one run
// in three. No run may print it, and each leaves its TMPDIR empty (the
// runtime's copy of itself removed, the Node.js kernel's own files once it
// exits).
func TestTheCDKRuntimeEndsQuietly(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "cdkexit")
	if out, err := exec.Command("go", "build", "-o", bin, "./infra/testdata/cdkexit").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for i := range 8 {
		tmp, out := t.TempDir(), t.TempDir()
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "CDK_OUTDIR="+out)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, stderr.String())
		}
		if strings.Contains(stderr.String(), "exited abnormally") {
			t.Errorf("run %d said on stderr:\n%s", i, stderr.String())
		}
		if _, err := os.Stat(filepath.Join(out, "Small.template.json")); err != nil {
			t.Errorf("run %d synthesized no template: %v", i, err)
		}
		waittest.Until(t, func() error {
			if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) > 0 {
				return fmt.Errorf("run %d left %v in its TMPDIR", i, left)
			}
			return nil
		})
	}
}
